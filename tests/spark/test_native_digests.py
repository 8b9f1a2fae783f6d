"""`speedups.blake2b_digests`: the compiled BLAKE2b (`_native/_digests.pyx`) pinned to the
reference (`spark/codec/digests_ref.py`, hashlib per slice) byte for byte, bad offsets included."""

from __future__ import annotations

import hashlib
import itertools
from array import array

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocketlite import native
from rocketlite.spark.codec import digests_ref, speedups

compiled = (
    pytest.importorskip("rocketlite.spark.codec._native._digests") if not native.REFERENCE_ONLY else None
)
IMPLEMENTATIONS = [digests_ref.blake2b_digests] + ([compiled.blake2b_digests] if compiled is not None else [])


@st.composite
def sliced(draw: st.DrawFn) -> tuple[bytes, list[int]]:
    data = draw(st.binary(max_size=600))
    cuts = sorted(draw(st.lists(st.integers(0, len(data)), max_size=12)))
    return data, cuts


@settings(max_examples=300, deadline=None)
@given(sliced(), st.integers(1, 64))
def test_native_is_the_reference(case: tuple[bytes, list[int]], digest_size: int) -> None:
    data, cuts = case
    expected = b"".join(
        hashlib.blake2b(data[a:b], digest_size=digest_size).digest() for a, b in itertools.pairwise(cuts)
    )
    for blake2b_digests in IMPLEMENTATIONS:
        assert blake2b_digests(data, cuts, digest_size) == expected
        assert blake2b_digests(bytearray(data), array("q", cuts), digest_size) == expected


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=40), st.lists(st.integers(-3, 50), max_size=6), st.integers(-1, 70))
def test_bad_offsets_and_sizes_get_the_same_error(data: bytes, cuts: list[int], digest_size: int) -> None:
    outcomes = []
    for blake2b_digests in IMPLEMENTATIONS:
        try:
            outcomes.append(("ok", blake2b_digests(data, cuts, digest_size)))
        except ValueError as exc:
            outcomes.append(("error", str(exc)))
    assert all(o == outcomes[0] for o in outcomes)


def test_block_edges_and_the_chosen_codec() -> None:
    for size in (0, 1, 127, 128, 129, 255, 256, 257, 1024):
        data = bytes(range(256)) * 5
        data = data[:size]
        for blake2b_digests in [*IMPLEMENTATIONS, speedups.blake2b_digests]:
            assert blake2b_digests(data, [0, size]) == hashlib.blake2b(data, digest_size=16).digest()
