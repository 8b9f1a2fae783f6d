"""Long-polling ReceiveMessage calls over 127.0.0.1 on both doors: an arrival wakes one held
receive of the group, not all of them (RocketMQ's PopLongPollingService wakes the first polling
request of the group), and the others keep waiting: no empty answer before their polling time.

Waking every held receive made each of them look at all the topic's queues once per message
(one found it, the others nothing): `PopMessageProcessor.looks` counts those looks."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from rocketlite.broker.pop.processor import PopMessageProcessor
from rocketlite.protocol.proto import available
from tests.support.aio import run
from tests.support.broker_harness import BrokerUnderTest, broker_under_test
from tests.support.foreign_clients.grpc5 import DOORS, door, raw_stub, require_endpoint

if available() is None:
    from google.protobuf import duration_pb2

    from rocketlite.protocol.proto.v2 import definition_pb2 as pb
    from rocketlite.protocol.proto.v2 import service_pb2 as spb

OK = 20000
METADATA = (("x-mq-client-id", "test-host@1@0@lp"), ("x-mq-language", "PYTHON"))
RECEIVERS = 4


def _request(topic: str, group: str) -> Any:
    return spb.ReceiveMessageRequest(
        group=pb.Resource(name=group),
        message_queue=pb.MessageQueue(topic=pb.Resource(name=topic), id=0),
        filter_expression=pb.FilterExpression(type=pb.FilterType.TAG, expression="*"),
        batch_size=16,
        invisible_duration=duration_pb2.Duration(seconds=30),
        long_polling_timeout=duration_pb2.Duration(seconds=20),
    )


async def _receive(stub: Any, request: Any) -> tuple[int, list[bytes]]:
    """(status code, bodies) of one ReceiveMessage stream."""
    responses = [r async for r in stub.ReceiveMessage(request, metadata=METADATA, timeout=30)]
    [status] = [r.status for r in responses if r.WhichOneof("content") == "status"]
    return status.code, [r.message.body for r in responses if r.WhichOneof("content") == "message"]


async def _until_waiting(pop: PopMessageProcessor, topic: str, group: str, count: int) -> None:
    """Until `count` receives of `group` are held on `topic` (each looked once and found nothing)."""
    async with asyncio.timeout(10):
        while pop.polling.waiting(topic, group) != count:
            await asyncio.sleep(0.005)


def _pop(broker: BrokerUnderTest) -> PopMessageProcessor:
    parts = broker.controller.parts
    assert parts is not None
    return parts.pop


@pytest.mark.parametrize("impl", DOORS)
def test_each_message_wakes_one_held_receive_and_the_others_keep_waiting(tmp_path: Path, impl: str) -> None:
    require_endpoint()

    async def scenario() -> None:
        async with broker_under_test(tmp_path, **door(impl)) as broker:
            topic, group = "LongPollT", "LongPollG"
            assert (await broker.send(topic, b"first")).code == 0  # creates the topic
            pop = _pop(broker)
            channel, stub = raw_stub(broker)
            async with channel:
                code, bodies = await _receive(stub, _request(topic, group))
                assert (code, bodies) == (OK, [b"first"])

                receives = [
                    asyncio.ensure_future(_receive(stub, _request(topic, group))) for _ in range(RECEIVERS)
                ]
                await _until_waiting(pop, topic, group, RECEIVERS)
                looks, wakeups = pop.looks, pop.polling.wakeups
                answered: list[tuple[int, list[bytes]]] = []
                for n in range(RECEIVERS):
                    assert (await broker.send(topic, f"m{n}".encode(), queue_id=n % 2)).code == 0
                    done, pending = await asyncio.wait(receives, return_when=asyncio.FIRST_COMPLETED)
                    assert len(done) == 1, f"message {n} answered {len(done)} receives"
                    answered.append(done.pop().result())
                    receives = list(pending)
                    # one receive woke and looked; the others are still held, none answered empty
                    assert pop.polling.waiting(topic, group) == RECEIVERS - n - 1
                    assert (pop.looks - looks, pop.polling.wakeups - wakeups) == (n + 1, n + 1)
                assert sorted(answered) == [(OK, [f"m{n}".encode()]) for n in range(RECEIVERS)]

    run(scenario())


def test_a_receive_of_another_group_is_woken_too(tmp_path: Path) -> None:
    """One held receive per group on the topic looks, each group getting the message."""
    require_endpoint()

    async def scenario() -> None:
        async with broker_under_test(tmp_path) as broker:
            topic = "LongPollGroupsT"
            assert (await broker.send(topic, b"first")).code == 0
            pop = _pop(broker)
            channel, stub = raw_stub(broker)
            async with channel:
                for group in ("GA", "GB"):  # each group starts past "first" once it took it
                    assert await _receive(stub, _request(topic, group)) == (OK, [b"first"])
                receives = {
                    group: [asyncio.ensure_future(_receive(stub, _request(topic, group))) for _ in range(2)]
                    for group in ("GA", "GB")
                }
                for group in ("GA", "GB"):
                    await _until_waiting(pop, topic, group, 2)
                assert (await broker.send(topic, b"both")).code == 0
                for group in ("GA", "GB"):
                    done, pending = await asyncio.wait(receives[group], return_when=asyncio.FIRST_COMPLETED)
                    assert [d.result() for d in done] == [(OK, [b"both"])]
                    assert pop.polling.waiting(topic, group) == 1
                    receives[group] = list(pending)
                assert (await broker.send(topic, b"last")).code == 0  # ends the held ones
                for group in ("GA", "GB"):
                    assert [await r for r in receives[group]] == [(OK, [b"last"])]

    run(scenario())
