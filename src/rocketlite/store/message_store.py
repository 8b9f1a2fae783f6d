"""`MessageStore`: the store's API for the broker, and the supervisor of its services.

It wires the data structures (commit log, consume queues, index, checkpoint) to the services that
keep them moving (allocate, reput, flush, clean), recovers on start, and answers puts and reads
with RocketMQ's statuses. The structures and services get their collaborators directly; nothing
holds a reference back to this class.

Put latency (the stats' buckets, `put_max_ms`, the slow-put warning) is sampled on the hot path:
an ASYNC_FLUSH single put reads the clock around its append only every `PUT_TIMING_EVERY`-th
time (the first put included), and each put in between is counted in the bucket of the last
sample (capped below the slow threshold, so a slow put is counted and warned about once). Counts
stay exact (the buckets add up to the puts); the distribution is a 1-in-16 sample and the max is
the max of the samples. Batches and SYNC_FLUSH puts are timed every time.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass

from rocketlite.clock import SYSTEM_CLOCK, Clock
from rocketlite.protocol.errors import SegmentCreateError
from rocketlite.protocol.formats.batch import BATCH_DELAY_PROPERTY, EncodedBatch
from rocketlite.protocol.formats.consume_queue_unit import Unit, is_padding
from rocketlite.protocol.formats.record import (
    MAX_TOPIC_LENGTH,
    MessageInner,
    StoredRecord,
    decode_record,
    enters_consume_queue,
)
from rocketlite.protocol.message import (
    HostAddress,
    MessageConst,
    properties_to_string,
    string_to_properties,
)
from rocketlite.protocol.reserved import SCHEDULE_TOPIC
from rocketlite.store.allocate import AllocateMappedFileService
from rocketlite.store.checkpoint import StoreCheckpoint
from rocketlite.store.clean import CleanService, DiskThresholds, RunningFlags
from rocketlite.store.commit_log import AppendResult, CommitLog
from rocketlite.store.config import FlushDiskType, StoreConfig
from rocketlite.store.consume_queue_store import ConsumeQueueStore
from rocketlite.store.dispatch import ArrivalListener, Dispatcher, ReputService
from rocketlite.store.flush import (
    CommitRealTimeService,
    FlushConsumeQueueService,
    FlushRealTimeService,
    GroupCommitService,
    ServiceThread,
)
from rocketlite.store.get_result import GetMessageResult, QueryMessageResult
from rocketlite.store.index_service import IndexService
from rocketlite.store.recovery import RecoveryReport, recover
from rocketlite.store.stats import SLOW_PUT_MS, StoreStats
from rocketlite.store.status import AppendMessageStatus, GetMessageStatus, PutMessageStatus
from rocketlite.store.store_lock import lock_store, unlock_store

log = logging.getLogger("rocketlite.store")

_DELAY_NEEDLE = MessageConst.DELAY_TIME_LEVEL + "\x01"
_ILLEGAL = PutMessageStatus.MESSAGE_ILLEGAL

_APPEND_TO_PUT = {
    AppendMessageStatus.MESSAGE_SIZE_EXCEEDED: PutMessageStatus.MESSAGE_ILLEGAL,
    AppendMessageStatus.PROPERTIES_SIZE_EXCEEDED: PutMessageStatus.PROPERTIES_SIZE_EXCEEDED,
    AppendMessageStatus.UNKNOWN_ERROR: PutMessageStatus.UNKNOWN_ERROR,
}

MessageFilter = Callable[[int], bool]

PUT_TIMING_EVERY = 16  # an ASYNC_FLUSH single put reads the clock 1 time in this many
_BELOW_SLOW_MS = SLOW_PUT_MS - 1.0  # the estimate of an untimed put after a slow sample


@dataclass(slots=True)
class PutMessageResult:
    status: PutMessageStatus
    append: AppendResult | None = None
    remark: str = ""

    @property
    def ok(self) -> bool:
        return self.status.ok


@dataclass(slots=True)
class PendingPut:
    """A put whose bytes are written; `flush_future` (SYNC_FLUSH) resolves when they are durable."""

    result: PutMessageResult
    flush_future: Future[bool] | None = None


class MessageStore:
    """RocketMQ's `DefaultMessageStore`, minus the god-class: wiring, API, lifecycle."""

    def __init__(self, config: StoreConfig, *, clock: Clock = SYSTEM_CLOCK, master: bool = True) -> None:
        self.config = config
        self.clock = clock
        self.master = master
        self.flags = RunningFlags()
        self.stats = StoreStats()
        self._untimed_puts = 0  # single puts left before the next timed one (module docstring)
        self._put_estimate_ms = 0.0  # the last timed put's latency, for the untimed ones
        self.allocator = AllocateMappedFileService()
        self.commit_log = CommitLog(config, clock, allocator=self.allocator.allocate)
        self.cq_store = ConsumeQueueStore(config.consume_queue_dir, config.cq_file_size)
        self.index: IndexService | None = (
            IndexService(config.index_dir, config.max_hash_slot_num, config.max_index_num, clock)
            if config.message_index_enable
            else None
        )
        self.checkpoint: StoreCheckpoint | None = None
        self.dispatcher = Dispatcher(
            self.commit_log, self.cq_store, self.index, delay_levels_ms=config.delay_levels_ms
        )
        self.reput = ReputService(self.dispatcher)
        self.group_commit: GroupCommitService | None = None
        self.cleaner: CleanService | None = None
        self._services: list[ServiceThread] = []
        self._lock_fd = -1
        self.recovery_report: RecoveryReport | None = None
        self.started = False
        self._shutdown_lock = threading.Lock()

    # -- lifecycle --------------------------------------------------------------------------
    def start(self) -> None:
        """Lock the directory, recover, start the services. Raises StoreError if locked."""
        cfg = self.config
        cfg.store_path_root_dir.mkdir(parents=True, exist_ok=True)
        self._lock_fd = lock_store(cfg.store_path_root_dir)  # StoreError when another broker has it
        abnormal = cfg.abort_path.exists()
        if abnormal:
            log.warning("abort file found: the last shutdown was not clean; recovering abnormally")
        self.checkpoint = StoreCheckpoint(cfg.checkpoint_path)
        self.commit_log.load()
        self.cq_store.load()
        if self.index is not None:
            self.index.load(not abnormal, self.checkpoint.index_msg_timestamp)
        self.recovery_report = recover(
            self.commit_log,
            self.cq_store,
            self.index,
            self.checkpoint,
            self.dispatcher,
            abnormal=abnormal,
            verify_crc=cfg.verify_crc,
            index_safe=cfg.message_index_safe,
        )
        _create_abort_file(cfg.abort_path)
        if self.master and not self.commit_log.queue.files:
            # Create (pre-zero) the first segment now, not on the first put: with 1 GiB segments
            # that takes about a second, longer than some clients wait for a send answer.
            self.commit_log.queue.get_last_file(0)
        self._start_services()
        self.stats.started_ms = self.clock.now_ms()
        self.started = True

    def _start_services(self) -> None:
        cfg, cp = self.config, self.checkpoint
        assert cp is not None
        flusher: ServiceThread
        if cfg.flush_disk_type is FlushDiskType.SYNC_FLUSH:
            self.group_commit = GroupCommitService(self.commit_log, cp)
            flusher = self.group_commit
        else:
            flusher = FlushRealTimeService(
                self.commit_log,
                cp,
                self.clock,
                interval_ms=cfg.flush_interval_commit_log,
                least_pages=cfg.flush_commit_log_least_pages,
                thorough_interval_ms=cfg.flush_commit_log_thorough_interval,
            )
        services: list[ServiceThread] = [self.allocator]
        if cfg.transient_store_pool_enable:
            services.append(
                CommitRealTimeService(
                    self.commit_log,
                    flusher,
                    self.clock,
                    interval_ms=cfg.commit_interval_commit_log,
                    least_pages=cfg.commit_commit_log_least_pages,
                    thorough_interval_ms=cfg.commit_commit_log_thorough_interval,
                )
            )
        services.append(flusher)
        services.append(
            FlushConsumeQueueService(
                self.cq_store,
                self.index,
                self.dispatcher,
                cp,
                self.clock,
                interval_ms=cfg.flush_interval_consume_queue,
                least_pages=cfg.flush_consume_queue_least_pages,
                thorough_interval_ms=cfg.flush_consume_queue_thorough_interval,
            )
        )
        self.cleaner = CleanService(
            self.commit_log,
            self.cq_store,
            self.index,
            self.flags,
            self.clock,
            store_root=cfg.store_path_root_dir,
            interval_ms=cfg.clean_resource_interval,
            file_reserved_hours=cfg.file_reserved_time,
            delete_when=cfg.delete_when,
            thresholds=DiskThresholds.from_config(cfg),
        )
        services.append(self.cleaner)
        self._services = services
        for svc in services:
            svc.start()
        self.reput.start()

    def shutdown(self) -> None:
        """Stop accepting writes, dispatch and flush everything, remove `abort`. Idempotent."""
        with self._shutdown_lock:
            if not self.started:
                return
            self.started = False
            self.flags.shutdown = True
            self.reput.shutdown()
            # Stop in reverse: clean, CQ flush, commit-log flush, commit, allocate.
            for svc in reversed(self._services):
                svc.shutdown()
            self.commit_log.queue.flush_all_to(self.commit_log.queue.max_wrote_offset)
            if self.checkpoint is not None:
                self.checkpoint.close()
            self.commit_log.close()
            self.cq_store.close()
            if self.index is not None:
                self.index.close()
            self.config.abort_path.unlink(missing_ok=True)
            if self._lock_fd >= 0:
                unlock_store(self._lock_fd)
                self._lock_fd = -1

    def __enter__(self) -> MessageStore:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    # -- listeners --------------------------------------------------------------------------
    def add_arrival_listener(self, listener: ArrivalListener) -> None:
        """Called once per queue per dispatch round when units land in a consume queue (long
        polling): on the event loop for rounds after its sends, else on the reput thread."""
        self.dispatcher.listeners.append(listener)

    @property
    def running_services(self) -> tuple[ServiceThread, ...]:
        """The started service threads (flush, commit, clean...): `live_settings` retunes them."""
        return tuple(self._services)

    # -- writing ----------------------------------------------------------------------------
    def _check_put(self, topic: str) -> PutMessageResult | None:
        flags = self.flags
        if flags.shutdown or not self.started:
            return PutMessageResult(PutMessageStatus.SERVICE_NOT_AVAILABLE, remark="store is shut down")
        if not self.master:
            return PutMessageResult(PutMessageStatus.SERVICE_NOT_AVAILABLE, remark="store is a slave")
        if flags.disk_full:
            return PutMessageResult(
                PutMessageStatus.SERVICE_NOT_AVAILABLE,
                remark="the disk is full (above diskSpaceWarningLevelRatio); writes are refused",
            )
        if not flags.writeable:
            return PutMessageResult(PutMessageStatus.SERVICE_NOT_AVAILABLE, remark="store not writeable")
        # An ASCII topic's UTF-8 length is its length: no encoding on the common path.
        if (len(topic) if topic.isascii() else len(topic.encode("utf-8"))) > MAX_TOPIC_LENGTH:
            return PutMessageResult(
                PutMessageStatus.MESSAGE_ILLEGAL, remark=f"topic longer than {MAX_TOPIC_LENGTH} bytes"
            )
        return None

    def _apply_delay(self, msg: MessageInner) -> None:
        """Delayed messages go to SCHEDULE_TOPIC_XXXX queue level-1, the real topic in properties."""
        if _DELAY_NEEDLE not in msg.properties_string:
            return
        if not enters_consume_queue(msg.sys_flag):  # a transaction half or rollback is not delayed
            return
        props = string_to_properties(msg.properties_string)
        level_text = props.get(MessageConst.DELAY_TIME_LEVEL, "0")
        level = int(level_text) if level_text.lstrip("-").isdigit() else 0
        if level <= 0:
            return
        level = min(level, len(self.config.delay_levels_ms))
        props[MessageConst.DELAY_TIME_LEVEL] = str(level)
        props[MessageConst.REAL_TOPIC] = msg.topic
        props[MessageConst.REAL_QUEUE_ID] = str(msg.queue_id)
        msg.properties_string = properties_to_string(props)
        msg.topic = SCHEDULE_TOPIC
        msg.queue_id = level - 1

    def transient_store_pool_deficient(self) -> bool:
        """`isTransientStorePoolDeficient`: every segment write buffer is taken (the commit
        service lags, the disk is slow), so the broker rejects sends with SYSTEM_BUSY instead of
        holding ever more segments in memory."""
        cfg = self.config
        if not cfg.transient_store_pool_enable:
            return False
        size = cfg.transient_store_pool_size
        files = self.commit_log.queue.files
        return sum(1 for mf in files[-size:] if mf.holds_write_buffer) >= size

    def put_message_nowait(self, msg: MessageInner) -> PendingPut:
        """Append without waiting for durability; the broker awaits `flush_future` itself."""
        put = self.put_message_async(msg)
        if type(put) is AppendResult:
            return PendingPut(PutMessageResult(PutMessageStatus.PUT_OK, put))
        assert isinstance(put, PendingPut)
        return put

    def put_message_async(self, msg: MessageInner) -> AppendResult | PendingPut:
        """`put_message_nowait` for a caller that answers at once (the send processor): when the
        message is stored and there is nothing to wait for (ASYNC_FLUSH), its `AppendResult`
        itself, with no result objects around it; otherwise the `PendingPut`."""
        flags = self.flags
        if flags.shutdown or not flags.writeable or flags.disk_full or not self.started or not self.master:
            return PendingPut(self._check_put(msg.topic) or PutMessageResult(PutMessageStatus.UNKNOWN_ERROR))
        topic = msg.topic
        if not topic.isascii() or len(topic) > MAX_TOPIC_LENGTH:  # the rest of `_check_put`
            bad = self._check_put(msg.topic)
            if bad is not None:
                return PendingPut(bad)
        if _DELAY_NEEDLE in msg.properties_string:
            self._apply_delay(msg)
        untimed = self._untimed_puts
        if untimed and self.group_commit is None:
            self._untimed_puts = untimed - 1
            begin = -1.0  # not timed: counted at the last sample's latency
        else:
            self._untimed_puts = PUT_TIMING_EVERY - 1
            begin = time.perf_counter()
        try:
            res = self.commit_log.append(msg)
        except SegmentCreateError as exc:
            return self._segment_failed(exc)
        if res.status is not AppendMessageStatus.PUT_OK or self.group_commit is not None:
            return self._finish_put(res, begin, 1)
        # `_finish_put` of an ASYNC_FLUSH single put, inlined (one call less per send)
        self.stats.record_put(self._put_estimate_ms if begin < 0 else self._timed(begin), res.wrote_bytes, 1)
        self.reput.wakeup()
        return res

    def put_encoded_nowait(self, enc: EncodedBatch, topic: str, queue: int, host: HostAddress) -> PendingPut:
        """Append a batch (one topic-queue, consecutive queue offsets) without waiting: records
        encoded from a SEND_BATCH_MESSAGE body (`speedups.encode_batch_records`). A batch whose
        stored properties hold DELAY is refused (RocketMQ does not delay batches)."""
        bad = self._check_put(topic)
        if bad is not None or enc.outcome == BATCH_DELAY_PROPERTY:
            return PendingPut(bad or PutMessageResult(_ILLEGAL, remark="delayed batches are not supported"))
        begin = time.perf_counter()
        try:
            res = self.commit_log.append_encoded_batch(enc, topic, queue, host)
        except SegmentCreateError as exc:
            return self._segment_failed(exc)
        return self._finish_put(res, begin, enc.messages)

    def _segment_failed(self, exc: SegmentCreateError) -> PendingPut:
        self.stats.put_failures += 1
        return PendingPut(PutMessageResult(PutMessageStatus.CREATE_MAPEDFILE_FAILED, remark=str(exc)))

    def _timed(self, begin: float) -> float:
        """The latency of a timed put in ms, kept as the estimate of the untimed ones after it."""
        elapsed_ms = (time.perf_counter() - begin) * 1000
        self._put_estimate_ms = elapsed_ms if elapsed_ms < SLOW_PUT_MS else _BELOW_SLOW_MS
        return elapsed_ms

    def _finish_put(self, res: AppendResult, begin: float, n: int) -> PendingPut:
        """`begin` is the put's `perf_counter` start, or negative when it was not timed."""
        elapsed_ms = self._put_estimate_ms if begin < 0 else self._timed(begin)
        if res.status is not AppendMessageStatus.PUT_OK:
            self.stats.put_failures += 1
            return PendingPut(PutMessageResult(_APPEND_TO_PUT[res.status], res, res.remark))
        self.stats.record_put(elapsed_ms, res.wrote_bytes, n)
        self.reput.wakeup()
        fut = self.group_commit.submit(res.end_offset) if self.group_commit is not None else None
        return PendingPut(PutMessageResult(PutMessageStatus.PUT_OK, res), fut)

    def wait_durable(self, pending: PendingPut) -> PutMessageResult:
        """Block until a SYNC_FLUSH put is flushed or `syncFlushTimeout` passes."""
        fut = pending.flush_future
        if fut is None:
            return pending.result
        try:
            flushed = fut.result(timeout=self.config.sync_flush_timeout / 1000)
        except FutureTimeout:
            flushed = False
        if not flushed:
            log.error("sync flush timed out after %d ms", self.config.sync_flush_timeout)
            pending.result.status = PutMessageStatus.FLUSH_DISK_TIMEOUT
        return pending.result

    def put_message(self, msg: MessageInner) -> PutMessageResult:
        """Append one message; with SYNC_FLUSH, return once it is on disk (or timed out)."""
        return self.wait_durable(self.put_message_nowait(msg))

    # -- reading ----------------------------------------------------------------------------
    def _correct(self, old: int, new: int) -> int:
        """`nextOffsetCorrection`: a master moves the consumer; a slave leaves it be."""
        return new if self.master else old

    def get_message(
        self,
        group: str,
        topic: str,
        queue_id: int,
        offset: int,
        max_msg_nums: int,
        message_filter: MessageFilter | None = None,
        *,
        max_transfer_count: int | None = None,
        max_transfer_bytes: int | None = None,
    ) -> GetMessageResult:
        """Up to `max_msg_nums` records of a queue from `offset`, as zero-copy slices.

        The statuses and corrected offsets are RocketMQ's (`DefaultMessageStore.getMessage`, 4.9.4+
        and 5.x): a queue that has no consume queue yet is NO_MESSAGE_IN_QUEUE (Java creates the
        queue on lookup, so its NO_MATCHED_LOGIC_QUEUE never happens), and an offset past the end
        moves the consumer to the queue's end, not back to 0 (ISSUE #4215: going back to 0
        consumed a queue again)."""
        del group  # kept for RocketMQ's signature; statistics per group are the broker's
        cq = self.cq_store.get(topic, queue_id)
        if cq is None:
            return GetMessageResult(GetMessageStatus.NO_MESSAGE_IN_QUEUE, self._correct(offset, 0))
        min_off, max_off = cq.min_offset, cq.max_offset
        result = GetMessageResult(GetMessageStatus.NO_MESSAGE_IN_QUEUE, offset, min_off, max_off)
        if max_off == 0:
            result.next_begin_offset = self._correct(offset, 0)
            return result
        if offset < min_off:
            result.status, result.next_begin_offset = (
                GetMessageStatus.OFFSET_TOO_SMALL,
                self._correct(offset, min_off),
            )
            return result
        if offset == max_off:
            result.status = GetMessageStatus.OFFSET_OVERFLOW_ONE
            return result
        if offset > max_off:
            result.status = GetMessageStatus.OFFSET_OVERFLOW_BADLY
            result.next_begin_offset = self._correct(offset, max_off)
            return result
        max_count = max_transfer_count or self.config.max_transfer_count_on_message_in_memory
        max_bytes = max_transfer_bytes or self.config.max_transfer_bytes_on_message_in_memory
        max_msg_nums = min(max_msg_nums, max_count) if max_transfer_count is None else max_msg_nums
        found = cq.read(offset, max_msg_nums, max_bytes, message_filter, self.commit_log)
        if found is None:
            result.status = GetMessageStatus.OFFSET_FOUND_NULL
            result.next_begin_offset = self._correct(offset, cq.roll_next_file(offset))
            return result
        result.found = found
        result.buffer_total_size = found.total_size
        result.next_begin_offset = offset + found.scanned
        if found.parts:
            result.status = GetMessageStatus.FOUND
            self.stats.get_found += found.count
        else:
            result.status = (
                GetMessageStatus.MESSAGE_WAS_REMOVING
                if found.hit_removed
                else GetMessageStatus.NO_MATCHED_MESSAGE
            )
            self.stats.get_miss += 1
        return result

    def get_max_offset_in_queue(self, topic: str, queue_id: int) -> int:
        cq = self.cq_store.get(topic, queue_id)
        return cq.max_offset if cq is not None else 0

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

    @property
    def min_phy_offset(self) -> int:
        return self.commit_log.min_offset

    @property
    def max_phy_offset(self) -> int:
        return self.commit_log.max_offset

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

    def consume_queue_units(self, topic: str, queue_id: int, start: int, count: int) -> list[Unit] | None:
        """Up to `count` units of one consume queue from queue offset `start` (padding as is), for
        QUERY_CONSUME_QUEUE; None when there is no such queue or `start` is outside
        [min offset, max offset) (Java's `iterateFrom` returns null)."""
        cq = self.cq_store.get(topic, queue_id)
        if cq is None or not cq.min_offset <= start < cq.max_offset:
            return None
        units: list[Unit] = []
        for index in range(start, min(start + max(count, 0), cq.max_offset)):
            unit = cq.get_unit(index)
            if unit is None:
                break
            units.append(unit)
        return units

    def consume_queue_topics(self) -> list[str]:
        """Every topic that has a consume queue (`getConsumeQueueTable().keySet()`)."""
        return self.cq_store.topics()

    def clean_expired_consume_queues(self, keep: Callable[[str], bool]) -> int:
        """`ConsumeQueueStore.cleanExpired` (mqadmin cleanExpiredCQ): delete every queue whose last
        record lies below the commit log's first offset, all its messages gone, except the queues of
        topics `keep` names (RocketMQ keeps the system topics'); a topic left without queues is
        forgotten. Returns the queues deleted."""
        min_offset = self.commit_log.min_offset
        deleted = 0
        for cq in list(self.cq_store.queues()):
            if keep(cq.topic):
                continue
            last = cq.last_unit()
            if last is None or last[0] >= min_offset:
                continue  # empty (just created) or still holding records
            if self.cq_store.delete_queue(cq.topic, cq.queue_id):
                self.commit_log.topic_queue_table.pop(f"{cq.topic}-{cq.queue_id}", None)
                deleted += 1
        return deleted

    def delete_topics(self, topics: set[str]) -> None:
        for topic in topics:
            self.cq_store.delete_topic(topic)
            prefix = f"{topic}-"
            for key in [k for k in self.commit_log.topic_queue_table if k.startswith(prefix)]:
                del self.commit_log.topic_queue_table[key]

    def run_clean_pass(self, *, force: bool = False) -> int:
        """Run one retention / disk check now (admin DELETE_EXPIRED_COMMITLOG, tests)."""
        if self.cleaner is None:
            return 0
        return self.cleaner.clean(force_hour=force)

    def wait_dispatched(self, timeout: float = 10.0) -> bool:
        """Block until everything appended so far is in the consume queues and index."""
        return self.reput.wait_caught_up(self.commit_log.queue.max_wrote_offset, timeout)

    def runtime_info(self) -> dict[str, str]:
        return {
            "commitLogMinOffset": str(self.commit_log.min_offset),
            "commitLogMaxOffset": str(self.commit_log.max_offset),
            "dispatchBehindBytes": str(self.commit_log.max_offset - self.dispatcher.reput_from_offset),
            "putMessageTimesTotal": str(self.stats.put_count),
            "putMessageSizeTotal": str(self.stats.put_bytes),
            "putMessageEntireTimeMax": f"{self.stats.put_max_ms:.3f}",
            "diskFull": str(self.flags.disk_full).lower(),
        }


def _create_abort_file(path: os.PathLike[str]) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
    os.fsync(fd)
    os.close(fd)
