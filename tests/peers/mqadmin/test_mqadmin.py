"""RocketMQ's own admin tool, mqadmin 5.3.3 unmodified (Maven Central's rocketmq-tools), against a
rocketlite cluster: every sub-command that applies to a broker of our kind runs with real
arguments, and what it prints is checked against the cluster's state (the broker's and the name
server's tables, the store, what clients received), not just its exit.

One embedded cluster and one mqadmin JVM for the module (tests/support/foreign_clients/mqadmin.py
runs many sub-commands in one JVM). Each test uses names of its own. `commands.py` says which test
runs which sub-command, and why the others are left out; test_every_sub_command_is_run_or_left_out
checks that both together are the 89 sub-commands MQAdminStartup registers. The monitoring tests
come first and last: the monitor's first round is 20 s after its start, and the others run
meanwhile.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from rocketlite.client import Message, Producer
from rocketlite.embedded import EmbeddedCluster, embedded
from rocketlite.protocol.bodies.route import TopicConfig, TopicRouteData
from rocketlite.protocol.codes import RequestCode, ResponseCode
from rocketlite.protocol.message import parse_msg_id
from rocketlite.protocol.reserved import OFFSET_MOVED_EVENT
from tests.peers.mqadmin.commands import LEFT_OUT, RUN_BY
from tests.peers.mqadmin.consumer_checks import (
    Listener,
    check_connections,
    check_offsets,
    check_progress,
    committed,
    max_offsets,
    start_consumer,
)
from tests.support.foreign_clients.mqadmin import MqAdmin, Result, mqadmin_shell
from tests.support.foreign_clients.real import client_id_of, consumer_ids
from tests.support.names import unique
from tests.support.topics import create_topic, wait_until
from tests.support.wire import raw_request

pytestmark = pytest.mark.timeout(300)

BROKER = "broker-a"
CLUSTER = "DefaultCluster"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedCluster]:
    with embedded(tmp_path_factory.mktemp("rocketlite") / "store", trace_topic_enable=True) as c:
        yield c


@pytest.fixture(scope="module")
def mq(cluster: EmbeddedCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[MqAdmin]:
    with mqadmin_shell(tmp_path_factory.mktemp("mqadmin"), cluster.namesrv_addr) as shell:
        yield shell


# -- helpers ------------------------------------------------------------------------------------
def _route(cluster: EmbeddedCluster, topic: str) -> TopicRouteData | None:
    resp = raw_request(cluster.namesrv_addr, RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
    return TopicRouteData.from_json(resp.body or b"") if resp.code == ResponseCode.SUCCESS else None


def _topic_list(cluster: EmbeddedCluster) -> set[str]:
    resp = raw_request(cluster.namesrv_addr, RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER, {})
    return set(json.loads(resp.body or b"{}")["topicList"])


def _kv(cluster: EmbeddedCluster, namespace: str, key: str) -> str | None:
    ext = {"namespace": namespace, "key": key}
    resp = raw_request(cluster.namesrv_addr, RequestCode.GET_KV_CONFIG, ext)
    return resp.ext_fields.get("value") if resp.code == ResponseCode.SUCCESS else None


def _produce(cluster: EmbeddedCluster, topic: str, n: int, group: str | None = None) -> list[Any]:
    with Producer(group or unique("pg"), cluster.namesrv_addr) as p:
        return [
            p.send(Message(topic, f"body-{i}".encode(), tags=f"tag{i % 2}", keys=f"key-{i}"))
            for i in range(n)
        ]


def _body_file(result: Result) -> Path:
    """The file a queryMsgBy* command wrote the body to ("Message Body Path:"); the test removes it."""
    match = re.search(r"Message Body Path:\s+(\S+)", result.out)
    assert match, result.describe()
    return Path(match.group(1))


def _read_body(result: Result) -> bytes:
    path = _body_file(result)
    try:
        return path.read_bytes()
    finally:
        path.unlink(missing_ok=True)


def _field(result: Result, name: str) -> str:
    """A "Name:   value" line of a message the tool printed."""
    match = re.search(rf"^{re.escape(name)}:\s+(.*)$", result.out, re.MULTILINE)
    assert match, f"no {name!r} in\n{result.describe()}"
    return match.group(1).strip()


# -- monitoring (first and last: its first round comes 20 s after its start) --------------------
MONITOR_GROUP = "__MONITOR_CONSUMER"  # MixAll.MONITOR_CONSUMER_GROUP
UNDONE = 5


@dataclass
class Monitored:
    topic: str
    group: str
    started: float


@pytest.fixture(scope="module")
def monitored(cluster: EmbeddedCluster, mq: MqAdmin) -> Iterator[Monitored]:
    """A group with 5 messages in flight (its listener holds them), then `startMonitoring`: RocketMQ's
    MonitorService in the shell, a consumer of OFFSET_MOVED_EVENT and, every minute from 20 s after
    its start, a report of each online group's messages not yet consumed, to the tool's log."""
    topic, group = unique("MqaMon"), unique("MqaMonG")
    create_topic(cluster, topic, queues=2)
    listener = Listener()
    consumer = start_consumer(cluster, group, topic, listener)
    try:
        client_id_of(cluster, group)
        # a group's consume stats list the topics it has committed offsets for: one message a queue
        _produce(cluster, topic, 2)
        wait_until(lambda: committed(cluster, group, topic, 2) == [1, 1], 15, "the first commits")
        listener.release.clear()  # what comes now stays in flight, not consumed
        _produce(cluster, topic, UNDONE)
        wait_until(lambda: listener.waiting > 0, 15, "a message in flight")
        assert mq.ok("startMonitoring").out == ""
        yield Monitored(topic, group, time.monotonic())
    finally:
        listener.release.set()
        consumer.shutdown()


def test_monitoring_starts(cluster: EmbeddedCluster, mq: MqAdmin, monitored: Monitored) -> None:
    monitor = mq.ok("consumerConnection", "-g", MONITOR_GROUP)
    assert {r[0]: r[1] for r in monitor.table("#Topic")}[OFFSET_MOVED_EVENT] == "*"
    assert "ConsumeType: CONSUME_PASSIVELY" in monitor.out
    assert len(consumer_ids(cluster, MONITOR_GROUP)) == 1


# -- topics -------------------------------------------------------------------------------------
def test_topic_lifecycle(cluster: EmbeddedCluster, mq: MqAdmin, tmp_path: Path) -> None:
    topic = unique("MqaTopic")
    created = mq.ok("updateTopic", "-c", CLUSTER, "-t", topic, "-r", 3, "-w", 3, "-p", 6)
    assert f"create topic to {cluster.broker_addr} success." in created.out
    assert cluster.broker.topics.select(topic) == TopicConfig(topic, 3, 3, 6)
    wait_until(lambda: _route(cluster, topic) is not None, 15, "the route")

    route = json.loads(mq.ok("topicRoute", "-t", topic).out.replace("{0:", '{"0":'))
    assert [
        (q["brokerName"], q["readQueueNums"], q["writeQueueNums"], q["perm"]) for q in route["queueDatas"]
    ] == [(BROKER, 3, 3, 6)]
    assert route["brokerDatas"][0]["brokerAddrs"] == {"0": cluster.broker_addr}
    listed = mq.ok("topicRoute", "-t", topic, "-l").table("#ClusterName")
    assert listed[0][:2] == [CLUSTER, BROKER] and listed[0][-3:] == ["3", "3", "6"]
    assert topic in mq.ok("topicList").lines()
    assert mq.ok("topicClusterList", "-t", topic).lines() == [CLUSTER]

    perm = mq.ok("updateTopicPerm", "-b", cluster.broker_addr, "-t", topic, "-p", 4)
    assert f"update topic perm from 6 to 4 in {cluster.broker_addr} success." in perm.out
    assert cluster.broker.topics.select(topic) == TopicConfig(topic, 3, 3, 4)
    wait_until(lambda: (r := _route(cluster, topic)) is not None and r.queue_datas[0].perm == 4, 15, "perm 4")

    batch = [unique("MqaList"), unique("MqaList")]
    spec = tmp_path / "topics.json"
    spec.write_text(
        json.dumps([{"topicName": t, "readQueueNums": 2, "writeQueueNums": 2, "perm": 6} for t in batch])
    )
    listed_out = mq.ok("updateTopicList", "-b", cluster.broker_addr, "-f", spec)
    assert f"submit batch of topic config to {cluster.broker_addr} success" in listed_out.out
    for t in batch:
        assert cluster.broker.topics.select(t) == TopicConfig(t, 2, 2, 6)
    wait_until(lambda: set(batch) <= _topic_list(cluster), 15, "the batch in the name server")
    rows = {r[1]: r[0] for r in mq.ok("topicList", "-c").table("#Cluster Name")}
    assert rows[batch[0]] == CLUSTER and rows[batch[1]] == CLUSTER

    gone = mq.ok("deleteTopic", "-c", CLUSTER, "-t", topic)
    assert f"delete topic [{topic}] from cluster [{CLUSTER}] success." in gone.out
    assert cluster.broker.topics.select(topic) is None
    assert topic not in _topic_list(cluster) and _route(cluster, topic) is None
    refused = mq.run(
        "updateTopicList", "-b", cluster.broker_addr, "-f", _write(tmp_path, [{"topicName": "TBW102"}])
    )
    assert refused.error is not None and refused.error.get("responseCode") == 29  # INVALID_PARAMETER
    assert refused.error.get("remark") == "The topic[TBW102] is conflict with system topic."


def _write(tmp_path: Path, content: object) -> Path:
    path = tmp_path / f"{unique('spec')}.json"
    path.write_text(json.dumps(content))
    return path


# -- groups -------------------------------------------------------------------------------------
def test_groups(cluster: EmbeddedCluster, mq: MqAdmin, tmp_path: Path) -> None:
    group = unique("MqaGroup")
    out = mq.ok("updateSubGroup", "-b", cluster.broker_addr, "-g", group, "-r", 5, "-q", 2, "-o", "true")
    assert f"create subscription group to {cluster.broker_addr} success." in out.out
    cfg = cluster.broker.groups.table[group]
    assert (cfg.retry_max_times, cfg.retry_queue_nums, cfg.consume_message_orderly) == (5, 2, True)
    assert not cfg.consume_broadcast_enable  # the tool's default (false), not the broker's
    shown = mq.ok("getConsumerConfig", "-g", group).out
    assert f"DefaultCluster:{BROKER}" in shown
    assert re.search(r"^retryMaxTimes\s+=\s+5$", shown, re.MULTILINE), shown
    assert re.search(r"^consumeMessageOrderly\s+=\s+true$", shown, re.MULTILINE), shown

    batch = [unique("MqaGL"), unique("MqaGL")]
    spec = _write(tmp_path, [{"groupName": g, "retryMaxTimes": 3} for g in batch])
    out = mq.ok("updateSubGroupList", "-b", cluster.broker_addr, "-f", spec)
    assert f"submit batch of group config to {cluster.broker_addr} success" in out.out
    assert [cluster.broker.groups.table[g].retry_max_times for g in batch] == [3, 3]

    # setConsumeMode (401), to the broker by address
    topic = unique("MqaMode")
    create_topic(cluster, topic, queues=2)
    out = mq.ok(
        "setConsumeMode", "-b", cluster.broker_addr, "-t", topic, "-g", group, "-m", "POP", "-q", 1,
        namesrv=False,
    )  # fmt: skip
    assert f"set consume mode to {cluster.broker_addr} success." in out.out
    assert f"topic[{topic}] group[{group}] consume mode[POP] popShareQueueNum[1]" in out.out
    saved = json.loads((cluster.broker.store_config.config_dir / "messageRequestMode.json").read_text())
    assert saved["messageRequestModeMap"][topic][group]["mode"] == "POP"
    assert saved["messageRequestModeMap"][topic][group]["popShareQueueNum"] == 1

    cluster.broker.offsets.commit(group, "SomeTopic", 0, 7)
    out = mq.ok("deleteSubGroup", "-b", cluster.broker_addr, "-g", group, "-r", "true")
    assert f"delete subscription group [{group}] from broker [{cluster.broker_addr}] success." in out.out
    assert group not in cluster.broker.groups.table
    assert cluster.broker.offsets.query(group, "SomeTopic", 0) == -1  # -r: its offsets went too


# -- name server --------------------------------------------------------------------------------
def test_name_server(cluster: EmbeddedCluster, mq: MqAdmin) -> None:
    namespace, key = unique("NS"), unique("k")
    assert (
        "create or update kv config to namespace success."
        in mq.ok("updateKvConfig", "-s", namespace, "-k", key, "-v", "v1").out
    )
    assert _kv(cluster, namespace, key) == "v1"
    assert (
        "delete kv config from namespace success." in mq.ok("deleteKvConfig", "-s", namespace, "-k", key).out
    )
    assert _kv(cluster, namespace, key) is None

    topic = unique("MqaOrder")
    out = mq.ok("updateOrderConf", "-t", topic, "-m", "put", "-v", f"{BROKER}:4").out
    assert out == f"update orderConf success. topic=[{topic}], orderConf=[{BROKER}:4]"
    assert _kv(cluster, "ORDER_TOPIC_CONFIG", topic) == f"{BROKER}:4"
    got = mq.ok("updateOrderConf", "-t", topic, "-m", "get").out
    assert f"orderConf=[{BROKER}:4]" in got
    mq.ok("updateOrderConf", "-t", topic, "-m", "delete")
    assert _kv(cluster, "ORDER_TOPIC_CONFIG", topic) is None

    topic = unique("MqaPerm")
    create_topic(cluster, topic)
    wiped = mq.ok("wipeWritePerm", "-b", BROKER).out
    assert f"wipe write perm of broker[{BROKER}] in name server[{cluster.namesrv_addr}] OK" in wiped
    route = _route(cluster, topic)
    assert route is not None and route.queue_datas[0].perm == 4  # read only
    added = mq.ok("addWritePerm", "-b", BROKER).out
    assert f"add write perm of broker[{BROKER}] in name server[{cluster.namesrv_addr}] OK" in added
    route = _route(cluster, topic)
    assert route is not None and route.queue_datas[0].perm == 6

    config = mq.ok("getNamesrvConfig").out
    assert f"============{cluster.namesrv_addr}============" in config
    assert re.search(r"^listenHost\s+=\s+127\.0\.0\.1$", config, re.MULTILINE), config

    refused = mq.run("updateNamesrvConfig", "-k", "listenPort", "-v", "1")  # left out: refused on purpose
    assert refused.error is not None and refused.error.get("responseCode") == ResponseCode.NO_PERMISSION


# -- messages -----------------------------------------------------------------------------------
def test_messages(cluster: EmbeddedCluster, mq: MqAdmin) -> None:
    topic = unique("MqaMsg")
    create_topic(cluster, topic, queues=2)
    sent = _produce(cluster, topic, 6)
    store = cluster.broker.store
    assert store.wait_dispatched()

    status = mq.ok("topicStatus", "-t", topic).table("#Broker Name")
    assert [(r[0], int(r[1]), int(r[2]), int(r[3])) for r in status] == [
        (BROKER, q, store.get_min_offset_in_queue(topic, q), store.get_max_offset_in_queue(topic, q))
        for q in (0, 1)
    ]
    assert sum(int(r[3]) for r in status) == 6

    # by offsetMsgId: the body the tool wrote out is the body that was sent
    third = sent[2]
    by_id = mq.ok("queryMsgById", "-t", topic, "-i", third.offset_msg_id)
    assert _field(by_id, "OffsetID") == third.offset_msg_id
    assert _field(by_id, "Keys") == "[key-2]" and _field(by_id, "Tags") == "[tag0]"
    assert _read_body(by_id) == b"body-2"
    # by key: one row per message with that key, the unique id, queue and offset
    rows = mq.ok("queryMsgByKey", "-t", topic, "-k", "key-4").table("#Message ID")
    assert rows == [[sent[4].msg_id, str(sent[4].queue.queue_id), str(sent[4].queue_offset)]]
    # by unique key (the producer's msgId)
    by_uniq = mq.ok("queryMsgByUniqueKey", "-t", topic, "-i", sent[5].msg_id)
    assert int(_field(by_uniq, "Queue Offset")) == sent[5].queue_offset
    assert int(_field(by_uniq, "CommitLog Offset")) == parse_msg_id(sent[5].offset_msg_id).offset
    assert _read_body(by_uniq) == b"body-5"
    # by queue offset
    first = sent[0]
    q, off = first.queue.queue_id, first.queue_offset
    by_offset = mq.ok("queryMsgByOffset", "-t", topic, "-b", BROKER, "-i", q, "-o", off)
    assert _field(by_offset, "OffsetID") == first.offset_msg_id
    assert _read_body(by_offset) == b"body-0"

    # printMsg / printMsgByQueue / consumeMessage read every queue with PULL_MESSAGE
    printed = mq.ok("printMsg", "-t", topic).out
    assert sorted(re.findall(r"BODY: (body-\d)", printed)) == [f"body-{i}" for i in range(6)]
    by_queue = mq.ok("printMsgByQueue", "-t", topic, "-a", BROKER, "-i", 1, "-p", "true", "-d", "true").out
    in_queue_1 = sorted(f"body-{i}" for i, r in enumerate(sent) if r.queue.queue_id == 1)
    assert sorted(re.findall(r"BODY: (body-\d)", by_queue)) == in_queue_1
    counted = mq.ok("printMsgByQueue", "-t", topic, "-a", BROKER, "-i", 1, "-f", "true").out  # per tag
    tags = {m.group(1): int(m.group(2)) for m in re.finditer(r"Tag: (\S+)\s+Count: (\d+)", counted)}
    expected_tags = Counter(f"tag{i % 2}" for i, r in enumerate(sent) if r.queue.queue_id == 1)
    assert tags == dict(expected_tags)
    consumed = mq.ok("consumeMessage", "-t", topic, "-b", BROKER, "-i", 0, "-o", 0, "-c", 10).out
    in_queue_0 = sorted(f"body-{i}" for i, r in enumerate(sent) if r.queue.queue_id == 0)
    assert sorted(re.findall(r"BODY: (body-\d)", consumed)) == in_queue_0

    # queryCq: the consume-queue units point at the stored records
    cq = mq.ok("queryCq", "-t", topic, "-q", 0, "-i", 0, "-c", 10, "-b", cluster.broker_addr).out
    units = [int(m) for m in re.findall(r"physicOffset=(\d+)", cq)]
    expected = sorted(parse_msg_id(r.offset_msg_id).offset for r in sent if r.queue.queue_id == 0)
    assert units == expected
    assert f"max: {store.get_max_offset_in_queue(topic, 0)}, min: 0" in cq

    # sending: sendMessage, sendMsgStatus (to the broker's own topic), checkMsgSendRT, clusterRT
    before = [store.get_max_offset_in_queue(topic, q) for q in (0, 1)]
    out = mq.ok("sendMessage", "-t", topic, "-p", "from-mqadmin", "-k", "mqa-key").table("#Broker Name")
    assert out[0][0] == BROKER and out[0][2] == "SEND_OK"
    assert store.wait_dispatched()
    after = [store.get_max_offset_in_queue(topic, q) for q in (0, 1)]
    assert sum(after) == sum(before) + 1
    stored = store.query_message(topic, "mqa-key", 8, 0, 2**62)
    assert len(stored.messages) == 1 and b"from-mqadmin" in bytes(stored.messages[0])

    broker_topic_before = store.get_max_offset_in_queue(BROKER, 0)
    status_out = mq.ok("sendMsgStatus", "-b", BROKER, "-c", 3, "-s", 64).out
    assert status_out.count("sendStatus=SEND_OK") == 3
    assert store.wait_dispatched()
    assert store.get_max_offset_in_queue(BROKER, 0) == broker_topic_before + 1 + 3  # a warm-up send first
    rt = mq.ok("checkMsgSendRT", "-t", topic, "-a", 4, "-s", 32).table("#Broker Name")
    assert rt[-1][:2] == ["Avg", "RT:"]
    assert len(rt) == 5 and all(r[0] == BROKER and r[2] == "true" for r in rt[:4])
    cluster_rt = mq.run("clusterRT", "-a", 3, "-s", 16, "-i", 1, stop_after=2.5)  # runs until stopped
    rounds = cluster_rt.table("#Cluster Name")
    assert rounds and all(r[:2] == [CLUSTER, BROKER] and r[3:] == ["3", "0"] for r in rounds), cluster_rt.out


# -- message trace ------------------------------------------------------------------------------
TRACE_TOPIC = "RMQ_SYS_TRACE_TOPIC"


def _trace_records(*fields: list[str]) -> bytes:
    """Trace records as a client's trace dispatcher writes them (TraceDataEncoder): fields split
    by \\x01, records ended by \\x02."""
    return "".join("\x01".join(f) + "\x02" for f in fields).encode()


def test_message_trace(cluster: EmbeddedCluster, mq: MqAdmin) -> None:
    """queryMsgTraceById reads the trace topic (traceTopicEnable) by the traced message's id, the
    key a client's trace record is stored under; what it prints comes from the records."""
    topic, pgroup, cgroup = unique("MqaTraced"), unique("MqaTracePG"), unique("MqaTraceCG")
    create_topic(cluster, topic, queues=1)
    with Producer(pgroup, cluster.namesrv_addr) as producer:
        sent = producer.send(Message(topic, b"traced", tags="tagT", keys="tk"))
        now = int(time.time() * 1000)
        pub = ["Pub", str(now), "DefaultRegion", pgroup, topic, sent.msg_id, "tagT", "tk",
               cluster.broker_addr, "6", "7", "0", sent.offset_msg_id, "true"]  # fmt: skip
        sub_after = ["SubAfter", unique("req"), sent.msg_id, "12", "false", "tk", "0", str(now + 50), cgroup]
        trace = producer.send(Message(TRACE_TOPIC, _trace_records(pub, sub_after), keys=f"{sent.msg_id} tk"))
    assert trace.queue.topic == TRACE_TOPIC
    assert cluster.broker.store.wait_dispatched()

    out = mq.ok("queryMsgTraceById", "-i", sent.msg_id).out
    pub_rows = [line.split() for line in out.splitlines() if line.startswith("Pub ")]
    sub_rows = [line.split() for line in out.splitlines() if line.startswith("Sub ")]
    assert len(pub_rows) == 1 and len(sub_rows) == 1, out
    assert pub_rows[0][1] == pgroup and pub_rows[0][-2:] == ["7ms", "success"]
    assert sub_rows[0][1] == cgroup and sub_rows[0][-2:] == ["12ms", "failed"]
    missing = mq.run("queryMsgTraceById", "-i", "0" * 32)  # no trace under that id
    assert missing.error is not None and missing.error.get("responseCode") == 208  # QUERY_NOT_FOUND


