"""`rocketlite admin ...`: every verb run in-process through `rocketlite.cli.main` against an
embedded name server + broker, with both the table and the `--json` output checked.

One cluster serves the whole module (each test uses its own topic and group names); raw remoting
requests on the cluster's own event loop stand in for clients (heartbeats, committed offsets).
"""

from __future__ import annotations

import io
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rocketlite.admin import cli as admin_cli
from rocketlite.admin.output import Output, ProgressReporter
from rocketlite.cli import main
from rocketlite.embedded import EmbeddedCluster, embedded
from rocketlite.protocol.bodies.heartbeat import (
    ConsumeFromWhere,
    ConsumerData,
    ConsumeType,
    HeartbeatData,
    MessageModel,
    ProducerData,
    SubscriptionData,
)
from rocketlite.protocol.codes import RequestCode
from rocketlite.protocol.wire import fastjson
from rocketlite.protocol.wire.command import RemotingCommand, make_request
from rocketlite.protocol.wire.headers import UpdateConsumerOffsetRequestHeader
from rocketlite.remoting.client import RemotingClient
from rocketlite.store.clean import disk_used_ratio
from tests.support.lone_namesrv import lone_namesrv

CLUSTER = "DefaultCluster"
BROKER = "broker-a"


@pytest.fixture(scope="module")
def admin_cluster() -> Iterator[EmbeddedCluster]:
    with embedded() as c:
        yield c


