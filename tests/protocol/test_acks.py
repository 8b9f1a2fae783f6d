"""AckMessage's answer written as bytes (`protocol.proto.acks.ack_response`, the reference, and
`speedups.ack_response`, the chosen one: compiled unless ROCKETLITE_NATIVE=0) is exactly what
`SerializeToString` writes for the `AckMessageResponse` the endpoint built before: random message
ids and receipt handles (unicode, empty, long), statuses of every code with or without a message,
one entry or many."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocketlite.protocol.proto import acks, available
from rocketlite.protocol.wire.pop import MalformedReceiptHandleError, ReceiptHandle

pytestmark = pytest.mark.skipif(available() is not None, reason=f"{available()}")

if available() is None:
    from rocketlite.protocol.proto import speedups
    from rocketlite.protocol.proto.v2 import definition_pb2 as pb
    from rocketlite.protocol.proto.v2 import service_pb2 as spb

TEXT = st.text(max_size=300) | st.sampled_from(["", "OK", "7F0000010001" * 3])


@st.composite
def statuses(draw: st.DrawFn) -> pb.Status:
    code = draw(st.sampled_from(list(pb.Code.values())))
    return pb.Status(code=code, message=draw(TEXT))


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_ack_response_is_serialize_to_string(data: st.DataObject) -> None:
    overall = data.draw(statuses())
    entries = data.draw(st.lists(st.tuples(TEXT, TEXT, statuses()), max_size=40))
    expected = spb.AckMessageResponse(
        status=overall,
        entries=[
            spb.AckMessageResultEntry(message_id=mid, receipt_handle=handle, status=status)
            for mid, handle, status in entries
        ],
    ).SerializeToString()
    args = (
        overall.SerializeToString(),
        [(mid, handle, status.SerializeToString()) for mid, handle, status in entries],
    )
    assert acks.ack_response(*args) == expected
    assert speedups.ack_response(*args) == expected


def test_an_empty_status_is_still_written() -> None:
    """A set `Status` field is written even when its message is empty (presence)."""
    empty = pb.Status()
    expected = spb.AckMessageResponse(
        status=empty, entries=[spb.AckMessageResultEntry(message_id="m", status=empty)]
    ).SerializeToString()
    for write in (acks.ack_response, speedups.ack_response):
        assert write(b"", [("m", "", b"")]) == expected == b"\x0a\x00\x12\x05\x0a\x01m\x1a\x00"


# Receipt handles: well formed (RocketMQ's 8 fields, or 7), then near misses of every kind.
_NUM = st.integers(0, 10**19 - 1).map(str) | st.sampled_from(["", "007", "1" * 20, "١٢", "-1", "+1"])
_BROKER = st.text(min_size=0, max_size=20) | st.sampled_from(["broker-a", "b\n", "é", "a b"])


@st.composite
def handles(draw: st.DrawFn) -> str:
    fields = [draw(_NUM) for _ in range(4)]
    fields += [draw(st.sampled_from(["0", "1", "2", "", "01"])), draw(_BROKER), draw(_NUM)]
    fields += draw(st.lists(_NUM, max_size=2))
    text = " ".join(fields)
    if draw(st.booleans()):
        text = draw(st.sampled_from(["", " ", "  ", "\n"])) + text + draw(st.sampled_from(["", " ", "\n"]))
    return text


@settings(max_examples=500, deadline=None)
@given(st.lists(handles() | st.text(max_size=40) | st.just("0 1 2 3 0 b 4 " + "5" * 600), max_size=20))
def test_handle_fields_compiled_is_the_reference(texts: list[str]) -> None:
    """The compiled reader of a batch of receipt handles gives the reference's fields (or None)
    for every text; what it takes is exactly what `ReceiptHandle.parse` reads with 8 fields."""
    expected = acks.handle_fields(texts)
    assert speedups.handle_fields(texts) == expected
    for text, fields in zip(texts, expected, strict=True):
        try:
            handle = ReceiptHandle.parse(text)
        except MalformedReceiptHandleError:
            assert fields is None
            continue
        if handle.queue_offset is None:
            assert fields is None
        else:
            kept = (handle.pop_time, handle.invisible_time, handle.topic_type, handle.broker_name)
            assert fields == (*kept, handle.queue_id, handle.queue_offset)


def test_handle_fields_of_a_handle_the_broker_wrote() -> None:
    text = ReceiptHandle(5, 1_700_000_000_000, 60_000, 0, "0", "broker-a", 3, 42).build()
    for read in (acks.handle_fields, speedups.handle_fields):
        assert read([text, text[: text.rindex(" ")]]) == [
            (1_700_000_000_000, 60_000, "0", "broker-a", 3, 42),
            None,  # 7 fields: no queue offset, refused by the endpoint naming that
        ]


@settings(max_examples=500, deadline=None)
@given(
    st.lists(handles() | st.text(max_size=40), max_size=20),
    st.integers(0, 2**64) | st.just(1_700_000_000_000),
    _BROKER,
)
def test_handle_columns_compiled_is_the_reference(texts: list[str], now: int, broker: str) -> None:
    """The compiled column reader takes exactly the entries the reference takes, with the same
    values; those are the handles `handle_fields` reads of this broker, topic type 0, and still
    within their invisible time."""
    now = min(now, 2**63 - 1)
    expected = acks.handle_columns(texts, now, broker)
    assert speedups.handle_columns(texts, now, broker) == expected
    fields = acks.handle_fields(texts)
    taken = [
        i
        for i, f in enumerate(fields)
        if f is not None and f[2] == "0" and f[3] == broker and f[0] + f[1] > now
    ]
    assert expected.at == taken
    assert expected.queue_ids == [fields[i][4] for i in taken]  # type: ignore[index]
    assert expected.offsets == [fields[i][5] for i in taken]  # type: ignore[index]
    assert expected.pop_times == [fields[i][0] for i in taken]  # type: ignore[index]


def test_handle_columns_of_handles_the_broker_wrote() -> None:
    live = ReceiptHandle(5, 1_700_000_000_000, 60_000, 0, "0", "broker-a", 3, 42).build()
    other = ReceiptHandle(5, 1_700_000_000_000, 60_000, 0, "0", "broker-b", 3, 43).build()
    retry = ReceiptHandle(5, 1_700_000_000_000, 60_000, 0, "1", "broker-a", 3, 44).build()
    texts = [live, other, retry, live[: live.rindex(" ")], "garbage", live]
    for read in (acks.handle_columns, speedups.handle_columns):
        assert read(texts, 1_700_000_059_999, "broker-a") == (
            [0, 5],
            [3, 3],
            [42, 42],
            [1_700_000_000_000] * 2,
        )
        assert read(texts, 1_700_000_060_000, "broker-a").at == []  # expired at popTime + invisibleTime
