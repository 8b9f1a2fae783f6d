"""The unmodified official 5.x Python client (PyPI rocketmq-python-client 5.1.2) sends NORMAL
messages over the gRPC endpoint; they are read back through the 4.x pull path.

The client imports as `rocketmq` and its stubs clash with ours, so it runs in its own venv
(`.clients/grpc5`, installed by `make test`) as a subprocess; it logs only under `$HOME/logs/`, so
HOME is a temp dir whose log is shown on failure."""

from __future__ import annotations

import asyncio
import os
import platform
from pathlib import Path

import pytest

from rocketlite.protocol.proto import available
from tests.support.aio import run
from tests.support.broker_harness import broker_under_test, stored_by_uniq_key

ROOT = Path(__file__).resolve().parents[3]
CLIENTS = Path(os.environ.get("ROCKETLITE_CLIENTS", ROOT / ".clients"))
PYTHON5 = CLIENTS / "grpc5" / "bin" / "python"

PRODUCER = """
import sys
from rocketmq import ClientConfiguration, Credentials, Message, Producer

endpoint, topic, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
producer = Producer(ClientConfiguration(endpoint, Credentials(), request_timeout=3), (topic,))
producer.startup()
try:
    for i in range(count):
        message = Message()
        message.topic = topic
        message.body = f"py5-{i}".encode()
        message.tag = "TagA"
        message.keys = f"key{i}"
        message.add_property("color", "red")
        print(producer.send(message).message_id, flush=True)
finally:
    producer.shutdown()
"""


def _why_not() -> str | None:
    if available() is not None:
        return available()
    if not PYTHON5.is_file():
        return f"rocketmq-python-client 5.1.2 venv {PYTHON5.parent.parent} is missing (run `make clients`)"
    return None


def _require() -> None:
    why = _why_not()
    if why is None:
        return
    if os.environ.get("CI", "").lower() == "true" and platform.machine() in ("x86_64", "AMD64"):
        pytest.fail(f"{why} (CI=true on x86_64: the 5.x client is required)")
    pytest.skip(why)


def test_official_python_producer_sends_normal_messages(tmp_path: Path) -> None:
    _require()
    home = tmp_path / "home"
    home.mkdir()

    async def scenario() -> list[str]:
        async with broker_under_test(tmp_path / "store") as broker:
            await broker.send("Py5T")  # the topic exists before the producer asks for its route
            endpoint = broker.controller.parts.grpc if broker.controller.parts else None
            assert endpoint is not None and endpoint.port > 0
            proc = await asyncio.create_subprocess_exec(
                str(PYTHON5), "-c", PRODUCER, f"127.0.0.1:{endpoint.port}", "Py5T", "3",
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
                env={**os.environ, "HOME": str(home)},
            )  # fmt: skip
            out, err = await asyncio.wait_for(proc.communicate(), 60)
            if proc.returncode != 0:
                logs = "\n".join(p.read_text(errors="replace")[-3000:] for p in home.rglob("*.log"))
                pytest.fail(f"producer exited {proc.returncode}: {err.decode()[-3000:]}\n{logs}")
            ids = out.decode().split()
            stored = await stored_by_uniq_key(broker, "Py5T")
            assert len(ids) == 3
            for i, message_id in enumerate(ids):
                body, props = stored[message_id]
                assert (body, props["TAGS"], props["KEYS"], props["color"]) == (
                    f"py5-{i}".encode(), "TagA", f"key{i}", "red",
                )  # fmt: skip
            return ids

    run(scenario())
