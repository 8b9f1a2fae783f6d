"""The send path's codecs: `speedups.send_properties` and `speedups.encode_batch_records` give
exactly what the references (`message.send_properties`, `batch.encode_batch_records`) give, on
random properties strings and random, torn or corrupt batch bodies, raising the same errors; and
the reference's batch decoding (`batch.send_batch_messages`) on examples.

Under `ROCKETLITE_NATIVE=0` the chosen codecs are the references, so the differential tests
compare the reference to itself; the example tests pin the reference's own answers either way.
"""

from __future__ import annotations

import struct

from hypothesis import given, settings
from hypothesis import strategies as st

from rocketlite.protocol.errors import ProtocolError
from rocketlite.protocol.formats import speedups
from rocketlite.protocol.formats.batch import (
    BatchEntry,
    BatchTarget,
    encode_batch,
    encode_batch_records,
    send_batch_messages,
)
from rocketlite.protocol.message import HostAddress, java_string_hash, send_properties
from tests.support.properties import outcome, property_strategies

V4 = HostAddress(b"\x7f\x00\x00\x01", 4000)
V6 = HostAddress(bytes(15) + b"\x01", 10911)
KNOWN = ["WAIT", "TAGS", "DELAY", "UNIQ_KEY", "KEYS", "CLUSTER", "TRAN_MSG", "PGROUP"]

text, segment = property_strategies(KNOWN, ["true", "3", "TagA", "k1 k2", "0", "-1"], lone_surrogate=True)
properties = st.one_of(st.lists(segment, max_size=12).map("\x02".join), text)
many_properties = st.lists(segment, min_size=60, max_size=150).map("\x02".join)
cluster = st.one_of(st.just("DefaultCluster"), st.just(""), text)


# -- properties ---------------------------------------------------------------------------------
@settings(max_examples=800)
@given(properties, cluster)
def test_send_properties_matches_reference(props: str, name: str) -> None:
    assert outcome(speedups.send_properties, props, name) == outcome(send_properties, props, name)


@settings(max_examples=100)
@given(many_properties, cluster)
def test_send_properties_matches_reference_with_many_properties(props: str, name: str) -> None:
    assert outcome(speedups.send_properties, props, name) == outcome(send_properties, props, name)


def test_send_properties_examples() -> None:
    for fn in (send_properties, speedups.send_properties):
        typical = "KEYS\x01k1\x02UNIQ_KEY\x01U1\x02WAIT\x01true\x02TAGS\x01TagA"
        assert fn(typical, "C") == (
            "KEYS\x01k1\x02UNIQ_KEY\x01U1\x02TAGS\x01TagA\x02CLUSTER\x01C",
            java_string_hash("TagA"),
            "U1",
            "k1",
            None,
        )
        assert fn("", "C") == ("CLUSTER\x01C", 0, None, None, None)
        assert fn("", "") == ("CLUSTER\x01", 0, None, None, None)
        # a repeated key keeps its first place and its last value; CLUSTER replaced in place
        assert fn("TAGS\x01a\x02CLUSTER\x01x\x02DELAY\x013\x02TAGS\x01b", "C")[:2] == (
            "TAGS\x01b\x02CLUSTER\x01C\x02DELAY\x013",
            java_string_hash("b"),
        )
        assert fn("TAGS\x01a\x02CLUSTER\x01x\x02DELAY\x013", "C")[4] == "3"
        # empty and keyless segments go; a value keeps its own \x01
        assert fn("\x02\x01v\x02k\x01\x02k\x02a\x01b\x01c\x02", "C")[0] == "a\x01b\x01c\x02CLUSTER\x01C"
        # Java hashCode over UTF-16 units: an astral character counts as its surrogate pair
        assert fn("TAGS\x01😀é", "C")[1] == java_string_hash("😀é")
        # a lone surrogate has no UTF-8 form: the string is still rewritten
        assert fn("TAGS\x01\ud800", "C")[:2] == ("TAGS\x01\ud800\x02CLUSTER\x01C", java_string_hash("\ud800"))


