"""The compiled PULL_MESSAGE header fill (`speedups.decode_pull_header`) pinned to the reference.

Hypothesis builds ext fields as clients send them and as they should not: numbers canonical,
signed, padded, out of range or empty; required fields missing; values that are not text; extra
keys. The compiled fill and the class's generated decoder (and the generic schema interpreter
behind it) must give equal headers with the same field types, or raise the same error with the
same message (so the broker answers bad input with the same code and remark).

With `ROCKETLITE_NATIVE=0` the reference is compared with itself; without the compiled module
the comparison is skipped.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocketlite.protocol.wire import speedups
from rocketlite.protocol.wire.custom_header import BadHeaderFieldError, MissingHeaderFieldError
from rocketlite.protocol.wire.headers import PullMessageRequestHeader
from tests.support.header_values import ext_fields as ext_values
from tests.support.header_values import numbers, odd, outcome
from tests.support.native import compiled_or

REFERENCE: Any = speedups.REFERENCE.decode_pull_header
NATIVE: Any = compiled_or(speedups.REFERENCE, "rocketlite.protocol.wire._native._headers").decode_pull_header

texts = st.one_of(st.text(max_size=12), st.sampled_from(["", "TopicTest", "*", "TagA || TagB", "TAG"]))
STRINGS = {"consumerGroup", "topic", "subscription", "expressionType", "bname"}
NAMES = (
    "consumerGroup", "topic", "queueId", "queueOffset", "maxMsgNums", "sysFlag", "commitOffset",
    "suspendTimeoutMillis", "subscription", "subVersion", "expressionType", "bname",
)  # fmt: skip


def value_for(name: str) -> st.SearchStrategy[Any]:
    plain = texts if name in STRINGS else numbers
    return st.one_of(plain, odd) if name in ("topic", "queueOffset", "subscription") else plain


def ext_fields() -> st.SearchStrategy[dict[str, Any]]:
    return ext_values(NAMES, value_for, ("extra", "x"))


def canonical() -> dict[str, str]:
    """What the Java client sends for a long-polling push consumer's pull."""
    return {
        "consumerGroup": "cg", "topic": "T", "queueId": "3", "queueOffset": "1234567", "maxMsgNums": "32",
        "sysFlag": "7", "commitOffset": "1234000", "suspendTimeoutMillis": "15000", "subscription": "*",
        "subVersion": "1700000000000", "expressionType": "TAG",
    }  # fmt: skip


@settings(max_examples=400, deadline=None)
@given(ext=ext_fields())
def test_native_matches_reference(ext: dict[str, Any]) -> None:
    ref = outcome(REFERENCE, ext)
    assert outcome(NATIVE, ext) == ref
    if all(isinstance(v, str) for v in ext.values()):
        assert ref[:2] == outcome(PullMessageRequestHeader._decode_generic, ext)[:2]


@settings(max_examples=300, deadline=None)
@given(
    changes=st.dictionaries(st.sampled_from(NAMES), st.one_of(numbers, texts), max_size=4),
    drop=st.sets(st.sampled_from(NAMES), max_size=2),
)
def test_near_canonical_headers(changes: dict[str, str], drop: set[str]) -> None:
    ext = canonical() | {"bname": "broker-a"} | changes
    for name in drop:
        ext.pop(name, None)
    assert outcome(NATIVE, ext) == outcome(REFERENCE, ext)


def test_the_shape_clients_send() -> None:
    ext = canonical()
    header = NATIVE(ext)
    assert header == PullMessageRequestHeader.from_ext(ext)
    assert (header.queue_id, header.queue_offset, header.sub_version, header.bname) == (
        3,
        1234567,
        1700000000000,
        None,
    )
    assert NATIVE(ext | {"commitOffset": "-1", "subscription": ""}).commit_offset == -1


def test_missing_and_bad_fields_raise_the_references_errors() -> None:
    with pytest.raises(MissingHeaderFieldError, match="<queueOffset> is null"):
        NATIVE({k: v for k, v in canonical().items() if k != "queueOffset"})
    with pytest.raises(BadHeaderFieldError, match="<queueId> is not a valid int"):
        NATIVE(canonical() | {"queueId": "x"})
    with pytest.raises(BadHeaderFieldError, match="<subVersion> is not a valid long"):
        NATIVE(canonical() | {"subVersion": "9" * 20})


@pytest.mark.parametrize("ext", [None, {}, {"consumerGroup": "cg"}, [("topic", "T")]])
def test_odd_containers(ext: Any) -> None:
    assert outcome(NATIVE, ext) == outcome(REFERENCE, ext)
