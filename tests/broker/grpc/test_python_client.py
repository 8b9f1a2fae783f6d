"""The unmodified official 5.x Python client (PyPI rocketmq-python-client 5.1.2) sends NORMAL
messages over the gRPC endpoint; they are read back through the 4.x pull path.

The client imports as `rocketmq` and its stubs clash with ours, so it runs in its own venv
(`.clients/grpc5`, installed by `make test`) as a subprocess; it logs only under `$HOME/logs/`, so
HOME is a temp dir whose log is shown on failure."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.aio import run
from tests.support.broker_harness import broker_under_test
from tests.support.foreign_clients.grpc5 import (
    DOORS,
    check_stored,
    door,
    endpoint_address,
    require_python5,
    run_python5,
)

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


@pytest.mark.parametrize("impl", DOORS)
def test_official_python_producer_sends_normal_messages(tmp_path: Path, impl: str) -> None:
    require_python5()

    async def scenario() -> None:
        async with broker_under_test(tmp_path / "store", **door(impl)) as broker:
            await broker.send("Py5T")  # the topic exists before the producer asks for its route
            done = await run_python5(PRODUCER, endpoint_address(broker), "Py5T", "3", home=tmp_path / "home")
            ids = done.out.split()
            assert len(ids) == 3
            await check_stored(broker, "Py5T", ids, "py5")

    run(scenario())
