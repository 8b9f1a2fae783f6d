"""The compiled SEND_MESSAGE_V2 header fill (`speedups.decode_send_header_v2`) pinned to the reference.

Hypothesis builds letter-keyed ext fields as clients send them and as they should not: numbers
canonical, signed, padded, out of range or empty; booleans in every spelling; required fields
missing; values that are not text; extra keys. The compiled fill and the class's generated
decoder (and the generic schema interpreter behind it) must give equal headers with the same
field types, or raise the same error with the same message.

With `ROCKETLITE_NATIVE=0` the reference is compared with itself; without the compiled module
the comparison is skipped.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocketlite.protocol.codes import RequestCode
from rocketlite.protocol.wire import speedups
from rocketlite.protocol.wire.headers import SendMessageRequestHeader
from tests.support.header_values import ext_fields as ext_values
from tests.support.header_values import numbers, odd, outcome
from tests.support.native import compiled_or

REFERENCE: Any = speedups.REFERENCE.decode_send_header_v2
NATIVE: Any = compiled_or(
    speedups.REFERENCE, "rocketlite.protocol.wire._native._headers"
).decode_send_header_v2

flags = st.sampled_from(["", "true", "false", "1", "0", "TRUE", " true", "yes", "False"])
texts = st.one_of(st.text(max_size=12), st.sampled_from(["", "TopicTest", "TBW102", "pg"]))
LETTERS = "abcdefghijklmn"
KIND = {"a": texts, "b": texts, "c": texts, "i": texts, "n": texts, "k": flags, "m": flags}


def value_for(letter: str) -> st.SearchStrategy[Any]:
    return st.one_of(KIND.get(letter, numbers), odd) if letter in "dl" else KIND.get(letter, numbers)


def ext_fields() -> st.SearchStrategy[dict[str, Any]]:
    return ext_values(LETTERS, value_for, ("z", "extra"))


def canonical() -> dict[str, str]:
    return {"a": "pg", "b": "T", "c": "TBW102", "d": "4", "e": "1", "f": "0", "g": "1700000000000", "h": "0"}


@settings(max_examples=400, deadline=None)
@given(ext=ext_fields())
def test_native_matches_reference(ext: dict[str, Any]) -> None:
    ref = outcome(REFERENCE, ext)
    assert outcome(NATIVE, ext) == ref
    generic = outcome(
        lambda e: SendMessageRequestHeader._decode_generic(e, SendMessageRequestHeader.V2_NAMES), ext
    )
    if all(isinstance(v, str) for v in ext.values()):
        assert ref[:2] == generic[:2]


@settings(max_examples=200, deadline=None)
@given(
    changes=st.dictionaries(st.sampled_from(LETTERS), st.one_of(numbers, flags, texts), max_size=4),
    drop=st.sets(st.sampled_from(LETTERS), max_size=2),
)
def test_near_canonical_headers(changes: dict[str, str], drop: set[str]) -> None:
    ext = canonical() | {"i": "TAGS\x01a", "j": "0", "k": "false", "m": "false"} | changes
    for letter in drop:
        ext.pop(letter, None)
    assert outcome(NATIVE, ext) == outcome(REFERENCE, ext)


def test_the_shape_clients_send() -> None:
    ext = canonical() | {"i": "TAGS\x01a", "j": "3", "k": "false", "l": "16", "m": "true", "n": "broker-a"}
    header = NATIVE(ext)
    assert header == SendMessageRequestHeader.from_ext(ext, RequestCode.SEND_MESSAGE_V2)
    assert (header.reconsume_times, header.max_reconsume_times, header.batch, header.bname) == (
        3,
        16,
        True,
        "broker-a",
    )


@pytest.mark.parametrize("ext", [None, {}, {"a": "pg"}, [("a", "pg")]])
def test_odd_containers(ext: Any) -> None:
    assert outcome(NATIVE, ext) == outcome(REFERENCE, ext)
