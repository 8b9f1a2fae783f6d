"""Auto-renew of push consumers' deliveries (the invisible time of `auto_renew` receives, shortened
here from 60 s to a few seconds): the unmodified Python push consumer whose listener takes longer
than the invisible time gets each message once and its ack lands; a killed consumer's message is
delivered again once its invisible time is over; over raw stubs, an ack with the handle the client
was given works after renewals, and NotifyClientTermination stops them."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from rocketlite.broker.grpc.endpoint import GrpcEndpoint
from rocketlite.protocol.codes import ResponseCode
from rocketlite.protocol.proto import available
from tests.support.aio import run
from tests.support.broker_harness import BrokerUnderTest, broker_under_test
from tests.support.grpc_clients import (
    endpoint_address,
    raw_stub,
    require_endpoint,
    require_python5,
    start_python5,
)

pytestmark = pytest.mark.skipif(available() is not None, reason=f"{available()}")

if available() is None:
    from rocketlite.protocol.proto.v2 import definition_pb2 as pb
    from rocketlite.protocol.proto.v2 import service_pb2 as spb

INVISIBLE_MS = 4_000  # the auto-renew invisible time in these tests (60 s in service)

# A push consumer whose listener prints each delivery, takes argv[4] seconds, then succeeds.
PYTHON_SLOW_PUSH = """
import json, sys, time
from rocketmq import (ClientConfiguration, ConsumeResult, Credentials, FilterExpression,
                      MessageListener, PushConsumer)

endpoint, topic, group, seconds = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])

class Slow(MessageListener):
    def consume(self, message):
        print(json.dumps({"got": message.message_id, "attempt": message.delivery_attempt}), flush=True)
        time.sleep(seconds)
        print(json.dumps({"done": message.message_id}), flush=True)
        return ConsumeResult.SUCCESS

