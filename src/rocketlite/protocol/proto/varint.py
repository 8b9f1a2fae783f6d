"""Protobuf's base-128 varint, written: the one encoder of the Python references that write 5.x
answers as bytes (`acks`, `delivery`, `send_fields`), so their output is pinned against upb's
`SerializeToString` through a single definition.

Layout: the value's bits in groups of 7, least significant group first; every byte but the last
has its high bit (0x80) set. 0-127 is one byte, the byte itself.
"""

from __future__ import annotations

from typing import Final

_SMALL: Final = [bytes((i,)) for i in range(0x80)]


def encode_varint(value: int) -> bytes:
    """`value` (>= 0) as a varint; one-byte values come from a table, since most lengths and
    field values of these answers are under 128."""
    if value < 0x80:
        return _SMALL[value]
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)
