"""`ClientInstance`: the per-process client core shared by producers and consumers (`MQClientInstance`).

Java shares one `MQClientInstance` per clientID (`ip@instanceName`) between every producer and
consumer of a process: one set of broker connections, one route table, one heartbeat. Brokers key
consumer-group membership by clientID, so two consumers of the **same group** need different
instance names (Java 4.9 makes the default instance name unique per client; here "DEFAULT" means
the pid, like Java up to 4.8 and ali-ons, so that clients of one process share connections).

An instance belongs to the event loop that created it (`acquire` is keyed by loop, name server
list and instance name) and lives while some producer or consumer holds it. Its background tasks:

* route refresh every 30 s (`pollNameServerInterval`) for every topic a member uses;
* heartbeat to every known broker every 30 s (masters only when there are no consumers);
* rebalance every 20 s, or at once when a broker sends NOTIFY_CONSUMER_IDS_CHANGED; a round that
  could not settle every topic (one without a route yet, a group not yet known to its broker, a
  queue lock held) is tried again after 0.2, 0.4, 0.8 s and then every `UNSETTLED_RETRY_MAX_S`
  until one settles, as Java's `RebalanceService` retries an unbalanced round after
  `rocketmq.client.rebalance.minInterval` (1 s) instead of its 20 s `waitInterval`;
* consumer offset persistence every 5 s.

Broker-to-client requests arrive on the connections we opened: NOTIFY_CONSUMER_IDS_CHANGED wakes
the rebalance, CHECK_TRANSACTION_STATE goes to the transaction producer of the message's PGROUP,
PUSH_REPLY_MESSAGE_TO_CLIENT completes a producer's waiting `request` (`request_reply.ReplyTable`),
and what brokers relay from operators (offset resets, running info, direct consumption) is
`ops.py`'s.
Every request goes through `invoke` / `invoke_oneway`, which turn timeouts and broken connections
into `RemotingTimeoutError` / `RemotingConnectError` so callers only ever see `ClientError`s, and
sign it (every request, name servers ignore it) when the config has ACL keys, like Java's
`AclClientRPCHook`. The keys belong to the shared instance: other keys need another instance name.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import socket
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import replace
from typing import Any, ClassVar, Protocol, TypeVar

from rocketlite.client import ops
from rocketlite.client.config import ClientConfig
from rocketlite.client.errors import (
    BrokerError,
    ClientError,
    ClientStateError,
    RemotingConnectError,
    RemotingError,
    RemotingTimeoutError,
    TopicNotExistError,
    for_code,
    transport_reason,
)
from rocketlite.client.message import Message, SendResult, UniqIdGenerator
from rocketlite.client.request_reply import ReplyTable
from rocketlite.client.route import RouteTable
from rocketlite.protocol.bodies.heartbeat import ConsumerData, HeartbeatData, ProducerData
from rocketlite.protocol.bodies.route import ClusterInfo, TopicRouteData
from rocketlite.protocol.codes import RequestCode, ResponseCode, not_a_namesrv, request_label
from rocketlite.protocol.errors import RocketliteError
from rocketlite.protocol.formats.speedups import decode_records
from rocketlite.protocol.message import MessageConst, find_property
from rocketlite.protocol.no_route import no_route_reason
from rocketlite.protocol.requests.heartbeat import (
    build_heartbeat,
    build_unregister_client,
    parse_heartbeat,
    parse_unregister_client,
)
from rocketlite.protocol.requests.response import ResponseError
from rocketlite.protocol.requests.route import build_get_route, parse_route
from rocketlite.protocol.reserved import MASTER_ID
from rocketlite.protocol.wire.command import RemotingCommand, make_request
from rocketlite.protocol.wire.headers import CheckTransactionStateRequestHeader
from rocketlite.remoting.client import RemotingClient
from rocketlite.remoting.connection import Connection, RequestTable, not_supported
from rocketlite.remoting.tls import TlsConfig, client_context
from rocketlite.runtime import wait_event

__all__ = [
    "CLIENT_INNER_PRODUCER_GROUP",
    "MASTER_ID",
    "ClientConfig",  # defined in rocketlite.client.config, imported from here too
    "ClientInstance",
    "ConsumerMember",
    "ProducerMember",
    "local_ip",
    "replace_opaque",
]

log = logging.getLogger("rocketlite.client.instance")

CLIENT_INNER_PRODUCER_GROUP = "CLIENT_INNER_PRODUCER"
CLIENT_LANGUAGE = "PYTHON"
# An unsettled rebalance round is retried at most this far apart. It once backed off up to the 20 s
# interval (0.2, 0.4, ... 12.8 s), so a %RETRY% route that came a few seconds late on a loaded
# machine was looked for again only 6-13 s later.
UNSETTLED_RETRY_MAX_S = 1.0

M = TypeVar("M")


def local_ip() -> str:
    """The first non-loopback IPv4 address (`RemotingUtil.getLocalAddress`), else 127.0.0.1.

    A UDP `connect` picks the outgoing interface without sending anything.
    """
    with contextlib.suppress(OSError), socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.connect(("10.255.255.255", 1))
        ip = str(sock.getsockname()[0])
        if not ip.startswith("127.") and ip != "0.0.0.0":
            return ip
    return "127.0.0.1"


class ProducerMember(Protocol):
    group: str

    def publish_topics(self) -> Iterable[str]: ...

    def on_check_transaction(
        self, conn: Connection, header: CheckTransactionStateRequestHeader, body: bytes
    ) -> None: ...


class InnerProducer(Protocol):
    """The instance's own producer (send-back fallbacks): an `AsyncProducer`."""

    async def start(self) -> None: ...

    async def send(self, msg: Message) -> SendResult: ...

    async def close(self) -> None: ...


