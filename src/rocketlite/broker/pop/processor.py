"""POP consumption on the remoting port: POP_MESSAGE (200050), ACK_MESSAGE (200051) and
CHANGE_MESSAGE_INVISIBLETIME (200053), the requests RocketMQ 5.x's proxy and remoting POP
consumers send.

The rules live in `broker/pop/state.py`; this module's typed cores (`pop(PopRequest) -> PopBatch`,
`ack(AckRequest)`, `change_invisible(ChangeInvisibleRequest) -> int`), which the remoting handlers
below and the 5.x endpoint (`broker/grpc/consume.py`) both call, check the request the way a pull
is checked (broker readable, group known and allowed to consume, topic readable, queue in range,
a TAG or SQL92 expression that parses, else SUBSCRIPTION_PARSE_FAILED naming the error; SQL92 is
served whatever `enablePropertyFilter` says, as RocketMQ's POP serves it), call the service and
wait until the POP log holds the change (`PopService.durable`). On the remoting port the answers
carry RocketMQ's headers:

- POP_MESSAGE found: SUCCESS, `PopMessageResponseHeader` (popTime, invisibleTime, reviveQid 0,
  restNum, startOffsetInfo, msgOffsetInfo) and the records back to back, as a pull's body;
  `queueId` -1 pops across every readable queue of the topic;
- POP_MESSAGE with nothing to hand out: held up to `pollTime` ms (at most 20 s) in its group's
  line (`broker/pop/polling.py`), woken by a new message on one of its queues (the store's arrival
  listener, `on_arrival`, wakes one held pop per group and arrival) or, when the earliest deadline
  of the queues' in-flight messages comes, by the one timer of its group and queues (one held pop
  looks, not all of them), then POLLING_TIMEOUT (210), which clients read as "no new
  message"; a woken pop that finds nothing waits on for the rest of its time; `pollTime` 0
  answers at once;
- ACK_MESSAGE: SUCCESS with no header;
- CHANGE_MESSAGE_INVISIBLETIME: SUCCESS with `ChangeInvisibleTimeResponseHeader` (the new popTime
  the client's new receipt handle carries, invisibleTime, reviveQid);
- `order=true` (FIFO): a queue hands out new messages only when everything handed out of it
  before is acked; an expired invisible time brings the same messages back first, in order;
- a message due again after `retryMaxTimes` redeliveries (the group's, 16 by default) goes to
  `%DLQ%group` instead (RETRY_TOPIC and ORIGIN_MESSAGE_ID set, as a 4.x send-back's DLQ copy);
  it is forgotten only once that copy is flushed to disk, whatever the flushDiskType, so a crash
  cannot lose it (at worst a second DLQ copy);
- a malformed handle, or one naming no message in flight (acked, redelivered since, forged):
  NO_MESSAGE (208) with a remark naming the cause; nothing changes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from dataclasses import dataclass
from typing import Final

from rocketlite.broker.config import BrokerConfig
from rocketlite.broker.consumer_filter import subscription_filters
from rocketlite.broker.pop.columns import HandleAck, split_acks
from rocketlite.broker.pop.polling import PopPolling, Waiter
from rocketlite.broker.pop.state import PopBatch, PopService, check_place
from rocketlite.broker.subscription_group import SubscriptionGroupManager
from rocketlite.broker.topic_config import TopicConfigManager
from rocketlite.protocol import perm, reserved
from rocketlite.protocol.codes import ResponseCode
from rocketlite.protocol.errors import RocketliteError
from rocketlite.protocol.formats.record import StoredRecord
from rocketlite.protocol.message import MessageConst, properties_to_string, string_to_properties
from rocketlite.protocol.wire.command import RemotingCommand, make_response
from rocketlite.protocol.wire.pop import (
    INIT_MODE_MIN,
    POLLING_TIMEOUT,
    AckMessageRequestHeader,
    ChangeInvisibleTimeRequestHeader,
    ChangeInvisibleTimeResponseHeader,
    PopMessageRequestHeader,
    PopMessageResponseHeader,
    ReceiptHandle,
    offset_info,
    topic_type,
)
from rocketlite.remoting.connection import Connection
from rocketlite.runtime import result_within, wait_event
from rocketlite.store.api import MessageFilter, RecordFilter, StoreAPI

log = logging.getLogger("rocketlite.broker.pop")

DLQ_NUMS_PER_GROUP: Final = 1
MAX_POLL_MS: Final = 20_000  # a held POP answers within this, whatever pollTime says
MAX_POP_NUMS: Final = 32  # RocketMQ's limit of one POP_MESSAGE
REVIVE_QID: Final = 0  # no revive topic here; clients only carry it along in their handles


def _refuse(code: ResponseCode, remark: str) -> RocketliteError:
    return RocketliteError(remark, code=code)


@dataclass(frozen=True, slots=True)
class PopRequest:
    """One POP, as either port asks it: up to `max_messages` of `group`'s messages of `topic` from
    queue `queue_id` (-1: every readable queue), each invisible for `invisible_ms`; an empty pop is
    held up to `poll_ms` (at most 20 s). `init_mode`: where a group with no offset starts
    (INIT_MODE_MIN / INIT_MODE_MAX); `expression_type` and `expression`: the filter (TAG or SQL92);
    `order`: FIFO, one batch of a queue in flight at a time."""

    group: str
    topic: str
    queue_id: int
    max_messages: int
    invisible_ms: int
    poll_ms: int = 0
    init_mode: int = INIT_MODE_MIN
    expression_type: str | None = None
    expression: str | None = None
    order: bool = False


@dataclass(frozen=True, slots=True)
class AckRequest:
    """The ack of one delivery: `handle` is its receipt handle's text (POP's `extraInfo`)."""

    group: str
    topic: str
    queue_id: int
    offset: int
    handle: str


@dataclass(frozen=True, slots=True)
class ChangeInvisibleRequest:
    """A delivery made visible again `invisible_ms` from now (its handle is replaced)."""

    group: str
    topic: str
    queue_id: int
    offset: int
    handle: str
    invisible_ms: int


class PopMessageProcessor:
    """Serves the three POP codes over one `PopService`."""

    def __init__(
        self,
        broker: BrokerConfig,
        service: PopService,
        topics: TopicConfigManager,
        groups: SubscriptionGroupManager,
    ) -> None:
        self.broker = broker
        self.service = service
        self.topics = topics
        self.groups = groups
        self.polling = PopPolling()  # the held pops, by topic and group
        self.looks = 0  # looks at the queues by pops (a held pop looks again when woken)
        self.skipped = 0  # first looks not made (`PopPolling.accounted`)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread = 0

    async def start(self) -> None:
        """Nothing to start: the log was opened by `PopService.load`."""

    async def close(self) -> None:
        """Write what is pending to the POP log and close it; the redelivery timers go."""
        self.polling.close()
        await asyncio.get_running_loop().run_in_executor(None, self.service.close)

    def on_arrival(self, topic: str, queue_id: int, max_offset: int, tags_code: int, store_ts: int) -> None:
        """The store's arrival listener: wake one held pop of each group on `topic` that pops
        `queue_id` (hopping to the loop when called from the reput thread). A pop joins its line
        before it looks, so no arrival is missed."""
        del max_offset, tags_code, store_ts
        loop = self._loop
        if loop is None or not self.polling.has_topic(topic):
            return
        if threading.get_ident() == self._loop_thread:
            self.polling.arrived(topic, queue_id)
        else:
            with contextlib.suppress(RuntimeError):  # the loop is closing
                loop.call_soon_threadsafe(self.polling.arrived, topic, queue_id)

    async def dead_letter(self, group: str, record: StoredRecord) -> bool:
        """Store a copy of `record` on `%DLQ%group` (created on first use, read-write) and wait
        until it is flushed; False if it could not be stored."""
        dlq = reserved.dlq_topic(group)
        self.topics.create_in_send_back(dlq, DLQ_NUMS_PER_GROUP, perm.PERM_READ | perm.PERM_WRITE)
        props = string_to_properties(record.properties_string)
        props.setdefault(MessageConst.RETRY_TOPIC, record.topic)
        if not props.get(MessageConst.ORIGIN_MESSAGE_ID):
            props[MessageConst.ORIGIN_MESSAGE_ID] = (
                props.get(MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX) or record.msg_id
            )
        msg = record.reposted(
            dlq, 0, record.store_host, properties_to_string(props), keep_transaction_offset=False
        )
        store = self.service.store
        pending = store.put_message_nowait(msg)
        result = pending.result
        if not result.ok or result.append is None:
            log.error("DLQ copy of %s for group %s failed: %s", record.msg_id, group, result.status.name)
            return False
        fut = pending.flush_future
        if fut is not None:  # SYNC_FLUSH: the group commit covers it
            try:
                timeout = store.config.sync_flush_timeout / 1000
                flushed = await result_within(asyncio.wrap_future(fut), timeout)
            except TimeoutError:
                return False
            return flushed
        return await _flushed(store, result.append.end_offset)

    def _check(self, group: str, topic: str, queue_id: int, *, any_queue: bool = False) -> tuple[int, int]:
        """The topic's read queue count and the group's retryMaxTimes, after the pull's checks of
        broker, group, topic and queue."""
        if not perm.is_readable(self.broker.broker_permission):
            raise _refuse(
                ResponseCode.NO_PERMISSION, f"the broker[{self.broker.broker_ip1}] pop message is forbidden"
            )
        cfg = self.groups.find(group)
        if cfg is None:
            raise _refuse(
                ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, f"subscription group [{group}] does not exist"
            )
        if not cfg.consume_enable:
            raise _refuse(ResponseCode.NO_PERMISSION, f"subscription group no permission, {group}")
        tc = self.topics.select(topic)
        if tc is None:
            raise _refuse(ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist, apply first please!")
        if not perm.is_readable(tc.perm):
            raise _refuse(ResponseCode.NO_PERMISSION, f"the topic[{topic}] peeking message is forbidden")
        if not (any_queue and queue_id == -1) and not 0 <= queue_id < tc.read_queue_nums:
            raise _refuse(
                ResponseCode.SYSTEM_ERROR,
                f"queueId[{queue_id}] is illegal, topic:[{topic}] "
                f"topicConfig.readQueueNums:[{tc.read_queue_nums}]",
            )
        return tc.read_queue_nums, cfg.retry_max_times

    async def _persist(self) -> None:
        """Wait until the POP log holds the change: an answered ack is never lost to a crash."""
        try:
            await self.service.durable()
        except OSError as exc:
            log.error("cannot write the POP log: %s", exc)
            raise _refuse(
                ResponseCode.SYSTEM_ERROR, "cannot write the POP state log; see the broker log"
            ) from exc

    # -- the typed cores ---------------------------------------------------------------------
    async def pop(self, request: PopRequest) -> PopBatch:
        """Hand out up to `max_messages` (see `PopRequest`); an empty batch once the poll time is
        over. The batch is in the POP log before it is returned. Refusals raise `RocketliteError`
        with their response code."""
        r = request
        read_queues, max_times = self._check(r.group, r.topic, r.queue_id, any_queue=True)
        if not 0 < r.max_messages <= MAX_POP_NUMS:
            raise _refuse(
                ResponseCode.SYSTEM_ERROR, f"maxMsgNums {r.max_messages} is not within 1..{MAX_POP_NUMS}"
            )
        if r.invisible_ms <= 0:
            raise _refuse(ResponseCode.SYSTEM_ERROR, f"invisibleTime {r.invisible_ms} ms is not positive")
        # TAG or SQL92; SUBSCRIPTION_PARSE_FAILED (23) if malformed
        filters = subscription_filters(r.topic, r.expression, r.expression_type)
        queue_ids = [r.queue_id] if r.queue_id >= 0 else list(range(read_queues))
        loop = asyncio.get_running_loop()
        self._loop, self._loop_thread = loop, threading.get_ident()
        poll_until = loop.time() + min(max(r.poll_ms, 0), MAX_POLL_MS) / 1000
        polling = self.polling
        waiter = Waiter(r.topic, r.group, frozenset(queue_ids))
        look_at = queue_ids
        # a pop joining a line that accounts for every message of its queues waits at once
        skip = not r.order and r.poll_ms > 0 and polling.accounted(waiter)
        try:
            while True:
                polling.join(waiter)  # before looking: an arrival during the look wakes it
                if skip:
                    skip = False
                    self.skipped += 1
                else:
                    batch = await self._pop_once(r, look_at, max_times, filters)
                    self.looks += 1
                    polling.looked(
                        waiter, len(look_at) == len(queue_ids), not batch.runs and batch.rest_num > 0
                    )
                    if batch.runs or loop.time() >= poll_until:
                        break
                left = poll_until - loop.time()
                self._arm_redelivery(loop, r, waiter.queue_ids)
                await wait_event(waiter.event, left)
                over = loop.time() >= poll_until  # the last look is at every queue
                look_at = queue_ids if over else _woken_queues(queue_ids, waiter.woken_for)
        finally:
            polling.pass_on(waiter)  # out of the line; a wake it did not use goes to the next
        if batch.runs and batch.rest_num > 0:  # more than it took (a full batch): the next looks
            polling.wake_one(r.topic, r.group, queue_ids)
        if polling.waiting(r.topic, r.group):  # its batch's deadlines, for the pops still held
            self._arm_redelivery(loop, r, waiter.queue_ids)
        if batch.runs:
            await self._persist()
        return batch

    def _arm_redelivery(
        self, loop: asyncio.AbstractEventLoop, r: PopRequest, queue_ids: frozenset[int]
    ) -> None:
        """The set's one timer (`PopPolling.wake_at`) at the earliest deadline in flight on its
        queues, so a held pop looks when a message is due again."""
        due = self.service.next_deadline(r.group, r.topic, sorted(queue_ids))
        if due is not None:
            delay = max(0.0, (due - self.service.clock.now_ms()) / 1000) + 0.001
            self.polling.wake_at(loop, r.topic, r.group, queue_ids, loop.time() + delay)

    async def _pop_once(
        self,
        r: PopRequest,
        queue_ids: list[int],
        max_times: int,
        filters: tuple[MessageFilter | None, RecordFilter | None],
    ) -> PopBatch:
        """One look at the queues; what goes to the DLQ is forgotten once its copy is durable."""
        dead: list[StoredRecord] = []
        batch = self.service.pop(
            r.group, r.topic, queue_ids, r.max_messages, r.invisible_ms, r.init_mode, filters[0],
            max_reconsume_times=max_times, dead_letter=dead.append, order=r.order,
            confirm_dead_letter=True, record_filter=filters[1],
        )  # fmt: skip
        for record in dead:
            if await self.dead_letter(r.group, record):
                self.service.dead_lettered(r.group, r.topic, record.queue_id, record.queue_offset)
        if dead and not batch.runs:  # with messages, the answer's persist covers it
            await self._persist()
        return batch

    async def ack(self, request: AckRequest) -> None:
        """Acknowledge one delivery; durable when this returns. A malformed handle, or one naming
        no delivery in flight, raises with NO_MESSAGE."""
        r = request
        self._check(r.group, r.topic, r.queue_id)
        handle = ReceiptHandle.parse(r.handle)
        check_place((r.group, r.topic, r.queue_id), r.offset, handle)
        one: HandleAck = (r.queue_id, r.offset, handle.pop_time, handle.topic_type, handle.broker_name)
        refusal = (await self.ack_all(r.group, r.topic, [one]))[0]
        if refusal is not None:
            raise refusal

    async def ack_all(self, group: str, topic: str, acks: list[HandleAck]) -> list[RocketliteError | None]:
        """`ack` of several deliveries of one group and topic, each (queueId, offset, popTime, topic
        type, broker name) as its handle reads: each one's refusal, or None (`columns.split_acks`
        refuses a handle of another broker or topic type; `ack_columns` does the rest)."""
        found, mine = split_acks(acks, self.service.broker_name)
        refusals: list[RocketliteError | None] = list(found)
        for k, refusal in (
            await self.ack_columns(group, topic, mine.queue_ids, mine.offsets, mine.pop_times)
        ).items():
            refusals[mine.at[k]] = refusal
        return refusals

    async def ack_columns(
        self, group: str, topic: str, queue_ids: list[int], offsets: list[int], pop_times: list[int]
    ) -> dict[int, RocketliteError]:
        """The core of every ack (4.x ACK_MESSAGE, 5.x AckMessage): entry k acks queue
        `queue_ids[k]`'s offset `offsets[k]` delivered at `pop_times[k]`, by a handle of this
        broker for a normal topic (the caller refuses the others). The checks once per queue, the
        state changed in one call (`PopService.ack_columns`), one wait for the POP log for all
        of them (one fdatasync, not one each). Returns the refused entries by place; every
        accepted one is durable when this returns (if the log cannot be written, each of them
        gets that refusal)."""
        n = len(offsets)
        refused: dict[int, RocketliteError] = {}
        queues = set(queue_ids)
        places: list[int] | None = None  # when some queues are refused: the places of the rest
        for queue_id in sorted(queues):
            try:
                self._check(group, topic, queue_id)
            except RocketliteError as exc:
                refused.update((k, exc) for k, q in enumerate(queue_ids) if q == queue_id)
        if refused:
            places = [k for k in range(n) if k not in refused]
            queue_ids = [queue_ids[k] for k in places]
            offsets = [offsets[k] for k in places]
            pop_times = [pop_times[k] for k in places]
            queues = set(queue_ids)
        stale = self.service.ack_columns(group, topic, queue_ids, offsets, pop_times)
        refused.update((k if places is None else places[k], exc) for k, exc in stale.items())
        if len(stale) < len(offsets):  # some were acked
            self._acked(group, topic, queues)
            try:
                await self._persist()
            except RocketliteError as exc:
                return {k: refused.get(k, exc) for k in range(n)}
        return refused

    def _acked(self, group: str, topic: str, queue_ids: set[int]) -> None:
        """After acks: a queue they left with nothing in flight and messages waiting wakes one
        held pop of the group on it. An ordered (FIFO) pop held while the queue was busy takes
        them now rather than at the end of its polling time (RocketMQ notifies the long polling
        when an ordered queue's lock is freed)."""
        polling = self.polling
        if not polling.waiting(topic, group):
            return
        for queue_id in queue_ids:
            if self.service.freed(group, topic, queue_id):
                polling.wake_one(topic, group, (queue_id,))

    async def change_invisible(self, request: ChangeInvisibleRequest) -> int:
        """Make a delivery visible again `invisible_ms` from now; the new popTime (of the new
        receipt handle), durable when this returns."""
        r = request
        self._check(r.group, r.topic, r.queue_id)
        if r.invisible_ms <= 0:
            raise _refuse(ResponseCode.SYSTEM_ERROR, f"invisibleTime {r.invisible_ms} ms is not positive")
        handle = ReceiptHandle.parse(r.handle)
        pop_time = self.service.change_invisible_time(
            r.group, r.topic, r.queue_id, r.offset, handle, r.invisible_ms
        )
        await self._persist()
        # A held POP waits for the deadlines it saw when it last looked: wake one of the group's
        # to look again, or a message made visible in 1 s would wait out its long polling (20 s).
        self.polling.wake_one(r.topic, r.group, (r.queue_id,))
        return pop_time

    # -- the remoting adapters --------------------------------------------------------------
    async def handle_pop(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        h = PopMessageRequestHeader.from_ext(request.ext_fields)
        pop = PopRequest(
            h.consumer_group, h.topic, h.queue_id, h.max_msg_nums, h.invisible_time, h.poll_time,
            h.init_mode, h.exp_type, h.exp, bool(h.order),
        )  # fmt: skip
        batch = await self.pop(pop)
        if not batch.messages:
            return make_response(request, POLLING_TIMEOUT, "no new message")
        log.debug(
            "%s popped %d from %s for %s", conn.remote_address, len(batch.messages), h.topic, h.consumer_group
        )
        return make_response(
            request, ResponseCode.SUCCESS, None, self._pop_header(h.topic, batch), _body(batch)
        )

    @staticmethod
    def _pop_header(topic: str, batch: PopBatch) -> dict[str, str]:
        kind = topic_type(topic)
        by_queue: dict[int, list[int]] = {}
        for m in batch.messages:
            by_queue.setdefault(m.queue_id, []).append(m.queue_offset)
        return PopMessageResponseHeader(
            pop_time=batch.pop_time,
            invisible_time=batch.invisible_time,
            revive_qid=REVIVE_QID,
            rest_num=batch.rest_num,
            start_offset_info=offset_info([(kind, q, [s]) for q, s in batch.start_offsets.items()]),
            msg_offset_info=offset_info([(kind, q, offs) for q, offs in by_queue.items()]),
        ).to_ext()

    async def handle_ack(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        del conn
        h = AckMessageRequestHeader.from_ext(request.ext_fields)
        await self.ack(AckRequest(h.consumer_group, h.topic, h.queue_id, h.offset, h.extra_info))
        return make_response(request, ResponseCode.SUCCESS)

    async def handle_change_invisible_time(
        self, conn: Connection, request: RemotingCommand
    ) -> RemotingCommand:
        del conn
        h = ChangeInvisibleTimeRequestHeader.from_ext(request.ext_fields)
        pop_time = await self.change_invisible(
            ChangeInvisibleRequest(
                h.consumer_group, h.topic, h.queue_id, h.offset, h.extra_info, h.invisible_time
            )
        )
        ext = ChangeInvisibleTimeResponseHeader(
            pop_time=pop_time, invisible_time=h.invisible_time, revive_qid=REVIVE_QID
        ).to_ext()
        return make_response(request, ResponseCode.SUCCESS, None, ext)


def _woken_queues(queue_ids: list[int], woken_for: frozenset[int] | None) -> list[int]:
    """The queues a woken pop looks at: those its wake names (`PopPolling`: since its first
    look, at all of them, every arrival on another queue went to another waiter)."""
    if woken_for is None:
        return queue_ids
    return [q for q in queue_ids if q in woken_for] or queue_ids


async def _flushed(store: StoreAPI, end: int) -> bool:
    """Whether the commit log is on disk up to `end`, flushing it off the loop when the flush
    thread has not yet (ASYNC_FLUSH: it may be seconds away; `StoreAPI.flush_to`)."""
    return await asyncio.get_running_loop().run_in_executor(None, store.flush_to, end)


def _body(batch: PopBatch) -> bytes:
    return b"".join(m.record for m in batch.messages)
