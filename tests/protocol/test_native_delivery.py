"""The gRPC delivery writer: `speedups.delivery_response` (the compiled writer of a popped record's
`ReceiveMessageResponse{message}` bytes) gives exactly the reference's bytes (`delivery`:
`message_of` serialized by upb), on random records: properties (tags, keys, UNIQ_KEY, FIFO group,
delay level and timer properties, transaction, trace context, born host, DLQ origin, user
properties in unicode), bodies of every size, compressed or not, IPv4 and IPv6 hosts, queue ids
and offsets, and receipt stamps.

upb writes a map's entries in its hash table's order unless asked for a deterministic output (then
sorted); the writer writes that sorted order, and the reference asks for it. The other fields'
order is pinned against upb's default output too: with at most one user property the two
serializations are the same bytes.

Under `ROCKETLITE_NATIVE=0` the chosen writer is the reference, so the differential tests compare
the reference to itself; the example tests pin the reference's own answers either way.
"""

from __future__ import annotations

import hashlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rocketlite.protocol.formats.record import MessageInner, encode_record
from rocketlite.protocol.message import HostAddress, MessageSysFlag
from rocketlite.protocol.proto import available

pytestmark = pytest.mark.skipif(available() is not None, reason=f"{available()}")

if available() is None:
    from rocketlite.protocol.proto import delivery, speedups
    from rocketlite.protocol.proto.v2 import definition_pb2 as pb
    from rocketlite.protocol.proto.v2 import service_pb2 as spb

KNOWN = [
    "TAGS", "KEYS", "UNIQ_KEY", "__SHARDINGKEY", "TRACE_CONTEXT", "__BORNHOST", "TIMER_DELIVER_MS",
    "TIMER_DELAY_SEC", "DELAY", "TRAN_MSG", "DLQ_ORIGIN_TOPIC", "DLQ_ORIGIN_MESSAGE_ID", "CLUSTER",
    "WAIT", "PGROUP", "MIN_OFFSET",
]  # fmt: skip
_chars = st.characters(codec="utf-8", exclude_categories=["Cs"])
text = st.text(alphabet=st.one_of(st.sampled_from(" aAzé😀\t\u00a0\u20001"), _chars), max_size=10)
key = st.one_of(
    st.sampled_from(KNOWN), st.text(alphabet=st.sampled_from("aTbé😀 \x7f"), min_size=1, max_size=4)
)
samples = ["true", "false", "3", "TagA", "k1 k2", "k1  k2 ", "1700000009000", "12", "-1", " ", "\t"]
value = st.one_of(
    st.sampled_from(samples),
    st.integers(0, 10**20).map(str),
    text,
)
segment = st.one_of(st.tuples(key, value).map(lambda kv: f"{kv[0]}\x01{kv[1]}"), key, st.just(""))
properties = st.lists(segment, max_size=14).map("\x02".join)
V4 = st.builds(HostAddress, st.binary(min_size=4, max_size=4), st.integers(0, 65535))
V6 = st.builds(HostAddress, st.binary(min_size=16, max_size=16), st.integers(0, 65535))
millis = st.one_of(st.integers(0, 2**42), st.sampled_from([0, 999, 1000, 1_700_000_000_123]))


@st.composite
def records(draw: st.DrawFn) -> bytes:
    born = draw(V6) if draw(st.integers(0, 9)) == 0 else draw(V4)  # IPv6: the reference's
    store = draw(V6) if draw(st.integers(0, 9)) == 0 else draw(V4)
    flag = MessageSysFlag.COMPRESSED_FLAG if draw(st.booleans()) else 0
    topic = draw(st.one_of(st.sampled_from(["T", "%RETRY%G", "%DLQ%G"]), text))
    inner = MessageInner(
        topic=topic,
        body=draw(st.one_of(st.binary(max_size=64), st.binary(min_size=120, max_size=3000))),
        born_host=born,
        store_host=store,
        queue_id=draw(st.one_of(st.integers(0, 16), st.integers(-(2**31), 2**31 - 1))),
        sys_flag=flag,
        born_timestamp=draw(millis),
        reconsume_times=draw(st.integers(0, 20)),
        properties_string=draw(properties),
        store_timestamp=draw(millis),
        queue_offset=draw(st.one_of(st.integers(0, 1000), st.integers(0, 2**62))),
        commit_log_offset=draw(st.integers(0, 2**50)),
    )
    return bytes(encode_record(inner))


@st.composite
def stamps(draw: st.DrawFn) -> delivery.PopStamp:
    return delivery.PopStamp(
        draw(millis),
        draw(st.integers(1, 12 * 3600 * 1000)),
        draw(st.integers(0, 8)),
        draw(st.one_of(st.just("broker-a"), text.filter(bool))),
        draw(st.dictionaries(st.integers(-2, 16), st.integers(0, 2**40), max_size=4)),
    )


def outcome(record: bytes, stamp: delivery.PopStamp, now_ms: int, fn: object) -> object:
    try:
        return fn(record, stamp, now_ms)  # type: ignore[operator]
    except Exception as exc:  # the same refusal, by type and text
        return type(exc), str(exc)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(records(), stamps(), millis)
def test_the_chosen_writer_gives_the_references_bytes(
    record: bytes, stamp: delivery.PopStamp, now: int
) -> None:
    chosen = outcome(record, stamp, now, speedups.delivery_response)
    assert chosen == outcome(record, stamp, now, delivery.delivery_response)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(records(), st.binary(max_size=40), st.binary(max_size=40), stamps(), millis)
