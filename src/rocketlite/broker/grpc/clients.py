"""5.x clients as the broker's clients: registered in its `ClientManager` next to the 4.x ones, and
the renewal of the receipts their push consumers hold.

Registration, as Java's proxy (`ClientActivity`) does it: a client's Telemetry settings name what it
is (producer of some topics, or push/simple consumer of a group and its subscriptions); the
settings register it at once, as the heartbeat of a 4.x client would (the client manager's
`heartbeat`, the same core), each Heartbeat registers it again (its liveness for
`channelExpiredTimeout`), and it leaves on NotifyClientTermination, when its Telemetry stream
ends, or when its heartbeats stop (the manager's scan closes its channel). What the admin side
shows of it:

- a producer is a producer of each topic it publishes to (Java's proxy uses the topic as the
  group; the transaction checks of 5.x halves name the same group);
- a consumer is a CLUSTERING, CONSUME_FROM_LAST_OFFSET consumer of its group, CONSUME_PASSIVELY for
  a push consumer and CONSUME_ACTIVELY for a simple one, with the group's subscriptions from the
  settings (TAG expressions; SQL92 ones as their text);
- language is `x-mq-language` (a `LanguageCode` name, else OTHER: Node sends HTTP), the version
  the `MQVersion` ordinal of `x-mq-client-version` ("5.1.2" is V5_1_2; V5_0_0 when unreadable),
  the address the gRPC peer.

A 5.x consumer pops across the queues: a 4.x rebalance must not hand it queues it never pulls, so
it is left out of GET_CONSUMER_LIST_BY_GROUP (`ClientChannelInfo.pops`), and its arrival or
departure does not make the group's 4.x clients rebalance. (Java's proxy lists both kinds there,
which leaves queues unconsumed in a mixed group; here the 4.x clients share the queues among
themselves and the 5.x ones pop beside them.)

Renewal (`Renewals`, Java's `DefaultReceiptHandleManager`): each message an `auto_renew` receive
hands out (a push consumer's: it sends no invisible time, the broker picks 60 s) is renewed to the
full invisible time again `RENEW_AHEAD_MS` before its deadline, while the client that received it
is registered and has not acked it, for at most `RENEW_MAX_MS` in all (Java's
renewAheadTimeMillis and renewMaxTimeMillis defaults). It stops on ack, nack (a change of
invisible time) or forward to the DLQ, which use the renewed handle in place of the one the client
holds; and when the client leaves, after which the message is delivered again once its current
invisible time is over. One loop timer, at the earliest renewal due, serves every receipt.
"""

from __future__ import annotations

import asyncio
import heapq
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, Protocol

from rocketlite.broker.client_manager import ClientManager
from rocketlite.broker.grpc.kit import peer_address
from rocketlite.clock import Clock
from rocketlite.protocol.bodies.heartbeat import (
    ConsumeFromWhere,
    ConsumerData,
    ConsumeType,
    HeartbeatData,
    MessageModel,
    ProducerData,
    SubscriptionData,
)
from rocketlite.protocol.codes import LanguageCode
from rocketlite.protocol.errors import RocketliteError
from rocketlite.protocol.wire.pop import MalformedReceiptHandleError, ReceiptHandle
from rocketlite.remoting.peer import Push

if TYPE_CHECKING:
    from rocketlite.protocol.proto.v2 import definition_pb2

log = logging.getLogger("rocketlite.broker.grpc")

