"""DELAY messages from the unmodified official 5.x Python client (rocketmq-python-client 5.1.2):
the gRPC send maps `delivery_timestamp` to TIMER_DELIVER_MS, the broker's timer parks the message,
and a 4.x pull sees it only once its time has come.

Waiting is event-driven: the client prints when its send is answered, and the store's arrival
listener tells when the message reaches its topic.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from pathlib import Path

from rocketlite.protocol.message import string_to_properties
from rocketlite.store.message_store import MessageStore
from tests.support.aio import run
from tests.support.broker_harness import BrokerUnderTest, broker_under_test
from tests.support.foreign_clients.grpc5 import endpoint_address, require_python5, start_python5
from tests.support.wire import pull_until_end

LATE_SLACK_MS = 400  # delivery may lag its time by the loop's latency on a busy CI machine

PRODUCER = """
import sys, time
from rocketmq import ClientConfiguration, Credentials, Message, Producer

endpoint, topic, ahead_ms = sys.argv[1], sys.argv[2], int(sys.argv[3])
producer = Producer(ClientConfiguration(endpoint, Credentials(), request_timeout=5), (topic,))
producer.startup()
try:
    message = Message()
    message.topic = topic
    message.body = b"delayed-py5"
    message.tag = "TagD"
    at = int(time.time() * 1000) + ahead_ms
    message.delivery_timestamp = at
    print("sent", producer.send(message).message_id, at, flush=True)
finally:
    producer.shutdown()
"""


def now_ms() -> int:
    return time.time_ns() // 1_000_000


class TopicArrival:
    """Set when the dispatcher first adds a unit to `topic` (no polling)."""

    def __init__(self, store: MessageStore, topic: str) -> None:
        self.topic = topic
        self.loop = asyncio.get_running_loop()
        self.event = asyncio.Event()
        store.add_arrival_listener(self._on_arrival)

    def _on_arrival(self, topic: str, queue_id: int, max_offset: int, tags: int, store_ts: int) -> None:
        del queue_id, max_offset, tags, store_ts
        if topic == self.topic:
            with contextlib.suppress(RuntimeError):
                self.loop.call_soon_threadsafe(self.event.set)


async def topic_records(b: BrokerUnderTest, topic: str) -> list[tuple[int, bytes, dict[str, str]]]:
    """(store timestamp, body, properties) of every message of the topic's queues."""
    await b.dispatched()
    tc = b.controller.topics.select(topic)
    assert tc is not None
    out = []
    for queue_id in range(tc.read_queue_nums):
        recs, _ = await pull_until_end(b.client, b.addr, topic, queue_id, group="delay_cg")
        out += [(r.store_timestamp, r.body, string_to_properties(r.properties_string)) for r in recs]
    return out


def test_python5_delay_message_is_seen_only_after_its_delivery_time(tmp_path: Path) -> None:
    require_python5()

    async def scenario() -> None:
        async with broker_under_test(tmp_path / "store") as b:
            await b.send("Py5Delay", b"warm-up")  # the topic exists before the client asks its route
            arrival = TopicArrival(b.controller.store, "Py5Delay")
            address = endpoint_address(b)
            client = await start_python5(PRODUCER, address, "Py5Delay", "2000", home=tmp_path / "home")
            line = await client.wait_for("sent ", 60)
            _, message_id, at_text = line.split()
            at = int(at_text)
            assert now_ms() < at, "the send took too long to check the message is still hidden"
            parked = await topic_records(b, "Py5Delay")
            assert [body for _, body, _ in parked] == [b"warm-up"]  # still hidden

            await asyncio.wait_for(arrival.event.wait(), 15)
            delivered = [r for r in await topic_records(b, "Py5Delay") if r[1] == b"delayed-py5"]
            assert len(delivered) == 1
            stored_at, _, props = delivered[0]
            assert at <= stored_at <= at + LATE_SLACK_MS
            assert props["UNIQ_KEY"] == message_id and props["TAGS"] == "TagD"
            assert props["TIMER_DELIVER_MS"] == str(at) and props["TIMER_OUT_MS"] == str(at)
            run_ = await client.finish(30)
            assert run_.returncode == 0, run_.explain()

    run(scenario())
