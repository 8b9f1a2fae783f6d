"""Consumption RPCs of the gRPC endpoint over 127.0.0.1, driven by a raw client built from the same
generated stubs: QueryAssignment, ReceiveMessage's stream, AckMessage, ChangeInvisibleDuration and
ForwardMessageToDeadLetterQueue, and the `apache.rocketmq.v2.Code` of bad input (always a status on
the stream, never a dropped call). The official clients' tests are in test_simple_consumer.py and
test_push_consumer.py."""

from __future__ import annotations

import hashlib
import time
from pathlib import Path
from typing import Any

from rocketlite.broker.subscription_group import SubscriptionGroupConfig
from rocketlite.protocol.proto import available
from tests.support.aio import run
from tests.support.broker_harness import BrokerUnderTest, broker_under_test, stored_by_uniq_key
from tests.support.foreign_clients.grpc5 import raw_stub, require_endpoint

if available() is None:
    from google.protobuf import duration_pb2

    from rocketlite.protocol.proto.v2 import definition_pb2 as pb
    from rocketlite.protocol.proto.v2 import service_pb2 as spb

OK = 20000
METADATA = (("x-mq-client-id", "test-host@1@0@abc"), ("x-mq-language", "PYTHON"))


def _receive_request(topic: str, group: str, *, invisible_s: int = 15, polling_s: int = 5,
                     expression: str = "*", sql: bool = False) -> Any:  # fmt: skip
    return spb.ReceiveMessageRequest(
        group=pb.Resource(name=group),
        message_queue=pb.MessageQueue(topic=pb.Resource(name=topic), id=0),
        filter_expression=pb.FilterExpression(
            type=pb.FilterType.SQL if sql else pb.FilterType.TAG, expression=expression
        ),
        batch_size=16,
        invisible_duration=duration_pb2.Duration(seconds=invisible_s),
        auto_renew=False,
        long_polling_timeout=duration_pb2.Duration(seconds=polling_s),
    )


async def _receive(stub: Any, request: Any) -> tuple[Any, list[Any], list[Any]]:
    """(status, messages, every response in order) of one ReceiveMessage stream."""
    responses = [r async for r in stub.ReceiveMessage(request, metadata=METADATA, timeout=30)]
    statuses = [r.status for r in responses if r.WhichOneof("content") == "status"]
    assert len(statuses) == 1, responses
    assert responses[-1].WhichOneof("content") == "delivery_timestamp"
    return statuses[0], [r.message for r in responses if r.WhichOneof("content") == "message"], responses


async def _ack(stub: Any, topic: str, group: str, *messages: Any, handles: list[str] | None = None) -> Any:
    entries = [
        spb.AckMessageEntry(message_id=m.system_properties.message_id, receipt_handle=h)
        for m, h in zip(
            messages, handles or [m.system_properties.receipt_handle for m in messages], strict=True
        )
    ]
    request = spb.AckMessageRequest(
        group=pb.Resource(name=group), topic=pb.Resource(name=topic), entries=entries
    )
    return await stub.AckMessage(request, metadata=METADATA, timeout=5)


async def _change(stub: Any, topic: str, group: str, handle: str, seconds: float) -> Any:
    request = spb.ChangeInvisibleDurationRequest(
        group=pb.Resource(name=group),
        topic=pb.Resource(name=topic),
        receipt_handle=handle,
        invisible_duration=duration_pb2.Duration(seconds=int(seconds), nanos=int(seconds % 1 * 1e9)),
    )
    return await stub.ChangeInvisibleDuration(request, metadata=METADATA, timeout=5)


async def _sent(broker: BrokerUnderTest, topic: str, count: int) -> list[str]:
    """`count` messages sent over remoting to queues 0, 1, ...; their UNIQ_KEYs."""
    ids = []
    for i in range(count):
        answer = await broker.send(topic, f"body-{i}".encode(), queue_id=i % 2, tags="TagA", keys="k1 k2",
                                   props={"color": "red", "UNIQ_KEY": f"ID{i}"})  # fmt: skip
        assert answer.code == 0, answer.remark
        ids.append(f"ID{i}")
    return ids


