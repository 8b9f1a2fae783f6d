"""Unmodified real RocketMQ 4.x clients against an embedded name server + broker.

Clients (installed by `make test` into `.clients/`, see the Makefile):

- `ons`: npm ali-ons@3.12.0, pure JavaScript (Node), driven by tests/support/foreign_clients/ons_*.js.
- `cpp`: PyPI rocketmq==0.4.4, the real rocketmq-client-cpp 1.x (x86_64 only), in its own venv
  `.clients/cpp044`, driven by tests/support/foreign_clients/cpp_client.py.

Each test starts `embedded(...)`, starts consumer script(s) as subprocesses and waits for their
"ready"/"started" line, runs a producer script to completion, then reads the consumers' JSON lines
until the expected messages (or a deadline) arrive. A missing client skips its tests with the
reason, except on x86_64 with CI=true, where it fails.

Offsets: the C++ push consumer starts a new group at the queue's max offset and rebalances
asynchronously after `start()` returns, so a producer could win the race. Tests that use it
commit offset 0 for the group's queues on the broker first (`start_from_zero`); the client then
reads from the head no matter when its rebalance runs. ali-ons consumers use
CONSUME_FROM_FIRST_OFFSET and print "ready" once their first rebalance assigned queues.
"""

from __future__ import annotations

import time
from collections import Counter, defaultdict

import pytest

from rocketlite.broker.subscription_group import SubscriptionGroupConfig
from rocketlite.embedded import EmbeddedCluster
from rocketlite.protocol.codes import RequestCode, ResponseCode
from rocketlite.protocol.formats.record import decode_records
from rocketlite.protocol.message import string_to_properties
from tests.support.foreign_clients.real import (
    ClientProc,
    Clients,
    Event,
    body_of,
    msg_spec,
    probe,
    queue_of,
    reconsumes,
    require,
    same_msg_id,
    start_from_zero,
    stored,
)
from tests.support.names import unique
from tests.support.topics import create_topic, wait_until
from tests.support.wire import raw_request

pytestmark = pytest.mark.timeout(120)


# -- scenarios -----------------------------------------------------------------------------------
PAIRS = [("ons", "ons"), ("cpp", "cpp"), ("ons", "cpp"), ("cpp", "ons")]


@pytest.mark.parametrize(("producer", "consumer"), PAIRS, ids=[f"{p}-to-{c}" for p, c in PAIRS])
def test_tags_keys_properties_exactly_once(
    real_clients_cluster: EmbeddedCluster, clients: Clients, producer: str, consumer: str
) -> None:
    """Tags + keys + user properties; 'TagA || TagB' in a group gets exactly its messages, once."""
    require(producer)
    require(consumer)
    topic, group = unique("TagTopic"), unique("cg_tags")
    create_topic(real_clients_cluster, topic)
    if consumer == "cpp":
        start_from_zero(real_clients_cluster, group, topic)
    c = clients.consumer(
        consumer, real_clients_cluster, group, topic, expression="TagA || TagB", props=("color", "seq")
    )
    tags = ["TagA", "TagB", "TagC"]
    messages = [
        msg_spec(
            producer,
            topic,
            f"m{i}",
            tags=tags[i % 3],
            keys=[f"key{i}", f"k2_{i}"],
            props={"color": "red" if i % 2 else "blue", "seq": str(i)},
        )
        for i in range(24)
    ]
    sent = clients.produce(producer, real_clients_cluster, unique("pg"), messages)
    sent_ids = {messages[ev["i"]]["body"]: ev.get("msgId", ev.get("msg_id")) for ev in sent}
    wanted = {m["body"]: m for m in messages if m["tags"] != "TagC"}
    c.collect(lambda got: {body_of(ev) for ev in got} >= set(wanted), 30, f"{len(wanted)} TagA/TagB messages")
    c.stop()
    got = c.received()
    counts = Counter(body_of(ev) for ev in got)
    assert set(counts) == set(wanted), f"unexpected messages: {set(counts) - set(wanted)}"
    assert all(n == 1 for n in counts.values()), f"duplicates: {[b for b, n in counts.items() if n > 1]}"
    for ev in got:
        m = wanted[body_of(ev)]
        assert ev["topic"] == topic
        assert ev["tags"] == m["tags"]
        assert ev["keys"] == " ".join(m["keys"])
        assert reconsumes(ev) == 0
        props = ev["props"]
        assert props["color"] == m["props"]["color"] and props["seq"] == m["props"]["seq"], props
        # The id the producer got back: the broker's offset msgId (ali-ons), or the client's UNIQ_KEY
        # (C++), which the C++ consumer reports as the id and ali-ons keeps as a property.
        seen = (
            ev["props"].get("UNIQ_KEY")
            if (producer, consumer) == ("cpp", "ons")
            else ev.get("msgId", ev.get("msg_id"))
        )
        want = sent_ids[body_of(ev)]
        assert same_msg_id(seen, want), f"{body_of(ev)}: consumer saw id {seen}, producer got {want}"


