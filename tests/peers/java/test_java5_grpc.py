"""The official RocketMQ 5.x gRPC Java client (org.apache.rocketmq:rocketmq-client-java 5.2.0 from
Maven Central) against rocketlite's gRPC endpoint (grpcServerPort): the scenarios the Python and
Node 5.x clients run in tests/broker/grpc/ (producers of NORMAL, FIFO, DELAY and TRANSACTION
messages, SimpleConsumer, PushConsumer, ACL credentials, TLS), one JVM each
(tests/peers/java/src/rocketlite/peers/Scenarios5Grpc.java).

Each test asserts on what the client printed (its receipts and message views) and on what the
broker holds (its store, consumer offsets, DLQ). The client's TLS is on by default; the driver turns
it off unless a test asks (`tls=true`), and it trusts any certificate (the client's own choice).
Its log is `logs/rocketmq-client.log` under the test's temp dir, shown when a scenario fails.
"""

from __future__ import annotations

import shutil
from collections import defaultdict
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from rocketlite.broker.subscription_group import SubscriptionGroupConfig
from rocketlite.embedded import EmbeddedCluster, embedded
from rocketlite.protocol.formats.record import StoredRecord
from rocketlite.protocol.message import MessageConst
from rocketlite.protocol.requests.offsets import build_query_consumer_offset, parse_query_consumer_offset
from rocketlite.protocol.reserved import TIMER_TOPIC
from tests.support.foreign_clients.grpc5 import DOORS, door
from tests.support.foreign_clients.java import JavaClients, answer, events, finish, received
from tests.support.foreign_clients.real import stored
from tests.support.names import unique
from tests.support.topics import create_topic, wait_until
from tests.support.wire import raw_request

pytestmark = pytest.mark.timeout(180)

LINE = "grpc5"
# Transaction checks after 1 s instead of 6 s / 60 s.
OVERRIDES: dict[str, Any] = {"transaction_timeout": 1000, "transaction_check_interval": 100}


