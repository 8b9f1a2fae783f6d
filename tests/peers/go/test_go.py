"""The RocketMQ Go client (rocketmq-client-go/v2 v2.1.2, pure Go, from the module proxy) against rocketlite.

Each test starts an embedded name server + broker, runs one scenario of tests/peers/go/main.go in
its own process, and asserts on what the client printed and on what the broker holds (its store,
consumer offsets, queue locks, transaction half and op queues). See tests/support/foreign_clients/go.py
for how the driver is built and run.
"""

from __future__ import annotations

import hashlib
import zlib
from collections import Counter, defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rocketlite.admin.client import AdminClient
from rocketlite.admin.groups import consumer_connection
from rocketlite.admin.messages import query_msg_by_key
from rocketlite.embedded import EmbeddedCluster, embedded
from rocketlite.protocol.bodies.message_queue import MessageQueue
from rocketlite.protocol.formats.record import StoredRecord
from rocketlite.protocol.message import MessageConst
from rocketlite.protocol.reserved import TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC
from tests.support.aio import run
from tests.support.foreign_clients.go import GoClients, go_clients
from tests.support.foreign_clients.real import (
    BROKER_OVERRIDES,
    answer,
    consumer_ids,
    events,
    finish,
    received,
    stored,
)
from tests.support.names import unique
from tests.support.topics import create_topic, is_routed, wait_until

pytestmark = pytest.mark.timeout(120)

# Delay levels of 1 s (retries come back quickly), and transaction checks after 1 s instead of 6 s / 60 s.
OVERRIDES: dict[str, Any] = {
    **BROKER_OVERRIDES,
    "transaction_timeout": 1000,
    "transaction_check_interval": 1000,
}


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[EmbeddedCluster]:
    with embedded(tmp_path / "store", **OVERRIDES) as c:
        yield c


@pytest.fixture
def go(tmp_path: Path) -> Iterator[GoClients]:
    with go_clients(tmp_path) as gc:
        yield gc


# -- helpers ---------------------------------------------------------------------------------------
def records(cluster: EmbeddedCluster, topic: str, queues: int = 4) -> list[StoredRecord]:
    return [r for q in range(queues) for r in stored(cluster, topic, q)]


def by_uniq_key(recs: list[StoredRecord]) -> dict[str, StoredRecord]:
    return {str(r.get_property(MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX)): r for r in recs}


def committed(cluster: EmbeddedCluster, group: str, topic: str) -> dict[int, int]:
    return cluster.broker.offsets.query_all(group, topic)


def wait_committed(cluster: EmbeddedCluster, group: str, topic: str, expected: dict[int, int]) -> None:
    """The Go consumer persists its offsets at shutdown with one-way UPDATE_CONSUMER_OFFSETs and
    closes the connection right after: the broker takes them after the driver has exited."""
    wait_until(lambda: committed(cluster, group, topic) == expected, 10,
               f"offsets {expected} of {group} (have {committed(cluster, group, topic)})")  # fmt: skip


def queue_ends(sent: list[dict[str, Any]]) -> dict[int, int]:
    """Per queue, the offset after the last message sent there (what a consumer commits at the end)."""
    ends: dict[int, int] = defaultdict(int)
    for s in sent:
        ends[s["queueId"]] = max(ends[s["queueId"]], s["queueOffset"] + 1)
    return dict(ends)


SEND_OK = 0  # primitive.SendOK


# -- producers -------------------------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["sync", "async", "oneway"])
def test_send(cluster: EmbeddedCluster, go: GoClients, mode: str) -> None:
    topic = unique("GSend")
    create_topic(cluster, topic)
    cp = go.run("produce", cluster.namesrv_addr, topic=topic, group=unique("gp"), mode=mode, n=4)
    sent = events(cp, "sent", mode=mode)
    assert sorted(s["i"] for s in sent) == [0, 1, 2, 3], cp.events
    wait_until(lambda: len(records(cluster, topic)) == 4, 10, "the four messages in the store")
    recs = by_uniq_key(records(cluster, topic))
    for s in sent:
        rec = recs[s["msgId"]]
        assert (rec.tags, rec.keys, rec.get_property("seq")) == (mode, f"{mode}-{s['i']}", str(s["i"]))
        assert rec.body == f"{mode} {s['i']}".encode()
        if mode != "oneway":
            assert s["status"] == SEND_OK
            assert s["brokerName"] == cluster.broker.broker.broker_name
            assert (rec.queue_id, rec.queue_offset, rec.msg_id) == (
                s["queueId"],
                s["queueOffset"],
                s["offsetMsgId"],
            )


