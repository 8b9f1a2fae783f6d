"""POP consumption's state and rules: a pop cursor per group/topic/queue, the messages in flight
with their deadlines, ack and change-invisible-time by receipt handle, redelivery with attempt+1.

RocketMQ keeps this as checkpoint and ack messages in system topics, replayed by a revive
service. Here the state is small and explicit, one record per (group, topic, queue):

- `cursor`: the next queue offset never popped by the group (apart from its committed offset);
- `in_flight`: offset -> (popTime, deadline, attempts) for every popped message not yet acked.

Everything below the cursor and not in flight is acked, so the group's committed consumer offset
is the lowest offset in flight (or the cursor when none is): it is written to the consumer-offset
table at each change, which is what `consumerProgress` and a 4.x consumer of the group see.

A message whose deadline has passed is due: the next pop of its queue hands it out again before
any new one, with a new popTime and its record's RECONSUMETIMES raised by its attempts. A handle
names one delivery by its popTime, so the handle of an acked, a redelivered or a never delivered
message (stale or forged) is refused with `StaleReceiptHandleError`, and nothing is acked twice.
popTimes of one message only grow (a redelivery or a change-invisible-time in the same
millisecond takes the old one + 1), so an old handle never matches a newer delivery.

Ordered (FIFO) pops (`order=True`): a queue hands out new messages only when nothing of it is in
flight; a due message of it comes back first, in offset order, with attempt+1, until it is acked
or dead-lettered, then the queue moves on. 5.x FIFO puts one message group on one queue, so this
is per-group order with one batch in flight per group.

Durability: every change is a small record appended to the POP log (`broker/pop/log.py`:
records, snapshot, recovery). The processor awaits `durable()` before answering. Under SYNC_FLUSH
an answered ack is on disk: the changes of one loop iteration share one fdatasync, run off the
loop. Under ASYNC_FLUSH it is in the file (the page cache, which a killed broker does not lose)
and a background fdatasync follows, as RocketMQ's revive-topic records are. A pop or ack lost
with a power loss only means its messages are popped again (at least once, never lost).
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections import Counter, deque
from collections.abc import Callable
from pathlib import Path

from rocketlite.broker.pop.batch import PopBatch, Popped, PoppedRun  # (Popped: re-exported)
from rocketlite.broker.pop.columns import foreign_refusal, in_flight_runs, split_acks
from rocketlite.broker.pop.log import (
    COMPACT_MIN_BYTES,
    MAX_BATCH,
    InFlight,
    PopLog,
    PopLogError,
    QueueKey,
    QueuePopState,
    ack_record,
    change_record,
    cursor_record,
    pop_columns,
)
from rocketlite.broker.state_files import ConsumerOffsetTable
from rocketlite.clock import Clock
from rocketlite.protocol.formats.record import SYSFLAG_POS, StoredRecord, decode_record, layout_for
from rocketlite.protocol.wire.pop import INIT_MODE_MIN, NORMAL_TOPIC, ReceiptHandle, StaleReceiptHandleError
from rocketlite.store.api import MessageFilter, RecordFilter, StoreAPI
from rocketlite.store.results import GetMessageResult, GetMessageStatus

log = logging.getLogger("rocketlite.broker.pop")

__all__ = [
    "InFlight",
    "PopBatch",
    "PopService",
    "Popped",
    "PoppedRun",
    "QueuePopState",
    "check_place",
]

_INT_MAX = 2**31 - 1
_NEVER = 2**63 - 1  # a deadline later than any
DLQ_CONFIRM_MS = 60_000  # a message on its way to the DLQ is hidden this long, awaiting confirmation
# Answers that leave the cursor where it is: nothing past it yet, or no such queue.
_CURSOR_STAYS = frozenset(
    {
        GetMessageStatus.OFFSET_OVERFLOW_ONE,
        GetMessageStatus.NO_MESSAGE_IN_QUEUE,
        GetMessageStatus.NO_MATCHED_LOGIC_QUEUE,
    }
)


# messages picked, and a redelivery's last delivery
Taken = tuple[QueuePopState, PoppedRun, "InFlight | None"]


class PopStateTable:
    """The state in memory (`queues`), its lock, and its log on disk."""

    def __init__(
        self, config_dir: Path, *, compact_min_bytes: int = COMPACT_MIN_BYTES, sync_flush: bool = True
    ) -> None:
        self.lock = threading.RLock()
        self.queues: dict[QueueKey, QueuePopState] = {}
        self.log = PopLog(config_dir, compact_min_bytes=compact_min_bytes, sync_flush=sync_flush)

    def load(self) -> None:
        """Snapshot + log (or an older popState.json); `PopLogError` names a file it cannot read."""
        with self.lock:
            try:
                self.queues = self.log.load()
            except PopLogError:
                raise
            except (ValueError, KeyError, TypeError, IndexError, UnicodeDecodeError) as exc:
                raise PopLogError(f"cannot read the POP state in {self.log.dir}: {exc!r}") from exc


def with_reconsume_times(record: memoryview | bytes, attempts: int) -> bytes:
    """The record with RECONSUMETIMES raised by `attempts` (where its layout puts the field)."""
    out = bytearray(record)
    if attempts:
        sys_flag = int.from_bytes(out[SYSFLAG_POS : SYSFLAG_POS + 4], "big", signed=True)
        pos = layout_for(sys_flag).reconsume_pos
        stored = int.from_bytes(out[pos : pos + 4], "big", signed=True)
        total = min(stored + attempts, _INT_MAX)
        out[pos : pos + 4] = total.to_bytes(4, "big", signed=True)
    return bytes(out)


class PopService:
    """The rules over `PopStateTable`; called on the broker's event loop (the table's lock also
    guards the state for the threads that write the log)."""

    def __init__(
        self,
        store: StoreAPI,
        offsets: ConsumerOffsetTable,
        clock: Clock,
        config_dir: Path,
        broker_name: str,
        *,
        compact_min_bytes: int = COMPACT_MIN_BYTES,
        sync_flush: bool = True,
    ) -> None:
        """`sync_flush`: the store's flushDiskType is SYNC_FLUSH, so an answer waits for the POP
        log's fdatasync; otherwise only for its write (`broker/pop/log.py`)."""
        self.store = store
        self.offsets = offsets
        self.clock = clock
        self.broker_name = broker_name
        self.table = PopStateTable(config_dir, compact_min_bytes=compact_min_bytes, sync_flush=sync_flush)
        self._dead: set[tuple[QueueKey, int]] = set()  # on their way to the DLQ, unconfirmed
        # RocketMQ 5's POP metrics (PopMetricsManager) over this design, by (group, topic[, type]):
        # checkpoints (POP records) and acks written to the POP log, RocketMQ's revive "in"; due
        # checkpoints taken back by a pop (redelivered or dead-lettered), its revive "out" of CKs;
        # redeliveries, its puts to the retry topic (here the message comes back in place)
        self.revive_in: Counter[tuple[str, str, str]] = Counter()
        self.revive_out: Counter[tuple[str, str, str]] = Counter()
        self.retried: Counter[tuple[str, str]] = Counter()

    def load(self) -> None:
        self.table.load()

    def persist(self) -> bool:
        """Write and fdatasync every change so far (blocking: for threads and tests; the event
        loop awaits `durable`). False on an OS error, which the log names."""
        ok = self.table.log.sync()
        if ok and self.table.log.wants_compaction():
            self.compact()
        return ok

    async def durable(self) -> None:
        """Until every change made so far is on disk (SYNC_FLUSH: one fdatasync for all the
        changes of a loop iteration, off the loop) or written to the file (ASYNC_FLUSH). Compacts
        the log in a thread when it has grown large."""
        log_ = self.table.log
        await log_.durable()
        if log_.wants_compaction():
            await asyncio.get_running_loop().run_in_executor(None, self.compact)

    def compact(self) -> None:
        """Snapshot the state and restart the log (blocking)."""
        log_ = self.table.log
        if log_.wants_compaction():
            log_.compact(self.table.queues, self.table.lock)

    def close(self) -> None:
        """Write what is pending and close the log."""
        self.table.log.sync()
        self.table.log.close()

    # -- pop ----------------------------------------------------------------------------------
    def _state(self, group: str, topic: str, queue_id: int, init_mode: int) -> QueuePopState:
        key = (group, topic, queue_id)
        state = self.table.queues.get(key)
        if state is None:
            committed = self.offsets.query(group, topic, queue_id)
            if committed < 0:
                # ConsumeInitMode: MIN from the queue's start; MAX from its end, unless the
                # queue still starts at 0 (a young queue is read whole, as QUERY_CONSUMER_OFFSET).
                low = self.store.get_min_offset_in_queue(topic, queue_id)
                committed = low if init_mode == INIT_MODE_MIN or low <= 0 else (
                    self.store.get_max_offset_in_queue(topic, queue_id)
                )  # fmt: skip
            state = self.table.queues[key] = QueuePopState(max(0, committed))  # no queue yet: -1
            self.table.log.append(cursor_record(key, state.cursor))
        return state

    def pop(
        self,
        group: str,
        topic: str,
        queue_ids: list[int],
        max_nums: int,
        invisible_time: int,
        init_mode: int,
        message_filter: MessageFilter | None = None,
        *,
        max_reconsume_times: int | None = None,
        dead_letter: Callable[[StoredRecord], None] | None = None,
        order: bool = False,
        confirm_dead_letter: bool = False,
        record_filter: RecordFilter | None = None,
    ) -> PopBatch:
        """Up to `max_nums` messages from `queue_ids` in turn: due redeliveries of a queue first,
        then new ones from its cursor (messages the tag filter or the property filter, SQL92's
        `record_filter`, refuses are passed over for good, as a pull skips them). With `order`,
        a queue with messages in flight hands out only its due ones, in offset order, and
        nothing new (FIFO).

        A due message already redelivered `max_reconsume_times` times is handed to `dead_letter`
        instead (the DLQ). It is forgotten at once, or, with `confirm_dead_letter`, hidden until
        `dead_lettered` says its DLQ copy is durable (a crash before that brings it back, so the
        move is never lost). The caller awaits `durable` before answering."""
        now = self.clock.now_ms()
        taken: list[Taken] = []
        count = 0  # messages in `taken` (a new run holds several)
        looked: dict[int, QueuePopState] = {}
        # Every queue's max offset in one call. A queue with nothing past the cursor is not read:
        # the read would answer OFFSET_OVERFLOW_ONE (or NO_MESSAGE_IN_QUEUE) and leave the cursor
        # where it is. A 5.x receive looks at every queue of its topic, and most are such: at a
        # low rate 16 reads a look were the e2e's largest cost, at saturation the drained ones
        # (docs/benchmarks.md, "where the per-message CPU went" and "the ack as columns").
        ends = dict(zip(queue_ids, self.store.get_max_offsets_in_queues(topic, queue_ids), strict=True))
        with self.table.lock:
            for queue_id in queue_ids:
                state = looked[queue_id] = self._state(group, topic, queue_id, init_mode)
                if count < max_nums:
                    due = self._due(
                        (group, topic, queue_id), state, now, max_nums - count, max_reconsume_times,
                        dead_letter, confirm_dead_letter,
                    )  # fmt: skip
                    taken += due
                    count += len(due)  # runs of one
                    if (
                        count < max_nums
                        and state.cursor != ends[queue_id]
                        and not (order and state.in_flight)
                    ):
                        new = self._new(
                            group, topic, queue_id, state, max_nums - count, message_filter, record_filter,
                            ends,
                        )  # fmt: skip
                        taken += new
                        count += sum(len(run.offsets) for _, run, _ in new)
            rest = sum(max(0, ends[q] - s.cursor) for q, s in looked.items())
            # One popTime for the answer; later than any earlier delivery of what it redelivers.
            pop_time = max([now] + [old.pop_time + 1 for _, _, old in taken if old is not None])
            deadline = pop_time + invisible_time
            starts: dict[int, int] = {}
            # per queue, its offsets handed out and their attempts (columns of its POP record)
            by_queue: dict[int, tuple[list[int], list[int]]] = {}
            offsets: list[int] = []
            attempts: list[int] = []
            last_queue = -1
            shared: dict[int, InFlight] = {}  # one per attempts count: most batches make one
            for state, run, _ in taken:  # run.attempts: its last delivery's + 1, or 0
                delivery = shared.get(run.attempts)
                if delivery is None:
                    delivery = shared[run.attempts] = InFlight(pop_time, deadline, run.attempts)
                state.keep_all(run.offsets, delivery)
                if run.queue_id != last_queue:  # a batch takes a queue's messages in a row
                    last_queue = run.queue_id
                    state.due_from = min(state.due_from, deadline)
                    if last_queue not in by_queue:
                        by_queue[last_queue] = ([], [])
                        starts[last_queue] = run.offsets[0]
                    offsets, attempts = by_queue[last_queue]
                offsets += run.offsets
                attempts += [run.attempts] * len(run.offsets)
            for queue_id, (offsets, attempts) in by_queue.items():  # one record per queue, whatever the count
                key = (group, topic, queue_id)
                cursor = self.table.queues[key].cursor
                for i in range(0, len(offsets), MAX_BATCH):
                    part = slice(i, i + MAX_BATCH)
                    record = pop_columns(key, cursor, pop_time, deadline, offsets[part], attempts[part])
                    self.table.log.append(record)
                    self.revive_in[(group, topic, "CK")] += 1
            # every queue looked at: its lowest offset in flight, in one call
            self.offsets.commit_all(group, topic, {q: s.committed() for q, s in looked.items()})
        return PopBatch(pop_time, invisible_time, [run for _, run, _ in taken], starts, rest, count)

    def _due(
        self,
        key: QueueKey,
        state: QueuePopState,
        now: int,
        left: int,
        max_reconsume_times: int | None,
        dead_letter: Callable[[StoredRecord], None] | None,
        confirm_dead_letter: bool,
    ) -> list[Taken]:
        if now < state.due_from:
            return []  # nothing in flight is due yet: no scan of the queue's in-flight messages
        group, topic, queue_id = key
        out: list[Taken] = []
        gone: list[int] = []
        ready: list[int] = []
        earliest = _NEVER
        for o, f in state.in_flight.items():
            if f.deadline <= now:
                ready.append(o)
            elif f.deadline < earliest:
                earliest = f.deadline
        ready.sort()
        # Redelivered ones get their new deadline from the pop; one left due keeps the bound at now.
        state.due_from = earliest if len(ready) <= left else now
        for offset in ready:
            if len(out) >= left:
                break
            entry = state.in_flight[offset]
            found = self.store.get_message(group, topic, queue_id, offset, 1)
            try:
                if found.status is not GetMessageStatus.FOUND or found.queue_offsets[0] != offset:
                    log.warning(
                        "%s: %s:%d offset %d is gone from the store; dropped", group, topic, queue_id, offset
                    )
                    del state.in_flight[offset]
                    gone.append(offset)
                    continue
                if (
                    dead_letter is not None
                    and max_reconsume_times is not None
                    and entry.attempts >= max_reconsume_times
                ):
                    dead_letter(decode_record(with_reconsume_times(found.messages[0], entry.attempts)))
                    log.info(
                        "%s: %s:%d offset %d to the DLQ after %d redeliveries",
                        group, topic, queue_id, offset, entry.attempts,
                    )  # fmt: skip
                    if confirm_dead_letter:  # hidden (in memory only) until the DLQ copy is durable
                        hidden = InFlight(entry.pop_time, now + DLQ_CONFIRM_MS, entry.attempts)
                        state.in_flight[offset] = hidden
                        state.due_from = min(state.due_from, hidden.deadline)
                        self._dead.add((key, offset))
                    else:
                        del state.in_flight[offset]
                        gone.append(offset)
                    continue
                record = with_reconsume_times(found.messages[0], entry.attempts + 1)
            finally:
                found.release()
            out.append((state, PoppedRun(queue_id, [offset], record, [-1], entry.attempts + 1), entry))
            self.retried[(group, topic)] += 1
        if out or gone:
            self.revive_out[(group, topic, "CK")] += len(out) + len(gone)
        if gone:
            self.table.log.append(ack_record(key, gone))
        return out

    def dead_lettered(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        """A message handed to `dead_letter` under `confirm_dead_letter` has a durable DLQ copy:
        forget it (logged as acked)."""
        key = (group, topic, queue_id)
        with self.table.lock:
            self._dead.discard((key, offset))
            state = self.table.queues.get(key)
            if state is not None and state.in_flight.pop(offset, None) is not None:
                self.table.log.append(ack_record(key, [offset]))
                self._commit(group, topic, queue_id)

    def _new(
        self,
        group: str,
        topic: str,
        queue_id: int,
        state: QueuePopState,
        left: int,
        message_filter: MessageFilter | None,
        record_filter: RecordFilter | None,
        ends: dict[int, int],
    ) -> list[Taken]:
        """New messages from the cursor; `ends` gets the queue's max offset as the read saw it
        (for the rest count)."""
        if left <= 0:
            return []
        found: GetMessageResult = self.store.get_message(
            group, topic, queue_id, state.cursor, left, message_filter, record_filter=record_filter
        )
        ends[queue_id] = found.max_offset
        try:
            out: list[Taken] = []
            if found.message_count:  # one copy of the read: the answer outlives it
                data, sizes = found.copied()
                out.append((state, PoppedRun(queue_id, found.queue_offsets, data, sizes, 0), None))
            if found.status not in _CURSOR_STAYS and found.next_begin_offset != state.cursor:
                state.cursor = found.next_begin_offset  # found, filtered, or corrected past a gap
                if not out:  # with messages, their POP record carries the cursor
                    self.table.log.append(cursor_record((group, topic, queue_id), state.cursor))
        finally:
            found.release()
        return out

    def _commit(self, group: str, topic: str, queue_id: int) -> None:
        state = self.table.queues.get((group, topic, queue_id))
        if state is not None:
            self.offsets.commit(group, topic, queue_id, state.committed())

    # -- ack / change invisible time ----------------------------------------------------------
    def _refusal(
        self, key: QueueKey, offset: int, pop_time: int, topic_type: str, broker_name: str
    ) -> StaleReceiptHandleError | InFlight:
        """The delivery in flight at `offset` that a handle of this popTime, topic type and broker
        names, or why it names none (the handle's queue and offset checked already)."""
        foreign = foreign_refusal(topic_type, broker_name, self.broker_name)
        if foreign is not None:
            return foreign
        state = self.table.queues.get(key)
        entry = state.in_flight.get(offset) if state is not None else None
        if entry is None or (self._dead and (key, offset) in self._dead):
            return StaleReceiptHandleError(
                f"no message in flight at {_where(key, offset)}: acked already or never popped"
            )
        if entry.pop_time != pop_time:
            return StaleReceiptHandleError(
                f"receipt handle of popTime {pop_time} is stale at {_where(key, offset)}: "
                f"the message was delivered again at {entry.pop_time}"
            )
        return entry

    def _in_flight(
        self, group: str, topic: str, queue_id: int, offset: int, handle: ReceiptHandle
    ) -> InFlight:
        key = (group, topic, queue_id)
        check_place(key, offset, handle)
        found = self._refusal(key, offset, handle.pop_time, handle.topic_type, handle.broker_name)
        if isinstance(found, StaleReceiptHandleError):
            raise found
        return found

    def ack(self, group: str, topic: str, queue_id: int, offset: int, handle: ReceiptHandle) -> None:
        """Forget a delivered message for good; a stale or forged handle raises and changes nothing."""
        check_place((group, topic, queue_id), offset, handle)
        delivery = (offset, handle.pop_time, handle.topic_type, handle.broker_name)
        refusal = self.ack_all(group, topic, queue_id, [delivery])[0]
        if refusal is not None:
            raise refusal

    def ack_all(
        self, group: str, topic: str, queue_id: int, acks: list[tuple[int, int, str, str]]
    ) -> list[StaleReceiptHandleError | None]:
        """`ack` of several deliveries of one queue, in order, each (offset, popTime, topic type,
        broker name) as its handle reads: each one's refusal or None (`columns.split_acks`, then
        `ack_columns`)."""
        refusals, mine = split_acks([(queue_id, *one) for one in acks], self.broker_name)
        for k, refusal in self.ack_columns(
            group, topic, mine.queue_ids, mine.offsets, mine.pop_times
        ).items():
            refusals[mine.at[k]] = refusal
        return refusals

    def ack_columns(
        self, group: str, topic: str, queue_ids: list[int], offsets: list[int], pop_times: list[int]
    ) -> dict[int, StaleReceiptHandleError]:
        """`ack` of several deliveries given as columns: entry k acks queue `queue_ids[k]`'s offset
        `offsets[k]` delivered at `pop_times[k]`, by a handle of this broker for a normal topic
        (the caller checked those). Returns the refused entries by place, so nothing is acked
        twice. Each queue's accepted offsets make one ACK record and one offset commit; the
        common case takes no Python step per entry (`columns.in_flight_runs`)."""
        with self.table.lock:
            dead, queues = self._dead, self.table.queues
            runs = None if dead else in_flight_runs(queues, group, topic, queue_ids, offsets, pop_times)
            if runs is None:
                return self._ack_each(group, topic, queue_ids, offsets, pop_times)
            for key, (in_flight, acked) in runs.items():
                deque(map(in_flight.__delitem__, acked), maxlen=0)
                self._acked(key, acked)
            return {}

    def _ack_each(
        self, group: str, topic: str, queue_ids: list[int], offsets: list[int], pop_times: list[int]
    ) -> dict[int, StaleReceiptHandleError]:
        """`ack_columns` entry by entry (under the lock), each refusal naming its cause."""
        refused: dict[int, StaleReceiptHandleError] = {}
        accepted: dict[int, list[int]] = {}
        queues, dead = self.table.queues, self._dead
        for k, (queue_id, offset, pop_time) in enumerate(zip(queue_ids, offsets, pop_times, strict=True)):
            key = (group, topic, queue_id)
            state = queues.get(key)
            entry = state.in_flight.get(offset) if state is not None else None
            if entry is None or entry.pop_time != pop_time or (dead and (key, offset) in dead):
                found = self._refusal(key, offset, pop_time, NORMAL_TOPIC, self.broker_name)
                assert isinstance(found, StaleReceiptHandleError)
                refused[k] = found
                continue
            assert state is not None
            del state.in_flight[offset]
            accepted.setdefault(queue_id, []).append(offset)
        for queue_id, acked in accepted.items():
            self._acked((group, topic, queue_id), acked)
        return refused

    def _acked(self, key: QueueKey, offsets: list[int]) -> None:
        """After `offsets` of a queue left the in-flight set: their ACK records, the count, the
        queue's committed offset."""
        group, topic, queue_id = key
        for at in range(0, len(offsets), MAX_BATCH):
            self.table.log.append(ack_record(key, offsets[at : at + MAX_BATCH]))
        self.revive_in[(group, topic, "ACK")] += len(offsets)
        self._commit(group, topic, queue_id)

    def change_invisible_time(
        self, group: str, topic: str, queue_id: int, offset: int, handle: ReceiptHandle, invisible_time: int
    ) -> int:
        """Move a delivered message's deadline to now + `invisible_time`; returns the new popTime,
        which the client's new handle carries (the old handle is stale from then on)."""
        with self.table.lock:
            old = self._in_flight(group, topic, queue_id, offset, handle)
            pop_time = max(self.clock.now_ms(), old.pop_time + 1)
            entry = InFlight(pop_time, pop_time + invisible_time, old.attempts)
            key = (group, topic, queue_id)
            state = self.table.queues[key]
            state.in_flight[offset] = entry
            state.due_from = min(state.due_from, entry.deadline)
            self.table.log.append(change_record(key, offset, entry.pop_time, entry.deadline))
            return entry.pop_time

    def freed(self, group: str, topic: str, queue_id: int) -> bool:
        """Whether the group has nothing of the queue in flight and messages wait past its cursor:
        an ordered pop held on the queue can take them now (an ack just freed it)."""
        with self.table.lock:
            state = self.table.queues.get((group, topic, queue_id))
            if state is None or state.in_flight:
                return False
            cursor = state.cursor
        return self.store.get_max_offset_in_queue(topic, queue_id) > cursor

    def next_deadline(self, group: str, topic: str, queue_ids: list[int]) -> int | None:
        """When a held pop must look again (ms): no later than the earliest deadline in flight on
        these queues. Each queue's `due_from` bound, with no scan of its messages: a bound
        earlier than the real deadline (an acked message's, 0 after a restart) only makes the
        held pop look once sooner, and that look's scan makes the bound exact."""
        due: int | None = None
        with self.table.lock:
            for q in queue_ids:
                state = self.table.queues.get((group, topic, q))
                if state is None or not state.in_flight:
                    continue
                at = state.due_from
                if at >= _NEVER:  # not known (cannot be, with messages in flight): look
                    at = min(f.deadline for f in state.in_flight.values())
                if due is None or at < due:
                    due = at
        return due

    def revive_behind(self) -> tuple[int, int]:
        """Messages whose invisible time is over and that no pop has taken back yet, and how long
        (ms) the oldest has waited: RocketMQ's revive lag and latency (its revive service takes
        a due checkpoint back on its own; here the next pop of the queue does)."""
        now = self.clock.now_ms()
        count, oldest = 0, now
        with self.table.lock:
            for key, state in self.table.queues.items():
                for offset, entry in state.in_flight.items():
                    if entry.deadline <= now and (key, offset) not in self._dead:
                        count += 1
                        oldest = min(oldest, entry.deadline)
        return count, now - oldest

    def in_flight(self, group: str, topic: str, queue_id: int) -> dict[int, InFlight]:
        """A copy of a queue's in-flight messages (for tests and admin)."""
        with self.table.lock:
            state = self.table.queues.get((group, topic, queue_id))
            return {
                o: InFlight(f.pop_time, f.deadline, f.attempts)
                for o, f in (state.in_flight.items() if state else ())
            }


def _where(key: QueueKey, offset: int) -> str:
    group, topic, queue_id = key
    return f"{topic}:{queue_id} offset {offset} for group {group}"


def check_place(key: QueueKey, offset: int, handle: ReceiptHandle) -> None:
    """A handle naming another queue or offset than the request is refused."""
    if handle.queue_id != key[2] or handle.queue_offset not in (None, offset):
        raise StaleReceiptHandleError(
            f"receipt handle names queue {handle.queue_id} offset {handle.queue_offset}, "
            f"the request {_where(key, offset)}"
        )
