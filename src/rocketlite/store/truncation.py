"""Cutting the commit log at an offset before the store starts (controller mode's epoch truncation).

A replica that follows a new master drops whatever its log holds past the last offset both agree
on (the end of the last epoch they share, `protocol.formats.epoch_file.consistent_end`): a deposed
master's unreplicated tail must never survive. On disk that is: every segment starting at or after
the offset is deleted, and the rest of the segment holding it is zeroed. Zeroes are what recovery
reads as the end of the log, so on the next start it drops the consume-queue units and index
entries past it as it does for a torn tail (`recovery.py`).

What is cut is said, never dropped silently (`tail_records`, read before the cut): how many
messages, their bytes, and per topic-queue the range of queue offsets, so an operator knows which
messages a deposed master had acknowledged (with ASYNC replication) that no replica received.
"""

from __future__ import annotations

import logging
import mmap
from dataclasses import dataclass, field
from pathlib import Path

from rocketlite.protocol.formats.record import (
    BLANK_MAGIC_CODE,
    MESSAGE_MAGIC_CODE,
    SIZE_MAGIC,
    RecordFormatError,
    decode_record,
)

log = logging.getLogger("rocketlite.store")


@dataclass(slots=True)
class TailReport:
    """The records of a commit log from `offset` to its end: what a cut at `offset` removes."""

    offset: int
    end: int = -1  # where the records end (-1: none past `offset`)
    messages: int = 0
    first_store_timestamp: int = 0
    last_store_timestamp: int = 0
    queues: dict[tuple[str, int], tuple[int, int]] = field(default_factory=dict)  # -> first, last
    cut_bytes: int = 0  # zeroed or deleted by the cut (whole segments: more than `record_bytes`)

    @property
    def record_bytes(self) -> int:
        return max(self.end - self.offset, 0)

    def describe(self) -> str:
        if not self.messages:
            return "no messages"
        ranges = ", ".join(
            f"{topic}/{queue_id} queue offsets {first}..{last}"
            for (topic, queue_id), (first, last) in sorted(self.queues.items())
        )
        return (
            f"{self.messages} messages ({self.record_bytes} bytes, commit-log offsets {self.offset}.."
            f"{self.end}, stored at {self.first_store_timestamp}..{self.last_store_timestamp} ms): {ranges}"
        )


def tail_records(directory: Path, offset: int) -> TailReport:
    """Read (only read) the records from `offset` to the log's end; the store must be stopped."""
    report = TailReport(offset)
    if not directory.is_dir():
        return report
    segments = sorted((int(p.name), p) for p in directory.iterdir() if p.name.isdigit())
    for start, path in segments:
        size = path.stat().st_size
        if start + size <= offset or size == 0:
            continue
        with path.open("rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
            buf = memoryview(mapped)
            try:
                if _scan(report, buf, start, max(offset - start, 0)):
                    return report
            finally:
                buf.release()
    return report


def _scan(report: TailReport, buf: memoryview, start: int, pos: int) -> bool:
    """Note the records of one segment from `pos`; True when the log ends in it."""
    size = len(buf)
    while pos + SIZE_MAGIC.size <= size:
        total, magic = SIZE_MAGIC.unpack_from(buf, pos)
        if magic == BLANK_MAGIC_CODE:
            return False  # the rest of this segment is its end-of-file blank
        if magic != MESSAGE_MAGIC_CODE:
            return True  # zeros: the end of the log
        try:
            record = decode_record(buf, pos)
        except RecordFormatError:
            return True  # a torn tail: recovery drops it anyway
        _note(report, record.topic, record.queue_id, record.queue_offset, record.store_timestamp)
        pos += total
        report.end = start + pos
    return False


def _note(report: TailReport, topic: str, queue_id: int, queue_offset: int, stored: int) -> None:
    report.messages += 1
    if report.messages == 1:
        report.first_store_timestamp = stored
    report.last_store_timestamp = stored
    first, _ = report.queues.get((topic, queue_id), (queue_offset, queue_offset))
    report.queues[topic, queue_id] = (first, queue_offset)


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