V5_0_0: Final = 413  # MQVersion.Version.V5_0_0.ordinal(); each later x.y.z is 2 further on
RENEW_AHEAD_MS: Final = 10_000  # proxy renewAheadTimeMillis
RENEW_MAX_MS: Final = 3 * 3600 * 1000  # proxy renewMaxTimeMillis
AUTO_RENEW_INVISIBLE_MS: Final = 60_000  # defaultInvisibleTimeMills, for auto_renew receives
RENEW_RETRY_MS: Final = 1_000  # a renewal that failed for a passing reason is tried again after this
PRODUCER, PUSH_CONSUMER, SIMPLE_CONSUMER = 1, 2, 3  # apache.rocketmq.v2.ClientType
_CONSUME_TYPES: Final = {
    PUSH_CONSUMER: ConsumeType.CONSUME_PASSIVELY,
    SIMPLE_CONSUMER: ConsumeType.CONSUME_ACTIVELY,
}
_LANGUAGES: Final = frozenset(LanguageCode.__members__)


def client_version(text: str) -> int:
    """The `MQVersion` ordinal of a 5.x client's `x-mq-client-version` ("5.1.2" -> V5_1_2, 437);
    V5_0_0 for anything else (Java's proxy registers every client as V5_0_0)."""
    parts = text.strip().split(".")
    if len(parts) >= 3 and parts[0] == "5" and all(p.isdigit() and len(p) == 1 for p in parts[1:3]):
        return V5_0_0 + 2 * (10 * int(parts[1]) + int(parts[2]))
    return V5_0_0


def client_language(text: str) -> str:
    name = text.strip().upper()
    return name if name in _LANGUAGES else LanguageCode.OTHER.name


class Stream(Protocol):
    """The client's open Telemetry stream (`telemetry.TelemetryStream`), the way to the client."""

    client: str

    @property
    def closed(self) -> bool: ...

    def push(self, request: Push) -> None: ...


class GrpcClientChannel:
    """A 5.x client in the client manager's tables, where a 4.x client has its `Connection` (a
    `remoting.peer.Peer`): the address, whether it is still there, the pushes the broker sends its
    clients (on the Telemetry stream, which carries what it has a 5.x form for), and `close`, which
    the manager's scan calls when heartbeats stop."""

    def __init__(self, client_id: str, peer: str, stream: Stream, on_close: Callable[[str], None]) -> None:
        self.client_id = client_id
        self.remote_address = peer_address(peer)
        self.attrs: dict[str, Any] = {}
        self.stream = stream
        self._on_close = on_close
        self._closed = False

    @property
    def closed(self) -> bool:
        return self._closed or self.stream.closed

    def push(self, request: Push) -> None:
        if not self.closed:
            self.stream.push(request)

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._on_close(self.client_id)

    def detach(self) -> None:
        """Closed by the registry itself (the client left): no callback."""
        self._closed = True


@dataclass(slots=True)
class _Client:
    channel: GrpcClientChannel
    settings: definition_pb2.Settings  # its last
    language: str
    version: int