config = ClientConfiguration(endpoint, Credentials(), request_timeout=3)
consumer = PushConsumer(config, group, Slow(), {topic: FilterExpression()}, consumption_thread_count=2)
consumer.startup()
print(json.dumps({"started": True}), flush=True)
sys.stdin.read()
consumer.shutdown()
"""


def _endpoint(broker: BrokerUnderTest) -> GrpcEndpoint:
    endpoint = broker.controller.parts.grpc if broker.controller.parts else None
    assert endpoint is not None
    endpoint.consumer.renewals.invisible_ms = INVISIBLE_MS
    return endpoint


def test_slow_python_listener_gets_each_message_once(tmp_path: Path) -> None:
    require_python5()

    async def scenario() -> None:
        async with broker_under_test(tmp_path / "store") as broker:
            renewals = _endpoint(broker).consumer.renewals
            sent = await broker.send("SlowT", b"slow", props={"UNIQ_KEY": "ID-SLOW"})
            assert sent.code == ResponseCode.SUCCESS
            client = await start_python5(
                PYTHON_SLOW_PUSH, endpoint_address(broker), "SlowT", "SlowG", "7", home=tmp_path / "home"
            )
            try:
                await client.wait_for('{"started"', 30)
                await client.wait_for('{"done": "ID-SLOW"', 40)  # 7 s: past the 4 s invisible time
                # The ack used the renewed handle: nothing is in flight or renewed any more.
                pop = broker.controller.parts.pop if broker.controller.parts else None
                assert pop is not None
                await _until(lambda: not pop.service.in_flight("SlowG", "SlowT", 0) and not len(renewals), 10)
            finally:
                ended = await client.finish(20)
        got = [json.loads(line) for line in ended.lines() if line.startswith('{"got"')]
        assert got == [{"got": "ID-SLOW", "attempt": 1}], ended.explain()
        assert renewals.renewed >= 2  # at ~2 s and ~4 s after the pop, and on

    run(scenario())


def test_killed_python_consumer_message_comes_back_after_its_invisible_time(tmp_path: Path) -> None:
    require_python5()

    async def scenario() -> None:
        async with broker_under_test(tmp_path / "store") as broker:
            endpoint = _endpoint(broker)
            renewals = endpoint.consumer.renewals
            sent = await broker.send("KillT", b"kill", props={"UNIQ_KEY": "ID-KILL"})
            assert sent.code == ResponseCode.SUCCESS
            client = await start_python5(
                PYTHON_SLOW_PUSH, endpoint_address(broker), "KillT", "KillG", "600", home=tmp_path / "home"
            )
            try:
                await client.wait_for('{"got": "ID-KILL"', 30)
                await _until(lambda: renewals.renewed >= 1, 10)  # held past its first deadline
                client.proc.kill()
                await client.proc.wait()
                loop = asyncio.get_running_loop()
                killed_at = loop.time()
                # Its Telemetry stream ends: unregistered, its delivery no longer renewed.
                await _until(lambda: not len(renewals), 10)
                channel, stub = raw_stub(broker)
                async with channel:
                    messages = await _receive(stub, "KillG", "KillT", auto_renew=False)
                back_after = loop.time() - killed_at
            finally:
                await client.finish(5)
        assert [(m.system_properties.message_id, m.system_properties.delivery_attempt) for m in messages] == [
            ("ID-KILL", 2)
        ]
        assert back_after < INVISIBLE_MS / 1000 + 5

    run(scenario())


def test_ack_with_the_given_handle_after_renewals_and_termination_stops_them(tmp_path: Path) -> None:
    require_endpoint()

    async def scenario() -> None:
        async with broker_under_test(tmp_path) as broker:
            endpoint = _endpoint(broker)
            renewals = endpoint.consumer.renewals
            for key in ("ID-A", "ID-B"):
                assert (await broker.send("RawT", key.encode(), props={"UNIQ_KEY": key})).code == 0
            channel, stub = raw_stub(broker)
            async with channel:
                telemetry = await _push_consumer(stub, "raw-client", "RawG", "RawT")
                (first,) = await _receive(stub, "RawG", "RawT", auto_renew=True, batch=1)
                await _until(lambda: renewals.renewed >= 2, 15)  # past two invisible times
                given = first.system_properties.receipt_handle
                ack = await stub.AckMessage(
                    spb.AckMessageRequest(
                        group=pb.Resource(name="RawG"),
                        topic=pb.Resource(name="RawT"),
                        entries=[spb.AckMessageEntry(message_id="ID-A", receipt_handle=given)],
                    ),
                    metadata=METADATA,
                    timeout=5,
                )
                (second,) = await _receive(stub, "RawG", "RawT", auto_renew=True, batch=1)
                tracked = len(renewals)
                done = await stub.NotifyClientTermination(
                    spb.NotifyClientTerminationRequest(group=pb.Resource(name="RawG")),
                    metadata=METADATA,
                    timeout=5,
                )
                after = len(renewals)
                telemetry.cancel()
        assert ack.status.code == pb.Code.OK, ack.status
        assert second.system_properties.message_id == "ID-B"
        assert (tracked, done.status.code, after) == (1, pb.Code.OK, 0)

    run(scenario())


# ------------------------------------------------------------------------------------------ helpers

METADATA = (("x-mq-client-id", "raw-client"), ("x-mq-language", "PYTHON"), ("x-mq-client-version", "5.1.2"))


async def _push_consumer(stub: Any, client: str, group: str, topic: str) -> Any:
    """A Telemetry stream with a push consumer's settings (the client is registered), open until
    cancelled."""
    call = stub.Telemetry(metadata=(("x-mq-client-id", client), *METADATA[1:]))
    settings = pb.Settings(
        client_type=pb.ClientType.PUSH_CONSUMER,
        subscription=pb.Subscription(
            group=pb.Resource(name=group),
            subscriptions=[
                pb.SubscriptionEntry(topic=pb.Resource(name=topic), expression=pb.FilterExpression())
            ],
        ),
    )
    await call.write(spb.TelemetryCommand(settings=settings))
    reply = await asyncio.wait_for(call.read(), 10)
    assert reply.status.code == pb.Code.OK, reply.status
    return call


async def _receive(stub: Any, group: str, topic: str, *, auto_renew: bool, batch: int = 16) -> list[Any]:
    """One ReceiveMessage (long polling up to 20 s): the messages it carried."""
    request = spb.ReceiveMessageRequest(
        group=pb.Resource(name=group),
        message_queue=pb.MessageQueue(topic=pb.Resource(name=topic), id=-1),
        filter_expression=pb.FilterExpression(type=pb.FilterType.TAG, expression="*"),
        batch_size=batch,
        auto_renew=auto_renew,
    )
    if not auto_renew:
        request.invisible_duration.FromSeconds(10)
    request.long_polling_timeout.FromSeconds(20)
    messages = []
    async for answer in stub.ReceiveMessage(request, metadata=METADATA, timeout=25):
        if answer.HasField("message"):
            messages.append(answer.message)
    return messages


async def _until(condition: Callable[[], bool], timeout: float) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not condition():
        assert loop.time() < deadline, "condition not met in time"
        await asyncio.sleep(0.05)
