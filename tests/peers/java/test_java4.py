"""The RocketMQ 4.9.8 Java client (rocketmq-client + rocketmq-acl from Maven Central) against rocketlite.

Each test starts an embedded name server + broker (or real processes, for the name-server
failover), runs one scenario of tests/peers/java/src/rocketlite/peers/Scenarios.java in its own
JVM, and asserts on what the client printed and on what the broker holds (its store, offsets,
locks, and our admin's queries). See tests/support/foreign_clients/java.py for how the driver is run.
"""

from __future__ import annotations

import zlib
from collections import Counter, defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rocketlite.admin.client import AdminClient
from rocketlite.admin.messages import query_msg_by_key
from rocketlite.client import ConsumeFromWhere, ConsumeStatus, Message, MessageExt, Producer, PushConsumer
from rocketlite.embedded import EmbeddedCluster, embedded
from rocketlite.protocol.bodies.message_queue import MessageQueue
from rocketlite.protocol.codes import RequestCode, ResponseCode
from rocketlite.protocol.formats.record import StoredRecord
from rocketlite.protocol.message import MessageConst
from rocketlite.protocol.reserved import SCHEDULE_TOPIC, TRANS_HALF_TOPIC
from tests.support import processes
from tests.support.aio import run
from tests.support.foreign_clients.java import REQUEST_REPLY, JavaClients, answer, events, finish, received
from tests.support.foreign_clients.real import BROKER_OVERRIDES, consumer_ids, stored
from tests.support.ha_harness import HaCluster, Proc, ha_cluster
from tests.support.names import unique
from tests.support.ports import broker_port
from tests.support.topics import create_topic, wait_until
from tests.support.wire import raw_request

pytestmark = pytest.mark.timeout(120)

LINE = "client4"
REPLY_TOPIC = "DefaultCluster_REPLY_TOPIC"
TRACE_TOPIC = "RMQ_SYS_TRACE_TOPIC"
# Delay levels of 1 s (level 2: 3 s), and transaction checks after 1 s instead of 6 s / 60 s.
OVERRIDES: dict[str, Any] = {
    **BROKER_OVERRIDES,
    "transaction_timeout": 1000,
    "transaction_check_interval": 1000,
    "trace_topic_enable": True,
}


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[EmbeddedCluster]:
    with embedded(tmp_path / "store", **OVERRIDES) as c:
        yield c


# -- helpers ---------------------------------------------------------------------------------------
def records(cluster: EmbeddedCluster, topic: str, queues: int = 4) -> list[StoredRecord]:
    return [r for q in range(queues) for r in stored(cluster, topic, q)]


def by_uniq_key(recs: list[StoredRecord]) -> dict[str, StoredRecord]:
    return {str(r.get_property(MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX)): r for r in recs}


def committed(cluster: EmbeddedCluster, group: str, topic: str) -> dict[int, int]:
    return cluster.broker.offsets.query_all(group, topic)


def queue_ends(sent: list[dict[str, Any]]) -> dict[int, int]:
    """Per queue, the offset after the last message sent there (what a consumer commits at the end)."""
    ends: dict[int, int] = defaultdict(int)
    for s in sent:
        ends[s["queueId"]] = max(ends[s["queueId"]], s["queueOffset"] + 1)
    return dict(ends)


def msg_ids(messages: list[dict[str, Any]]) -> list[str]:
    return [str(m["msgId"]) for m in messages]


# -- producers -------------------------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["sync", "async", "oneway"])
def test_send(cluster: EmbeddedCluster, java: JavaClients, mode: str) -> None:
    topic = unique("JSend")
    create_topic(cluster, topic)
    cp = java.run(LINE, "produce", cluster.namesrv_addr, topic=topic, group=unique("jp"), mode=mode, n=4)
    sent = events(cp, "sent", mode=mode)
    assert [s["i"] for s in sorted(sent, key=lambda s: s["i"])] == [0, 1, 2, 3], cp.events
    wait_until(lambda: len(records(cluster, topic)) == 4, 10, "the four messages in the store")
    recs = by_uniq_key(records(cluster, topic))
    for s in sent:
        rec = recs[s["msgId"]]
        assert (rec.tags, rec.keys, rec.get_property("seq")) == (mode, f"{mode}-{s['i']}", str(s["i"]))
        assert rec.body == f"{mode} {s['i']}".encode()
        if mode != "oneway":
            assert s["status"] == "SEND_OK"
            assert (rec.queue_id, rec.queue_offset, rec.msg_id) == (
                s["queueId"],
                s["queueOffset"],
                s["offsetMsgId"],
            )


