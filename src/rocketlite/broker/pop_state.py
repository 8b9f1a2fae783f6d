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

Durability: `popState.json` in the config dir, replaced with `atomic_file.write_atomically` after
every pop, ack and change, before the answer leaves (the processor awaits `persist`). A crash
therefore loses no ack that was answered, and a pop lost with the crash only means its messages
are popped again (at least once, never lost).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rocketlite.broker.state_files import ConsumerOffsetTable, JsonConfigFile
from rocketlite.clock import Clock
from rocketlite.protocol.pop import (
    INIT_MODE_MIN,
    NORMAL_TOPIC,
    ReceiptHandle,
    StaleReceiptHandleError,
)
from rocketlite.protocol.record import SYSFLAG_POS, StoredRecord, decode_record, layout_for
from rocketlite.store.get_result import GetMessageResult
from rocketlite.store.message_store import MessageFilter, MessageStore
from rocketlite.store.status import GetMessageStatus

log = logging.getLogger("rocketlite.broker.pop")

QueueKey = tuple[str, str, int]  # group, topic, queue id
_INT_MAX = 2**31 - 1
# Answers that leave the cursor where it is: nothing past it yet, or no such queue.
_CURSOR_STAYS = frozenset(
    {
        GetMessageStatus.OFFSET_OVERFLOW_ONE,
        GetMessageStatus.NO_MESSAGE_IN_QUEUE,
        GetMessageStatus.NO_MATCHED_LOGIC_QUEUE,
    }
)


@dataclass(slots=True)
class InFlight:
    pop_time: int
    deadline: int  # wall-clock ms; due for redelivery from then on
    attempts: int  # deliveries before this one (0 on the first)


@dataclass(slots=True)
class QueuePopState:
    cursor: int
    in_flight: dict[int, InFlight] = field(default_factory=dict)

    def committed(self) -> int:
        return min(self.in_flight, default=self.cursor)


@dataclass(slots=True)
class Popped:
    """One message handed out: its record bytes (RECONSUMETIMES patched) and where it is."""

    queue_id: int
    queue_offset: int
    record: bytes
    attempts: int


@dataclass(slots=True)
class PopBatch:
    pop_time: int
    invisible_time: int
    messages: list[Popped]
    start_offsets: dict[int, int]  # queue id -> first offset handed out
    rest_num: int  # messages left in the queues after the cursor


Taken = tuple[QueuePopState, Popped, "InFlight | None"]  # a message picked, and its last delivery


