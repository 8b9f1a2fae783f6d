"""5.x clients in the broker's client tables: the unmodified Python push consumer and producer are
listed by GET_CONSUMER_CONNECTION_LIST / GET_PRODUCER_CONNECTION_LIST (what `rocketlite admin
consumerConnection` and `producerConnection` ask) with their language, version, address and
subscription, counted by brokerStatus's clientConnections, and gone once they shut down. A client's
Telemetry stream ending or its heartbeats stopping (channelExpiredTimeout) unregisters it too, and a
4.x rebalance of a mixed group is not handed 5.x clients."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from rocketlite.broker.grpc.clients import client_language, client_version
from rocketlite.cli import main
from rocketlite.embedded import EmbeddedCluster, embedded
from rocketlite.protocol.bodies.heartbeat import ConsumerData, HeartbeatData, SubscriptionData
from rocketlite.protocol.bodies.lists import KVTable
from rocketlite.protocol.codes import RequestCode, ResponseCode
from rocketlite.protocol.proto import available
from rocketlite.protocol.wire.command import RemotingCommand, make_request
from rocketlite.remoting.client import RemotingClient
from tests.support.aio import run
from tests.support.broker_harness import BrokerUnderTest, broker_under_test
from tests.support.foreign_clients.grpc5 import (
    PYTHON5,
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

# A producer of the topic and a push consumer of the group; shuts both down when stdin closes.
PYTHON_CLIENTS = """
import json, sys
from rocketmq import (ClientConfiguration, ConsumeResult, Credentials, FilterExpression,
                      MessageListener, Producer, PushConsumer)

endpoint, topic, group = sys.argv[1:4]

class Ok(MessageListener):
    def consume(self, message):
        return ConsumeResult.SUCCESS

config = ClientConfiguration(endpoint, Credentials(), request_timeout=3)
producer = Producer(config, (topic,))
producer.startup()
consumer = PushConsumer(config, group, Ok(), {topic: FilterExpression("TagA||TagB")})
consumer.startup()
print(json.dumps({"started": True}), flush=True)
sys.stdin.read()
consumer.shutdown()
producer.shutdown()
print(json.dumps({"stopped": True}), flush=True)
"""


def test_python_push_consumer_and_producer_are_listed_then_gone(tmp_path: Path) -> None:
    require_python5()

    async def scenario() -> None:
        async with broker_under_test(tmp_path / "store") as broker:
            assert (await broker.send("RegT", b"x")).code == ResponseCode.SUCCESS  # creates the topic
            client = await start_python5(
                PYTHON_CLIENTS, endpoint_address(broker), "RegT", "RegG", home=tmp_path / "home"
            )
            try:
                await client.wait_for('{"started"', 30)
                consumer = await _eventually(broker, lambda: _consumer_connection(broker, "RegG"))
                producer = await _eventually(broker, lambda: _producer_connection(broker, "RegT"))
                runtime = KVTable.from_json(
                    (await broker.call(RequestCode.GET_BROKER_RUNTIME_INFO)).body or b""
                )
                listed = await broker.call(RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "RegG"})
            finally:
                ended = await client.finish(30)
            assert '{"stopped": true}' in ended.out, ended.explain()
            # Both shut down (NotifyClientTermination): neither is listed any more.
            gone = await broker.call(RequestCode.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": "RegG"})
            no_producer = await broker.call(
                RequestCode.GET_PRODUCER_CONNECTION_LIST, {"producerGroup": "RegT"}
            )

        (conn,) = consumer["connectionSet"]
        assert (conn["language"], conn["version"]) == ("PYTHON", 437)  # MQVersion V5_1_2
        assert conn["clientAddr"].startswith("127.0.0.1:") and "@" in conn["clientId"]
        assert consumer["consumeType"] == "CONSUME_PASSIVELY"
        assert (consumer["messageModel"], consumer["consumeFromWhere"]) == (
            "CLUSTERING",
            "CONSUME_FROM_LAST_OFFSET",
        )
        sub = consumer["subscriptionTable"]["RegT"]
        assert (sub["subString"], sub["expressionType"], sub["tagsSet"]) == (
            "TagA||TagB",
            "TAG",
            ["TagA", "TagB"],
        )
        (pconn,) = producer["connectionSet"]
        assert (pconn["language"], pconn["version"]) == ("PYTHON", 437)
        assert pconn["clientId"] != conn["clientId"]  # two clients, two ids
        assert int(runtime.table["clientConnections"]) == 2
        # A 4.x rebalance of RegG is not handed the 5.x consumer: it pops across every queue.
        assert listed.code == ResponseCode.SYSTEM_ERROR
        assert gone.code == ResponseCode.CONSUMER_NOT_ONLINE
        assert no_producer.code == ResponseCode.SYSTEM_ERROR and "not exist" in (no_producer.remark or "")

    run(scenario())


def test_admin_verbs_show_a_5x_push_consumer_and_producer(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`rocketlite admin consumerConnection`, `producerConnection` and `consumerProgress` over the
    wire, against an embedded name server and broker, while the Python clients run."""
    require_python5()
    with embedded(tmp_path / "store") as cluster:
        endpoint = cluster.broker.parts.grpc if cluster.broker.parts else None
        assert endpoint is not None and endpoint.port > 0
        env = {**os.environ, "HOME": str(tmp_path / "home")}
        args = [str(PYTHON5), "-u", "-c", PYTHON_CLIENTS, f"127.0.0.1:{endpoint.port}", "AdmT", "AdmG"]
        _admin(cluster, capsys, "updateTopic", "-c", "DefaultCluster", "-t", "AdmT")
        with subprocess.Popen(
            args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, text=True
        ) as proc:
            try:
                assert proc.stdout is not None and proc.stdout.readline().startswith('{"started"')
                consumer = _admin(cluster, capsys, "consumerConnection", "-g", "AdmG")
                producer = _admin(cluster, capsys, "producerConnection", "-g", "AdmT", "-t", "AdmT")
                progress = _admin(cluster, capsys, "consumerProgress")
            finally:
                proc.communicate("", timeout=30)
    (conn,) = consumer["connections"]
    assert (conn["language"], conn["version"]) == ("PYTHON", 437)
    assert consumer["subscriptions"] == [{"topic": "AdmT", "subExpression": "TagA||TagB"}]
    assert consumer["consumeType"] == "CONSUME_PASSIVELY"
    assert [c["language"] for c in producer["connections"]] == ["PYTHON"]
    (row,) = [g for g in progress["groups"] if g["group"] == "AdmG"]
    assert (row["count"], row["version"], row["consumeType"]) == (1, "437", "CONSUME_PASSIVELY")


