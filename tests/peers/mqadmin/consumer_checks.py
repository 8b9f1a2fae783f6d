"""The consumer half of the mqadmin suite's checks (test_mqadmin.py's test_consumers): a push
consumer that can hold its messages in flight, and what consumerConnection, producerConnection,
allocateMQ, consumerProgress, consumerStatus, brokerConsumeStats, statsAll, cloneGroupOffset,
resetOffsetByTime and skipAccumulatedMessage print, each compared with the broker's own tables."""

from __future__ import annotations

import json
import threading
from typing import Any

from rocketlite.client import ClientConfig, ConsumeStatus, Message, MessageExt, Producer, PushConsumer
from rocketlite.embedded import EmbeddedCluster
from tests.support.foreign_clients.mqadmin import MqAdmin
from tests.support.names import unique
from tests.support.topics import wait_until

BROKER = "broker-a"


class Listener:
    """Records what the consumer gets; `hold` makes it wait (the messages stay in flight)."""

    def __init__(self) -> None:
        self.bodies: list[bytes] = []
        self.lock = threading.Lock()
        self.release = threading.Event()
        self.release.set()
        self.waiting = 0

    def __call__(self, msgs: list[MessageExt], ctx: Any) -> ConsumeStatus:
        if not self.release.is_set():
            with self.lock:
                self.waiting += 1
        self.release.wait(60)
        with self.lock:
            self.bodies.extend(m.body for m in msgs)
        return ConsumeStatus.CONSUME_SUCCESS

    def count(self) -> int:
        with self.lock:
            return len(self.bodies)


def start_consumer(cluster: EmbeddedCluster, group: str, topic: str, listener: Listener) -> PushConsumer:
    config = ClientConfig(
        cluster.namesrv_addr, instance_name=unique("mqa"), persist_consumer_offset_interval=0.2
    )
    consumer = PushConsumer(group, config=config)
    consumer.subscribe(topic, "*")
    consumer.register_message_listener(listener)
    consumer.start()
    return consumer


def committed(cluster: EmbeddedCluster, group: str, topic: str, queues: int) -> list[int]:
    return [cluster.broker.offsets.query(group, topic, q) for q in range(queues)]


def max_offsets(cluster: EmbeddedCluster, topic: str, queues: int) -> list[int]:
    return [cluster.broker.store.get_max_offset_in_queue(topic, q) for q in range(queues)]


def check_connections(
    cluster: EmbeddedCluster, mq: MqAdmin, topic: str, group: str, pgroup: str, cid: str
) -> None:
    out = mq.ok("consumerConnection", "-g", group)
    rows = out.table("#ClientId")
    assert [r[:3] for r in rows] == [[cid, rows[0][1], "PYTHON"]]
    subs = {r[0]: r[1] for r in out.table("#Topic")}
    assert subs == {topic: "*", f"%RETRY%{group}": "*"}
    assert "ConsumeType: CONSUME_PASSIVELY" in out.out and "MessageModel: CLUSTERING" in out.out

    producers = mq.ok("producerConnection", "-g", pgroup, "-t", topic).lines()
    assert len(producers) == 1 and producers[0].split()[:2] == ["0001", producers[0].split()[1]]
    producer_cid = producers[0].split()[1]
    assert producers[0].split()[3] == "PYTHON"
    listed = mq.ok("producer", "-b", cluster.broker_addr).out
    assert f"producer group ({pgroup}) instance : clientId={producer_cid}," in listed

    allocated = json.loads(mq.ok("allocateMQ", "-t", topic, "-i", "10.0.0.1,10.0.0.2").out)["result"]
    assert sorted(allocated) == ["10.0.0.1", "10.0.0.2"]
    queues = sorted(q["queueId"] for qs in allocated.values() for q in qs)
    assert queues == [0, 1] and all(len(qs) == 1 for qs in allocated.values())


