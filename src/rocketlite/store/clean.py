"""Retention and disk protection.

Every `cleanResourceInterval` ms the service measures the store disk, with RocketMQ's three
levels (percent of the file system used, as `df` reports it):

- above `diskMaxUsedSpaceRatio` (75): segments older than `fileReservedTime` hours are deleted now,
  not only at the `deleteWhen` hours;
- above `diskSpaceCleanForciblyRatio` (85): with `cleanFileForciblyEnable`, every segment but the
  last is deleted, expired or not;
- above `diskSpaceWarningLevelRatio` (90): besides, the store is marked not writable (puts answer
  SERVICE_NOT_AVAILABLE; reads go on) until the disk drops below it again.

Consume-queue files and index files that point only below the commit log's new minimum offset
follow the commit log.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from rocketlite.clock import Clock
from rocketlite.store.commit_log import CommitLog
from rocketlite.store.config import StoreConfig
from rocketlite.store.consume_queue_store import ConsumeQueueStore
from rocketlite.store.flush import ServiceThread
from rocketlite.store.index.service import IndexService

log = logging.getLogger("rocketlite.store.clean")


@dataclass(slots=True)
class RunningFlags:
    """Store-wide switches shared by the services and the put path."""

    disk_full: bool = False
    shutdown: bool = False
    writeable: bool = True

    @property
    def can_write(self) -> bool:
        return self.writeable and not self.disk_full and not self.shutdown


def disk_used_ratio(path: Path) -> float:
    """Used fraction of the file system holding `path` (0..1), as `df` computes Use%.

    used / (used + available to us): blocks reserved for root count neither way, so the ratio
    reaches 1.0 exactly when our writes start failing with ENOSPC. (RocketMQ divides by the total
    instead, which never reaches 1.0 on a file system with reserved blocks.)
    """
    st = os.statvfs(path)
    used = st.f_blocks - st.f_bfree
    usable = used + st.f_bavail
    return used / usable if usable > 0 else 0.0


def _delete_hours(delete_when: str) -> set[int]:
    """`deleteWhen` ("04", "04;16"): the hours of the day when expired segments are deleted."""
    return {int(h) for h in delete_when.split(";") if h.strip()}


@dataclass(frozen=True, slots=True)
class DiskThresholds:
    """The three disk levels, as fractions (see the module docstring)."""

    delete_expired: float = 0.75
    delete_forcibly: float = 0.85
    refuse_writes: float = 0.90
    forcibly_enabled: bool = True

    @classmethod
    def from_config(cls, cfg: StoreConfig) -> DiskThresholds:
        return cls(
            delete_expired=cfg.disk_max_used_space_ratio / 100,
            delete_forcibly=cfg.disk_space_clean_forcibly_ratio / 100,
            refuse_writes=cfg.disk_space_warning_level_ratio / 100,
            forcibly_enabled=cfg.clean_file_forcibly_enable,
        )


class CleanService(ServiceThread):
    name = "clean"

    def __init__(
        self,
        commit_log: CommitLog,
        cq_store: ConsumeQueueStore,
        index: IndexService | None,
        flags: RunningFlags,
        clock: Clock,
        *,
        store_root: Path,
        interval_ms: int,
        file_reserved_hours: int,
        delete_when: str,
        thresholds: DiskThresholds,
        disk_ratio: Callable[[Path], float] = disk_used_ratio,
    ) -> None:
        super().__init__(interval_ms / 1000)
        self.commit_log = commit_log
        self.cq_store = cq_store
        self.index = index
        self.flags = flags
        self.clock = clock
        self.store_root = store_root
        self.file_reserved_ms = file_reserved_hours * 3_600_000
        self.delete_hours = _delete_hours(delete_when)
        self.thresholds = thresholds
        self.disk_ratio = disk_ratio
        self.manual_delete_requested = False

    def retune(
        self, *, interval_ms: int, file_reserved_hours: int, delete_when: str, thresholds: DiskThresholds
    ) -> None:
        """New settings (UPDATE_BROKER_CONFIG); the service wakes so they apply now."""
        self.interval_s = interval_ms / 1000
        self.file_reserved_ms = file_reserved_hours * 3_600_000
        self.delete_hours = _delete_hours(delete_when)
        self.thresholds = thresholds
        self.wakeup()

    def run_once(self) -> None:
        self.clean(force_hour=False)

    def clean(self, *, force_hour: bool) -> int:
        """One cleaning pass; returns commit-log segments deleted."""
        ratio = self.disk_ratio(self.store_root)
        levels = self.thresholds
        full = ratio > levels.refuse_writes
        if full != self.flags.disk_full:
            if full:
                log.error(
                    "disk %.0f%% used, above diskSpaceWarningLevelRatio %.0f%%: store not writable",
                    ratio * 100,
                    levels.refuse_writes * 100,
                )
            else:
                log.info("disk %.0f%% used: store writable again", ratio * 100)
            self.flags.disk_full = full
        at_once = levels.forcibly_enabled and ratio > levels.delete_forcibly
        space_short = ratio > levels.delete_expired
        now = self.clock.now_ms()
        hour = time.localtime(now / 1000).tm_hour
        due = force_hour or space_short or self.manual_delete_requested or hour in self.delete_hours
        if not due:
            return 0
        self.manual_delete_requested = False
        if space_short:
            log.warning("disk %.0f%% used: reclaiming space%s", ratio * 100, " at once" if at_once else "")
        expire_ms = 0 if at_once else self.file_reserved_ms
        deleted = self.commit_log.queue.delete_expired_by_time(expire_ms, now)
        if deleted:
            min_offset = self.commit_log.min_offset
            log.info("deleted %d expired commit-log segments; min offset now %d", deleted, min_offset)
            self.cq_store.delete_expired(min_offset)
            if self.index is not None:
                self.index.delete_expired(min_offset)
        return deleted
