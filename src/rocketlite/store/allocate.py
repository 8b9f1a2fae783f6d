"""Pre-zeroes the next commit-log segment in the background, off the append path.

A first write into a never-written block costs ~10x an overwrite here, so segments are zero-filled
before use. When segment N is created, this service stages segment N+1 as `NAME.alloc`;
`preallocate` then only renames it. Stale staging files are removed when the queue loads.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path

from rocketlite.store.flush import ServiceThread
from rocketlite.store.mapped_file import MappedFile, prezero, segment_name, staging_path

log = logging.getLogger("rocketlite.store.allocate")


class AllocateMappedFileService(ServiceThread):
    name = "allocate"

    def __init__(self) -> None:
        super().__init__(1.0)
        self._lock = threading.Lock()
        self._pending: list[tuple[Path, int]] = []
        # Held while a staging file is being zeroed, so a segment is never renamed into use
        # while zeros are still being written into it.
        self._staging = threading.Lock()

    def allocate(self, path: Path, size: int, write_buffer: bool) -> MappedFile:
        """An `Allocator` for `MappedFileQueue`: create `path` (staged if ready), stage the next."""
        with self._staging:
            mf = MappedFile(path, size, write_buffer=write_buffer)
        nxt = path.with_name(segment_name(int(path.name) + size))
        with self._lock:
            self._pending.append((nxt, size))
        self.wakeup()
        return mf

    def run_once(self) -> None:
        while True:
            with self._lock:
                if not self._pending:
                    return
                path, size = self._pending.pop(0)
            with self._staging:
                tmp = staging_path(path)
                if path.exists() or (tmp.exists() and tmp.stat().st_size == size):
                    continue
                try:
                    prezero(tmp, size)
                except OSError as exc:
                    # The append path creates the segment itself when it needs it (and reports
                    # a full disk to the producer then); nothing is lost by giving up here.
                    log.warning("cannot stage segment %s: %s", path.name, exc)
                    continue
            log.debug("staged segment %s", path.name)