def test_batch(cluster: EmbeddedCluster, java: JavaClients) -> None:
    topic = unique("JBatch")
    create_topic(cluster, topic)
    cp = java.run(LINE, "batch", cluster.namesrv_addr, topic=topic, group=unique("jp"), n=8)
    [s] = events(cp, "sent")
    ids, offset_ids = s["msgId"].split(","), s["offsetMsgId"].split(",")
    assert s["status"] == "SEND_OK" and len(ids) == len(offset_ids) == 8
    recs = stored(cluster, topic, s["queueId"])
    assert [r.get_property(MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX) for r in recs] == ids
    assert [r.msg_id for r in recs] == offset_ids
    assert [r.queue_offset for r in recs] == list(range(s["queueOffset"], s["queueOffset"] + 8))
    assert [r.keys for r in recs] == [f"batch-{i}" for i in range(8)]


@pytest.mark.parametrize(("compress_type", "type_bits"), [("ZLIB", 3), ("LZ4", 1), ("ZSTD", 2)])
def test_compressed_body(
    cluster: EmbeddedCluster, java: JavaClients, compress_type: str, type_bits: int
) -> None:
    """Bodies over compressMsgBodyOverHowmuch are stored as the client compressed them (sysFlag bit 0,
    the codec in bits 8-10) and come back whole; only the small one is stored plain."""
    topic = unique("JZip")
    create_topic(cluster, topic)
    cp = java.run(LINE, "compressed", cluster.namesrv_addr, topic=topic, group=unique("jc"),
                  compressType=compress_type)  # fmt: skip
    sent = {s["size"]: s for s in events(cp, "sent")}
    got = {m["keys"]: m for m in received(cp)}
    for size, s in sent.items():
        assert got[f"size-{size}"]["bodySha256"] == s["bodySha256"]
        assert got[f"size-{size}"]["bodyLength"] == size
    big = by_uniq_key(records(cluster, topic))[sent[16384]["msgId"]]
    small = by_uniq_key(records(cluster, topic))[sent[1024]["msgId"]]
    assert big.sys_flag & 1 and (big.sys_flag >> 8) & 0x7 == type_bits and len(big.body) < 16384
    assert not small.sys_flag & 1 and len(small.body) == 1024
    if compress_type == "ZLIB":
        assert len(zlib.decompress(big.body)) == 16384


def test_ordered_with_selector_and_orderly_consumer(cluster: EmbeddedCluster, java: JavaClients) -> None:
    topic, group = unique("JOrder"), unique("jo")
    create_topic(cluster, topic)
    cp = java.start(LINE, "ordered", cluster.namesrv_addr, topic=topic, group=group, orders=4, steps=5)
    cp.wait_event("wait", 60)
    # While the orderly consumer runs, the broker holds its LOCK_BATCH_MQ locks on every queue.
    [client_id] = consumer_ids(cluster, group)
    parts = cluster.broker.parts
    assert parts is not None
    for q in range(4):
        assert parts.locks.is_locked(
            group, MessageQueue(topic, cluster.broker.broker.broker_name, q), client_id
        )
    answer(cp)
    finish(cp)
    for s in events(cp, "sent"):
        assert s["queueId"] == s["order"] % 4, s
    steps: dict[str, list[int]] = defaultdict(list)
    for m in received(cp):
        steps[m["properties"]["order"]].append(int(m["properties"]["step"]))
    assert steps == {str(o): [0, 1, 2, 3, 4] for o in range(4)}


