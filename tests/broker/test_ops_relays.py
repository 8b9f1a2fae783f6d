"""What an operator asks of running consumers, through the broker: offset resets (222, on the broker
or relayed as 220), running info (307) and direct consumption (309), answered by real clients:
rocketlite's SDK and ali-ons here, the Java client in tests/peers/java/test_java5_ops.py.

ali-ons 3.12.0 registers no handler for requests from a broker (its remoting client emits them as
events nobody listens to), so it never answers 307 / 309 (the broker answers CONSUME_MSG_TIMEOUT
after 10 s, as RocketMQ does for a silent client) and ignores 220; the broker-side reset, RocketMQ
5's default, moves it all the same: its next pull of each queue is answered PULL_OFFSET_MOVED.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rocketlite.client import ClientConfig, ConsumeStatus, Message, MessageExt, Producer, PushConsumer
from rocketlite.embedded import EmbeddedCluster, embedded
from rocketlite.protocol.bodies.admin import ResetOffsetBody
from rocketlite.protocol.bodies.message_queue import MessageQueue
from rocketlite.protocol.bodies.running_info import (
    PROP_CONSUME_TYPE,
    PROP_CONSUMER_START_TIMESTAMP,
    CMResult,
    ConsumeMessageDirectlyResult,
    ConsumerRunningInfo,
)
from rocketlite.protocol.codes import ResponseCode
from tests.support.foreign_clients.real import Clients, require
from tests.support.names import unique
from tests.support.ops_requests import consume_directly, reset_offset, running_info
from tests.support.topics import create_topic, wait_until

pytestmark = pytest.mark.timeout(120)

N = 8


class Seen:
    """A listener that records each message it gets (thread-safe: the SDK's listeners run in a pool)."""

    def __init__(self, *, fail: bool = False) -> None:
        self.fail = fail
        self.messages: list[MessageExt] = []
        self.lock = threading.Lock()

    def __call__(self, msgs: list[MessageExt], ctx: Any) -> ConsumeStatus:
        with self.lock:
            self.messages.extend(msgs)
        if self.fail and any(m.body == b"boom" for m in msgs):
            raise RuntimeError("boom on purpose")
        return ConsumeStatus.CONSUME_SUCCESS

    def count(self) -> int:
        with self.lock:
            return len(self.messages)


def _produce(cluster: EmbeddedCluster, topic: str, n: int = N) -> list[Any]:
    with Producer(unique("pg"), cluster.namesrv_addr) as p:
        return [p.send(Message(topic, f"m{i}".encode(), tags="t")) for i in range(n)]


@pytest.fixture(params=[True, False], ids=["broker-side", "relayed"])
def cluster(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[EmbeddedCluster]:
    """Both ways RocketMQ 5.3 serves a reset: on the broker (useServerSideResetOffset, the
    default) and relayed to the clients (RESET_CONSUMER_CLIENT_OFFSET)."""
    with embedded(tmp_path / "store", use_server_side_reset_offset=request.param) as c:
        yield c


def _sdk_consumer(cluster: EmbeddedCluster, group: str, topic: str, listener: Seen) -> PushConsumer:
    consumer = PushConsumer(group, cluster.namesrv_addr, instance_name=unique("ops"))
    consumer.subscribe(topic, "*")
    consumer.register_message_listener(listener)
    consumer.start()
    return consumer


def _committed(cluster: EmbeddedCluster, group: str, topic: str) -> dict[int, int]:
    return cluster.broker.offsets.query_all(group, topic)


def test_reset_rewinds_a_running_sdk_consumer(cluster: EmbeddedCluster) -> None:
    topic, group = unique("OpsReset"), unique("cg_reset")
    create_topic(cluster, topic)
    _produce(cluster, topic)
    seen = Seen()
    consumer = _sdk_consumer(cluster, group, topic, seen)
    try:
        wait_until(lambda: seen.count() >= N, 30, f"{N} messages")
        wait_until(lambda: sum(_committed(cluster, group, topic).values()) == N, 30, "offsets committed")
        answer = reset_offset(cluster, group, topic, 0)
        assert answer.code == ResponseCode.SUCCESS, answer.remark
        table = ResetOffsetBody.from_json(answer.body or b"").offset_table
        assert table == {MessageQueue(topic, "broker-a", q): 0 for q in range(4)}
        wait_until(lambda: seen.count() >= 2 * N, 30, "every message a second time")
        again = sorted(m.body for m in seen.messages[N:])
        assert again == sorted(f"m{i}".encode() for i in range(N))
        wait_until(
            lambda: sum(_committed(cluster, group, topic).values()) == N, 30, "offsets back at the end"
        )
        # to the end (mqadmin skipAccumulatedMessage): nothing more to consume
        answer = reset_offset(cluster, group, topic, -1)
        table = ResetOffsetBody.from_json(answer.body or b"").offset_table
        assert sum(table.values()) == N
    finally:
        consumer.close()


def test_a_held_pull_meets_the_reset_first(tmp_path: Path) -> None:
    """A consumer that has read everything waits in held pulls (long polling). After a reset, new
    messages wake those pulls; each is answered PULL_OFFSET_MOVED, not the new message, as RocketMQ
    re-runs its whole pull processor on a wake-up: so the consumer gets every old message once
    more and each new one exactly once (answering the new one first got it twice). Broker-side
    resets only (RocketMQ 5's default): relayed ones are the client's to apply."""
    with embedded(tmp_path / "store") as cluster:
        _held_pull_scenario(cluster)


def _held_pull_scenario(cluster: EmbeddedCluster) -> None:
    topic, group = unique("OpsHeld"), unique("cg_held")
    create_topic(cluster, topic)
    _produce(cluster, topic)
    seen = Seen()
    config = ClientConfig(
        cluster.namesrv_addr, instance_name=unique("ops"), persist_consumer_offset_interval=0.2
    )
    consumer = PushConsumer(group, config=config)
    consumer.subscribe(topic, "*")
    consumer.register_message_listener(seen)
    consumer.start()
    try:
        wait_until(lambda: sum(_committed(cluster, group, topic).values()) == N, 30, "offsets committed")
        assert reset_offset(cluster, group, topic, 0).code == ResponseCode.SUCCESS
        with Producer(unique("pg"), cluster.namesrv_addr) as p:
            for i in range(4):  # one a queue: round robin
                p.send(Message(topic, f"new{i}".encode()))
        wait_until(lambda: seen.count() >= 2 * N + 4, 30, "the old messages again and the new ones")
        wait_until(lambda: sum(_committed(cluster, group, topic).values()) == N + 4, 30, "offsets at the end")
        counts = Counter(m.body for m in seen.messages)
        assert counts == {
            **{f"m{i}".encode(): 2 for i in range(N)},
            **{f"new{i}".encode(): 1 for i in range(4)},
        }
    finally:
        consumer.close()


def test_reset_refusals(cluster: EmbeddedCluster) -> None:
    topic, group = unique("OpsRefuse"), unique("cg_refuse")
    missing = reset_offset(cluster, group, unique("NoTopic"), 0)
    assert missing.code == ResponseCode.TOPIC_NOT_EXIST
    create_topic(cluster, topic)
    answer = reset_offset(cluster, group, topic, 0)
    if cluster.broker.broker.use_server_side_reset_offset:
        assert answer.code == ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST
        assert answer.remark == f"Group {group} does not exist"
    else:  # the group has no offsets: RocketMQ's remark, its typo included
        assert answer.code == ResponseCode.SYSTEM_ERROR
        assert answer.remark == f"THe consumer group <{group}> not exist"
        for q in range(4):
            cluster.broker.offsets.commit(group, topic, q, 0)
        offline = reset_offset(cluster, group, topic, 0)
        assert offline.code == ResponseCode.CONSUMER_NOT_ONLINE
        assert offline.remark is not None and f"Group: {group} Topic: {topic}" in offline.remark


def test_running_info_and_direct_consumption_sdk(tmp_path: Path) -> None:
    with embedded(tmp_path / "store") as cluster:
        topic, group = unique("OpsInfo"), unique("cg_info")
        create_topic(cluster, topic)
        sent = _produce(cluster, topic, 3)
        with Producer(unique("pg"), cluster.namesrv_addr) as p:
            boom = p.send(Message(topic, b"boom"))
        seen = Seen(fail=True)
        consumer = _sdk_consumer(cluster, group, topic, seen)
        try:
            wait_until(lambda: seen.count() >= 4, 30, "4 messages")
            (client_id,) = _client_ids(cluster, group)
            answer = running_info(cluster, group, client_id)
            assert answer.code == ResponseCode.SUCCESS, answer.remark
            info = ConsumerRunningInfo.from_json(answer.body or b"")
            assert info.properties[PROP_CONSUME_TYPE] == "CONSUME_PASSIVELY"
            assert int(info.properties[PROP_CONSUMER_START_TIMESTAMP]) > 0
            assert info.properties["consumerGroup"] == group
            assert {s.topic for s in info.subscription_set} == {topic, f"%RETRY%{group}"}
            held = {mq for mq in info.mq_table if mq.topic == topic}
            assert held == {MessageQueue(topic, "broker-a", q) for q in range(4)}
            assert info.status_table[topic].consume_ok_tps > 0
            assert info.jstack is None
            stacks = running_info(cluster, group, client_id, jstack=True)
            with_stacks = ConsumerRunningInfo.from_json(stacks.body or b"")
            assert with_stacks.jstack is not None and "Thread: MainThread" in with_stacks.jstack

            before = seen.count()
            direct = consume_directly(cluster, group, client_id, sent[1].offset_msg_id, topic)
            assert direct.code == ResponseCode.SUCCESS, direct.remark
            result = ConsumeMessageDirectlyResult.from_json(direct.body or b"")
            assert result.consume_result is CMResult.CR_SUCCESS and not result.order
            assert seen.count() == before + 1 and seen.messages[-1].body == b"m1"
            assert seen.messages[-1].msg_id == sent[1].msg_id
            failed = consume_directly(cluster, group, client_id, boom.offset_msg_id, topic)
            result = ConsumeMessageDirectlyResult.from_json(failed.body or b"")
            assert result.consume_result is CMResult.CR_THROW_EXCEPTION
            assert result.remark == "RuntimeError: boom on purpose"

            nobody = running_info(cluster, group, "10.0.0.1@nobody")
            assert nobody.code == ResponseCode.SYSTEM_ERROR
            assert nobody.remark == f"The Consumer <{group}> <10.0.0.1@nobody> not online"
            other = running_info(cluster, unique("cg_other"), client_id)
            assert other.code == ResponseCode.SYSTEM_ERROR and "not online" in (other.remark or "")
        finally:
            consumer.close()


def test_ali_ons_moves_on_broker_side_reset(tmp_path: Path, clients: Clients) -> None:
    require("ons")
    with embedded(tmp_path / "store") as cluster:
        topic, group = unique("OpsOns"), unique("cg_ons")
        create_topic(cluster, topic)
        cp = clients.consumer("ons", cluster, group, topic)
        _produce(cluster, topic)
        cp.collect(lambda got: len(got) >= N, 60, f"{N} messages")
        wait_until(lambda: sum(_committed(cluster, group, topic).values()) == N, 30, "offsets committed")
        answer = reset_offset(cluster, group, topic, 0)
        assert answer.code == ResponseCode.SUCCESS, answer.remark
        got = cp.collect(lambda got: len(got) >= 2 * N, 60, "every message a second time")
        assert sorted(e["body"] for e in got[N:]) == sorted(f"m{i}" for i in range(N))


def test_ali_ons_answers_no_relayed_request(tmp_path: Path, clients: Clients) -> None:
    """ali-ons 3.12.0 has no handler for 307 (nor 309, 220): the broker's answer is RocketMQ's for a
    client that does not reply, CONSUME_MSG_TIMEOUT naming it, after 10 s."""
    require("ons")
    with embedded(tmp_path / "store") as cluster:
        topic, group = unique("OpsOnsInfo"), unique("cg_onsinfo")
        create_topic(cluster, topic)
        cp = clients.consumer("ons", cluster, group, topic)
        assert cp.ready is not None
        client_id = str(cp.ready["clientId"])
        assert _client_ids(cluster, group) == [client_id]
        answer = running_info(cluster, group, client_id)
        assert answer.code == ResponseCode.CONSUME_MSG_TIMEOUT
        assert (answer.remark or "").startswith(f"consumer <{group}> <{client_id}> Timeout")


def _client_ids(cluster: EmbeddedCluster, group: str) -> list[str]:
    """The clientIds the broker knows the group's consumers by (what consumerConnection lists)."""
    assert cluster.broker.parts is not None
    info = cluster.broker.parts.clients.consumer_group(group)
    return list(info.channels) if info is not None else []
