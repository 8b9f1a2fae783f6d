"""Placing an encoded batch: the reference of `speedups.stamp_records`.

`encode_records` leaves three fields of every record zero because they depend on where the batch
lands: QUEUEOFFSET, PHYSICALOFFSET and STORETIMESTAMP (`protocol/formats/record.py` has the layout). The
commit log learns them under its lock, so this is the one call it makes there for a whole batch:
it walks the records by their TOTALSIZE, patches the three fields, records the same values on
each `MessageInner` (the store's contract: a put fills them), and returns the offsetMsgIds of
the batch comma-joined, as SEND_BATCH_MESSAGE answers them. The compiled twin
(`_native/_record.pyx`) does the walk and the patching in C; this version is the model it is
pinned to (`tests/store/test_native_stamp.py`).

A buffer whose records do not add up to exactly one per message raises `ValueError` before
anything is patched: the buffer is not what `encode_records` made for these messages.
"""

from __future__ import annotations

from collections.abc import Sequence

from rocketlite.protocol.formats.record import (
    INT,
    LONG,
    PREFIX,
    QUEUE_AND_PHYSICAL_OFFSET,
    QUEUE_OFFSET_POS,
    SYSFLAG_POS,
    MessageInner,
    layout_for,
)

__all__ = ["stamp_batch", "stamp_records"]


def record_starts(buf: bytearray, count: int) -> list[int]:
    """The start of each of the `count` records of `buf`; `ValueError` unless they fill it exactly."""
    starts: list[int] = []
    pos, n = 0, len(buf)
    for _ in range(count):
        if n - pos < PREFIX.size:
            raise ValueError(f"encoded batch ends at {n} inside record {len(starts)}")
        size = INT.unpack_from(buf, pos)[0]
        if size < PREFIX.size or size > n - pos:
            raise ValueError(f"encoded record {len(starts)} at {pos} has a bad size {size}")
        starts.append(pos)
        pos += size
    if pos != n:
        raise ValueError(f"encoded batch of {n} bytes holds more than {count} records")
    return starts


def stamp_records(
    buf: bytearray,
    msgs: Sequence[MessageInner],
    queue_offset: int,
    advances: bool,
    physical_base: int,
    store_timestamp: int,
    id_prefix: str,
) -> str:
    """Patch the records of `buf` (one per message of `msgs`, as `encode_records` made them) with
    queue offsets from `queue_offset` (one more per record when `advances`, else all the same),
    their commit-log offsets (`physical_base` + position) and `store_timestamp`; fill the same
    into each message; return the msg ids (`id_prefix` + 16 hex digits of the offset), joined by
    commas."""
    starts = record_starts(buf, len(msgs))
    ids: list[str] = []
    qoff = queue_offset
    for msg, start in zip(msgs, starts, strict=True):
        phys = physical_base + start
        QUEUE_AND_PHYSICAL_OFFSET.pack_into(buf, start + QUEUE_OFFSET_POS, qoff, phys)
        sys_flag = INT.unpack_from(buf, start + SYSFLAG_POS)[0]
        LONG.pack_into(buf, start + layout_for(sys_flag).store_timestamp_pos, store_timestamp)
        msg.store_timestamp, msg.commit_log_offset, msg.queue_offset = store_timestamp, phys, qoff
        ids.append(f"{id_prefix}{phys:016X}")
        if advances:
            qoff += 1
    return ",".join(ids)


def stamp_batch(
    buf: bytearray,
    count: int,
    queue_offset: int,
    advances: bool,
    physical_base: int,
    store_timestamp: int,
    id_prefix: str,
) -> str:
    """`stamp_records` for a batch encoded without messages (`speedups.encode_batch_records`):
    the same patching of the `count` records of `buf`, the same msg ids, no message to fill."""
    starts = record_starts(buf, count)
    ids: list[str] = []
    qoff = queue_offset
    for start in starts:
        phys = physical_base + start
        QUEUE_AND_PHYSICAL_OFFSET.pack_into(buf, start + QUEUE_OFFSET_POS, qoff, phys)
        sys_flag = INT.unpack_from(buf, start + SYSFLAG_POS)[0]
        LONG.pack_into(buf, start + layout_for(sys_flag).store_timestamp_pos, store_timestamp)
        ids.append(f"{id_prefix}{phys:016X}")
        if advances:
            qoff += 1
    return ",".join(ids)
