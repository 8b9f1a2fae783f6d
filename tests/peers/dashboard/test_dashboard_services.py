"""The admin requests of rocketmq-dashboard's pages, against rocketlite, with real traffic.

The dashboard itself cannot run here: Maven Central holds no rocketmq-dashboard jar (every version
answers 404; ASF ships it as source only) and building it downloads its own Node. So, as issue 23
allows, this suite sends the same requests through RocketMQ 5.3.3's own admin API: the driver
(tests/peers/dashboard/src, one JVM) calls, for each page, the `MQAdminExt` methods that page's
service class calls, in the same order with the same arguments (and, for the pages that use
them, the dashboard's own producer and pull consumer). docs/operations/dashboard.md lists them.

One embedded cluster (message trace on; a listen port whose VIP channel, listenPort - 2, is free:
the dashboard uses the VIP channel by default) and real traffic from rocketlite's SDK: a producer
that stays connected, and a consumer group that has consumed everything
(tests/support/dashboard_traffic.py). Every result is checked against the cluster's state: the
broker's topic, group and offset tables, the store, the client table, what the consumer received.
The tests run in file order (the traffic counts of `test_dashboard_page` hold before the later
pages resend and reset).
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from rocketlite.client import Message, Producer
from rocketlite.embedded import EmbeddedCluster, embedded
from rocketlite.protocol.bodies.lists import KVTable, TopicList
from rocketlite.protocol.bodies.route import TopicConfig
from rocketlite.protocol.codes import RequestCode, ResponseCode
from tests.support.dashboard_traffic import (
    QUEUES,
    Listener,
    N,
    Traffic,
    all_consumed,
    committed_offsets,
    max_offsets,
    raw_body,
    start_consumer,
    traffic_on,
    until_found,
)
from tests.support.foreign_clients.dashboard import Dashboard, DriverError, dashboard_driver
from tests.support.foreign_clients.real import client_id_of
from tests.support.names import unique
from tests.support.ports import broker_port
from tests.support.topics import create_topic, is_routed, wait_until

pytestmark = pytest.mark.timeout(180)

CLUSTER = "DefaultCluster"
BROKER = "broker-a"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedCluster]:
    store = tmp_path_factory.mktemp("rocketlite") / "store"
    with embedded(store, trace_topic_enable=True, listen_port=broker_port()) as c:
        yield c


@pytest.fixture(scope="module")
def dash(cluster: EmbeddedCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dashboard]:
    with dashboard_driver(tmp_path_factory.mktemp("dashboard"), cluster.namesrv_addr) as driver:
        yield driver


@pytest.fixture(scope="module")
def traffic(cluster: EmbeddedCluster) -> Iterator[Traffic]:
    with traffic_on(cluster) as t:
        yield t


# -- OPS and Cluster pages ------------------------------------------------------------------------
def test_cluster_page(cluster: EmbeddedCluster, dash: Dashboard, traffic: Traffic) -> None:
    listed = dash.call("cluster.list")
    assert listed["clusters"] == {CLUSTER: [BROKER]}
    broker = listed["brokers"][BROKER]
    assert (broker["cluster"], broker["addrs"]) == (CLUSTER, {"0": cluster.broker_addr})
    runtime = broker["runtime"]["0"]
    ours = KVTable.from_json(raw_body(cluster.broker_addr, RequestCode.GET_BROKER_RUNTIME_INFO)).table
    assert set(runtime) == set(ours)  # every key the page shows, as the broker serves it
    for steady in ("brokerVersionDesc", "bootTimestamp", "msgPutTotalYesterdayMorning", "commitLogMaxOffset"):
        assert runtime[steady] == ours[steady], steady
    assert int(runtime["msgPutTotalTodayNow"]) >= N

    config = dash.call("cluster.brokerConfig", brokerAddr=cluster.broker_addr)
    assert config["brokerName"] == BROKER and config["brokerClusterName"] == CLUSTER
    assert config["listenPort"] == cluster.broker_addr.rsplit(":", 1)[1]
    assert config["traceTopicEnable"] == "true"


# -- Dashboard page (its collect tasks) -----------------------------------------------------------
def test_dashboard_page(cluster: EmbeddedCluster, dash: Dashboard, traffic: Traffic) -> None:
    brokers = dash.call("dashboard.collectBroker")
    assert list(brokers) == [f"{BROKER}:0"]
    tps = [float(t) for t in brokers[f"{BROKER}:0"]["getTotalTps"].split()]
    assert len(tps) == 3 and float(brokers[f"{BROKER}:0"]["averageTps"]) == pytest.approx(
        sum(tps) / 3, abs=1e-4
    )

    stored = sum(max_offsets(cluster, traffic.topic))
    collected = dash.call("dashboard.collectTopic", topic=traffic.topic)
    assert collected["errors"] == [] and collected["listed"] and collected["groups"] == [traffic.group]
    assert collected["inMsgCntToday"] == stored == N  # VIEW_BROKER_STATS_DATA TOPIC_PUT_NUMS
    assert collected["outMsgCntToday"] == N  # ... GROUP_GET_NUMS topic@group: each pulled once
    assert collected["inTps"] > 0 and collected["outTps"] > 0


# -- Topic page -------------------------------------------------------------------------------------
def test_topic_page_browse(cluster: EmbeddedCluster, dash: Dashboard, traffic: Traffic) -> None:
    topics = dash.call("topic.list")
    names = set(
        TopicList.from_json(
            raw_body(cluster.namesrv_addr, RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
        ).topic_list
    )
    assert set(topics["topics"]) == names and {traffic.topic, f"%RETRY%{traffic.group}"} <= names
    # the client merges the name server's list (cluster and broker names) with the broker's
    system = {
        *TopicList.from_json(
            raw_body(cluster.namesrv_addr, RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_NS)
        ).topic_list,
        *TopicList.from_json(
            raw_body(cluster.broker_addr, RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_BROKER)
        ).topic_list,
    }
    assert (
        set(topics["systemTopics"]) == system and {CLUSTER, BROKER, "RMQ_SYS_TRACE_TOPIC", "TBW102"} <= system
    )

    types = dash.call("topic.listTypes")
    assert set(types) == set(cluster.broker.topics.table)
    assert types[traffic.topic] == "UNSPECIFIED"  # created without a message.type
    assert types[f"%RETRY%{traffic.group}"] == "RETRY" and types["TBW102"] == "SYSTEM"

    stats = dash.call("topic.stats", topic=traffic.topic)
    assert [(q["queueId"], q["minOffset"], q["maxOffset"]) for q in stats] == [
        (q, cluster.broker.store.get_min_offset_in_queue(traffic.topic, q), m)
        for q, m in enumerate(max_offsets(cluster, traffic.topic))
    ]
    route = dash.call("topic.route", topic=traffic.topic)
    assert route["queueDatas"] == [
        {
            "brokerName": BROKER,
            "readQueueNums": QUEUES,
            "writeQueueNums": QUEUES,
            "perm": 6,
            "topicSysFlag": 0,
        }
    ]
    assert route["brokerDatas"] == [
        {"cluster": CLUSTER, "brokerName": BROKER, "brokerAddrs": {"0": cluster.broker_addr}}
    ]

    consumers = dash.call("topic.consumers", topic=traffic.topic)
    assert list(consumers) == [traffic.group]
    group = consumers[traffic.group]
    assert group["diffTotal"] == 0
    assert [
        (q["queueId"], q["brokerOffset"], q["consumerOffset"], q["clientInfo"]) for q in group["queues"]
    ] == [
        (q, m, c, traffic.client_id)
        for q, (m, c) in enumerate(
            zip(
                max_offsets(cluster, traffic.topic),
                committed_offsets(cluster, traffic.group, traffic.topic),
                strict=True,
            )
        )
    ]


def test_topic_page_create_update_delete(cluster: EmbeddedCluster, dash: Dashboard) -> None:
    topic = unique("DashNew")
    created = dash.call(
        "topic.createOrUpdate", topicName=topic, readQueueNums=3, writeQueueNums=3, perm=6,
        clusterNameList=[CLUSTER], messageType="FIFO",
    )  # fmt: skip
    assert created == [BROKER]
    assert cluster.broker.topics.select(topic) == TopicConfig(
        topic, 3, 3, 6, attributes={"message.type": "FIFO"}
    )
    wait_until(lambda: is_routed(cluster, topic), 15, "the new topic's route")
    shown = dash.call("topic.examineConfig", topic=topic)
    assert [(c["brokerName"], c["readQueueNums"], c["perm"], c["messageType"]) for c in shown] == [
        (BROKER, 3, 6, "FIFO")
    ]
    assert dash.call("topic.listTypes")[topic] == "FIFO"

    dash.call(
        "topic.createOrUpdate", topicName=topic, readQueueNums=2, writeQueueNums=2, perm=4,
        brokerNameList=[BROKER], messageType="NORMAL",
    )  # fmt: skip
    assert cluster.broker.topics.select(topic) == TopicConfig(
        topic, 2, 2, 4, attributes={"message.type": "NORMAL"}
    )

    assert dash.call("topic.delete", topic=topic, clusterName=CLUSTER) == [CLUSTER]
    assert cluster.broker.topics.select(topic) is None and not is_routed(cluster, topic)
    with pytest.raises(DriverError) as gone:
        dash.call("topic.examineConfig", topic=topic)
    assert gone.value.code == ResponseCode.TOPIC_NOT_EXIST


def test_topic_page_send_message(cluster: EmbeddedCluster, dash: Dashboard, traffic: Traffic) -> None:
    """The "send message" dialog: a producer of the dashboard's own (SELF_TEST_P_GROUP), a
    transactional one when the topic's message.type says TRANSACTION."""
    sent = dash.call(
        "topic.sendMessage",
        topic=traffic.topic,
        tag="dashTag",
        key="dash-key",
        messageBody="from the dashboard",
    )
    assert (sent["messageType"], sent["sendStatus"], sent["brokerName"]) == ("UNSPECIFIED", "SEND_OK", BROKER)
    wait_until(
        lambda: traffic.listener.bodies()[b"from the dashboard"] == 1, 15, "the consumer got the test message"
    )
    got = next(m for m in traffic.listener.messages if m.body == b"from the dashboard")
    assert (got.msg_id, got.tags, got.keys, got.queue_id, got.queue_offset) == (
        sent["msgId"],
        "dashTag",
        "dash-key",
        sent["queueId"],
        sent["queueOffset"],
    )

    tx_topic = unique("DashTx")
    dash.call(
        "topic.createOrUpdate", topicName=tx_topic, readQueueNums=2, writeQueueNums=2, perm=6,
        clusterNameList=[CLUSTER], messageType="TRANSACTION",
    )  # fmt: skip
    wait_until(lambda: is_routed(cluster, tx_topic), 15, "the transactional topic's route")
    tx = dash.call("topic.sendMessage", topic=tx_topic, tag="t", key="tx-key", messageBody="committed")
    assert (tx["messageType"], tx["sendStatus"]) == ("TRANSACTION", "SEND_OK")
    # committed by the dialog's listener: the message is in the topic, visible by key
    [found] = until_found(dash, "message.byKey", topic=tx_topic, key="tx-key")
    assert (found["topic"], found["msgId"]) == (tx_topic, tx["msgId"])
    assert sum(max_offsets(cluster, tx_topic)[:2]) == 1


