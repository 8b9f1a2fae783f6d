"""Broker access for the `rocketmq` data source, over the Python client SDK (`rocketlite.client`).

The SDK's `AsyncPullConsumer` (no heartbeat, no auto-commit) gives routes, queue offsets and
timestamp search; its `AsyncProducer` sends batches. Two requests are made here on the SDK's
`ClientInstance` (built and parsed by `protocol.requests`) because the data source needs them in
a form the SDK does not offer:

* PULL_MESSAGE returning the *raw* body (records back to back), so `records.decode_batch` can
  decode thousands of messages at once instead of building a `MessageExt` per message. The pull
  carries its tag expression (sysFlag SUBSCRIPTION, 0x4), never suspends, never commits. This
  client builds and signs it and reads its answer's header (`PullAnswer`); the bytes travel over
  the task's own `pull_channel.PullChannel`, straight into the batch being gathered;
* QUERY_MESSAGE by unique key (UNIQ_KEY), which the idempotent sink uses to find out whether a
  chunk it is about to send was stored by an earlier attempt.

Everything is blocking: coroutines run on the SDK's shared client loop (`client.sync.shared_loop`).
`client_for` caches one `BrokerClient` per (name server, group) in a process, so the Python
workers Spark reuses across tasks keep their connections. Nothing here is pickled; readers and
writers create clients lazily where they run.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Coroutine, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Final, TypeVar

from rocketlite.client.api import build_subscription
from rocketlite.client.consumer_pull import AsyncPullConsumer
from rocketlite.client.errors import ClientError, NoRouteError, TopicNotExistError, parse_answer
from rocketlite.client.instance import CLIENT_LANGUAGE, ClientConfig, ClientInstance
from rocketlite.client.message import Message, MessageQueue, SendResult
from rocketlite.client.producer import AsyncProducer
from rocketlite.client.sync import shared_loop
from rocketlite.protocol.bodies.heartbeat import SubscriptionData
from rocketlite.protocol.requests.pull import PullStatus, build_pull, parse_pull
from rocketlite.protocol.requests.query import build_query_message, matches_key, parse_query_message
from rocketlite.protocol.requests.route import build_get_all_topics, parse_topic_list
from rocketlite.protocol.wire.command import RemotingCommand
from rocketlite.spark.offsets import QueueRef
from rocketlite.spark.pull_channel import close_channels

log = logging.getLogger("rocketlite.spark.broker_client")

T = TypeVar("T")

UNIQUE_QUERY_MAX: Final = 32


class PullOutcome:
    FOUND = "found"
    NO_NEW = "no_new"  # offset is at the queue's end
    NO_MATCH = "no_match"  # nothing matched the tags in the entries scanned; go on from next_begin
    MOVED = "moved"  # offset out of the queue's range (deleted by retention, or past the end)


_OUTCOMES: Final = {
    PullStatus.FOUND: PullOutcome.FOUND,
    PullStatus.NO_NEW_MSG: PullOutcome.NO_NEW,
    PullStatus.NO_MATCHED_MSG: PullOutcome.NO_MATCH,
    PullStatus.OFFSET_ILLEGAL: PullOutcome.MOVED,
}


@dataclass(frozen=True, slots=True)
class PullAnswer:
    """A pull's outcome from its answer's header (the body, when there is one, is read apart)."""

    outcome: str
    next_begin: int
    min_offset: int
    max_offset: int

    @classmethod
    def of(cls, response: RemotingCommand) -> PullAnswer:
        """`ResponseError` (naming the broker's code and remark) for any other answer."""
        answer = parse_answer(parse_pull, response)
        return cls(_OUTCOMES[answer.status], answer.next_begin_offset, answer.min_offset, answer.max_offset)


def _mq(ref: QueueRef) -> MessageQueue:
    return MessageQueue(ref.topic, ref.broker, ref.queue_id)


class BrokerClient:
    """Blocking broker access for one (name server, group); see the module docstring."""

    def __init__(self, name_server: str, group: str, *, timeout: float = 30.0) -> None:
        self.name_server = name_server
        self.group = group
        self.timeout = timeout
        self._loop = shared_loop()
        self._config = ClientConfig(name_server)  # instance name DEFAULT: the pid, unique per worker
        self._consumer = AsyncPullConsumer(group, config=self._config, heartbeat=False, auto_commit=False)
        self._producer: AsyncProducer | None = None
        self._producer_lock = threading.Lock()
        self._subs: dict[tuple[str, str], SubscriptionData] = {}
        self._run(self._consumer.start())

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        return self._loop.call(coro, timeout=None)

    @property
    def _instance(self) -> ClientInstance:
        return self._consumer.instance

    def close(self) -> None:
        if self._producer is not None:
            self._run(self._producer.close())
        self._run(self._consumer.close())

    # -- metadata ----------------------------------------------------------------------------
    def topics(self) -> list[str]:
        """Every topic the name server knows."""

        async def call() -> list[str]:
            response = await self._instance.invoke_namesrv(build_get_all_topics())
            return parse_answer(parse_topic_list, response)

        return self._run(call())

    def queues(self, topic: str) -> list[QueueRef]:
        """The topic's readable queues from a fresh route; none when the topic does not exist."""
        try:
            found = self._run(self._consumer.fetch_queues(topic))
        except (NoRouteError, TopicNotExistError):
            return []
        return sorted(QueueRef(mq.topic, mq.broker_name, mq.queue_id) for mq in found)

    def _each(self, refs: Iterable[QueueRef], make: Any) -> dict[QueueRef, int]:
        refs = list(refs)

        async def call() -> list[int]:
            return list(await asyncio.gather(*(make(_mq(r)) for r in refs)))

        return dict(zip(refs, self._run(call()), strict=True))

    def max_offsets(self, refs: Iterable[QueueRef]) -> dict[QueueRef, int]:
        """The next offset to be written of each queue."""
        return self._each(refs, self._consumer.get_max_offset)

    def min_offsets(self, refs: Iterable[QueueRef]) -> dict[QueueRef, int]:
        """The first offset still stored of each queue."""
        return self._each(refs, self._consumer.get_min_offset)

    def offsets_for_time(self, refs: Iterable[QueueRef], timestamp_ms: int) -> dict[QueueRef, int]:
        """SEARCH_OFFSET_BY_TIMESTAMP per queue."""

        def make(mq: MessageQueue) -> Any:
            return self._consumer.search_offset_by_timestamp(mq, timestamp_ms)

        return self._each(refs, make)

    # -- reading -----------------------------------------------------------------------------
    def broker_address(self, ref: QueueRef) -> str:
        """The address pulls of `ref` go to (the master, as `findBrokerAddressInSubscribe`)."""

        async def call() -> str:
            instance = self._instance
            addr = instance.broker_addr(ref.broker)
            if addr is None:
                await instance.update_topic_route(ref.topic)
                addr = instance.broker_addr(ref.broker)
            if addr is None:
                raise ClientError(f"broker {ref.broker} of {ref.topic} is not in the route", retriable=True)
            return addr

        return self._run(call())

    def pull_command(
        self, ref: QueueRef, offset: int, max_nums: int, expression: str = "*"
    ) -> RemotingCommand:
        """A PULL_MESSAGE of `max_nums` entries from `offset`, with its tag expression, that never
        suspends and never commits, signed as the client's other requests (see the module docstring)."""
        sub = self._subs.get((ref.topic, expression))
        if sub is None:
            sub = build_subscription(ref.topic, expression, 0)
            self._subs[(ref.topic, expression)] = sub
        cmd = build_pull(
            group=self.group,
            topic=ref.topic,
            queue_id=ref.queue_id,
            offset=offset,
            max_nums=max_nums,
            subscription=sub,
            broker_name=ref.broker,
        )
        cmd.language = CLIENT_LANGUAGE
        return self._instance.sign(cmd)

    def commit(self, offsets: dict[QueueRef, int]) -> None:
        """UPDATE_CONSUMER_OFFSET for this client's group: `offset` is the next one to read."""
        todo = {_mq(ref): offset for ref, offset in offsets.items()}

        async def call() -> None:
            await asyncio.gather(*(self._consumer.api.update_consumer_offset(
                self.group, mq, offset, oneway=False) for mq, offset in todo.items()))  # fmt: skip

        self._run(call())

    def committed(self, refs: Iterable[QueueRef]) -> dict[QueueRef, int]:
        """The group's committed offsets (-1 where none)."""
        return self._each(refs, self._consumer.committed)

    # -- writing -----------------------------------------------------------------------------
    def producer(self, group: str) -> AsyncProducer:
        with self._producer_lock:
            if self._producer is None:
                producer = AsyncProducer(group, config=self._config, retry_times_when_send_failed=0)
                self._run(producer.start())
                self._producer = producer
            return self._producer

    def publish_queues(self, group: str, topic: str) -> list[MessageQueue]:
        producer = self.producer(group)
        return sorted(self._run(producer.fetch_publish_queues(topic)))

    def send_batch(
        self, group: str, queue: MessageQueue, messages: Sequence[Message], timeout: float
    ) -> SendResult:
        """One SEND_BATCH_MESSAGE (or more if the messages exceed the producer's maximum size)."""
        producer = self.producer(group)
        results = self._run(producer.send_batch(messages, queue=queue, timeout=timeout))
        return results[-1]

    def has_unique_key(self, topic: str, key: str) -> bool:
        """Whether a message of `topic` with UNIQ_KEY `key` is stored on any broker of the topic."""
        return self._run(self._has_unique_key(topic, key))

    async def _has_unique_key(self, topic: str, key: str) -> bool:
        instance = self._instance
        route = instance.routes.get(topic) or await instance.update_topic_route(topic)
        if route is None:
            return False
        for broker in route.broker_datas:
            addr = broker.master_addr
            if addr is None:
                continue
            cmd = build_query_message(topic, key, max_num=UNIQUE_QUERY_MAX, unique=True)
            records = parse_answer(parse_query_message, await instance.invoke(addr, cmd, self.timeout))
            if any(matches_key(rec, topic, key, unique=True) for rec in records):
                return True
        return False


_clients: dict[tuple[str, str], BrokerClient] = {}
_clients_lock = threading.Lock()


def client_for(name_server: str, group: str) -> BrokerClient:
    """The process's shared client for (name server, group), created on first use."""
    key = (name_server, group)
    with _clients_lock:
        client = _clients.get(key)
        if client is None:
            client = BrokerClient(name_server, group)
            _clients[key] = client
        return client


def close_clients() -> None:
    """Close every cached client and pull channel (tests, the end of a demo)."""
    close_channels()
    with _clients_lock:
        clients = list(_clients.values())
        _clients.clear()
    for client in clients:
        try:
            client.close()
        except ClientError as exc:  # a broker already gone
            log.debug("closing %s: %s", client.name_server, exc)
