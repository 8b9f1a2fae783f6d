"""POP over a real socket on 127.0.0.1: POP_MESSAGE → ACK_MESSAGE and CHANGE_MESSAGE_INVISIBLETIME
as raw requests, with RocketMQ's headers and answer codes; stale, forged and malformed handles get
NO_MESSAGE; a restarted broker neither redelivers an acked message nor loses an unacked one."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from rocketlite.broker.subscription_group import SubscriptionGroupConfig
from rocketlite.clock import SYSTEM_CLOCK
from rocketlite.protocol.codes import ResponseCode
from rocketlite.protocol.formats.record import StoredRecord, decode_records
from rocketlite.protocol.wire.command import RemotingCommand
from rocketlite.protocol.wire.pop import POLLING_TIMEOUT, PopRequestCode
from tests.support.aio import run
from tests.support.broker_harness import BrokerUnderTest, broker_under_test
from tests.support.pop_client import handles
from tests.support.wire import pull_until_end

TOPIC, GROUP = "PopWireTopic", "pop_wire_cg"


async def pop(
    b: BrokerUnderTest, invisible_ms: int = 60_000, queue_id: int = -1, poll_ms: int = 0
) -> RemotingCommand:
    ext = {"consumerGroup": GROUP, "topic": TOPIC, "queueId": str(queue_id), "maxMsgNums": "32",
           "invisibleTime": str(invisible_ms), "pollTime": str(poll_ms), "bornTime": "1", "initMode": "1",
           "expType": "TAG", "exp": "*"}  # fmt: skip
    return await b.call(PopRequestCode.POP_MESSAGE, ext)


async def ack(b: BrokerUnderTest, record: StoredRecord, handle: str) -> RemotingCommand:
    ext = {"consumerGroup": GROUP, "topic": TOPIC, "queueId": str(record.queue_id), "extraInfo": handle,
           "offset": str(record.queue_offset)}  # fmt: skip
    return await b.call(PopRequestCode.ACK_MESSAGE, ext)


def test_pop_ack_change_and_stale_handles_over_the_wire(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with broker_under_test(tmp_path / "store") as b:
            name = b.controller.broker.broker_name
            for i in range(2):
                assert (await b.send(TOPIC, f"m{i}".encode(), queue_id=0)).code == ResponseCode.SUCCESS
            first = await pop(b)
            assert first.code == ResponseCode.SUCCESS, first.remark
            ext = first.ext_fields or {}
            assert {
                "popTime",
                "invisibleTime",
                "reviveQid",
                "restNum",
                "startOffsetInfo",
                "msgOffsetInfo",
            } <= set(ext)
            assert ext["msgOffsetInfo"] == "0 0 0,1" and ext["restNum"] == "0"
            got = handles(first, name)
            assert [r.body for r, _ in got] == [b"m0", b"m1"]

            empty = await pop(b)
            assert empty.code == POLLING_TIMEOUT  # both invisible, nothing new

            (r0, h0), (r1, h1) = got
            assert (await ack(b, r0, h0)).code == ResponseCode.SUCCESS
            again = await ack(b, r0, h0)
            assert again.code == ResponseCode.NO_MESSAGE and "acked already" in (again.remark or "")
            forged = await ack(b, r1, h1.replace(ext["popTime"], str(int(ext["popTime"]) - 1)))
            assert forged.code == ResponseCode.NO_MESSAGE and "stale" in (forged.remark or "")
            bad = await ack(b, r1, "not a handle")
            assert bad.code == ResponseCode.NO_MESSAGE and "fields" in (bad.remark or "")

            change = await b.call(PopRequestCode.CHANGE_MESSAGE_INVISIBLETIME, {
                "consumerGroup": GROUP, "topic": TOPIC, "queueId": "0", "extraInfo": h1,
                "offset": str(r1.queue_offset), "invisibleTime": "1"})  # fmt: skip
            assert change.code == ResponseCode.SUCCESS, change.remark
            cext = change.ext_fields or {}
            assert set(cext) == {"popTime", "invisibleTime", "reviveQid"} and cext["invisibleTime"] == "1"
            assert int(cext["popTime"]) > int(ext["popTime"])
            assert (await ack(b, r1, h1)).code == ResponseCode.NO_MESSAGE  # the old handle is stale

        # restart: offset 0 stays acked; offset 1 (1 ms invisible) comes back with attempt 1
        async with broker_under_test(tmp_path / "store") as b:
            back = await pop(b)
            assert back.code == ResponseCode.SUCCESS, back.remark
            [(r, h)] = handles(back, b.controller.broker.broker_name)
            assert (r.queue_offset, r.body, r.reconsume_times) == (1, b"m1", 1)
            assert (await ack(b, r, h)).code == ResponseCode.SUCCESS
            assert (await pop(b)).code == POLLING_TIMEOUT

    run(scenario(), timeout=60)


def test_pop_refusals(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with broker_under_test(tmp_path / "store") as b:
            missing = await pop(b)
            assert missing.code == ResponseCode.TOPIC_NOT_EXIST
            assert (await b.send(TOPIC, b"x", queue_id=0)).code == ResponseCode.SUCCESS
            assert (await pop(b, queue_id=99)).code == ResponseCode.SYSTEM_ERROR
            zero = await pop(b, invisible_ms=0)
            assert zero.code == ResponseCode.SYSTEM_ERROR and "invisibleTime" in (zero.remark or "")

    run(scenario(), timeout=60)


async def past(ms: int) -> None:
    """Until the wall clock (the broker's) is past `ms`: a 1 ms invisible time, expired for real."""
    while SYSTEM_CLOCK.now_ms() <= ms:
        await asyncio.sleep(0.001)


def test_dead_letter_queue_after_retry_max_times(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with broker_under_test(tmp_path / "store") as b:
            b.controller.groups.update(SubscriptionGroupConfig(GROUP, retry_max_times=1))
            assert (await b.send(TOPIC, b"poison", queue_id=0, keys="k1")).code == ResponseCode.SUCCESS
            attempts = []
            for _ in range(2):
                r = await pop(b, invisible_ms=1)
                assert r.code == ResponseCode.SUCCESS, r.remark
                [record] = decode_records(r.body or b"")
                attempts.append(record.reconsume_times)
                await past(int((r.ext_fields or {})["popTime"]) + 1)
            assert attempts == [0, 1]
            assert (await pop(b)).code == POLLING_TIMEOUT  # third time: to the DLQ, not to the client
            await b.dispatched()
            dlq, _ = await pull_until_end(b.client, b.addr, f"%DLQ%{GROUP}", 0, group=GROUP)
            assert [(m.body, m.reconsume_times, m.get_property("RETRY_TOPIC")) for m in dlq] == [
                (b"poison", 1, TOPIC)
            ]

    run(scenario(), timeout=60)


def test_long_polling_woken_by_a_new_message_and_by_a_deadline(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with broker_under_test(tmp_path / "store") as b:
            assert (await b.send(TOPIC, b"first", queue_id=0)).code == ResponseCode.SUCCESS
            assert (await pop(b, invisible_ms=300)).code == ResponseCode.SUCCESS
            begin = time.monotonic()
            assert (await pop(b, poll_ms=100)).code == POLLING_TIMEOUT  # held, then nothing
            assert time.monotonic() - begin >= 0.1

            # held with "first" invisible: the send wakes it, long before its 4 s
            held = asyncio.create_task(pop(b, invisible_ms=60_000, poll_ms=4_000))
            await asyncio.sleep(0)  # let the request leave before the send
            assert (await b.send(TOPIC, b"second", queue_id=1)).code == ResponseCode.SUCCESS
            woken = await held
            assert woken.code == ResponseCode.SUCCESS
            bodies = [r.body for r in decode_records(woken.body or b"")]
            assert b"second" in bodies

            # held again: "first" comes back when its 300 ms invisible time ends, with attempt 1
            if b"first" not in bodies:
                again = await pop(b, poll_ms=4_000)
                assert again.code == ResponseCode.SUCCESS, again.remark
                [record] = decode_records(again.body or b"")
                assert (record.body, record.reconsume_times) == (b"first", 1)
            assert time.monotonic() - begin < 3.0

    run(scenario(), timeout=60)


def test_a_held_pop_is_woken_when_an_in_flight_message_is_made_visible_sooner(tmp_path: Path) -> None:
    """A POP held with "m" in flight for 60 s waits until its poll ends (4 s) unless the change of
    m's invisible time to 1 ms wakes it to look again: it must get m back long before."""

    async def scenario() -> None:
        async with broker_under_test(tmp_path / "store") as b:
            assert (await b.send(TOPIC, b"m", queue_id=0)).code == ResponseCode.SUCCESS
            first = await pop(b, invisible_ms=60_000)
            [(record, handle)] = handles(first, b.controller.broker.broker_name)
            held = asyncio.create_task(pop(b, invisible_ms=60_000, poll_ms=4_000))
            await asyncio.sleep(0.2)  # let the held POP find nothing and wait
            begin = time.monotonic()
            change = await b.call(PopRequestCode.CHANGE_MESSAGE_INVISIBLETIME, {
                "consumerGroup": GROUP, "topic": TOPIC, "queueId": "0", "extraInfo": handle,
                "offset": str(record.queue_offset), "invisibleTime": "1"})  # fmt: skip
            assert change.code == ResponseCode.SUCCESS, change.remark
            woken = await held
            assert woken.code == ResponseCode.SUCCESS
            assert [r.body for r in decode_records(woken.body or b"")] == [b"m"]
            assert time.monotonic() - begin < 2.0  # not at the end of the 4 s poll

    run(scenario(), timeout=60)