# -- Consumer page ------------------------------------------------------------------------------------
def test_consumer_page_browse(cluster: EmbeddedCluster, dash: Dashboard, traffic: Traffic) -> None:
    # every message of the topic consumed and committed, those the other pages' tests sent too
    all_consumed(cluster, traffic.group, traffic.topic)
    groups = dash.call("consumer.groupList")
    assert set(groups) == set(cluster.broker.groups.table)
    ours = groups[traffic.group]
    assert (ours["count"], ours["messageModel"], ours["consumeType"], ours["subGroupType"]) == (
        1,
        "CLUSTERING",
        "CONSUME_PASSIVELY",
        "NORMAL",
    )
    assert (
        ours["address"] == [cluster.broker_addr]
        and ours["diffTotal"] == 0
        and ours["version"].startswith("V")
    )

    rows = dash.call("consumer.topicsOfGroup", group=traffic.group, address=cluster.broker_addr)
    assert [(r["topic"], r["queueId"], r["consumerOffset"], r["clientInfo"]) for r in rows] == [
        (traffic.topic, q, c, traffic.client_id)
        for q, c in enumerate(committed_offsets(cluster, traffic.group, traffic.topic))
    ]

    conn = dash.call("consumer.connection", group=traffic.group, address=cluster.broker_addr)
    assert [(c["clientId"], c["language"]) for c in conn["connections"]] == [(traffic.client_id, "PYTHON")]
    assert conn["subscriptions"] == {traffic.topic: "*", f"%RETRY%{traffic.group}": "*"}
    assert (conn["consumeType"], conn["messageModel"]) == ("CONSUME_PASSIVELY", "CLUSTERING")

    info = dash.call("consumer.runningInfo", group=traffic.group, clientId=traffic.client_id, jstack=False)
    assert info["properties"]["consumerGroup"] == traffic.group
    assert traffic.topic in info["subscriptions"]
    queues = sorted((q["queueId"], q["commitOffset"]) for q in info["mqTable"] if q["topic"] == traffic.topic)
    assert queues == list(enumerate(committed_offsets(cluster, traffic.group, traffic.topic)))

    config = dash.call("consumer.examineConfig", group=traffic.group)
    stored = cluster.broker.groups.table[traffic.group]
    assert config == {
        BROKER: {
            "groupName": traffic.group,
            "consumeEnable": stored.consume_enable,
            "consumeBroadcastEnable": stored.consume_broadcast_enable,
            "consumeMessageOrderly": stored.consume_message_orderly,
            "retryQueueNums": stored.retry_queue_nums,
            "retryMaxTimes": stored.retry_max_times,
            "brokerId": stored.broker_id,
            "whichBrokerWhenConsumeSlowly": stored.which_broker_when_consume_slowly,
            "notifyConsumerIdsChangedEnable": stored.notify_consumer_ids_changed_enable,
            "consumeTimeoutMinute": 15,  # RocketMQ's default; rocketlite has no such setting
        }
    }


