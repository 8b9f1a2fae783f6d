"""Hypothesis strategies for request-header ext values, as clients send them and as they should not.

Shared by the differential tests of the compiled header decoders (send V2, pull): each decoder
must take or refuse exactly what its reference does, so both tests draw from the same awkward
numbers (signed, padded, out of range, non-ASCII digits, empty) and non-text values.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

from hypothesis import strategies as st

numbers = st.one_of(
    st.integers(-5, 2**31).map(str),
    st.integers(-(2**64), 2**64).map(str),
    st.sampled_from(["", "-1", "+5", " 1", "1 ", "007", "٣", "1e3", "0x10", "-0", "999999999", "9" * 19]),
)
odd = st.one_of(st.none(), st.integers(0, 9), st.binary(max_size=3))


def ext_fields(
    names: Sequence[str], value_for: Callable[[str], st.SearchStrategy[Any]], extra: tuple[str, str]
) -> st.SearchStrategy[dict[str, Any]]:
    """Ext fields of a header with these keys: each absent one time in ten, else drawn from
    `value_for(key)`; half the time with the unknown key and value `extra` too."""

    @st.composite
    def draw_ext(draw: st.DrawFn) -> dict[str, Any]:
        ext: dict[str, Any] = {}
        for name in names:
            if draw(st.integers(0, 9)) == 0:
                continue  # absent
            ext[name] = draw(value_for(name))
        if draw(st.booleans()):
            ext[extra[0]] = extra[1]
        return ext

    return draw_ext()


def outcome(fn: Callable[[Any], Any], ext: Any) -> tuple[Any, ...]:
    """What a header decoder made of `ext`, to compare two decoders: the header and its fields'
    types, or the error's type and message."""
    try:
        header = fn(ext)
    except Exception as exc:
        return ("raised", type(exc), str(exc))
    return ("ok", header, tuple(type(getattr(header, f.name)) for f in dataclasses.fields(header)))
