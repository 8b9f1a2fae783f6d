"""The record encoder, written for clarity: the reference of the compiled `_native/_record.pyx`.

`protocol.formats.speedups` picks these when `ROCKETLITE_NATIVE=0` or the compiled twin is not
built.

* `encode_record`, `encode_records`: a message to a commit-log record (header and tail), and
  messages to records back to back, via `record.prepare_record` and `record.pack_head`, the
  definition of the bytes.

The record scan that dispatch and recovery run over these bytes is the store's
(`store/codec/scan_ref.py`).
"""

from __future__ import annotations

from collections.abc import Sequence

from rocketlite.protocol.formats.record import (
    EncodedRecord,
    EncodedRecords,
    MessageInner,
    pack_head,
    prepare_record,
)

__all__ = ["encode_record", "encode_records"]


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