def test_consumer_page_create_delete(cluster: EmbeddedCluster, dash: Dashboard) -> None:
    group = unique("DashFifo")
    assert dash.call(
        "consumer.createOrUpdate", groupName=group, retryMaxTimes=3, retryQueueNums=1,
        consumeMessageOrderly=True, consumeBroadcastEnable=False, clusterNameList=[CLUSTER],
    ) == [BROKER]  # fmt: skip
    stored = cluster.broker.groups.table[group]
    assert (stored.retry_max_times, stored.consume_message_orderly, stored.consume_broadcast_enable) == (
        3,
        True,
        False,
    )
    listed = dash.call("consumer.groupList")[group]
    assert listed["subGroupType"] == "FIFO"
    # no client yet, so no retry topic: the connection lookup, which starts from the route of
    # %RETRY%group, fails as on RocketMQ, and the page shows no clients
    assert listed["connectionError"]["responseCode"] == ResponseCode.TOPIC_NOT_EXIST and "count" not in listed

    create_topic(cluster, f"%RETRY%{group}", queues=1)
    assert dash.call("consumer.delete", group=group, brokerNameList=[BROKER]) == {"deletedInNameServer": True}
    assert group not in cluster.broker.groups.table
    assert cluster.broker.topics.select(f"%RETRY%{group}") is None and not is_routed(
        cluster, f"%RETRY%{group}"
    )