# -- consumers, producers, offsets -----------------------------------------------------------------
def test_consumers(cluster: EmbeddedCluster, mq: MqAdmin) -> None:
    topic, group, pgroup = unique("MqaCons"), unique("MqaCG"), unique("MqaPG")
    create_topic(cluster, topic, queues=2)
    listener = Listener()
    with Producer(pgroup, cluster.namesrv_addr) as producer:
        for i in range(8):
            producer.send(Message(topic, f"c-{i}".encode()))
        consumer = start_consumer(cluster, group, topic, listener)
        try:
            wait_until(lambda: listener.count() == 8, 30, "8 messages consumed")
            wait_until(
                lambda: committed(cluster, group, topic, 2) == max_offsets(cluster, topic, 2),
                15,
                "commits",
            )
            client_id = client_id_of(cluster, group)
            check_connections(cluster, mq, topic, group, pgroup, client_id)
            check_progress(cluster, mq, topic, group, client_id)
            check_offsets(cluster, mq, topic, group, listener)
        finally:
            consumer.shutdown()


# -- broker -------------------------------------------------------------------------------------
def _runtime_info(cluster: EmbeddedCluster) -> dict[str, str]:
    resp = raw_request(cluster.broker_addr, RequestCode.GET_BROKER_RUNTIME_INFO, {})
    return {str(k): str(v) for k, v in json.loads(resp.body or b"{}")["table"].items()}


