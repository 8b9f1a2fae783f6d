"""What every asyncio client shares: config, the shared `ClientInstance`, start/close plumbing.

`AsyncProducer`, `AsyncPushConsumer` and `AsyncPullConsumer` each hold a group and a
`ClientConfig` (built by `make_config` from the same `config=` / `instance_name=` / ACL-key
keywords), take a reference on the shared `ClientInstance` in `start()` with their group
registered in it, give both back in `close()`, and are async context managers. That plumbing was
written out once per client; it lives here so that the three cannot drift apart (e.g. one of
them forgetting to release the instance when its group is already taken). What differs per
client is a parameter: the word in the "not started" error, and how the group is registered
(`_register` / `_unregister`).
"""

from __future__ import annotations

from typing import ClassVar, Self, Unpack

from rocketlite.client.config import ClientOptions, make_config
from rocketlite.client.errors import ClientError, ClientStateError
from rocketlite.client.instance import ClientInstance, ProducerFactory
from rocketlite.protocol.bodies.heartbeat import (
    ConsumeFromWhere,
    ConsumerData,
    ConsumeType,
    MessageModel,
    SubscriptionData,
)

__all__ = ["AsyncClientBase", "AsyncConsumerBase"]


class AsyncClientBase:
    """Group, config and the shared instance of one asyncio client; subclasses write start/close."""

    kind: ClassVar[str] = "client"  # names the client in "<kind> <group> is not started"

    def __init__(self, group: str, namesrv_addr: str | None, **options: Unpack[ClientOptions]) -> None:
        self.group = group
        self.config = make_config(namesrv_addr, **options)
        self._instance: ClientInstance | None = None

    async def start(self) -> None:
        raise NotImplementedError

    async def close(self) -> None:
        raise NotImplementedError

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @property
    def instance(self) -> ClientInstance:
        if self._instance is None:
            raise ClientStateError(f"{self.kind} {self.group} is not started")
        return self._instance

    def _register(self, instance: ClientInstance) -> None:
        """Enter this client's group in `instance` (raises `ClientStateError` when it is taken)."""
        raise NotImplementedError

    async def _unregister(self, instance: ClientInstance) -> None:
        raise NotImplementedError

    async def _acquire_instance(self, producer_factory: ProducerFactory | None = None) -> ClientInstance:
        """A reference on the shared instance with the group registered; none is kept on failure.
        `producer_factory`: see `ClientInstance.acquire`."""
        instance = await ClientInstance.acquire(self.config, producer_factory)
        try:
            self._register(instance)
        except ClientError:
            await instance.release()
            raise
        return instance

    async def _release_instance(self, instance: ClientInstance) -> None:
        """Undo `_acquire_instance`: unregister the group (brokers are told), drop the reference."""
        await self._unregister(instance)
        await instance.release()


class AsyncConsumerBase(AsyncClientBase):
    """A consumer: registered as a consumer group, announcing its subscriptions in heartbeats."""

    kind = "consumer"
    consume_type: ClassVar[ConsumeType]
    message_model: MessageModel
    consume_from_where: ConsumeFromWhere

    def __init__(self, group: str, namesrv_addr: str | None, **options: Unpack[ClientOptions]) -> None:
        super().__init__(group, namesrv_addr, **options)
        self._subs: dict[str, SubscriptionData] = {}

    def _register(self, instance: ClientInstance) -> None:
        instance.register_consumer(self)

    async def _unregister(self, instance: ClientInstance) -> None:
        await instance.unregister_consumer(self.group)

    # -- ClientInstance member protocol (do_rebalance and persist_offsets are the subclass's) --
    def consumer_data(self) -> ConsumerData:
        return ConsumerData(
            group_name=self.group,
            consume_type=self.consume_type,
            message_model=self.message_model,
            consume_from_where=self.consume_from_where,
            subscription_data_set=tuple(self._subs[t] for t in sorted(self._subs)),
        )

    def subscribed_topics(self) -> list[str]:
        return list(self._subs)

    async def do_rebalance(self) -> bool:
        raise NotImplementedError

    async def persist_offsets(self) -> None:
        raise NotImplementedError
