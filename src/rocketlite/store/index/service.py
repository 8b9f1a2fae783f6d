"""`IndexService`: the list of index files under `{storeRoot}/index`, fed by the dispatcher and
queried by QUERY_MESSAGE (RocketMQ 4.x `IndexService.java`).

Each dispatched message is indexed under `topic#UNIQ_KEY` and `topic#k` for every space-separated
token `k` of its KEYS; ROLLBACK records are not indexed, nor records below the last file's
endPhyOffset (already indexed). When the last file is full a new one is created whose header
begins where the old one ended.

`build_index_batch` is the reput loop's fast path: `speedups.index_entries` picks the entries and
computes every key's Java `String.hashCode` (compiled: continued from the `topic#` prefix's hash,
no string built per key), and they go into the file in one call (`IndexFile.put_run`, compiled
`speedups.index_put`). The result is byte-identical to indexing one key at a time.

Thread safety: writers (dispatch), queries and maintenance all take one `RLock`. `flush` takes it
only to snapshot headers and msyncs outside it; a second lock serialises flushes with the calls
that close or delete files.
"""

from __future__ import annotations

import logging
import threading
from array import array
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from rocketlite.clock import Clock
from rocketlite.protocol.formats.record import DispatchRequest
from rocketlite.store.codec.speedups import index_entries
from rocketlite.store.index.file import IndexFile, next_index_file_name
from rocketlite.store.mapped_file import fill_holes

log = logging.getLogger("rocketlite.store.index_service")

DEFAULT_MAX_QUERY_NUM: Final = 64  # MessageStoreConfig.maxMsgsNumBatch


@dataclass(slots=True)
class QueryOffsetResult:
    """`QueryOffsetResult`: matching commit-log offsets (newest file first) and the last file's end."""

    phy_offsets: list[int]
    index_last_update_timestamp: int
    index_last_update_phyoffset: int