def _settings(result: Result) -> dict[str, str]:
    """The "key = value" lines getBrokerConfig / getNamesrvConfig print."""
    pairs = (
        line.split("=", 1) for line in result.out.splitlines() if "=" in line and not line.startswith("=")
    )
    return {k.strip(): v.strip() for k, v in pairs}


def test_broker(cluster: EmbeddedCluster, mq: MqAdmin) -> None:
    topic = unique("MqaBroker")
    create_topic(cluster, topic, queues=1)
    _produce(cluster, topic, 3)
    rows = mq.ok("clusterList").table("#Cluster Name")
    assert [r[:5] for r in rows] == [[CLUSTER, BROKER, "0", cluster.broker_addr, "V4_9_8"]]
    assert rows[0][-1] == "true"  # ACTIVATED: a master runs its schedule and transaction services
    more = mq.ok("clusterList", "-m").table("#Cluster Name")
    info = _runtime_info(cluster)
    today_in = int(info["msgPutTotalTodayNow"]) - int(info["msgPutTotalTodayMorning"])
    today_out = int(info["msgGetTotalTodayNow"]) - int(info["msgGetTotalTodayMorning"])
    assert more == [[CLUSTER, BROKER, "0", "0", str(today_in), str(today_out)]]
    assert today_in >= 3

    status = mq.ok("brokerStatus", "-b", cluster.broker_addr).out
    shown = {
        k.strip(): v.strip() for k, v in (line.split(":", 1) for line in status.splitlines() if ":" in line)
    }
    store = cluster.broker.store
    assert int(shown["commitLogMaxOffset"]) == store.max_phy_offset
    assert int(shown["commitLogMinOffset"]) == store.min_phy_offset
    assert shown["brokerVersionDesc"] == "V4_9_8" and shown["brokerActive"] == "true"
    assert int(shown["msgPutTotalTodayNow"]) == store.stats.put_count

    config = _settings(mq.ok("getBrokerConfig", "-b", cluster.broker_addr))
    assert config["brokerName"] == BROKER and config["brokerClusterName"] == CLUSTER
    assert config["storePathRootDir"] == str(cluster.store_dir)
    assert config["traceTopicEnable"] == "true"
    before = store.config.file_reserved_time
    updated = mq.ok(
        "updateBrokerConfig", "-b", cluster.broker_addr, "-k", "fileReservedTime", "-v", before + 5
    )
    assert f"update broker config success, {cluster.broker_addr}" in updated.out
    assert store.config.file_reserved_time == before + 5
    assert _settings(mq.ok("getBrokerConfig", "-c", CLUSTER))["fileReservedTime"] == str(before + 5)
    refused = mq.run("updateBrokerConfig", "-b", cluster.broker_addr, "-k", "brokerName", "-v", "other")
    assert refused.error is not None and refused.error.get("responseCode") is not None
    assert cluster.broker.broker.broker_name == BROKER

    ha = mq.ok("haStatus", "-b", cluster.broker_addr).out
    assert f"#MasterAddr\t{cluster.broker_addr}" in ha
    assert f"#MasterCommitLogMaxOffset\t{store.max_phy_offset}" in ha
    assert "#SlaveNum\t0" in ha and "#InSyncSlaveNum\t0" in ha
    assert "#MasterAddr" in mq.ok("haStatus", "-c", CLUSTER).out


