"""The PULL_MESSAGE lane's per-request calls on a read's bytes, the read and the answer: their reference.

`broker/processors/pull_lane.py` (`PullLane`) serves the common pulls of a socket read without a
command, an ext dict or a response command per request. What it needs of the wire is here:

* `read_raw_pull(src, pos, max_frame_length)`: the frame at `src[pos:]` when it is complete, a
  PULL_MESSAGE (11) that is answered (not one-way, not a response) and its header decodes
  (`decode_pull_header`), as a `PullAsk`: (where the frame ends, opaque, serialize type,
  consumerGroup, topic, queueId, queueOffset, maxMsgNums, sysFlag, commitOffset, subscription,
  subVersion, expressionType); None for anything else (an incomplete frame, a bad prefix, another
  code, a header that does not decode: the connection decodes it and the handler serves it).
* `encode_pull_found(opaque, serialize type, suggestWhichBrokerId, nextBeginOffset, minOffset,
  maxOffset, body length)`: the FOUND answer's frame up to its body (prefix and header, the
  prefix counting the body that follows): what `Connection.send_parts` writes before the store's
  slices for `make_response(request, SUCCESS, "FOUND", ext)` with PullMessageResponseHeader's
  four fields in the order the pull processor sets them.

The reference decodes the frame (`decode_frames`) and its header (`decode_pull_header`), and
encodes the answer through the command (`encode_command`). The compiled twins
(`_native/_pull_lane.pxi`, in `_send_lane.pyx`) read the frame in place, JSON or ROCKETMQ, and
write the answer from its values; they give the same results, or None where the reference reads
a header this reader does not take (a number spelled `"+5"` or with more digits than Java's type,
a negative number other than -1, a JSON number as text): the handler then serves that frame, which
changes nothing of what is stored or answered (`tests/protocol/test_native_pull_lane.py`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Final

from rocketlite.protocol.codes import CommandFlag, RequestCode, ResponseCode, SerializeType
from rocketlite.protocol.errors import ProtocolError
from rocketlite.protocol.wire.command import DEFAULT_LANGUAGE, DEFAULT_VERSION, RemotingCommand
from rocketlite.protocol.wire.frame_codec import (
    FRAME_PREFIX,
    HEADER_LENGTH_MASK,
    HEADER_WORD,
    LENGTH,
    DecodeFrames,
    EncodeCommand,
)
from rocketlite.protocol.wire.headers import PullMessageRequestHeader

__all__ = [
    "EncodePullFound",
    "PullAsk",
    "ReadRawPull",
    "encode_pull_found_over",
    "frame_at",
    "read_raw_pull_over",
]

# (end, opaque, serialize type, group, topic, queue id, queue offset, max nums, sys flag,
# commit offset, subscription, sub version, expression type)
PullAsk = tuple[int, int, SerializeType, str, str, int, int, int, int, int, str | None, int, str | None]
ReadRawPull = Callable[[bytes, int, int], PullAsk | None]
# (opaque, serialize type, suggestWhichBrokerId, nextBeginOffset, minOffset, maxOffset, body length)
EncodePullFound = Callable[[int, SerializeType, int, int, int, int, int], bytes]

_PULL: Final = int(RequestCode.PULL_MESSAGE)
_NOT_ANSWERED: Final = int(CommandFlag.RESPONSE) | int(CommandFlag.ONEWAY)
_SUCCESS: Final = int(ResponseCode.SUCCESS)
_RESPONSE_FLAG: Final = int(CommandFlag.RESPONSE)


def frame_at(
    decode_frames: DecodeFrames, src: bytes, pos: int, max_frame_length: int
) -> tuple[RemotingCommand, int, int] | None:
    """The frame at `src[pos:]` decoded, where it ends and its header's length, when it is
    complete and the connection's decoder takes it; else None (the raw lanes' references)."""
    if len(src) - pos < FRAME_PREFIX.size:
        return None
    length, word = FRAME_PREFIX.unpack_from(src, pos)
    if not HEADER_WORD.size <= length <= max_frame_length - LENGTH.size:
        return None
    end = pos + LENGTH.size + length
    header_length = word & HEADER_LENGTH_MASK
    if header_length > length - HEADER_WORD.size or end > len(src):
        return None
    try:
        decoded, _ = decode_frames(src[pos:end], max_frame_length)
    except ProtocolError:  # the connection's decoder refuses it
        return None
    return decoded[0], end, header_length


def read_raw_pull_over(
    decode_frames: DecodeFrames,
    decode_pull_header: Callable[[Mapping[str, str] | None], PullMessageRequestHeader],
) -> ReadRawPull:
    """`read_raw_pull` over a frame decoder and a pull header decoder."""

    def read_raw_pull(src: bytes, pos: int, max_frame_length: int) -> PullAsk | None:
        found = frame_at(decode_frames, src, pos, max_frame_length)
        if found is None:
            return None
        req, end, _header_length = found
        if req.code != _PULL or req.flag & _NOT_ANSWERED:
            return None
        try:
            h = decode_pull_header(req.ext_fields)
        except Exception:  # the handler answers the bad header
            return None
        return (
            end, req.opaque, req.serialize_type, h.consumer_group, h.topic, h.queue_id, h.queue_offset,
            h.max_msg_nums, h.sys_flag, h.commit_offset, h.subscription, h.sub_version, h.expression_type,
        )  # fmt: skip

    return read_raw_pull


def encode_pull_found_over(encode_command: EncodeCommand) -> EncodePullFound:
    """`encode_pull_found` over a frame encoder: the answer command, encoded without a body, its
    length prefix then counting `body_length` more bytes."""

    def encode_pull_found(
        opaque: int,
        serialize_type: SerializeType,
        suggest: int,
        next_begin: int,
        min_offset: int,
        max_offset: int,
        body_length: int,
    ) -> bytes:
        ext = {
            "suggestWhichBrokerId": str(suggest),
            "nextBeginOffset": str(next_begin),
            "minOffset": str(min_offset),
            "maxOffset": str(max_offset),
        }
        cmd = RemotingCommand(  # what `make_response(request, SUCCESS, "FOUND", ext)` builds
            _SUCCESS, DEFAULT_LANGUAGE, DEFAULT_VERSION, opaque, _RESPONSE_FLAG, "FOUND", ext, None,
            serialize_type,
        )  # fmt: skip
        head = encode_command(cmd)
        return LENGTH.pack(len(head) - LENGTH.size + body_length) + head[LENGTH.size :]

    return encode_pull_found