def test_unknown_topic_auto_created_via_tbw102(cluster: EmbeddedCluster, go: GoClients) -> None:
    """No route for the topic: the Go producer sends with the TBW102 route (defaultTopic TBW102,
    defaultTopicQueueNums 4) and the broker creates the topic on that first send."""
    topic = unique("GAuto")
    cp = go.run("produce", cluster.namesrv_addr, topic=topic, group=unique("gp"), mode="sync", n=2)
    assert [s["status"] for s in events(cp, "sent")] == [SEND_OK, SEND_OK]
    tc = cluster.broker.topics.table[topic]
    assert (tc.read_queue_nums, tc.write_queue_nums) == (4, 4)
    wait_until(lambda: is_routed(cluster, topic), 15, f"a name-server route for {topic}")
    wait_until(lambda: len(records(cluster, topic)) == 2, 10, "the two messages in the store")


def test_batch(cluster: EmbeddedCluster, go: GoClients) -> None:
    """SendSync with several messages is one SEND_BATCH_MESSAGE (320). The Go client gives the
    inner messages no UNIQ_KEY, so its SendResult.MsgID is empty; the offset msgIds are the broker's."""
    topic = unique("GBatch")
    create_topic(cluster, topic)
    cp = go.run("batch", cluster.namesrv_addr, topic=topic, group=unique("gp"), n=8)
    [s] = events(cp, "sent")
    offset_ids = s["offsetMsgId"].split(",")
    assert s["status"] == SEND_OK and len(offset_ids) == 8
    wait_until(lambda: len(stored(cluster, topic, s["queueId"])) == 8, 10, "the batch in the store")
    recs = stored(cluster, topic, s["queueId"])
    assert [r.msg_id for r in recs] == offset_ids
    assert [r.queue_offset for r in recs] == list(range(s["queueOffset"], s["queueOffset"] + 8))
    assert [r.keys for r in recs] == [f"batch-{i}" for i in range(8)]
    assert [r.body for r in recs] == [f"batch {i}".encode() for i in range(8)]
    assert {r.tags for r in recs} == {"batch"}


def test_compressed_body(cluster: EmbeddedCluster, go: GoClients) -> None:
    """A body over the producer's 4 KiB threshold is stored as the client compressed it (zlib,
    sysFlag bit 0) and comes back whole; the small one is stored plain."""
    topic = unique("GZip")
    create_topic(cluster, topic)
    cp = go.run("compressed", cluster.namesrv_addr, topic=topic, group=unique("gz"))
    sent = {s["size"]: s for s in events(cp, "sent")}
    got = {m["keys"]: m for m in received(cp)}
    for size, s in sent.items():
        assert got[f"size-{size}"]["bodySha256"] == s["bodySha256"]
        assert len(got[f"size-{size}"]["body"]) == size
    recs = by_uniq_key(records(cluster, topic))
    big, small = recs[sent[16384]["msgId"]], recs[sent[1024]["msgId"]]
    assert big.sys_flag & 1 and len(big.body) < 16384
    assert hashlib.sha256(zlib.decompress(big.body)).hexdigest() == sent[16384]["bodySha256"]
    assert not small.sys_flag & 1 and len(small.body) == 1024


def test_ordered_by_sharding_key_and_orderly_consumer(cluster: EmbeddedCluster, go: GoClients) -> None:
    topic, group = unique("GOrder"), unique("go")
    create_topic(cluster, topic)
    cp = go.start("ordered", cluster.namesrv_addr, topic=topic, group=group, orders=4, steps=5)
    cp.wait_event("wait", 60)
    # While the orderly consumer runs, the broker holds its LOCK_BATCH_MQ locks on every queue.
    [client_id] = consumer_ids(cluster, group)
    parts = cluster.broker.parts
    assert parts is not None
    for q in range(4):
        mq = MessageQueue(topic, cluster.broker.broker.broker_name, q)
        assert parts.locks.is_locked(group, mq, client_id), q
    answer(cp)
    finish(cp)
    # The hash selector keeps each order on one queue.
    queues: dict[int, set[int]] = defaultdict(set)
    for s in events(cp, "sent"):
        queues[s["order"]].add(s["queueId"])
    assert all(len(q) == 1 for q in queues.values()), queues
    steps: dict[str, list[int]] = defaultdict(list)
    for m in received(cp):
        steps[m["properties"]["order"]].append(int(m["properties"]["step"]))
    assert steps == {str(o): [0, 1, 2, 3, 4] for o in range(4)}
    # Unlocked at shutdown (UNLOCK_BATCH_MQ), and the offsets are on the broker.
    for q in range(4):
        assert not parts.locks.is_locked(group, MessageQueue(topic, cluster.broker.broker.broker_name, q),
                                         client_id)  # fmt: skip
    wait_committed(cluster, group, topic, queue_ends(events(cp, "sent")))