# (group, config) -> a producer, not started, passed to `acquire` by a push consumer (producer.py
# builds on this module, so the instance cannot make one itself).
ProducerFactory = Callable[[str, ClientConfig], InnerProducer]


class ConsumerMember(Protocol):
    group: str

    def consumer_data(self) -> ConsumerData: ...

    def subscribed_topics(self) -> Iterable[str]: ...

    async def do_rebalance(self) -> bool: ...

    async def persist_offsets(self) -> None: ...


class ClientInstance(RouteTable):
    """One per (event loop, name servers, instance name); see the module docstring."""

    _instances: ClassVar[dict[tuple[int, str, str], ClientInstance]] = {}

    def __init__(
        self, config: ClientConfig, key: tuple[int, str, str], producer_factory: ProducerFactory | None = None
    ) -> None:
        self.config = config
        self.key = key
        self.loop = asyncio.get_running_loop()
        self.ip = config.client_ip or local_ip()
        self.instance_name = config.resolved_instance_name()
        self.client_id = f"{self.ip}@{self.instance_name}"
        if config.unit_name:
            self.client_id += f"@{config.unit_name}"
        self.uniq_ids = UniqIdGenerator(self.ip, clock=config.clock)
        self.credentials = config.credentials
        table = RequestTable(default=not_supported)
        table.register(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, self._on_notify_ids_changed)
        table.register(RequestCode.CHECK_TRANSACTION_STATE, self._on_check_transaction)
        ops.register(table, self)  # what brokers relay from operators: resets, running info, resends
        self.replies = ReplyTable()  # requests of our producers waiting for their reply
        table.register(RequestCode.PUSH_REPLY_MESSAGE_TO_CLIENT, self.replies.on_push)
        tls = client_context(config.tls or TlsConfig()) if config.use_tls else None
        self.remoting = RemotingClient(table, connect_timeout=config.request_timeout, ssl_context=tls)
        self.namesrv_addrs = config.namesrv_addrs
        if not self.namesrv_addrs:
            raise ClientStateError("no name server address given")
        self._ns_index = random.randrange(len(self.namesrv_addrs))
        RouteTable.__init__(self)
        self.broker_versions: dict[str, int] = {}
        self.producers: dict[str, ProducerMember] = {}
        self.consumers: dict[str, ConsumerMember] = {}
        self._refs = 0
        self._tasks: list[asyncio.Task[None]] = []
        self._background: set[asyncio.Task[None]] = set()
        self._rebalance_now = asyncio.Event()
        self._heartbeat_lock = asyncio.Lock()
        self._producer_factory = producer_factory
        self._inner_producer: InnerProducer | None = None
        self._inner_lock = asyncio.Lock()
        self.started = False
        self._closing = False
        self.closed = False

    # -- sharing ---------------------------------------------------------------------------
    @classmethod
    async def acquire(
        cls, config: ClientConfig, producer_factory: ProducerFactory | None = None
    ) -> ClientInstance:
        """The shared instance for `config` on the running loop, started; release it when done.
        `producer_factory` makes `inner_producer` for an instance that has no factory yet."""
        loop = asyncio.get_running_loop()
        key = (id(loop), config.namesrv_addr, config.resolved_instance_name())
        inst = cls._instances.get(key)
        if inst is None or inst._closing or inst.loop is not loop:
            inst = cls(config, key, producer_factory)
            cls._instances[key] = inst
        elif inst.credentials != config.credentials:
            held = inst.credentials.access_key if inst.credentials else None
            raise ClientStateError(
                f"client instance {inst.client_id} already signs with access key {held!r}; "
                "clients with other ACL keys need another instance_name"
            )
        inst._producer_factory = inst._producer_factory or producer_factory
        inst._refs += 1
        inst._start()
        return inst

    async def release(self) -> None:
        self._refs -= 1
        if self._refs <= 0:
            await self.shutdown()

    def _start(self) -> None:
        if self.started:
            return
        self.started = True
        cfg = self.config
        self._tasks = [
            self._every(cfg.poll_name_server_interval, self.refresh_routes, "route refresh"),
            self._every(cfg.heartbeat_broker_interval, self.send_heartbeat_to_all, "heartbeat"),
            self._every(cfg.persist_consumer_offset_interval, self.persist_all_offsets, "offset persist"),
            self.loop.create_task(self._rebalance_loop(), name=f"rocketlite-rebalance-{self.client_id}"),
        ]
        log.info("client instance %s started (name servers %s)", self.client_id, self.namesrv_addrs)

    def _every(self, period: float, job: Callable[[], Awaitable[Any]], what: str) -> asyncio.Task[None]:
        async def loop() -> None:
            while not self.closed:
                await asyncio.sleep(period)
                try:
                    await job()
                except Exception:
                    log.exception("%s failed", what)

        return self.loop.create_task(loop(), name=f"rocketlite-{what}-{self.client_id}")

    async def shutdown(self) -> None:
        if self._closing:
            return
        self._closing = True  # acquire() makes a new instance from now on
        if self._inner_producer is not None:
            with contextlib.suppress(Exception):
                await self._inner_producer.close()  # still open: it unregisters its group
        self.closed = True
        tasks = [*self._tasks, *self._background]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=5.0)
        await self.remoting.close()
        if self._instances.get(self.key) is self:
            del self._instances[self.key]
        log.info("client instance %s stopped", self.client_id)

    # -- membership ------------------------------------------------------------------------
    def register_producer(self, member: ProducerMember) -> None:
        self._register("producer", self.producers, member.group, member)

    def register_consumer(self, member: ConsumerMember) -> None:
        self._register("consumer", self.consumers, member.group, member)

    def _register(self, kind: str, members: dict[str, M], group: str, member: M) -> None:
        """One member per group and role in an instance (heartbeats carry groups, not members)."""
        if group in members:
            raise ClientStateError(
                f"{kind} group {group!r} already exists in client {self.client_id}; use another instance_name"
            )
        members[group] = member

    async def unregister_producer(self, group: str) -> None:
        if self.producers.pop(group, None) is not None:
            await self._unregister_client(producer_group=group)

    async def unregister_consumer(self, group: str) -> None:
        if self.consumers.pop(group, None) is not None:
            await self._unregister_client(consumer_group=group)

    async def _unregister_client(
        self, producer_group: str | None = None, consumer_group: str | None = None
    ) -> None:
        addrs = {a for addrs in self.broker_addrs.values() for a in addrs.values()}

        async def one(addr: str) -> None:
            cmd = build_unregister_client(
                self.client_id, producer_group=producer_group, consumer_group=consumer_group
            )
            try:
                response = await self.invoke(addr, cmd)
                parse_unregister_client(response)
            except ResponseError as exc:
                log.warning("unregister from %s refused: %s", addr, exc.response_remark)
            except ClientError as exc:
                log.warning("unregister from %s failed: %s", addr, exc)

        await asyncio.gather(*(one(a) for a in sorted(addrs)))

    async def inner_producer(self) -> InnerProducer:
        """The instance's own producer (group CLIENT_INNER_PRODUCER), for send-back fallbacks,
        made by the factory a client passed to `acquire`."""
        async with self._inner_lock:
            if self._inner_producer is None:
                if self._producer_factory is None:
                    raise ClientStateError(f"client instance {self.client_id} was given no producer factory")
                producer = self._producer_factory(CLIENT_INNER_PRODUCER_GROUP, self.config)
                await producer.start()
                self._refs -= 1  # our own producer must not keep us alive; shutdown() closes it
                self._inner_producer = producer
        return self._inner_producer

    # -- requests --------------------------------------------------------------------------
    def command(
        self,
        code: int,
        ext: dict[str, str] | None = None,
        body: bytes | None = None,
        *,
        remark: str | None = None,
    ) -> RemotingCommand:
        return make_request(code, ext, body, remark=remark, language=CLIENT_LANGUAGE)

    def sign(self, cmd: RemotingCommand) -> RemotingCommand:
        """Add AccessKey / Signature (/ SecurityToken) when the config has ACL keys."""
        return cmd if self.credentials is None else self.credentials.sign_request(cmd)

    async def invoke(self, addr: str, cmd: RemotingCommand, timeout: float | None = None) -> RemotingCommand:
        """Request/response (signed, see `sign`) with transport failures mapped to `RemotingError`s."""
        if self.closed:
            raise ClientStateError(f"client {self.client_id} is shut down")
        cmd.language = CLIENT_LANGUAGE  # the request builders leave Java's; brokers show ours
        self.sign(cmd)
        limit = self.config.request_timeout if timeout is None else timeout
        try:
            conn = await self.remoting.connection(addr)
            return await conn.request(cmd, limit)
        except TimeoutError as exc:
            raise RemotingTimeoutError(
                f"{request_label(cmd.code)} to {addr} timed out after {limit:.1f}s"
            ) from exc
        except OSError as exc:  # ConnectionError included
            raise RemotingConnectError(
                f"{request_label(cmd.code)} to {addr} failed: {transport_reason(exc)}"
            ) from exc

    async def invoke_oneway(self, addr: str, cmd: RemotingCommand) -> None:
        cmd.language = CLIENT_LANGUAGE
        self.sign(cmd)
        try:
            await self.remoting.invoke_oneway(addr, cmd)
        except TimeoutError as exc:
            raise RemotingTimeoutError(f"connecting to {addr} timed out") from exc
        except OSError as exc:
            raise RemotingConnectError(
                f"one-way {request_label(cmd.code)} to {addr} failed: {transport_reason(exc)}"
            ) from exc

    async def invoke_namesrv(self, cmd: RemotingCommand) -> RemotingCommand:
        """Try the name servers in turn, starting with the one that last worked.

        A server that does not know a name-server request (REQUEST_CODE_NOT_SUPPORTED) is not a
        name server: most often the broker's port was given as the name server's. It is skipped
        like an unreachable one, and when no name server answers, the error says what it is."""
        last: ClientError | None = None
        n = len(self.namesrv_addrs)
        for attempt in range(n):
            index = (self._ns_index + attempt) % n
            addr = self.namesrv_addrs[index]
            try:
                response = await self.invoke(addr, replace_opaque(cmd))
            except RemotingError as exc:
                last = exc
                continue
            if response.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED:
                last = BrokerError(
                    not_a_namesrv(addr, cmd.code),
                    response_code=response.code,
                    retriable=False,
                )
                continue
            self._ns_index = index
            return response
        assert last is not None
        raise last

    # -- routes ----------------------------------------------------------------------------
    async def fetch_route(self, topic: str) -> TopicRouteData:
        response = await self.invoke_namesrv(build_get_route(topic))
        if response.code != ResponseCode.SUCCESS:
            raise for_code(response.code, response.remark or f"no route for topic {topic}")
        route = parse_route(response)
        if route is None:
            raise TopicNotExistError(f"empty route for topic {topic}")
        return route

    async def no_route_reason(self, topic: str, *, for_send: bool = True) -> str:
        """Why `topic` has no usable route, from the name server's cluster table (see
        `protocol.no_route`): no broker registered, or no such topic and no auto-creation."""
        cmd = self.command(RequestCode.GET_BROKER_CLUSTER_INFO)
        try:
            response = await self.invoke_namesrv(cmd)
            clusters = ClusterInfo.from_json(response.body or b"{}")
        except (ClientError, RocketliteError) as exc:
            return f"no route for topic {topic} (and the cluster table is unavailable: {exc})"
        return no_route_reason(topic, clusters, self.namesrv_addrs[self._ns_index], for_send=for_send)

    async def update_topic_route(
        self, topic: str, *, default_topic: str | None = None, default_queue_nums: int = 4
    ) -> TopicRouteData | None:
        """Fetch and install a topic's route; None when the name server does not know it.

        With `default_topic` (the producer's TBW102 fallback) the default topic's route is copied
        for `topic` with at most `default_queue_nums` queues per broker, so the first send reaches
        a broker that auto-creates the topic.
        """
        try:
            if default_topic is None:
                route = await self.fetch_route(topic)
            else:
                base = await self.fetch_route(default_topic)
                queue_datas = tuple(
                    replace(
                        qd,
                        read_queue_nums=min(default_queue_nums, qd.read_queue_nums),
                        write_queue_nums=min(default_queue_nums, qd.read_queue_nums),
                    )
                    for qd in base.queue_datas
                )
                route = replace(base, queue_datas=queue_datas)
        except TopicNotExistError:
            return None
        if self.install_route(topic, route) and not self.closed:
            # Java waits for the 30 s heartbeat; telling a new broker about us at once lets it
            # route transaction checks and count our consumers straight away.
            self.spawn(self.send_heartbeat_to_all(), "heartbeat")
        return route

    def _topics_in_use(self) -> set[str]:
        topics: set[str] = set()
        for p in self.producers.values():
            topics.update(p.publish_topics())
        for c in self.consumers.values():
            topics.update(c.subscribed_topics())
        return topics

    def spawn(self, coro: Awaitable[None], what: str) -> None:
        """Run `coro` in the background, logging failures; cancelled at shutdown."""

        async def run() -> None:
            try:
                await coro
            except Exception:
                log.exception("%s failed", what)

        task = self.loop.create_task(run())
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def refresh_routes(self) -> None:
        for topic in sorted(self._topics_in_use()):
            try:
                await self.update_topic_route(topic)
            except ClientError as exc:
                log.warning("route refresh for %s failed: %s", topic, exc)
        self.clean_offline_brokers()

    async def require_master(self, broker_name: str, topic: str) -> str:
        """The master of `broker_name`, refreshing `topic`'s route once if it is unknown."""
        addr = self.master_addr(broker_name)
        if addr is None:
            await self.update_topic_route(topic)
            addr = self.master_addr(broker_name)
        if addr is None:
            raise ClientError(f"broker {broker_name} has no known master address", retriable=True)
        return addr

    # -- heartbeat -------------------------------------------------------------------------
    def heartbeat_data(self) -> HeartbeatData:
        producers = [ProducerData(g) for g in sorted(self.producers)]
        if producers and CLIENT_INNER_PRODUCER_GROUP not in self.producers:
            producers.append(ProducerData(CLIENT_INNER_PRODUCER_GROUP))
        return HeartbeatData(
            client_id=self.client_id,
            producer_data_set=tuple(producers),
            consumer_data_set=tuple(c.consumer_data() for c in self.consumers.values()),
        )

    async def send_heartbeat_to_all(self) -> None:
        """HEART_BEAT to every known broker (masters only when no consumer is registered)."""
        async with self._heartbeat_lock:
            data = self.heartbeat_data()
            if not data.producer_data_set and not data.consumer_data_set:
                return
            targets = [
                addr
                for addrs in self.broker_addrs.values()
                for broker_id, addr in addrs.items()
                if broker_id == MASTER_ID or data.consumer_data_set
            ]
            await asyncio.gather(*(self._heartbeat(addr, data) for addr in sorted(set(targets))))

    async def _heartbeat(self, addr: str, data: HeartbeatData) -> None:
        try:
            response = await self.invoke(addr, build_heartbeat(data))
        except ClientError as exc:
            log.warning("heartbeat to %s failed: %s", addr, exc)
            return
        try:
            self.broker_versions[addr] = parse_heartbeat(response)
        except ResponseError:
            log.warning("heartbeat to %s refused: %s %s", addr, response.code, response.remark)

    # -- rebalance and offsets -------------------------------------------------------------
    def rebalance_immediately(self) -> None:
        self._rebalance_now.set()

    async def _rebalance_loop(self) -> None:
        interval = self.config.rebalance_interval
        delay, quick = interval, 0.2
        while not self.closed:
            await wait_event(self._rebalance_now, delay)
            self._rebalance_now.clear()
            complete = True
            for consumer in list(self.consumers.values()):
                try:
                    complete = await consumer.do_rebalance() and complete
                except Exception:
                    log.exception("rebalance of group %s failed", consumer.group)
                    complete = False
            # A topic without a route yet (a %RETRY% topic right after the first heartbeat) is
            # looked for again soon, and at least every UNSETTLED_RETRY_MAX_S while it lasts.
            if complete:
                delay, quick = interval, 0.2
            else:
                delay, quick = min(interval, quick), min(quick * 2, UNSETTLED_RETRY_MAX_S)

    async def persist_all_offsets(self) -> None:
        for consumer in list(self.consumers.values()):
            try:
                await consumer.persist_offsets()
            except Exception:
                log.exception("persisting offsets of group %s failed", consumer.group)

    # -- broker -> client requests ---------------------------------------------------------
    def _on_notify_ids_changed(self, conn: Connection, request: RemotingCommand) -> None:
        log.info(
            "consumer ids of %s changed (from %s): rebalancing",
            request.ext_fields.get("consumerGroup"),
            conn.remote_address,
        )
        self.rebalance_immediately()

    def _on_check_transaction(self, conn: Connection, request: RemotingCommand) -> None:
        header = CheckTransactionStateRequestHeader.from_ext(request.ext_fields)
        records = decode_records(request.body or b"")
        group = find_property(records[0].properties_string, MessageConst.PRODUCER_GROUP) if records else None
        producer = self.producers.get(group or "")
        if producer is None:
            log.warning("transaction check for unknown producer group %r ignored", group)
            return
        producer.on_check_transaction(conn, header, request.body or b"")


def replace_opaque(cmd: RemotingCommand) -> RemotingCommand:
    """A copy of `cmd` with a fresh opaque, for resending after a failure."""
    return replace(cmd, opaque=0, ext_fields=dict(cmd.ext_fields))
