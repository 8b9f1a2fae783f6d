"""Retention and disk protection.

Every `cleanResourceInterval` ms the service measures the store disk. Above
`diskMaxUsedSpaceRatio` it marks the store not writable (puts answer SERVICE_NOT_AVAILABLE; reads
go on) and deletes expired segments at once; otherwise it deletes commit-log segments older than
`fileReservedTime` hours only at the `deleteWhen` hours. Consume-queue files and index files that
point only below the commit log's new minimum offset follow.
"""

from __future__ import annotations

import logging
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from rocketlite.clock import Clock
from rocketlite.store.commit_log import CommitLog
from rocketlite.store.consume_queue_store import ConsumeQueueStore
from rocketlite.store.flush import ServiceThread
from rocketlite.store.index_service import IndexService

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
    """Used fraction of the file system holding `path` (0..1)."""
    usage = shutil.disk_usage(path)
    return (usage.total - usage.free) / usage.total if usage.total else 0.0


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
        disk_max_used_ratio: int,
    ) -> None:
        super().__init__(interval_ms / 1000)
        self.commit_log = commit_log
        self.cq_store = cq_store
        self.index = index
        self.flags = flags
        self.clock = clock
        self.store_root = store_root
        self.file_reserved_ms = file_reserved_hours * 3_600_000
        self.delete_hours = {int(h) for h in delete_when.split(";") if h.strip()}
        self.disk_max_used_ratio = disk_max_used_ratio / 100
        self.manual_delete_requested = False

    def run_once(self) -> None:
        self.clean(force_hour=False)

    def clean(self, *, force_hour: bool) -> int:
        """One cleaning pass; returns commit-log segments deleted."""
        ratio = disk_used_ratio(self.store_root)
        full = ratio > self.disk_max_used_ratio
        if full != self.flags.disk_full:
            if full:
                log.error(
                    "disk %.0f%% used, above diskMaxUsedSpaceRatio %.0f%%: store not writable",
                    ratio * 100,
                    self.disk_max_used_ratio * 100,
                )
            else:
                log.info("disk %.0f%% used: store writable again", ratio * 100)
            self.flags.disk_full = full
        now = self.clock.now_ms()
        hour = time.localtime(now / 1000).tm_hour
        due = force_hour or full or self.manual_delete_requested or hour in self.delete_hours
        if not due:
            return 0
        self.manual_delete_requested = False
        expire_ms = 0 if full else self.file_reserved_ms
        deleted = self.commit_log.queue.delete_expired_by_time(expire_ms, now)
        if deleted:
            min_offset = self.commit_log.min_offset
            log.info("deleted %d expired commit-log segments; min offset now %d", deleted, min_offset)
            self.cq_store.delete_expired(min_offset)
            if self.index is not None:
                self.index.delete_expired(min_offset)
        return deleted
