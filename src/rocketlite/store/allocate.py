"""Prepares the next commit-log segment in the background, off the append path.

When segment N is created, this service stages segment N+1 as `DIR.alloc/NAME` beside the
segment directory (`mapped_file.staging_dir`; `stage_reserved`: blocks reserved with
`posix_fallocate`, a millisecond, and no disk bandwidth taken from the appends);
`mapped_file.create_segment` then only renames it. Stale staging files are removed when the queue
loads. A segment that exists has its full size and reads as zeros past its data.

A put never waits for the staging of a segment other than the one it needs: the append path
waits only when the service is staging exactly that segment, and otherwise makes it itself.

With `warmMapedFileEnable` (RocketMQ's key; off by default, as in RocketMQ) the service also
warms segments (`warm_pages`): the one the append path just created and the one it stages are
read through once, so their pages are in the page cache before an append touches them. A first
write into a page of a reserved file otherwise costs the append path a page fault that
allocates and zeroes a page-cache page (mapped appends), or a page allocation inside `pwrite`
(batches). Reading reserved (unwritten) blocks does no disk I/O and the pages stay clean, so
warming takes no disk bandwidth from the appends.

It is off by default because it moves work rather than saving it, and adds some: reading a
reserved block zeroes its whole page (and copies it out), while a `pwrite` that covers a whole
page of a reserved block fills it without zeroing it first. In docs/benchmarks.md's profile of
batched 1 KiB produce (peers bench), the zeroing in the warming reads was a third of the broker's
CPU (0.2-0.3 s of the service thread per 128 MiB segment on this project's VMs, memset of fresh
pages being slow there), and turning warming off took the broker from 6.0-6.5 to 3.6-4.0 µs of
CPU per message; single sends (mapped appends, which fault and zero each page either way) were
unchanged within noise. What warming still buys is the event loop's own time on mapped appends,
on a machine with a core to spare.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from pathlib import Path

from rocketlite.store.flush import ServiceThread
from rocketlite.store.mapped_file import MappedFile, is_staged, segment_name, stage_reserved, staging_path

log = logging.getLogger("rocketlite.store.allocate")

WARM_CHUNK = 1 << 20  # bytes read per system call when warming a segment


def warm_pages(path: Path, stop: threading.Event | None = None) -> int:
    """Read `path` through once (its pages into the page cache: see the module docstring); the
    bytes read. A file that is gone (renamed from its staging name, deleted) is skipped; `stop`
    ends the read early (shutdown)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return 0
    done = 0
    try:
        buf = bytearray(WARM_CHUNK)
        while stop is None or not stop.is_set():
            n = os.preadv(fd, [buf], done)
            if n <= 0:
                break
            done += n
    finally:
        os.close(fd)
    return done


class AllocateMappedFileService(ServiceThread):
    name = "allocate"

    def __init__(self, warm: bool = False) -> None:
        super().__init__(1.0)
        self._warm_enabled = warm
        self._stage: Callable[[Path, int], None] = stage_reserved
        self._lock = threading.Lock()  # guards _pending and _busy
        self._pending: list[tuple[Path, int]] = []
        self._busy: Path | None = None  # the segment being staged now
        self._warm: list[Path] = []  # created segments to warm (guarded by _lock)
        self._warmed: set[Path] = set()  # staged segments warmed already (service thread only)
        self.warmed_bytes = 0
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
            if self._warm_enabled:
                self._warm.append(path)
        self.wakeup()
        return mf

    def _create(self, path: Path, size: int, write_buffer: bool) -> MappedFile:
        if not is_staged(path, size):
            self._stage(staging_path(path), size)
        return MappedFile(path, size, write_buffer=write_buffer)

    def run_once(self) -> None:
        self._warm_created()
        self._stage_pending()

    def _warm_created(self) -> None:
        with self._lock:
            paths, self._warm = self._warm, []
        for path in paths:
            if path in self._warmed:
                self._warmed.discard(path)  # warmed when it was staged
            else:
                self.warmed_bytes += warm_pages(path, self._stopped)

    def _stage_pending(self) -> None:
        """Stage every pending segment. A caller that finds nothing pending while the service
        thread is still staging one waits for that staging to end, so whoever calls `run_once`
        (a test, a shutdown) sees every staged file in place when it returns."""
        while True:
            with self._lock:
                if not self._pending:
                    in_flight = self._busy is not None
                    break
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
            if self._warm_enabled:
                self._warm_staged(path)
        if in_flight:
            with self._staging:
                pass

    def _warm_staged(self, path: Path) -> None:
        self._warm_created()  # the append path may have created one meanwhile: first
        staged = staging_path(path)  # or, renamed into use meanwhile, the segment itself
        self.warmed_bytes += warm_pages(staged, self._stopped) or warm_pages(path, self._stopped)
        self._warmed.add(path)
