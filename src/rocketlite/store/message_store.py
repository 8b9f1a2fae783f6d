"""`MessageStore`: the store's façade for the broker, and the supervisor of its services.

It wires the data structures (commit log, consume queues, index, checkpoint) to the services that
keep them moving (allocate, reput, flush, clean: `services.py`), recovers on start, answers puts
with RocketMQ's statuses and hands reads to `StoreReader` (`reader.py`). The structures and
services get their collaborators directly; nothing holds a reference back to this class. What the
broker may call is declared in `api.py` (`StoreAPI`); the structures themselves stay behind it.

Put latency (the stats' buckets, `put_max_ms`, the slow-put warning) is sampled on the hot path:
an ASYNC_FLUSH single put reads the clock around its append only every `PUT_TIMING_EVERY`-th
time (the first put included), and each put in between is counted in the bucket of the last
sample (capped below the slow threshold, so a slow put is counted and warned about once). Counts
stay exact (the buckets add up to the puts); the distribution is a 1-in-16 sample and the max is
the max of the samples. Batches and SYNC_FLUSH puts are timed every time.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any

from rocketlite.clock import SYSTEM_CLOCK, Clock
from rocketlite.protocol.errors import ConfigError, SegmentCreateError, StoreError
from rocketlite.protocol.formats.batch import BATCH_DELAY_PROPERTY, EncodedBatch
from rocketlite.protocol.formats.record import (
    MAX_TOPIC_LENGTH,
    MessageInner,
    StoredRecord,
    enters_consume_queue,
)
from rocketlite.protocol.formats.speedups import stamp_group
from rocketlite.protocol.message import (
    HostAddress,
    MessageConst,
    properties_to_string,
    string_to_properties,
)
from rocketlite.protocol.reserved import SCHEDULE_TOPIC
from rocketlite.store.allocate import AllocateMappedFileService
from rocketlite.store.api import MessageFilter, RecordFilter
from rocketlite.store.checkpoint import StoreCheckpoint
from rocketlite.store.clean import RunningFlags, disk_used_ratio
from rocketlite.store.commit_log import CommitLog
from rocketlite.store.config import LIVE_STORE_FIELDS, StoreConfig
from rocketlite.store.consume_queue_store import ConsumeQueueStore
from rocketlite.store.dispatch import ArrivalListener, Dispatcher, ReputService
from rocketlite.store.flush import GroupCommitService
from rocketlite.store.index.service import IndexService
from rocketlite.store.queue_view import QueueView
from rocketlite.store.reader import StoreReader
from rocketlite.store.recovery import RecoveryReport, recover
from rocketlite.store.results import (
    AppendMessageStatus,
    AppendResult,
    GetMessageResult,
    PendingPut,
    PutMessageResult,
    PutMessageStatus,
    QueryMessageResult,
)
from rocketlite.store.services import StoreServices
from rocketlite.store.stats import SLOW_PUT_MS, StoreStats
from rocketlite.store.store_lock import lock_store, unlock_store
from rocketlite.store.truncation import TailReport, cut_commit_log, tail_records

log = logging.getLogger("rocketlite.store")

_DELAY_NEEDLE = MessageConst.DELAY_TIME_LEVEL + "\x01"
_ILLEGAL = PutMessageStatus.MESSAGE_ILLEGAL

_APPEND_TO_PUT = {
    AppendMessageStatus.MESSAGE_SIZE_EXCEEDED: PutMessageStatus.MESSAGE_ILLEGAL,
    AppendMessageStatus.PROPERTIES_SIZE_EXCEEDED: PutMessageStatus.PROPERTIES_SIZE_EXCEEDED,
    AppendMessageStatus.UNKNOWN_ERROR: PutMessageStatus.UNKNOWN_ERROR,
}

PUT_TIMING_EVERY = 16  # an ASYNC_FLUSH single put reads the clock 1 time in this many
_BELOW_SLOW_MS = SLOW_PUT_MS - 1.0  # the estimate of an untimed put after a slow sample


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
        self.allocator = AllocateMappedFileService(warm=config.warm_maped_file_enable)
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
        self.reader = StoreReader(self.commit_log, self.cq_store, self.index, self.stats, master=master)
        self.group_commit: GroupCommitService | None = None
        self.services: StoreServices | None = None
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

    def truncate_log_before_start(self, offset: int) -> TailReport:
        """Cut the commit log at `offset` before `start` (controller mode: `truncation.py`): the
        messages that were past it, and the bytes zeroed or deleted (`cut_bytes`)."""
        if self.started:
            raise StoreError("truncate_log_before_start: the store is running")
        report = tail_records(self.config.commit_log_dir, offset)
        report.cut_bytes = cut_commit_log(self.config.commit_log_dir, offset)
        return report

    def _start_services(self) -> None:
        assert self.checkpoint is not None
        services = StoreServices(
            self.config,
            commit_log=self.commit_log,
            cq_store=self.cq_store,
            index=self.index,
            dispatcher=self.dispatcher,
            checkpoint=self.checkpoint,
            flags=self.flags,
            allocator=self.allocator,
            clock=self.clock,
        )
        self.services, self.group_commit = services, services.group_commit
        services.start()
        self.reput.start()

    def shutdown(self) -> None:
        """Stop accepting writes, dispatch and flush everything, remove `abort`. Idempotent."""
        with self._shutdown_lock:
            if not self.started:
                return
            self.started = False
            self.flags.shutdown = True
            self.reput.shutdown()
            if self.services is not None:
                self.services.shutdown()
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

    # -- listeners and dispatch --------------------------------------------------------------
    def add_arrival_listener(self, listener: ArrivalListener) -> None:
        """Called once per queue per dispatch round when units land in a consume queue (long
        polling): on the event loop for rounds after its sends, else on the reput thread."""
        self.dispatcher.listeners.append(listener)

    def remove_arrival_listener(self, listener: ArrivalListener) -> None:
        """Stop calling `listener` (a no-op when it is not registered)."""
        listeners = self.dispatcher.listeners
        if listener in listeners:
            listeners.remove(listener)

    def dispatch_on(self, loop: asyncio.AbstractEventLoop) -> None:
        """Call from `loop`'s thread: appends made on it are dispatched by a round on the loop,
        once per iteration, so their arrival listeners run there too (`dispatch.py`)."""
        self.reput.run_on(loop)

    def wait_dispatched(self, timeout: float = 10.0) -> bool:
        """Block until everything appended so far is in the consume queues and index."""
        return self.reput.wait_caught_up(self.commit_log.queue.max_wrote_offset, timeout)

    # -- live settings ----------------------------------------------------------------------
    def apply_live_settings(self, changes: Mapping[str, Any]) -> StoreConfig:
        """Change settings of a running store (UPDATE_BROKER_CONFIG): `changes` maps
        `StoreConfig` field names, all of them in `LIVE_STORE_FIELDS`, to new values. The store
        takes a new config (validated as any config is) and retunes the services that copied a
        value; returns the new config. ConfigError, and nothing changes, for a field that needs a
        restart or a bad value."""
        fixed = sorted(set(changes) - LIVE_STORE_FIELDS)
        if fixed:
            raise ConfigError(f"store settings {', '.join(fixed)} cannot change while the store runs")
        new = dataclasses.replace(self.config, **changes)
        self.config = new
        self.commit_log.retune(new)
        if self.services is not None:
            self.services.retune(new)
        return new

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
        """Delayed messages go to SCHEDULE_TOPIC_XXXX queue level-1, the real topic in properties.
        A delivered copy (`delay_served`) keeps its DELAY property but is not parked again."""
        if msg.delay_served or _DELAY_NEEDLE not in msg.properties_string:
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

    def _free_write_buffers(self) -> int:
        """`remainTransientStoreBufferNumbs`: write buffers not held by a segment; Java's
        Integer.MAX_VALUE without transientStorePoolEnable."""
        cfg = self.config
        if not cfg.transient_store_pool_enable:
            return 2**31 - 1
        size = cfg.transient_store_pool_size
        return max(size - sum(1 for mf in self.commit_log.queue.files[-size:] if mf.holds_write_buffer), 0)

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

    def put_message_nowait(self, msg: MessageInner, *, paced: bool = False) -> PendingPut:
        """Append without waiting for durability; the broker awaits `flush_future` itself.
        `paced`: the append's dispatch round may be shared with the next few loop iterations'
        (the 5.x gRPC sends, one RPC per iteration: `dispatch.py`)."""
        put = self.put_message_async(msg, paced=paced)
        if type(put) is AppendResult:
            return PendingPut(PutMessageResult(PutMessageStatus.PUT_OK, put))
        assert isinstance(put, PendingPut)
        return put

    def put_message_async(self, msg: MessageInner, *, paced: bool = False) -> AppendResult | PendingPut:
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
        if _DELAY_NEEDLE in msg.properties_string and not msg.delay_served:
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
            return self._finish_put(res, begin, 1, paced)
        # `_finish_put` of an ASYNC_FLUSH single put, inlined (one call less per send)
        self.stats.record_put(self._put_estimate_ms if begin < 0 else self._timed(begin), res.wrote_bytes, 1)
        self.reput.wakeup(paced)
        return res

    def put_encoded_nowait(
        self, enc: EncodedBatch, topic: str, queue: int, host: HostAddress, *, paced: bool = False
    ) -> PendingPut:
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
        return self._finish_put(res, begin, enc.messages, paced)

    def put_encoded_batches_nowait(
        self, batches: list[tuple[EncodedBatch, str, int]], host: HostAddress
    ) -> list[AppendResult]:
        """`put_encoded_nowait` of several batches as one append (the batch lane's; `api.py`)."""
        n = 0
        for enc, topic, _queue in batches:
            if enc.outcome == BATCH_DELAY_PROPERTY or self._check_put(topic) is not None:
                break
            n += 1
        begin = time.perf_counter()
        placed, failed = self.commit_log.append_encoded_batches(
            batches if n == len(batches) else batches[:n], host
        )
        if placed:
            elapsed_ms = self._timed(begin)
            record = self.stats.record_put
            for res in placed:  # as `_finish_put` counts each batch
                record(elapsed_ms, res.wrote_bytes, res.msg_num)
            self.reput.wakeup(False)
        if failed is not None:
            self.stats.put_failures += 1
            log.error("a put of %d batches stopped after %d: %s", len(batches), len(placed), failed)
        return placed

    def takes_group(self) -> bool:
        f = self.flags
        return (
            stamp_group is not None and self.group_commit is None and self.started and self.master
            and not f.shutdown and f.writeable and not f.disk_full
        )  # fmt: skip

    def put_group_nowait(
        self, buf: bytearray, sizes: list[int], keys: list[str], host: HostAddress
    ) -> tuple[list[str], list[int]]:
        begin = time.perf_counter()
        ids, qoffs, _now, failed = self.commit_log.append_group(buf, sizes, keys, host)
        if ids:
            self.stats.record_put(self._timed(begin), sum(sizes[: len(ids)]), len(ids))
            self.reput.wakeup(False)
        if failed is not None:
            self.stats.put_failures += 1
            log.error("a grouped put stopped after %d of %d messages: %s", len(ids), len(sizes), failed)
        return ids, qoffs

    def _segment_failed(self, exc: SegmentCreateError) -> PendingPut:
        self.stats.put_failures += 1
        return PendingPut(PutMessageResult(PutMessageStatus.CREATE_MAPEDFILE_FAILED, remark=str(exc)))

    def _timed(self, begin: float) -> float:
        """The latency of a timed put in ms, kept as the estimate of the untimed ones after it."""
        elapsed_ms = (time.perf_counter() - begin) * 1000
        self._put_estimate_ms = elapsed_ms if elapsed_ms < SLOW_PUT_MS else _BELOW_SLOW_MS
        return elapsed_ms

    def _finish_put(self, res: AppendResult, begin: float, n: int, paced: bool) -> PendingPut:
        """`begin` is the put's `perf_counter` start, or negative when it was not timed."""
        elapsed_ms = self._put_estimate_ms if begin < 0 else self._timed(begin)
        if res.status is not AppendMessageStatus.PUT_OK:
            self.stats.put_failures += 1
            return PendingPut(PutMessageResult(_APPEND_TO_PUT[res.status], res, res.remark))
        self.stats.record_put(elapsed_ms, res.wrote_bytes, n)
        self.reput.wakeup(paced)
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

    # -- durability -------------------------------------------------------------------------
    def flush_to(self, end: int) -> bool:
        """Make the commit log durable up to `end` now (blocking: call it off the event loop),
        for a service that must not record a copy as done before the copy is on disk (a POP DLQ
        move, timer progress). Whether it got there (`CommitLog.flush_to`)."""
        return self.commit_log.flush_to(end)

    @property
    def durable_end(self) -> int:
        """The commit-log offset the last flush reached: what a crash keeps."""
        return self.commit_log.flushed_where

    @property
    def committed_end(self) -> int:
        """The commit-log offset whose bytes are in the files (`transientStorePoolEnable` keeps
        newer ones in a write buffer first; without it, `written_end`)."""
        q = self.commit_log.queue
        return q.committed_where if q.write_buffer else q.max_wrote_offset

    @property
    def written_end(self) -> int:
        """Where the next append goes: everything appended so far, write buffer included."""
        return self.commit_log.queue.max_wrote_offset

    # -- replication (HA) -------------------------------------------------------------------
    @property
    def log_segment_size(self) -> int:
        """Bytes per commit-log segment: a replica's log rolls at the same offsets."""
        return self.commit_log.file_size

    @property
    def log_is_empty(self) -> bool:
        """The commit log has no segment yet (a new slave: its first bytes may start anywhere
        on a segment boundary)."""
        return not self.commit_log.queue.files

    def read_log(self, offset: int, size: int) -> memoryview | None:
        """Zero-copy view of `size` commit-log bytes at `offset`, None if not (or no longer) there."""
        return self.commit_log.get_message(offset, size)

    def read_log_from(self, offset: int) -> memoryview | None:
        """Zero-copy view of the commit log from `offset` to the readable end of its segment."""
        return self.commit_log.get_data(offset)

    def append_replicated(
        self, offset: int, data: bytes | bytearray | memoryview, store_timestamp: int
    ) -> int:
        """Store a master's commit-log bytes verbatim at `offset` (a slave; whole records,
        `CommitLog.append_raw`) and wake the dispatcher; returns the new end of the log.
        ValueError when `offset` is not where this log ends."""
        end = self.commit_log.append_raw(offset, data, store_timestamp)
        self.reput.wakeup()
        return end

    def prestage_first_segment(self) -> None:
        """An empty log (a new slave) builds its first segment before it connects, so the first
        transfer does not wait for it while a SYNC_MASTER's send does."""
        self.commit_log.stage_first_segment()

    # -- reading (`reader.py`) ---------------------------------------------------------------
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
        record_filter: RecordFilter | None = None,
    ) -> GetMessageResult:
        """A pull (`StoreReader.get_message`); `group` is kept for RocketMQ's signature, the
        statistics per group are the broker's."""
        del group
        if max_transfer_count is None:  # a caller's own count is not capped by the store's
            max_msg_nums = min(max_msg_nums, self.config.max_transfer_count_on_message_in_memory)
        max_bytes = max_transfer_bytes or self.config.max_transfer_bytes_on_message_in_memory
        return self.reader.get_message(
            topic, queue_id, offset, max_msg_nums, max_bytes, message_filter, record_filter
        )

    def queue(self, topic: str, queue_id: int) -> QueueView | None:
        return self.reader.queue(topic, queue_id)

    def get_max_offset_in_queue(self, topic: str, queue_id: int) -> int:
        return self.reader.get_max_offset_in_queue(topic, queue_id)

    def get_min_offset_in_queue(self, topic: str, queue_id: int) -> int:
        return self.reader.get_min_offset_in_queue(topic, queue_id)

    def get_commit_log_offset_in_queue(self, topic: str, queue_id: int, cq_offset: int) -> int:
        return self.reader.get_commit_log_offset_in_queue(topic, queue_id, cq_offset)

    def get_message_store_timestamp(self, topic: str, queue_id: int, cq_offset: int) -> int:
        return self.reader.get_message_store_timestamp(topic, queue_id, cq_offset)

    def get_earliest_message_time(self, topic: str, queue_id: int) -> int:
        return self.reader.get_earliest_message_time(topic, queue_id)

    def get_offset_in_queue_by_time(self, topic: str, queue_id: int, timestamp: int) -> int:
        return self.reader.get_offset_in_queue_by_time(topic, queue_id, timestamp)

    @property
    def min_phy_offset(self) -> int:
        return self.commit_log.min_offset

    @property
    def max_phy_offset(self) -> int:
        return self.commit_log.max_offset

    def select_one_message_by_offset(self, offset: int, size: int | None = None) -> memoryview | None:
        return self.reader.select_one_message_by_offset(offset, size)

    def look_message_by_offset(self, offset: int) -> StoredRecord | None:
        return self.reader.look_message_by_offset(offset)

    def query_message(self, topic: str, key: str, max_num: int, begin: int, end: int) -> QueryMessageResult:
        return self.reader.query_message(topic, key, max_num, begin, end)

    def consume_queue_topics(self) -> list[str]:
        """Every topic that has a consume queue (`getConsumeQueueTable().keySet()`)."""
        return self.cq_store.topics()

    def clean_expired_consume_queues(self, keep: Callable[[str], bool]) -> int:
        """`ConsumeQueueStore.cleanExpired` (mqadmin cleanExpiredCQ): delete every queue whose
        messages are all gone, except the queues of topics `keep` names (RocketMQ keeps the system
        topics'); a topic left without queues is forgotten. Returns the queues deleted."""
        deleted = 0
        for cq in self.cq_store.expired_queues(self.commit_log.min_offset, keep):
            if self.cq_store.delete_queue(cq.topic, cq.queue_id):
                self.commit_log.forget_queues(cq.topic, cq.queue_id)
                deleted += 1
        return deleted

    def delete_topics(self, topics: set[str]) -> None:
        for topic in topics:
            self.cq_store.delete_topic(topic)
            self.commit_log.forget_queues(topic)

    def run_clean_pass(self, *, force: bool = False) -> int:
        """Run one retention / disk check now (admin DELETE_EXPIRED_COMMITLOG, tests)."""
        if self.services is None:
            return 0
        return self.services.cleaner.clean(force_hour=force)

    def disk_used_ratio(self) -> float:
        """Used fraction of the store's file system (0..1, df's Use%): what the disk guard acts on."""
        return disk_used_ratio(self.config.store_path_root_dir)

    @property
    def disk_full(self) -> bool:
        """Writes are refused: the disk is above `diskSpaceWarningLevelRatio`."""
        return self.flags.disk_full

    def runtime_info(self) -> dict[str, str]:
        return {
            "commitLogMinOffset": str(self.commit_log.min_offset),
            "commitLogMaxOffset": str(self.commit_log.max_offset),
            "dispatchBehindBytes": str(self.commit_log.max_offset - self.dispatcher.reput_from_offset),
            "putMessageTimesTotal": str(self.stats.put_count),
            "putMessageSizeTotal": str(self.stats.put_bytes),
            "putMessageEntireTimeMax": str(int(self.stats.put_max_ms)),  # a long in Java
            "remainTransientStoreBufferNumbs": str(self._free_write_buffers()),
            "diskFull": str(self.flags.disk_full).lower(),
        }


def _create_abort_file(path: os.PathLike[str]) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
    os.fsync(fd)
    os.close(fd)
