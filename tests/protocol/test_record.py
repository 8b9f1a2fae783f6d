"""Record codec: literal bytes, the real broker's segment, property round trips, and the fast
record encoder and scanner pinned to their references (through their families' choosers,
`protocol.formats.speedups` and `store.codec.speedups`)."""

from __future__ import annotations

import os
import struct
import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketlite.protocol.formats import record_ref
from rocketlite.protocol.formats import speedups as formats_speedups
from rocketlite.protocol.formats.record import (
    BLANK_MAGIC_CODE,
    MESSAGE_MAGIC_CODE,
    DispatchRequest,
    MessageInner,
    RecordFormatError,
    RecordTooLargeError,
    body_crc,
    decode_record,
    decode_records,
    encode_record,
    prepare_record,
)
from rocketlite.protocol.message import (
    HostAddress,
    find_property,
    index_key_hash,
    java_string_hash,
    make_msg_id,
    parse_msg_id,
    properties_to_string,
    string_to_properties,
    tags_code,
)
from rocketlite.store.codec import speedups as store_speedups
from tests.support.store import REAL_STORE

REAL_SEGMENT = REAL_STORE / "commitlog" / "00000000000000000000"
LOCAL = HostAddress.parse("127.0.0.1:10911")


def test_java_hash_facts() -> None:
    assert java_string_hash("TagA") == 2598919
    assert java_string_hash("TagB") == 2598920
    assert java_string_hash("*") == 42
    assert java_string_hash("TopicTest#key1") == -1655984460
    assert index_key_hash("TopicTest#key1") == 1655984460
    assert java_string_hash("polygenelubricants") == -(2**31)
    assert index_key_hash("polygenelubricants") == 0
    assert tags_code(None) == 0 and tags_code("") == 0
    # Non-BMP characters count as two UTF-16 code units.
    assert java_string_hash("😀") == 0xD83D * 31 + 0xDE00


def test_crc_and_magic_facts() -> None:
    assert body_crc(b"Hello") == 2010220930
    assert MESSAGE_MAGIC_CODE & 0xFFFFFFFF == 0xDAA320A7
    assert BLANK_MAGIC_CODE & 0xFFFFFFFF == 0xCBD43194


def test_msg_id() -> None:
    assert make_msg_id(LOCAL, 0) == "7F00000100002A9F0000000000000000"
    parsed = parse_msg_id("7F00000100002A9F00000000000000AB")
    assert parsed.address == LOCAL and parsed.offset == 0xAB
    v6 = HostAddress.parse("[::1]:10911")
    mid = make_msg_id(v6, 5)
    assert len(mid) == 56 and parse_msg_id(mid).address == v6
    with pytest.raises(ValueError):
        parse_msg_id("ABCD")


def test_record_bytes_exact() -> None:
    msg = MessageInner(
        topic="T", body=b"Hi", born_host=HostAddress.parse("10.0.0.2:5555"), store_host=LOCAL,
        queue_id=3, flag=7, born_timestamp=1000, properties_string="TAGS\x01a",
        store_timestamp=2000, queue_offset=9, commit_log_offset=4096, reconsume_times=1,
    )  # fmt: skip
    raw = encode_record(msg)
    expected = (
        struct.pack(">iiiiiqqiq", 91 + 2 + 1 + 6, MESSAGE_MAGIC_CODE, body_crc(b"Hi"), 3, 7, 9, 4096, 0, 1000)
        + bytes([10, 0, 0, 2]) + struct.pack(">i", 5555)
        + struct.pack(">q", 2000) + bytes([127, 0, 0, 1]) + struct.pack(">i", 10911)
        + struct.pack(">iqi", 1, 0, 2) + b"Hi" + b"\x01T" + struct.pack(">h", 6) + b"TAGS\x01a"
    )  # fmt: skip
    assert raw == expected
    rec = decode_record(raw, verify_crc=True)
    assert rec.tags == "a" and rec.msg_id == make_msg_id(LOCAL, 4096) and rec.reconsume_times == 1


def test_ipv6_hosts_shift_fields() -> None:
    v6 = HostAddress.parse("[::1]:1")
    msg = MessageInner(topic="t", body=b"x", born_host=v6, store_host=v6, store_timestamp=77)
    raw = encode_record(msg)
    assert len(raw) == 91 + 1 + 1 + 24
    rec = decode_record(raw)
    assert rec.sys_flag & 0x30 == 0x30 and rec.store_timestamp == 77 and rec.born_host == v6


