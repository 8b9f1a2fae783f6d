"""`StoreServices`: the store's service threads, built from its config and retuned by it.

Which service runs follows the config once, at start: SYNC_FLUSH gets the group commit, ASYNC_FLUSH
the periodic flusher; `transientStorePoolEnable` adds the commit service in front of it; the
consume-queue flusher and the clean service always run, after the segment allocator. Which config
field drives which service is written once, in the `_*_settings` functions below, and serves both
the construction and `retune`, the step of `MessageStore.apply_live_settings` that pushes a new
config into the services that copied a value. Nothing above the store's façade touches a service.
"""

from __future__ import annotations

from typing import TypedDict

from rocketlite.clock import Clock
from rocketlite.store.allocate import AllocateMappedFileService
from rocketlite.store.checkpoint import StoreCheckpoint
from rocketlite.store.clean import CleanService, DiskThresholds, RunningFlags
from rocketlite.store.commit_log import CommitLog
from rocketlite.store.config import FlushDiskType, StoreConfig
from rocketlite.store.consume_queue_store import ConsumeQueueStore
from rocketlite.store.dispatch import Dispatcher
from rocketlite.store.flush import (
    CommitRealTimeService,
    FlushConsumeQueueService,
    FlushRealTimeService,
    GroupCommitService,
    ServiceThread,
)
from rocketlite.store.index.service import IndexService


class _Periodic(TypedDict):
    """The settings of a periodic flush service (`PeriodicFlushService.retune`)."""

    interval_ms: int
    least_pages: int
    thorough_interval_ms: int


class _Clean(TypedDict):
    """The settings of the clean service (`CleanService.retune`)."""

    interval_ms: int
    file_reserved_hours: int
    delete_when: str
    thresholds: DiskThresholds


def _flush_settings(cfg: StoreConfig) -> _Periodic:
    return _Periodic(
        interval_ms=cfg.flush_interval_commit_log,
        least_pages=cfg.flush_commit_log_least_pages,
        thorough_interval_ms=cfg.flush_commit_log_thorough_interval,
    )


def _commit_settings(cfg: StoreConfig) -> _Periodic:
    return _Periodic(
        interval_ms=cfg.commit_interval_commit_log,
        least_pages=cfg.commit_commit_log_least_pages,
        thorough_interval_ms=cfg.commit_commit_log_thorough_interval,
    )


def _cq_flush_settings(cfg: StoreConfig) -> _Periodic:
    return _Periodic(
        interval_ms=cfg.flush_interval_consume_queue,
        least_pages=cfg.flush_consume_queue_least_pages,
        thorough_interval_ms=cfg.flush_consume_queue_thorough_interval,
    )


def _clean_settings(cfg: StoreConfig) -> _Clean:
    return _Clean(
        interval_ms=cfg.clean_resource_interval,
        file_reserved_hours=cfg.file_reserved_time,
        delete_when=cfg.delete_when,
        thresholds=DiskThresholds.from_config(cfg),
    )


class StoreServices:
    """The started service threads of one store, in start order; stopped in reverse."""

    def __init__(
        self,
        cfg: StoreConfig,
        *,
        commit_log: CommitLog,
        cq_store: ConsumeQueueStore,
        index: IndexService | None,
        dispatcher: Dispatcher,
        checkpoint: StoreCheckpoint,
        flags: RunningFlags,
        allocator: AllocateMappedFileService,
        clock: Clock,
    ) -> None:
        self.group_commit: GroupCommitService | None = None
        self.flusher: FlushRealTimeService | None = None
        self.committer: CommitRealTimeService | None = None
        flusher: ServiceThread
        if cfg.flush_disk_type is FlushDiskType.SYNC_FLUSH:
            flusher = self.group_commit = GroupCommitService(commit_log, checkpoint)
        else:
            flusher = self.flusher = FlushRealTimeService(
                commit_log, checkpoint, clock, **_flush_settings(cfg)
            )
        threads: list[ServiceThread] = [allocator]
        if cfg.transient_store_pool_enable:
            self.committer = CommitRealTimeService(commit_log, flusher, clock, **_commit_settings(cfg))
            threads.append(self.committer)
        threads.append(flusher)
        self.cq_flusher = FlushConsumeQueueService(
            cq_store, index, dispatcher, checkpoint, clock, **_cq_flush_settings(cfg)
        )
        threads.append(self.cq_flusher)
        self.cleaner = CleanService(
            commit_log,
            cq_store,
            index,
            flags,
            clock,
            store_root=cfg.store_path_root_dir,
            **_clean_settings(cfg),
        )
        threads.append(self.cleaner)
        self.threads: tuple[ServiceThread, ...] = tuple(threads)

    def start(self) -> None:
        for svc in self.threads:
            svc.start()

    def shutdown(self) -> None:
        """Stop in reverse: clean, CQ flush, commit-log flush, commit, allocate."""
        for svc in reversed(self.threads):
            svc.shutdown()

    def retune(self, cfg: StoreConfig) -> None:
        """Push `cfg`'s live values into the services that copied them, and wake those."""
        if self.flusher is not None:
            self.flusher.retune(**_flush_settings(cfg))
        if self.committer is not None:
            self.committer.retune(**_commit_settings(cfg))
        self.cq_flusher.retune(**_cq_flush_settings(cfg))
        self.cleaner.retune(**_clean_settings(cfg))
