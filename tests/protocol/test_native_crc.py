"""The compiled CRC-32 of record bodies (`_native/_record.crc32`: carry-less multiplication on
CPUs that have it, the slicing-by-16 table otherwise) is zlib's, at every length around the
64-byte fold and 16-byte block boundaries, at large sizes, and at every alignment of the data.

Skipped without the compiled module (and with `ROCKETLITE_NATIVE=0`, where there is no twin).
"""

from __future__ import annotations

import os
import random
import zlib
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocketlite import native

NATIVE: Any = None
if not native.REFERENCE_ONLY:
    NATIVE = pytest.importorskip(
        "rocketlite.protocol.formats._native._record", reason="the compiled data plane is not built"
    )
pytestmark = pytest.mark.skipif(NATIVE is None, reason="ROCKETLITE_NATIVE=0: no compiled CRC to check")


@pytest.mark.parametrize("n", [*range(300), 1023, 1024, 1025, 4096 + 7, 65536, 1 << 20])
def test_crc32_is_zlibs_at_every_length(n: int) -> None:
    data = random.Random(n).randbytes(n)
    assert NATIVE.crc32(data) == zlib.crc32(data)
    assert NATIVE.crc32(bytearray(data)) == zlib.crc32(data)


def test_crc32_at_every_alignment() -> None:
    base = bytearray(os.urandom(2048 + 64))
    for start in range(64):
        chunk = base[start : start + 1500]  # a copy, so each one starts at another alignment in memory
        assert NATIVE.crc32(chunk) == zlib.crc32(chunk)


@settings(max_examples=300, deadline=None)
@given(st.binary(min_size=0, max_size=5000))
def test_crc32_random(data: bytes) -> None:
    assert NATIVE.crc32(data) == zlib.crc32(data)
