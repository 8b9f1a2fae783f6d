"""Framing of remoting commands on a byte stream (`NettyEncoder` / `NettyDecoder` of RocketMQ 4.x).

One frame, all integers big-endian::

    +--------------+--------------------------------+--------------+------+
    | int32 length | int32 serializeType<<24 | hLen | header (hLen) | body |
    +--------------+--------------------------------+--------------+------+
    length = 4 + hLen + bodyLen   (the length field does not count itself)

The Java server decodes with `LengthFieldBasedFrameDecoder(16777216, 0, 4, 0, 4)`, so a frame's
total size, length field included, may not exceed 16 MiB. The limit is part of this codec's
contract: `FrameDecoder` rejects an oversized length as soon as its four bytes arrive, before any
of the frame is buffered, so a hostile peer cannot make us hold more than one limit's worth.

`FrameDecoder.feed` decodes complete frames straight out of the bytes it is given (the common
case: a read holds whole frames) and keeps only a torn tail in its `bytearray`; while that tail is
an incomplete frame, further input is appended without copying, and once the first frame is
complete the buffer is taken as bytes once. Every byte is copied a bounded number of times, so
the work over any split of the input is O(total bytes): no re-slicing per byte.
"""

from __future__ import annotations

import struct
from typing import Final

from rocketlite.protocol.codes import SerializeType
from rocketlite.protocol.command import RemotingCommand
from rocketlite.protocol.errors import ProtocolError
from rocketlite.protocol.header_codec import decode_header, encode_header
from rocketlite.protocol.speedups import decode_json_header, encode_json_header

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


def encode_command(cmd: RemotingCommand) -> bytes:
    """The whole frame for `cmd`, header in the command's serialize type."""
    serialize_type = cmd.serialize_type
    header = encode_json_header(cmd) if serialize_type is _JSON else encode_header(cmd)
    header_length = len(header)
    if header_length > HEADER_LENGTH_MASK:
        raise ProtocolError(f"header of {header_length} bytes does not fit the 24-bit header length")
    word = (int(serialize_type) << SERIALIZE_TYPE_SHIFT) | header_length
    body = cmd.body
    if not body:
        return FRAME_PREFIX.pack(HEADER_WORD.size + header_length, word) + header
    return b"".join((FRAME_PREFIX.pack(HEADER_WORD.size + header_length + len(body), word), header, body))


def decode_frame(frame: bytes | bytearray | memoryview) -> RemotingCommand:
    """One frame without its length field (Java's `RemotingCommand.decode`). An empty body is None."""
    view = memoryview(frame)
    if len(view) < HEADER_WORD.size:
        raise ProtocolError(f"frame of {len(view)} bytes has no header word")
    (word,) = HEADER_WORD.unpack_from(view, 0)
    header_length = word & HEADER_LENGTH_MASK
    header_end = HEADER_WORD.size + header_length
    if header_end > len(view):
        raise ProtocolError(f"header length {header_length} exceeds the frame ({len(view)} bytes)")
    cmd = decode_header(view[HEADER_WORD.size : header_end], word >> SERIALIZE_TYPE_SHIFT)
    if header_end < len(view):
        cmd.body = bytes(view[header_end:])
    return cmd


class FrameDecoder:
    """Bytes in, commands out. After a ProtocolError the stream is unusable and every feed raises."""

    __slots__ = ("_buffer", "_error", "max_frame_length")

    def __init__(self, max_frame_length: int = DEFAULT_MAX_FRAME_LENGTH) -> None:
        if max_frame_length < FRAME_PREFIX.size:
            raise ValueError(f"max_frame_length must be at least {FRAME_PREFIX.size}")
        self.max_frame_length = max_frame_length
        self._buffer = bytearray()
        self._error: str | None = None

    @property
    def buffered(self) -> int:
        """Bytes received but not yet part of a complete frame."""
        return len(self._buffer)

    def _check_prefix(self, buf: bytes | bytearray, pos: int) -> int:
        """Validate the length (and header word, when present) of the frame at `pos`; return its length."""
        (length,) = LENGTH.unpack_from(buf, pos)
        if length < MIN_LENGTH:
            raise ProtocolError(f"frame length {length} is below the minimum {MIN_LENGTH}")
        if length + LENGTH.size > self.max_frame_length:
            raise ProtocolError(f"frame length {length} exceeds the limit of {self.max_frame_length} bytes")
        if len(buf) - pos >= FRAME_PREFIX.size:
            (word,) = HEADER_WORD.unpack_from(buf, pos + LENGTH.size)
            header_length = word & HEADER_LENGTH_MASK
            if header_length > length - HEADER_WORD.size:
                raise ProtocolError(f"header length {header_length} exceeds frame length {length}")
        return int(length)

    def feed(self, data: bytes | bytearray | memoryview) -> list[RemotingCommand]:
        """Buffer `data`; return every command it completes, in order."""
        if self._error is not None:
            raise ProtocolError(f"stream already failed: {self._error}")
        try:
            return self._feed(data)
        except ProtocolError as exc:
            self._error = str(exc)
            raise

    def _feed(self, data: bytes | bytearray | memoryview) -> list[RemotingCommand]:
        buf = self._buffer
        if buf:
            buf += data
            # Until the frame at the front is complete, keep appending (no copy of the buffer).
            if len(buf) < LENGTH.size or LENGTH.size + self._check_prefix(buf, 0) > len(buf):
                return []
            src = bytes(buf)
            buf.clear()
        else:
            src = data if type(data) is bytes else bytes(data)
        commands: list[RemotingCommand] = []
        size = len(src)
        pos = 0
        limit = self.max_frame_length - LENGTH.size
        with memoryview(src) as view:  # over immutable bytes: slices never pin the buffer
            while size - pos >= FRAME_PREFIX.size:
                length, word = FRAME_PREFIX.unpack_from(src, pos)
                header_length = word & HEADER_LENGTH_MASK
                if not MIN_LENGTH <= length <= limit or header_length > length - HEADER_WORD.size:
                    self._check_prefix(src, pos)  # raises, with the message for what is wrong
                end = pos + LENGTH.size + length
                if end > size:
                    break
                start = pos + FRAME_PREFIX.size
                header_end = start + header_length
                serialize_type = word >> SERIALIZE_TYPE_SHIFT
                if serialize_type == 0:
                    cmd = decode_json_header(view[start:header_end])
                else:
                    cmd = decode_header(view[start:header_end], serialize_type)
                if header_end < end:
                    cmd.body = src[header_end:end]
                commands.append(cmd)
                pos = end
            if pos < size:
                if size - pos >= LENGTH.size:
                    self._check_prefix(src, pos)  # a bad length is refused as soon as it arrives
                buf += view[pos:]
        return commands
