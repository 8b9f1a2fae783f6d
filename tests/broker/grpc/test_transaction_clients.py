"""Transactional messages from the unmodified official 5.x clients (rocketmq-python-client 5.1.2 and
rocketmq-client-nodejs 1.0.8): a committed transaction becomes visible, a rolled-back one never
does, and one left open is checked back over the producer's Telemetry stream, where the client's
own checker commits it (EndTransaction with SOURCE_SERVER_CHECK).

Each client script sends the three, prints `commit|rollback|unknown <message id>`, prints
`checked <message id>` from its checker, and stays up until the test has seen the open one
delivered. The checker answers COMMIT for every body but "rollback-*", so a check that happens to
come before the client's own end cannot change the outcome."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from tests.support.aio import run
from tests.support.broker_harness import BrokerUnderTest, broker_under_test, stored_by_uniq_key
from tests.support.foreign_clients.grpc5 import (
    ClientProcess,
    endpoint_address,
    require_node5,
    require_python5,
    start_node5,
    start_python5,
)

PYTHON_PRODUCER = """
import sys, threading
from rocketmq import (ClientConfiguration, Credentials, Message, Producer, TransactionChecker,
                      TransactionResolution)

endpoint, topic = sys.argv[1], sys.argv[2]

class Checker(TransactionChecker):
    def check(self, message):
        body = bytes(message.body).decode()
        print("checked", message.message_id, body, flush=True)
        if body.startswith("rollback"):
            return TransactionResolution.ROLLBACK
        return TransactionResolution.COMMIT

producer = Producer(ClientConfiguration(endpoint, Credentials(), request_timeout=3), (topic,), Checker())
producer.startup()

def half(body):
    transaction = producer.begin_transaction()
    message = Message()
    message.topic = topic
    message.body = body.encode()
    message.tag = "TagT"
    return transaction, producer.send(message, transaction)

transaction, receipt = half("commit-py")
transaction.commit()
print("commit", receipt.message_id, flush=True)
transaction, receipt = half("rollback-py")
transaction.rollback()
print("rollback", receipt.message_id, flush=True)
transaction, receipt = half("unknown-py")
print("unknown", receipt.message_id, flush=True)
threading.Event().wait(60)  # up until the test has seen the check's commit, then terminated
producer.shutdown()
"""

NODE_PRODUCER = """
const [mod, endpoint, topic] = process.argv.slice(1);
const { Producer } = require(mod);
const COMMIT = 1, ROLLBACK = 2;  // apache.rocketmq.v2.TransactionResolution
(async () => {
  const checker = {
    async check(view) {
      const body = view.body.toString();
      console.log(`checked ${view.messageId} ${body}`);
      return body.startsWith('rollback') ? ROLLBACK : COMMIT;
    },
  };
  const producer = new Producer({ endpoints: endpoint, topics: [topic], requestTimeout: 3000, checker });
  await producer.startup();
  const half = async (body) => {
    const transaction = producer.beginTransaction();
    const receipt = await producer.send({ topic, tag: 'TagT', body: Buffer.from(body) }, transaction);
    return [transaction, receipt];
  };
  let [transaction, receipt] = await half('commit-node');
  await transaction.commit();
  console.log(`commit ${receipt.messageId}`);
  [transaction, receipt] = await half('rollback-node');
  await transaction.rollback();
  console.log(`rollback ${receipt.messageId}`);
  [transaction, receipt] = await half('unknown-node');
  console.log(`unknown ${receipt.messageId}`);
  await new Promise((resolve) => setTimeout(resolve, 60000));  // until the test terminates it
  await producer.shutdown();
})().catch((err) => { console.error(err); process.exit(1); });
"""


async def _until_stored(broker: BrokerUnderTest, topic: str, uniq: str, timeout: float) -> bytes:
    deadline = time.monotonic() + timeout
    while True:
        stored = await stored_by_uniq_key(broker, topic)
        if uniq in stored:
            return stored[uniq][0]
        assert time.monotonic() < deadline, f"{uniq} never reached {topic}"
        await asyncio.sleep(0.05)


async def _three_transactions(
    broker: BrokerUnderTest, client: ClientProcess, topic: str, suffix: str
) -> None:
    try:
        ids = {}
        for kind in ("commit", "rollback", "unknown"):
            ids[kind] = (await client.wait_for(f"{kind} ", 30)).split()[1]
        checked = await client.wait_for(f"checked {ids['unknown']}", 30)
        assert checked.split()[2] == f"unknown-{suffix}"
        assert await _until_stored(broker, topic, ids["unknown"], timeout=15) == f"unknown-{suffix}".encode()
        stored = await stored_by_uniq_key(broker, topic)
        assert stored[ids["commit"]][0] == f"commit-{suffix}".encode()
        assert stored[ids["commit"]][1]["TAGS"] == "TagT"
        assert ids["rollback"] not in stored
    except BaseException:
        client.proc.terminate()
        print((await client.finish(10)).explain())
        raise
    client.proc.terminate()
    await client.finish(10)


def test_python_producer_commits_rolls_back_and_answers_the_check(tmp_path: Path) -> None:
    require_python5()

    async def scenario() -> None:
        async with broker_under_test(
            tmp_path / "store", transaction_timeout=1000, transaction_check_interval=100
        ) as broker:
            await broker.send("PyTxT")  # the topic exists before the producer asks for its route
            client = await start_python5(
                PYTHON_PRODUCER, endpoint_address(broker), "PyTxT", home=tmp_path / "home"
            )
            await _three_transactions(broker, client, "PyTxT", "py")

    run(scenario())


def test_node_producer_commits_rolls_back_and_answers_the_check(tmp_path: Path) -> None:
    require_node5()

    async def scenario() -> None:
        async with broker_under_test(
            tmp_path / "store", transaction_timeout=1000, transaction_check_interval=100
        ) as broker:
            await broker.send("NodeTxT")
            client = await start_node5(
                NODE_PRODUCER, endpoint_address(broker), "NodeTxT", home=tmp_path / "home"
            )
            await _three_transactions(broker, client, "NodeTxT", "node")

    run(scenario())
