"""The record encoder and the batch stamp, written for clarity: references of the compiled
`_native/_record.pyx`.

`protocol.formats.speedups` picks these when `ROCKETLITE_NATIVE=0` or the compiled twin is not
built.

* `encode_record`, `encode_records`: a message to a commit-log record (header and tail), and
  messages to records back to back, via `record.prepare_record` and `record.pack_head`, the
  definition of the bytes;
* `stamp_batch`: an encoded batch placed under the commit log's lock. Encoding leaves three
  fields of every record zero because they depend on where the batch lands: QUEUEOFFSET,
  PHYSICALOFFSET and STORETIMESTAMP. The commit log learns them under its lock, so this is the
  one call it makes there for a whole batch: it walks the records by their TOTALSIZE, stamps each
  (`record.stamp_record`, as `record.place_record` stamps a single record) and returns the
  offsetMsgIds of the batch comma-joined, as SEND_BATCH_MESSAGE answers them. A buffer whose
  records do not add up to exactly the count raises `ValueError` before anything is patched.

The record scan that dispatch and recovery run over these bytes is the store's
(`store/codec/scan_ref.py`).
"""

from __future__ import annotations

from collections.abc import Sequence

from rocketlite.protocol.formats.record import (
    INT,
    PREFIX,
    SYSFLAG_POS,
    EncodedRecord,
    EncodedRecords,
    MessageInner,
    layout_for,
    pack_head,
    prepare_record,
    stamp_record,
)

__all__ = ["encode_record", "encode_records", "record_starts", "stamp_batch"]


def encode_record(msg: MessageInner, max_message_size: int) -> EncodedRecord:
    """`msg` encoded, position-dependent fields zero; `RecordTooLargeError` over a limit."""
    rec = prepare_record(msg, max_message_size)
    return (bytearray(pack_head(rec, 0, 0, 0)), rec.tail, rec.layout.store_timestamp_pos, rec.sys_flag)


def encode_records(msgs: Sequence[MessageInner], max_message_size: int) -> EncodedRecords:
    """`msgs` (at least one) encoded back to back, position-dependent fields zero.

    Raises `RecordTooLargeError` for the first message over a limit (topic, properties, size).
    """
    recs = [prepare_record(m, max_message_size) for m in msgs]
    parts: list[bytes] = []
    for rec in recs:
        parts += [pack_head(rec, 0, 0, 0), rec.tail]
    return (bytearray().join(parts), recs[0].sys_flag)


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


def stamp_batch(
    buf: bytearray,
    count: int,
    queue_offset: int,
    advances: bool,
    physical_base: int,
    store_timestamp: int,
    id_prefix: str,
) -> str:
    """Stamp the `count` records of `buf` (as `encode_records` or `batch.encode_batch_records` made
    them) with queue offsets from `queue_offset` (one more per record when `advances`, else all
    the same), their commit-log offsets (`physical_base` + position) and `store_timestamp`; return
    the msg ids (`id_prefix` + 16 hex digits of the offset), joined by commas."""
    ids: list[str] = []
    qoff = queue_offset
    for start in record_starts(buf, count):
        stamp_pos = layout_for(INT.unpack_from(buf, start + SYSFLAG_POS)[0]).store_timestamp_pos
        phys = physical_base + start
        ids.append(stamp_record(buf, start, stamp_pos, qoff, phys, store_timestamp, id_prefix))
        if advances:
            qoff += 1
    return ",".join(ids)
