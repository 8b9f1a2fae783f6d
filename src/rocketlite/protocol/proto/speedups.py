"""The gRPC deliveries' chooser: the compiled `ReceiveMessageResponse` and `AckMessageResponse`
writers or their references.

* `delivery_response` (one popped commit-log record to the bytes of the stream's
  `ReceiveMessageResponse{message}`, with its receipt handle, topic and message id):
  `delivery.delivery_response` (the protobuf classes, upb's deterministic serialization);
  compiled in `_native/_delivery.pyx`, which writes the protobuf wire format itself and hands a
  record outside its common shape to the reference (`tests/protocol/test_native_delivery.py`
  pins the two byte for byte). `delivery_responses` writes a run of back-to-back records (a
  pop's `PoppedRun`) in one call.
* `ack_response` (an AckMessage's answer as bytes from its serialized statuses): `acks.ack_response`;
  compiled in `_native/_delivery.pyx` (`tests/protocol/test_acks.py` pins both against
  `SerializeToString`).
* `send_fields` (the fields of a serialized `SendMessageRequest` 5.x SendMessage's group lane
  needs): `send_fields.send_fields`, through the protobuf classes; compiled in
  `_native/_send_fields.pyx`, which reads the wire format itself and declines what it does not
  expect (`tests/protocol/test_send_fields.py`).
* `ok_answer` (the lane's SendMessageResponse of one stored message): `send_fields.ok_answer`;
  compiled in `_native/_send_fields.pyx` (both pinned against `SerializeToString`);
  `ok_answers`, those of a run of calls in one call.
* `send_run` (the lane's loop over a run of calls: fields read and checked, properties written,
  queues drawn, `encode_group` entries made): `send_fields.send_run` takes none (the lane's
  per-call Python step is the reference and serves them all); compiled in
  `_native/_send_run.pxi` (`tests/broker/grpc/test_send_run.py` pins it against that step).
* `handle_fields` (an AckMessage's receipt handles read in one call, no object per handle):
  `acks.handle_fields` (one regex match each); compiled in `_native/_delivery.pyx`
  (`tests/protocol/test_acks.py` pins the two).
* `handle_columns` (the handles of an AckMessage this broker can take, as columns: places, queue
  ids, offsets, popTimes): `acks.handle_columns`; compiled in `_native/_delivery.pyx` (pinned
  the same way).

`rocketlite.native` holds the one setting (`ROCKETLITE_NATIVE`) every family's chooser reads;
the gRPC endpoint imports this name from here and nowhere else.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Final, Protocol

from rocketlite import native
from rocketlite.protocol.proto import acks, delivery
from rocketlite.protocol.proto import send_fields as _send_fields
from rocketlite.protocol.proto.acks import HandleColumns, HandleFields
from rocketlite.protocol.proto.delivery import Delivered, PopStamp
from rocketlite.protocol.proto.send_fields import SendFields, SendRun

__all__ = [
    "CHOSEN",
    "NATIVE_MODULES",
    "REFERENCE",
    "Codecs",
    "ack_response",
    "delivery_response",
    "delivery_responses",
    "handle_columns",
    "handle_fields",
    "ok_answer",
    "ok_answers",
    "send_fields",
    "send_run",
]


class DeliveryWriter(Protocol):
    """`delivery.delivery_response`'s shape: `record[pos:pos + size]` (all of it by default)."""

    def __call__(
        self, record: bytes, stamp: PopStamp, now_ms: int, pos: int = ..., size: int = ...
    ) -> Delivered: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class Codecs:
    """One implementation of every codec of the gRPC delivery family (built by keyword)."""

    name: str
    delivery_response: DeliveryWriter
    delivery_responses: Callable[[bytes, list[int], PopStamp, int], list[Delivered]]
    ack_response: Callable[[bytes, Iterable[tuple[str, str, bytes]]], bytes]
    send_fields: Callable[[bytes], SendFields | None]
    ok_answer: Callable[[str, int], bytes]
    ok_answers: Callable[[list[str], list[int]], list[bytes]]
    send_run: SendRun
    handle_fields: Callable[[Iterable[str]], list[HandleFields | None]]
    handle_columns: Callable[[Iterable[str], int, str], HandleColumns]


REFERENCE: Final = Codecs(
    name="reference",
    delivery_response=delivery.delivery_response,
    delivery_responses=delivery.delivery_responses,
    ack_response=acks.ack_response,
    send_fields=_send_fields.send_fields,
    ok_answer=_send_fields.ok_answer,
    ok_answers=_send_fields.ok_answers,
    send_run=_send_fields.send_run,
    handle_fields=acks.handle_fields,
    handle_columns=acks.handle_columns,
)

NATIVE_MODULES: Final = (
    "rocketlite.protocol.proto._native._delivery",
    "rocketlite.protocol.proto._native._send_fields",
)

CHOSEN: Final = native.load(REFERENCE, NATIVE_MODULES)

delivery_response: Final = CHOSEN.delivery_response
delivery_responses: Final = CHOSEN.delivery_responses
ack_response: Final = CHOSEN.ack_response
send_fields: Final = CHOSEN.send_fields
ok_answer: Final = CHOSEN.ok_answer
ok_answers: Final = CHOSEN.ok_answers
send_run: Final = CHOSEN.send_run
handle_fields: Final = CHOSEN.handle_fields
handle_columns: Final = CHOSEN.handle_columns