def test_limits() -> None:
    with pytest.raises(RecordTooLargeError):
        prepare_record(MessageInner(topic="x" * 128, body=b"", born_host=LOCAL, store_host=LOCAL), 1 << 20)
    with pytest.raises(RecordTooLargeError):
        prepare_record(MessageInner(topic="t", body=bytes(2000), born_host=LOCAL, store_host=LOCAL), 1024)


def test_corrupt_records_rejected() -> None:
    raw = bytearray(encode_record(MessageInner(topic="t", body=b"abc", born_host=LOCAL, store_host=LOCAL)))
    with pytest.raises(RecordFormatError):
        decode_record(raw[:-1])
    raw[88] ^= 0x01  # first body byte: lengths still consistent, only the CRC catches it
    decode_record(raw)
    with pytest.raises(RecordFormatError, match="CRC"):
        decode_record(raw, verify_crc=True)
    raw[-4] = 100  # TOPICLEN pointing past the record
    with pytest.raises(RecordFormatError):
        decode_record(raw)


def test_real_rocketmq_segment_decodes() -> None:
    data = REAL_SEGMENT.read_bytes()
    records = decode_records(data)
    assert len(records) == 47
    assert [r.queue_offset for r in records] == list(range(47))
    assert all(r.topic == "abc" and r.total_size == 172 and r.tags == "TAG1" for r in records)
    assert records[0].body == b"Once, there was a chance for me!"
    assert sum(r.total_size for r in records) == 8084
    for r in records:
        assert decode_record(data, r.physical_offset, verify_crc=True).physical_offset == r.physical_offset
        assert r.keys is not None and r.keys.isdigit()


def test_properties_codec() -> None:
    assert properties_to_string({"a": "1", "b": "2"}) == "a\x011\x02b\x012"
    assert string_to_properties("a\x011\x02b\x012\x02") == {"a": "1", "b": "2"}
    assert string_to_properties("\x02junk\x02=\x01\x02k\x01v") == {"k": "v"}
    assert find_property("XTAGS\x01no\x02TAGS\x01yes", "TAGS") == "yes"
    assert find_property("TAGS\x01yes", "KEYS") is None


_text = st.text(
    alphabet=st.characters(exclude_characters="\x01\x02", exclude_categories=["Cs"]),
    min_size=1,
    max_size=12,
)


@given(
    topic=st.text(alphabet="abcXYZ_-%|019", min_size=1, max_size=40),
    body=st.binary(max_size=300),
    props=st.dictionaries(_text, _text, max_size=5),
    queue_id=st.integers(0, 2**31 - 1),
    flag=st.integers(-(2**31), 2**31 - 1),
    offsets=st.tuples(st.integers(0, 2**62), st.integers(0, 2**62), st.integers(0, 2**62)),
    v6=st.booleans(),
)
def test_record_round_trip(
    topic: str,
    body: bytes,
    props: dict[str, str],
    queue_id: int,
    flag: int,
    offsets: tuple[int, int, int],
    v6: bool,
) -> None:
    host = HostAddress.parse("[fe80::1]:9") if v6 else LOCAL
    msg = MessageInner(
        topic=topic, body=body, born_host=host, store_host=LOCAL, queue_id=queue_id, flag=flag,
        properties_string=properties_to_string(props), queue_offset=offsets[0],
        commit_log_offset=offsets[1], store_timestamp=offsets[2], born_timestamp=offsets[2],
    )  # fmt: skip
    raw = encode_record(msg)
    rec = decode_record(raw, verify_crc=True)
    assert (rec.topic, rec.body, rec.queue_id, rec.flag) == (topic, body, queue_id, flag)
    assert (rec.queue_offset, rec.physical_offset, rec.store_timestamp) == offsets
    assert string_to_properties(rec.properties_string) == props
    assert rec.born_host == host and rec.total_size == len(raw)


