"""LITE_PULL_MESSAGE (361), what 5.x lite pull consumers send instead of PULL_MESSAGE (11): the
same header and the same answers, over a real socket on 127.0.0.1 (RocketMQ 5 serves both with
one PullMessageProcessor; 361 differs only by its own `litePullMessageEnable` switch)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from rocketlite.protocol.codes import PullSysFlag, RequestCode, ResponseCode
from rocketlite.protocol.requests.pull import PullStatus, build_pull, parse_pull
from rocketlite.protocol.wire.command import RemotingCommand
from rocketlite.protocol.wire.pop import PopRequestCode
from tests.support.aio import run
from tests.support.broker_harness import BrokerUnderTest, broker_under_test

TOPIC, GROUP = "LitePullTopic", "lite_pull_cg"


async def both(b: BrokerUnderTest, offset: int) -> tuple[RemotingCommand, RemotingCommand]:
    """The same pull sent as 11 and as 361: (answer to 11, answer to 361)."""
    answers = []
    for code in (RequestCode.PULL_MESSAGE, PopRequestCode.LITE_PULL_MESSAGE):
        flags = PullSysFlag.SUBSCRIPTION | PullSysFlag.LITE_PULL
        request = build_pull(group=GROUP, topic=TOPIC, queue_id=0, max_nums=32, sys_flag=flags, offset=offset)
        request.code = int(code)
        answers.append(await b.client.invoke(b.addr, request, 10.0))
    return answers[0], answers[1]


def test_lite_pull_answers_as_pull(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with broker_under_test(tmp_path / "store") as b:
            pull, lite = await both(b, offset=0)
            assert (pull.code, lite.code) == (ResponseCode.TOPIC_NOT_EXIST,) * 2
            for i in range(3):
                assert (await b.send(TOPIC, f"m{i}".encode(), queue_id=0)).code == ResponseCode.SUCCESS
            pull, lite = await both(b, offset=1)
            assert lite.code == ResponseCode.SUCCESS
            assert lite.ext_fields == pull.ext_fields and lite.body == pull.body
            result = parse_pull(lite)
            assert result.status is PullStatus.FOUND
            assert [r.body for r in result.records()] == [b"m1", b"m2"]
            assert result.next_begin_offset == 3

            # held like a pull (suspend flag) and woken by a new message
            request = build_pull(group=GROUP, topic=TOPIC, queue_id=0, offset=3, max_nums=32,
                                 sys_flag=PullSysFlag.SUBSCRIPTION | PullSysFlag.SUSPEND,
                                 suspend_timeout_ms=5_000)  # fmt: skip
            request.code = PopRequestCode.LITE_PULL_MESSAGE
            held = asyncio.ensure_future(b.client.invoke(b.addr, request, 10.0))
            await asyncio.sleep(0)  # let the request leave before the send
            assert (await b.send(TOPIC, b"m3", queue_id=0)).code == ResponseCode.SUCCESS
            woken = parse_pull(await held)
            assert [r.body for r in woken.records()] == [b"m3"]

    run(scenario(), timeout=60)


def test_lite_pull_refused_when_disabled(tmp_path: Path) -> None:
    """litePullMessageEnable=false: 361 gets NO_PERMISSION naming the switch's effect, 11 still works."""

    async def scenario() -> None:
        async with broker_under_test(tmp_path / "store", lite_pull_message_enable=False) as b:
            assert (await b.send(TOPIC, b"m0", queue_id=0)).code == ResponseCode.SUCCESS
            pull, lite = await both(b, offset=0)
            assert pull.code == ResponseCode.SUCCESS
            assert lite.code == ResponseCode.NO_PERMISSION
            assert "lite pull consumer is forbidden" in (lite.remark or "")

    run(scenario(), timeout=60)