@pytest.mark.parametrize("producer", ["ons", "cpp"])
def test_keys_are_queryable(real_clients_cluster: EmbeddedCluster, clients: Clients, producer: str) -> None:
    """Every key of a message finds it: in the store's index and by QUERY_MESSAGE to the broker."""
    topic = unique("KeyTopic")
    create_topic(real_clients_cluster, topic)
    messages = [
        msg_spec(producer, topic, f"q{i}", tags="T", keys=[f"order-{i}", f"user-{i % 2}"]) for i in range(6)
    ]
    clients.produce(producer, real_clients_cluster, unique("pg"), messages)
    store = real_clients_cluster.broker.store
    assert store.wait_dispatched(10)
    end = int(time.time() * 1000) + 60_000
    found = decode_records(bytes(store.query_message(topic, "order-3", 32, 0, end).body()))
    assert [r.body for r in found] == [b"q3"]
    user1 = decode_records(bytes(store.query_message(topic, "user-1", 32, 0, end).body()))
    assert sorted(r.body for r in user1) == [b"q1", b"q3", b"q5"]

    ext = {"topic": topic, "key": "order-4", "maxNum": "32", "beginTimestamp": "0", "endTimestamp": str(end)}
    resp = raw_request(real_clients_cluster.broker_addr, RequestCode.QUERY_MESSAGE, ext)
    assert resp.code == ResponseCode.SUCCESS, f"QUERY_MESSAGE answered {resp.code} {resp.remark!r}"
    records = decode_records(resp.body or b"")
    assert [r.body for r in records] == [b"q4"]
    assert records[0].topic == topic
    assert string_to_properties(records[0].properties_string)["KEYS"] == "order-4 user-0"


def test_sharding_key_and_orderly(real_clients_cluster: EmbeddedCluster, clients: Clients) -> None:
    """ali-ons shardingKey and C++ send_orderly keep a key on one queue, in order; C++ orderly consumer."""
    require("ons")
    require("cpp")
    topic, group = unique("OrderTopic"), unique("cg_order")
    create_topic(real_clients_cluster, topic)
    start_from_zero(real_clients_cluster, group, topic)
    c = clients.consumer("cpp", real_clients_cluster, group, topic, orderly=True)
    n = 15
    ons_msgs = [
        msg_spec("ons", topic, f"{key}:{i}", tags="O", sharding=key) for i in range(n) for key in ("sa", "sb")
    ]
    cpp_msgs = [msg_spec("cpp", topic, f"{key}:{i}", tags="O", order_arg=arg)
                for i in range(n) for key, arg in (("ca", 1), ("cb", 2))]  # fmt: skip
    sent = clients.produce("ons", real_clients_cluster, unique("pg"), ons_msgs)
    sent_cpp = clients.produce("cpp", real_clients_cluster, unique("pg"), cpp_msgs)

    # Producer side: one queue per key, offsets increasing in send order.
    placed: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for ev in sent:
        key = str(ons_msgs[ev["i"]]["body"]).split(":")[0]
        placed[key].append((int(ev["queueId"]), int(ev["queueOffset"])))
    for ev in sent_cpp:
        key = str(cpp_msgs[ev["i"]]["body"]).split(":")[0]
        placed[key].append((int(ev["queue_id"]), int(ev["offset"])))
    for key, spots in placed.items():
        assert len({q for q, _ in spots}) == 1, f"{key} spread over queues {spots}"
        offsets = [o for _, o in spots]
        assert offsets == sorted(offsets), f"{key} offsets out of order: {offsets}"
    assert placed["ca"][0][0] == 1 and placed["cb"][0][0] == 2  # arg % 4 queues

    total = 4 * n
    got = c.collect(lambda got: len({body_of(ev) for ev in got}) >= total, 40, f"{total} ordered messages")
    c.stop()
    per_key: dict[str, list[int]] = defaultdict(list)
    for ev in c.received():
        key, seq = body_of(ev).split(":")
        per_key[key].append(int(seq))
    for key, seqs in per_key.items():
        assert seqs == list(range(n)), f"{key} received out of order / duplicated: {seqs}"
    assert len(got) == total


