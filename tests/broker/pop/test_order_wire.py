"""Ordered (FIFO) POP and the DLQ's durability over a real socket on 127.0.0.1: `order=true`
hands a queue's next messages out only after everything before is acked, an expired invisible
time brings the same messages back in order with attempt+1, past the retry limit they go to the
DLQ and the queue moves on; under ASYNC_FLUSH a DLQ copy is flushed before the move counts."""

from __future__ import annotations

import asyncio
from pathlib import Path

from rocketlite.broker.subscription_group import SubscriptionGroupConfig
from rocketlite.clock import SYSTEM_CLOCK
from rocketlite.protocol.codes import ResponseCode
from rocketlite.protocol.wire.pop import POLLING_TIMEOUT
from rocketlite.store.config import FlushDiskType
from tests.support.aio import run
from tests.support.broker_harness import broker_under_test
from tests.support.pop_client import ack, handles, pop
from tests.support.wire import pull_until_end

TOPIC, GROUP = "PopOrderTopic", "pop_order_cg"


async def past(ms: int) -> None:
    """Until the wall clock (the broker's) is past `ms`: a short invisible time, expired for real."""
    while SYSTEM_CLOCK.now_ms() <= ms:
        await asyncio.sleep(0.001)


def test_ordered_pop_over_the_wire(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with broker_under_test(tmp_path / "store") as b:
            name = b.controller.broker.broker_name
            b.controller.groups.update(SubscriptionGroupConfig(GROUP, retry_max_times=1))
            for i in range(4):
                assert (await b.send(TOPIC, f"m{i}".encode(), queue_id=0)).code == ResponseCode.SUCCESS

            first = await pop(b.client, b.addr, GROUP, TOPIC, queue_id=0, max_nums=2, order=True,
                              invisible_ms=200)  # fmt: skip
            assert first.code == ResponseCode.SUCCESS, first.remark
            got = handles(first, name)
            assert [r.body for r, _ in got] == [b"m0", b"m1"]
            # in flight: nothing new, though m2 and m3 wait (an unordered pop would take them)
            assert (await pop(b.client, b.addr, GROUP, TOPIC, queue_id=0, order=True)).code == POLLING_TIMEOUT
            assert (await ack(b.client, b.addr, GROUP, *got[0])).code == ResponseCode.SUCCESS
            assert (await pop(b.client, b.addr, GROUP, TOPIC, queue_id=0, order=True)).code == POLLING_TIMEOUT

            # m1's invisible time ends: m1 again, attempt 1, before anything new (a held pop wakes)
            again = await pop(b.client, b.addr, GROUP, TOPIC, queue_id=0, order=True, poll_ms=5_000,
                              invisible_ms=1)  # fmt: skip
            assert again.code == ResponseCode.SUCCESS, again.remark
            assert [(r.body, r.reconsume_times) for r, _ in handles(again, name)] == [(b"m1", 1)]
            await past(int((again.ext_fields or {})["popTime"]) + 1)
            # past retryMaxTimes (1): m1 to the DLQ, and the queue moves on to m2, m3 in order
            moved = await pop(b.client, b.addr, GROUP, TOPIC, queue_id=0, order=True, poll_ms=5_000)
            assert moved.code == ResponseCode.SUCCESS, moved.remark
            assert [r.body for r, _ in handles(moved, name)] == [b"m2", b"m3"]
            await b.dispatched()
            dlq, _ = await pull_until_end(b.client, b.addr, f"%DLQ%{GROUP}", 0, group=GROUP)
            assert [m.body for m in dlq] == [b"m1"]

    run(scenario(), timeout=60)


def test_dead_letter_is_flushed_before_it_counts_under_async_flush(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with broker_under_test(
            tmp_path / "store",
            store_flush_disk_type=FlushDiskType.ASYNC_FLUSH,
            store_flush_interval_commit_log=600_000,  # the flush thread would wait ten minutes
            store_flush_commit_log_thorough_interval=600_000,
        ) as b:
            b.controller.groups.update(SubscriptionGroupConfig(GROUP, retry_max_times=0))
            assert (await b.send(TOPIC, b"poison", queue_id=0)).code == ResponseCode.SUCCESS
            r = await pop(b.client, b.addr, GROUP, TOPIC, invisible_ms=1)
            assert r.code == ResponseCode.SUCCESS, r.remark
            await past(int((r.ext_fields or {})["popTime"]) + 1)
            queue = b.controller.store.commit_log.queue

            def end() -> int:
                return queue.files[-1].file_from_offset + queue.files[-1].wrote_position

            assert queue.flushed_where < end()  # the send is not flushed yet
            assert (await pop(b.client, b.addr, GROUP, TOPIC)).code == POLLING_TIMEOUT  # to the DLQ
            assert queue.flushed_where >= end()  # the DLQ copy (and all before it) is on disk
            assert b.controller.parts is not None
            svc = b.controller.parts.pop.service
            assert svc.in_flight(GROUP, TOPIC, 0) == {}  # forgotten only now

    run(scenario(), timeout=60)