class GrpcClients:
    """The 5.x clients known from their settings, registered in `manager` (None: kept here only).
    `gone` callbacks hear of each client that leaves, by its id."""

    def __init__(self, manager: ClientManager | None, clock: Clock) -> None:
        self.manager = manager
        self.clock = clock
        self.gone: list[Callable[[str], None]] = []
        self._clients: dict[str, _Client] = {}

    def online(self, client_id: str) -> bool:
        known = self._clients.get(client_id)
        return known is not None and not known.channel.closed

    def push(self, client_id: str, request: Push) -> None:
        """A push to a 5.x client (`kit.PushTo`): out on its Telemetry stream, if it has one."""
        known = self._clients.get(client_id)
        if known is not None:
            known.channel.push(request)

    def settings(
        self, stream: Stream, peer: str, settings: definition_pb2.Settings, metadata: Mapping[str, str]
    ) -> None:
        """A client's settings on its Telemetry stream: (re-)register it as what they say."""
        client_id = stream.client
        if not client_id:
            return
        known = self._clients.get(client_id)
        if known is None or known.channel.stream is not stream or known.channel.closed:
            if known is not None:  # a new stream of a connected client: it does not leave
                self._unregister(client_id, known, left=False)
            known = _Client(GrpcClientChannel(client_id, peer, stream, self._expired), settings, "", 0)
            self._clients[client_id] = known
        known.settings = settings
        known.language = client_language(metadata.get("x-mq-language", ""))
        known.version = client_version(metadata.get("x-mq-client-version", ""))
        self._register(known)

    def heartbeat(self, client_id: str) -> bool:
        """A Heartbeat: register the client again (its liveness). False for a client without
        settings (none sent yet, or it left): nothing to register."""
        known = self._clients.get(client_id)
        if known is None or known.channel.closed:
            return False
        self._register(known)
        return True

    def terminate(self, client_id: str) -> None:
        """NotifyClientTermination: the client leaves."""
        known = self._clients.pop(client_id, None)
        if known is not None:
            log.info("5.x client %s terminated", client_id)
            self._unregister(client_id, known)

    def stream_ended(self, stream: Stream) -> None:
        """A Telemetry stream ended: its client leaves, unless it has a newer stream."""
        known = self._clients.get(stream.client)
        if known is not None and known.channel.stream is stream:
            del self._clients[stream.client]
            log.info("5.x client %s left (its Telemetry stream ended)", stream.client)
            self._unregister(stream.client, known)

    def _expired(self, client_id: str) -> None:
        """The manager's scan closed the channel (no heartbeat for channelExpiredTimeout); the
        manager drops its own entries."""
        self._clients.pop(client_id, None)
        for hook in self.gone:
            hook(client_id)

    def _register(self, known: _Client) -> None:
        """The client's settings as the heartbeat of a 4.x client would say it: a producer of each
        topic it publishes to, or a consumer of its group (`pops`)."""
        if self.manager is None:
            return
        s, channel = known.settings, known.channel
        if s.WhichOneof("pub_sub") == "publishing":
            groups = tuple(ProducerData(topic.name) for topic in s.publishing.topics if topic.name)
            data = HeartbeatData(channel.client_id, producer_data_set=groups)
        else:
            consume_type = _CONSUME_TYPES.get(int(s.client_type))
            group = s.subscription.group.name if s.WhichOneof("pub_sub") == "subscription" else ""
            if consume_type is None or not group:
                return
            version = self.clock.now_ms()  # the subscriptions' version, as a heartbeat's time
            consumer = ConsumerData(
                group,
                consume_type,
                MessageModel.CLUSTERING,
                ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
                tuple(self._subscription(e, version) for e in s.subscription.subscriptions),
            )
            data = HeartbeatData(channel.client_id, consumer_data_set=(consumer,))
        self.manager.heartbeat(channel, data, known.language, known.version, pops=True)

    @staticmethod
    def _subscription(entry: definition_pb2.SubscriptionEntry, version: int) -> SubscriptionData:
        """One entry of the settings; the manager computes its tag codes (a TAG expression it
        cannot parse is taken as `*`, with a warning, as a 4.x heartbeat's)."""
        expression = entry.expression
        kind = "SQL92" if expression.type == 2 else "TAG"  # apache.rocketmq.v2.FilterType.SQL
        return SubscriptionData(
            entry.topic.name, expression.expression or "*", sub_version=version, expression_type=kind
        )

    def _unregister(self, client_id: str, known: _Client, *, left: bool = True) -> None:
        """Drop the client's channel from the manager; `gone` hooks run only when the client
        `left` (termination, a stream end with no newer stream), not when a newer stream replaces
        the channel (its deliveries are still renewed)."""
        known.channel.detach()
        if self.manager is not None:
            self.manager.on_connection_closed(known.channel)
        if left:
            for hook in self.gone:
                hook(client_id)


# ------------------------------------------------------------------------------------- renewals

Renew = Callable[["Renewal", int], Awaitable[str]]
"""Change a tracked delivery's invisible time (ms) through the POP processor; the new handle."""


