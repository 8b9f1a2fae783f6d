"""Prepares the next commit-log segment in the background, off the append path.

When segment N is created, this service stages segment N+1 as `NAME.alloc` (`stage_reserved`:
blocks reserved with `posix_fallocate`, a millisecond, and no disk bandwidth taken from the
appends); `mapped_file.create_segment` then only renames it. Stale staging files are removed when
the queue loads. A segment that exists has its full size and reads as zeros past its data.

A put never waits for the staging of a segment other than the one it needs: the append path
waits only when the service is staging exactly that segment, and otherwise makes it itself.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path

from rocketlite.store.flush import ServiceThread
from rocketlite.store.mapped_file import MappedFile, is_staged, segment_name, stage_reserved, staging_path

log = logging.getLogger("rocketlite.store.allocate")


class AllocateMappedFileService(ServiceThread):
    name = "allocate"

    def __init__(self) -> None:
        super().__init__(1.0)
        self._stage: Callable[[Path, int], None] = stage_reserved
        self._lock = threading.Lock()  # guards _pending and _busy
        self._pending: list[tuple[Path, int]] = []
        self._busy: Path | None = None  # the segment being staged now
        # Held while a staging file is being built, so a segment is never renamed into use
        # half-built; the append path takes it only to wait for the segment it needs itself.
        self._staging = threading.Lock()

    def allocate(self, path: Path, size: int, write_buffer: bool) -> MappedFile:
        """An `Allocator` for `MappedFileQueue`: create `path` (staged if ready), stage the next."""
        with self._lock:
            # The append path makes `path` now: the service must not start on it as well.
            self._pending = [(p, s) for p, s in self._pending if p != path]
            busy = self._busy == path
        if busy:
            with self._staging:  # wait for this very segment, then build on what was staged
                mf = self._create(path, size, write_buffer)
        else:
            mf = self._create(path, size, write_buffer)
        nxt = path.with_name(segment_name(int(path.name) + size))
        with self._lock:
            self._pending.append((nxt, size))
        self.wakeup()
        return mf

    def _create(self, path: Path, size: int, write_buffer: bool) -> MappedFile:
        if not is_staged(path, size):
            self._stage(staging_path(path), size)
        return MappedFile(path, size, write_buffer=write_buffer)

    def run_once(self) -> None:
        while True:
            with self._lock:
                if not self._pending:
                    return
                path, size = self._pending.pop(0)
                self._busy = path
            try:
                with self._staging:
                    if is_staged(path, size):
                        continue
                    try:
                        self._stage(staging_path(path), size)
                    except OSError as exc:
                        # The append path creates the segment itself when it needs it (and
                        # reports a full disk to the producer then); nothing is lost here.
                        log.warning("cannot stage segment %s: %s", path.name, exc)
                        continue
            finally:
                with self._lock:
                    self._busy = None
            log.debug("staged segment %s", path.name)