def test_delay_level(cluster: EmbeddedCluster, java: JavaClients) -> None:
    topic = unique("JDelay")
    create_topic(cluster, topic)
    cp = java.run(LINE, "delay", cluster.namesrv_addr, topic=topic, group=unique("jd"), level=2)
    sent = {s["body"]: s for s in events(cp, "sent")}
    got = {m["body"]: m for m in received(cp)}
    delayed = got["delayed"]
    assert delayed["msgId"] == sent["delayed"]["msgId"], delayed
    assert delayed["storeTimestamp"] - delayed["bornTimestamp"] >= 3000 - 20, delayed
    assert delayed["receivedAt"] - sent["delayed"]["sentAt"] >= 3000 - 20
    assert got["now"]["receivedAt"] < delayed["receivedAt"]
    parked = by_uniq_key(stored(cluster, SCHEDULE_TOPIC, 1))  # level 2 waits in queue 1
    assert parked[sent["delayed"]["msgId"]].get_property("REAL_TOPIC") == topic


def test_transaction_check_back(cluster: EmbeddedCluster, java: JavaClients) -> None:
    topic = unique("JTx")
    create_topic(cluster, topic)
    cp = java.run(LINE, "transaction", cluster.namesrv_addr, topic=topic, group=unique("jt"))
    sent = {s["body"]: s for s in events(cp, "sent")}
    assert all(s["status"] == "SEND_OK" for s in sent.values())
    checks = [e["message"]["body"] for e in events(cp, "check")]
    assert "unknown" in checks and not {"commit", "rollback"} & set(checks), checks
    # CHECK_TRANSACTION_STATE carries the half as the producer sent it: real topic, its transaction id
    check = events(cp, "check")[0]
    assert check["transactionId"] == sent["unknown"]["transactionId"] == sent["unknown"]["msgId"]
    assert (check["message"]["topic"], check["message"]["keys"]) == (topic, "tx-unknown")
    assert sorted(m["body"] for m in received(cp)) == ["commit", "unknown"]
    assert sorted(r.body for r in records(cluster, topic)) == [b"commit", b"unknown"]
    halves = by_uniq_key(records(cluster, TRANS_HALF_TOPIC, 1))
    assert {sent[b]["msgId"] for b in sent} <= set(halves)


def test_delivered_records_keep_their_parking_properties(cluster: EmbeddedCluster, java: JavaClients) -> None:
    """RocketMQ's messageTimeup and endMessageTransaction build the stored properties string before
    they clear DELAY / REAL_TOPIC / REAL_QID from the property map, so the record a consumer gets
    still carries them (and TRAN_MSG, PGROUP for a committed transaction message)."""
    topic = unique("JKeep")
    create_topic(cluster, topic)
    delayed = java.run(LINE, "delay", cluster.namesrv_addr, topic=topic, group=unique("jk"), level=2)
    props = next(m for m in received(delayed) if m["body"] == "delayed")["properties"]
    assert (props.get("DELAY"), props.get("REAL_TOPIC")) == ("2", topic) and "REAL_QID" in props, props
    tx = java.run(LINE, "transaction", cluster.namesrv_addr, topic=topic, group=unique("jk"))
    props = next(m for m in received(tx) if m["body"] == "commit")["properties"]
    assert (props.get("TRAN_MSG"), props.get("REAL_TOPIC")) == ("true", topic) and "REAL_QID" in props, props


# -- consumers -------------------------------------------------------------------------------------
def test_push_consumer_concurrently(cluster: EmbeddedCluster, java: JavaClients) -> None:
    topic, group = unique("JPush"), unique("jpc")
    create_topic(cluster, topic)
    cp = java.run(LINE, "push", cluster.namesrv_addr, topic=topic, group=group, n=16)
    sent = events(cp, "sent")
    got = received(cp)
    assert Counter(msg_ids(got)) == Counter(s["msgId"] for s in sent)
    positions = {s["msgId"]: (s["queueId"], s["queueOffset"]) for s in sent}
    assert all(positions[m["msgId"]] == (m["queueId"], m["queueOffset"]) for m in got)
    assert committed(cluster, group, topic) == queue_ends(sent)  # persisted at shutdown


