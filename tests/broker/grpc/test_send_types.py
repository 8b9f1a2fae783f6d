"""SendMessage by message type and EndTransaction over 127.0.0.1, driven by a raw client built from
the same generated stubs: FIFO (one group, one queue, send order), DELAY (TIMER_DELIVER_MS; parked
until its time), TRANSACTION (half, commit, rollback, check-back on the Telemetry stream), the
settings' `subscription.fifo`, and the `apache.rocketmq.v2.Code` of bad input. The official
clients' tests are in test_transaction_clients.py, test_python_client.py and test_node_client.py."""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from rocketlite.broker.subscription_group import SubscriptionGroupConfig
from rocketlite.protocol import reserved
from rocketlite.protocol.message import string_to_properties
from rocketlite.protocol.proto import available
from tests.support.aio import run
from tests.support.broker_harness import BrokerUnderTest, broker_under_test, stored_by_uniq_key
from tests.support.foreign_clients.grpc5 import raw_stub, require_endpoint
from tests.support.wire import pull_until_end

if available() is None:
    from google.protobuf import timestamp_pb2

    from rocketlite.protocol.proto.v2 import definition_pb2 as pb
    from rocketlite.protocol.proto.v2 import service_pb2 as spb

OK = 20000
METADATA = (("x-mq-client-id", "test-host@1@0@abc"), ("x-mq-language", "PYTHON"))


def _message(topic: str, body: bytes, message_id: str, message_type: str, **system: Any) -> Any:
    return pb.Message(
        topic=pb.Resource(name=topic),
        system_properties=pb.SystemProperties(
            tag="TagA",
            message_id=message_id,
            body_digest=pb.Digest(type=pb.DigestType.MD5, checksum=hashlib.md5(body).hexdigest()),
            body_encoding=pb.Encoding.IDENTITY,
            message_type=pb.MessageType.Value(message_type),
            born_timestamp=timestamp_pb2.Timestamp(seconds=int(time.time())),
            **system,
        ),
        body=body,
    )


async def _send(stub: Any, message: Any) -> Any:
    response = await stub.SendMessage(
        spb.SendMessageRequest(messages=[message]), metadata=METADATA, timeout=5
    )
    assert len(response.entries) == 1
    return response.entries[0]


async def _by_queue(
    broker: BrokerUnderTest, topic: str
) -> dict[int, list[tuple[str, bytes, dict[str, str]]]]:
    """Each queue's 5.x messages in queue order: (UNIQ_KEY, body, properties)."""
    await broker.dispatched()
    tc = broker.controller.topics.select(topic)
    assert tc is not None
    out: dict[int, list[tuple[str, bytes, dict[str, str]]]] = {}
    for queue_id in range(tc.read_queue_nums):
        records, _ = await pull_until_end(broker.client, broker.addr, topic, queue_id, group="g")
        for r in records:
            props = string_to_properties(r.properties_string)
            if "UNIQ_KEY" in props:  # not the remoting send that created the topic
                out.setdefault(queue_id, []).append((props["UNIQ_KEY"], r.body, props))
    return out


async def _until_stored(
    broker: BrokerUnderTest, topic: str, uniq: str, timeout: float
) -> tuple[bytes, dict[str, str]]:
    """Poll the topic until the message with this UNIQ_KEY can be pulled (a timer or a commit
    delivers it on the broker's own schedule)."""
    deadline = time.monotonic() + timeout
    while True:
        stored = await stored_by_uniq_key(broker, topic)
        if uniq in stored:
            return stored[uniq]
        assert time.monotonic() < deadline, f"{uniq} never reached {topic}"
        await asyncio.sleep(0.05)


def test_fifo_messages_of_a_group_land_in_one_queue_in_send_order(tmp_path: Path) -> None:
    require_endpoint()

    async def scenario() -> None:
        async with broker_under_test(tmp_path) as broker:
            await broker.send("FifoT")
            channel, stub = raw_stub(broker)
            async with channel:
                for i in range(12):
                    group = f"order-{i % 3}"
                    entry = await _send(
                        stub, _message("FifoT", f"{group}:{i}".encode(), f"F{i}", "FIFO", message_group=group)
                    )
                    assert entry.status.code == OK, entry.status.message
            queues = await _by_queue(broker, "FifoT")
            by_group: dict[str, set[int]] = {}
            for queue_id, messages in queues.items():
                for _uniq, body, props in messages:
                    assert props["__SHARDINGKEY"] == body.decode().split(":")[0]
                    by_group.setdefault(props["__SHARDINGKEY"], set()).add(queue_id)
            assert all(len(q) == 1 for q in by_group.values()), by_group  # one queue per group
            assert len(by_group) == 3
            for messages in queues.values():
                for group in by_group:
                    seq = [int(body.split(b":")[1]) for _, body, p in messages if p["__SHARDINGKEY"] == group]
                    assert seq == sorted(seq)  # send order

    run(scenario())


