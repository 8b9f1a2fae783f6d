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
