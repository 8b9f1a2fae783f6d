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

`FrameDecoder.feed` appends to one `bytearray` and cuts complete frames from its front once per
call, so the work over any split of the input is O(total bytes): no re-slicing per byte.
"""

from __future__ import annotations

import struct
from typing import Final

from rocketlite.errors import ProtocolError
from rocketlite.protocol.command import RemotingCommand, decode_header, encode_header

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


def encode_command(cmd: RemotingCommand) -> bytes:
    """The whole frame for `cmd`, header in the command's serialize type."""
    header = encode_header(cmd)
    if len(header) > HEADER_LENGTH_MASK:
        raise ProtocolError(f"header of {len(header)} bytes does not fit the 24-bit header length")
    body = cmd.body or b""
    word = (int(cmd.serialize_type) << SERIALIZE_TYPE_SHIFT) | len(header)
    return b"".join((FRAME_PREFIX.pack(HEADER_WORD.size + len(header) + len(body), word), header, body))


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

    def _check_prefix(self, pos: int) -> int:
        """Validate the length (and header word, when present) of the frame at `pos`; return its length."""
        buf = self._buffer
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
        buf = self._buffer
        buf += data
        commands: list[RemotingCommand] = []
        pos = 0
        try:
            while len(buf) - pos >= LENGTH.size:
                length = self._check_prefix(pos)
                end = pos + LENGTH.size + length
                if end > len(buf):
                    break
                # A copy, not a view: a live export would forbid the `del` below.
                commands.append(decode_frame(buf[pos + LENGTH.size : end]))
                pos = end
        except ProtocolError as exc:
            self._error = str(exc)
            raise
        finally:
            del buf[:pos]
        return commands