def test_retention(tmp_path: Path, mq: MqAdmin) -> None:
    """deleteExpiredCommitLog, cleanExpiredCQ and cleanUnusedTopic on a cluster of their own (they
    delete files): small commit-log segments, the old ones aged past fileReservedTime."""
    with embedded(
        tmp_path / "store", store_maped_file_size_commit_log=64 * 1024, store_file_reserved_time=1
    ) as c:
        n = ["-n", c.namesrv_addr]
        create_topic(c, "MqaGone", queues=1)
        create_topic(c, "MqaKept", queues=1)
        create_topic(c, "MqaStays", queues=1)
        _produce(c, "MqaGone", 1)
        with Producer(unique("pg"), c.namesrv_addr) as p:
            for _ in range(200):
                p.send(Message("MqaKept", bytes(1000)))
            p.send(Message("MqaStays", b"last"))
        store = c.broker.store
        assert store.wait_dispatched()
        segments = sorted(p for p in (tmp_path / "store" / "commitlog").iterdir() if p.name.isdigit())
        assert len(segments) > 2
        for path in segments[:-1]:
            os.utime(path, (1_000_000_000, 1_000_000_000))

        assert mq.ok("deleteExpiredCommitLog", "-b", c.broker_addr, *n, namesrv=False).out == "success"
        assert store.min_phy_offset == int(segments[-1].name)
        assert store.queue("MqaGone", 0) is not None  # its queue is still there, all its records gone
        assert mq.ok("cleanExpiredCQ", "-b", c.broker_addr, *n, namesrv=False).out == "success"
        assert store.queue("MqaGone", 0) is None and store.queue("MqaKept", 0) is not None

        c.broker.topics.delete("MqaKept")  # a topic config gone, its queues left behind
        assert mq.ok("cleanUnusedTopic", "-c", CLUSTER, *n, namesrv=False).out == "success"
        wait_until(lambda: store.queue("MqaKept", 0) is None, 15, "the unused topic's queues deleted")
        assert store.queue("MqaStays", 0) is not None  # a topic with a config stays