def check_progress(cluster: EmbeddedCluster, mq: MqAdmin, topic: str, group: str, cid: str) -> None:
    expected = [
        (
            topic,
            BROKER,
            q,
            cluster.broker.store.get_max_offset_in_queue(topic, q),
            cluster.broker.offsets.query(group, topic, q),
        )
        for q in (0, 1)
    ]
    rows = mq.ok("consumerProgress", "-g", group, "-t", topic).table("#Topic")
    assert [(r[0], r[1], int(r[2]), int(r[3]), int(r[4])) for r in rows] == expected
    assert all(r[5] == "0" for r in rows)  # diff
    with_ip = mq.ok("consumerProgress", "-g", group, "-s", "true").table("#Topic")  # asks the client (307)
    by_queue = {(r[0], int(r[2])): r[5] for r in with_ip}
    assert by_queue[(topic, 0)] == by_queue[(topic, 1)] == cid.split("@", 1)[0]
    groups = {r[0]: r for r in mq.ok("consumerProgress").table("#Group")}
    assert (
        groups[group][1] == "1" and groups[group][3:5] == ["PUSH", "CLUSTERING"] and groups[group][-1] == "0"
    )

    status = mq.ok("consumerStatus", "-g", group)
    row = status.table("#Index")[0]
    assert row[1] == cid
    info_file = mq.home / row[3]
    assert info_file.is_file(), status.describe()
    assert topic in info_file.read_text()
    assert "Rebalance OK" in status.out
    one = mq.ok("consumerStatus", "-g", group, "-i", cid).out
    assert "#Consumer Subscription#" in one and f"{topic}" in one

    stats = mq.ok("brokerConsumeStats", "-b", cluster.broker_addr).table("#Topic")
    mine = [(r[0], r[1], r[2], int(r[3]), int(r[4]), int(r[5])) for r in stats if r[1] == group]
    assert mine == [(t, group, b, q, broker, consumer) for t, b, q, broker, consumer in expected]

    all_stats = mq.ok("statsAll", "-t", topic).table("#Topic")
    assert len(all_stats) == 1 and all_stats[0][:3] == [topic, group, "0"]
    assert all_stats[0][-2:] == ["8", "8"]  # in and out in 24 hours


def check_offsets(cluster: EmbeddedCluster, mq: MqAdmin, topic: str, group: str, listener: Listener) -> None:
    twin = unique("MqaTwin")
    done = mq.ok("cloneGroupOffset", "-s", group, "-d", twin, "-t", topic).out
    assert done == f"clone group offset success. srcGroup[{group}], destGroup=[{twin}], topic[{topic}]"
    assert committed(cluster, twin, topic, 2) == committed(cluster, group, topic, 2)

    # back to the start: the running consumer takes the reset at its next pull (as in RocketMQ, a
    # pull held on an empty queue answers first; a message on each queue ends both holds) and gets
    # all 8 again, then the 2 new ones
    reset = mq.ok("resetOffsetByTime", "-g", group, "-t", topic, "-s", 0)
    assert sorted((r[0], int(r[1]), int(r[2])) for r in reset.table("#brokerName")) == [
        (BROKER, 0, 0),
        (BROKER, 1, 0),
    ]
    with Producer(unique("MqaPG"), cluster.namesrv_addr) as producer:
        for i in range(2):
            producer.send(Message(topic, f"more-{i}".encode()))
    wanted = {f"c-{i}".encode() for i in range(8)} | {b"more-0", b"more-1"}
    wait_until(
        lambda: wanted <= set(listener.bodies[8:]), 30, "the 8 messages consumed again, and 2 new ones"
    )

    # the offline twin: skip what piled up, then one queue to a chosen offset
    ends = max_offsets(cluster, topic, 2)
    assert committed(cluster, twin, topic, 2) != ends
    mq.ok("updateSubGroup", "-b", cluster.broker_addr, "-g", twin)  # a reset needs the group's config
    skipped = mq.ok("skipAccumulatedMessage", "-g", twin, "-t", topic).table("#brokerName")
    assert sorted((r[0], int(r[1]), int(r[2])) for r in skipped) == [(BROKER, q, ends[q]) for q in (0, 1)]
    assert committed(cluster, twin, topic, 2) == ends
    one = mq.ok(
        "resetOffsetByTime", "-g", twin, "-t", topic, "-s", "now", "-b", cluster.broker_addr, "-q", 0, "-o", 1
    )
    assert "reset consumer offset to 1" in one.out
    assert committed(cluster, twin, topic, 2) == [1, ends[1]]