def test_broadcasting(cluster: EmbeddedCluster, java: JavaClients) -> None:
    topic, group = unique("JCast"), unique("jb")
    create_topic(cluster, topic)
    cp = java.run(LINE, "broadcast", cluster.namesrv_addr, topic=topic, group=group, n=8)
    sent = {s["msgId"] for s in events(cp, "sent")}
    for name in ("b1", "b2"):
        assert set(msg_ids(received(cp, consumer=name))) == sent, name
    # Broadcasting consumers keep their offsets on the client, never on the broker.
    assert committed(cluster, group, topic) == {}
    home = cp.stderr_path.parent
    assert list((home / ".rocketmq_offsets").rglob("offsets.json")), "no local offset store"


def test_lite_pull_assign(cluster: EmbeddedCluster, java: JavaClients) -> None:
    topic, group = unique("JAssign"), unique("jla")
    create_topic(cluster, topic)
    cp = java.run(LINE, "lite_pull_assign", cluster.namesrv_addr, topic=topic, group=group, n=8)
    sent = events(cp, "sent")
    assert events(cp, "queues")[0]["count"] == 4
    # assign() starts a pull task per queue at once (a new group reads a young queue from 0), and
    # the seek(mq, 0) that follows restarts it: a pull already in flight may hand its messages to
    # poll() besides the restarted one (DefaultLitePullConsumerImpl.seek cancels the old task but
    # not its answer). So each message arrives once, or twice when that race hits, never more.
    got = Counter(msg_ids(received(cp)))
    assert set(got) == {s["msgId"] for s in sent} and max(got.values()) <= 2, got
    assert committed(cluster, group, topic) == queue_ends(sent)


def test_lite_pull_subscribe(cluster: EmbeddedCluster, java: JavaClients) -> None:
    topic, group = unique("JSub"), unique("jls")
    create_topic(cluster, topic)
    cp = java.run(LINE, "lite_pull_subscribe", cluster.namesrv_addr, topic=topic, group=group, n=8)
    sent = events(cp, "sent")
    assert Counter(msg_ids(received(cp))) == Counter(s["msgId"] for s in sent)
    assert committed(cluster, group, topic) == queue_ends(sent)


def test_tag_selector(cluster: EmbeddedCluster, java: JavaClients) -> None:
    topic = unique("JTags")
    create_topic(cluster, topic, queues=1)  # one queue, one consume thread: delivered in order
    messages = "TagA:1,TagC:2,TagB:3,TagC:4,TagD:5,TagA:6,TagB:7"
    cp = java.run(LINE, "tags", cluster.namesrv_addr, topic=topic, group=unique("jtag"),
                  expression="TagA || TagB", messages=messages)  # fmt: skip
    assert [m["keys"] for m in received(cp)] == ["k0", "k2", "k5", "last"]


def test_sql92_selector(tmp_path: Path, java: JavaClients) -> None:
    with embedded(tmp_path / "sql-store", enable_property_filter=True) as c:
        topic = unique("JSql")
        create_topic(c, topic, queues=1)
        messages = "TagA:1,TagB:4,TagA:9,TagC:5,TagA:3,TagB:6"
        cp = java.run(LINE, "sql92", c.namesrv_addr, topic=topic, group=unique("jsql"),
                      sql="(a BETWEEN 3 AND 6) AND TAGS IN ('TagA', 'TagB')", messages=messages)  # fmt: skip
        assert [m["keys"] for m in received(cp)] == ["k1", "k4", "last"]


def test_retry_then_dead_letter_queue(cluster: EmbeddedCluster, java: JavaClients) -> None:
    topic, group = unique("JRetry"), unique("jr")
    create_topic(cluster, topic)
    # As for a group that ran before: the 4.9.8 client reads a topic's queues before its rebalance
    # fetches the route, so a %RETRY% topic made by this start's heartbeat is picked up by the
    # rebalance after the next, 20 s later, when the two rebalances it asks for at start coalesce.
    create_topic(cluster, f"%RETRY%{group}", queues=1)
    cp = java.start(LINE, "retry_dlq", cluster.namesrv_addr, topic=topic, group=group, max=2)
    cp.wait_event("wait", 60)
    poison = next(s for s in events(cp, "sent") if s["key"] == "poison")
    dlq = f"%DLQ%{group}"
    wait_until(
        lambda: poison["msgId"] in by_uniq_key(stored(cluster, dlq, 0)), 20, f"the poison message in {dlq}"
    )
    answer(cp)
    finish(cp)
    deliveries = [m for m in received(cp) if m["keys"] == "poison"]
    assert [m["reconsumeTimes"] for m in deliveries] == [0, 1, 2]
    # Redeliveries come from %RETRY%<group>; the client restores the topic from RETRY_TOPIC.
    assert [m["topic"] for m in deliveries] == [topic] * 3
    assert [m["msgId"] for m in deliveries] == [poison["msgId"]] * 3
    assert Counter(m["keys"] for m in received(cp)) == {"ok-1": 1, "ok-2": 1, "poison": 3}
    dead = by_uniq_key(stored(cluster, dlq, 0))[poison["msgId"]]
    assert dead.body == b"poison" and dead.topic == dlq


