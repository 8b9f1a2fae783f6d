"""`StoreReader`: the read side of the store's façade: pulls, offset lookups, records by
commit-log offset or by key.

Reads touch no service and change nothing on disk: they need the consume queues, the commit log,
the index and the stats a pull is counted in, and nothing of the
store's lifecycle, writes or services. `MessageStore` builds one reader from those collaborators
and answers the `StoreAPI` read calls through it (`api.py`), so the façade module keeps the wiring,
the lifecycle and the write paths, and the read rules (RocketMQ's statuses and offset corrections)
sit here on their own.

The reader holds no lock, no thread and no settings: a pull's limits come with it, the store's
(`maxTransferCountOnMessageInMemory`, `maxTransferBytesOnMessageInMemory`, live settings) applied
by `MessageStore.get_message`.
"""

from __future__ import annotations

import time

from rocketlite.protocol.formats.consume_queue_unit import is_padding
from rocketlite.protocol.formats.record import StoredRecord, decode_record
from rocketlite.store.api import MessageFilter, RecordFilter
from rocketlite.store.commit_log import CommitLog
from rocketlite.store.consume_queue_store import ConsumeQueueStore
from rocketlite.store.index.service import IndexService
from rocketlite.store.queue_view import QueueView, pull_from
from rocketlite.store.results import GetMessageResult, GetMessageStatus, QueryMessageResult
from rocketlite.store.stats import StoreStats

__all__ = ["StoreReader"]


class StoreReader:
    """What a pull, an offset lookup or a query reads, over the store's structures."""

    def __init__(
        self, commit_log: CommitLog, cq_store: ConsumeQueueStore, index: IndexService | None,
        stats: StoreStats, *, master: bool,
    ) -> None:  # fmt: skip
        self.commit_log = commit_log
        self.cq_store = cq_store
        self.index = index
        self.stats = stats  # a pull's latency, and what it found or missed
        self.master = master  # a slave does not correct a consumer's offset

    def _correct(self, old: int, new: int) -> int:
        """`nextOffsetCorrection`: a master moves the consumer; a slave leaves it be."""
        return new if self.master else old

    def get_message(
        self, topic: str, queue_id: int, offset: int, max_msg_nums: int, max_bytes: int,
        message_filter: MessageFilter | None, record_filter: RecordFilter | None,
    ) -> GetMessageResult:  # fmt: skip
        """Up to `max_msg_nums` records (`max_bytes` at most) of a queue from `offset`, as
        zero-copy slices; with `record_filter` (a property filter) only records whose bytes it
        takes. The limits are the caller's: the store's settings cap a pull's (`MessageStore`).

        The statuses and corrected offsets are RocketMQ's (`DefaultMessageStore.getMessage`, 4.9.4+
        and 5.x): a queue that has no consume queue yet is NO_MESSAGE_IN_QUEUE (Java creates the
        queue on lookup, so its NO_MATCHED_LOGIC_QUEUE never happens), and an offset past the end
        moves the consumer to the queue's end, not back to 0 (ISSUE #4215: going back to 0
        consumed a queue again)."""
        cq = self.cq_store.get(topic, queue_id)
        if cq is None:
            return GetMessageResult(GetMessageStatus.NO_MESSAGE_IN_QUEUE, self._correct(offset, 0))
        begin = time.perf_counter()
        result = pull_from(
            cq, self.commit_log, offset, max_msg_nums, max_bytes, message_filter, self._correct,
            record_filter,
        )  # fmt: skip
        self.stats.record_get((time.perf_counter() - begin) * 1000)  # getMessageEntireTimeMax
        if result.status is GetMessageStatus.FOUND:
            self.stats.get_found += result.message_count
        elif result.found is not None:
            self.stats.get_miss += 1
        return result

    def queue(self, topic: str, queue_id: int) -> QueueView | None:
        """A read-only view of a consume queue (bounds, units, the records they point at), or
        None when the store holds no such queue."""
        cq = self.cq_store.get(topic, queue_id)
        return QueueView(cq, self.commit_log) if cq is not None else None

    def get_max_offset_in_queue(self, topic: str, queue_id: int) -> int:
        cq = self.cq_store.get(topic, queue_id)
        return cq.max_offset if cq is not None else 0

    def get_max_offsets_in_queues(self, topic: str, queue_ids: list[int]) -> list[int]:
        """Each queue's max offset (0 for one the store does not hold), the topic looked up once
        (a POP's rest count over every queue of its topic)."""
        queues = self.cq_store.of_topic(topic)
        return [cq.max_offset if (cq := queues.get(q)) is not None else 0 for q in queue_ids]

    def get_min_offset_in_queue(self, topic: str, queue_id: int) -> int:
        cq = self.cq_store.get(topic, queue_id)
        return cq.min_offset if cq is not None else -1

    def get_commit_log_offset_in_queue(self, topic: str, queue_id: int, cq_offset: int) -> int:
        cq = self.cq_store.get(topic, queue_id)
        unit = cq.get_unit(cq_offset) if cq is not None else None
        return unit[0] if unit is not None and not is_padding(unit) else 0

    def get_message_store_timestamp(self, topic: str, queue_id: int, cq_offset: int) -> int:
        cq = self.cq_store.get(topic, queue_id)
        unit = cq.get_unit(cq_offset) if cq is not None else None
        if unit is None or is_padding(unit):
            return -1
        ts = self.commit_log.store_timestamp_of(unit[0], unit[1])
        return ts if ts is not None else -1

    def get_earliest_message_time(self, topic: str, queue_id: int) -> int:
        cq = self.cq_store.get(topic, queue_id)
        if cq is None:
            return -1
        return self.get_message_store_timestamp(topic, queue_id, cq.min_offset)

    def get_offset_in_queue_by_time(self, topic: str, queue_id: int, timestamp: int) -> int:
        cq = self.cq_store.get(topic, queue_id)
        if cq is None:
            return 0
        return cq.offset_by_time(timestamp, self.commit_log.store_timestamp_of)

    def select_one_message_by_offset(self, offset: int, size: int | None = None) -> memoryview | None:
        """The stored bytes of the record at commit-log `offset`."""
        if size is not None:
            return self.commit_log.get_message(offset, size)
        return self.commit_log.read_record(offset)

    def look_message_by_offset(self, offset: int) -> StoredRecord | None:
        view = self.commit_log.read_record(offset)
        if view is None:
            return None
        try:
            return decode_record(view)
        except ValueError:
            return None

    def query_message(self, topic: str, key: str, max_num: int, begin: int, end: int) -> QueryMessageResult:
        """Records indexed under `topic#key` stored in [begin, end] (hash matches, as RocketMQ).

        The index's last update (timestamp, commit-log offset) is reported only with hits, as
        RocketMQ's `queryMessage` does: a QUERY_NOT_FOUND answer carries 0 and 0."""
        result = QueryMessageResult()
        if self.index is None:
            return result
        found = self.index.query_offset(topic, key, max_num, begin, end)
        if found.phy_offsets:
            result.index_last_update_timestamp = found.index_last_update_timestamp
            result.index_last_update_phyoffset = found.index_last_update_phyoffset
        for phy in found.phy_offsets:
            view = self.commit_log.read_record(phy)
            if view is not None:
                result.messages.append(view)
        return result