# -- transactions ----------------------------------------------------------------------------------
def test_transaction_check_back(cluster: EmbeddedCluster, go: GoClients) -> None:
    """commit and rollback end at once; unknown-* stay UNKNOWN until the broker checks them back with
    CHECK_TRANSACTION_STATE on the producer's connection, and the Go producer answers END_TRANSACTION."""
    topic, group = unique("GTx"), unique("gt")
    create_topic(cluster, topic)
    cp = go.start("transaction", cluster.namesrv_addr, topic=topic, group=group)
    cp.wait_event("wait", 60)
    sent = {s["body"]: s for s in events(cp, "sent")}
    assert set(sent) == {"commit", "rollback", "unknown-commit", "unknown-rollback"}
    assert all(s["status"] == SEND_OK for s in sent.values())
    # The transaction id of a send is its UNIQ_KEY (RocketMQ sets no other one on a 4.x send).
    local = {e["body"]: e for e in events(cp, "local")}
    assert {b: e["state"] for b, e in local.items()} == {
        "commit": "COMMIT", "rollback": "ROLLBACK", "unknown-commit": "UNKNOWN", "unknown-rollback": "UNKNOWN"
    }  # fmt: skip
    checks = events(cp, "check")
    checked = {e["message"]["body"] for e in checks}
    assert checked == {"unknown-commit", "unknown-rollback"}, checks
    for e in checks:
        m, s = e["message"], sent[e["message"]["body"]]
        # The check carries the half as the producer sent it: real topic, keys, its UNIQ_KEY, PGROUP.
        assert (m["topic"], m["keys"], m["msgId"]) == (topic, "tx-" + m["body"], s["msgId"])
        assert e["transactionId"] == s["msgId"] == local[m["body"]]["transactionId"]
        assert m["properties"]["PGROUP"] == f"{group}_tx"
        assert e["answer"] == ("COMMIT" if m["body"] == "unknown-commit" else "ROLLBACK")
    assert sorted(m["body"] for m in received(cp)) == ["commit", "unknown-commit"]
    # Every half is done: one op per half (tag "d"); only the committed ones reached the topic.
    halves = by_uniq_key(records(cluster, TRANS_HALF_TOPIC, 1))
    assert {s["msgId"] for s in sent.values()} <= set(halves)
    wait_until(lambda: len(records(cluster, TRANS_OP_HALF_TOPIC, 1)) >= 4, 10, "an op for every half")
    done = {int(op.body) for op in records(cluster, TRANS_OP_HALF_TOPIC, 1)}
    assert {halves[s["msgId"]].queue_offset for s in sent.values()} <= done
    answer(cp)
    finish(cp)
    recs = records(cluster, topic)
    assert sorted(r.body for r in recs) == [b"commit", b"unknown-commit"]
    for r in recs:  # committed: the real topic's record points back at its half
        assert r.prepared_transaction_offset == halves[str(r.get_property("UNIQ_KEY"))].physical_offset


# -- consumers -------------------------------------------------------------------------------------
def test_push_consumer_concurrently(cluster: EmbeddedCluster, go: GoClients) -> None:
    topic, group = unique("GPush"), unique("gpc")
    create_topic(cluster, topic)
    cp = go.start("push", cluster.namesrv_addr, topic=topic, group=group, n=16)
    cp.wait_event("wait", 60)
    # Our admin sees the Go consumer as RocketMQ's would: GET_CONSUMER_CONNECTION_LIST, QUERY_MESSAGE.

    async def admin_view() -> tuple[dict[str, Any], dict[str, Any]]:
        async with AdminClient(cluster.namesrv_addr) as admin:
            return await consumer_connection(admin, group=group), await query_msg_by_key(
                admin, topic=topic, key="push-3"
            )

    conn, by_key = run(admin_view())
    [client] = conn["connections"]
    assert (client["language"], client["version"]) == ("GO", 317)  # LanguageCode GO, V4_4_0
    assert client["clientId"].endswith(f"@{group}-push")  # <ip>@<instance name>
    assert (conn["consumeType"], conn["messageModel"], conn["consumeFromWhere"]) == (
        "CONSUME_PASSIVELY", "CLUSTERING", "CONSUME_FROM_FIRST_OFFSET"
    )  # fmt: skip
    assert conn["subscriptions"] == sorted(
        [{"topic": topic, "subExpression": "*"}, {"topic": f"%RETRY%{group}", "subExpression": "*"}],
        key=lambda s: s["topic"],
    )
    [found] = by_key["messages"]
    assert found["body"] == "push 3"
    answer(cp)
    finish(cp)
    sent = events(cp, "sent")
    got = received(cp)
    assert Counter(m["msgId"] for m in got) == Counter(s["msgId"] for s in sent)
    positions = {s["msgId"]: (s["queueId"], s["queueOffset"], s["offsetMsgId"]) for s in sent}
    assert all(positions[m["msgId"]] == (m["queueId"], m["queueOffset"], m["offsetMsgId"]) for m in got)
    for m in got:
        assert hashlib.sha256(m["body"].encode()).hexdigest() == m["bodySha256"]
        assert m["storeHost"] == cluster.broker_addr
    wait_committed(cluster, group, topic, queue_ends(sent))  # persisted at shutdown
    assert consumer_ids(cluster, group) == []  # UNREGISTER_CLIENT at shutdown