def test_stream_end_and_heartbeat_expiry_unregister_and_mixed_group_rebalances_4x_only(
    tmp_path: Path,
) -> None:
    require_endpoint()

    async def scenario() -> None:
        async with broker_under_test(tmp_path) as broker:
            clients = broker.controller.parts.clients if broker.controller.parts else None
            assert clients is not None
            heartbeat = HeartbeatData(
                "10.0.0.9@4x",
                consumer_data_set=(
                    ConsumerData("MixG", subscription_data_set=(SubscriptionData("MixT", "*"),)),
                ),
            )
            four = RemotingClient()  # its own connection: the expiry scan closes it
            beat4 = await four.invoke(
                broker.addr, make_request(RequestCode.HEART_BEAT, {}, heartbeat.to_bytes()), 5
            )
            assert beat4.code == ResponseCode.SUCCESS
            channel, stub = raw_stub(broker)
            async with channel:
                first = await _open_consumer(stub, "five-1", "MixG", "MixT", "TagC")
                second = await _open_consumer(stub, "five-2", "MixG", "MixT", "*")
                both = await _consumer_connection(broker, "MixG")
                ids = await broker.call(RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "MixG"})
                # The first client's stream ends: it is gone at once.
                first.cancel()
                await _eventually(broker, lambda: _without(broker, "MixG", "five-1"))
                # The second stops its heartbeats: the scan expires it after channelExpiredTimeout.
                limit = broker.controller.broker.channel_expired_timeout
                later = broker.controller.clock.now_ms() + limit + 1
                expired = clients.scan_not_active_channels(later)
                after = await _consumer_connection(broker, "MixG")
                # A heartbeat of the expired client registers nothing (it must send settings again).
                beat = await stub.Heartbeat(
                    spb.HeartbeatRequest(
                        group=pb.Resource(name="MixG"), client_type=pb.ClientType.SIMPLE_CONSUMER
                    ),
                    metadata=_metadata("five-2"),
                    timeout=5,
                )
                again = await _consumer_connection(broker, "MixG")
                second.cancel()
                await four.close()

        assert both is not None
        assert sorted(c["clientId"] for c in both["connectionSet"]) == ["10.0.0.9@4x", "five-1", "five-2"]
        languages = {c["clientId"]: (c["language"], c["version"]) for c in both["connectionSet"]}
        assert languages["five-1"] == ("HTTP", 413) and languages["five-2"] == ("HTTP", 413)
        assert json.loads(ids.body or b"")["consumerIdList"] == ["10.0.0.9@4x"]
        assert expired == 2  # the 4.x client was silent as long (its entry expires with it)
        assert after is None and again is None
        assert beat.status.code == pb.Code.OK

    run(scenario())


