"""FIFO and DELAY messages from the unmodified official 5.x clients (rocketmq-python-client 5.1.2 and
rocketmq-client-nodejs 1.0.8): a message group's messages are stored in one queue in the order
they were sent, with `__SHARDINGKEY`; a delayed message is parked with TIMER_DELIVER_MS (the
Python client's milliseconds, which it writes into the seconds field, read as such) and reaches its
topic only at its time.

Each script prints `<group> <message id>` per FIFO message in send order, then `delay <message id>
<delivery ms>`."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from rocketlite.protocol import reserved
from rocketlite.protocol.message import string_to_properties
from tests.support.aio import run
from tests.support.broker_harness import BrokerUnderTest, broker_under_test, stored_by_uniq_key
from tests.support.foreign_clients.grpc5 import (
    DOORS,
    door,
    endpoint_address,
    require_node5,
    require_python5,
    run_node5,
    run_python5,
)
from tests.support.wire import pull_until_end

PYTHON_PRODUCER = """
import sys, time
from rocketmq import ClientConfiguration, Credentials, Message, Producer

endpoint, topic = sys.argv[1], sys.argv[2]
producer = Producer(ClientConfiguration(endpoint, Credentials(), request_timeout=3), (topic,))
producer.startup()
try:
    for i in range(12):
        message = Message()
        message.topic = topic
        message.body = f"py-{i}".encode()
        message.message_group = f"group-{i % 3}"
        print(message.message_group, producer.send(message).message_id, flush=True)
    message = Message()
    message.topic = topic
    message.body = b"py-delay"
    at_ms = int(time.time() * 1000) + 2000
    message.delivery_timestamp = at_ms  # documented as ms
    print("delay", producer.send(message).message_id, at_ms, flush=True)
finally:
    producer.shutdown()
"""

NODE_PRODUCER = """
const [mod, endpoint, topic] = process.argv.slice(1);
const { Producer } = require(mod);
(async () => {
  const producer = new Producer({ endpoints: endpoint, topics: [topic], requestTimeout: 3000 });
  await producer.startup();
  for (let i = 0; i < 12; i++) {
    const messageGroup = `group-${i % 3}`;
    const receipt = await producer.send({ topic, body: Buffer.from(`node-${i}`), messageGroup });
    console.log(`${messageGroup} ${receipt.messageId}`);
  }
  const at = new Date(Date.now() + 2000);
  const receipt = await producer.send({ topic, body: Buffer.from('node-delay'), deliveryTimestamp: at });
  console.log(`delay ${receipt.messageId} ${at.getTime()}`);
  await producer.shutdown();
})().catch((err) => { console.error(err); process.exit(1); });
"""


async def _queues_of(broker: BrokerUnderTest, topic: str) -> dict[str, list[int]]:
    """Each stored UNIQ_KEY's (queue id, queue offset), for messages a 5.x client sent."""
    await broker.dispatched()
    tc = broker.controller.topics.select(topic)
    assert tc is not None
    where: dict[str, list[int]] = {}
    for queue_id in range(tc.read_queue_nums):
        records, _ = await pull_until_end(broker.client, broker.addr, topic, queue_id, group="g")
        for r in records:
            props = string_to_properties(r.properties_string)
            if "__SHARDINGKEY" in props:
                where[props["UNIQ_KEY"]] = [queue_id, r.queue_offset]
    return where


async def _check(broker: BrokerUnderTest, topic: str, lines: list[str]) -> None:
    sent = [line.split() for line in lines if line.startswith("group-")]
    assert len(sent) == 12
    where = await _queues_of(broker, topic)
    for group in {g for g, _ in sent}:
        ids = [message_id for g, message_id in sent if g == group]
        assert len({where[i][0] for i in ids}) == 1, f"{group} spread over queues"
        offsets = [where[i][1] for i in ids]
        assert offsets == sorted(offsets), f"{group} stored out of send order"
    _, delayed_id, at_text = next(line.split() for line in lines if line.startswith("delay "))
    at_ms = int(at_text)
    parked = await stored_by_uniq_key(broker, reserved.TIMER_TOPIC)
    stored_at = int(parked[delayed_id][1]["TIMER_DELIVER_MS"])
    assert at_ms - 1000 < stored_at <= at_ms  # Node keeps ms; Python's seconds field keeps ms too
    deadline = time.monotonic() + 15
    while (delivered := (await stored_by_uniq_key(broker, topic)).get(delayed_id)) is None:
        assert time.monotonic() < deadline, "the delayed message never arrived"
        await asyncio.sleep(0.05)
    assert int(delivered[1]["TIMER_DEQUEUE_MS"]) >= stored_at  # not before its time


@pytest.mark.parametrize("impl", DOORS)
def test_python_producer_fifo_and_delay(tmp_path: Path, impl: str) -> None:
    require_python5()

    async def scenario() -> None:
        async with broker_under_test(tmp_path / "store", **door(impl)) as broker:
            await broker.send("PyFifoT")  # the topic exists before the producer asks for its route
            done = await run_python5(
                PYTHON_PRODUCER, endpoint_address(broker), "PyFifoT", home=tmp_path / "home"
            )
            await _check(broker, "PyFifoT", done.lines())

    run(scenario())


def test_node_producer_fifo_and_delay(tmp_path: Path) -> None:
    require_node5()

    async def scenario() -> None:
        async with broker_under_test(tmp_path / "store") as broker:
            await broker.send("NodeFifoT")
            done = await run_node5(
                NODE_PRODUCER, endpoint_address(broker), "NodeFifoT", home=tmp_path / "home"
            )
            await _check(broker, "NodeFifoT", done.lines())

    run(scenario())
