"""The store directory's lock: one broker per store, rocketlite's or RocketMQ's.

A running broker holds `<storePathRootDir>/lock`. RocketMQ's `DefaultMessageStore.start` takes
`FileChannel.tryLock(0, 1, false)` on it: a POSIX record lock (fcntl F_SETLK) on byte 0. An
`flock` alone would not see that lock, nor RocketMQ ours (Linux keeps the two kinds apart), so a
rocketlite broker and a RocketMQ broker could both open one store and write over each other's
records. `lock_store` takes both kinds:

- an `flock` (exclusive), as before: what other rocketlite processes and tools test;
- a write record lock on byte 0, the range RocketMQ locks. It is an open-file-description lock
  (F_OFD_SETLK, Linux >= 3.15) where there is one: those conflict with RocketMQ's process-owned
  POSIX locks but, unlike them, are not dropped when this process closes some other descriptor
  of the file (reading the lock file from a tool in the same process would otherwise free the
  store). Elsewhere a classic POSIX lock (`lockf`).

Either taken by someone else raises StoreError naming the store. `locked_by_other` asks the
kernel, without taking anything, whether another holder has a record lock on the file (RocketMQ's,
or a rocketlite broker's).
"""

from __future__ import annotations

import errno
import fcntl
import os
import struct
from pathlib import Path
from typing import Final

from rocketlite.protocol.errors import StoreError

LOCK_FILE: Final = "lock"
# struct flock on LP64 Linux: short l_type, short l_whence, (pad), off_t l_start, off_t l_len,
# pid_t l_pid, (pad). The OFD commands need l_pid 0.
_FLOCK = struct.Struct("@hhqqi4x")
_OFD_SETLK: Final = getattr(fcntl, "F_OFD_SETLK", None)
_OFD_GETLK: Final = getattr(fcntl, "F_OFD_GETLK", None)


def _record(kind: int) -> bytes:
    return _FLOCK.pack(kind, os.SEEK_SET, 0, 1, 0)


def _take_record_lock(fd: int) -> None:
    """A write lock on byte 0; BlockingIOError or PermissionError (EAGAIN / EACCES) when another
    holder has one."""
    if _OFD_SETLK is not None:
        try:
            fcntl.fcntl(fd, _OFD_SETLK, _record(fcntl.F_WRLCK))
            return
        except OSError as exc:
            if exc.errno in (errno.EAGAIN, errno.EACCES):
                raise
            # EINVAL: a kernel without OFD locks; the classic lock below
    fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, 0)


def lock_store(root: Path) -> int:
    """Lock the store at `root` for this broker; the descriptor to pass to `unlock_store`."""
    fd = os.open(root / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise StoreError(f"store {root} is in use by another process") from None
    try:
        _take_record_lock(fd)
    except (BlockingIOError, PermissionError):
        os.close(fd)
        raise StoreError(
            f"store {root} is in use by another process (it holds the store's lock the way RocketMQ's "
            "broker does: is a RocketMQ broker running on it?)"
        ) from None
    return fd


def unlock_store(fd: int) -> None:
    """Let go of both locks (closing the descriptor releases them)."""
    os.close(fd)


def locked_by_other(path: Path) -> bool:
    """Whether another open file (another process, or another broker in this one) holds a record
    lock on byte 0 of `path`; nothing is taken. False where the kernel cannot say."""
    if _OFD_GETLK is None:
        return False
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return False
    try:
        answer = fcntl.fcntl(fd, _OFD_GETLK, _record(fcntl.F_RDLCK))
    except OSError:
        return False
    finally:
        os.close(fd)
    return bool(_FLOCK.unpack(answer)[0] != fcntl.F_UNLCK)