def test_consume_from_timestamp(cluster: EmbeddedCluster, java: JavaClients) -> None:
    """CONSUME_FROM_TIMESTAMP only applies when the broker has no offset for the group: a queue that
    still starts at offset 0 answers QUERY_CONSUMER_OFFSET with 0, as RocketMQ does, so the push
    consumer reads the "old" messages too. A lite pull consumer seeking to offsetForTimestamp
    (SEARCH_OFFSET_BY_TIMESTAMP) reads only the "new" ones."""
    topic = unique("JTime")
    create_topic(cluster, topic)
    cp = java.run(
        LINE, "timestamp", cluster.namesrv_addr, topic=topic, group=unique("jts"), n=3, pushExpects=6
    )
    sent = events(cp, "sent")
    assert sorted(m["keys"] for m in received(cp, phase="push")) == sorted(
        f"{mode}-{i}" for mode in ("old", "new") for i in range(3)
    )
    assert sorted(m["keys"] for m in received(cp, phase="lite")) == ["new-0", "new-1", "new-2"]
    first_new: dict[int, int] = {}
    for s in sent:
        if s["mode"] == "new":
            first_new[s["queueId"]] = min(first_new.get(s["queueId"], s["queueOffset"]), s["queueOffset"])
    ends = queue_ends(sent)
    for e in events(cp, "offsetForTimestamp"):
        assert e["offset"] == first_new.get(e["queueId"], ends.get(e["queueId"], 0)), e


# -- trace, ACL, name servers, request-reply -----------------------------------------------------------
def test_message_trace(cluster: EmbeddedCluster, java: JavaClients) -> None:
    topic, group, key = unique("JTrace"), unique("jtr"), unique("tk")
    create_topic(cluster, topic)
    cp = java.run(LINE, "trace", cluster.namesrv_addr, topic=topic, group=group, key=key)
    [s] = events(cp, "sent")
    for by in ("id", "key"):
        rows = {e["record"]["type"]: e["record"] for e in events(cp, "trace", by=by)}
        assert set(rows) == {"Pub", "SubBefore", "SubAfter"}, by
        assert rows["Pub"]["topic"] == topic and rows["Pub"]["group"] == f"{group}_p"
        assert rows["Pub"]["keys"] == key and rows["Pub"]["success"]
        assert rows["SubBefore"]["group"] == rows["SubAfter"]["group"] == group
    # Our admin reads the same trace records (QUERY_MESSAGE on the trace topic, by id and by key).

    async def query(k: str) -> dict[str, Any]:
        async with AdminClient(cluster.namesrv_addr) as admin:
            return await query_msg_by_key(admin, topic=TRACE_TOPIC, key=k)

    for k in (s["msgId"], key):
        found = run(query(k))["messages"]
        assert found and all(s["msgId"] in m["body"] for m in found), k
        assert {t for m in found for t in ("Pub", "SubBefore", "SubAfter") if t in m["body"]} == {
            "Pub", "SubBefore", "SubAfter"
        }  # fmt: skip


ACL_YML = """\
accounts:
  - accessKey: javaUser
    secretKey: javaSecret123
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - {topic}=PUB|SUB
      - {denied}=SUB
"""


