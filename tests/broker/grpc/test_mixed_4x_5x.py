"""A remoting client and the official 5.x Python client consuming one topic as one group, at the
same time: the remoting side with POP_MESSAGE / ACK_MESSAGE (what a RocketMQ 4.x-protocol POP
consumer sends), the 5.x side with ReceiveMessage / AckMessage. Both go through the same POP state,
so the group consumes each message once: none twice, none lost. (A 4.x *pull* consumer in the same
group would read by its own offsets and see everything again, as in RocketMQ.)"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from pathlib import Path

from tests.support import pop_client
from tests.support.aio import run
from tests.support.broker_harness import BrokerUnderTest, broker_under_test
from tests.support.foreign_clients.grpc5 import endpoint_address, require_python5, start_python5

COUNT = 40

# Receives (batches of 4, acked one by one) until a receive finds nothing after it had found some,
# printing each message id as one JSON line; `ready` once started, then it waits for a line on
# stdin (the test's go, once the remoting side has taken its first messages).
PYTHON_RECEIVER = """
import json, sys, time
from rocketmq import ClientConfiguration, Credentials, FilterExpression, SimpleConsumer

endpoint, topic, group = sys.argv[1:4]
config = ClientConfiguration(endpoint, Credentials(), request_timeout=3)
consumer = SimpleConsumer(config, group, {topic: FilterExpression()}, await_duration=5)
consumer.startup()
print(json.dumps({"ready": True}), flush=True)
sys.stdin.readline()
seen = 0
deadline = time.time() + 60
try:
    while time.time() < deadline:
        got = consumer.receive(4, 30)
        if not got and seen:
            break
        for m in got:
            consumer.ack(m)
            print(json.dumps({"id": m.message_id}), flush=True)
            seen += 1
finally:
    consumer.shutdown()
"""


def test_remoting_pop_and_python_5x_share_a_group_each_message_once(tmp_path: Path) -> None:
    require_python5()

    async def scenario() -> list[str]:
        async with broker_under_test(tmp_path / "store") as broker:
            await broker.send("MixT", b"warm-up", props={"UNIQ_KEY": "ID-warm"})  # the topic exists
            python = await start_python5(
                PYTHON_RECEIVER, endpoint_address(broker), "MixT", "MixG", home=tmp_path / "home"
            )
            await python.wait_for('{"ready"', 30)
            for i in range(COUNT):
                answer = await broker.send(
                    "MixT", f"m{i}".encode(), queue_id=i % 4, props={"UNIQ_KEY": f"ID{i}"}
                )
                assert answer.code == 0, answer.remark
            remoting: list[str] = []
            via_5x: list[str] = []
            reader = asyncio.create_task(_ids_printed(python.proc.stdout, via_5x))
            loop = asyncio.get_running_loop()
            deadline = loop.time() + 60
            go = python.proc.stdin
            assert go is not None
            # The 5.x side starts once the remoting side has its first messages: otherwise a fast
            # 5.x receiver may take them all while they are sent, and the test would show nothing.
            while not remoting and loop.time() < deadline:
                await take_by_remoting(broker, remoting)
            go.write(b"go\n")
            await go.drain()
            while len(remoting) + len(via_5x) < COUNT + 1 and loop.time() < deadline:
                await take_by_remoting(broker, remoting)
            await asyncio.wait_for(reader, 60)  # it stops after a receive that finds nothing
            ended = await python.finish(10)
            assert ended.returncode == 0, ended.explain()
            for queue_id in range(4):  # the group's progress: everything consumed
                high = broker.controller.store.get_max_offset_in_queue("MixT", queue_id)
                assert broker.controller.offsets.query("MixG", "MixT", queue_id) == high
        counts = Counter(remoting + via_5x)
        assert set(counts) == {f"ID{i}" for i in range(COUNT)} | {"ID-warm"}, counts  # none lost
        assert max(counts.values()) == 1, counts  # none twice
        assert via_5x and remoting, (via_5x, remoting)  # both really took part
        return via_5x

    run(scenario())


async def take_by_remoting(broker: BrokerUnderTest, into: list[str]) -> None:
    """One remoting POP of up to 2 (held up to a second), each message acked and its id kept."""
    popped = await pop_client.pop(broker.client, broker.addr, "MixG", "MixT", max_nums=2, poll_ms=1000)
    if popped.code != 0:  # 210: nothing visible right now (the 5.x side holds it)
        return
    for record, handle in pop_client.handles(popped, broker.controller.broker.broker_name):
        acked = await pop_client.ack(broker.client, broker.addr, "MixG", record, handle)
        assert acked.code == 0, acked.remark
        into.append(record.get_property("UNIQ_KEY") or "")


async def _ids_printed(stdout: asyncio.StreamReader | None, into: list[str]) -> None:
    """Collect the message ids the 5.x script prints, as it prints them, until it ends."""
    assert stdout is not None
    while line := await stdout.readline():
        if line.startswith(b'{"id"'):
            into.append(json.loads(line)["id"])
