"""The unmodified official Python 5.x PushConsumer over the gRPC endpoint: QueryAssignment, receives
with auto_renew (no invisible duration sent), and a listener that always fails: each failure is a
ChangeInvisibleDuration by the client's backoff, the message comes back with delivery_attempt + 1,
and once the group's retryMaxTimes redeliveries are spent it is in %DLQ%<group>, not delivered
again."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from rocketlite.broker.subscription_group import SubscriptionGroupConfig
from rocketlite.protocol.requests.offsets import build_query_consumer_offset, parse_query_consumer_offset
from tests.support.aio import run
from tests.support.broker_harness import BrokerUnderTest, broker_under_test, stored_by_uniq_key
from tests.support.foreign_clients.grpc5 import endpoint_address, require_python5, start_python5

# Prints one JSON line per delivery to the listener, fails every one, and stops when stdin closes.
PYTHON_PUSH = """
import json, sys
from rocketmq import (ClientConfiguration, ConsumeResult, Credentials, FilterExpression,
                      MessageListener, PushConsumer)

endpoint, topic, group = sys.argv[1:4]

class AlwaysFails(MessageListener):
    def consume(self, message):
        print(json.dumps({"id": message.message_id, "attempt": message.delivery_attempt,
                          "body": message.body.decode()}), flush=True)
        return ConsumeResult.FAILURE

config = ClientConfiguration(endpoint, Credentials(), request_timeout=3)
consumer = PushConsumer(config, group, AlwaysFails(), {topic: FilterExpression()},
                        consumption_thread_count=2)
consumer.startup()
print(json.dumps({"started": True}), flush=True)
sys.stdin.read()
consumer.shutdown()
"""


def test_python_push_consumer_failures_are_redelivered_then_dead_lettered(tmp_path: Path) -> None:
    require_python5()

    async def scenario() -> None:
        # retryMaxTimes 1: the first delivery and one redelivery, then the DLQ.
        async with broker_under_test(tmp_path / "store") as broker:
            broker.controller.groups.update(SubscriptionGroupConfig("PushG", retry_max_times=1))
            answer = await broker.send("PushT", b"fails", tags="TagA", props={"UNIQ_KEY": "ID-PUSH"})
            assert answer.code == 0, answer.remark
            client = await start_python5(
                PYTHON_PUSH, endpoint_address(broker), "PushT", "PushG", home=tmp_path / "home"
            )
            try:
                await client.wait_for('{"started"', 30)
                first = json.loads(await client.line(30))
                failed_at = asyncio.get_running_loop().time()
                second = json.loads(await client.line(30))
                # The nack (1 s backoff) woke the receive the consumer already held (20 s).
                assert asyncio.get_running_loop().time() - failed_at < 10
                assert (first["id"], first["attempt"], first["body"]) == ("ID-PUSH", 1, "fails")
                assert (second["id"], second["attempt"]) == ("ID-PUSH", 2)
                dlq = await _dead_lettered(broker, "%DLQ%PushG", 30)
                assert list(dlq) == ["ID-PUSH"]
                body, props = dlq["ID-PUSH"]
                assert body == b"fails" and props["RETRY_TOPIC"] == "PushT"
                # consumed, by the DLQ: the offset moves once the DLQ copy is on disk, a little after
                # it can be pulled (the store dispatches before it flushes)
                assert await _committed_offset(broker, "PushG", "PushT", 0, until=1, timeout=10) == 1
            finally:
                ended = await client.finish(5)  # closes its stdin; killed if its shutdown lingers
            deliveries = [json.loads(line) for line in ended.lines() if line.startswith('{"id"')]
            assert [d["attempt"] for d in deliveries] == [1, 2], ended.explain()  # none after the DLQ

    run(scenario())


async def _dead_lettered(
    broker: BrokerUnderTest, topic: str, timeout: float
) -> dict[str, tuple[bytes, dict[str, str]]]:
    """The DLQ's messages once it has one (the move happens when the broker next looks at the
    queue, which the consumer's held receive does at the message's deadline)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while loop.time() < deadline:
        if broker.controller.topics.select(topic) is not None:
            stored = await stored_by_uniq_key(broker, topic)
            if stored:
                return stored
        await asyncio.sleep(0.2)
    raise AssertionError(f"nothing reached {topic} within {timeout} s")


async def _committed_offset(
    broker: BrokerUnderTest, group: str, topic: str, queue_id: int, *, until: int, timeout: float
) -> int | None:
    """The group's committed offset as QUERY_CONSUMER_OFFSET answers it, asked again until it is
    `until` or `timeout` seconds have passed (then the last answer, which the caller's assert shows).

    The POP state forgets a dead-lettered message, and commits the offset past it, only once its
    DLQ copy is flushed (`PopMessageProcessor.dead_letter`); the copy is dispatched to the DLQ's consume
    queue, where a pull finds it, before that, as a 5.x proxy acks only after its DLQ send returns."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        answer = await broker.client.invoke(
            broker.addr, build_query_consumer_offset(group, topic, queue_id), 5.0
        )
        offset = parse_query_consumer_offset(answer)
        if offset == until or loop.time() >= deadline:
            return offset
        await asyncio.sleep(0.05)
