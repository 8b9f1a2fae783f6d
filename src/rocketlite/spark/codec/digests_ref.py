"""Many BLAKE2b digests in one call: the hash of each slice of a buffer cut at given offsets.

The Spark sink derives every message's UNIQ_KEY from two BLAKE2b hashes (`spark/sink_rows.py`
says of what); a task hashes all its rows at once with `speedups.blake2b_digests`, whose
compiled twin (`_native/_digests.pyx`, BLAKE2b as RFC 7693 specifies it, unkeyed) runs the whole
loop without the GIL. This module is the reference: `hashlib.blake2b` over each slice.

``blake2b_digests(data, offsets, digest_size)`` returns the ``len(offsets) - 1`` digests
concatenated, digest ``i`` over ``data[offsets[i]:offsets[i + 1]]``. Offsets must rise (equal
neighbours are empty slices) from 0 or more to at most ``len(data)``, and ``digest_size`` be
1..64; anything else raises ValueError before any hashing.
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Iterable, Sequence
from typing import Final

MAX_DIGEST_SIZE: Final = 64


def check_slices(size: int, offsets: Sequence[int], digest_size: int) -> None:
    """Raise ValueError for offsets or a digest size `blake2b_digests` refuses."""
    if not 1 <= digest_size <= MAX_DIGEST_SIZE:
        raise ValueError(f"digest size {digest_size} is not in 1..{MAX_DIGEST_SIZE}")
    previous = 0
    for i, offset in enumerate(offsets):
        if offset < previous if i else offset < 0:
            raise ValueError(f"offset {i} ({offset}) is below the one before it")
        previous = offset
    if offsets and previous > size:
        raise ValueError(f"the last offset ({previous}) is past the end of the data ({size} bytes)")


def blake2b_digests(
    data: bytes | bytearray | memoryview, offsets: Iterable[int], digest_size: int = 16
) -> bytes:
    """The BLAKE2b digest of every slice (module docstring), concatenated."""
    view = memoryview(data).cast("B")
    cuts = [int(o) for o in offsets]
    check_slices(len(view), cuts, digest_size)
    blake2b = hashlib.blake2b
    return b"".join(blake2b(view[a:b], digest_size=digest_size).digest() for a, b in itertools.pairwise(cuts))