def test_language_and_version_from_the_metadata() -> None:
    assert [client_language(t) for t in ("PYTHON", "http", "NODE_JS", "Brainfuck", "")] == [
        "PYTHON", "HTTP", "NODE_JS", "OTHER", "OTHER"
    ]  # fmt: skip
    assert [client_version(t) for t in ("5.0.0", "5.1.2", "5.0.7", "5.12.0", "4.9.4", "")] == [
        413, 437, 427, 413, 413, 413
    ]  # fmt: skip


# ------------------------------------------------------------------------------------------ helpers


def _admin(cluster: EmbeddedCluster, capsys: pytest.CaptureFixture[str], *args: str) -> Any:
    capsys.readouterr()
    rc = main(["--log-level", "ERROR", "admin", *args, "-n", cluster.namesrv_addr, "--json"])
    out, err = capsys.readouterr()
    assert rc == 0, f"admin {args}: exit {rc}, {out!r} {err!r}"
    return json.loads(out)


def _metadata(client: str) -> tuple[tuple[str, str], ...]:
    return (("x-mq-client-id", client), ("x-mq-language", "HTTP"), ("x-mq-client-version", "5.0.0"))


async def _open_consumer(stub: Any, client: str, group: str, topic: str, tags: str) -> Any:
    """A Telemetry stream with a simple consumer's settings, open until cancelled."""
    call = stub.Telemetry(metadata=_metadata(client))
    settings = pb.Settings(
        client_type=pb.ClientType.SIMPLE_CONSUMER,
        subscription=pb.Subscription(
            group=pb.Resource(name=group),
            subscriptions=[
                pb.SubscriptionEntry(
                    topic=pb.Resource(name=topic),
                    expression=pb.FilterExpression(type=pb.FilterType.TAG, expression=tags),
                )
            ],
        ),
    )
    await call.write(spb.TelemetryCommand(settings=settings))
    reply = await asyncio.wait_for(call.read(), 10)
    assert reply.status.code == pb.Code.OK, reply.status
    return call


async def _consumer_connection(broker: BrokerUnderTest, group: str) -> dict[str, Any] | None:
    answer = await broker.call(RequestCode.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": group})
    return _body(answer, ResponseCode.CONSUMER_NOT_ONLINE)


async def _producer_connection(broker: BrokerUnderTest, group: str) -> dict[str, Any] | None:
    answer = await broker.call(RequestCode.GET_PRODUCER_CONNECTION_LIST, {"producerGroup": group})
    return _body(answer, ResponseCode.SYSTEM_ERROR)


async def _without(broker: BrokerUnderTest, group: str, client: str) -> dict[str, Any] | None:
    found = await _consumer_connection(broker, group)
    if found is None or client in [c["clientId"] for c in found["connectionSet"]]:
        return None
    return found


def _body(answer: RemotingCommand, absent: int) -> dict[str, Any] | None:
    if answer.code == absent:
        return None
    assert answer.code == ResponseCode.SUCCESS, answer.remark
    body = json.loads(answer.body or b"")
    assert isinstance(body, dict)
    return body


async def _eventually(
    broker: BrokerUnderTest, probe: Callable[[], Awaitable[dict[str, Any] | None]], timeout: float = 15
) -> dict[str, Any]:
    """The probe's first answer that is not None (registration follows the client's own calls)."""
    del broker
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        found = await probe()
        if found is not None:
            return found
        assert loop.time() < deadline, "not registered in time"
        await asyncio.sleep(0.1)