@pytest.mark.parametrize("consumer", ["ons", "cpp"])
def test_retry_then_dead_letter_queue(
    real_clients_cluster: EmbeddedCluster, clients: Clients, consumer: str
) -> None:
    """A failed message comes back from %RETRY%<group> (reconsumeTimes 1, 2), then lands in %DLQ%<group>."""
    require("ons")
    require(consumer)
    topic, group = unique("RetryTopic"), unique("cg_retry")
    create_topic(real_clients_cluster, topic)
    real_clients_cluster.broker.groups.update(SubscriptionGroupConfig(group, retry_max_times=2))
    if consumer == "cpp":
        start_from_zero(real_clients_cluster, group, topic)
    # A fresh group: the C++ client looks %RETRY%<group> up before its first heartbeat makes the
    # broker create it, so it only pulls the retry queue after its next route poll + rebalance
    # (~10 s); ali-ons happens to look it up after its heartbeat.
    c = clients.consumer(consumer, real_clients_cluster, group, topic, fail_match="poison", max_reconsume=2)
    messages = [
        msg_spec("ons", topic, "ok-1", tags="T", keys=["ok1"]),
        msg_spec("ons", topic, "poison", tags="T", keys=["poison-key"], props={"color": "green"}),
        msg_spec("ons", topic, "ok-2", tags="T", keys=["ok2"]),
    ]
    sent = clients.produce("ons", real_clients_cluster, unique("pg"), messages)
    poison_id = next(ev["msgId"] for ev in sent if ev["i"] == 1)

    def poison_tries(got: list[Event]) -> list[Event]:
        return [ev for ev in got if body_of(ev) == "poison"]

    c.collect(lambda got: len(poison_tries(got)) >= 3 and {"ok-1", "ok-2"} <= {body_of(ev) for ev in got},
              40, "3 deliveries of the failing message")  # fmt: skip
    dlq = f"%DLQ%{group}"
    wait_until(
        lambda: real_clients_cluster.broker.store.get_max_offset_in_queue(dlq, 0) >= 1,
        20,
        f"a message in {dlq}",
    )
    c.stop()
    tries = poison_tries(c.received())
    assert [reconsumes(ev) for ev in tries] == [0, 1, 2], tries
    for ev in tries:
        assert ev["topic"] == topic, "the retry message must carry its original topic back (RETRY_TOPIC)"
        assert ev["tags"] == "T" and ev["keys"] == "poison-key"
    if consumer == "ons":  # ali-ons shows every property: redeliveries name their origin
        assert "RETRY_TOPIC" not in tries[0]["props"]
        for ev in tries[1:]:
            assert ev["props"].get("RETRY_TOPIC") == topic, ev["props"]
            assert ev["props"].get("ORIGIN_MESSAGE_ID") == poison_id, ev["props"]
    ok = Counter(body_of(ev) for ev in c.received() if body_of(ev) != "poison")
    assert ok == {"ok-1": 1, "ok-2": 1}
    [dead] = stored(real_clients_cluster, dlq)
    assert dead.body == b"poison"
    props = string_to_properties(dead.properties_string)
    assert props.get("KEYS") == "poison-key" and props.get("color") == "green", props
    assert props.get("ORIGIN_MESSAGE_ID") == poison_id, props
    assert props.get("RETRY_TOPIC") == topic, props


@pytest.mark.parametrize("producer", ["ons", "cpp"])
def test_delay_level(real_clients_cluster: EmbeddedCluster, clients: Clients, producer: str) -> None:
    """A level-2 message (3 s in this broker's table) arrives 3 s after its send, not before."""
    require(producer)
    topic, group = unique("DelayTopic"), unique("cg_delay")
    create_topic(real_clients_cluster, topic)
    c = clients.consumer("ons", real_clients_cluster, group, topic)
    messages = [
        msg_spec(producer, topic, "delayed", tags="D", keys=["dk"], delay_level=2),
        msg_spec(producer, topic, "now", tags="N"),
    ]
    sent = {ev["i"]: ev for ev in clients.produce(producer, real_clients_cluster, unique("pg"), messages)}
    got = c.collect(lambda got: {"delayed", "now"} <= {body_of(ev) for ev in got}, 20, "both messages")
    by_body = {body_of(ev): ev for ev in got}
    delayed, now = by_body["delayed"], by_body["now"]
    waited = int(delayed["ts"]) - int(sent[0]["ts"])
    assert waited >= 3000 - 20, f"delayed message arrived after {waited} ms"
    assert waited < 3000 + 10_000, f"delayed message took {waited} ms"
    assert int(now["ts"]) < int(delayed["ts"]), "the undelayed message must arrive first"
    assert delayed["topic"] == topic and delayed["tags"] == "D" and delayed["keys"] == "dk"
    c.stop()
    assert Counter(body_of(ev) for ev in c.received()) == {"delayed": 1, "now": 1}