def test_acl_client_rpc_hook(tmp_path: Path, java: JavaClients) -> None:
    topic, denied = unique("JAcl"), unique("JAclDenied")
    acl_file = tmp_path / "plain_acl.yml"
    acl_file.write_text(ACL_YML.format(topic=topic, denied=denied))
    with embedded(tmp_path / "store", acl_enable=True, acl_config_file=str(acl_file)) as c:
        create_topic(c, topic)
        create_topic(c, denied)
        cp = java.run(LINE, "acl", c.namesrv_addr, topic=topic, deniedTopic=denied, group=unique("jacl"),
                      ak="javaUser", sk="javaSecret123")  # fmt: skip
        assert len(events(cp, "sent", mode="acl")) == 2
        errors = {e["mode"]: e["error"] for e in events(cp, "send_error")}
        assert set(errors) == {"denied-topic", "wrong-secret"}, cp.events
        assert errors["denied-topic"].get("responseCode") == 16, errors  # NO_PERMISSION
        assert "signature" in str(errors["wrong-secret"]).lower(), errors
        assert sorted(m["keys"] for m in received(cp)) == ["acl-0", "acl-1"]
        assert len(records(c, topic)) == 2 and not records(c, denied)


@pytest.fixture
def two_namesrvs(tmp_path: Path) -> Iterator[tuple[HaCluster, list[Proc]]]:
    """Two `rocketlite namesrv` processes and a `rocketlite broker` registered with both."""
    with ha_cluster(tmp_path) as hc:
        namesrvs = []
        for name in ("namesrv-a", "namesrv-b"):
            port = broker_port()
            conf = processes.write_conf(
                tmp_path / f"{name}.conf",
                {"listenPort": str(port), "kvConfigPath": str(tmp_path / name / "kv.json")},
            )
            log = tmp_path / f"{name}.log"
            proc = Proc(name, processes.spawn(["namesrv", "-c", str(conf)], log), log, port)
            hc.procs.append(proc)
            hc.wait_listening(proc)
            namesrvs.append(proc)
        hc.broker("broker", "ASYNC_MASTER", namesrvAddr=";".join(p.addr for p in namesrvs))
        yield hc, namesrvs


def test_namesrv_failover(two_namesrvs: tuple[HaCluster, list[Proc]], java: JavaClients) -> None:
    hc, namesrvs = two_namesrvs
    broker = hc.procs[-1]
    topics = [unique("JFail1"), unique("JFail2")]
    for t in topics:
        ext = {
            "topic": t,
            "readQueueNums": "4",
            "writeQueueNums": "4",
            "perm": "6",
            "topicFilterType": "SINGLE_TAG",
            "defaultTopic": "TBW102",
            "order": "false",
        }
        resp = raw_request(broker.addr, RequestCode.UPDATE_AND_CREATE_TOPIC, ext)
        assert resp.code == ResponseCode.SUCCESS, resp.remark
    addrs = [p.addr for p in namesrvs]
    wait_until(
        lambda: all(is_routed_at(a, t) for a in addrs for t in topics), 20, "both topics routed by both"
    )
    cp = java.start(LINE, "failover", ";".join(addrs), topic1=topics[0], topic2=topics[1],
                    group=unique("jf"))  # fmt: skip
    cp.wait_event("wait", 60)
    chosen = events(cp, "namesrv")[0]["chosen"]
    victim = next(p for p in namesrvs if p.addr == chosen)
    victim.kill9()
    answer(cp)
    finish(cp)
    after = events(cp, "namesrv")[1]["chosen"]
    assert after != chosen and after in {p.addr for p in namesrvs}
    assert [s["status"] for s in events(cp, "sent")] == ["SEND_OK", "SEND_OK"]
    failed = events(cp, "send_error")  # at most the one request that raced the connection's close
    assert len(failed) <= 1 and all(chosen in str(e["error"]) for e in failed), failed
    assert [m["topic"] for m in received(cp)] == [topics[1]]


