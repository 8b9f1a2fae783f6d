"""The unmodified 5.x Node client (npm rocketmq-client-nodejs 1.0.8) sends NORMAL messages over the
gRPC endpoint: it needs the Telemetry settings reply to finish startup (it hangs forever without
one, hence `timeout`), and writes CRC32 digests as decimal strings. Messages are read back through
the 4.x pull path. Installed by `make test` into `.clients/npm5`; HOME is a temp dir (its log)."""

from __future__ import annotations

import asyncio
import os
import platform
import shutil
from pathlib import Path

import pytest

from rocketlite.protocol.proto import available
from tests.support.aio import run
from tests.support.broker_harness import broker_under_test, stored_by_uniq_key

ROOT = Path(__file__).resolve().parents[3]
CLIENTS = Path(os.environ.get("ROCKETLITE_CLIENTS", ROOT / ".clients"))
MODULE = CLIENTS / "npm5" / "node_modules" / "rocketmq-client-nodejs"

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


def _require() -> None:
    why = available()
    if why is None and shutil.which("node") is None:
        why = "node is not installed"
    if why is None and not (MODULE / "package.json").is_file():
        why = f"rocketmq-client-nodejs 1.0.8 is not installed in {MODULE} (run `make clients`)"
    if why is None:
        return
    if os.environ.get("CI", "").lower() == "true" and platform.machine() in ("x86_64", "AMD64"):
        pytest.fail(f"{why} (CI=true on x86_64: the 5.x client is required)")
    pytest.skip(why)


def test_node_producer_sends_normal_messages(tmp_path: Path) -> None:
    _require()
    home = tmp_path / "home"
    home.mkdir()

    async def scenario() -> None:
        async with broker_under_test(tmp_path / "store") as broker:
            await broker.send("Node5T")  # the topic exists before the producer asks for its route
            endpoint = broker.controller.parts.grpc if broker.controller.parts else None
            assert endpoint is not None and endpoint.port > 0
            proc = await asyncio.create_subprocess_exec(
                "timeout", "60", "node", "-e", PRODUCER,
                str(MODULE), f"127.0.0.1:{endpoint.port}", "Node5T", "3",
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
                env={**os.environ, "HOME": str(home)},
            )  # fmt: skip
            out, err = await asyncio.wait_for(proc.communicate(), 90)
            if proc.returncode != 0:
                logs = "\n".join(p.read_text(errors="replace")[-3000:] for p in home.rglob("*.log"))
                pytest.fail(f"node producer exited {proc.returncode}: {err.decode()[-3000:]}\n{logs}")
            ids = out.decode().split()
            stored = await stored_by_uniq_key(broker, "Node5T")
            assert len(ids) == 3
            for i, message_id in enumerate(ids):
                body, props = stored[message_id]
                assert (body, props["TAGS"], props["KEYS"], props["color"]) == (
                    f"node5-{i}".encode(), "TagA", f"key{i}", "red",
                )  # fmt: skip

    run(scenario())
