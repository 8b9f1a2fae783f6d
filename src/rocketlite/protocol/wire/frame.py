"""Framing of remoting commands on a byte stream: the stream decoder over the chosen frame codecs.

The frame's layout, its limits and the Python codecs are in `frame_codec` (re-exported here, where
the rest of the code has always found them); `speedups` picks the implementation of
`decode_frames` and `encode_command` (compiled or reference), and this module is the
stateful part over them.

`FrameDecoder.feed` decodes complete frames straight out of the bytes it is given (the common
case: a read holds whole frames) and keeps only a torn tail in its `bytearray`; while that tail is
an incomplete frame, further input is appended without copying, and once the first frame is
complete the buffer is taken as bytes once. Every byte is copied a bounded number of times, so
the work over any split of the input is O(total bytes): no re-slicing per byte.

`FrameDecoder.join` is the first half of `feed` for a reader that serves some frames from the
bytes themselves (the connection's raw SEND_MESSAGE_V2 lane): the input as one bytes that starts at
a frame, or None while the frame at the front is still incomplete; what that reader leaves goes
to `feed` as usual.
"""

from __future__ import annotations

from rocketlite.protocol.errors import ProtocolError
from rocketlite.protocol.wire.command import RemotingCommand
from rocketlite.protocol.wire.frame_codec import (
    DEFAULT_MAX_FRAME_LENGTH,
    FRAME_PREFIX,
    HEADER_LENGTH_MASK,
    HEADER_WORD,
    LENGTH,
    MIN_LENGTH,
    SERIALIZE_TYPE_SHIFT,
    check_prefix,
)
from rocketlite.protocol.wire.header_codec import decode_header
from rocketlite.protocol.wire.speedups import decode_frames, encode_command

__all__ = [
    "DEFAULT_MAX_FRAME_LENGTH",
    "FRAME_PREFIX",
    "HEADER_LENGTH_MASK",
    "HEADER_WORD",
    "LENGTH",
    "MIN_LENGTH",
    "SERIALIZE_TYPE_SHIFT",
    "FrameDecoder",
    "decode_frame",
    "encode_command",
]


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

    def join(self, data: bytes) -> bytes | None:
        """`data` after what is buffered, as one bytes starting at a frame (the buffer emptied);
        None while the frame at the front is incomplete (`data` kept). A bad prefix raises as
        `feed` does."""
        if self._error is not None:
            raise ProtocolError(f"stream already failed: {self._error}")
        buf = self._buffer
        if not buf:
            return data
        buf += data
        try:
            if len(buf) < LENGTH.size or LENGTH.size + check_prefix(buf, 0, self.max_frame_length) > len(buf):
                return None
        except ProtocolError as exc:
            self._error = str(exc)
            raise
        src = bytes(buf)
        buf.clear()
        return src

    def feed(self, data: bytes | bytearray | memoryview) -> list[RemotingCommand]:
        """Buffer `data`; return every command it completes, in order."""
        if self._error is not None:
            raise ProtocolError(f"stream already failed: {self._error}")
        buf = self._buffer
        try:
            if buf:
                buf += data
                # Until the frame at the front is complete, keep appending (no copy of the buffer).
                if len(buf) < LENGTH.size:
                    return []
                if LENGTH.size + check_prefix(buf, 0, self.max_frame_length) > len(buf):
                    return []
                src = bytes(buf)
                buf.clear()
            else:
                src = data if type(data) is bytes else bytes(data)
            commands, pos = decode_frames(src, self.max_frame_length)
        except ProtocolError as exc:
            self._error = str(exc)
            raise
        if pos < len(src):
            buf += memoryview(src)[pos:]
        return commands