def test_tag_selector(cluster: EmbeddedCluster, go: GoClients) -> None:
    topic, group = unique("GTags"), unique("gtag")
    create_topic(cluster, topic, queues=1)
    messages = "TagA:1,TagC:2,TagB:3,TagC:4,TagD:5,TagA:6,TagB:7"
    cp = go.run("tags", cluster.namesrv_addr, topic=topic, group=group,
                expression="TagA || TagB", messages=messages, expect=4)  # fmt: skip
    assert sorted(m["keys"] for m in received(cp)) == ["k0", "k2", "k5", "last"]
    # The filtered-out messages were passed over too: the offset is at the end of the queue.
    wait_committed(cluster, group, topic, {0: 7})


def test_sql92_selector(tmp_path: Path, go: GoClients) -> None:
    """The Go push consumer registers the SQL92 subscription by heartbeat only (v2.1.2 sends no
    CHECK_CLIENT_CONFIG; its subVersion is in nanoseconds), and its pulls carry no subscription:
    sysFlag 2 (no subscription bit), subscription "", expressionType "TAG", subVersion 0. The broker
    must filter by the registered one; the Go client does not filter SQL92 itself."""
    with embedded(tmp_path / "sql-store", **OVERRIDES, enable_property_filter=True) as c:
        topic, group = unique("GSql"), unique("gsql")
        create_topic(c, topic, queues=1)
        messages = "TagA:1,TagB:4,TagA:9,TagC:5,TagA:3,TagB:6"
        cp = go.run("sql92", c.namesrv_addr, topic=topic, group=group,
                    sql="(a BETWEEN 3 AND 6) AND TAGS IN ('TagA', 'TagB')", messages=messages,
                    expect=3)  # fmt: skip
        assert sorted(m["keys"] for m in received(cp)) == ["k1", "k4", "last"]
        wait_committed(c, group, topic, {0: 6})


def test_retry_then_dead_letter_queue(cluster: EmbeddedCluster, go: GoClients) -> None:
    """A failed consume goes back with CONSUMER_SEND_MSG_BACK to %RETRY%<group> and comes again
    (reconsumeTimes + 1, the topic restored from RETRY_TOPIC); after maxReconsumeTimes, the DLQ."""
    topic, group = unique("GRetry"), unique("gr")
    create_topic(cluster, topic)
    # The Go consumer reads its routes and rebalances before its first heartbeat, which is what makes
    # the broker create %RETRY%<group> (as RocketMQ's does); it would see the retry topic only at its
    # next route refresh, 30 s later. A group made beforehand (as an operator would) has it at once.
    create_topic(cluster, f"%RETRY%{group}", queues=1)
    cp = go.start("retry", cluster.namesrv_addr, topic=topic, group=group, max=2)
    cp.wait_event("wait", 60)
    sent = {s["key"]: s for s in events(cp, "sent")}
    dlq = f"%DLQ%{group}"
    wait_until(lambda: sent["poison"]["msgId"] in by_uniq_key(stored(cluster, dlq, 0)), 20,
               f"the poison message in {dlq}")  # fmt: skip
    answer(cp)
    finish(cp)
    got = received(cp)
    for key, times in (("ok", [0]), ("flaky", [0, 1]), ("poison", [0, 1, 2])):
        deliveries = [m for m in got if m["keys"] == key]
        assert [m["reconsumeTimes"] for m in deliveries] == times, key
        assert {m["topic"] for m in deliveries} == {topic}, key
        assert {m["msgId"] for m in deliveries} == {sent[key]["msgId"]}, key
        assert {m["body"] for m in deliveries} == {key}
    retries = by_uniq_key(stored(cluster, f"%RETRY%{group}", 0))
    assert {str(r.get_property("RETRY_TOPIC")) for r in retries.values()} == {topic}
    assert set(retries) == {sent["flaky"]["msgId"], sent["poison"]["msgId"]}
    dead = by_uniq_key(stored(cluster, dlq, 0))[sent["poison"]["msgId"]]
    assert dead.body == b"poison" and dead.topic == dlq
