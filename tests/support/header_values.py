"""Hypothesis strategies for request-header ext values, as clients send them and as they should not.

Shared by the differential tests of the compiled header decoders (send V2, pull): each decoder
must take or refuse exactly what its reference does, so both tests draw from the same awkward
numbers (signed, padded, out of range, non-ASCII digits, empty) and non-text values.
"""

from __future__ import annotations

from hypothesis import strategies as st

numbers = st.one_of(
    st.integers(-5, 2**31).map(str),
    st.integers(-(2**64), 2**64).map(str),
    st.sampled_from(["", "-1", "+5", " 1", "1 ", "007", "٣", "1e3", "0x10", "-0", "999999999", "9" * 19]),
)
odd = st.one_of(st.none(), st.integers(0, 9), st.binary(max_size=3))
