"""rocketlite's own client against a real one, both ways: ali-ons produces and our PushConsumer
consumes, then our Producer produces and ali-ons consumes. Tags, keys and user properties must
arrive intact, each message exactly once."""

from __future__ import annotations

import queue
from collections import Counter

from rocketlite.client import ConsumeFromWhere, ConsumeStatus, Message, MessageExt, Producer, PushConsumer
from rocketlite.embedded import EmbeddedCluster
from tests.support.foreign_clients.real import Clients, body_of, msg_spec, require
from tests.support.names import unique
from tests.support.topics import create_topic


def test_ali_ons_producer_to_rocketlite_consumer(
    real_clients_cluster: EmbeddedCluster, clients: Clients
) -> None:
    require("ons")
    topic, group = unique("InteropA"), unique("cg_interop_a")
    create_topic(real_clients_cluster, topic)
    got: queue.Queue[MessageExt] = queue.Queue()

    def listener(msgs: list[MessageExt], _ctx: object) -> ConsumeStatus:
        for m in msgs:
            got.put(m)
        return ConsumeStatus.CONSUME_SUCCESS

    consumer = PushConsumer(
        group,
        real_clients_cluster.namesrv_addr,
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
    )
    consumer.subscribe(topic, "TagA || TagB")
    consumer.register_message_listener(listener)
    consumer.start()
    try:
        tags = ["TagA", "TagB", "TagC"]
        messages = [
            msg_spec("ons", topic, f"m{i}", tags=tags[i % 3], keys=[f"key{i}", f"k2_{i}"],
                     props={"color": "red" if i % 2 else "blue", "seq": str(i)})
            for i in range(12)
        ]  # fmt: skip
        clients.produce("ons", real_clients_cluster, unique("pg"), messages)
        wanted = {m["body"]: m for m in messages if m["tags"] != "TagC"}
        received: list[MessageExt] = []
        while {r.body.decode() for r in received} < set(wanted):
            received.append(got.get(timeout=30))
    finally:
        consumer.close()
    counts = Counter(r.body.decode() for r in received)
    assert set(counts) == set(wanted) and all(n == 1 for n in counts.values()), counts
    for r in received:
        m = wanted[r.body.decode()]
        assert r.topic == topic and r.tags == m["tags"]
        assert r.keys == " ".join(m["keys"])
        assert r.properties["color"] == m["props"]["color"] and r.properties["seq"] == m["props"]["seq"]


def test_rocketlite_producer_to_ali_ons_consumer(
    real_clients_cluster: EmbeddedCluster, clients: Clients
) -> None:
    require("ons")
    topic, group = unique("InteropB"), unique("cg_interop_b")
    create_topic(real_clients_cluster, topic)
    c = clients.consumer("ons", real_clients_cluster, group, topic, expression="TagA", props=("color",))
    sent: dict[str, str] = {}
    with Producer(unique("pg"), real_clients_cluster.namesrv_addr) as producer:
        for i in range(10):
            msg = Message(topic, f"p{i}".encode(), tags="TagA" if i % 2 == 0 else "TagB",
                          keys=[f"key{i}", "shared"], properties={"color": f"c{i}"})  # fmt: skip
            result = producer.send(msg)
            sent[f"p{i}"] = result.msg_id
    wanted = {f"p{i}" for i in range(0, 10, 2)}
    c.collect(lambda evs: {body_of(e) for e in evs} >= wanted, 30, "the TagA messages")
    c.stop()
    events = c.received()
    counts = Counter(body_of(e) for e in events)
    assert set(counts) == wanted and all(n == 1 for n in counts.values()), counts
    for e in events:
        i = int(body_of(e)[1:])
        assert e["tags"] == "TagA" and e["keys"] == f"key{i} shared"
        assert e["props"]["color"] == f"c{i}"
        assert e["props"]["UNIQ_KEY"] == sent[body_of(e)]  # our msgId is the UNIQ_KEY, as Java's