# -- exports ------------------------------------------------------------------------------------
def test_exports(cluster: EmbeddedCluster, mq: MqAdmin, tmp_path: Path) -> None:
    topic, group = unique("MqaExport"), unique("MqaExportG")
    create_topic(cluster, topic, queues=3)
    mq.ok("updateSubGroup", "-b", cluster.broker_addr, "-g", group, "-r", 4)
    out = mq.ok("exportMetadata", "-c", CLUSTER, "-f", tmp_path).out
    assert out.strip() == f"export {tmp_path}/metadata.json success"
    metadata = json.loads((tmp_path / "metadata.json").read_text())
    assert metadata["topicConfigTable"][topic]["readQueueNums"] == 3
    assert metadata["subscriptionGroupTable"][group]["retryMaxTimes"] == 4
    exported = set(metadata["topicConfigTable"])
    assert not exported & {"TBW102", BROKER, CLUSTER, "SCHEDULE_TOPIC_XXXX", TRACE_TOPIC}  # user topics only
    one = mq.ok("exportMetadata", "-b", cluster.broker_addr, "-t", "-f", tmp_path / "b").out
    assert one == f"export {tmp_path}/b/topic.json success"
    assert topic in json.loads((tmp_path / "b" / "topic.json").read_text())["topicConfigTable"]

    out = mq.ok("exportConfigs", "-c", CLUSTER, "-f", tmp_path).out
    assert out.strip() == f"export {tmp_path}/configs.json success"
    configs = json.loads((tmp_path / "configs.json").read_text())
    assert configs["clusterScale"] == {"namesrvSize": 1, "masterBrokerSize": 1, "slaveBrokerSize": 0}
    assert configs["brokerConfigs"][BROKER]["brokerName"] == BROKER

    out = mq.ok("exportMetrics", "-c", CLUSTER, "-f", tmp_path).out
    assert out.strip() == f"export {tmp_path}/metrics.json success"
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    report = metrics["evaluateReport"][BROKER]
    assert report["runtimeQuota"]["topicSize"] == len(metadata["topicConfigTable"])
    assert report["runtimeQuota"]["groupSize"] == len(metadata["subscriptionGroupTable"])
    ratio = float(report["runtimeQuota"]["diskRatio"]["commitLogDiskRatio"])  # the disk is shared: near
    assert abs(ratio - float(_runtime_info(cluster)["commitLogDiskRatio"])) < 0.01


