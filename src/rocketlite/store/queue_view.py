"""`QueueView`: what the broker may read of one consume queue, without holding the queue itself.

The broker's own services walk system queues unit by unit (the delay levels of
SCHEDULE_TOPIC_XXXX, the timer topic, the transaction half and op queues): they need the queue's
bounds, the unit at an offset (padding included, so they can skip it as RocketMQ does) and the
record a unit points at. `MessageStore.queue` hands out this view instead of the `ConsumeQueue`,
so that appending, recovery, truncation and flushing stay behind the store's façade (`api.py`).

A view is live: its bounds are read from the queue at every call, so one view may be kept for
as long as the queue exists (the store never replaces a queue object; deleting a topic does).

`pull_from` is the other reader of a queue, the pull's (`StoreReader.get_message`, `reader.py`): RocketMQ's
statuses from the queue's bounds (an offset below, at or past the end, a file gone), and the
records themselves from `ConsumeQueue.read`.
"""

from __future__ import annotations

from collections.abc import Callable

from rocketlite.protocol.formats.consume_queue_unit import Unit, is_padding
from rocketlite.store.commit_log import CommitLog
from rocketlite.store.consume_queue import ConsumeQueue
from rocketlite.store.queue_read import RecordFilter
from rocketlite.store.results import GetMessageResult, GetMessageStatus

__all__ = ["QueueView", "pull_from"]


class QueueView:
    """Read-only: bounds, units and the records they point at, of one (topic, queueId)."""

    __slots__ = ("_cq", "_log")

    def __init__(self, cq: ConsumeQueue, commit_log: CommitLog) -> None:
        self._cq = cq
        self._log = commit_log

    @property
    def topic(self) -> str:
        return self._cq.topic

    @property
    def queue_id(self) -> int:
        return self._cq.queue_id

    @property
    def min_offset(self) -> int:
        """The first queue offset whose record is still in the log (getMinOffsetInQueue)."""
        return self._cq.min_offset

    @property
    def max_offset(self) -> int:
        """The next queue offset to be written, padding included (getMaxOffsetInQueue)."""
        return self._cq.max_offset

    def unit(self, offset: int) -> Unit | None:
        """(commit-log offset, size, tags code) at queue `offset`, padding as is (`is_padding`);
        None outside [min_offset, max_offset) or when its file is unreadable."""
        return self._cq.get_unit(offset)

    def units(self, start: int, count: int) -> list[Unit] | None:
        """Up to `count` units from queue offset `start`, padding as is (QUERY_CONSUME_QUEUE); None
        when `start` lies outside [min_offset, max_offset) (Java's `iterateFrom` returns null)."""
        if not self._cq.min_offset <= start < self._cq.max_offset:
            return None
        units: list[Unit] = []
        for index in range(start, min(start + max(count, 0), self._cq.max_offset)):
            unit = self._cq.get_unit(index)
            if unit is None:
                break
            units.append(unit)
        return units

    def read(self, offset: int) -> memoryview | None:
        """The stored bytes of the record the unit at queue `offset` points at (zero-copy: release
        the view promptly, it keeps the segment mapped); None for padding, outside the queue, or
        when the record is no longer in the commit log."""
        unit = self._cq.get_unit(offset)
        if unit is None or is_padding(unit):
            return None
        return self._log.get_message(unit[0], unit[1])

    def __repr__(self) -> str:
        return f"QueueView({self.topic!r}, {self.queue_id}, [{self.min_offset}, {self.max_offset}))"


def pull_from(
    cq: ConsumeQueue,
    commit_log: CommitLog,
    offset: int,
    max_count: int,
    max_bytes: int,
    message_filter: Callable[[int], bool] | None,
    correct: Callable[[int, int], int],
    record_filter: RecordFilter | None = None,
) -> GetMessageResult:
    """A pull of `cq` from `offset`: at most `max_count` records and `max_bytes` bytes whose tag
    code passes `message_filter` (and whose bytes pass `record_filter`, a property filter), as
    zero-copy slices of the log, with RocketMQ's status and next offset. `correct(old, new)` is
    `nextOffsetCorrection` (a master moves the consumer to `new`, a slave leaves it at `old`).
    `found` is set when the queue was read (FOUND, or nothing that matched)."""
    min_off, max_off = cq.min_offset, cq.max_offset
    result = GetMessageResult(GetMessageStatus.NO_MESSAGE_IN_QUEUE, offset, min_off, max_off)
    if max_off == 0:
        result.next_begin_offset = correct(offset, 0)
        return result
    if offset < min_off:
        result.status, result.next_begin_offset = GetMessageStatus.OFFSET_TOO_SMALL, correct(offset, min_off)
        return result
    if offset == max_off:
        result.status = GetMessageStatus.OFFSET_OVERFLOW_ONE
        return result
    if offset > max_off:
        result.status = GetMessageStatus.OFFSET_OVERFLOW_BADLY
        result.next_begin_offset = correct(offset, max_off)
        return result
    found = cq.read(offset, max_count, max_bytes, message_filter, commit_log, record_filter)
    if found is None:
        result.status = GetMessageStatus.OFFSET_FOUND_NULL
        result.next_begin_offset = correct(offset, cq.roll_next_file(offset))
        return result
    result.found = found
    result.buffer_total_size = found.total_size
    result.next_begin_offset = offset + found.scanned
    if found.parts:
        result.status = GetMessageStatus.FOUND
    elif found.hit_removed:
        result.status = GetMessageStatus.MESSAGE_WAS_REMOVING
    else:
        result.status = GetMessageStatus.NO_MATCHED_MESSAGE
    return result
