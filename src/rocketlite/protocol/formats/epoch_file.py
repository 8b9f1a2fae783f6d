"""RocketMQ's epoch file (`epochFileCheckpoint` in storePathRootDir, and `.bak` beside it).

Controller mode gives every master an epoch; the file lists, for each epoch this broker's log
holds, the commit-log offset where that epoch's records begin. RocketMQ's `CheckpointFile`
layout, text, one item a line (line separator `\\n`)::

    2            <- number of entries
    773307083    <- CRC32 of the entry lines (each with its separator), as Java's int & 0x7FFFFFFF
    1-0          <- epoch-startOffset, ascending
    2-10485760

A CRC of 0 means "not checked". Reading checks the count and the CRC and raises `ProtocolError`
on a mismatch (the caller then tries the `.bak` copy, as RocketMQ does).

`consistent_end` is the truncation rule that keeps a deposed master's unreplicated tail from
surviving: a replica may keep its log only up to the end of the last epoch it shares with the
new master (same epoch number and same start offset), and no further than either log's end of
that epoch.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

from rocketlite.protocol.errors import ProtocolError

FILE_NAME = "epochFileCheckpoint"


@dataclass(frozen=True, slots=True, order=True)
class EpochEntry:
    epoch: int
    start_offset: int

    def line(self) -> str:
        return f"{self.epoch}-{self.start_offset}"


def _crc(entry_text: str) -> int:
    return zlib.crc32(entry_text.encode("utf-8")) & 0x7FFFFFFF


def encode(entries: list[EpochEntry]) -> str:
    body = "".join(e.line() + "\n" for e in entries)
    return f"{len(entries)}\n{_crc(body)}\n{body}"


def decode(text: str) -> list[EpochEntry]:
    lines = text.split("\n")
    if len(lines) < 2:
        raise ProtocolError("epoch file: missing the size and crc lines")
    try:
        size, crc = int(lines[0]), int(lines[1])
    except ValueError:
        raise ProtocolError("epoch file: size and crc must be integers") from None
    entries: list[EpochEntry] = []
    body = ""
    for line in lines[2:]:
        if not line:
            continue
        body += line + "\n"
        epoch, sep, start = line.partition("-")
        if not sep:
            raise ProtocolError(f"epoch file: bad entry {line!r} (expected epoch-startOffset)")
        try:
            entries.append(EpochEntry(int(epoch), int(start)))
        except ValueError:
            raise ProtocolError(f"epoch file: bad entry {line!r}") from None
    if len(entries) != size:
        raise ProtocolError(f"epoch file: expected {size} entries, found {len(entries)}")
    if crc != 0 and crc != _crc(body):
        raise ProtocolError(f"epoch file: crc32 mismatch (file says {crc}, entries give {_crc(body)})")
    return entries


def _with_origin(entries: list[EpochEntry]) -> list[EpochEntry]:
    """Bytes written before any epoch (a store that predates controller mode) count as epoch 0."""
    if entries and entries[0] == EpochEntry(0, 0):
        return entries
    return [EpochEntry(0, 0), *entries]


def consistent_end(local: list[EpochEntry], local_end: int, master: list[EpochEntry], master_end: int) -> int:
    """Where a replica holding `local` (log end `local_end`) must cut its log to follow a master
    holding `master` (log end `master_end`): the end of the last epoch both share."""
    mine, theirs = _with_origin(local), _with_origin(master)
    index = {e: i for i, e in enumerate(theirs)}
    for i in range(len(mine) - 1, -1, -1):
        j = index.get(mine[i])
        if j is None:
            continue
        local_stop = mine[i + 1].start_offset if i + 1 < len(mine) else local_end
        master_stop = theirs[j + 1].start_offset if j + 1 < len(theirs) else master_end
        return max(0, min(local_stop, master_stop, local_end))
    return 0


def append_epoch(entries: list[EpochEntry], epoch: int, start_offset: int) -> list[EpochEntry]:
    """`entries` with `epoch` starting at `start_offset` (a master's new epoch); entries of this
    or a later epoch, or starting beyond `start_offset`, are dropped (they were never confirmed)."""
    kept = [e for e in entries if e.epoch < epoch and e.start_offset <= start_offset]
    return [*kept, EpochEntry(epoch, start_offset)]