class Admin:
    """Runs `rocketlite admin VERB -n <cluster> ...` in-process and captures its output."""

    def __init__(self, cluster: EmbeddedCluster, capsys: pytest.CaptureFixture[str]) -> None:
        self.cluster = cluster
        self.capsys = capsys

    def run(self, *args: str, expect: int = 0) -> tuple[str, str]:
        self.capsys.readouterr()
        rc = main(["--log-level", "ERROR", "admin", *args, "-n", self.cluster.namesrv_addr])
        out, err = self.capsys.readouterr()
        assert rc == expect, f"exit {rc}, stdout {out!r}, stderr {err!r}"
        return out, err

    def table(self, *args: str) -> str:
        return self.run(*args)[0]

    def json(self, *args: str) -> Any:
        return json.loads(self.run(*args, "--json")[0])

    def error(self, *args: str) -> str:
        out, err = self.run(*args, expect=2)
        assert out == ""
        return err

    def send(self, topic: str, body: str, *extra: str) -> dict[str, Any]:
        result: dict[str, Any] = self.json("sendMessage", "-t", topic, "-p", body, *extra)
        assert result["sendStatus"] == "SEND_OK"
        return result

    def dispatched(self) -> None:
        assert self.cluster.broker.store.wait_dispatched(5.0)

    def broker_call(
        self, code: int, ext: dict[str, str] | None = None, body: bytes | None = None
    ) -> RemotingCommand:
        async def call() -> RemotingCommand:
            client = RemotingClient()
            try:
                return await client.invoke(self.cluster.broker_addr, make_request(code, ext, body), 5.0)
            finally:
                await client.close()

        return self.cluster.runner.call(call())

    def commit(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        ext = UpdateConsumerOffsetRequestHeader(
            consumer_group=group, topic=topic, queue_id=queue_id, commit_offset=offset
        ).to_ext()
        assert self.broker_call(RequestCode.UPDATE_CONSUMER_OFFSET, ext).code == 0

    def wait_topic(self, topic: str, present: bool = True) -> None:
        deadline = time.monotonic() + 5
        while (topic in self.json("topicList")["topics"]) != present:
            assert time.monotonic() < deadline, f"topic {topic} present={not present} in the name server"
            time.sleep(0.05)


@pytest.fixture
def admin(admin_cluster: EmbeddedCluster, capsys: pytest.CaptureFixture[str]) -> Admin:
    return Admin(admin_cluster, capsys)


def create_topic(admin: Admin, topic: str, queues: int = 2) -> None:
    data = admin.json("updateTopic", "-c", CLUSTER, "-t", topic, "-r", str(queues), "-w", str(queues))
    assert data["routeReady"] is True


# -- cluster ----------------------------------------------------------------------------------------


def test_cluster_list(admin: Admin) -> None:
    out = admin.table("clusterList")
    assert "Cluster Name" in out and "InTPS(LOAD)" in out
    assert CLUSTER in out and BROKER in out and admin.cluster.broker_addr in out and "V4_9_8" in out
    data = admin.json("clusterList", "-c", CLUSTER)
    (row,) = data["brokers"]
    assert row["cluster"] == CLUSTER and row["brokerName"] == BROKER and row["brokerId"] == 0
    assert row["addr"] == admin.cluster.broker_addr and row["version"] == "V4_9_8"
    assert {"inTps", "outTps", "hours", "commitLogDiskRatio", "inTotalToday"} <= set(row)
    more = admin.table("clusterList", "-m")
    assert "InTotalToday" in more and "OutTotalYest" in more and BROKER in more
    assert "not found" in admin.error("clusterList", "-c", "NoSuchCluster")


def test_broker_status(admin: Admin) -> None:
    addr = admin.cluster.broker_addr
    out = admin.table("brokerStatus", "-b", addr)
    assert addr in out and "brokerVersionDesc" in out and "msgPutTotalTodayNow" in out
    data = admin.json("brokerStatus", "-c", CLUSTER)
    assert data["brokers"][addr]["brokerVersion"] == "409"


def test_one_disk_used_figure(admin: Admin) -> None:
    """clusterList's SPACE, brokerStatus's commitLogDiskRatio / diskUsedRatio and the disk guard
    all use `disk_used_ratio` (df's Use% of the store's file system)."""
    services = admin.cluster.broker.store.services
    assert services is not None and services.cleaner.disk_ratio is disk_used_ratio  # what the guard acts on
    guard = disk_used_ratio(admin.cluster.store_dir)
    table = admin.json("brokerStatus", "-b", admin.cluster.broker_addr)["brokers"][admin.cluster.broker_addr]
    assert float(table["commitLogDiskRatio"]) == pytest.approx(guard, abs=0.005)
    assert float(table["diskUsedRatio"]) == pytest.approx(guard, abs=0.005)
    (row,) = admin.json("clusterList")["brokers"]
    assert row["commitLogDiskRatio"] == pytest.approx(guard, abs=0.005)


def test_no_broker_registered(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with lone_namesrv(tmp_path) as addr:
        assert main(["admin", "clusterList", "-n", addr]) == 0
        assert capsys.readouterr().out == f"no broker is registered with the name server {addr}\n"
        assert main(["admin", "clusterList", "-n", addr, "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["brokers"] == []
        assert main(["admin", "sendMessage", "-t", "TopicTest", "-p", "x", "-n", addr]) == 2
        err = capsys.readouterr().err
    cause = f"no broker is registered with the name server {addr}"
    assert err.startswith(f"rocketlite: error: no route for topic TopicTest: {cause}"), err
    assert "TBW102" not in err


def test_get_and_update_broker_config(admin: Admin) -> None:
    addr = admin.cluster.broker_addr
    before = admin.json("getBrokerConfig", "-b", addr)["brokers"][addr]
    assert before["brokerName"] == admin.cluster.broker.broker.broker_name
    out = admin.table("updateBrokerConfig", "-b", addr, "-k", "flushIntervalCommitLog", "-v", "321")
    assert "update broker config success" in out
    after = admin.json("getBrokerConfig", "-c", CLUSTER)["brokers"][addr]
    assert after["flushIntervalCommitLog"] == "321"
    err = admin.error("updateBrokerConfig", "-b", addr, "-k", "storePathRootDir", "-v", "/tmp/x")
    assert "code 16" in err


# -- topics -----------------------------------------------------------------------------------------


def test_topic_lifecycle(admin: Admin) -> None:
    out = admin.table("updateTopic", "-c", CLUSTER, "-t", "AdmTopic", "-r", "3", "-w", "3", "-p", "6")
    assert f"create topic to {admin.cluster.broker_addr} success." in out
    assert "readQueueNums" in out and "SINGLE_TAG" in out

    assert "AdmTopic" in admin.table("topicList")
    assert "AdmTopic" in admin.json("topicList")["topics"]
    clustered = admin.json("topicList", "-c")["topics"]
    assert {"cluster": CLUSTER, "topic": "AdmTopic", "consumerGroups": []} in clustered
    assert "AdmTopic" in admin.table("topicList", "-c")

    route_table = admin.table("topicRoute", "-t", "AdmTopic")
    assert "Brokers" in route_table and "Queues" in route_table and "6 RW-" in route_table
    route = admin.json("topicRoute", "-t", "AdmTopic")
    assert route["brokerDatas"] == [
        {"brokerAddrs": {"0": admin.cluster.broker_addr}, "brokerName": BROKER, "cluster": CLUSTER}
    ]
    (queue_data,) = route["queueDatas"]
    assert (queue_data["readQueueNums"], queue_data["writeQueueNums"], queue_data["perm"]) == (3, 3, 6)

    status = admin.json("topicStatus", "-t", "AdmTopic")
    assert [(q["brokerName"], q["queueId"], q["minOffset"], q["maxOffset"]) for q in status["queues"]] == [
        (BROKER, 0, 0, 0), (BROKER, 1, 0, 0), (BROKER, 2, 0, 0)
    ]  # fmt: skip
    admin.send("AdmTopic", "one", "-b", BROKER, "-i", "2")
    admin.dispatched()
    status_table = admin.table("topicStatus", "-t", "AdmTopic")
    assert "Max Offset" in status_table and "Last Updated" in status_table
    assert admin.json("topicStatus", "-t", "AdmTopic")["queues"][2]["maxOffset"] == 1

    # -b with an order flag: the order configuration lands in the name server's KV store
    order = admin.json("updateTopic", "-b", admin.cluster.broker_addr, "-t", "AdmTopic", "-w", "3", "-r", "3",
                       "-o", "true")  # fmt: skip
    assert order["orderConf"] == f"{BROKER}:3" and order["topicConfig"]["order"] is True
    assert "not registered" in admin.error("updateTopic", "-b", "127.0.0.1:1", "-t", "AdmTopic", "-o", "true")
    assert order["brokers"] == [
        {"cluster": CLUSTER, "brokerName": BROKER, "brokerAddr": admin.cluster.broker_addr}
    ]

    out = admin.table("deleteTopic", "-t", "AdmTopic", "-c", CLUSTER)
    assert f"delete topic [AdmTopic] from cluster [{CLUSTER}] success." in out
    assert "AdmTopic" not in admin.json("topicList")["topics"]
    assert "(TOPIC_NOT_EXIST, code 17)" in admin.error("topicRoute", "-t", "AdmTopic")
    deleted = admin.json("deleteTopic", "-t", "AdmTopic", "-c", CLUSTER)
    assert deleted["nameServers"] == [admin.cluster.namesrv_addr]


# -- messages ---------------------------------------------------------------------------------------


def test_send_and_query_messages(admin: Admin) -> None:
    create_topic(admin, "AdmMsg", queues=2)
    out = admin.table("sendMessage", "-t", "AdmMsg", "-p", "hello [world]", "-k", "order-1 shared",
                      "-c", "TagA", "-b", BROKER, "-i", "0")  # fmt: skip
    assert "SEND_OK" in out and "Send Result" in out
    admin.dispatched()  # a send is answered before the consume queue has it, as in RocketMQ
    first = admin.json("queryMsgByOffset", "-t", "AdmMsg", "-b", BROKER, "-i", "0", "-o", "0")["messages"][0]
    second = admin.send("AdmMsg", "second body", "-k", "shared", "-c", "TagB", "-b", BROKER, "-i", "1")
    assert (second["brokerName"], second["queueId"], second["queueOffset"]) == (BROKER, 1, 0)
    admin.dispatched()

    # by offsetMsgId (what the broker returned), and by the client UNIQ_KEY given the topic
    by_id = admin.json("queryMsgById", "-i", second["offsetMsgId"])["messages"]
    assert [(m["body"], m["tags"], m["keys"], m["msgId"]) for m in by_id] == [
        ("second body", "TagB", "shared", second["msgId"])
    ]
    table = admin.table("queryMsgById", "-i", second["offsetMsgId"])
    assert (
        "OffsetID" in table
        and second["offsetMsgId"] in table
        and "second body" in table
        and "[TagB]" in table
    )
    both = admin.json("queryMsgById", "-i", f"{first['offsetMsgId']},{second['offsetMsgId']}")["messages"]
    assert [m["body"] for m in both] == ["hello [world]", "second body"]
    by_unique = admin.json("queryMsgById", "-i", second["msgId"], "-t", "AdmMsg")["messages"]
    assert [m["offsetMsgId"] for m in by_unique] == [second["offsetMsgId"]]
    assert "-t" in admin.error("queryMsgById", "-i", "0" * 32)

    # by key: exact key matches only, across queues
    keyed = admin.json("queryMsgByKey", "-t", "AdmMsg", "-k", "shared")["messages"]
    assert sorted(m["body"] for m in keyed) == ["hello [world]", "second body"]
    assert [m["body"] for m in admin.json("queryMsgByKey", "-t", "AdmMsg", "-k", "order-1")["messages"]] == [
        "hello [world]"
    ]
    key_table = admin.table("queryMsgByKey", "-t", "AdmMsg", "-k", "order-1")
    assert first["msgId"] in key_table and "Message ID" in key_table
    assert "no message" in admin.error("queryMsgByKey", "-t", "AdmMsg", "-k", "missing-key")

    # by queue offset
    at = admin.json("queryMsgByOffset", "-t", "AdmMsg", "-b", BROKER, "-i", "1", "-o", "0")["messages"]
    assert at[0]["offsetMsgId"] == second["offsetMsgId"] and at[0]["storeHost"] == admin.cluster.broker_addr
    assert "Queue Offset" in admin.table(
        "queryMsgByOffset", "-t", "AdmMsg", "-b", BROKER, "-i", "1", "-o", "0"
    )
    missing = admin.error("queryMsgByOffset", "-t", "AdmMsg", "-b", BROKER, "-i", "1", "-o", "5")
    assert "no message at offset 5" in missing and "(NO_MESSAGE, code 208)" in missing


def test_print_and_consume_messages(admin: Admin) -> None:
    create_topic(admin, "AdmRead", queues=2)
    admin.send("AdmRead", "early", "-c", "TagA", "-i", "0")
    time.sleep(0.03)
    middle = int(time.time() * 1000)
    time.sleep(0.03)
    admin.send("AdmRead", "late-a", "-c", "TagB", "-i", "0")
    admin.send("AdmRead", "late-b", "-c", "TagA", "-i", "1")
    admin.dispatched()

    printed = admin.json("printMsg", "-t", "AdmRead")
    shape = [(q["queueId"], q["minOffset"], q["maxOffset"], [m["body"] for m in q["messages"]])
             for q in printed["queues"]]  # fmt: skip
    assert shape == [(0, 0, 2, ["early", "late-a"]), (1, 0, 1, ["late-b"])]
    table = admin.table("printMsg", "-t", "AdmRead")
    assert "minOffset=0, maxOffset=2" in table and "late-b" in table and "Msg ID" in table
    tagged = admin.json("printMsg", "-t", "AdmRead", "-s", "TagA")
    assert [m["body"] for q in tagged["queues"] for m in q["messages"]] == ["early", "late-b"]
    since = admin.json("printMsg", "-t", "AdmRead", "-b", str(middle))
    assert [m["body"] for q in since["queues"] for m in q["messages"]] == ["late-a", "late-b"]
    until = admin.json("printMsg", "-t", "AdmRead", "-e", str(middle), "-d", "false")
    (only,) = [m for q in until["queues"] for m in q["messages"]]
    assert only["tags"] == "TagA" and "body" not in only

    consumed = admin.json("consumeMessage", "-t", "AdmRead")
    assert sorted(m["body"] for m in consumed["messages"]) == ["early", "late-a", "late-b"]
    assert consumed["group"] == "TOOLS_CONSUMER"
    assert [m["body"] for m in admin.json("consumeMessage", "-t", "AdmRead", "-c", "1")["messages"]] == [
        "early"
    ]
    one = admin.json("consumeMessage", "-t", "AdmRead", "-b", BROKER, "-i", "0", "-o", "1", "-g", "cg_reader")
    assert [m["body"] for m in one["messages"]] == ["late-a"] and one["group"] == "cg_reader"
    consume_table = admin.table("consumeMessage", "-t", "AdmRead", "-s", str(middle))
    assert (
        "late-a" in consume_table
        and "early" not in consume_table
        and "Consumed 2 message(s)" in consume_table
    )
    err = admin.error("consumeMessage", "-t", "AdmRead", "-o", "1")
    assert (
        "\nrocketlite admin consumeMessage: error: consuming from an offset (-o) needs the broker name" in err
    )
    assert "outside" in admin.error("consumeMessage", "-t", "AdmRead", "-b", BROKER, "-i", "0", "-o", "9")


def test_send_message_auto_creates_topic(admin: Admin) -> None:
    result = admin.send("AdmAuto", "made on the fly")
    assert result["autoCreated"] is True and result["queueId"] in range(4)
    admin.wait_topic("AdmAuto")
    assert "no writable queue" in admin.error("sendMessage", "-t", "AdmAuto", "-p", "x", "-b", "nope")


# -- groups and offsets -----------------------------------------------------------------------------


def test_consumer_progress_and_reset_offset(admin: Admin) -> None:
    create_topic(admin, "AdmLag", queues=2)
    for i in range(5):
        admin.send("AdmLag", f"q0-{i}", "-i", "0")
    for i in range(3):
        admin.send("AdmLag", f"q1-{i}", "-i", "1")
    admin.dispatched()
    admin.commit("cg_lag", "AdmLag", 0, 2)
    admin.commit("cg_lag", "AdmLag", 1, 3)

    progress = admin.json("consumerProgress", "-g", "cg_lag")
    assert [(q["topic"], q["queueId"], q["brokerOffset"], q["consumerOffset"], q["diff"])
            for q in progress["queues"]] == [("AdmLag", 0, 5, 2, 3), ("AdmLag", 1, 3, 3, 0)]  # fmt: skip
    assert progress["diffTotal"] == 3
    table = admin.table("consumerProgress", "-g", "cg_lag")
    assert "Diff Total: 3" in table and "Consumer Offset" in table and "AdmLag" in table
    idle = admin.json("consumerProgress", "-g", "cg_nobody")  # no offsets: a note, not code 206
    assert idle["queues"] == [] and "has no committed offset on any broker yet" in idle["note"]
    assert admin.table("consumerProgress", "-g", "cg_nobody").startswith(
        "note: group cg_nobody has no committed offset on any broker yet"
    )

    # back to the beginning (timestamp 0): every offset at the queue's first message
    reset = admin.json("resetOffsetByTime", "-g", "cg_lag", "-t", "AdmLag", "-s", "0")
    assert [(r["queueId"], r["oldOffset"], r["offset"]) for r in reset["offsets"]] == [(0, 2, 0), (1, 3, 0)]
    assert admin.json("consumerProgress", "-g", "cg_lag")["diffTotal"] == 8
    # not forced: never moves forward
    time.sleep(0.01)
    kept = admin.json("resetOffsetByTime", "-g", "cg_lag", "-t", "AdmLag", "-s", "now", "-f", "false")
    assert [r["offset"] for r in kept["offsets"]] == [0, 0]
    # forced to now: the end of each queue
    out = admin.table("resetOffsetByTime", "-g", "cg_lag", "-t", "AdmLag", "-s", "now")
    assert "rollback consumer offset by specified consumerGroup[cg_lag], topic[AdmLag], force[true]" in out
    assert "restart them" in out
    assert admin.json("consumerProgress", "-g", "cg_lag")["diffTotal"] == 0
    dated = admin.json("resetOffsetByTime", "-g", "cg_lag", "-t", "AdmLag", "-s", "2000-01-01#00:00:00:000")
    assert [r["offset"] for r in dated["offsets"]] == [0, 0]
    err = admin.error("resetOffsetByTime", "-g", "cg_lag", "-t", "AdmLag", "-s", "yesterday")
    assert err.startswith("usage: rocketlite admin resetOffsetByTime ")
    assert "\nrocketlite admin resetOffsetByTime: error: argument -s/--timestamp: expected now" in err


def _subscription_groups(admin: Admin) -> dict[str, Any]:
    response = admin.broker_call(RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
    table: dict[str, Any] = fastjson.loads(response.body or b"{}")["subscriptionGroupTable"]
    return table


def test_sub_group_crud(admin: Admin) -> None:
    out = admin.table("updateSubGroup", "-c", CLUSTER, "-g", "cg_crud", "-r", "5", "-q", "2", "-s", "false")
    assert (
        f"create subscription group to {admin.cluster.broker_addr} success." in out and "retryMaxTimes" in out
    )
    stored = _subscription_groups(admin)["cg_crud"]
    assert (stored["retryMaxTimes"], stored["retryQueueNums"], stored["consumeEnable"]) == (5, 2, False)
    data = admin.json("updateSubGroup", "-b", admin.cluster.broker_addr, "-g", "cg_crud", "-d", "false")
    assert data["subscriptionGroupConfig"]["consumeBroadcastEnable"] is False
    assert data["subscriptionGroupConfig"]["retryMaxTimes"] == 16  # every field is set, as mqadmin does
    assert _subscription_groups(admin)["cg_crud"]["consumeEnable"] is True

    admin.commit("cg_crud", "SELF_TEST_TOPIC", 0, 0)
    out = admin.table("deleteSubGroup", "-b", admin.cluster.broker_addr, "-g", "cg_crud", "-r", "true")
    assert "delete subscription group [cg_crud]" in out
    assert "cg_crud" not in _subscription_groups(admin)
    assert admin.json("consumerProgress", "-g", "cg_crud")["queues"] == []  # offsets removed too

    admin.json("updateSubGroup", "-c", CLUSTER, "-g", "cg_crud")
    deleted = admin.json("deleteSubGroup", "-c", CLUSTER, "-g", "cg_crud")
    assert deleted["deletedTopics"] == ["%RETRY%cg_crud", "%DLQ%cg_crud"] and deleted["removeOffset"] is False
    assert "cg_crud" not in _subscription_groups(admin)


def test_connections(admin: Admin) -> None:
    create_topic(admin, "AdmConn", queues=1)
    heartbeat = HeartbeatData(
        client_id="127.0.0.1@admin-test",
        producer_data_set=(ProducerData("pg_conn"),),
        consumer_data_set=(
            ConsumerData(
                "cg_conn", ConsumeType.CONSUME_PASSIVELY, MessageModel.CLUSTERING,
                ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET, (SubscriptionData("AdmConn", "TagA || TagB"),),
            ),
        ),
    )  # fmt: skip

    async def connect() -> RemotingClient:
        client = RemotingClient()
        request = make_request(RequestCode.HEART_BEAT, None, heartbeat.to_bytes())
        assert (await client.invoke(admin.cluster.broker_addr, request, 5.0)).code == 0
        return client

    client = admin.cluster.runner.call(connect())
    try:
        out = admin.table("consumerConnection", "-g", "cg_conn")
        assert "127.0.0.1@admin-test" in out and "TagA || TagB" in out and "CONSUME_PASSIVELY" in out
        data = admin.json("consumerConnection", "-g", "cg_conn")
        assert [c["clientId"] for c in data["connections"]] == ["127.0.0.1@admin-test"]
        assert data["subscriptions"] == [{"topic": "AdmConn", "subExpression": "TagA || TagB"}]
        assert (data["messageModel"], data["consumeFromWhere"]) == ("CLUSTERING", "CONSUME_FROM_FIRST_OFFSET")

        producers = admin.json("producerConnection", "-g", "pg_conn", "-t", "AdmConn")
        assert [c["clientId"] for c in producers["connections"]] == ["127.0.0.1@admin-test"]
        assert "127.0.0.1@admin-test" in admin.table("producerConnection", "-g", "pg_conn", "-t", "AdmConn")

        admin.wait_topic("%RETRY%cg_conn")  # the heartbeat created the group's retry topic
        listed = {g["group"]: g for g in admin.json("consumerProgress")["groups"]}
        assert listed["cg_conn"]["count"] == 1 and listed["cg_conn"]["messageModel"] == "CLUSTERING"
        assert "cg_conn" in admin.table("consumerProgress")
    finally:
        admin.cluster.runner.call(client.close())
    # nobody online: said plainly, exit 1 (the broker still answers 206 / 1 on the wire)
    assert admin.run("consumerConnection", "-g", "cg_nobody", expect=1) == (
        "",
        "rocketlite admin consumerConnection: no consumer of group cg_nobody is online\n",
    )
    assert admin.run("producerConnection", "-g", "pg_nobody", "-t", "AdmConn", expect=1) == (
        "",
        "rocketlite admin producerConnection: no producer of group pg_nobody is online "
        "(asked the brokers of topic AdmConn)\n",
    )


# -- errors and entry point -------------------------------------------------------------------------


def test_argument_errors(
    admin: Admin, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("NAMESRV_ADDR", raising=False)
    cases = [
        (["admin", "clusterList"], "give -n HOST:PORT or set NAMESRV_ADDR"),
        (["admin", "topicRoute", "-t", "X", "-x", "foo"], "unrecognized arguments: -x foo"),
        (["admin", "updateTopic", "-t", "X", "-n", "127.0.0.1:1"], "one of the arguments -b/--brokerAddr"),
        (["admin", "updateTopic", "-c", "C", "-t", "X", "-p", "5", "-n", "127.0.0.1:1"], "invalid choice"),
        (["admin", "updateTopic", "-c", "C", "-t", "X", "-o", "maybe", "-n", "127.0.0.1:1"], "true or false"),
        (["admin", "queryMsgByKey", "-t", "X", "-k", "k", "-b", "soon", "-n", "127.0.0.1:1"], "yyyy-MM-dd"),
        (["admin", "clusterList", "-n", "nohost"], "host:port"),
        (["admin", "noSuchVerb"], "invalid choice"),
    ]
    for argv, message in cases:
        try:
            rc = main(argv)
        except SystemExit as exc:  # argparse's errors exit; errors found later return
            rc = int(str(exc.code))
        assert rc == 2, argv
        err = capsys.readouterr().err
        assert message in err, argv
        if argv[1] != "noSuchVerb":  # a verb's error: its own usage and `rocketlite admin VERB: error:`
            assert err.startswith(f"usage: rocketlite admin {argv[1]} "), err
            assert f"\nrocketlite admin {argv[1]}: error: " in err, err

    # -n before the verb is accepted; -b alone needs no name server
    assert main(["admin", "-n", admin.cluster.namesrv_addr, "clusterList", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["brokers"][0]["brokerName"] == BROKER
    assert main(["admin", "brokerStatus", "-b", admin.cluster.broker_addr, "--json"]) == 0
    assert "commitLogMaxOffset" in json.loads(capsys.readouterr().out)["brokers"][admin.cluster.broker_addr]
    assert main(["admin", "getBrokerConfig", "-b", admin.cluster.broker_addr, "--json"]) == 0
    assert "brokerName" in json.loads(capsys.readouterr().out)["brokers"][admin.cluster.broker_addr]

    monkeypatch.setenv("NAMESRV_ADDR", admin.cluster.namesrv_addr)
    assert main(["admin", "clusterList", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["brokers"][0]["brokerName"] == BROKER


def test_server_errors(admin: Admin, capsys: pytest.CaptureFixture[str]) -> None:
    err = admin.error("updateTopic", "-c", CLUSTER, "-t", "bad topic!")
    assert err.startswith("rocketlite: error: ") and "illegal characters" in err
    assert "(SYSTEM_ERROR, code 1)" in err

    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        dead = f"127.0.0.1:{sock.getsockname()[1]}"
    assert main(["admin", "topicList", "-n", dead]) == 2
    assert f"cannot reach name server {dead}: connection refused" in capsys.readouterr().err
    # several name servers: the first that answers is used
    assert main(["admin", "topicList", "--json", "-n", f"{dead};{admin.cluster.namesrv_addr}"]) == 0
    assert "TBW102" in json.loads(capsys.readouterr().out)["topics"]


def test_python_m_entry_point(admin_cluster: EmbeddedCluster) -> None:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src")}
    proc = subprocess.run(
        [sys.executable, "-m", "rocketlite", "admin", "clusterList", "-n", admin_cluster.namesrv_addr],
        capture_output=True, text=True, timeout=60, env=env, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert BROKER in proc.stdout and admin_cluster.broker_addr in proc.stdout


# -- pieces -----------------------------------------------------------------------------------------


def test_value_parsers() -> None:
    assert admin_cli.timestamp("1700000000123") == 1700000000123
    local = admin_cli.timestamp("2024-05-01#12:30:15:250")
    assert local % 1000 == 250 and admin_cli.timestamp("2024-05-01T12:30:15.250") == local
    assert abs(admin_cli.timestamp("now") - time.time() * 1000) < 5000
    assert admin_cli.java_bool("TRUE") is True and admin_cli.java_bool("false") is False
    assert admin_cli.namesrv_list("a:1; b:2") == "a:1;b:2"
    assert admin_cli.charset("UTF8") == "utf-8"


def test_plain_output_and_progress() -> None:
    buf = io.StringIO()
    plain = Output(buf, use_rich=False)
    plain.table(("Name", "Count"), [["a", 1], ["long-name", 22]], title="T", numeric=("Count",))
    plain.line("done")
    assert buf.getvalue().splitlines() == ["T", "Name       Count", "---------  -----", "a              1",
                                           "long-name     22", "", "done"]  # fmt: skip
    err = io.StringIO()
    reporter = ProgressReporter(True, file=err, force_terminal=True)
    with reporter.task("Work", 3) as advance:
        for _ in range(3):
            advance(1)
    with ProgressReporter(False).task("Nothing", 3) as advance:
        advance(1)


def test_the_broker_port_given_as_the_name_server(admin: Admin, capsys: pytest.CaptureFixture[str]) -> None:
    """`-n` with the broker's port: the verb says which address answered as a broker, not
    `request type 206 not supported`; a real name server later in the list is still used."""
    broker = admin.cluster.broker_addr
    assert main(["admin", "topicList", "-n", broker]) == 2
    err = capsys.readouterr().err
    assert err == (
        f"rocketlite: error: {broker} answered as a broker, not a name server "
        "(GET_ALL_TOPIC_LIST_FROM_NAMESERVER (206) not supported): point the name server address "
        "at the name server's port (9876 by default), not the broker's\n"
    )
    assert main(["admin", "deleteTopic", "-c", CLUSTER, "-t", "TopicTest", "-n", broker]) == 2
    assert "answered as a broker, not a name server (GET_BROKER_CLUSTER_INFO (106) not supported)" in (
        capsys.readouterr().err
    )
    assert main(["admin", "topicList", "--json", "-n", f"{broker};{admin.cluster.namesrv_addr}"]) == 0
    assert "TBW102" in json.loads(capsys.readouterr().out)["topics"]
