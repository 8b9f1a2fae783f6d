"""Prebuilt request frames and a response reader that looks at no more than it must.

The load generator must cost less per message than the broker, as redis-benchmark does for Redis:
so no request is encoded per send and no response is decoded. Each request is encoded once with
rocketlite's own encoder (`encode_command`, the bytes a Java client sends) and kept as a
`FrameTemplate`; what changes between sends is patched in at fixed positions:

* the opaque: JSON headers carry it as a number, so opaques are taken from a range of fixed width
  (`OPAQUE_BASE` .. + 10^9: always 10 digits) and written over the placeholder's digits; the
  ROCKETMQ binary header has it as an int32 at a fixed offset;
* a pull's queueOffset: an ext value written as 20 zero-padded digits (the broker reads
  "00000000000000000042" as 42, like Java's Long.parseLong), so the header length never changes;
* the first 8 bytes of the body (the latency phase's send time).

A response is read for its code and opaque only (`response_code_opaque`), and a pull answer also
for one ext field (`ext_int`, nextBeginOffset); a record walk reads the body of each record only in
the latency phase, which needs the send time stored in it.
"""

from __future__ import annotations

import struct
from typing import Final

from rocketlite.protocol.codes import SerializeType
from rocketlite.protocol.formats.record import INT, SYSFLAG_POS, layout_for
from rocketlite.protocol.wire.command import RemotingCommand
from rocketlite.protocol.wire.frame import FRAME_PREFIX, HEADER_LENGTH_MASK, encode_command

OPAQUE_BASE: Final = 1_000_000_000  # opaques OPAQUE_BASE + n (n < 10^9) print as 10 digits
OPAQUE_SPAN: Final = 1_000_000_000
_OPAQUE_PLACEHOLDER: Final = OPAQUE_BASE + 987_654_321
OFFSET_WIDTH: Final = 20
_OFFSET_PLACEHOLDER: Final = "9" * OFFSET_WIDTH
BINARY_CODE: Final = struct.Struct(">h")  # first field of a ROCKETMQ header
BINARY_OPAQUE: Final = struct.Struct(">i")  # after code (2), language (1), version (2)
BINARY_OPAQUE_POS: Final = 5
PREFIX: Final = FRAME_PREFIX.size  # length + serialize word: the header starts here


def opaque_of(n: int) -> int:
    """The n-th opaque of a fixed-width range (n modulo 10^9)."""
    return OPAQUE_BASE + n % OPAQUE_SPAN


class FrameTemplate:
    """One encoded request whose opaque, one ext value (optional) and body head can be patched."""

    def __init__(self, cmd: RemotingCommand, *, offset_key: str | None = None) -> None:
        self.binary = cmd.serialize_type is SerializeType.ROCKETMQ
        cmd.opaque = _OPAQUE_PLACEHOLDER
        if offset_key is not None:
            cmd.ext_fields[offset_key] = _OFFSET_PLACEHOLDER
        frame = encode_command(cmd)
        header_len = FRAME_PREFIX.unpack_from(frame)[1] & HEADER_LENGTH_MASK
        self.body_pos = PREFIX + header_len
        header = frame[PREFIX : self.body_pos]
        if self.binary:
            self.opaque_pos = PREFIX + BINARY_OPAQUE_POS
        else:
            self.opaque_pos = PREFIX + _unique(header, b"%d" % _OPAQUE_PLACEHOLDER)
        self.offset_pos = -1
        if offset_key is not None:
            self.offset_pos = PREFIX + _unique(header, _OFFSET_PLACEHOLDER.encode())
        self.frame = frame

    def _opaque_bytes(self, opaque: int) -> bytes:
        return BINARY_OPAQUE.pack(opaque) if self.binary else b"%d" % opaque

    def render(self, opaque: int, *, offset: int | None = None, body_head: bytes = b"") -> bytes:
        """The frame with these values patched in (all fixed width: the length never changes)."""
        buf = bytearray(self.frame)
        op = self._opaque_bytes(opaque)
        buf[self.opaque_pos : self.opaque_pos + len(op)] = op
        if offset is not None:
            buf[self.offset_pos : self.offset_pos + OFFSET_WIDTH] = b"%020d" % offset
        if body_head:
            buf[self.body_pos : self.body_pos + len(body_head)] = body_head
        return bytes(buf)


def _unique(header: bytes, needle: bytes) -> int:
    pos = header.find(needle)
    if pos < 0 or header.find(needle, pos + 1) >= 0:
        raise RuntimeError(f"placeholder {needle!r} not found exactly once in a request header")
    return pos


# -- responses ----------------------------------------------------------------------------------
def _json_int(buf: bytes | bytearray, start: int, end: int, key: bytes) -> int:
    """The integer after `key` (e.g. b'"code":') in buf[start:end] (a JSON header)."""
    pos = buf.find(key, start, end)
    if pos < 0:
        raise RuntimeError(f"response header without {key!r}")
    pos += len(key)
    stop = pos
    while stop < end and buf[stop] not in b",}":
        stop += 1
    return int(buf[pos:stop])


_CODE_KEY: Final = b'"code":'
_OPAQUE_KEY: Final = b'"opaque":'


def response_code_opaque(buf: bytes | bytearray, start: int, end: int, binary: bool) -> tuple[int, int]:
    """Code and opaque of the response whose header is buf[start:end]."""
    if binary:
        return BINARY_CODE.unpack_from(buf, start)[0], BINARY_OPAQUE.unpack_from(buf, start + 5)[0]
    return _json_int(buf, start, end, _CODE_KEY), _json_int(buf, start, end, _OPAQUE_KEY)


def ext_int(buf: bytes | bytearray, start: int, end: int, key: str, binary: bool) -> int | None:
    """An integer ext field of a response header (None when absent)."""
    if binary:  # ... int16 key length, key, int32 value length, value ...
        needle = struct.pack(">h", len(key)) + key.encode()
        pos = buf.find(needle, start, end)
        if pos < 0:
            return None
        pos += len(needle)
        (size,) = INT.unpack_from(buf, pos)
        return int(buf[pos + 4 : pos + 4 + size])
    needle = b'"' + key.encode() + b'":"'
    pos = buf.find(needle, start, end)
    if pos < 0:
        return None
    pos += len(needle)
    return int(buf[pos : buf.index(b'"', pos, end)])


def body_heads(buf: bytes | bytearray, start: int, end: int, size: int) -> list[bytes]:
    """The first `size` bytes of the body of each stored record in buf[start:end] (a pull answer's
    body). Only TOTALSIZE, SYSFLAG and BODYLEN are read, at positions from protocol.record."""
    heads: list[bytes] = []
    pos = start
    unpack = INT.unpack_from
    while pos < end:
        (total,) = unpack(buf, pos)
        if total <= 0:
            raise RuntimeError(f"bad record size {total} in a pull answer")
        (sys_flag,) = unpack(buf, pos + SYSFLAG_POS)
        at = pos + layout_for(sys_flag).body_len_pos + 4
        heads.append(bytes(buf[at : at + size]))
        pos += total
    return heads