def test_unknown_topic_auto_created_via_tbw102(
    real_clients_cluster: EmbeddedCluster, clients: Clients
) -> None:
    """The C++ producer falls back to TBW102's route; the broker creates the topic on the first send."""
    require("cpp")
    topic = unique("AutoTopic")
    assert real_clients_cluster.broker.topics.select(topic) is None
    messages = [msg_spec("cpp", topic, f"a{i}", tags="A", keys=[f"ak{i}"]) for i in range(5)]
    sent = clients.produce("cpp", real_clients_cluster, unique("pg"), messages)
    assert len(sent) == 5
    tc = real_clients_cluster.broker.topics.select(topic)
    assert tc is not None, "the topic was not created"
    assert tc.write_queue_nums == 4, "defaultTopicQueueNums from the C++ client is 4"
    wait_until(
        lambda: (
            raw_request(
                real_clients_cluster.namesrv_addr, RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}
            ).code
            == ResponseCode.SUCCESS
        ),
        15,
        "the name server to route the new topic",
    )
    if probe("ons") is None:
        c = clients.consumer("ons", real_clients_cluster, unique("cg_auto"), topic)
        c.collect(lambda got: len(got) >= 5, 20, "5 messages")
        c.stop()
        assert sorted(body_of(ev) for ev in c.received()) == [f"a{i}" for i in range(5)]


def test_two_consumers_split_queues_and_take_over(
    real_clients_cluster: EmbeddedCluster, clients: Clients
) -> None:
    """Two ali-ons consumers in one group split 4 queues; when one leaves, the other takes all."""
    require("ons")
    topic, group = unique("SplitTopic"), unique("cg_split")
    create_topic(real_clients_cluster, topic, queues=4)
    a = clients.consumer("ons", real_clients_cluster, group, topic, rebalance_ms=1000)
    b = clients.consumer("ons", real_clients_cluster, group, topic, rebalance_ms=1000)
    assert b.ready is not None
    b_queues = set(b.ready["queues"])
    # A drops B's queues on its next rebalance (ali-ons ignores NOTIFY_CONSUMER_IDS_CHANGED).
    a_ev = a.wait_for(
        lambda ev: ev.get("event") in ("ready", "queues") and set(ev["queues"]).isdisjoint(b_queues),
        20,
        f"A to give up B's queues {sorted(b_queues)}",
    )
    a_queues = set(a_ev["queues"])
    assert a_queues | b_queues == {0, 1, 2, 3} and len(a_queues) == len(b_queues) == 2

    batch1 = [msg_spec("ons", topic, f"b1-{i}", tags="S") for i in range(20)]
    clients.produce("ons", real_clients_cluster, unique("pg"), batch1)

    def bodies(cp: ClientProc) -> set[str]:
        return {body_of(ev) for ev in cp.received()}

    want1 = {m["body"] for m in batch1}
    deadline = time.monotonic() + 30
    while not want1 <= bodies(a) | bodies(b):
        ev_a = a.next_event(min(deadline, time.monotonic() + 0.2))
        ev_b = b.next_event(min(deadline, time.monotonic() + 0.2))
        if ev_a is None and ev_b is None and time.monotonic() > deadline:
            raise AssertionError(f"batch 1 incomplete: {sorted(want1 - bodies(a) - bodies(b))}")
    assert {queue_of(ev) for ev in a.received()} <= a_queues
    assert {queue_of(ev) for ev in b.received()} <= b_queues
    assert bodies(a).isdisjoint(bodies(b)) and bodies(a) and bodies(b)

    b.stop()
    assert any(ev.get("event") == "closed" for ev in b.events), b.diagnostics()
    batch2 = [msg_spec("ons", topic, f"b2-{i}", tags="S") for i in range(20)]
    clients.produce("ons", real_clients_cluster, unique("pg"), batch2)
    a.wait_for(
        lambda ev: ev.get("event") == "queues" and set(ev["queues"]) == {0, 1, 2, 3}, 20, "A to take all"
    )
    want2 = {m["body"] for m in batch2}
    a.collect(lambda got: want2 <= {body_of(ev) for ev in got}, 30, "batch 2 on A")
    a.stop()
    counts = Counter(body_of(ev) for ev in a.received() + b.received())
    assert set(counts) == want1 | want2
    dupes = {k: v for k, v in counts.items() if v > 1}
    assert not dupes, f"delivered more than once: {dupes}"