@dataclass(slots=True, eq=False)
class Renewal:
    """One delivery to an auto-renew receive: the handle the client holds (`original`) and the
    broker's latest one (`current`), whose invisible time ends at `deadline` (wall ms)."""

    client_id: str
    group: str
    topic: str
    peer: str
    original: str
    current: str
    deadline: int
    started: int
    renewing: asyncio.Future[None] | None = field(default=None)


class Renewals:
    """The deliveries of auto-renew receives, renewed before their invisible time ends (see the
    module doc). `online(client_id)` says whether the receiver is still registered; `renew` does
    one change of invisible time. `invisible_ms` is what an auto-renew receive and each renewal
    set (tests shorten it)."""

    def __init__(self, online: Callable[[str], bool], renew: Renew, clock: Clock) -> None:
        self.online = online
        self.renew = renew
        self.clock = clock
        self.invisible_ms = AUTO_RENEW_INVISIBLE_MS
        self.max_ms = RENEW_MAX_MS
        self.renewed = 0  # renewals done (a figure for tests and logs)
        self._tracked: dict[str, Renewal] = {}  # by the handle the client holds
        # (due ms, tie-break, a renewal or one receive's): a heap
        self._due: list[tuple[int, int, Renewal | list[Renewal]]] = []
        self._seq = 0
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = 0
        self._tasks: set[asyncio.Task[None]] = set()

    def __len__(self) -> int:
        return len(self._tracked)

    def ahead_ms(self) -> int:
        return min(RENEW_AHEAD_MS, self.invisible_ms // 2)

    def track(
        self, client_id: str, group: str, topic: str, handle: str, peer: str, deadline: int | None = None
    ) -> None:
        """A delivery written to an auto-renew receive's stream; `deadline`: when it turns visible
        again (its pop time + invisible time), read from `handle` when not given."""
        if not client_id:
            return  # a caller without a client id can never be found registered
        if deadline is None:
            try:
                parsed = ReceiptHandle.parse(handle)
            except MalformedReceiptHandleError:
                return
            deadline = parsed.pop_time + parsed.invisible_time
        now = self.clock.now_ms()
        entry = Renewal(client_id, group, topic, peer, handle, handle, deadline, now)
        self._tracked[handle] = entry
        self._schedule(entry)

    def track_all(
        self, client_id: str, group: str, peer: str, deadline: int, deliveries: list[tuple[str, str]]
    ) -> None:
        """`track` of one receive's deliveries, (topic, handle) each, which share their client
        and `deadline`: the clock read and the timer checked once."""
        if not client_id or not deliveries:
            return
        now = self.clock.now_ms()
        due = deadline - self.ahead_ms()
        tracked = self._tracked
        batch: list[Renewal] = []
        for topic, handle in deliveries:
            entry = Renewal(client_id, group, topic, peer, handle, handle, deadline, now)
            tracked[handle] = entry
            batch.append(entry)
        self._seq += 1
        heapq.heappush(self._due, (due, self._seq, batch))  # one timer entry for the batch
        if self._timer is None or due < self._timer_at:
            self._arm(due)

    async def release(self, handle: str) -> str:
        """Stop renewing the delivery the client's `handle` names (it acks, nacks or dead-letters
        it) and return the broker's latest handle of it (the same text when it is not tracked);
        a renewal under way is waited for, so the answer is never a handle it is replacing."""
        return (await self.release_all([handle]))[0]

    async def release_all(self, handles: list[str]) -> list[str]:
        """`release` of several handles (one AckMessage's entries), in order; only a renewal under
        way is waited for."""
        if not self._tracked:  # no auto-renew receive in flight: every handle is the client's
            return handles
        out: list[str] = []
        for handle in handles:
            entry = self._tracked.pop(handle, None)
            if entry is None:
                out.append(handle)
                continue
            if entry.renewing is not None:
                await asyncio.shield(entry.renewing)
            out.append(entry.current)
        return out

    def forget_client(self, client_id: str) -> None:
        """The client left: its deliveries are no longer renewed (visible again at their deadline)."""
        doomed = [h for h, e in self._tracked.items() if e.client_id == client_id]
        for handle in doomed:
            del self._tracked[handle]
        if doomed:
            log.info("client %s left: %d delivery(ies) no longer renewed", client_id, len(doomed))

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        for task in list(self._tasks):
            task.cancel()
        self._tracked.clear()
        self._due.clear()

    # -- the timer --------------------------------------------------------------------------
    def _schedule(self, entry: Renewal, due: int | None = None) -> None:
        if due is None:
            due = entry.deadline - self.ahead_ms()
        self._seq += 1
        heapq.heappush(self._due, (due, self._seq, entry))
        if self._timer is None or due < self._timer_at:
            self._arm(due)

    def _arm(self, due: int) -> None:
        if self._timer is not None:
            self._timer.cancel()
        loop = asyncio.get_running_loop()
        self._timer_at = due
        self._timer = loop.call_later(max(0.0, (due - self.clock.now_ms()) / 1000), self._fire)

    def _fire(self) -> None:
        self._timer = None
        now = self.clock.now_ms()
        batch: list[Renewal] = []
        while self._due and self._due[0][0] <= now:
            due = heapq.heappop(self._due)[2]
            for entry in due if isinstance(due, list) else (due,):
                if self._tracked.get(entry.original) is entry and entry.renewing is None:
                    batch.append(entry)
        if batch:
            task = asyncio.get_running_loop().create_task(self._renew_all(batch), name="grpc-renew")
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        if self._due and self._timer is None:
            self._arm(self._due[0][0])

    async def _renew_all(self, batch: list[Renewal]) -> None:
        """Renew the due deliveries together: their changes share the POP log's group commit
        (one by one, thousands would take longer than the renewal lead)."""
        todo: list[Renewal] = []
        for entry in batch:
            if self._tracked.get(entry.original) is not entry:
                continue  # acked (or its client left) since it was due
            now = self.clock.now_ms()
            if not self.online(entry.client_id):
                self._tracked.pop(entry.original, None)
                continue
            if now - entry.started >= self.max_ms:
                self._tracked.pop(entry.original, None)
                log.warning(
                    "delivery %s of group %s renewed for %d ms: no longer renewed",
                    entry.original, entry.group, now - entry.started,
                )  # fmt: skip
                continue
            todo.append(entry)
        await asyncio.gather(*(self._renew_one(entry) for entry in todo))

    async def _renew_one(self, entry: Renewal) -> None:
        done = asyncio.get_running_loop().create_future()
        entry.renewing = done
        retry_at: int | None = None
        try:
            entry.current = await self.renew(entry, self.invisible_ms)
            parsed = ReceiptHandle.parse(entry.current)
            entry.deadline = parsed.pop_time + parsed.invisible_time
            self.renewed += 1
        except RocketliteError as exc:  # acked or redelivered meanwhile, or the store refused
            now = self.clock.now_ms()
            if _passing(exc) and entry.deadline - now > RENEW_RETRY_MS:
                retry_at = now + RENEW_RETRY_MS
            else:
                self._tracked.pop(entry.original, None)
                log.info("delivery %s of group %s not renewed: %s", entry.original, entry.group, exc)
        except Exception:  # a fault of ours: this entry is tried again or dropped, never the batch
            now = self.clock.now_ms()
            log.exception("renewal of delivery %s of group %s failed", entry.original, entry.group)
            if entry.deadline - now > RENEW_RETRY_MS:
                retry_at = now + RENEW_RETRY_MS
            else:
                self._tracked.pop(entry.original, None)
        finally:
            entry.renewing = None
            done.set_result(None)
        if self._tracked.get(entry.original) is entry:
            self._schedule(entry, retry_at)


def _passing(exc: RocketliteError) -> bool:
    """A refusal worth another try (the store busy), not a handle that is no longer valid."""
    return getattr(exc, "status", "") in ("TOO_MANY_REQUESTS", "INTERNAL_ERROR")