def test_delay_message_is_parked_with_timer_deliver_ms_until_its_time(tmp_path: Path) -> None:
    require_endpoint()

    async def scenario() -> None:
        async with broker_under_test(tmp_path) as broker:
            await broker.send("DelayT")
            channel, stub = raw_stub(broker)
            at_ms = int(time.time() * 1000) + 1500
            async with channel:
                proper = await _send(
                    stub,
                    _message("DelayT", b"d1", "D1", "DELAY",
                             delivery_timestamp=timestamp_pb2.Timestamp(seconds=at_ms // 1000,
                                                                        nanos=at_ms % 1000 * 1_000_000)),
                )  # fmt: skip
                # rocketmq-python-client 5.1.2 writes epoch milliseconds into the seconds field
                python_ms = await _send(
                    stub,
                    _message(
                        "DelayT",
                        b"d2",
                        "D2",
                        "DELAY",
                        delivery_timestamp=timestamp_pb2.Timestamp(seconds=at_ms),
                    ),
                )
            assert (proper.status.code, python_ms.status.code) == (OK, OK), (proper.status, python_ms.status)
            assert set(await stored_by_uniq_key(broker, "DelayT")) & {"D1", "D2"} == set()  # not yet
            parked = await stored_by_uniq_key(broker, reserved.TIMER_TOPIC)
            for uniq in ("D1", "D2"):
                assert parked[uniq][1]["TIMER_DELIVER_MS"] == str(at_ms)
                assert parked[uniq][1]["REAL_TOPIC"] == "DelayT"
            for uniq, body in (("D1", b"d1"), ("D2", b"d2")):
                got, props = await _until_stored(broker, "DelayT", uniq, timeout=15)
                assert got == body and props["TIMER_DELIVER_MS"] == str(at_ms)
            assert time.time() * 1000 >= at_ms  # never early

    run(scenario())


async def _end(stub: Any, topic: str, message_id: str, transaction_id: str, resolution: str,
               source: str = "SOURCE_CLIENT") -> Any:  # fmt: skip
    return await stub.EndTransaction(
        spb.EndTransactionRequest(
            topic=pb.Resource(name=topic),
            message_id=message_id,
            transaction_id=transaction_id,
            resolution=pb.TransactionResolution.Value(resolution),
            source=pb.TransactionSource.Value(source),
        ),
        metadata=METADATA,
        timeout=5,
    )


def test_transaction_commit_is_visible_and_rollback_never(tmp_path: Path) -> None:
    require_endpoint()

    async def scenario() -> None:
        async with broker_under_test(tmp_path) as broker:
            await broker.send("TxT")
            channel, stub = raw_stub(broker)
            async with channel:
                commit = await _send(stub, _message("TxT", b"commit-me", "TX1", "TRANSACTION"))
                rollback = await _send(stub, _message("TxT", b"roll-me-back", "TX2", "TRANSACTION"))
                assert (commit.status.code, rollback.status.code) == (OK, OK)
                assert commit.transaction_id and rollback.transaction_id != commit.transaction_id
                assert set(await stored_by_uniq_key(broker, "TxT")) & {"TX1", "TX2"} == set()  # halves
                halves = await stored_by_uniq_key(broker, reserved.TRANS_HALF_TOPIC)
                assert halves["TX1"][1]["PGROUP"] == "TxT" and halves["TX1"][1]["REAL_TOPIC"] == "TxT"
                done = await _end(stub, "TxT", "TX1", commit.transaction_id, "COMMIT")
                undone = await _end(stub, "TxT", "TX2", rollback.transaction_id, "ROLLBACK")
                assert (done.status.code, undone.status.code) == (OK, OK), (done.status, undone.status)
                again = await _end(stub, "TxT", "TX1", commit.transaction_id, "COMMIT")
                assert again.status.code == OK  # a repeated end is acknowledged, not delivered twice
            stored = await stored_by_uniq_key(broker, "TxT")
            assert stored["TX1"][0] == b"commit-me"
            assert "TX2" not in stored
            copies = [uniq for queue in (await _by_queue(broker, "TxT")).values() for uniq, _, _ in queue]
            assert copies.count("TX1") == 1

    run(scenario())


