"""One fixed-size segment file of a log, named by the 20-digit zero-padded offset it starts at.

File layout: `file_size` bytes of records written front to back; bytes past the write position are
zero (segments are created with their blocks reserved, never sparse, by `create_segment`, so a
full disk is an error at creation rather than a SIGBUS on a mapped write). Three
positions describe a segment::

    0 <= flushed <= committed <= wrote <= file_size

* wrote: bytes appended so far;
* committed: bytes visible in the file (equal to `wrote` unless a write buffer is in use — the
  `transientStorePoolEnable` mode, where appends go to memory and `commit` pwrites them);
* flushed: bytes known durable (fdatasync).

Small appends (single records) are copied into a shared writable mapping of the file: no system
call, and no release of the GIL for another thread to grab, per append. The pages are the page
cache's, so `fdatasync` on the descriptor makes them durable exactly as after a `pwrite`, and the
allocation at creation guarantees the blocks exist. Appends of `PWRITE_MIN_BYTES` or more (batches) are
pwritten instead: for them the page faults on freshly mapped pages and the write-protection of
mapped pages at writeback cost more than one system call. In write-buffer mode appends go to
memory and `commit` pwrites them. Reads are read-only zero-copy memoryviews of the mapping. The
class owns no threads; flush and commit are called by services.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import mmap
import os
from collections.abc import Iterator
from pathlib import Path

from rocketlite.protocol.formats.speedups import place_record

log = logging.getLogger("rocketlite.store.mapped_file")

OS_PAGE_SIZE = 4096
PWRITE_MIN_BYTES = 16 * 1024  # appends this large use pwrite, smaller ones the mapping (see above)
_IOV_MAX = 1024  # Linux's limit on the pieces of one pwritev
_ZERO_CHUNK = bytes(1 << 20)  # what `zero_from` writes over a torn tail


def segment_name(offset: int) -> str:
    """`00000000000000000000`-style name of a segment starting at `offset`."""
    return f"{offset:020d}"


def staging_dir(directory: Path) -> Path:
    """Where the segments of `directory` are built: its sibling `NAME.alloc/` (`commitlog.alloc/`
    beside `commitlog/`, `consumequeue/T/0.alloc/` beside `consumequeue/T/0/`).

    Not inside `directory`: RocketMQ's broker loads every file of a segment directory as a
    segment and refuses the whole store over any other name, and a crash can leave a staged
    segment behind. A sibling on the same file system keeps the rename into place atomic, and
    RocketMQ ignores it (it reads only the store's own directories, and skips a queue directory
    whose name is not a number)."""
    return directory.with_name(directory.name + ".alloc")


def staging_path(path: Path) -> Path:
    """Where the segment `path` is built before it is renamed into place (see `staging_dir`)."""
    return staging_dir(path.parent) / path.name


def remove_staged(directory: Path) -> None:
    """Drop the segments staged for `directory` (and any `NAME.alloc` inside it, where rocketlite
    before 0.9 staged them): a staged file is only ever a copy of zeros, never data."""
    staged = staging_dir(directory)
    if staged.is_dir():
        for tmp in staged.iterdir():
            tmp.unlink(missing_ok=True)
        with contextlib.suppress(OSError):
            staged.rmdir()
    if directory.is_dir():
        for tmp in directory.glob("*.alloc"):
            tmp.unlink(missing_ok=True)


# posix_fallocate failures that mean "not on this file system": the file stays sparse instead.
_NO_FALLOCATE = frozenset({errno.EOPNOTSUPP, errno.ENOTSUP, errno.EINVAL, errno.ENOSYS})


def _allocate_blocks(fd: int, size: int) -> None:
    """Reserve disk blocks for `[0, size)` (data unchanged); a file system that cannot is let be."""
    if not hasattr(os, "posix_fallocate"):
        return
    try:
        os.posix_fallocate(fd, 0, size)
    except OSError as exc:
        if exc.errno not in _NO_FALLOCATE:
            raise


@contextlib.contextmanager
def _new_file(tmp: Path) -> Iterator[int]:
    """A descriptor on a fresh `tmp`; if the body fails, `tmp` is removed: a half-built file on a
    full disk would only hold the space the next attempt needs."""
    tmp.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        yield fd
    except BaseException:
        os.close(fd)
        tmp.unlink(missing_ok=True)
        raise
    os.close(fd)


def stage_reserved(tmp: Path, size: int) -> None:
    """Build `tmp` (a staging file) with `size` bytes reserved by `posix_fallocate`, not written.

    This is how every segment of the store is built (commit log, consume queues, index files,
    and a slave's first segment): about a millisecond for 512 MiB, where writing the zeros takes
    a quarter of a second of disk bandwidth that the appends need. Measured on this project's ext4
    disk, a first write into a reserved (unwritten) extent runs at 2,000-2,300 MB/s against 4,600
    for an overwrite of zeroed blocks, but zeroing first costs 2,400 MB/s of its own, so reserving
    is the cheaper whole. Blocks are reserved, so a full disk fails here, not as a SIGBUS on a
    mapped write; unwritten extents read back as zeros, also after a crash.
    """
    with _new_file(tmp) as fd:
        os.ftruncate(fd, size)
        _allocate_blocks(fd, size)


def is_staged(path: Path, size: int) -> bool:
    """`path` exists, or its staging file is built to `size` (and only needs renaming)."""
    tmp = staging_path(path)
    return path.exists() or (tmp.exists() and tmp.stat().st_size == size)


def create_segment(path: Path, size: int) -> None:
    """Create `path` with `size` bytes that read as zeros: the one way a segment file comes to be.

    A staging file already built to `size` (by the allocation service, or an HA slave) is renamed
    into place; otherwise one is built now with `stage_reserved`. Either way the file is complete
    under its staging name first, so a segment that exists always has its full size.
    """
    tmp = staging_path(path)
    if not (tmp.exists() and tmp.stat().st_size == size):
        stage_reserved(tmp, size)
    tmp.replace(path)


def fill_holes(path: Path) -> None:
    """Reserve blocks for any hole in an existing segment (data unchanged). Segments written by
    RocketMQ itself are sparse; appending into one through the mapping on a full disk would be a
    SIGBUS, so the segment that takes appends is filled in when the store opens. On a full disk
    this only logs: the appends then fail the same way any new segment would."""
    st = path.stat()
    if st.st_blocks * 512 >= st.st_size:
        return  # no hole: leave the file (and its mtime) alone
    fd = os.open(path, os.O_RDWR)
    try:
        _allocate_blocks(fd, st.st_size)
    except OSError as exc:
        log.error("cannot reserve the blocks of %s: %s", path, exc)
    finally:
        os.close(fd)


class MappedFile:
    """A segment file: append, commit, flush, zero-copy reads."""

    def __init__(
        self,
        path: Path,
        file_size: int,
        *,
        write_buffer: bool = False,
        create: bool = True,
        readonly: bool = False,
    ) -> None:
        self.path = path
        self.file_size = file_size
        self.file_from_offset = int(path.name)
        self.readonly = readonly
        if not path.exists():
            if not create or readonly:
                raise FileNotFoundError(path)
            create_segment(path, file_size)
        actual = path.stat().st_size
        if actual != file_size:
            raise ValueError(f"segment {path} has size {actual}, expected {file_size}")
        self._fd = os.open(path, os.O_RDONLY if readonly else os.O_RDWR)
        access = mmap.ACCESS_READ if readonly else mmap.ACCESS_WRITE
        self._mmap = mmap.mmap(self._fd, file_size, access=access)
        self._view = memoryview(self._mmap).toreadonly()  # readers never get writable slices
        # Write-buffer mode: a buffer exactly while the segment can still take appends. A segment
        # opened from disk (create=False) gets one only if `set_positions` leaves room in it.
        self._buffer_mode = write_buffer and not readonly
        self._buffer: bytearray | None = bytearray(file_size) if self._buffer_mode and create else None
        self.wrote_position = 0
        self.committed_position = 0
        self.flushed_position = 0
        self.store_timestamp = 0  # store time of the last record appended (for flush checkpoints)
        self.closed = False

    # -- positions --------------------------------------------------------------------------
    @property
    def remaining(self) -> int:
        return self.file_size - self.wrote_position

    @property
    def holds_write_buffer(self) -> bool:
        """Write-buffer mode, and the buffer still holds bytes the file does not."""
        return self._buffer is not None

    @property
    def is_full(self) -> bool:
        return self.wrote_position >= self.file_size

    @property
    def read_position(self) -> int:
        """How far readers may read: committed bytes when buffered, else everything written."""
        return self.committed_position if self._buffer is not None else self.wrote_position

    def set_positions(self, position: int) -> None:
        """After recovery: everything up to `position` is valid, written and on disk.

        In write-buffer mode a full segment drops its buffer (it would never be committed again,
        and it counts against `transientStorePoolSize`) and one with room gets one."""
        self.wrote_position = self.committed_position = self.flushed_position = position
        if self._buffer_mode:
            if position >= self.file_size:
                self._buffer = None
            elif self._buffer is None:
                self._buffer = bytearray(self.file_size)

    # -- writing ----------------------------------------------------------------------------
    def append(self, data: bytes | bytearray | memoryview) -> int:
        """Write `data` at the write position; returns the position it was written at."""
        pos = self.wrote_position
        n = len(data)
        if pos + n > self.file_size:
            raise ValueError(f"append of {n} bytes past the end of {self.path.name}")
        if self._buffer is not None:
            self._buffer[pos : pos + n] = data
        elif n < PWRITE_MIN_BYTES:
            self._mmap[pos : pos + n] = data
            self.committed_position = pos + n
        else:
            with memoryview(data) as view:
                done = 0
                while done < n:
                    done += os.pwrite(self._fd, view[done:], pos + done)
            self.committed_position = pos + n
        self.wrote_position = pos + n
        return pos

    def append_many(self, parts: list[bytearray]) -> int:
        """`append` of `parts` back to back, the large case in one `pwritev` (a read's batches
        written with one system call); returns the position the first was written at."""
        pos = self.wrote_position
        n = sum(map(len, parts))
        if len(parts) == 1 or self._buffer is not None or n < PWRITE_MIN_BYTES or len(parts) > _IOV_MAX:
            for part in parts:
                self.append(part)
            return pos
        if pos + n > self.file_size:
            raise ValueError(f"append of {n} bytes past the end of {self.path.name}")
        done = os.pwritev(self._fd, parts, pos)
        if done < n:  # a short write: the rest piece by piece, as `append` finishes one
            at = 0
            for part in parts:
                end = at + len(part)
                if end > done:
                    with memoryview(part) as view:
                        skip = max(done - at, 0)
                        while skip < len(part):
                            skip += os.pwrite(self._fd, view[skip:], pos + at + skip)
                    done = end
                at = end
        self.committed_position = self.wrote_position = pos + n
        return pos

    def append_parts(self, head: bytes | bytearray, tail: bytes) -> int:
        """Append a record given as header + tail without concatenating them first."""
        pos = self.wrote_position
        end = pos + len(head)
        stop = end + len(tail)
        if stop > self.file_size:
            raise ValueError(f"append of {stop - pos} bytes past the end of {self.path.name}")
        if self._buffer is not None:
            self._buffer[pos:end] = head
            self._buffer[end:stop] = tail
            self.wrote_position = stop
        else:
            mm = self._mmap
            mm[pos:end] = head
            mm[end:stop] = tail
            self.wrote_position = self.committed_position = stop
        return pos

    def place_record(
        self,
        head: bytearray,
        tail: bytes,
        stamp_pos: int,
        queue_offset: int,
        store_timestamp: int,
        id_prefix: str,
    ) -> tuple[int, str]:
        """Append one encoded record with its queue offset, its own offset and the store time
        patched in (`speedups.place_record`: one compiled call); returns (its offset, msg id)."""
        pos = self.wrote_position
        stop = pos + len(head) + len(tail)
        if stop > self.file_size:
            raise ValueError(f"append of {stop - pos} bytes past the end of {self.path.name}")
        buffer = self._buffer
        phys = self.file_from_offset + pos
        msg_id = place_record(
            self._mmap if buffer is None else buffer,
            pos, head, tail, stamp_pos, queue_offset, phys, store_timestamp, id_prefix,
        )  # fmt: skip
        self.wrote_position = stop
        if buffer is None:
            self.committed_position = stop
        self.store_timestamp = store_timestamp
        return phys, msg_id

    def _pages_ready(self, done: int, target: int, least_pages: int) -> bool:
        if self.is_full and target > done:
            return True
        if least_pages > 0:
            return target // OS_PAGE_SIZE - done // OS_PAGE_SIZE >= least_pages
        return target > done

    def commit(self, least_pages: int = 0) -> int:
        """Write buffered bytes to the file (write-buffer mode); returns the committed position."""
        if self._buffer is None:
            return self.committed_position
        wrote = self.wrote_position
        if self._pages_ready(self.committed_position, wrote, least_pages):
            start = self.committed_position
            view = memoryview(self._buffer)[start:wrote]
            written = 0
            while written < len(view):
                written += os.pwrite(self._fd, view[written:], start + written)
            view.release()
            self.committed_position = wrote
            if self.committed_position >= self.file_size:
                self._buffer = None  # the file holds everything now; free the memory
        return self.committed_position

    def flush(self, least_pages: int = 0) -> int:
        """fdatasync if enough pages are pending; returns the flushed position."""
        target = self.committed_position if self._buffer is not None else self.wrote_position
        if (
            self._pages_ready(self.flushed_position, target, least_pages)
            and not self.closed
            and not self.readonly
        ):
            os.fdatasync(self._fd)
            self.flushed_position = target
        return self.flushed_position

    def sync(self) -> None:
        """fdatasync whatever the page cache holds of this file, whoever wrote it."""
        if not self.closed and not self.readonly:
            os.fdatasync(self._fd)

    def write_at(self, pos: int, data: bytes) -> None:
        """Overwrite bytes in place (recovery zeroing a torn tail); flushed at once."""
        if self._buffer is not None:
            self._buffer[pos : pos + len(data)] = data
        os.pwrite(self._fd, data, pos)

    def zero_from(self, pos: int, end: int | None = None) -> None:
        """Zero `[pos, end)` so stale bytes past a truncation point can never be read as records."""
        stop = self.file_size if end is None else end
        while pos < stop:
            n = min(len(_ZERO_CHUNK), stop - pos)
            self.write_at(pos, _ZERO_CHUNK[:n])
            pos += n
        os.fdatasync(self._fd)

    # -- reading ----------------------------------------------------------------------------
    def read(self, pos: int, size: int) -> memoryview | None:
        """Zero-copy view of `[pos, pos+size)` if fully readable, else None."""
        if pos < 0 or size < 0 or pos + size > self.read_position:
            return None
        return self._view[pos : pos + size]

    def read_from(self, pos: int) -> memoryview | None:
        """Zero-copy view from `pos` to the read position."""
        end = self.read_position
        if pos < 0 or pos > end:
            return None
        return self._view[pos:end]

    def raw_view(self) -> memoryview:
        """The whole mapped file regardless of positions (recovery scans)."""
        return self._view

    # -- lifecycle --------------------------------------------------------------------------
    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        try:
            self._view.release()
            self._mmap.close()
        except BufferError:
            # A reader still holds a slice; the mapping goes away when the last view does.
            log.debug("segment %s still referenced by a reader; unmapping lazily", self.path.name)
        os.close(self._fd)

    def destroy(self) -> None:
        """Close and delete the file."""
        self.close()
        self.path.unlink(missing_ok=True)

    def last_modified_ms(self) -> int:
        return int(self.path.stat().st_mtime * 1000)

    def __repr__(self) -> str:
        return f"MappedFile({self.path.name}, wrote={self.wrote_position}, flushed={self.flushed_position})"
