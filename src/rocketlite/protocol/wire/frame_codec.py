"""The remoting frame's layout and its Python codecs (`NettyEncoder` / `NettyDecoder` of RocketMQ 4.x).

One frame, all integers big-endian::

    +--------------+--------------------------------+--------------+------+
    | int32 length | int32 serializeType<<24 | hLen | header (hLen) | body |
    +--------------+--------------------------------+--------------+------+
    length = 4 + hLen + bodyLen   (the length field does not count itself)

The Java server decodes with `LengthFieldBasedFrameDecoder(16777216, 0, 4, 0, 4)`, so a frame's
total size, length field included, may not exceed 16 MiB. The limit is part of this codec's
contract: a bad length is refused as soon as its four bytes arrive (`check_prefix`), before any
of the frame is buffered, so a hostile peer cannot make us hold more than one limit's worth.

The two per-frame codecs, `decode_frames` (every complete frame of a read) and `encode_command`
(a whole frame for a command), are built here over a given pair of header codecs: `speedups`
builds its reference set over `json_header_ref`, and takes the compiled twins
(`_native/_wire.pyx`) over it when they are built. This module imports no
chooser, so `speedups` can import it; `frame.py` holds the stream decoder over the chosen ones.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Final

from rocketlite.protocol.codes import SerializeType
from rocketlite.protocol.errors import ProtocolError
from rocketlite.protocol.wire.command import RemotingCommand, decode_rocketmq_header, encode_rocketmq_header

__all__ = [
    "DEFAULT_MAX_FRAME_LENGTH",
    "FRAME_PREFIX",
    "HEADER_LENGTH_MASK",
    "HEADER_WORD",
    "LENGTH",
    "MIN_LENGTH",
    "SERIALIZE_TYPE_SHIFT",
    "DecodeFrames",
    "EncodeCommand",
    "check_prefix",
    "decode_frames_over",
    "encode_command_over",
    "peek_code",
]

DEFAULT_MAX_FRAME_LENGTH: Final = 16 * 1024 * 1024  # bytes on the wire, length field included

LENGTH = struct.Struct(">i")  # frame length, excluding itself
HEADER_WORD = struct.Struct(">I")  # serializeType << 24 | header length
FRAME_PREFIX = struct.Struct(
    ">"
    "i"  # frame length
    "I"  # serializeType << 24 | header length
)
HEADER_LENGTH_MASK: Final = 0x00FF_FFFF
SERIALIZE_TYPE_SHIFT: Final = 24
MIN_LENGTH: Final = HEADER_WORD.size  # a frame carries at least the header word
assert FRAME_PREFIX.size == LENGTH.size + HEADER_WORD.size == 8

_JSON: Final = SerializeType.JSON
_ROCKETMQ: Final = SerializeType.ROCKETMQ

# decode_frames(src, max_frame_length) -> (commands, offset of the incomplete tail)
DecodeFrames = Callable[[bytes, int], tuple[list[RemotingCommand], int]]
EncodeCommand = Callable[[RemotingCommand], bytes]
DecodeJson = Callable[[bytes | bytearray | memoryview], RemotingCommand]
EncodeJson = Callable[[RemotingCommand], bytes]


_CODE_KEY: Final = b'{"code":'
_CODE_AT: Final = FRAME_PREFIX.size + len(_CODE_KEY)


def peek_code(src: bytes, pos: int) -> int | None:
    """The code of the frame at `src[pos:]`, read without decoding it, when it is where clients
    put it: first in a ROCKETMQ header, or as the first key of a JSON header (Java's fastjson,
    Go's and C++'s encoders and ours write it so: keys sorted, or the struct's first field);
    None when it is not read that way (a torn prefix, another spelling). A hint for choosing a
    handler (`remoting.connection.chain_raw`), which then reads the frame itself."""
    if len(src) - pos < FRAME_PREFIX.size + 2:
        return None
    kind = src[pos + LENGTH.size]
    if kind == 1:  # ROCKETMQ: the code is the header's first two bytes
        return int.from_bytes(src[pos + FRAME_PREFIX.size : pos + FRAME_PREFIX.size + 2], "big", signed=True)
    if kind != 0 or not src.startswith(_CODE_KEY, pos + FRAME_PREFIX.size):
        return None
    at = pos + _CODE_AT
    end = at
    while end < len(src) and end - at < 6 and 48 <= src[end] <= 57:
        end += 1
    if end == at or end >= len(src) or src[end] != 44:  # the number must end, at a ","
        return None
    return int(src[at:end])


def check_prefix(buf: bytes | bytearray, pos: int, max_frame_length: int) -> int:
    """Validate the length (and header word, when present) of the frame at `pos`; return its length.

    The ProtocolError messages here are the contract every frame decoder keeps (the compiled one
    raises the same words for the same input)."""
    (length,) = LENGTH.unpack_from(buf, pos)
    if length < MIN_LENGTH:
        raise ProtocolError(f"frame length {length} is below the minimum {MIN_LENGTH}")
    if length + LENGTH.size > max_frame_length:
        raise ProtocolError(f"frame length {length} exceeds the limit of {max_frame_length} bytes")
    if len(buf) - pos >= FRAME_PREFIX.size:
        (word,) = HEADER_WORD.unpack_from(buf, pos + LENGTH.size)
        header_length = word & HEADER_LENGTH_MASK
        if header_length > length - HEADER_WORD.size:
            raise ProtocolError(f"header length {header_length} exceeds frame length {length}")
    return int(length)


def decode_frames_over(decode_json_header: DecodeJson) -> DecodeFrames:
    """`decode_frames` with JSON headers read by `decode_json_header`."""

    def decode_frames(src: bytes, max_frame_length: int) -> tuple[list[RemotingCommand], int]:
        """Every complete frame in `src`, in order, and the offset where the incomplete rest starts.

        A bad prefix raises ProtocolError, the rest's too once its length is there; a body is the
        bytes after the header (None when there are none)."""
        commands: list[RemotingCommand] = []
        size = len(src)
        pos = 0
        limit = max_frame_length - LENGTH.size
        with memoryview(src) as view:  # over immutable bytes: slices never pin the buffer
            while size - pos >= FRAME_PREFIX.size:
                length, word = FRAME_PREFIX.unpack_from(src, pos)
                header_length = word & HEADER_LENGTH_MASK
                if not MIN_LENGTH <= length <= limit or header_length > length - HEADER_WORD.size:
                    check_prefix(src, pos, max_frame_length)  # raises, with the message for what is wrong
                end = pos + LENGTH.size + length
                if end > size:
                    break
                start = pos + FRAME_PREFIX.size
                header_end = start + header_length
                serialize_type = word >> SERIALIZE_TYPE_SHIFT
                if serialize_type == _JSON:
                    cmd = decode_json_header(view[start:header_end])
                elif serialize_type == _ROCKETMQ:
                    cmd = decode_rocketmq_header(view[start:header_end])
                else:
                    raise ProtocolError(f"unknown serialize type {serialize_type}")
                if header_end < end:
                    cmd.body = src[header_end:end]
                commands.append(cmd)
                pos = end
        if size - pos >= LENGTH.size:
            check_prefix(src, pos, max_frame_length)  # a bad length is refused as soon as it arrives
        return commands, pos

    return decode_frames


def encode_command_over(encode_json_header: EncodeJson) -> EncodeCommand:
    """`encode_command` with JSON headers written by `encode_json_header`."""

    def encode_command(cmd: RemotingCommand) -> bytes:
        """The whole frame for `cmd`, header in the command's serialize type."""
        serialize_type = cmd.serialize_type
        header = encode_rocketmq_header(cmd) if serialize_type == _ROCKETMQ else encode_json_header(cmd)
        header_length = len(header)
        if header_length > HEADER_LENGTH_MASK:
            raise ProtocolError(f"header of {header_length} bytes does not fit the 24-bit header length")
        word = (int(serialize_type) << SERIALIZE_TYPE_SHIFT) | header_length
        body = cmd.body
        if not body:
            return FRAME_PREFIX.pack(HEADER_WORD.size + header_length, word) + header
        prefix = FRAME_PREFIX.pack(HEADER_WORD.size + header_length + len(body), word)
        return b"".join((prefix, header, body))

    return encode_command