def test_bad_sends_and_ends_get_their_codes(tmp_path: Path) -> None:
    require_endpoint()

    async def scenario() -> None:
        async with broker_under_test(tmp_path) as broker:
            await broker.send("BadT")
            await broker.send("OtherT")
            channel, stub = raw_stub(broker)
            far = timestamp_pb2.Timestamp(seconds=int(time.time()) + 30 * 24 * 3600)
            async with channel:
                no_group = await _send(stub, _message("BadT", b"x", "B1", "FIFO"))
                blank_group = await _send(stub, _message("BadT", b"x", "B2", "FIFO", message_group="  "))
                normal_with_group = await _send(
                    stub, _message("BadT", b"x", "B3", "NORMAL", message_group="g")
                )
                no_time = await _send(stub, _message("BadT", b"x", "B4", "DELAY"))
                too_far = await _send(stub, _message("BadT", b"x", "B5", "DELAY", delivery_timestamp=far))
                half = await _send(stub, _message("BadT", b"x", "B6", "TRANSACTION"))
                assert half.status.code == OK
                unknown = await _end(stub, "BadT", "B6", "0-0", "COMMIT")
                garbage = await _end(stub, "BadT", "B6", "not-an-id", "COMMIT")
                empty = await _end(stub, "BadT", "B6", "", "COMMIT")
                wrong_message = await _end(stub, "BadT", "B7", half.transaction_id, "COMMIT")
                wrong_topic = await _end(stub, "OtherT", "B6", half.transaction_id, "COMMIT")
            assert (
                no_group.status.code == pb.Code.ILLEGAL_MESSAGE_GROUP
                and "message_group" in no_group.status.message
            )
            assert blank_group.status.code == pb.Code.ILLEGAL_MESSAGE_GROUP
            assert normal_with_group.status.code == pb.Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE
            assert no_time.status.code == pb.Code.ILLEGAL_DELIVERY_TIME
            assert (
                too_far.status.code == pb.Code.ILLEGAL_DELIVERY_TIME
                and "timerMaxDelaySec" in too_far.status.message
            )
            for answer in (unknown, garbage, empty, wrong_message, wrong_topic):
                assert answer.status.code == pb.Code.INVALID_TRANSACTION_ID, answer.status
            assert "no half message" in unknown.status.message
            assert "B7" in wrong_message.status.message and "OtherT" in wrong_topic.status.message
            assert "B6" not in await stored_by_uniq_key(broker, "BadT")  # none of those ends committed it

    run(scenario())


def test_unserved_message_types_and_a_normal_delivery_time_are_refused(tmp_path: Path) -> None:
    """BAD_REQUEST naming the type (one the stubs know or a bare number); a NORMAL message with a
    delivery time: MESSAGE_PROPERTY_CONFLICT_WITH_TYPE. None of them stored."""
    require_endpoint()

    async def scenario() -> None:
        async with broker_under_test(tmp_path) as broker:
            await broker.send("TypeT")
            channel, stub = raw_stub(broker)
            soon = timestamp_pb2.Timestamp(seconds=int(time.time()) + 60)
            async with channel:
                unspecified = await _send(stub, _message("TypeT", b"x", "U1", "MESSAGE_TYPE_UNSPECIFIED"))
                future = _message("TypeT", b"x", "U2", "NORMAL")
                future.system_properties.message_type = 99  # open enum: a type from a newer client
                numbered = await _send(stub, future)
                timed = await _send(stub, _message("TypeT", b"x", "U3", "NORMAL", delivery_timestamp=soon))
            assert unspecified.status.code == pb.Code.BAD_REQUEST
            assert "MESSAGE_TYPE_UNSPECIFIED" in unspecified.status.message
            assert numbered.status.code == pb.Code.BAD_REQUEST
            assert "message type 99" in numbered.status.message
            assert timed.status.code == pb.Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE
            assert "delivery_timestamp" in timed.status.message
            assert not {"U1", "U2", "U3"} & set(await stored_by_uniq_key(broker, "TypeT"))

    run(scenario())


