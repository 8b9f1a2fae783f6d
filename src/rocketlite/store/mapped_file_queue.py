"""A directory of consecutive `MappedFile` segments seen as one log addressed by absolute offset.

Segment N starts at `N * file_size` and is named by that offset (20 digits). Used for the commit
log (1 GiB segments) and for every consume queue (6,000,000-byte segments). Owns no threads: the
allocator it is given may pre-create the next segment in the background.

Allocators: `direct_allocator` creates the segment in the caller's thread with
`mapped_file.create_segment` (blocks reserved, not written: microseconds, where writing 6 MB of
zeros took tens to hundreds of milliseconds); the commit log uses
`allocate.AllocateMappedFileService`, which builds its next segment the same way in the background
so the append path only renames it.
"""

from __future__ import annotations

import bisect
import logging
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

from rocketlite.store.mapped_file import MappedFile, fill_holes, remove_staged, segment_name

log = logging.getLogger("rocketlite.store.mapped_file_queue")

Allocator = Callable[[Path, int, bool], MappedFile]


def direct_allocator(path: Path, size: int, write_buffer: bool) -> MappedFile:
    """Create the segment in the caller's thread (`MappedFile` calls `create_segment`)."""
    return MappedFile(path, size, write_buffer=write_buffer)


class MappedFileQueue:
    """Segments of one log, sorted by start offset."""

    def __init__(
        self,
        directory: Path,
        file_size: int,
        *,
        allocator: Allocator = direct_allocator,
        write_buffer: bool = False,
        readonly: bool = False,
    ) -> None:
        self.directory = directory
        self.readonly = readonly
        self.file_size = file_size
        self.allocator = allocator
        self.write_buffer = write_buffer
        self.files: list[MappedFile] = []
        self._starts: list[int] = []
        self._lock = threading.Lock()  # guards the list, not the bytes
        self.flushed_where = 0
        self.committed_where = 0

    # -- loading ----------------------------------------------------------------------------
    def load(self) -> None:
        """Open every segment in the directory; positions start at end-of-file (recovery fixes them).

        Segments staged before a crash (`mapped_file.staging_dir`) are removed; a segment of the
        wrong size is an error naming the file, never silently ignored.
        """
        if not self.readonly:
            remove_staged(self.directory)
        if not self.directory.exists():
            return
        names = sorted(p for p in self.directory.iterdir() if p.is_file() and p.name.isdigit())
        if names and not self.readonly:
            fill_holes(names[-1])
        for path in names:
            mf = MappedFile(
                path, self.file_size, write_buffer=self.write_buffer, create=False, readonly=self.readonly
            )
            mf.set_positions(self.file_size)
            self._add(mf)

    def _add(self, mf: MappedFile) -> None:
        with self._lock:
            self.files.append(mf)
            self._starts.append(mf.file_from_offset)

    # -- access -----------------------------------------------------------------------------
    @property
    def last_file(self) -> MappedFile | None:
        return self.files[-1] if self.files else None

    @property
    def first_file(self) -> MappedFile | None:
        return self.files[0] if self.files else None

    def get_last_file(self, start_offset: int = 0, *, create: bool = True) -> MappedFile | None:
        """The segment to append to; creates the first one (covering `start_offset`) or the next."""
        last = self.last_file
        if last is not None and not last.is_full:
            return last
        if not create or self.readonly:
            return last
        if last is None:
            create_offset = start_offset - start_offset % self.file_size
        else:
            create_offset = last.file_from_offset + self.file_size
        self.directory.mkdir(parents=True, exist_ok=True)
        mf = self.allocator(self.directory / segment_name(create_offset), self.file_size, self.write_buffer)
        if not self.files:
            self.flushed_where = self.committed_where = create_offset
        self._add(mf)
        return mf

    def find_by_offset(self, offset: int, *, first_if_not_found: bool = False) -> MappedFile | None:
        """The segment holding absolute `offset`."""
        files, starts = self.files, self._starts
        if not files:
            return None
        idx = bisect.bisect_right(starts, offset) - 1
        if 0 <= idx < len(files):
            mf = files[idx]
            if offset < mf.file_from_offset + self.file_size:
                return mf
        return files[0] if first_if_not_found else None

    def __iter__(self) -> Iterator[MappedFile]:
        return iter(list(self.files))

    def __len__(self) -> int:
        return len(self.files)

    @property
    def min_offset(self) -> int:
        first = self.first_file
        return first.file_from_offset if first is not None else 0

    @property
    def max_offset(self) -> int:
        """End of readable data."""
        last = self.last_file
        return last.file_from_offset + last.read_position if last is not None else 0

    @property
    def max_wrote_offset(self) -> int:
        last = self.last_file
        return last.file_from_offset + last.wrote_position if last is not None else 0

    # -- flush / commit ---------------------------------------------------------------------
    def commit(self, least_pages: int = 0) -> bool:
        """Commit from `committed_where` on; True when there was nothing to commit."""
        start = self.committed_where
        self.committed_where = self._advance(start, lambda mf: mf.commit(least_pages))
        return self.committed_where == start

    def flush(self, least_pages: int = 0) -> bool:
        """Flush from `flushed_where` on; True when there was nothing to flush."""
        start = self.flushed_where
        self.flushed_where = self._advance(start, lambda mf: mf.flush(least_pages))
        return self.flushed_where == start

    def _advance(self, where: int, step: Callable[[MappedFile], int]) -> int:
        """Apply `step` to the segment holding `where`, and on to the next while each one completes.

        RocketMQ moves one segment per call, so a flush interval that wrote several segments
        left all but the first unflushed until later intervals: the ASYNC_FLUSH loss window then
        grew with the write rate. Whole segments are always ready (`_pages_ready`), so this
        stops at the first segment with room, where `least_pages` decides.
        """
        while True:
            mf = self.find_by_offset(where, first_if_not_found=where == 0)
            if mf is None:
                return where
            reached = mf.file_from_offset + step(mf)
            if reached == where or reached < mf.file_from_offset + self.file_size:
                return reached
            where = reached

    def flush_all_to(self, offset: int) -> None:
        """Flush until `flushed_where >= offset` (crossing segment boundaries)."""
        while self.flushed_where < offset:
            before = self.flushed_where
            self.commit(0)
            self.flush(0)
            if self.flushed_where == before:
                break

    # -- truncation and deletion -------------------------------------------------------------
    def truncate_dirty(self, offset: int) -> None:
        """Everything from `offset` on is invalid: zero it, delete later segments, reset positions."""
        for mf in list(self.files):
            end = mf.file_from_offset + self.file_size
            if end <= offset:
                continue
            if mf.file_from_offset <= offset:
                pos = offset - mf.file_from_offset
                mf.zero_from(pos)
                mf.set_positions(pos)
            else:
                log.warning("deleting segment %s past the valid end %d", mf.path.name, offset)
                self._remove(mf)
                mf.destroy()
        self.flushed_where = self.committed_where = offset

    def _remove(self, mf: MappedFile) -> None:
        with self._lock:
            idx = self.files.index(mf)
            del self.files[idx]
            del self._starts[idx]

    def delete_first(self) -> MappedFile | None:
        """Remove and destroy the oldest segment (expiry)."""
        first = self.first_file
        if first is None or len(self.files) == 1:
            return None
        self._remove(first)
        first.destroy()
        return first

    def delete_expired_by_time(self, expire_ms: int, now_ms: int, max_delete: int = 10) -> int:
        """Delete segments (never the last) not modified for `expire_ms`; returns how many."""
        deleted = 0
        while deleted < max_delete and len(self.files) > 1:
            first = self.files[0]
            if now_ms - first.last_modified_ms() < expire_ms:
                break
            self.delete_first()
            deleted += 1
        return deleted

    def delete_before(self, offset: int) -> int:
        """Delete whole segments that end at or before `offset` (never the last)."""
        deleted = 0
        while len(self.files) > 1 and self.files[0].file_from_offset + self.file_size <= offset:
            self.delete_first()
            deleted += 1
        return deleted

    def close(self) -> None:
        """Close the segments. A writer also removes its staged next segment (store/allocate.py),
        so a cleanly stopped store holds only RocketMQ's own files."""
        for mf in self.files:
            mf.close()
        if not self.readonly:
            remove_staged(self.directory)

    def destroy(self) -> None:
        for mf in list(self.files):
            mf.destroy()
        self.files.clear()
        self._starts.clear()
        if not self.readonly:
            remove_staged(self.directory)
        if self.directory.exists() and not any(self.directory.iterdir()):
            self.directory.rmdir()