class PopStateTable(JsonConfigFile):
    """The persisted state: `{"queues": [{group, topic, queueId, cursor, inFlight: [[offset,
    popTime, deadline, attempts], ...]}]}`."""

    file_name = "popState.json"

    def __init__(self, config_dir: Path) -> None:
        super().__init__(config_dir)
        self.queues: dict[QueueKey, QueuePopState] = {}

    def encode(self) -> str:
        rows = [
            {"group": g, "topic": t, "queueId": q, "cursor": s.cursor,
             "inFlight": [[o, f.pop_time, f.deadline, f.attempts] for o, f in sorted(s.in_flight.items())]}
            for (g, t, q), s in sorted(self.queues.items())
        ]  # fmt: skip
        return json.dumps({"version": 1, "queues": rows}, indent=1)

    def decode(self, text: str) -> None:
        data: Any = json.loads(text)
        queues: dict[QueueKey, QueuePopState] = {}
        for row in data["queues"]:
            state = QueuePopState(int(row["cursor"]))
            for offset, pop_time, deadline, attempts in row["inFlight"]:
                state.in_flight[int(offset)] = InFlight(int(pop_time), int(deadline), int(attempts))
            queues[(str(row["group"]), str(row["topic"]), int(row["queueId"]))] = state
        self.queues = queues


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
    guards the state for the persisting thread)."""

    def __init__(
        self,
        store: MessageStore,
        offsets: ConsumerOffsetTable,
        clock: Clock,
        config_dir: Path,
        broker_name: str,
    ) -> None:
        self.store = store
        self.offsets = offsets
        self.clock = clock
        self.broker_name = broker_name
        self.table = PopStateTable(config_dir)

    def load(self) -> None:
        self.table.load()

    def persist(self) -> bool:
        return self.table.persist()

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
    ) -> PopBatch:
        """Up to `max_nums` messages from `queue_ids` in turn: due redeliveries of a queue first,
        then new ones from its cursor (messages the tag filter refuses are passed over for good,
        as a pull skips them). A due message already redelivered `max_reconsume_times` times is
        handed to `dead_letter` instead (the DLQ) and forgotten. The caller persists before
        answering."""
        now = self.clock.now_ms()
        taken: list[Taken] = []
        rest = 0
        with self.table.lock:
            for queue_id in queue_ids:
                state = self._state(group, topic, queue_id, init_mode)
                left = max_nums - len(taken)
                if left > 0:
                    taken += self._due(
                        group, topic, queue_id, state, now, left, max_reconsume_times, dead_letter
                    )
                    taken += self._new(group, topic, queue_id, state, max_nums - len(taken), message_filter)
                rest += max(0, self.store.get_max_offset_in_queue(topic, queue_id) - state.cursor)
            # One popTime for the answer; later than any earlier delivery of what it redelivers.
            pop_time = max([now] + [old.pop_time + 1 for _, _, old in taken if old is not None])
            starts: dict[int, int] = {}
            for state, msg, old in taken:
                attempts = old.attempts + 1 if old is not None else 0
                state.in_flight[msg.queue_offset] = InFlight(pop_time, pop_time + invisible_time, attempts)
                starts.setdefault(msg.queue_id, msg.queue_offset)
            for queue_id in queue_ids:
                self._commit(group, topic, queue_id)
        return PopBatch(pop_time, invisible_time, [m for _, m, _ in taken], starts, rest)

    def _due(
        self,
        group: str,
        topic: str,
        queue_id: int,
        state: QueuePopState,
        now: int,
        left: int,
        max_reconsume_times: int | None,
        dead_letter: Callable[[StoredRecord], None] | None,
    ) -> list[Taken]:
        out: list[Taken] = []
        for offset in sorted(o for o, f in state.in_flight.items() if f.deadline <= now):
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
                    continue
                if (
                    dead_letter is not None
                    and max_reconsume_times is not None
                    and entry.attempts >= max_reconsume_times
                ):
                    dead_letter(decode_record(with_reconsume_times(found.messages[0], entry.attempts)))
                    log.info(
                        "%s: %s:%d offset %d to the DLQ after %d redeliveries",
                        group,
                        topic,
                        queue_id,
                        offset,
                        entry.attempts,
                    )
                    del state.in_flight[offset]
                    continue
                record = with_reconsume_times(found.messages[0], entry.attempts + 1)
            finally:
                found.release()
            out.append((state, Popped(queue_id, offset, record, entry.attempts + 1), entry))
        return out

    def _new(
        self,
        group: str,
        topic: str,
        queue_id: int,
        state: QueuePopState,
        left: int,
        message_filter: MessageFilter | None,
    ) -> list[Taken]:
        if left <= 0:
            return []
        found: GetMessageResult = self.store.get_message(
            group, topic, queue_id, state.cursor, left, message_filter
        )
        try:
            out: list[Taken] = [
                (state, Popped(queue_id, offset, bytes(view), 0), None)
                for view, offset in zip(found.messages, found.queue_offsets, strict=True)
            ]
            if found.status not in _CURSOR_STAYS:  # found, filtered, or corrected past a gap
                state.cursor = found.next_begin_offset
        finally:
            found.release()
        return out

    def _commit(self, group: str, topic: str, queue_id: int) -> None:
        state = self.table.queues.get((group, topic, queue_id))
        if state is not None:
            self.offsets.commit(group, topic, queue_id, state.committed())

    # -- ack / change invisible time ----------------------------------------------------------
    def _in_flight(
        self, group: str, topic: str, queue_id: int, offset: int, handle: ReceiptHandle
    ) -> InFlight:
        where = f"{topic}:{queue_id} offset {offset} for group {group}"
        if handle.queue_id != queue_id or handle.queue_offset not in (None, offset):
            raise StaleReceiptHandleError(
                f"receipt handle names queue {handle.queue_id} offset {handle.queue_offset}, "
                f"the request {where}"
            )
        if handle.topic_type != NORMAL_TOPIC or handle.broker_name != self.broker_name:
            raise StaleReceiptHandleError(
                f"receipt handle of broker {handle.broker_name!r} (topic type {handle.topic_type}) "
                f"was not issued by this broker ({self.broker_name!r})"
            )
        state = self.table.queues.get((group, topic, queue_id))
        entry = state.in_flight.get(offset) if state is not None else None
        if entry is None:
            raise StaleReceiptHandleError(f"no message in flight at {where}: acked already or never popped")
        if entry.pop_time != handle.pop_time:
            raise StaleReceiptHandleError(
                f"receipt handle of popTime {handle.pop_time} is stale at {where}: "
                f"the message was delivered again at {entry.pop_time}"
            )
        return entry

    def ack(self, group: str, topic: str, queue_id: int, offset: int, handle: ReceiptHandle) -> None:
        """Forget a delivered message for good; a stale or forged handle raises and changes nothing."""
        with self.table.lock:
            self._in_flight(group, topic, queue_id, offset, handle)
            del self.table.queues[(group, topic, queue_id)].in_flight[offset]
            self._commit(group, topic, queue_id)

    def change_invisible_time(
        self, group: str, topic: str, queue_id: int, offset: int, handle: ReceiptHandle, invisible_time: int
    ) -> int:
        """Move a delivered message's deadline to now + `invisible_time`; returns the new popTime,
        which the client's new handle carries (the old handle is stale from then on)."""
        with self.table.lock:
            entry = self._in_flight(group, topic, queue_id, offset, handle)
            entry.pop_time = max(self.clock.now_ms(), entry.pop_time + 1)
            entry.deadline = entry.pop_time + invisible_time
            return entry.pop_time

    def next_deadline(self, group: str, topic: str, queue_ids: list[int]) -> int | None:
        """The earliest deadline in flight on these queues (ms), when a held pop must look again."""
        with self.table.lock:
            deadlines = [
                f.deadline
                for q in queue_ids
                if (state := self.table.queues.get((group, topic, q))) is not None
                for f in state.in_flight.values()
            ]
        return min(deadlines, default=None)

    def in_flight(self, group: str, topic: str, queue_id: int) -> dict[int, InFlight]:
        """A copy of a queue's in-flight messages (for tests and admin)."""
        with self.table.lock:
            state = self.table.queues.get((group, topic, queue_id))
            return {
                o: InFlight(f.pop_time, f.deadline, f.attempts)
                for o, f in (state.in_flight.items() if state else ())
            }