def test_unknown_transaction_is_checked_over_the_producers_telemetry_stream(tmp_path: Path) -> None:
    """A half left open is checked back on the Telemetry stream of a producer of its topic, as a
    RecoverOrphanedTransactionCommand; the producer's EndTransaction (SOURCE_SERVER_CHECK) commits
    it; the stream leaves the registry when it ends."""
    require_endpoint()
    settings = pb.Settings(
        client_type=pb.ClientType.PRODUCER, publishing=pb.Publishing(topics=[pb.Resource(name="CheckT")])
    )

    async def scenario() -> None:
        async with broker_under_test(
            tmp_path, transaction_timeout=200, transaction_check_interval=50
        ) as broker:
            await broker.send("CheckT")
            endpoint = broker.controller.parts.grpc if broker.controller.parts else None
            assert endpoint is not None
            channel, stub = raw_stub(broker)
            closing = asyncio.Event()

            async def commands() -> AsyncIterator[Any]:
                yield spb.TelemetryCommand(settings=settings)
                await closing.wait()

            async with channel:
                call = stub.Telemetry(commands(), metadata=METADATA, timeout=30)
                first = await call.read()
                assert first.status.code == OK and first.settings.publishing.max_body_size > 0
                clients = broker.controller.parts.clients if broker.controller.parts else None
                assert clients is not None
                assert len(clients.producer_channels("CheckT")) == 1  # the stream, as a check channel
                sent = await _send(stub, _message("CheckT", b"left-open", "TX9", "TRANSACTION", keys=["k9"]))
                assert sent.status.code == OK
                check = await asyncio.wait_for(call.read(), 10)
                recover = check.recover_orphaned_transaction_command
                assert recover.transaction_id == sent.transaction_id
                message = recover.message
                assert (message.topic.name, message.body, message.system_properties.message_id) == (
                    "CheckT", b"left-open", "TX9",
                )  # fmt: skip
                assert (
                    list(message.system_properties.keys) == ["k9"] and message.system_properties.tag == "TagA"
                )
                digest = message.system_properties.body_digest
                assert (
                    digest.type == pb.DigestType.MD5
                    and digest.checksum == hashlib.md5(b"left-open").hexdigest().upper()
                )
                answer = await _end(
                    stub, "CheckT", "TX9", recover.transaction_id, "COMMIT", "SOURCE_SERVER_CHECK"
                )
                assert answer.status.code == OK
                body, _ = await _until_stored(broker, "CheckT", "TX9", timeout=5)
                assert body == b"left-open"
                closing.set()
                call.cancel()
            deadline = time.monotonic() + 5
            while clients.producer_channels("CheckT"):  # the server sees the stream end
                assert time.monotonic() < deadline, "the ended stream stayed registered"
                await asyncio.sleep(0.02)

    run(scenario())


def test_settings_say_fifo_for_groups_that_consume_orderly(tmp_path: Path) -> None:
    require_endpoint()

    def consumer(group: str) -> Any:
        return spb.TelemetryCommand(
            settings=pb.Settings(
                client_type=pb.ClientType.PUSH_CONSUMER,
                subscription=pb.Subscription(group=pb.Resource(name=group)),
            )
        )

    async def commands() -> AsyncIterator[Any]:
        yield consumer("OrderlyG")
        yield consumer("PlainG")

    async def scenario() -> None:
        async with broker_under_test(tmp_path) as broker:
            broker.controller.groups.update(SubscriptionGroupConfig("OrderlyG", consume_message_orderly=True))
            broker.controller.groups.update(SubscriptionGroupConfig("PlainG"))
            channel, stub = raw_stub(broker)
            async with channel:
                replies = [r async for r in stub.Telemetry(commands(), metadata=METADATA, timeout=5)]
        assert [r.settings.subscription.fifo for r in replies] == [True, False]
        assert SubscriptionGroupConfig.from_json_obj(
            SubscriptionGroupConfig("G", consume_message_orderly=True).to_json_obj()
        ).consume_message_orderly

    run(scenario())