def test_assignment_receive_and_ack(tmp_path: Path) -> None:
    require_endpoint()

    async def scenario() -> None:
        async with broker_under_test(tmp_path) as broker:
            ids = await _sent(broker, "ConsT", 2)
            channel, stub = raw_stub(broker)
            async with channel:
                assignment = await stub.QueryAssignment(
                    spb.QueryAssignmentRequest(topic=pb.Resource(name="ConsT"), group=pb.Resource(name="G")),
                    metadata=METADATA, timeout=5,
                )  # fmt: skip
                assert assignment.status.code == OK, assignment.status.message
                [one] = assignment.assignments
                assert one.message_queue.id == -1  # ReceiveMessage pops across the broker's queues
                assert broker.controller.parts is not None and broker.controller.parts.grpc is not None
                assert (
                    one.message_queue.broker.endpoints.addresses[0].port == broker.controller.parts.grpc.port
                )

                status, messages, responses = await _receive(stub, _receive_request("ConsT", "G"))
                assert status.code == OK, status.message
                assert responses[0].WhichOneof("content") == "status"  # the status comes first
                assert sorted(m.system_properties.message_id for m in messages) == ids
                first = next(m for m in messages if m.system_properties.message_id == "ID0")
                system = first.system_properties
                assert (first.body, system.tag, list(system.keys), dict(first.user_properties)) == (
                    b"body-0", "TagA", ["k1", "k2"], {"color": "red"},
                )  # fmt: skip
                assert system.body_digest.checksum == hashlib.md5(b"body-0").hexdigest().upper()
                assert (system.delivery_attempt, system.queue_id, system.queue_offset) == (1, 0, 0)
                assert system.message_type == pb.MessageType.NORMAL
                assert system.store_timestamp.seconds > 0 and system.receipt_handle

                acked = await _ack(stub, "ConsT", "G", *messages)
                assert acked.status.code == OK and [e.status.code for e in acked.entries] == [OK, OK]
                again = await _ack(stub, "ConsT", "G", *messages)  # never a double ack
                assert again.status.code == pb.Code.INVALID_RECEIPT_HANDLE
                assert {e.status.code for e in again.entries} == {pb.Code.INVALID_RECEIPT_HANDLE}

                started = time.monotonic()
                status, messages, _ = await _receive(stub, _receive_request("ConsT", "G"))
                assert (status.code, messages) == (pb.Code.MESSAGE_NOT_FOUND, [])
                assert time.monotonic() - started >= 4.5  # the long polling was held (5 s minimum)
            assert broker.controller.offsets.query("G", "ConsT", 0) == 1  # the group's progress

    run(scenario())


def test_change_invisible_duration_brings_the_message_back_after_the_new_duration(tmp_path: Path) -> None:
    require_endpoint()

    async def scenario() -> None:
        async with broker_under_test(tmp_path) as broker:
            await _sent(broker, "ChT", 1)
            channel, stub = raw_stub(broker)
            async with channel:
                _, [message], _ = await _receive(stub, _receive_request("ChT", "G", invisible_s=30))
                old = message.system_properties.receipt_handle
                changed = await _change(stub, "ChT", "G", old, 2)
                changed_at = time.monotonic()
                assert changed.status.code == OK and changed.receipt_handle != old
                stale = await _change(stub, "ChT", "G", old, 2)
                assert stale.status.code == pb.Code.INVALID_RECEIPT_HANDLE, stale.status.message

                status, [back], _ = await _receive(stub, _receive_request("ChT", "G"))
                assert status.code == OK
                assert time.monotonic() - changed_at >= 1.9  # not before the new duration
                assert back.system_properties.delivery_attempt == 2
                # The change's handle is stale too once the message was delivered again.
                assert (await _ack(stub, "ChT", "G", back, handles=[changed.receipt_handle])).status.code == (
                    pb.Code.INVALID_RECEIPT_HANDLE
                )
                assert (await _ack(stub, "ChT", "G", back)).status.code == OK

    run(scenario())


