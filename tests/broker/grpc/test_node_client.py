"""The unmodified 5.x Node client (npm rocketmq-client-nodejs 1.0.8) sends NORMAL messages over the
gRPC endpoint: it needs the Telemetry settings reply to finish startup (it hangs forever without
one, hence `timeout`). Its SendMessage carries no body digest (it checks, as decimal CRC32 or hex
MD5/SHA1, the digest of a message it receives). Messages are read back through
the 4.x pull path. Installed by `make test` into `.clients/npm5`; HOME is a temp dir (its log)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.support.aio import run
from tests.support.broker_harness import broker_under_test, stored_by_uniq_key
from tests.support.foreign_clients.grpc5 import (
    DOORS,
    check_stored,
    door,
    endpoint_address,
    require_node5,
    run_node5,
)

PRODUCER = """
const [mod, endpoint, topic, count] = process.argv.slice(1);
const { Producer } = require(mod);
(async () => {
  const producer = new Producer({ endpoints: endpoint, topics: [topic], requestTimeout: 3000 });
  await producer.startup();
  for (let i = 0; i < Number(count); i++) {
    const receipt = await producer.send({
      topic, tag: 'TagA', keys: [`key${i}`], body: Buffer.from(`node5-${i}`),
      properties: new Map([['color', 'red']]),
    });
    console.log(`${receipt.messageId} ${receipt.transactionId}`);
  }
  await producer.shutdown();
})().catch((err) => { console.error(err); process.exit(1); });
"""


@pytest.mark.parametrize("impl", DOORS)
def test_node_producer_sends_normal_messages(tmp_path: Path, impl: str) -> None:
    require_node5()

    async def scenario() -> None:
        async with broker_under_test(tmp_path / "store", **door(impl)) as broker:
            await broker.send("Node5T")  # the topic exists before the producer asks for its route
            done = await run_node5(PRODUCER, endpoint_address(broker), "Node5T", "3", home=tmp_path / "home")
            receipts = [line.split(" ") for line in done.out.splitlines() if line]
            assert len(receipts) == 3
            # Node's own test (Producer.test.ts): a NORMAL receipt's transactionId is its messageId.
            assert all(transaction_id == message_id for message_id, transaction_id in receipts), receipts
            ids = [message_id for message_id, _ in receipts]
            await check_stored(broker, "Node5T", ids, "node5")

    run(scenario())


# A NORMAL send with a tag and keys and no user properties: the shape the send lane serves.
PLAIN_PRODUCER = """
const [mod, endpoint, topic, count] = process.argv.slice(1);
const { Producer } = require(mod);
(async () => {
  const producer = new Producer({ endpoints: endpoint, topics: [topic], requestTimeout: 3000 });
  await producer.startup();
  for (let i = 0; i < Number(count); i++) {
    const body = Buffer.from(`node5-${i}`);
    console.log((await producer.send({ topic, tag: 'TagA', keys: [`key${i}`], body })).messageId);
  }
  await producer.shutdown();
})().catch((err) => { console.error(err); process.exit(1); });
"""


def test_node_sends_are_taken_by_the_compiled_loop(tmp_path: Path) -> None:
    """Node's SendMessage (no body digest; the queue it addresses in `queue_id`) on the h2 door:
    every call served by the send lane's compiled loop (`speedups.send_run`), none by its Python
    step or the handler, and stored as sent."""
    require_node5()
    from rocketlite.broker.grpc.send_lane import SendMessageLane  # noqa: PLC0415

    async def scenario() -> None:
        async with broker_under_test(tmp_path / "store", **door("nghttp2")) as broker:
            await broker.send("Node5L")  # the topic exists before the producer asks for its route
            parts = broker.controller.parts
            assert parts is not None and parts.grpc is not None
            lane = parts.grpc.send_lane
            assert isinstance(lane, SendMessageLane)
            address = endpoint_address(broker)
            done = await run_node5(PLAIN_PRODUCER, address, "Node5L", "6", home=tmp_path / "home")
            ids = done.out.split()
            assert len(ids) == 6
            assert (lane.taken, lane.compiled) == (6, 6)
            stored = await stored_by_uniq_key(broker, "Node5L")
            for i, message_id in enumerate(ids):
                body, props = stored[message_id]
                assert (body, props["TAGS"], props["KEYS"]) == (f"node5-{i}".encode(), "TagA", f"key{i}")

    run(scenario())


# Node's own test (rocketmq-clients nodejs/test/producer/Producer.test.ts, "should startup fail when
# topic not exists"), with `topics` (its `topic` option is not one of 1.0.8's) and 1.0.8's chain:
# startup retries the route three times (1 s, 2 s apart) and wraps the last error once more.
MISSING_TOPIC = """
const [mod, endpoint, topic] = process.argv.slice(1);
const { Producer, NotFoundException } = require(mod);
(async () => {
  const producer = new Producer({
    endpoints: endpoint, topics: [topic], requestTimeout: 3000, maxAttempts: 2,
  });
  try {
    await producer.startup();
    console.log(JSON.stringify({ started: true }));
  } catch (err) {
    const found = err.cause && err.cause.cause;
    console.log(JSON.stringify({
      message: err.message, notFound: found instanceof NotFoundException, name: found && found.name,
      code: found && found.code, causeMessage: found && found.message,
    }));
  }
  process.exit(0);
})().catch((err) => { console.error(err); process.exit(1); });
"""


def test_node_producer_startup_fails_with_not_found_for_an_unknown_topic(tmp_path: Path) -> None:
    require_node5()

    async def scenario() -> None:
        async with broker_under_test(tmp_path / "store") as broker:
            done = await run_node5(
                MISSING_TOPIC, endpoint_address(broker), "NoSuchNodeT", home=tmp_path / "home"
            )
        got = json.loads(done.out.splitlines()[-1])
        assert re.search(r"Startup the rocketmq client failed, clientId=[^,]+, error=", got["message"]), got
        assert got["notFound"] and got["name"] == "NotFoundException" and got["code"] == 40402, got
        assert re.search(
            r"CODE: 17 {2}DESC: No topic route info in name server for the topic: NoSuchNodeT",
            got["causeMessage"],
        ), got

    run(scenario())


# Node's own test (Producer.test.ts, "should send fifo message"): a received FIFO message has its
# messageGroup, and __SHARDINGKEY among its properties.
FIFO = """
const [mod, endpoint, topic, group] = process.argv.slice(1);
const { Producer, SimpleConsumer } = require(mod);
(async () => {
  const producer = new Producer({ endpoints: endpoint, topics: [topic], requestTimeout: 3000 });
  await producer.startup();
  const consumer = new SimpleConsumer({
    endpoints: endpoint, consumerGroup: group, subscriptions: new Map([[topic, 'TagF']]),
    awaitDuration: 5000, requestTimeout: 3000,
  });
  await consumer.startup();
  const receipt = await producer.send({
    topic, tag: 'TagF', body: Buffer.from('fifo-node'), messageGroup: 'fifoMessageGroup',
  });
  let messages = [];
  for (let i = 0; i < 5 && messages.length === 0; i++) messages = await consumer.receive(1, 10000);
  for (const m of messages) await consumer.ack(m);
  console.log(JSON.stringify({ sent: receipt.messageId, received: messages.map((m) => ({
    id: m.messageId, messageGroup: m.messageGroup, shardingKey: m.properties.get('__SHARDINGKEY'),
  })) }));
  await consumer.shutdown();
  await producer.shutdown();
})().catch((err) => { console.error(err); process.exit(1); });
"""


def test_node_simple_consumer_receives_a_fifo_message_with_its_group(tmp_path: Path) -> None:
    require_node5()

    async def scenario() -> None:
        async with broker_under_test(tmp_path / "store") as broker:
            await broker.send("NodeFifoGroupT")  # the topic exists before the clients ask for its route
            address = endpoint_address(broker)
            done = await run_node5(FIFO, address, "NodeFifoGroupT", "NodeFifoG", home=tmp_path / "home")
        got = json.loads(done.out.splitlines()[-1])
        assert got["received"] == [
            {"id": got["sent"], "messageGroup": "fifoMessageGroup", "shardingKey": "fifoMessageGroup"}
        ], got

    run(scenario())


# Node's own test (Producer.test.ts, "should send transaction message"): a committed transaction
# message has the property __transactionId__. Node checks it equals the receipt's transactionId,
# which is the message id from RocketMQ's proxy but names the half's place here (see
# tests/peers/java/test_java5_grpc.py::test_transaction_receipt_id_is_the_message_id, skipped).
TRANSACTION = """
const [mod, endpoint, topic, group] = process.argv.slice(1);
const { Producer, SimpleConsumer } = require(mod);
(async () => {
  const checker = { async check() { return 1; } };  // COMMIT
  const producer = new Producer({ endpoints: endpoint, topics: [topic], requestTimeout: 3000, checker });
  await producer.startup();
  const transaction = producer.beginTransaction();
  const receipt = await producer.send({ topic, tag: 'TagT', body: Buffer.from('tx-node') }, transaction);
  await transaction.commit();
  const consumer = new SimpleConsumer({
    endpoints: endpoint, consumerGroup: group, subscriptions: new Map([[topic, 'TagT']]),
    awaitDuration: 5000, requestTimeout: 3000,
  });
  await consumer.startup();
  let messages = [];
  for (let i = 0; i < 5 && messages.length === 0; i++) messages = await consumer.receive(2, 10000);
  for (const m of messages) await consumer.ack(m);
  console.log(JSON.stringify({ sent: receipt.messageId, received: messages.map((m) => ({
    id: m.messageId, transactionId: m.properties.get('__transactionId__'),
  })) }));
  await consumer.shutdown();
  await producer.shutdown();
})().catch((err) => { console.error(err); process.exit(1); });
"""


def test_node_simple_consumer_receives_a_transaction_message_with_its_transaction_id(tmp_path: Path) -> None:
    require_node5()

    async def scenario() -> None:
        async with broker_under_test(tmp_path / "store") as broker:
            await broker.send("NodeTxIdT")  # the topic exists before the clients ask for its route
            address = endpoint_address(broker)
            done = await run_node5(TRANSACTION, address, "NodeTxIdT", "NodeTxIdG", home=tmp_path / "home")
        got = json.loads(done.out.splitlines()[-1])
        assert got["received"] == [{"id": got["sent"], "transactionId": got["sent"]}], got

    run(scenario())
