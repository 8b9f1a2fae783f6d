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

from rocketlite.broker.grpc.clients import Renewal, Renewals
from rocketlite.broker.grpc.endpoint import GrpcEndpoint
from rocketlite.clock import ManualClock
from rocketlite.protocol.codes import ResponseCode
from rocketlite.protocol.proto import available
from rocketlite.protocol.wire.pop import NORMAL_TOPIC, ReceiptHandle
from tests.support.aio import run
from tests.support.broker_harness import BrokerUnderTest, broker_under_test
from tests.support.foreign_clients.grpc5 import (
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


def test_a_batch_of_due_deliveries_is_renewed_together_in_one_group_commit(tmp_path: Path) -> None:
    require_endpoint()

    async def scenario() -> None:
        async with broker_under_test(tmp_path) as broker:
            renewals = _endpoint(broker).consumer.renewals
            pop = broker.controller.parts.pop if broker.controller.parts else None
            assert pop is not None
            pop_log = pop.service.table.log
            for i in range(BATCH):
                assert (await broker.send("ManyT", b"m", props={"UNIQ_KEY": f"ID-{i}"})).code == 0
            channel, stub = raw_stub(broker)
            async with channel:
                telemetry = await _push_consumer(stub, "raw-client", "ManyG", "ManyT")
                got = await _receive(stub, "ManyG", "ManyT", auto_renew=True, batch=BATCH)
                tracked = len(renewals)
                before = pop_log.flushes
                await _until(lambda: renewals.renewed >= BATCH, 15)  # one round: all due at once
                flushes = pop_log.flushes - before
                telemetry.cancel()
        assert (len(got), tracked) == (BATCH, BATCH)
        assert flushes <= 2  # one fdatasync for the round (one each before: BATCH)

    run(scenario())


def test_a_telemetry_reconnect_keeps_renewing_and_the_last_stream_end_forgets_the_client(
    tmp_path: Path,
) -> None:
    require_endpoint()

    async def scenario() -> None:
        async with broker_under_test(tmp_path) as broker:
            endpoint = _endpoint(broker)
            renewals, settings = endpoint.consumer.renewals, endpoint.telemetry.settings
            assert (await broker.send("ReT", b"re", props={"UNIQ_KEY": "ID-RE"})).code == 0
            channel, stub = raw_stub(broker)
            async with channel:
                old = await _push_consumer(stub, "raw-client", "ReG", "ReT")
                (message,) = await _receive(stub, "ReG", "ReT", auto_renew=True, batch=1)
                new = await _push_consumer(stub, "raw-client", "ReG", "ReT")  # the client reconnects
                after_reconnect = len(renewals)
                old.cancel()
                await _until(lambda: renewals.renewed >= 1, 10)  # still renewed on the new stream
                kept = (len(renewals), "raw-client" in settings)
                new.cancel()  # its last stream ends: it left
                await _until(lambda: not settings and not len(renewals), 10)
        assert message.system_properties.message_id == "ID-RE"
        assert after_reconnect == 1
        assert kept == (1, True)

    run(scenario())


BATCH = 32


def test_a_renewal_that_raises_does_not_stop_the_rest_of_its_batch() -> None:
    clock = ManualClock()
    count, bad = 20, 7

    def handle(offset: int, pop_time: int, invisible: int) -> str:
        return ReceiptHandle(offset, pop_time, invisible, 0, NORMAL_TOPIC, "broker-a", 0, offset).build()

    async def scenario() -> None:
        started = 0
        all_in = asyncio.Event()

        async def renew(entry: Renewal, invisible_ms: int) -> str:
            nonlocal started
            started += 1
            if started == count:
                all_in.set()
            await all_in.wait()  # every renewal of the round runs at once (they share a commit)
            parsed = ReceiptHandle.parse(entry.current)
            if parsed.ck_queue_offset == bad:
                raise RuntimeError("a fault in the renewal path")
            return handle(parsed.ck_queue_offset, clock.now_ms(), invisible_ms)

        renewals = Renewals(lambda _client: True, renew, clock)
        try:
            now, lead = clock.now_ms(), renewals.ahead_ms()
            for offset in range(count):  # all due now
                renewals.track(
                    "c",
                    "G",
                    "T",
                    handle(offset, now - renewals.invisible_ms + lead, renewals.invisible_ms),
                    "p",
                )
            await asyncio.wait_for(all_in.wait(), 5)
            (task,) = [t for t in asyncio.all_tasks() if t.get_name() == "grpc-renew"]
            await task  # the fault did not escape the round
            assert renewals.renewed == count - 1
            assert len(renewals) == count  # the failed one is still tracked, tried again later
        finally:
            renewals.close()

    run(scenario(), timeout=10)
