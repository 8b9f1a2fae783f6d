"""Stored records as 5.x `apache.rocketmq.v2.Message`s for the endpoint's RPCs: the builder itself
(what each field is, after RocketMQ 5's `GrpcConverter.buildMessage`) is sans-IO, in
`protocol.proto.delivery`; a delivery's `ReceiveMessageResponse` bytes come from the chosen writer
of `protocol.proto.speedups` (`delivery_response`, or `delivery_responses` for a run), built
straight from the record's bytes."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rocketlite.broker.grpc.kit import ProtoKit
from rocketlite.protocol.formats.record import StoredRecord
from rocketlite.protocol.proto.delivery import Delivered, PopStamp, Receipt, timestamp_answer
from rocketlite.protocol.proto.delivery import message_of as build_message
from rocketlite.protocol.proto.speedups import delivery_response, delivery_responses

if TYPE_CHECKING:
    from rocketlite.protocol.proto.v2 import definition_pb2

__all__ = [
    "Delivered",
    "PopStamp",
    "Receipt",
    "delivery_response",
    "delivery_responses",
    "message_of",
    "timestamp_answer",
]


def message_of(kit: ProtoKit, record: StoredRecord, receipt: Receipt | None = None) -> definition_pb2.Message:
    """`record` as a 5.x `Message` (`protocol.proto.delivery.message_of`); `receipt`: a delivery's."""
    del kit  # the endpoint's protobuf classes are the ones `delivery` builds with
    return build_message(record, receipt)
