"""The unmodified official 5.x SimpleConsumers over the gRPC endpoint: Python (rocketmq-python-client
5.1.2) receives, acks and changes an invisible duration; Node (rocketmq-client-nodejs 1.0.8)
receives and acks. Messages are sent over remoting (a 4.x producer), so this checks the consume path
alone. The clients run as subprocesses (tests/support/foreign_clients/grpc5.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.support.aio import run
from tests.support.broker_harness import BrokerUnderTest, broker_under_test
from tests.support.foreign_clients.grpc5 import (
    DOORS,
    door,
    endpoint_address,
    require_node5,
    require_python5,
    run_node5,
    run_python5,
)

# One JSON line per step. Receives of 10 s invisible time (the minimum a receive may ask for) and
# 5 s long polling (the minimum the broker holds a receive).
PYTHON_SIMPLE = """
import json, sys, time
from rocketmq import ClientConfiguration, Credentials, FilterExpression, SimpleConsumer

endpoint, topic, group = sys.argv[1:4]
config = ClientConfiguration(endpoint, Credentials(), request_timeout=3)
consumer = SimpleConsumer(config, group, {topic: FilterExpression("TagA")}, await_duration=5)
consumer.startup()

def say(step, **fields):
    print(json.dumps({"step": step, **fields}), flush=True)

def view(m):
    return {"id": m.message_id, "body": m.body.decode(), "tag": m.tag, "keys": sorted(m.keys),
            "attempt": m.delivery_attempt, "props": m.properties}

try:
    got = []
    deadline = time.time() + 20
    while len(got) < 2 and time.time() < deadline:
        got += consumer.receive(16, 10)
    say("received", messages=[view(m) for m in got])
    first, second = sorted(got, key=lambda m: m.body)
    consumer.ack(first)
    consumer.change_invisible_duration(second, 2)
    changed = time.time()
    say("acked-and-changed")
    again = consumer.receive(16, 10)
    say("again", messages=[view(m) for m in again], after=time.time() - changed)
    for m in again:
        consumer.ack(m)
    started = time.time()
    last = consumer.receive(16, 10)
    say("last", messages=[view(m) for m in last], waited=time.time() - started)
finally:
    consumer.shutdown()
"""

NODE_SIMPLE = """
const [mod, endpoint, topic, group] = process.argv.slice(1);
const { SimpleConsumer } = require(mod);
(async () => {
  const consumer = new SimpleConsumer({
    endpoints: endpoint, consumerGroup: group, subscriptions: new Map([[topic, 'TagA']]),
    awaitDuration: 5000, requestTimeout: 3000,
  });
  await consumer.startup();
  const got = [];
  const deadline = Date.now() + 20000;
  while (got.length < 2 && Date.now() < deadline) {
    for (const m of await consumer.receive(16, 10000)) got.push(m);
  }
  for (const m of got) await consumer.ack(m);
  console.log(JSON.stringify({ step: 'received', messages: got.map((m) => ({
    id: m.messageId, body: m.body.toString(), tag: m.tag, keys: m.keys, attempt: m.deliveryAttempt,
    props: Object.fromEntries(m.properties), corrupted: Boolean(m.corrupted),
  })) }));
  const last = await consumer.receive(16, 10000);
  console.log(JSON.stringify({ step: 'last', messages: last.map((m) => m.messageId) }));
  await consumer.shutdown();
})().catch((err) => { console.error(err); process.exit(1); });
"""


async def _two_messages(broker: BrokerUnderTest, topic: str) -> None:
    """Two TagA messages (ids ID0, ID1, one per queue) and one TagB the filter leaves out."""
    for i, tag in enumerate(("TagA", "TagA", "TagB")):
        answer = await broker.send(topic, f"body-{i}".encode(), queue_id=i % 2, tags=tag, keys=f"k{i}",
                                   props={"color": "red", "UNIQ_KEY": f"ID{i}"})  # fmt: skip
        assert answer.code == 0, answer.remark


def _steps(out: str) -> dict[str, Any]:
    rows = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    return {row["step"]: row for row in rows}


@pytest.mark.parametrize("impl", DOORS)
def test_python_simple_consumer_receives_acks_and_changes_invisible_duration(
    tmp_path: Path, impl: str
) -> None:
    require_python5()

    async def scenario() -> None:
        async with broker_under_test(tmp_path / "store", **door(impl)) as broker:
            await _two_messages(broker, "PySimpleT")
            result = await run_python5(
                PYTHON_SIMPLE, endpoint_address(broker), "PySimpleT", "PyGroup", home=tmp_path / "home"
            )
            assert broker.controller.offsets.query("PyGroup", "PySimpleT", 0) == 2  # both queues done
            assert broker.controller.offsets.query("PyGroup", "PySimpleT", 1) == 1
        steps = _steps(result.out)
        received = steps["received"]["messages"]
        assert sorted(m["id"] for m in received) == ["ID0", "ID1"]
        first = next(m for m in received if m["id"] == "ID0")
        assert (first["body"], first["tag"], first["keys"], first["attempt"]) == ("body-0", "TagA", ["k0"], 1)
        assert first["props"] == {"color": "red"}
        # ID1's invisible duration went from 10 s to 2 s: it came back after 2 s, not before, once.
        again = steps["again"]
        assert [(m["id"], m["attempt"]) for m in again["messages"]] == [("ID1", 2)]
        assert 1.8 <= float(again["after"]) < 9
        # Both acked: nothing comes back (the receive waits out its long polling).
        assert steps["last"]["messages"] == []

    run(scenario())


@pytest.mark.parametrize("impl", DOORS)
def test_node_simple_consumer_receives_and_acks(tmp_path: Path, impl: str) -> None:
    require_node5()

    async def scenario() -> None:
        async with broker_under_test(tmp_path / "store", **door(impl)) as broker:
            await _two_messages(broker, "NodeSimpleT")
            result = await run_node5(
                NODE_SIMPLE, endpoint_address(broker), "NodeSimpleT", "NodeGroup", home=tmp_path / "home"
            )
        steps = _steps(result.out)
        received = sorted(steps["received"]["messages"], key=lambda m: m["id"])
        assert [(m["id"], m["body"], m["tag"], m["attempt"]) for m in received] == [
            ("ID0", "body-0", "TagA", 1), ("ID1", "body-1", "TagA", 1),
        ]  # fmt: skip
        assert received[0]["keys"] == ["k0"] and received[0]["props"] == {"color": "red"}
        assert not any(m["corrupted"] for m in received)  # Node checked the body digest
        assert steps["last"]["messages"] == []

    run(scenario())