def test_consumer_page_reset_offset(cluster: EmbeddedCluster, dash: Dashboard, traffic: Traffic) -> None:
    """The reset of the Topic and Consumer pages: resetOffsetByTimestamp (222) for an online group,
    and the same request for one with no client; the online one then gets everything again."""
    offline = unique("DashIdle")
    for q, m in enumerate(max_offsets(cluster, traffic.topic)):
        cluster.broker.offsets.commit(offline, traffic.topic, q, m)
    dash.call("consumer.createOrUpdate", groupName=offline, clusterNameList=[CLUSTER])
    before = traffic.listener.bodies()

    reset = dash.call(
        "consumer.resetOffset", topic=traffic.topic, consumerGroupList=[traffic.group, offline],
        resetTime=traffic.started_ms - 1000, force=True,
    )  # fmt: skip
    for group in (traffic.group, offline):
        assert reset[group]["status"] is True and reset[group]["path"] == "resetOffsetByTimestamp", reset[
            group
        ]
        stats = reset[group]["rollbackStatsList"]
        assert sorted((r["brokerName"], r["queueId"], r["rollbackOffset"]) for r in stats) == [
            (BROKER, q, 0) for q in range(QUEUES)
        ]
    assert committed_offsets(cluster, offline, traffic.topic) == [0] * QUEUES

    # the reset takes effect at each queue's next pull (PULL_OFFSET_MOVED); a pull held on an empty
    # queue (long polling, up to 15 s) answers first, as on RocketMQ 5.3: new traffic, one message
    # a queue, ends those holds now (and is itself consumed once, after the old messages)
    with Producer(unique("DashWake"), cluster.namesrv_addr) as p:
        for i in range(QUEUES):
            p.send(Message(traffic.topic, f"after-reset-{i}".encode()))
    all_consumed(cluster, traffic.group, traffic.topic)
    expected = {body: n + 1 for body, n in before.items()} | {
        f"after-reset-{i}".encode(): 1 for i in range(QUEUES)
    }
    wait_until(
        lambda: traffic.listener.bodies() == expected, 20, "everything once more, the new messages once"
    )


