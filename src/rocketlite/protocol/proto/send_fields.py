"""The fields of a `SendMessageRequest` that 5.x SendMessage's group lane needs
(`broker/grpc/send_lane.py`), sans-IO, as one tuple (`SendFields`): the topic, the body, the message
id, the tag (None: not set), the keys, the body digest's type and checksum, the born
timestamp's seconds and nanos, and whether the digest is a CRC32 that matches the body as
`f"{zlib.crc32(body):08X}"` writes it (the common case, checked without a string made).

`fields_of` reads them from a parsed request; `send_fields`, the reference of the chooser's
`speedups.send_fields`, from the request's bytes, through the protobuf classes. Both decline
(None) a request outside the lane's shape: not exactly one message, a type other than NORMAL, no
message id, user properties, a message group, a delivery time, a resource namespace, or bytes
that do not parse. The compiled twin (`_native/_send_fields.pyx`) reads the wire format itself
and declines, beside those, whatever it does not expect (unknown fields, a field given twice,
other wire types, a system property the lane has no use for that changes a send's meaning);
the lane sends a declined call the ordinary way. `tests/protocol/test_send_fields.py` pins it
against this reference with hypothesis.

The wire format read (protobuf: each field a varint key `number << 3 | wire type`, then a varint
for type 0, or a varint length and that many bytes for type 2):

    SendMessageRequest  1 messages (repeated Message)
    Message             1 topic (Resource: 1 resource_namespace, 2 name), 2 user_properties
                        (map), 3 system_properties, 4 body
    SystemProperties    1 tag (optional), 2 keys (repeated), 3 message_id, 4 body_digest
                        (Digest: 1 type, 2 checksum), 5 body_encoding, 6 message_type,
                        7 born_timestamp (Timestamp: 1 seconds, 2 nanos), 8 born_host, ...

`ok_answer` writes the lane's answer, a `SendMessageResponse` of one stored message:
SendMessageResponse{1: Status{1: OK}, 2: SendResultEntry{1: Status{1: OK}, 2: message_id, 3:
transaction_id = message_id, 4: offset}}, each field a tag byte, the length-delimited ones a
varint length first, empty and zero ones left out (proto3); the bytes `SerializeToString` gives
(`tests/protocol/test_send_fields.py`; compiled in `_native/_send_fields.pyx`).
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from typing import Any, Final

from google.protobuf.message import DecodeError

from rocketlite.protocol.proto.v2 import definition_pb2 as pb
from rocketlite.protocol.proto.v2 import service_pb2 as spb
from rocketlite.protocol.proto.varint import encode_varint

__all__ = ["SendFields", "SendRun", "fields_of", "ok_answer", "ok_answers", "send_fields", "send_run"]

# topic, body, message id, tag (None: none), keys, digest type, checksum, born seconds, born nanos,
# a matching CRC32 digest
SendFields = tuple[str, bytes, str, str | None, tuple[str, ...], int, str, int, int, bool]

# (calls, start, conn, facts, topic_facts, cluster, head, max_size, max_body, max_props, rng, entries,
# sizes, keys, ids) -> the index of the first call not taken (`send_run`)
SendRun = Callable[..., int]

_NORMAL: Final = int(pb.MessageType.NORMAL)
_CRC32: Final = int(pb.DigestType.CRC32)


def fields_of(request: Any) -> SendFields | None:
    """The lane's fields of a parsed `SendMessageRequest` (None: outside the lane's shape)."""
    messages = request.messages
    if len(messages) != 1:
        return None
    message = messages[0]
    system = message.system_properties
    resource = message.topic
    if (
        system.message_type != _NORMAL or not system.message_id or message.user_properties
        or system.HasField("message_group") or system.HasField("delivery_timestamp")
        or resource.resource_namespace
    ):  # fmt: skip
        return None
    digest = system.body_digest
    stamp = system.born_timestamp
    body = message.body
    crc_ok = digest.type == _CRC32 and digest.checksum == f"{zlib.crc32(body):08X}"
    return (
        resource.name, body, system.message_id, system.tag if system.HasField("tag") else None,
        tuple(system.keys), digest.type, digest.checksum, stamp.seconds, stamp.nanos, crc_ok,
    )  # fmt: skip


def send_fields(data: bytes) -> SendFields | None:
    """The lane's fields of a serialized `SendMessageRequest` (None: declined)."""
    try:
        request = spb.SendMessageRequest.FromString(data)
    except DecodeError:
        return None
    return fields_of(request)


def _field(tag: int, data: bytes) -> bytes:
    return bytes((tag,)) + encode_varint(len(data)) + data


_OK_STATUS: Final = _field(0x0A, b"\x08" + encode_varint(int(pb.Code.OK)))


def ok_answer(message_id: str, offset: int) -> bytes:
    """The serialized SendMessageResponse of one message stored at queue `offset` (>= 0)."""
    mid = message_id.encode()
    n = len(mid)
    entry = _OK_STATUS
    if n:  # (proto3 leaves empty and zero fields out)
        size = encode_varint(n)
        entry = b"%s\x12%s%s\x1a%s%s" % (entry, size, mid, size, mid)
    if offset:
        entry += b"\x20" + encode_varint(offset)
    return b"%s\x12%s%s" % (_OK_STATUS, encode_varint(len(entry)), entry)


def ok_answers(ids: list[str], offsets: list[int]) -> list[bytes]:
    """`ok_answer` of each stored call of a run (as many as `offsets`)."""
    return [ok_answer(ids[k], offset) for k, offset in enumerate(offsets)]


def send_run(calls: list[tuple[Any, Any]], start: int, *args: Any) -> int:
    """The reference of the lane's compiled loop over a run of calls (`_native/_send_run.pxi`,
    which says what it takes and appends): it takes none, and the lane's per-call Python step,
    which the compiled loop is pinned against, serves them all."""
    return start