def test_forward_to_dead_letter_queue_moves_and_acks(tmp_path: Path) -> None:
    require_endpoint()

    async def scenario() -> None:
        async with broker_under_test(tmp_path) as broker:
            await _sent(broker, "DlqT", 1)
            channel, stub = raw_stub(broker)
            async with channel:
                _, [message], _ = await _receive(stub, _receive_request("DlqT", "G"))

                def forward(handle: str) -> Any:
                    return spb.ForwardMessageToDeadLetterQueueRequest(
                        group=pb.Resource(name="G"), topic=pb.Resource(name="DlqT"), receipt_handle=handle,
                        message_id=message.system_properties.message_id, delivery_attempt=1,
                        max_delivery_attempts=1,
                    )  # fmt: skip

                handle = message.system_properties.receipt_handle
                done = await stub.ForwardMessageToDeadLetterQueue(
                    forward(handle), metadata=METADATA, timeout=5
                )
                assert done.status.code == OK, done.status.message
                twice = await stub.ForwardMessageToDeadLetterQueue(
                    forward(handle), metadata=METADATA, timeout=5
                )
                assert twice.status.code == pb.Code.INVALID_RECEIPT_HANDLE
                assert (await _ack(stub, "DlqT", "G", message)).status.code == pb.Code.INVALID_RECEIPT_HANDLE
            dlq = await stored_by_uniq_key(broker, "%DLQ%G")
            assert list(dlq) == ["ID0"] and dlq["ID0"][0] == b"body-0"
            assert broker.controller.parts is not None
            assert broker.controller.parts.pop.service.in_flight("G", "DlqT", 0) == {}

    run(scenario())


def test_receive_with_an_sql_filter(tmp_path: Path) -> None:
    """A FilterExpression of type SQL filters by the messages' properties, as RocketMQ's proxy
    pops with an SQL92 expression (served whatever enablePropertyFilter says, as there)."""
    require_endpoint()

    async def scenario() -> None:
        async with broker_under_test(tmp_path) as broker:
            for i in range(4):
                sent = await broker.send("SqlT", f"s{i}".encode(), tags=f"Tag{i % 2}",
                                         props={"n": str(i), "UNIQ_KEY": f"SQ{i}"})  # fmt: skip
                assert sent.code == 0, sent.remark
            channel, stub = raw_stub(broker)
            async with channel:
                request = _receive_request("SqlT", "G", sql=True, expression="n >= 1 AND TAGS = 'Tag1'")
                status, messages, _ = await _receive(stub, request)
                assert status.code == OK, status.message
                assert sorted(m.body for m in messages) == [b"s1", b"s3"]

    run(scenario())


def test_bad_input_gets_its_code_on_the_stream(tmp_path: Path) -> None:
    require_endpoint()
    forged = "0 1700000000000 60000 0 0 broker-a 0 0"

    async def scenario() -> None:
        async with broker_under_test(tmp_path, auto_create_subscription_group=False) as broker:
            await _sent(broker, "BadT", 1)
            broker.controller.groups.update(SubscriptionGroupConfig("G"))  # no auto-create here
            channel, stub = raw_stub(broker)
            async with channel:
                unknown = await stub.QueryAssignment(
                    spb.QueryAssignmentRequest(
                        topic=pb.Resource(name="NoSuchT"), group=pb.Resource(name="G")
                    ),
                    timeout=5,
                )
                assert unknown.status.code == pb.Code.TOPIC_NOT_FOUND
                status, _, _ = await _receive(stub, _receive_request("NoSuchT", "G"))
                assert status.code == pb.Code.TOPIC_NOT_FOUND and "NoSuchT" in status.message
                status, _, _ = await _receive(stub, _receive_request("BadT", "NoSuchGroup"))
                assert status.code == pb.Code.CONSUMER_GROUP_NOT_FOUND
                status, _, _ = await _receive(stub, _receive_request("BadT", "G", sql=True, expression="a >"))
                assert status.code == pb.Code.ILLEGAL_FILTER_EXPRESSION
                assert "invalid SQL92 expression" in status.message and "column 4" in status.message
                status, _, _ = await _receive(stub, _receive_request("BadT", "G", invisible_s=1))
                assert status.code == pb.Code.ILLEGAL_INVISIBLE_TIME

                _, [message], _ = await _receive(stub, _receive_request("BadT", "G"))
                real = message.system_properties.receipt_handle
                for handle in ("garbage", forged, real.replace(" broker", " other-broker"), ""):
                    acked = await _ack(stub, "BadT", "G", message, handles=[handle])
                    assert acked.entries[0].status.code == pb.Code.INVALID_RECEIPT_HANDLE, (handle, acked)
                    changed = await _change(stub, "BadT", "G", handle, 5)
                    assert changed.status.code == pb.Code.INVALID_RECEIPT_HANDLE, (handle, changed)
                mixed = await _ack(stub, "BadT", "G", message, message, handles=[forged, real])
                assert mixed.status.code == pb.Code.MULTIPLE_RESULTS
                assert [e.status.code for e in mixed.entries] == [pb.Code.INVALID_RECEIPT_HANDLE, OK]

    run(scenario())


