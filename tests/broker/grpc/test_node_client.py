"""The unmodified 5.x Node client (npm rocketmq-client-nodejs 1.0.8) sends NORMAL messages over the
gRPC endpoint: it needs the Telemetry settings reply to finish startup (it hangs forever without
one, hence `timeout`), and writes CRC32 digests as decimal strings. Messages are read back through
the 4.x pull path. Installed by `make test` into `.clients/npm5`; HOME is a temp dir (its log)."""

from __future__ import annotations

from pathlib import Path

from tests.support.aio import run
from tests.support.broker_harness import broker_under_test
from tests.support.grpc_clients import check_stored, endpoint_address, require_node5, run_node5

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
    console.log(receipt.messageId);
  }
  await producer.shutdown();
})().catch((err) => { console.error(err); process.exit(1); });
"""


def test_node_producer_sends_normal_messages(tmp_path: Path) -> None:
    require_node5()

    async def scenario() -> None:
        async with broker_under_test(tmp_path / "store") as broker:
            await broker.send("Node5T")  # the topic exists before the producer asks for its route
            done = await run_node5(PRODUCER, endpoint_address(broker), "Node5T", "3", home=tmp_path / "home")
            ids = done.out.split()
            assert len(ids) == 3
            await check_stored(broker, "Node5T", ids, "node5")

    run(scenario())
