"""Cutting the commit log at an offset before the store starts (controller mode's epoch truncation).

A replica that follows a new master drops whatever its log holds past the last offset both agree
on (the end of the last epoch they share, `protocol.formats.epoch_file.consistent_end`): a deposed
master's unreplicated tail must never survive. On disk that is: every segment starting at or after
the offset is deleted, and the rest of the segment holding it is zeroed. Zeroes are what recovery
reads as the end of the log, so on the next start it drops the consume-queue units and index
entries past it as it does for a torn tail (`recovery.py`).
"""

from __future__ import annotations

import logging
from pathlib import Path

log = logging.getLogger("rocketlite.store")

_ZEROS = bytes(1 << 20)


def cut_commit_log(directory: Path, offset: int) -> int:
    """Remove the commit log's bytes from `offset` on (the store must be stopped); the number of
    bytes zeroed or deleted (0: the log does not reach past `offset`)."""
    if not directory.is_dir():
        return 0
    removed = 0
    for path in sorted(directory.iterdir()):
        if not path.name.isdigit():
            continue
        start, size = int(path.name), path.stat().st_size
        if start >= offset:
            removed += size
            path.unlink()
        elif start < offset < start + size:
            removed += _zero_from(path, offset - start, size)
    if removed:
        log.warning("commit log cut at offset %d (controller mode: the new master's epoch)", offset)
    return removed


def _zero_from(path: Path, position: int, size: int) -> int:
    left = size - position
    with path.open("r+b") as f:
        f.seek(position)
        while left > 0:
            n = min(left, len(_ZEROS))
            f.write(_ZEROS[:n])
            left -= n
    return size - position