def is_routed_at(namesrv_addr: str, topic: str) -> bool:
    resp = raw_request(namesrv_addr, RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
    return resp.code == ResponseCode.SUCCESS


def test_request_reply(cluster: EmbeddedCluster, java: JavaClients) -> None:
    """DefaultMQProducer.request answered by MessageUtil.createReplyMessage + send (SEND_REPLY_MESSAGE_V2),
    both in one JVM; the replies are also stored in the reply topic (storeReplyMessageEnable)."""
    topic = unique("JReq")
    create_topic(cluster, topic)
    cp = java.run(LINE, "request_reply", cluster.namesrv_addr, topic=topic, group=unique("jrr"))
    assert [e["body"] for e in events(cp, "reply")] == ["re: question 0", "re: question 1"]
    assert {e["topic"] for e in events(cp, "reply")} == {REPLY_TOPIC}
    assert [e["status"] for e in events(cp, "replied")] == ["SEND_OK", "SEND_OK"]
    replies = [r for r in stored(cluster, REPLY_TOPIC) if r.body.startswith(b"re: question")]
    assert sorted(r.body for r in replies) == [b"re: question 0", b"re: question 1"]
    assert all(r.get_property(MessageConst.MESSAGE_TYPE) == "reply" for r in replies)


def test_java_request_answered_by_our_sdk(cluster: EmbeddedCluster, java: JavaClients) -> None:
    """The Java requester's properties as our consumer gets them, our SDK's reply (325) pushed back
    and matched by the Java client's CORRELATION_ID."""
    topic = unique("JReqPy")
    create_topic(cluster, topic)
    seen: list[MessageExt] = []
    with Producer(unique("pyr"), cluster.namesrv_addr, instance_name="py-replier") as replier:

        def answer_it(msgs: list[MessageExt], ctx: Any) -> ConsumeStatus:
            for m in msgs:
                seen.append(m)
                replier.reply(m, b"re: " + m.body)
            return ConsumeStatus.CONSUME_SUCCESS

        consumer = PushConsumer(unique("pyc"), cluster.namesrv_addr, instance_name="py-replier",
                                consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)  # fmt: skip
        consumer.subscribe(topic)
        consumer.register_message_listener(answer_it)
        with consumer:
            cp = java.run(LINE, "request", cluster.namesrv_addr, main=REQUEST_REPLY, topic=topic,
                          group=unique("jq"), n=2)  # fmt: skip
    replies = events(cp, "reply")
    assert [e["body"] for e in replies] == ["re: question 0", "re: question 1"], cp.events
    assert all(e["topic"] == REPLY_TOPIC and e["correlationId"] == e["requestCorrelationId"] for e in replies)
    assert [m.properties[MessageConst.CORRELATION_ID] for m in seen] == [e["correlationId"] for e in replies]
    assert all(m.properties[MessageConst.MESSAGE_REPLY_TO_CLIENT].endswith("@requester") for m in seen)
    assert {m.properties[MessageConst.MESSAGE_TTL] for m in seen} == {"10000"}


def test_our_sdk_request_answered_by_java(cluster: EmbeddedCluster, java: JavaClients) -> None:
    """Our Producer.request answered by the Java client's createReplyMessage + send."""
    topic = unique("PyReqJ")
    create_topic(cluster, topic)
    cp = java.start(LINE, "reply", cluster.namesrv_addr, main=REQUEST_REPLY, topic=topic, group=unique("jr"),
                    n=2, timeoutMs=60_000)  # fmt: skip
    with Producer(unique("pyq"), cluster.namesrv_addr, instance_name="py-requester") as requester:
        replies = [requester.request(Message(topic, f"question {i}".encode()), 30) for i in range(2)]
    finish(cp)
    assert [r.body for r in replies] == [b"re: question 0", b"re: question 1"]
    # Matched by correlation id, not by line order: the broker hands a reply to its requester
    # before it answers the responder's send (RocketMQ's reply processor does too), so question 1
    # can be asked, and answered on another consume thread, before "replied" of question 0 is logged.
    replied = events(cp, "replied")
    answered = {e["correlationId"]: e for e in replied}
    assert len(replied) == len(answered) == 2, replied
    for r in replies:
        e = answered[r.properties[MessageConst.CORRELATION_ID]]
        assert e["status"] == "SEND_OK"
        assert e["replyTo"] == r.properties[MessageConst.MESSAGE_REPLY_TO_CLIENT]
        assert e["ttl"] == "30000"