def test_a_record_inside_a_batchs_bytes_is_written_as_the_record_alone(
    record: bytes, before: bytes, after: bytes, stamp: delivery.PopStamp, now: int
) -> None:
    """POP hands the writer a run's bytes with each record's place in them (no copy per record):
    both writers give what the record alone gives, and refuse a span outside the bytes."""
    shared = before + record + after
    alone = outcome(record, stamp, now, delivery.delivery_response)
    for writer in (speedups.delivery_response, delivery.delivery_response):
        assert outcome_at(shared, len(before), len(record), stamp, now, writer) == alone
        if not after:
            assert outcome_at(shared, len(before), -1, stamp, now, writer) == alone
        span = outcome_at(shared, len(before), len(shared) - len(before) + 1, stamp, now, writer)
        assert isinstance(span, tuple) and span[0] is ValueError, span
        assert outcome_at(shared, -1, 1, stamp, now, writer)[0] is ValueError  # type: ignore[index]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(records(), min_size=1, max_size=4), st.booleans(), stamps(), millis)
def test_a_run_is_written_in_one_call_as_its_records_one_by_one(
    run: list[bytes], rest: bool, stamp: delivery.PopStamp, now: int
) -> None:
    """A pop's run of back-to-back records (`PoppedRun`): both run writers give, record by
    record, what the reference gives for each record alone; a last size of -1 is the rest."""
    data = b"".join(run)
    sizes = [len(record) for record in run]
    if rest:
        sizes[-1] = -1
    alone = [outcome(record, stamp, now, delivery.delivery_response) for record in run]
    for writer in (speedups.delivery_responses, delivery.delivery_responses):
        try:
            written: object = writer(data, sizes, stamp, now)
        except Exception as exc:  # a record the reference refuses: the same refusal
            assert (type(exc), str(exc)) in alone
            continue
        assert written == alone


def outcome_at(data: bytes, pos: int, size: int, stamp: delivery.PopStamp, now_ms: int, fn: object) -> object:
    try:
        return fn(data, stamp, now_ms, pos, size)  # type: ignore[operator]
    except Exception as exc:
        return type(exc), str(exc)


@settings(max_examples=200, deadline=None)
@given(records(), stamps(), millis)
def test_the_bytes_are_the_message_message_of_builds(
    record: bytes, stamp: delivery.PopStamp, now: int
) -> None:
    """Parsed back, the response is `message_of`'s message with the stamp's receipt; with at most
    one user property, upb's default serialization is the same bytes (field order pinned)."""
    try:
        out = speedups.delivery_response(record, stamp, now)
    except ValueError:
        return  # a timestamp protobuf refuses: the reference's error, pinned above
    answer = spb.ReceiveMessageResponse.FromString(out.response)
    message = answer.message
    assert message.topic.name == out.topic
    assert message.system_properties.receipt_handle == out.handle
    assert message.system_properties.message_id == out.message_id
    assert message.system_properties.body_digest.checksum == hashlib.md5(message.body).hexdigest().upper()
    assert message.system_properties.invisible_duration.ToMilliseconds() == stamp.invisible_time
    if len(message.user_properties) <= 1:
        assert answer.SerializeToString() == out.response


def test_a_common_delivery_field_by_field() -> None:
    props = "UNIQ_KEY\x01U-1\x02TAGS\x01TagA\x02KEYS\x01k1 k2\x02b\x012\x02a\x011\x02aa\x01x"
    record = bytes(
        encode_record(
            MessageInner(
                topic="T5", body=b"hello", born_host=HostAddress.parse("10.0.0.5:51234"),
                store_host=HostAddress.parse("10.0.0.1:10911"), queue_id=3, sys_flag=0,
                born_timestamp=1_700_000_000_123, reconsume_times=2, properties_string=props,
                store_timestamp=1_700_000_000_456, queue_offset=9, commit_log_offset=4096,
            )
        )
    )  # fmt: skip
    out = speedups.delivery_response(record, delivery.PopStamp(1_700_000_001_000, 30_000, 0, "b", {3: 7}), 0)
    assert out.handle == "7 1700000001000 30000 0 0 b 3 9"
    assert (out.topic, out.message_id) == ("T5", "U-1")
    message = spb.ReceiveMessageResponse.FromString(out.response).message
    system = message.system_properties
    assert dict(message.user_properties) == {"a": "1", "b": "2", "aa": "x"}
    assert (system.tag, list(system.keys), system.born_host, system.store_host) == (
        "TagA", ["k1", "k2"], "10.0.0.5", "10.0.0.1:10911",
    )  # fmt: skip
    assert (system.queue_id, system.queue_offset, system.delivery_attempt) == (3, 9, 3)
    assert system.message_type == pb.MessageType.NORMAL
    assert system.born_timestamp.ToMilliseconds() == 1_700_000_000_123
    assert message.body == b"hello"
    # upb's deterministic map order: by bytes, a key before its own prefix
    at = out.response.index
    assert at(b"\n\x02aa") < at(b"\n\x01a\x12") < at(b"\n\x01b")


@settings(max_examples=300, deadline=None)
@given(
    st.integers(0, 253402300799 * 10**9 + 999_999_999) | st.sampled_from([0, 1, 10**9, 1_700_000_000 * 10**9])
)
def test_the_timestamp_answer_is_serialize_to_string(time_ns: int) -> None:
    """A receive's last answer (`delivery_timestamp`) written as bytes is what upb writes."""
    from google.protobuf.timestamp_pb2 import Timestamp  # noqa: PLC0415

    seconds, nanos = divmod(time_ns, 10**9)
    expected = spb.ReceiveMessageResponse(
        delivery_timestamp=Timestamp(seconds=seconds, nanos=nanos)
    ).SerializeToString()
    assert delivery.timestamp_answer(time_ns) == expected
