"""The SEND_BATCH_MESSAGE lane's read of a request from a read's bytes: its reference.

`broker/processors/send_batch_lane.py` (`SendBatchLane.raw`) serves the common batches of a
socket read without a command, an ext dict or a copy of the body per request. What it needs of
the wire is here:

* `read_raw_batch(src, pos, max_frame_length)`: the frame at `src[pos:]` when it is complete, a
  SEND_BATCH_MESSAGE (320) that is answered (not one-way, not a response) and whose header decodes
  (`decode_send_header_v2`), as a `BatchAsk`: (where the frame ends, opaque, serialize type, where
  its body starts in `src`, topic, queueId, sysFlag, bornTimestamp, properties ("" when absent),
  reconsumeTimes (None when absent)); None for anything else (an incomplete frame, a bad prefix,
  another code, a header that does not decode: the connection decodes it and the handler serves
  it). The body is `src[body start:end]`.

The reference decodes the frame (`decode_frames`) and its header (`decode_send_header_v2`). The
compiled twin (`_native/_batch_lane.pxi`, in `_send_lane.pyx`) reads the frame in place, JSON or
ROCKETMQ; it gives the same results, or None where the reference reads a header this reader does
not take (a number spelled `"+5"` or with more digits than Java's type, a negative number other
than -1, a JSON number as text): the handler then serves that frame, which changes nothing of
what is stored or answered (`tests/protocol/test_native_batch_lane.py`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Final

from rocketlite.protocol.codes import CommandFlag, RequestCode, SerializeType
from rocketlite.protocol.wire.frame_codec import (
    FRAME_PREFIX,
    DecodeFrames,
)
from rocketlite.protocol.wire.headers import SendMessageRequestHeader
from rocketlite.protocol.wire.pull_lane import frame_at

__all__ = ["BatchAsk", "ReadRawBatch", "read_raw_batch_over"]

# (end, opaque, serialize type, body start, topic, queue id, sys flag, born timestamp,
# properties, reconsume times)
BatchAsk = tuple[int, int, SerializeType, int, str, int, int, int, str, int | None]
ReadRawBatch = Callable[[bytes, int, int], BatchAsk | None]

_BATCH: Final = int(RequestCode.SEND_BATCH_MESSAGE)
_NOT_ANSWERED: Final = int(CommandFlag.RESPONSE) | int(CommandFlag.ONEWAY)


def read_raw_batch_over(
    decode_frames: DecodeFrames,
    decode_send_header_v2: Callable[[Mapping[str, str] | None], SendMessageRequestHeader],
) -> ReadRawBatch:
    """`read_raw_batch` over a frame decoder and a V2 send header decoder."""

    def read_raw_batch(src: bytes, pos: int, max_frame_length: int) -> BatchAsk | None:
        found = frame_at(decode_frames, src, pos, max_frame_length)
        if found is None:
            return None
        req, end, header_length = found
        if req.code != _BATCH or req.flag & _NOT_ANSWERED:
            return None
        try:
            h = decode_send_header_v2(req.ext_fields)
        except Exception:  # the handler answers the bad header
            return None
        return (
            end, req.opaque, req.serialize_type, pos + FRAME_PREFIX.size + header_length, h.topic, h.queue_id,
            h.sys_flag, h.born_timestamp, h.properties or "", h.reconsume_times,
        )  # fmt: skip

    return read_raw_batch
