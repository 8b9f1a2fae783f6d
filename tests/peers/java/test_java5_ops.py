"""An operator's requests the broker relays to a running Java consumer (rocketmq-client 5.3.3, the
"ops" scenario of Scenarios5.java): offset resets (222, on the broker or relayed as
RESET_CONSUMER_CLIENT_OFFSET 220), running info (307) and direct consumption (309), each answered
by the Java client library itself (`ClientRemotingProcessor`)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rocketlite.client import Message, Producer
from rocketlite.embedded import EmbeddedCluster, embedded
from rocketlite.protocol.bodies.admin import ResetOffsetBody
from rocketlite.protocol.bodies.running_info import (
    PROP_CONSUME_TYPE,
    CMResult,
    ConsumeMessageDirectlyResult,
    ConsumerRunningInfo,
)
from rocketlite.protocol.codes import ResponseCode
from tests.support.foreign_clients.java import JavaClients, answer
from tests.support.foreign_clients.real import ClientProc
from tests.support.names import unique
from tests.support.ops_requests import consume_directly, reset_offset, running_info
from tests.support.topics import create_topic, wait_until

pytestmark = pytest.mark.timeout(150)

LINE = "client5"
N = 8


@pytest.fixture(params=[True, False], ids=["broker-side", "relayed"])
def cluster(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[EmbeddedCluster]:
    with embedded(tmp_path / "store", use_server_side_reset_offset=request.param) as c:
        yield c


def _start(java: JavaClients, cluster: EmbeddedCluster, topic: str, group: str) -> tuple[ClientProc, str]:
    cp = java.start(LINE, "ops", cluster.namesrv_addr, topic=topic, group=group, instance=unique("ops"))
    return cp, str(cp.wait_event("ready", 60)["clientId"])


def _produce(cluster: EmbeddedCluster, topic: str) -> list[Any]:
    with Producer(unique("pg"), cluster.namesrv_addr) as p:
        return [p.send(Message(topic, f"m{i}".encode(), tags="t")) for i in range(N)]


def _bodies(events: list[dict[str, Any]]) -> list[str]:
    return sorted(str(e["message"]["body"]) for e in events)


def test_reset_rewinds_a_running_java_consumer(cluster: EmbeddedCluster, java: JavaClients) -> None:
    """Either way a reset takes (the Java client waits 10 s before it applies a relayed one)."""
    topic, group = unique("J5OpsReset"), unique("cg_j5reset")
    create_topic(cluster, topic)
    cp, _ = _start(java, cluster, topic, group)
    _produce(cluster, topic)
    cp.collect(lambda got: len(got) >= N, 60, f"{N} messages")
    offsets = cluster.broker.offsets
    wait_until(lambda: sum(offsets.query_all(group, topic).values()) == N, 30, "the client's offsets")
    reply = reset_offset(cluster, group, topic, 0)
    assert reply.code == ResponseCode.SUCCESS, reply.remark
    assert set(ResetOffsetBody.from_json(reply.body or b"").offset_table.values()) == {0}
    got = cp.collect(lambda got: len(got) >= 2 * N, 60, "every message a second time")
    assert _bodies(got[N:]) == [f"m{i}" for i in range(N)]
    answer(cp, "stop")


def test_running_info_and_direct_consumption_java(tmp_path: Path, java: JavaClients) -> None:
    with embedded(tmp_path / "store") as cluster:
        topic, group = unique("J5OpsInfo"), unique("cg_j5info")
        create_topic(cluster, topic)
        cp, client_id = _start(java, cluster, topic, group)
        sent = _produce(cluster, topic)
        cp.collect(lambda got: len(got) >= N, 60, f"{N} messages")

        reply = running_info(cluster, group, client_id, jstack=True)
        assert reply.code == ResponseCode.SUCCESS, reply.remark
        info = ConsumerRunningInfo.from_json(reply.body or b"")  # Java's own JSON, read by our bodies
        assert info.properties[PROP_CONSUME_TYPE] == "CONSUME_PASSIVELY"
        assert info.properties["consumerGroup"] == group
        assert {s.topic for s in info.subscription_set} == {topic, f"%RETRY%{group}"}
        assert {mq.queue_id for mq in info.mq_table if mq.topic == topic} == {0, 1, 2, 3}
        assert info.jstack is not None and "ConsumeMessageThread" in info.jstack

        before = len(cp.received())
        reply = consume_directly(cluster, group, client_id, sent[5].offset_msg_id, topic)
        assert reply.code == ResponseCode.SUCCESS, reply.remark
        result = ConsumeMessageDirectlyResult.from_json(reply.body or b"")
        assert result.consume_result is CMResult.CR_SUCCESS and result.auto_commit and not result.order
        again = cp.collect(lambda got: len(got) > before, 30, "the directly consumed message")[before:]
        assert again[0]["message"]["body"] == "m5" and again[0]["message"]["msgId"] == sent[5].msg_id
        answer(cp, "stop")
