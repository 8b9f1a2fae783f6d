"""`MessageStore`: the store's façade for the broker, and the supervisor of its services.

It wires the data structures (commit log, consume queues, index, checkpoint) to the services that
keep them moving (allocate, reput, flush, clean: `services.py`), recovers on start, answers puts
with RocketMQ's statuses through its base `StoreWriter` (`writer.py`: the checks, the appends
single, batched and grouped, the put latency sampling) and hands reads to `StoreReader`
(`reader.py`). The structures and services get their collaborators directly; nothing holds a
reference back to this class. What the broker may call is declared in `api.py` (`StoreAPI`); the
structures themselves stay behind it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import threading
from collections.abc import Callable, Mapping
from typing import Any

from rocketlite.clock import SYSTEM_CLOCK, Clock
from rocketlite.protocol.errors import ConfigError, StoreError
from rocketlite.protocol.formats.record import StoredRecord
from rocketlite.store.allocate import AllocateMappedFileService
from rocketlite.store.api import MessageFilter, RecordFilter
from rocketlite.store.checkpoint import StoreCheckpoint
from rocketlite.store.clean import RunningFlags, disk_used_ratio
from rocketlite.store.commit_log import CommitLog
from rocketlite.store.config import LIVE_STORE_FIELDS, StoreConfig
from rocketlite.store.consume_queue_store import ConsumeQueueStore
from rocketlite.store.dispatch import ArrivalListener, Dispatcher, ReputService
from rocketlite.store.index.service import IndexService
from rocketlite.store.queue_view import QueueView
from rocketlite.store.reader import StoreReader
from rocketlite.store.recovery import RecoveryReport, recover
from rocketlite.store.results import GetMessageResult, QueryMessageResult
from rocketlite.store.services import StoreServices
from rocketlite.store.stats import StoreStats
from rocketlite.store.store_lock import lock_store, unlock_store
from rocketlite.store.truncation import TailReport, cut_commit_log, tail_records
from rocketlite.store.writer import StoreWriter

log = logging.getLogger("rocketlite.store")


class MessageStore(StoreWriter):
    """RocketMQ's `DefaultMessageStore`, minus the god-class: wiring, API, lifecycle."""

    def __init__(self, config: StoreConfig, *, clock: Clock = SYSTEM_CLOCK, master: bool = True) -> None:
        self.clock = clock
        self.allocator = AllocateMappedFileService(warm=config.warm_maped_file_enable)
        commit_log = CommitLog(config, clock, allocator=self.allocator.allocate)
        self.cq_store = ConsumeQueueStore(config.consume_queue_dir, config.cq_file_size)
        self.index: IndexService | None = (
            IndexService(config.index_dir, config.max_hash_slot_num, config.max_index_num, clock)
            if config.message_index_enable
            else None
        )
        self.checkpoint: StoreCheckpoint | None = None
        self.dispatcher = Dispatcher(
            commit_log, self.cq_store, self.index, delay_levels_ms=config.delay_levels_ms
        )
        super().__init__(
            config, RunningFlags(), StoreStats(), commit_log, ReputService(self.dispatcher), master=master
        )
        self.reader = StoreReader(commit_log, self.cq_store, self.index, self.stats, master=master)
        self.services: StoreServices | None = None
        self._lock_fd = -1
        self.recovery_report: RecoveryReport | None = None
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

    def get_max_offsets_in_queues(self, topic: str, queue_ids: list[int]) -> list[int]:
        return self.reader.get_max_offsets_in_queues(topic, queue_ids)

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
