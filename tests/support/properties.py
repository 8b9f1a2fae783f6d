"""Hypothesis strategies for properties strings (RocketMQ's `key\\x01value\\x02` text), as clients
write them and as they should not: known and made-up keys, separators inside keys and values,
astral characters, empty and keyless segments. Shared by the differential tests of the compiled
send and batch codecs, which must give exactly what their references give on the same text.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from hypothesis import strategies as st


def property_strategies(
    known: Sequence[str], values: Sequence[str], *, extra_chars: str = "", lone_surrogate: bool = False
) -> tuple[st.SearchStrategy[str], st.SearchStrategy[str]]:
    """(text, segment): short text with the separators, astral characters, `extra_chars` and, with
    `lone_surrogate`, now and then a lone surrogate (no UTF-8 form); and one segment of a
    properties string: a known or made-up key with a value (one of `values`, empty or text), a
    key alone (no separator), nothing, or text."""
    chars = st.characters(codec=None, exclude_categories=["Cs"])
    surrogate = [st.just("\ud800")] if lone_surrogate else []
    text = st.text(
        alphabet=st.one_of(st.sampled_from("\x01\x02 aAé=😀" + extra_chars), chars, *surrogate), max_size=12
    )
    key = st.one_of(st.sampled_from(list(known)), st.text(alphabet=st.sampled_from("aTé😀\x01 "), max_size=4))
    value = st.one_of(st.just(""), st.sampled_from(list(values)), text)
    segment = st.one_of(st.tuples(key, value).map(lambda kv: f"{kv[0]}\x01{kv[1]}"), key, st.just(""), text)
    return text, segment


def outcome(fn: Callable[..., Any], *args: Any) -> Any:
    """The result, or the error as (type, message, type of its cause)."""
    try:
        return fn(*args)
    except Exception as exc:  # the error is the result under comparison
        return (type(exc), str(exc), type(exc.__cause__))