@pytest.fixture
def cluster(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[EmbeddedCluster]:
    """The broker on grpc.aio, or on the door a test is parametrized with (`indirect`)."""
    with embedded(tmp_path / "store", **OVERRIDES, **door(getattr(request, "param", "grpcio"))) as c:
        yield c


def endpoint(cluster: EmbeddedCluster) -> str:
    grpc = cluster.broker.parts.grpc if cluster.broker.parts else None
    assert grpc is not None and grpc.port > 0, "the gRPC endpoint is not serving"
    return f"127.0.0.1:{grpc.port}"


def records(cluster: EmbeddedCluster, topic: str, queues: int = 4) -> list[StoredRecord]:
    return [r for q in range(queues) for r in stored(cluster, topic, q)]


def by_uniq_key(recs: list[StoredRecord]) -> dict[str, StoredRecord]:
    return {str(r.get_property(MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX)): r for r in recs}


def _committed_past(cluster: EmbeddedCluster, group: str, rec: StoredRecord) -> bool:
    """Whether QUERY_CONSUMER_OFFSET answers an offset of `group` past `rec` on its queue."""
    cmd = build_query_consumer_offset(group, rec.topic, rec.queue_id)
    offset = parse_query_consumer_offset(raw_request(cluster.broker_addr, cmd.code, cmd.ext_fields))
    return offset is not None and offset > rec.queue_offset


def receipts(cp: Any, **match: Any) -> list[dict[str, Any]]:
    return [e["receipt"] for e in events(cp, "sent", **match)]


# -- producers -------------------------------------------------------------------------------------
@pytest.mark.parametrize("cluster", DOORS, indirect=True)
def test_normal_messages(cluster: EmbeddedCluster, java: JavaClients) -> None:
    """NORMAL sends: the store holds each body, tag, keys and user property under the client's
    message id, at the offset its receipt gives. (The queue is the broker's choice, as with Java's
    proxy; the receipt names the queue the client addressed.)"""
    topic = unique("J5Normal")
    create_topic(cluster, topic)
    cp = java.run(LINE, "normal", endpoint(cluster), topic=topic, n=3)
    sent = receipts(cp)
    assert len(sent) == 3
    held = by_uniq_key(records(cluster, topic))
    for i, r in enumerate(sent):
        rec = held[r["messageId"]]
        assert rec.body == f"java5-{i}".encode()
        assert rec.queue_offset == r["offset"]
        props = {k: rec.get_property(k) for k in ("TAGS", "KEYS", "color")}
        assert props == {"TAGS": "TagA", "KEYS": f"key{i}", "color": "red"}


@pytest.mark.parametrize("cluster", DOORS, indirect=True)
def test_fifo_messages_in_group_order(cluster: EmbeddedCluster, java: JavaClients) -> None:
    """FIFO sends over three message groups: each group in one queue, stored and received (by a
    SimpleConsumer of a consumeMessageOrderly group) in the order sent, each with its group."""
    topic, group = unique("J5Fifo"), unique("j5fifo")
    create_topic(cluster, topic)
    cluster.broker.groups.update(SubscriptionGroupConfig(group, consume_message_orderly=True))
    cp = java.run(LINE, "fifo", endpoint(cluster), topic=topic, group=group, n=12)
    sent = events(cp, "sent")
    assert len(sent) == 12
    held = by_uniq_key(records(cluster, topic))
    got = received(cp)
    assert sorted(m["messageId"] for m in got) == sorted(s["receipt"]["messageId"] for s in sent)
    for message_group in ("group-0", "group-1", "group-2"):
        ids = [s["receipt"]["messageId"] for s in sent if s["group"] == message_group]
        assert len({held[i].queue_id for i in ids}) == 1, f"{message_group} spread over queues"
        assert [held[i].queue_offset for i in ids] == sorted(held[i].queue_offset for i in ids)
        assert all(held[i].get_property(MessageConst.SHARDING_KEY) == message_group for i in ids)
        in_order = [m["messageId"] for m in got if m["messageId"] in ids]
        assert in_order == ids, f"{message_group} received out of order"
    assert {m["messageGroup"] for m in got} == {"group-0", "group-1", "group-2"}
    assert all(m["messageGroup"] == held[m["messageId"]].get_property(MessageConst.SHARDING_KEY) for m in got)


@pytest.mark.parametrize("cluster", ["nghttp2"], indirect=True)
def test_normal_send_is_taken_by_the_compiled_loop(cluster: EmbeddedCluster, java: JavaClients) -> None:
    """Java's SendMessage of a NORMAL message with a tag (no body digest; the queue it addresses in
    `queue_id`) on the h2 door: served by the send lane's compiled loop (`speedups.send_run`); the
    DELAY one before it by the handler."""
    from rocketlite.broker.grpc.send_lane import SendMessageLane  # noqa: PLC0415

    topic, group = unique("J5Lane"), unique("j5l")
    create_topic(cluster, topic)
    parts = cluster.broker.parts
    assert parts is not None and parts.grpc is not None
    lane = parts.grpc.send_lane
    assert isinstance(lane, SendMessageLane)
    cp = java.run(LINE, "delay", endpoint(cluster), topic=topic, group=group, delayMs=500)
    sent = {e["body"]: e for e in events(cp, "sent")}
    assert (lane.taken, lane.compiled) == (1, 1)
    now = by_uniq_key(records(cluster, topic))[sent["now"]["receipt"]["messageId"]]
    assert (now.body, now.get_property("TAGS")) == (b"now", "TagD")


def test_delay_message(cluster: EmbeddedCluster, java: JavaClients) -> None:
    """A DELAY message is parked with TIMER_DELIVER_MS = its delivery time, and received at (not
    before) that time; a NORMAL one sent after it comes first."""
    topic, group = unique("J5Delay"), unique("j5d")
    create_topic(cluster, topic)
    cp = java.run(LINE, "delay", endpoint(cluster), topic=topic, group=group, delayMs=3000)
    sent = {e["body"]: e for e in events(cp, "sent")}
    got = {m["body"]: m for m in received(cp)}
    at = sent["delayed"]["deliverAt"]
    assert got["delayed"]["receivedAt"] >= at
    assert got["now"]["receivedAt"] <= got["delayed"]["receivedAt"]
    parked = by_uniq_key(records(cluster, TIMER_TOPIC))
    delayed_id = sent["delayed"]["receipt"]["messageId"]
    assert parked[delayed_id].get_property(MessageConst.TIMER_DELIVER_MS) == str(at)
    delivered = by_uniq_key(records(cluster, topic))[delayed_id]
    assert int(str(delivered.get_property(MessageConst.TIMER_DEQUEUE_MS))) >= at


def test_transactions_commit_rollback_and_check(cluster: EmbeddedCluster, java: JavaClients) -> None:
    """Three transactions: the committed one is visible, the rolled-back one never is, the one left
    open is checked back over the producer's Telemetry stream and committed by the checker."""
    topic, group = unique("J5Tx"), unique("j5tx")
    create_topic(cluster, topic)
    cp = java.run(LINE, "transaction", endpoint(cluster), topic=topic, group=group)
    ids = {e["kind"]: e["receipt"]["messageId"] for e in events(cp, "sent")}
    assert set(ids) == {"commit", "rollback", "unknown"}
    # The broker may check a half again before the first answer is in (checks every 100 ms here),
    # and a half whose end comes late is checked too: the checker answers each by its body.
    checked = {e["message"]["messageId"]: e["message"] for e in events(cp, "checked")}
    assert ids["unknown"] in checked and set(checked) <= set(ids.values())
    assert (checked[ids["unknown"]]["body"], checked[ids["unknown"]]["tag"]) == ("unknown-java", "TagT")
    assert sorted(m["messageId"] for m in received(cp)) == sorted([ids["commit"], ids["unknown"]])
    held = by_uniq_key(records(cluster, topic))
    assert set(held) == {ids["commit"], ids["unknown"]}
    assert held[ids["commit"]].body == b"commit-java"
    assert held[ids["commit"]].get_property("KEYS") == "tx-commit"


# -- consumers -------------------------------------------------------------------------------------
@pytest.mark.parametrize("cluster", DOORS, indirect=True)
def test_simple_consumer_ack_and_invisible_time(cluster: EmbeddedCluster, java: JavaClients) -> None:
    """SimpleConsumer (TagA): receives the two TagA messages, acks one, shortens the other's
    invisible time to 2 s: it comes back after 2 s with delivery attempt 2, once; then nothing.
    The group's offsets end past both."""
    topic, group = unique("J5Simple"), unique("j5s")
    create_topic(cluster, topic)
    java.run(LINE, "normal", endpoint(cluster), topic=topic, n=2)
    cp = java.run(LINE, "simple", endpoint(cluster), topic=topic, group=group)
    steps = {e["event"]: e for e in cp.events}
    first = sorted(steps["received"]["messages"], key=lambda m: m["body"])
    assert [(m["body"], m["tag"], m["keys"], m["deliveryAttempt"]) for m in first] == [
        ("java5-0", "TagA", ["key0"], 1), ("java5-1", "TagA", ["key1"], 1),
    ]  # fmt: skip
    assert first[0]["properties"] == {"color": "red"} and not first[0]["corrupted"]
    again = steps["again"]
    assert [(m["messageId"], m["deliveryAttempt"]) for m in again["messages"]] == [(first[1]["messageId"], 2)]
    assert 1800 <= again["afterMs"] < 9000
    assert steps["last"]["messages"] == []
    held = by_uniq_key(records(cluster, topic))
    for m in first:
        rec = held[m["messageId"]]
        done = cluster.broker.offsets.query(group, topic, rec.queue_id)
        assert done is not None and done > rec.queue_offset, (rec.queue_id, done)


def test_push_consumer_retries_then_dead_letters(cluster: EmbeddedCluster, java: JavaClients) -> None:
    """PushConsumer: a message its listener accepts is delivered once; one it always fails comes
    back with delivery attempt 2 and, once the group's retryMaxTimes (1) is spent, is in
    %DLQ%<group> and not delivered again."""
    topic, group = unique("J5Push"), unique("j5push")
    create_topic(cluster, topic)
    cluster.broker.groups.update(SubscriptionGroupConfig(group, retry_max_times=1))
    cp = java.start(LINE, "push", endpoint(cluster), topic=topic, group=group, timeoutMs=120_000)
    cp.wait_event("ready", 60)
    accepted = receipts(java.run(LINE, "normal", endpoint(cluster), topic=topic, n=1))
    failing = receipts(java.run(LINE, "normal", endpoint(cluster), topic=topic, n=1, prefix="fail"))
    dlq = f"%DLQ%{group}"
    wait_until(lambda: cluster.broker.topics.select(dlq) is not None and bool(records(cluster, dlq, 1)),
               90, f"a message in {dlq}")  # fmt: skip
    answer(cp, "stop")
    finish(cp, 60)
    deliveries: dict[str, list[int]] = defaultdict(list)
    for m in received(cp):
        deliveries[m["messageId"]].append(m["deliveryAttempt"])
    assert dict(deliveries) == {accepted[0]["messageId"]: [1], failing[0]["messageId"]: [1, 2]}
    [dead] = records(cluster, dlq, 1)
    assert dead.body == b"fail-0" and dead.get_property(MessageConst.RETRY_TOPIC) == topic
    assert dead.get_property(MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX) == failing[0]["messageId"]
    held = by_uniq_key(records(cluster, topic))
    for r in (*accepted, *failing):
        rec = held[r["messageId"]]
        # The failing one's offset moves once its DLQ copy is flushed, which can come a little
        # after a read finds the copy: asked of the broker until it has moved.
        wait_until(partial(_committed_past, cluster, group, rec), 10,
                   f"{group}'s offset past {topic}:{rec.queue_id}:{rec.queue_offset}")  # fmt: skip


# -- credentials and TLS ---------------------------------------------------------------------------
ACL_YML = """\
globalWhiteRemoteAddresses: []
accounts:
  - accessKey: java5User
    secretKey: java5Secret
    defaultTopicPerm: DENY
    defaultGroupPerm: DENY
    topicPerms: [{topic}=PUB|SUB]
    groupPerms: [{group}=SUB]
"""


def test_acl_credentials(tmp_path: Path, java: JavaClients) -> None:
    """With aclEnable, a client signing with the account's secret sends and receives; one with a
    wrong secret fails at startup with UnauthorizedException naming the signature mismatch, and
    nothing of it is stored."""
    topic, group = unique("J5Acl"), unique("j5acl")
    acl_file = tmp_path / "plain_acl.yml"
    acl_file.write_text(ACL_YML.format(topic=topic, group=group))
    with embedded(tmp_path / "store", acl_enable=True, acl_config_file=str(acl_file)) as c:
        create_topic(c, topic)
        ok = java.run(LINE, "normal", endpoint(c), topic=topic, group=group, n=2, consume="true",
                      ak="java5User", sk="java5Secret")  # fmt: skip
        assert sorted(m["body"] for m in received(ok)) == ["java5-0", "java5-1"]
        bad = java.run(LINE, "normal", endpoint(c), topic=topic, n=1, ak="java5User", sk="wrong",
                       catch="true")  # fmt: skip
        [failed] = events(bad, "failed")
        assert not events(bad, "sent")
        text = str(failed["error"])
        assert "UnauthorizedException" in text and "signature mismatch for access key 'java5User'" in text
        assert sorted(r.body for r in records(c, topic)) == [b"java5-0", b"java5-1"]


@pytest.mark.skipif(shutil.which("openssl") is None, reason="the openssl command makes the test certificate")
@pytest.mark.parametrize("impl", DOORS)
def test_tls(tmp_path: Path, java: JavaClients, impl: str) -> None:
    """With tlsCertPath / tlsKeyPath the port speaks TLS only; the client with TLS on (its
    default) sends over it."""
    from tests.broker.grpc.test_tls import self_signed  # noqa: PLC0415

    cert, key = self_signed(tmp_path)
    with embedded(tmp_path / "store", tls_cert_path=str(cert), tls_key_path=str(key), **door(impl)) as c:
        topic = unique("J5Tls")
        create_topic(c, topic)
        cp = java.run(LINE, "normal", endpoint(c), topic=topic, n=1, tls="true")
        [r] = receipts(cp)
        assert by_uniq_key(records(c, topic))[r["messageId"]].body == b"java5-0"


# -- what RocketMQ 5's proxy answers and the official clients check (issue 22) -------------------------
NO_ROUTE = "CODE: 17  DESC: No topic route info in name server for the topic: {topic}"


def test_unknown_topic_route_not_found_rocketmq_text(cluster: EmbeddedCluster, java: JavaClients) -> None:
    """QueryRoute of a topic that does not exist: TOPIC_NOT_FOUND (40402) with the text of RocketMQ's
    proxy (its MQClientException), so the client raises NotFoundException at once: at startup
    (after its three immediate attempts) and on a send."""
    topic = unique("J5Missing")
    cp = java.run(LINE, "missing", endpoint(cluster), topic=topic)
    [startup] = events(cp, "startup_error")
    [send] = events(cp, "send_error")
    text = NO_ROUTE.format(topic=topic)
    cause = startup["error"]["causes"][-1]
    assert cause.startswith("org.apache.rocketmq.client.java.exception.NotFoundException: "), cause
    assert "response-code=40402] " + text in cause, cause
    assert startup["ms"] < 5000  # no request waited out its 5 s timeout
    assert send["error"]["class"] == "org.apache.rocketmq.client.java.exception.NotFoundException"
    assert "response-code=40402] " + text in send["error"]["message"], send
    assert cluster.broker.topics.select(topic) is None


def test_receipt_transaction_id_is_the_message_id(cluster: EmbeddedCluster, java: JavaClients) -> None:
    """A NORMAL, FIFO or DELAY send's receipt carries transaction_id = its message id, as RocketMQ 5's
    proxy answers (the broker's SendMessageResponseHeader.transactionId is the UNIQ_KEY)."""
    topic, group = unique("J5TxId"), unique("j5txid")
    create_topic(cluster, topic)
    sent = receipts(java.run(LINE, "normal", endpoint(cluster), topic=topic, n=2))
    sent += receipts(java.run(LINE, "delay", endpoint(cluster), topic=topic, group=group, delayMs=1000))
    assert len(sent) == 4
    assert all(r["transactionId"] == r["messageId"] for r in sent), sent


def test_received_fifo_message_carries_its_group(cluster: EmbeddedCluster, java: JavaClients) -> None:
    """A received FIFO message has its message_group in the system properties and, as RocketMQ 5's
    proxy shows every property outside MessageConst.STRING_HASH_SET, `__SHARDINGKEY` among its
    user properties (the Node client's own test checks both)."""
    topic, group = unique("J5FifoGroup"), unique("j5fg")
    create_topic(cluster, topic)
    cp = java.run(LINE, "fifo", endpoint(cluster), topic=topic, group=group, n=3)
    got = received(cp)
    assert len(got) == 3
    for m in got:
        assert m["messageGroup"] == f"group-{m['body'].removeprefix('fifo-')}", m
        assert m["properties"] == {"__SHARDINGKEY": m["messageGroup"]}, m


def test_received_transaction_message_carries_its_transaction_id(
    cluster: EmbeddedCluster, java: JavaClients
) -> None:
    """A committed transaction message, and the half its checker is shown, carry the property
    `__transactionId__` = the message id, as RocketMQ's broker writes it when it parks the half
    (TransactionalMessageBridge) and its proxy shows it (not in MessageConst.STRING_HASH_SET)."""
    topic, group = unique("J5TxProp"), unique("j5txp")
    create_topic(cluster, topic)
    cp = java.run(LINE, "transaction", endpoint(cluster), topic=topic, group=group)
    got = received(cp) + [e["message"] for e in events(cp, "checked")]
    assert len(got) >= 3  # two received, one or more checks
    for m in got:
        assert m["properties"].get("__transactionId__") == m["messageId"], m


def test_transaction_receipt_id_is_the_message_id(cluster: EmbeddedCluster, java: JavaClients) -> None:
    """A TRANSACTION send's receipt has transaction_id = its message id, as from RocketMQ's proxy,
    so `__transactionId__` of the received message equals the receipt's transaction id (the Node
    client's own test checks that equality)."""
    topic, group = unique("J5TxReceipt"), unique("j5txr")
    create_topic(cluster, topic)
    cp = java.run(LINE, "transaction", endpoint(cluster), topic=topic, group=group)
    sent = {e["receipt"]["messageId"]: e["receipt"] for e in events(cp, "sent")}
    assert all(r["transactionId"] == r["messageId"] for r in sent.values()), sent
    for m in received(cp):
        assert m["properties"]["__transactionId__"] == sent[m["messageId"]]["transactionId"]