# ---------------------------------------------------------- the record codecs the choosers pick from
V6 = HostAddress.parse("[::1]:10911")
SCHEDULE = "SCHEDULE_TOPIC_XXXX"
props_text = st.sampled_from(
    [
        "",
        "TAGS\x01a\x02KEYS\x01k1 k2",
        "UNIQ_KEY\x01ABC\x02TAGS\x01b",
        "DELAY\x013\x02REAL_TOPIC\x01T",
        "x\x01TAGS\x01y",
    ]
)
messages = st.builds(
    MessageInner,
    topic=st.sampled_from(["T", "TopicTest", "é", SCHEDULE]) | st.text(max_size=130),
    body=st.binary(max_size=64),
    born_host=st.sampled_from([LOCAL, V6]),
    store_host=st.sampled_from([LOCAL, V6]),
    queue_id=st.integers(0, 7),
    flag=st.integers(-(2**31), 2**31 - 1),
    sys_flag=st.sampled_from([0, 4, 8, 12, 1, 0x10, 0x20, 0x38]),  # V6 bits are the hosts' to set
    born_timestamp=st.integers(0, 2**45),
    reconsume_times=st.integers(0, 16),
    properties_string=props_text | st.text(max_size=20),
)


def _outcome(fn: object, *args: object) -> tuple[object, ...]:
    try:
        return ("ok", fn(*args))  # type: ignore[operator]
    except Exception as exc:
        return ("raised", type(exc), str(exc))


@given(st.lists(messages, min_size=1, max_size=5), st.sampled_from([200, 4096]))
def test_chosen_record_encoder_matches_the_reference(msgs: list[MessageInner], max_size: int) -> None:
    for m in msgs:
        fast_one = _outcome(formats_speedups.CHOSEN.encode_record, m, max_size)
        assert fast_one == _outcome(formats_speedups.REFERENCE.encode_record, m, max_size)
        if fast_one[0] == "ok":  # header + tail: the bytes of the one-record batch
            head, tail, _stamp_pos, sys_flag = formats_speedups.CHOSEN.encode_record(m, max_size)
            assert (head + tail, sys_flag) == record_ref.encode_records([m], max_size)


@given(st.lists(messages, min_size=1, max_size=6), st.data())
def test_chosen_record_scanner_matches_the_reference(msgs: list[MessageInner], data: st.DataObject) -> None:
    encoded = [encode_record(m) for m in msgs if len(m.topic.encode()) <= 127]
    buf = bytearray(b"".join(encoded))
    if buf and data.draw(st.booleans()):  # corrupt one byte somewhere
        pos = data.draw(st.integers(0, len(buf) - 1))
        buf[pos] ^= data.draw(st.integers(1, 255))
    buf += data.draw(st.sampled_from([b"", bytes(16), struct.pack(">ii", 24, BLANK_MAGIC_CODE) + bytes(16)]))
    view = memoryview(bytes(buf))
    limit = data.draw(st.integers(0, len(view) + 1))
    starts = [sum(len(e) for e in encoded[:i]) for i in range(len(encoded) + 1)]
    delays = (1000, 5000, 10000)
    for verify_crc in (False, True):
        fast_out: list[DispatchRequest] = []
        ref_out: list[DispatchRequest] = []
        fast = store_speedups.CHOSEN.scan_messages(
            view, 0, limit, fast_out, verify_crc=verify_crc, delay_levels_ms=delays
        )
        ref = store_speedups.REFERENCE.scan_messages(
            view, 0, limit, ref_out, verify_crc=verify_crc, delay_levels_ms=delays
        )
        assert (fast, fast_out) == (ref, ref_out)
        for pos in starts:
            assert store_speedups.CHOSEN.scan_record(
                view, pos, verify_crc=verify_crc, delay_levels_ms=delays
            ) == store_speedups.REFERENCE.scan_record(
                view, pos, verify_crc=verify_crc, delay_levels_ms=delays
            )


def test_the_chooser_honours_rocketlite_native_0() -> None:
    code = (
        "from rocketlite import native; "
        "from rocketlite.protocol.wire import speedups as w; "
        "from rocketlite.protocol.formats import speedups as f; "
        "from rocketlite.store.codec import speedups as s; "
        "from rocketlite.spark.codec import speedups as k; "
        "print(native.REFERENCE_ONLY, w.CHOSEN.name, f.CHOSEN.name, s.CHOSEN.name, k.CHOSEN.name, "
        "k.TIER.value, s.scan_messages is s.CHOSEN.scan_messages, "
        "w.encode_json_header is w.CHOSEN.encode_json_header, f.encode_record is f.CHOSEN.encode_record)"
    )
    for value, expected in (
        ("0", "True reference reference reference reference reference True True True"),
        ("1", "False native native native native compiled True True True"),
    ):
        env = {**os.environ, "ROCKETLITE_NATIVE": value}
        out = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
        )
        assert out.stdout.split() == expected.split()
