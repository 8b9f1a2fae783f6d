"""The compiled record codec (`protocol/formats/_native/_record.pyx`) pinned to the reference.

Hypothesis feeds the compiled `encode_record` and `decode_records` and their
references (`speedups.REFERENCE`: `record_ref` and `record.decode_records`) the same input
and demands the same outcome: the same bytes and values with the same types, or the same
exception type and message. The input covers the common case and the edges: empty and 4 KiB
bodies, topics up to and over 127 UTF-8 bytes, non-ASCII and separator-laden properties up to and
over 32767 bytes, IPv4, IPv6 and malformed hosts, every sys flag shape, fields out of their Java
range; and, for decoding, records torn, corrupted or followed by garbage.

With `ROCKETLITE_NATIVE=0` the references are compared with themselves (the suite then runs on
them alone); without the compiled module the comparison is skipped.
"""

from __future__ import annotations

import dataclasses
import struct
import zlib
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocketlite import native
from rocketlite.protocol.formats import record_ref, speedups
from rocketlite.protocol.formats.record import (
    BLANK_MAGIC_CODE,
    MAX_PROPERTIES_LENGTH,
    MessageInner,
    RecordTooLargeError,
    StoredRecord,
    encode_record,
)
from rocketlite.protocol.message import HostAddress, MessageSysFlag, properties_to_string
from tests.support.native import compiled_or

REFERENCE = speedups.REFERENCE
NATIVE: Any = compiled_or(speedups.REFERENCE, "rocketlite.protocol.formats._native._record")

INT_MIN, INT_MAX = -(2**31), 2**31 - 1
LONG_MIN, LONG_MAX = -(2**63), 2**63 - 1


def outcome(fn: Any, *args: Any) -> tuple[Any, ...]:
    """What a call did: ("ok", value) or ("raised", type, message)."""
    try:
        return ("ok", fn(*args))
    except Exception as exc:
        return ("raised", type(exc), str(exc))


def types_of(value: Any) -> Any:
    """The types inside a result, so that `b"" == bytearray()` or `1 == True` cannot pass."""
    if isinstance(value, (tuple, list)):
        return (type(value), [types_of(v) for v in value])
    if dataclasses.is_dataclass(value):
        return (type(value), [types_of(getattr(value, f.name)) for f in dataclasses.fields(value)])
    return type(value)


def same(native: tuple[Any, ...], reference: tuple[Any, ...]) -> None:
    assert native == reference
    if native[0] == "ok":
        assert types_of(native[1]) == types_of(reference[1])


# -------------------------------------------------------------------------------------- messages
def java_int(lo: int = INT_MIN, hi: int = INT_MAX) -> st.SearchStrategy[int]:
    """Mostly in range, sometimes just outside (the struct layout must refuse it)."""
    return st.integers(lo, hi) | st.sampled_from([lo, hi, 0, -1, hi + 1, lo - 1])


