"""The two front doors agree: the same send, once as a 5.x SendMessage over gRPC and once as the
SEND_MESSAGE_V2 a 4.x client would send for it (the `SendRequest` the gRPC adapter converts the
message into, written as letters on the remoting port), is stored as the same record (apart from
where it lies, when it was stored, and the born host's port, each connection's own) and answered
with the same place. Each message type lands where its type says: NORMAL and FIFO in the topic
(FIFO in its group's queue), TRANSACTION as a half message."""

from __future__ import annotations

import dataclasses
import hashlib
import time
from pathlib import Path
from typing import Any

import pytest

from rocketlite.protocol.codes import RequestCode, ResponseCode
from rocketlite.protocol.formats.record import StoredRecord, decode_record
from rocketlite.protocol.message import parse_msg_id
from rocketlite.protocol.proto import available
from rocketlite.protocol.reserved import TRANS_HALF_TOPIC
from tests.support.aio import run
from tests.support.broker_harness import BrokerUnderTest, broker_under_test
from tests.support.foreign_clients.grpc5 import raw_stub, require_endpoint

pytestmark = pytest.mark.skipif(available() is not None, reason=f"{available()}")

if available() is None:
    from google.protobuf import timestamp_pb2

    from rocketlite.protocol.proto.v2 import definition_pb2 as pb
    from rocketlite.protocol.proto.v2 import service_pb2 as spb

OK = 20000
METADATA = (("x-mq-client-id", "agree-host@1@0@abc"), ("x-mq-language", "PYTHON"))
TOPIC = "AgreeT"


def message(message_type: str, message_id: str) -> Any:
    body = f"same-{message_type}".encode()
    system: dict[str, Any] = {"message_group": "g-1"} if message_type == "FIFO" else {}
    return pb.Message(
        topic=pb.Resource(name=TOPIC),
        user_properties={"color": "red"},
        system_properties=pb.SystemProperties(
            tag="TagA", keys=["k1", "k2"], message_id=message_id,
            body_digest=pb.Digest(type=pb.DigestType.MD5, checksum=hashlib.md5(body).hexdigest()),
            body_encoding=pb.Encoding.IDENTITY, message_type=pb.MessageType.Value(message_type),
            born_timestamp=timestamp_pb2.Timestamp(seconds=int(time.time())), **system,
        ),
        body=body,
    )  # fmt: skip


def stored(b: BrokerUnderTest, topic: str, queue_id: int) -> list[StoredRecord]:
    found = b.controller.store.get_message("agree", topic, queue_id, 0, 32)
    try:
        return [decode_record(view) for view in found.messages]
    finally:
        found.release()


def comparable(record: StoredRecord) -> StoredRecord:
    """The record without what differs by connection and by arrival: its place, its store time
    and the port of its born host."""
    host = dataclasses.replace(record.born_host, port=0)
    return dataclasses.replace(record, queue_offset=0, physical_offset=0, store_timestamp=0, born_host=host)


@pytest.mark.parametrize("message_type", ["NORMAL", "FIFO", "TRANSACTION"])
def test_grpc_and_remoting_store_the_same_send_alike(tmp_path: Path, message_type: str) -> None:
    require_endpoint()

    async def scenario() -> None:
        async with broker_under_test(tmp_path) as b:
            b.controller.topics.create_in_send_back(TOPIC, 1, 6)  # one queue: the broker's pick is 0
            parts = b.controller.parts
            assert parts is not None and parts.grpc is not None
            msg = message(message_type, "AGREE-1")
            channel, stub = raw_stub(b)
            async with channel:
                response = await stub.SendMessage(
                    spb.SendMessageRequest(messages=[msg]), metadata=METADATA, timeout=5
                )
            [entry] = response.entries
            assert entry.status.code == OK, entry.status.message
            request, kind = parts.grpc.producer.request_of(msg)
            assert kind == message_type
            answer = await b.call(RequestCode.SEND_MESSAGE_V2, request.header.to_ext_v2(), request.body)
            assert answer.code == ResponseCode.SUCCESS, answer.remark
            await b.dispatched()

            assert answer.ext_fields["queueId"] == "0"
            topic = TRANS_HALF_TOPIC if message_type == "TRANSACTION" else TOPIC  # a half's queue: 0
            over_grpc, over_remoting = stored(b, topic, 0)
            assert (over_grpc.queue_offset, over_remoting.queue_offset) == (0, 1)
            assert (entry.offset, int(answer.ext_fields["queueOffset"])) == (0, 1)
            assert parse_msg_id(answer.ext_fields["msgId"]).offset == over_remoting.physical_offset
            assert over_grpc.born_host.ip == over_remoting.born_host.ip  # both from 127.0.0.1
            assert comparable(over_grpc) == comparable(over_remoting)
            assert over_grpc.get_property("UNIQ_KEY") == "AGREE-1" and over_grpc.body == msg.body

    run(scenario())