def test_fifo_group_gets_a_queue_per_assignment_and_one_batch_in_flight(tmp_path: Path) -> None:
    require_endpoint()

    async def scenario() -> None:
        async with broker_under_test(tmp_path) as broker:
            broker.controller.groups.update(SubscriptionGroupConfig("FifoG", consume_message_orderly=True))
            for i in range(2):
                await broker.send(
                    "FifoT", f"f{i}".encode(), props={"UNIQ_KEY": f"F{i}", "__SHARDINGKEY": "order-1"}
                )
            tc = broker.controller.topics.select("FifoT")
            assert tc is not None
            channel, stub = raw_stub(broker)
            async with channel:
                request = spb.QueryAssignmentRequest(
                    topic=pb.Resource(name="FifoT"), group=pb.Resource(name="FifoG")
                )
                assignment = await stub.QueryAssignment(request, metadata=METADATA, timeout=5)
                assert [a.message_queue.id for a in assignment.assignments] == list(range(tc.read_queue_nums))
                status, messages, _ = await _receive(stub, _receive_request("FifoT", "FifoG"))
                assert status.code == OK, status.message
                assert [m.system_properties.message_id for m in messages] == ["F0", "F1"]  # in order
                assert {m.system_properties.message_group for m in messages} == {"order-1"}
                assert {m.system_properties.message_type for m in messages} == {pb.MessageType.FIFO}
                # While the batch is in flight, the queue hands out nothing new.
                await broker.send("FifoT", b"f2", props={"UNIQ_KEY": "F2", "__SHARDINGKEY": "order-1"})
                status, held, _ = await _receive(stub, _receive_request("FifoT", "FifoG"))
                assert (status.code, held) == (pb.Code.MESSAGE_NOT_FOUND, [])
                assert (await _ack(stub, "FifoT", "FifoG", *messages)).status.code == OK
                status, [third], _ = await _receive(stub, _receive_request("FifoT", "FifoG"))
                assert third.system_properties.message_id == "F2"

    run(scenario())


def test_a_mixed_ack_answers_each_entry(tmp_path: Path) -> None:
    """One AckMessage of valid, stale, malformed, expired-shape and duplicate entries on two queues:
    each entry answered with its own code and cause, in order, each echoing its message id and
    handle, and only the valid ones acked (once)."""
    require_endpoint()

    async def scenario() -> None:
        async with broker_under_test(tmp_path) as broker:
            await _sent(broker, "MixT", 4)
            channel, stub = raw_stub(broker)
            async with channel:
                status, messages, _ = await _receive(stub, _receive_request("MixT", "G"))
                assert status.code == OK and len(messages) == 4
                by_id = {m.system_properties.message_id: m for m in messages}
                a, b, c, d = (by_id[f"ID{i}"] for i in range(4))  # queues 0, 1, 0, 1
                assert (await _ack(stub, "MixT", "G", c)).status.code == OK  # c is stale from now on
                h = {m.system_properties.message_id: m.system_properties.receipt_handle for m in messages}
                no_offset = h["ID1"][: h["ID1"].rindex(" ")]
                acked = await _ack(
                    stub, "MixT", "G", a, c, b, a, d, b,
                    handles=[h["ID0"], h["ID2"], "garbage", h["ID0"], h["ID3"], no_offset],
                )  # fmt: skip
                codes = [e.status.code for e in acked.entries]
                bad = pb.Code.INVALID_RECEIPT_HANDLE
                assert codes == [OK, bad, bad, bad, OK, bad], acked
                assert acked.status.code == pb.Code.MULTIPLE_RESULTS
                assert [(e.message_id, e.receipt_handle) for e in acked.entries] == [
                    ("ID0", h["ID0"]), ("ID2", h["ID2"]), ("ID1", "garbage"), ("ID0", h["ID0"]),
                    ("ID3", h["ID3"]), ("ID1", no_offset),
                ]  # fmt: skip
                messages_of = [e.status.message for e in acked.entries]
                assert "acked already" in messages_of[1] and "acked already" in messages_of[3]
                assert "has 1 fields" in messages_of[2]
                assert "no queue offset" in messages_of[5]
                # b is still in flight: acked now, once
                again = await _ack(stub, "MixT", "G", b, b)
                assert [e.status.code for e in again.entries] == [OK, bad]
            assert broker.controller.offsets.query("G", "MixT", 0) == 2
            assert broker.controller.offsets.query("G", "MixT", 1) == 2

    run(scenario())
