"""4.x and 5.x clients on one topic, through a real name server and broker on 127.0.0.1: what
rocketlite's 4.x SDK sends, the unmodified official 5.x Python client receives (body, tag, keys,
user properties and message id intact), and what the 5.x client sends, a 4.x push consumer gets.
(One group shared by a 4.x push consumer and a 5.x consumer is test_mixed_4x_5x's subject.)"""

from __future__ import annotations

import json
import queue
from pathlib import Path

from rocketlite.client import ConsumeFromWhere, ConsumeStatus, Message, MessageExt, Producer, PushConsumer
from rocketlite.embedded import embedded
from tests.support.aio import run
from tests.support.foreign_clients.grpc5 import require_python5, run_python5
from tests.support.topics import create_topic

TOPIC = "Interop45"

# Receives until `count` messages are in, acking each; one JSON line per message.
RECEIVER = """
import json, sys, time
from rocketmq import ClientConfiguration, Credentials, FilterExpression, SimpleConsumer

endpoint, topic, group, count = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
consumer = SimpleConsumer(ClientConfiguration(endpoint, Credentials(), request_timeout=3), group,
                          {topic: FilterExpression("TagA")}, await_duration=5)
consumer.startup()
seen = 0
deadline = time.time() + 60
try:
    while seen < count and time.time() < deadline:
        for m in consumer.receive(16, 30):
            print(json.dumps({"id": m.message_id, "body": m.body.decode(), "tag": m.tag,
                              "keys": sorted(m.keys), "props": dict(m.properties)}), flush=True)
            consumer.ack(m)
            seen += 1
finally:
    consumer.shutdown()
"""

SENDER = """
import sys
from rocketmq import ClientConfiguration, Credentials, Message, Producer

endpoint, topic, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
producer = Producer(ClientConfiguration(endpoint, Credentials(), request_timeout=3), (topic,))
producer.startup()
try:
    for i in range(count):
        message = Message()
        message.topic, message.body, message.tag, message.keys = topic, f"from5-{i}".encode(), "TagB", f"k{i}"
        message.add_property("origin", "5.x")
        print(producer.send(message).message_id, flush=True)
finally:
    producer.shutdown()
"""


def test_4x_sdk_to_5x_client_and_back(tmp_path: Path) -> None:
    require_python5()
    with embedded(tmp_path / "store") as cluster:
        create_topic(cluster, TOPIC, 4)
        grpc = cluster.broker.parts.grpc if cluster.broker.parts else None
        assert grpc is not None and grpc.port > 0
        endpoint = f"127.0.0.1:{grpc.port}"

        # 4.x SDK producer -> 5.x SimpleConsumer
        with Producer("interop-pg", cluster.namesrv_addr) as producer:
            sent4 = {
                producer.send(
                    Message(TOPIC, f"from4-{i}", tags="TagA", keys=[f"key{i}"], properties={"origin": "4.x"})
                ).msg_id: i
                for i in range(3)
            }
        got = run(run_python5(RECEIVER, endpoint, TOPIC, "Interop5G", "3", home=tmp_path / "h1"))
        received = [json.loads(line) for line in got.out.split("\n") if line.startswith("{")]
        assert sorted(r["id"] for r in received) == sorted(sent4)
        for r in received:
            i = sent4[r["id"]]
            assert (r["body"], r["tag"], r["keys"], r["props"]) == (
                f"from4-{i}",
                "TagA",
                [f"key{i}"],
                {"origin": "4.x"},
            )

        # 5.x producer -> 4.x push consumer (from the first offset; it also sees the 4.x messages)
        done = run(run_python5(SENDER, endpoint, TOPIC, "3", home=tmp_path / "h2"))
        sent5 = done.out.split()
        assert len(sent5) == 3
        arrived: queue.Queue[tuple[str, bytes, str | None, str | None, str | None]] = queue.Queue()

        def on_messages(msgs: list[MessageExt], context: object) -> ConsumeStatus:
            del context
            for m in msgs:
                arrived.put((m.msg_id, m.body, m.tags, m.keys, m.properties.get("origin")))
            return ConsumeStatus.CONSUME_SUCCESS

        consumer = PushConsumer(
            "Interop4G", cluster.namesrv_addr, consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
        )
        consumer.subscribe(TOPIC, "TagB")
        consumer.register_message_listener(on_messages)
        consumer.start()
        try:
            by_id = {}
            for _ in range(3):
                item = arrived.get(timeout=30)
                by_id[item[0]] = item[1:]
        finally:
            consumer.close()
        assert sorted(by_id) == sorted(sent5)
        assert sorted(by_id.values()) == [(f"from5-{i}".encode(), "TagB", f"k{i}", "5.x") for i in range(3)]