# -- Producer page ------------------------------------------------------------------------------------
def test_producer_page(cluster: EmbeddedCluster, dash: Dashboard, traffic: Traffic) -> None:
    conns = dash.call("producer.connection", group=traffic.producer_group, topic=traffic.topic)
    assert cluster.broker.parts is not None
    infos = cluster.broker.parts.clients.producers[traffic.producer_group].values()
    assert [(c["clientId"], c["clientAddr"], c["language"]) for c in conns] == [
        (i.client_id, i.conn.remote_address, "PYTHON") for i in infos
    ]
    with pytest.raises(DriverError) as none:
        dash.call("producer.connection", group=unique("NoSuchProducer"), topic=traffic.topic)
    assert none.value.code == ResponseCode.SYSTEM_ERROR, none.value.error


# -- Message page --------------------------------------------------------------------------------------
def test_message_page(cluster: EmbeddedCluster, dash: Dashboard, traffic: Traffic) -> None:
    now = int(time.time() * 1000)
    found = dash.call("message.byTopic", topic=traffic.topic, begin=traffic.started_ms, end=now)
    ids = {s.msg_id for s in traffic.sent}
    assert ids <= {m["msgId"] for m in found}
    assert all(traffic.started_ms <= m["storeTimestamp"] <= now for m in found)
    assert [m["storeTimestamp"] for m in found] == sorted((m["storeTimestamp"] for m in found), reverse=True)
    assert dash.call("message.byTopic", topic=traffic.topic, begin=now + 60_000, end=now + 120_000) == []

    [by_key] = dash.call("message.byKey", topic=traffic.topic, key="key-3")
    assert (by_key["msgId"], by_key["keys"], by_key["tags"]) == (traffic.sent[3].msg_id, "key-3", "tagA")
    with pytest.raises(DriverError) as none:  # the client's answer when nothing matches
        dash.call("message.byKey", topic=traffic.topic, key="no-such-key")
    assert none.value.code == ResponseCode.NO_MESSAGE

    target = traffic.sent[2]
    view = dash.call("message.view", topic=traffic.topic, msgId=target.msg_id)
    msg = view["message"]
    assert (msg["msgId"], msg["body"], msg["queueId"], msg["queueOffset"]) == (
        target.msg_id,
        "body-2",
        target.queue.queue_id,
        target.queue_offset,
    )
    tracks = {t["consumerGroup"]: (t["trackType"], t["exceptionDesc"]) for t in view["tracks"]}
    assert tracks[traffic.group] == ("CONSUMED", None)

    # resend: CONSUME_MESSAGE_DIRECTLY through the broker to the group's client, which consumes it
    before = traffic.listener.bodies()[b"body-2"]
    resent = dash.call("message.resend", topic=traffic.topic, msgId=target.msg_id, group=traffic.group)
    assert (resent["consumeResult"], resent["autoCommit"]) == ("CR_SUCCESS", True)
    assert traffic.listener.bodies()[b"body-2"] == before + 1
    again = dash.call(
        "message.resend",
        topic=traffic.topic,
        msgId=target.msg_id,
        group=traffic.group,
        clientId=traffic.client_id,
    )
    assert again["consumeResult"] == "CR_SUCCESS" and traffic.listener.bodies()[b"body-2"] == before + 2