# -- batch bodies --------------------------------------------------------------------------------
entry_properties = st.one_of(properties.filter(lambda p: "\ud800" not in p), st.just(""))
entries = st.lists(
    st.builds(
        BatchEntry,
        st.integers(-(2**31), 2**31 - 1),
        st.binary(max_size=40),
        entry_properties,
    ),
    max_size=6,
)


def both(body: bytes | bytearray | memoryview, header_props: str, name: str, host: HostAddress) -> None:
    args = (body, BatchTarget(header_props, name, "TopicA", host, V4, 3, 0, 1_700_000_000_000, 2, 4 << 20))
    assert outcome(speedups.encode_batch_records, *args) == outcome(encode_batch_records, *args)


@settings(max_examples=400)
@given(entries, properties, cluster, st.sampled_from([V4, V6]))
def test_batch_matches_reference(
    batch: list[BatchEntry], header_props: str, name: str, host: HostAddress
) -> None:
    both(encode_batch(batch), header_props, name, host)


@settings(max_examples=60)
@given(entries, many_properties)
def test_batch_matches_reference_with_many_properties(batch: list[BatchEntry], header_props: str) -> None:
    big = [BatchEntry(e.flag, e.body, header_props.replace("\ud800", "?")) for e in batch]
    both(encode_batch(big), header_props, "C", V4)
    both(encode_batch(batch), header_props, "C", V4)


@settings(max_examples=400)
@given(entries.filter(bool), st.data())
def test_corrupt_batches_fail_alike(batch: list[BatchEntry], data: st.DataObject) -> None:
    body = bytearray(encode_batch(batch))
    cut = data.draw(st.integers(0, len(body)))
    flips = data.draw(st.lists(st.tuples(st.integers(0, len(body) - 1), st.integers(0, 255)), max_size=3))
    for pos, byte in flips:
        body[pos] = byte
    both(bytes(body[:cut]), "WAIT\x01true", "C", V4)
    both(bytes(body), "", "C", V4)


@settings(max_examples=300)
@given(st.binary(max_size=80))
def test_random_bytes_fail_alike(raw: bytes) -> None:
    both(raw, "", "C", V4)


def test_batch_examples() -> None:
    props_bad_utf8 = b"TAGS\x01\xff"
    head = struct.pack(">iiiii", 22 + 1 + len(props_bad_utf8), 0, 0, 0, 1)
    bad_utf8 = head + b"x" + struct.pack(">h", len(props_bad_utf8)) + props_bad_utf8
    body = encode_batch([
        BatchEntry(1, b"one", "TAGS\x01a\x02WAIT\x01true\x02CLUSTER\x01mine"),
        BatchEntry(2, b"two", ""),
    ])  # fmt: skip
    for fn in (send_batch_messages,):
        msgs, delayed = fn(body, BatchTarget("WAIT\x01x\x02KEYS\x01k", "C", "T", V4, V4, 1, 0, 5, 0, 1 << 22))
        assert not delayed
        assert [(m.flag, m.body, m.properties_string) for m in msgs] == [
            (1, b"one", "TAGS\x01a\x02CLUSTER\x01mine\x02KEYS\x01k"),
            (2, b"two", "KEYS\x01k\x02CLUSTER\x01C"),
        ]
        assert fn(b"", BatchTarget("", "C", "T", V4, V4, 1, 0, 5, 0, 1 << 22)) == ([], False)
        delayed_body = encode_batch([BatchEntry(0, b"a", "DELAY\x012"), BatchEntry(0, b"b", "")])
        assert fn(delayed_body, BatchTarget("", "C", "T", V4, V4, 1, 0, 5, 0, 1 << 22)) == ([], True)
        # a torn entry after a delayed one is still the error: the whole body is decoded first
        err = outcome(
            fn, delayed_body[:-1] + b"\x00\x00", BatchTarget("", "C", "T", V4, V4, 1, 0, 5, 0, 1 << 22)
        )
        assert err[0] is ProtocolError and "torn" in err[1]
        err = outcome(fn, bad_utf8, BatchTarget("", "C", "T", V4, V4, 1, 0, 5, 0, 1 << 22))
        assert err == (ProtocolError, "batch entry at byte 0: properties are not UTF-8", UnicodeDecodeError)