# -- every sub-command ---------------------------------------------------------------------------
def test_every_sub_command_is_run_or_left_out(mq: MqAdmin) -> None:
    assert len(mq.commands) == 89
    assert set(RUN_BY) | set(LEFT_OUT) == set(mq.commands)
    assert not set(RUN_BY) & set(LEFT_OUT)
    # the tests and their checks, not commands.py (which names every sub-command)
    checks = [p for p in Path(__file__).parent.glob("*.py") if p.name != "commands.py"]
    source = "".join(p.read_text() for p in checks)
    for command, test in RUN_BY.items():
        assert f"def {test}(" in source, (command, test)
        assert f'"{command}"' in source, f"{command} is not run by any test"


def _tool_log(mq: MqAdmin) -> str:
    return "".join(p.read_text(errors="replace") for p in (mq.home / "logs").rglob("*.log"))


def test_monitoring_reports(mq: MqAdmin, monitored: Monitored) -> None:
    """Last: by now the monitor's first round is near (20 s after its start)."""
    line = f"UndoneMsgs [consumerGroup={monitored.group}, topic={monitored.topic}, undoneMsgsTotal="
    remaining = 20 - (time.monotonic() - monitored.started)
    wait_until(lambda: line in _tool_log(mq), remaining + 20, "the monitor's first round")
    reported = re.search(re.escape(line) + r"(\d+)", _tool_log(mq))
    assert reported is not None and int(reported.group(1)) == UNDONE