# -- Message trace page -------------------------------------------------------------------------------
def test_message_trace_page(cluster: EmbeddedCluster, dash: Dashboard, traffic: Traffic) -> None:
    """The dashboard's send dialog with "trace" on: the Java producer writes its trace record to
    RMQ_SYS_TRACE_TOPIC, which the trace page reads back by message id (QUERY_MESSAGE)."""
    sent = dash.call(
        "topic.sendMessage",
        topic=traffic.topic,
        tag="traced",
        key="trace-key",
        messageBody="traced",
        traceEnabled=True,
    )
    [pub] = until_found(dash, "trace.query", msgId=sent["msgId"])
    assert (pub["traceType"], pub["groupName"], pub["success"]) == ("Pub", "SELF_TEST_P_GROUP", True)
    assert (pub["topic"], pub["tags"], pub["keys"], pub["offsetMsgId"]) == (
        traffic.topic,
        "traced",
        "trace-key",
        sent["offsetMsgId"],
    )
    assert pub["storeHost"] == cluster.broker_addr and pub["bodyLength"] == len(b"traced")
    assert cluster.broker.store.get_max_offset_in_queue("RMQ_SYS_TRACE_TOPIC", 0) >= 1
    with pytest.raises(DriverError) as none:
        dash.call("trace.query", msgId="0" * 32)
    assert none.value.code == ResponseCode.NO_MESSAGE


# -- DLQ page -----------------------------------------------------------------------------------------
def test_dlq_page(cluster: EmbeddedCluster, dash: Dashboard) -> None:
    """Messages a group gave up on (max reconsume times 0: the first failure sends them to
    %DLQ%group), listed by the DLQ page and resent in a batch to the group's client."""
    topic, group = unique("DashDlqT"), unique("DashDlqG")
    create_topic(cluster, topic, queues=QUEUES)
    assert dash.call("dlq.query", group=group, begin=0, end=int(time.time() * 1000)) == []  # no DLQ topic yet
    listener = Listener()
    listener.failing = True
    consumer = start_consumer(cluster, group, topic, listener, max_reconsume_times=0)
    try:
        client_id = client_id_of(cluster, group)
        begin = int(time.time() * 1000) - 1000
        with Producer(unique("DashDlqP"), cluster.namesrv_addr) as p:
            sent = [p.send(Message(topic, f"dead-{i}".encode(), keys=f"dead-{i}")) for i in range(2)]
        dlq = f"%DLQ%{group}"
        wait_until(lambda: cluster.broker.store.get_max_offset_in_queue(dlq, 0) == 2, 20, "both in the DLQ")

        listed = dash.call("dlq.query", group=group, begin=begin, end=int(time.time() * 1000))
        assert sorted(m["keys"] for m in listed) == ["dead-0", "dead-1"]
        assert {m["topic"] for m in listed} == {dlq}
        assert {m["properties"]["ORIGIN_MESSAGE_ID"] for m in listed} == {s.msg_id for s in sent}
        assert {m["properties"]["RETRY_TOPIC"] for m in listed} == {topic}

        listener.failing = False
        before = listener.bodies()
        resent = dash.call(
            "dlq.batchResend",
            messages=[
                {"topicName": dlq, "msgId": m["msgId"], "consumerGroup": group, "clientId": client_id}
                for m in listed
            ],
        )
        assert [(r["msgId"], r["consumeResult"]) for r in resent] == [
            (m["msgId"], "CR_SUCCESS") for m in listed
        ]
        after = listener.bodies()
        assert {b: after[b] - before[b] for b in (b"dead-0", b"dead-1")} == {b"dead-0": 1, b"dead-1": 1}
    finally:
        consumer.shutdown()


DOCS = Path(__file__).resolve().parents[3] / "docs" / "operations" / "dashboard.md"
DOCS_ROW = re.compile(r"^\| [^|]+ \| `([a-z]+\.[A-Za-z]+)` \(")


def test_every_call_is_run_and_documented(dash: Dashboard) -> None:
    """Each dashboard service call the driver offers was made by a test above (this one runs
    last; the ACL page's by test_dashboard_acl.py, against a cluster with ACL 2.0), and
    docs/operations/dashboard.md has one row for each."""
    here = [c for c in dash.calls if not c.startswith("acl.")]
    assert sorted(dash.timings) == sorted(here), set(here) - set(dash.timings)
    rows = [
        m.group(1) for line in DOCS.read_text(encoding="utf-8").splitlines() if (m := DOCS_ROW.match(line))
    ]
    assert sorted(rows) == sorted(dash.calls)