class IndexService:
    """Index files of one store; see the module docstring."""

    def __init__(
        self,
        index_dir: Path,
        hash_slot_num: int,
        index_num: int,
        clock: Clock,
        max_query_num: int = DEFAULT_MAX_QUERY_NUM,
    ) -> None:
        self.index_dir = index_dir
        self.hash_slot_num = hash_slot_num
        self.index_num = index_num
        self.max_query_num = max_query_num
        self._clock = clock
        self._files: list[IndexFile] = []
        self._lock = threading.RLock()
        self._flush_lock = threading.Lock()

    # -- lifecycle ---------------------------------------------------------------------------
    def load(self, last_exit_ok: bool, checkpoint_index_timestamp: int) -> None:
        """Open the existing files in name order. After an abnormal exit, delete those whose
        endTimestamp is past the checkpoint's indexMsgTimestamp (they may be torn); the reput
        service rebuilds them."""
        self.index_dir.mkdir(parents=True, exist_ok=True)
        for stale in self.index_dir.glob("*.alloc"):  # a crash while creating a file
            stale.unlink(missing_ok=True)
        paths = sorted(
            (p for p in self.index_dir.iterdir() if p.is_file() and p.name.isdigit()),
            key=lambda p: p.name,
        )
        if paths:
            fill_holes(paths[-1])  # the file that takes new entries (RocketMQ's are sparse)
        with self._flush_lock, self._lock:
            for path in paths:
                f = IndexFile(path, self.hash_slot_num, self.index_num)
                if not last_exit_ok and f.end_timestamp > checkpoint_index_timestamp:
                    log.info("abnormal exit: dropping index file %s (end %d)", path, f.end_timestamp)
                    f.destroy()
                    continue
                if not last_exit_ok:
                    removed = f.repair()
                    if removed:
                        log.warning(
                            "abnormal exit: %s had %d unflushed entries; re-indexing them", path, removed
                        )
                self._files.append(f)
            log.info("loaded %d index files from %s", len(self._files), self.index_dir)

    def close(self) -> None:
        """Flush and unmap every file."""
        with self._flush_lock, self._lock:
            for f in self._files:
                f.close()
            self._files.clear()

    def destroy(self) -> None:
        """Delete every index file."""
        with self._flush_lock, self._lock:
            for f in self._files:
                f.destroy()
            self._files.clear()

    @property
    def files(self) -> tuple[IndexFile, ...]:
        """The files, oldest first (a snapshot)."""
        with self._lock:
            return tuple(self._files)

    def has_files(self) -> bool:
        with self._lock:
            return bool(self._files)

    def end_phy_offset(self) -> int:
        """The last file's endPhyOffset: the commit-log offset of the newest indexed record (0
        without files). Records below it are skipped by `build_index`; one at it is indexed again."""
        with self._lock:
            return self._files[-1].end_phy_offset if self._files else 0

    def end_timestamp(self) -> int:
        """The last file's endTimestamp (0 without files)."""
        with self._lock:
            return self._files[-1].end_timestamp if self._files else 0

    # -- building ----------------------------------------------------------------------------
    def build_index(self, req: DispatchRequest) -> None:
        """`IndexService.buildIndex` for one record."""
        self.build_index_batch((req,))

    def build_index_batch(self, reqs: Sequence[DispatchRequest]) -> None:
        """`build_index` for each record in order, in one step: the entries come from
        `speedups.index_entries` (compiled: the key hashes without a Python string per key)."""
        if not reqs:
            return
        with self._lock:
            self.put_entries(*index_entries(reqs, self._writable_file().end_phy_offset))

    def put_entries(self, hashes: array[int], offsets: array[int], stamps: array[int]) -> None:
        """Put entries (`speedups.index_entries`, `speedups.dispatch_batch`) in order, a run per
        file (`IndexFile.put_run`: one compiled call), rolling to a new file when one is full."""
        total = len(hashes)
        with self._lock:
            pos = 0
            while pos < total:
                put = self._writable_file().put_run(hashes, offsets, stamps, pos)
                if put == 0:
                    self._roll()
                pos += put

    def _writable_file(self) -> IndexFile:
        """The last file, or a new one when there is none or it is full (`getAndCreateLastIndexFile`)."""
        if self._files and not self._files[-1].is_write_full:
            return self._files[-1]
        return self._roll()

    def _roll(self) -> IndexFile:
        last = self._files[-1] if self._files else None
        self.index_dir.mkdir(parents=True, exist_ok=True)
        name = next_index_file_name(self._clock.now_ms(), last.name if last else None)
        f = IndexFile(
            self.index_dir / name,
            self.hash_slot_num,
            self.index_num,
            end_phy_offset=last.end_phy_offset if last else 0,
            end_timestamp=last.end_timestamp if last else 0,
        )
        self._files.append(f)
        log.info("created index file %s", f.path)
        return f

    # -- queries -----------------------------------------------------------------------------
    def query_offset(self, topic: str, key: str, max_num: int, begin: int, end: int) -> QueryOffsetResult:
        """`IndexService.queryOffset`: offsets for `topic#key` stored in [begin, end], newest file
        first, at most min(max_num, max_query_num); may contain false positives."""
        max_num = min(max_num, self.max_query_num)
        found: list[int] = []
        last_ts = last_offset = 0
        full_key = f"{topic}#{key}"
        with self._lock:
            for i in range(len(self._files) - 1, -1, -1):
                f = self._files[i]
                if i == len(self._files) - 1:
                    last_ts = f.end_timestamp
                    last_offset = f.end_phy_offset
                if f.is_time_matched(begin, end):
                    found.extend(f.select_phy_offsets(full_key, max_num - len(found), begin, end))
                if f.begin_timestamp < begin or len(found) >= max_num:
                    break
        return QueryOffsetResult(found, last_ts, last_offset)

    # -- maintenance -------------------------------------------------------------------------
    def delete_expired(self, min_commit_log_offset: int) -> int:
        """`deleteExpiredFile`: delete the oldest files (never the last one) whose endPhyOffset is
        below the commit log's min offset; returns how many were deleted."""
        with self._flush_lock, self._lock:
            n = 0
            while n < len(self._files) - 1 and self._files[n].end_phy_offset < min_commit_log_offset:
                n += 1
            for f in self._files[:n]:
                log.info("deleting expired index file %s", f.path)
                f.destroy()
            del self._files[:n]
            return n

    def truncate(self, phy_offset: int) -> int:
        """Drop the index past a truncated commit log: delete files beginning at or after
        `phy_offset`; a file straddling it keeps its entries (callers filter offsets past the
        log's end) but its endPhyOffset is lowered to `phy_offset`, so the records rewritten there
        are indexed again. Returns how many files were deleted."""
        with self._flush_lock, self._lock:
            keep = [f for f in self._files if f.begin_phy_offset < phy_offset]
            gone = [f for f in self._files if f.begin_phy_offset >= phy_offset]
            for f in gone:
                log.info("truncate to %d: deleting index file %s", phy_offset, f.path)
                f.destroy()
            self._files = keep
            if keep and keep[-1].end_phy_offset > phy_offset:
                keep[-1].lower_end_phy_offset(phy_offset)
            return len(gone)

    def flush(self) -> int:
        """Make every written file durable; returns the newest file's endTimestamp as flushed
        (0 without files), the value for the checkpoint's indexMsgTimestamp."""
        with self._flush_lock:
            with self._lock:
                if not self._files:
                    return 0
                pending = [(f, f.snapshot_header()) for f in self._files if f.dirty]
                flushed_ts = self._files[-1].end_timestamp
            try:
                for f, header in pending:
                    f.flush(header)
            except BaseException:
                for f, _ in pending:
                    f.mark_dirty()
                raise
            return flushed_ts