hosts = st.builds(
    HostAddress,
    ip=st.binary(min_size=4, max_size=4) | st.binary(min_size=16, max_size=16) | st.binary(max_size=20),
    port=st.integers(0, 65535) | java_int(),
)
topics = (
    st.sampled_from(["T", "TopicTest", "%RETRY%g", "é" * 63, "é" * 64, "x" * 127, "x" * 128, "\ud800"])
    | st.text(max_size=130)
    | st.text(alphabet=st.characters(codec="utf-8"), max_size=50)
)
_prop_text = st.text(max_size=12) | st.sampled_from(["\x01", "\x02", "a\x01b\x02c", "UNIQ_KEY", "ü€😀"])
properties = (
    st.dictionaries(_prop_text, _prop_text, max_size=6).map(properties_to_string)
    | st.text(max_size=40)
    | st.sampled_from(
        [
            "",
            "x" * MAX_PROPERTIES_LENGTH,
            "x" * (MAX_PROPERTIES_LENGTH + 1),
            "é" * (MAX_PROPERTIES_LENGTH // 2),
            "é" * (MAX_PROPERTIES_LENGTH // 2 + 1),
            "a\ud800b",
        ]
    )
)


def _view(data: bytes) -> memoryview:
    return memoryview(data)


bodies: st.SearchStrategy[Any] = (
    st.binary(max_size=4096)
    | st.binary(max_size=64).map(bytearray)
    | st.binary(max_size=64).map(_view)
    | st.sampled_from([b"", bytes(1024), "not bytes"])
)
sys_flags = (
    st.sampled_from(
        [
            0,
            MessageSysFlag.COMPRESSED_FLAG,
            MessageSysFlag.MULTI_TAGS_FLAG,
            MessageSysFlag.TRANSACTION_PREPARED_TYPE,
            MessageSysFlag.TRANSACTION_COMMIT_TYPE,
            MessageSysFlag.TRANSACTION_ROLLBACK_TYPE,
            MessageSysFlag.BORNHOST_V6_FLAG,
            MessageSysFlag.STOREHOSTADDRESS_V6_FLAG,
            0x3F,
            0x301,
        ]
    )
    | java_int()
)
messages = st.builds(
    MessageInner,
    topic=topics,
    body=bodies,
    born_host=hosts,
    store_host=hosts,
    queue_id=st.integers(0, 31) | java_int(),
    flag=java_int(),
    sys_flag=sys_flags,
    born_timestamp=st.integers(0, 2**45) | java_int(LONG_MIN, LONG_MAX),
    reconsume_times=st.integers(0, 16) | java_int(),
    prepared_transaction_offset=st.integers(0, 2**40) | java_int(LONG_MIN, LONG_MAX),
    properties_string=properties,
)
max_sizes = st.sampled_from([91, 200, 4096, 4 * 1024 * 1024, 1 << 30, 2**70])

V4 = HostAddress(b"\x7f\x00\x00\x01", 10911)
V6 = HostAddress(bytes(15) + b"\x01", 10911)


def plain(
    topic: str = "TopicTest", body: bytes = b"hello", props: str = "TAGS\x01A", **kw: Any
) -> MessageInner:
    return MessageInner(
        topic, body, kw.pop("born_host", V4), kw.pop("store_host", V4), properties_string=props, **kw
    )


# -------------------------------------------------------------------------------------- encoding
@settings(max_examples=500)
@given(messages, max_sizes)
def test_encode_record_matches_the_reference(msg: MessageInner, max_size: int) -> None:
    same(outcome(NATIVE.encode_record, msg, max_size), outcome(REFERENCE.encode_record, msg, max_size))


@settings(max_examples=100)
@given(st.lists(st.binary(max_size=4096), min_size=1, max_size=32), st.sampled_from([V4, V6]), properties)
def test_a_batch_of_one_topic_is_its_records_back_to_back(
    bodies: list[bytes], host: HostAddress, props: str
) -> None:
    msgs = [
        plain(body=b, props=props, born_host=host, queue_id=3, born_timestamp=i) for i, b in enumerate(bodies)
    ]
    got = outcome(record_ref.encode_records, msgs, 1 << 30)
    if got[0] == "ok":
        buf, _flag = got[1]
        singles = [NATIVE.encode_record(m, 1 << 30) for m in msgs]
        assert bytes(buf) == b"".join(bytes(head) + tail for head, tail, _, _ in singles)


def test_limits_raise_the_reference_errors() -> None:
    cases = [
        (plain(topic="x" * 128), 1 << 30, "topic length 128 exceeds 127 bytes"),
        (plain(props="x" * 32768), 1 << 30, "properties length 32768 exceeds 32767 bytes"),
        (plain(body=bytes(200)), 200, "message size 306 exceeds maxMessageSize 200"),
    ]
    for msg, max_size, text in cases:
        for fn in (NATIVE.encode_record, REFERENCE.encode_record):
            with pytest.raises(RecordTooLargeError, match=text):
                fn(msg, max_size)
        with pytest.raises(RecordTooLargeError, match=text):
            record_ref.encode_records([plain(), msg], max_size)


def test_ipv6_hosts_set_the_sys_flag_bits_and_shift_the_store_timestamp() -> None:
    for born, store, flag, stamp in (
        (V4, V4, 0, 56),
        (V6, V4, 0x10, 68),
        (V4, V6, 0x20, 56),
        (V6, V6, 0x30, 68),
    ):
        msg = plain(born_host=born, store_host=store, sys_flag=0x30 | 0x8)
        head, tail, stamp_pos, sys_flag = NATIVE.encode_record(msg, 1 << 30)
        assert (stamp_pos, sys_flag) == (stamp, flag | 0x8)
        assert (head, tail, stamp_pos, sys_flag) == REFERENCE.encode_record(msg, 1 << 30)


@settings(max_examples=200)
@given(st.binary(max_size=5000))
def test_body_crc_is_zlibs(data: bytes) -> None:
    if not native.REFERENCE_ONLY:
        assert NATIVE.crc32(data) == zlib.crc32(data) == NATIVE.crc32(bytearray(data))
    head, _, _, _ = NATIVE.encode_record(plain(body=data), 1 << 30)
    assert struct.unpack_from(">i", head, 8)[0] == zlib.crc32(data) & 0x7FFF_FFFF


# -------------------------------------------------------------------------------------- decoding
stored_messages = st.builds(
    MessageInner,
    topic=st.text(alphabet=st.characters(codec="utf-8"), max_size=30) | st.sampled_from(["TopicTest", "é"]),
    body=st.binary(max_size=2048),
    born_host=st.sampled_from([V4, V6, HostAddress(b"\x0a\x00\x00\x02", 5555)]),
    store_host=st.sampled_from([V4, V6]),
    queue_id=st.integers(0, 31),
    flag=st.integers(INT_MIN, INT_MAX),
    sys_flag=sys_flags.filter(lambda f: INT_MIN <= f <= INT_MAX),
    born_timestamp=st.integers(LONG_MIN, LONG_MAX),
    reconsume_times=st.integers(INT_MIN, INT_MAX),
    prepared_transaction_offset=st.integers(LONG_MIN, LONG_MAX),
    properties_string=st.dictionaries(_prop_text, _prop_text, max_size=6).map(properties_to_string)
    | st.text(max_size=40),
    store_timestamp=st.integers(LONG_MIN, LONG_MAX),
    queue_offset=st.integers(LONG_MIN, LONG_MAX),
    commit_log_offset=st.integers(LONG_MIN, LONG_MAX),
)


def records_of(msgs: list[MessageInner]) -> bytes:
    return b"".join(encode_record(m) for m in msgs)


def as_type(data: bytes, kind: str) -> Any:
    if kind == "bytearray":
        return bytearray(data)
    if kind == "memoryview":
        return memoryview(data)
    if kind == "memoryview slice":
        return memoryview(b"\xff" + data + b"\xff")[1:-1]
    return data


buffer_kinds = st.sampled_from(["bytes", "bytearray", "memoryview", "memoryview slice"])


@settings(max_examples=300)
@given(st.lists(stored_messages, max_size=8), buffer_kinds)
def test_decode_records_matches_the_reference(msgs: list[MessageInner], kind: str) -> None:
    data = as_type(records_of(msgs), kind)
    got = outcome(NATIVE.decode_records, data)
    same(got, outcome(REFERENCE.decode_records, data))
    assert got[0] == "ok" and len(got[1]) == len(msgs)


@settings(max_examples=500)
@given(st.lists(stored_messages, min_size=1, max_size=5), st.data(), buffer_kinds)
def test_decode_records_of_damaged_bytes_matches_the_reference(
    msgs: list[MessageInner], data: st.DataObject, kind: str
) -> None:
    buf = bytearray(records_of(msgs))
    damage = data.draw(st.sampled_from(["flip", "truncate", "append", "flip and append", "set"]))
    if "flip" in damage:
        for _ in range(data.draw(st.integers(1, 3))):
            buf[data.draw(st.integers(0, len(buf) - 1))] ^= data.draw(st.integers(1, 255))
    if damage == "truncate":
        del buf[data.draw(st.integers(0, len(buf) - 1)) :]
    if "append" in damage:
        buf += data.draw(
            st.sampled_from([bytes(16), bytes(48), struct.pack(">ii", 24, BLANK_MAGIC_CODE) + bytes(16)])
            | st.binary(max_size=120)
        )
    if damage == "set":  # a length field: TOTALSIZE, BODYLEN, or a byte where TOPICLEN may be
        pos = data.draw(
            st.sampled_from([0, 84, 96, 108, len(buf) - 1, len(buf) - 2]).filter(lambda p: p < len(buf))
        )
        fmt = data.draw(st.sampled_from([">i", ">h", ">b", ">B"]))
        size = struct.calcsize(fmt)
        lo, hi = -(2 ** (8 * size - 1)), 2 ** (8 * size - 1) - 1
        if fmt == ">B":
            lo, hi = 0, 255
        if pos + size <= len(buf):
            struct.pack_into(fmt, buf, pos, data.draw(st.integers(lo, hi)))
    payload = as_type(bytes(buf), kind)
    same(outcome(NATIVE.decode_records, payload), outcome(REFERENCE.decode_records, payload))


@settings(max_examples=300)
@given(st.binary(max_size=200))
def test_decode_records_of_random_bytes_matches_the_reference(data: bytes) -> None:
    magic = struct.pack(">ii", len(data) + 8, -626843481) + data  # past the magic check at least
    for payload in (data, magic):
        same(outcome(NATIVE.decode_records, payload), outcome(REFERENCE.decode_records, payload))


@pytest.mark.parametrize(
    "payload",
    [
        None,
        "text",
        5,
        [1, 2],
        memoryview(b"abcd").cast("I"),
        memoryview(bytes(96)).cast("b"),
        b"",
        bytearray(),
    ],
    ids=["none", "str", "int", "list", "uint-view", "signed-view", "empty-bytes", "empty-bytearray"],
)
def test_decode_records_of_odd_arguments_matches_the_reference(payload: Any) -> None:
    same(outcome(NATIVE.decode_records, payload), outcome(REFERENCE.decode_records, payload))


def test_decoded_records_share_equal_hosts_and_topics_but_not_bodies() -> None:
    msgs = [plain(body=b"a", born_host=V6), plain(body=b"a", born_host=V6), plain(body=b"b")]
    records: list[StoredRecord] = NATIVE.decode_records(records_of(msgs))
    assert records == REFERENCE.decode_records(records_of(msgs))
    assert [r.born_host for r in records] == [V6, V6, V4] and records[0].store_host == V4
    assert records[0].body is not records[1].body or records[0].body == b"a"  # equal values either way
    records[0].topic = "changed"  # each record is its own object
    assert records[1].topic == "TopicTest"


def test_the_chooser_takes_the_compiled_codecs() -> None:
    if native.REFERENCE_ONLY:
        assert speedups.decode_records is REFERENCE.decode_records
        assert speedups.encode_record is REFERENCE.encode_record
    else:
        assert speedups.decode_records is NATIVE.decode_records
        assert speedups.encode_record is NATIVE.encode_record
