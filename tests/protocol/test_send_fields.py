"""The lane's SendMessageRequest field reader: the compiled one (`speedups.send_fields`, unless
ROCKETLITE_NATIVE=0) against the reference (`send_fields.send_fields`, the protobuf classes).
For requests protobuf serializes (every field the lane reads, and some it declines), the compiled
reader gives the reference's answer. On odd encodings (fields repeated, unknown fields, random
bytes, bytes cut short) it never gives an answer the reference does not."""

from __future__ import annotations

import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocketlite.protocol.proto import available

pytestmark = pytest.mark.skipif(available() is not None, reason=f"{available()}")

if available() is None:
    from rocketlite.protocol.proto import send_fields, speedups
    from rocketlite.protocol.proto.v2 import definition_pb2 as pb
    from rocketlite.protocol.proto.v2 import service_pb2 as spb

TEXT = st.text(max_size=40)
INT32 = st.integers(-(2**31), 2**31 - 1)
INT64 = st.integers(-(2**63), 2**63 - 1)


@st.composite
def requests(draw: st.DrawFn) -> bytes:
    """A serialized SendMessageRequest: mostly the lane's shape, sometimes not."""
    count = draw(st.sampled_from([1, 1, 1, 1, 0, 2]))
    messages = []
    for _ in range(count):
        system = pb.SystemProperties(
            message_id=draw(st.sampled_from(["", "01ABCDEF"]) | TEXT),
            message_type=draw(st.sampled_from([1, 1, 1, 0, 2, 3, 4])),  # type: ignore[arg-type]
            body_encoding=draw(st.sampled_from([0, 1, 2])),  # type: ignore[arg-type]
        )
        if draw(st.booleans()):
            system.tag = draw(TEXT)
        system.keys.extend(draw(st.lists(TEXT, max_size=3)))
        body = draw(st.binary(max_size=64) | st.binary(min_size=60, max_size=300))
        if draw(st.booleans()):
            system.body_digest.type = draw(st.sampled_from([0, 1, 1, 2, 3]) | INT32)  # type: ignore[assignment]
            crc = f"{zlib.crc32(body):08X}"
            system.body_digest.checksum = draw(st.sampled_from([crc, crc, crc.lower(), crc[:7]]) | TEXT)
        if draw(st.booleans()):
            system.born_timestamp.seconds = draw(INT64)
            system.born_timestamp.nanos = draw(INT32)
        if draw(st.booleans()):
            system.born_host = draw(TEXT)
        if draw(st.booleans()):
            system.trace_context = draw(TEXT)
        odd = draw(st.sampled_from(["", "", "", "", "group", "delivery", "queue_id", "namespace", "props"]))
        if odd == "group":
            system.message_group = "g"
        elif odd == "delivery":
            system.delivery_timestamp.seconds = 5
        elif odd == "queue_id":
            system.queue_id = draw(INT32)  # (Java and Node set it; the lane does not use it)
        topic = pb.Resource(name=draw(TEXT))
        if odd == "namespace":
            topic.resource_namespace = "ns"
        message = pb.Message(topic=topic, system_properties=system, body=body)
        if odd == "props":
            message.user_properties["k"] = "v"
        messages.append(message)
    return bytes(spb.SendMessageRequest(messages=messages).SerializeToString())


@settings(max_examples=400)
@given(requests())
def test_the_compiled_reader_gives_the_references_fields(
    data: bytes,
) -> None:
    expected = send_fields.send_fields(data)
    got = speedups.send_fields(data)
    assert got == expected


@settings(max_examples=400)
@given(requests(), st.data())
def test_odd_encodings_never_get_an_answer_the_reference_does_not_give(
    data: bytes, draw: st.DataObject
) -> None:
    how = draw.draw(st.sampled_from(["cut", "twice", "unknown", "flip", "append"]))
    if how == "cut":
        data = data[: draw.draw(st.integers(0, len(data)))]
    elif how == "twice":
        data += data  # every field repeated: protobuf merges, the compiled reader declines
    elif how == "unknown":
        data += b"\xf8\x07\x01"  # field 127, varint
    elif how == "flip" and data:
        at = draw.draw(st.integers(0, len(data) - 1))
        data = data[:at] + bytes([data[at] ^ draw.draw(st.integers(1, 255))]) + data[at + 1 :]
    else:
        data += draw.draw(st.binary(max_size=16))
    got = speedups.send_fields(data)
    assert got is None or got == send_fields.send_fields(data)


@given(st.binary(max_size=200))
def test_random_bytes(data: bytes) -> None:
    got = speedups.send_fields(data)
    assert got is None or got == send_fields.send_fields(data)


def test_a_common_send_is_read() -> None:
    system = pb.SystemProperties(message_id="01AB", message_type=pb.MessageType.NORMAL, tag="t")
    system.keys.extend(["k1", "k2"])
    system.body_digest.type = pb.DigestType.CRC32
    body = b"hello" * 30  # (past 64 bytes: the CRC by carry-less multiplication where the CPU has it)
    system.body_digest.checksum = f"{zlib.crc32(body):08X}"
    system.born_timestamp.seconds = 1_700_000_000
    system.born_timestamp.nanos = 5_000_000
    request = spb.SendMessageRequest(
        messages=[pb.Message(topic=pb.Resource(name="T"), system_properties=system, body=body)]
    )
    expected = (
        "T",
        body,
        "01AB",
        "t",
        ("k1", "k2"),
        int(pb.DigestType.CRC32),
        f"{zlib.crc32(body):08X}",
        1_700_000_000,
        5_000_000,
        True,
    )
    assert speedups.send_fields(request.SerializeToString()) == expected
    assert send_fields.fields_of(request) == expected
    request.messages[0].system_properties.body_digest.checksum = "0123ABCD"  # another body's
    assert speedups.send_fields(request.SerializeToString())[-1] is False  # type: ignore[index]


@given(st.text(max_size=300), st.integers(0, 2**63 - 1))
def test_ok_answer_is_what_protobuf_serializes(message_id: str, offset: int) -> None:
    status = pb.Status(code=pb.Code.OK)
    entry = spb.SendResultEntry(
        status=status, message_id=message_id, offset=offset, transaction_id=message_id
    )
    expected = spb.SendMessageResponse(status=status, entries=[entry]).SerializeToString()
    assert send_fields.ok_answer(message_id, offset) == expected
    assert speedups.ok_answer(message_id, offset) == expected


def test_more_keys_than_the_compiled_reader_holds_are_read_by_the_reference() -> None:
    system = pb.SystemProperties(message_id="01AB", message_type=pb.MessageType.NORMAL)
    system.keys.extend([f"k{i}" for i in range(40)])  # past `_KEYS_CAP` (16)
    message = pb.Message(topic=pb.Resource(name="T"), body=b"x", system_properties=system)
    data = spb.SendMessageRequest(messages=[message]).SerializeToString()
    got = speedups.send_fields(data)
    assert got is not None and got == send_fields.send_fields(data)
    assert got[4] == tuple(f"k{i}" for i in range(40))
