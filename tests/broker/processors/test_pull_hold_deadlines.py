"""Deadlines of held pulls: rounded up to `DEADLINE_GRANULE_S`, one loop timer per granule.

A held pull is answered at its deadline, never before it and at most one granule after it; pulls
parked in the same granule share one timer; a pull woken early is not answered again when its
granule's timer fires.
"""

from __future__ import annotations

import asyncio
from typing import Any, cast

from rocketlite.broker.processors.pull_hold import DEADLINE_GRANULE_S, HeldPull, PullRequestHoldService
from rocketlite.protocol.wire.command import RemotingCommand
from rocketlite.remoting.connection import Connection


class FakeConn:
    def __init__(self) -> None:
        self.attrs: dict[str, Any] = {}
        self.close_callbacks: list[Any] = []
        self.closed = False

    def open_output(self) -> bool:
        return False

    def flush_output(self) -> None:
        pass


class FakeStore:
    def get_max_offset_in_queue(self, topic: str, queue_id: int) -> int:
        return 0


def held_pull(conn: FakeConn) -> HeldPull:
    return HeldPull(cast(Connection, conn), cast(RemotingCommand, None), "T", 0, 0, None, seen_max=0)


def test_deadlines_share_a_granule_timer_and_are_never_early() -> None:
    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        answered: list[tuple[HeldPull, float]] = []
        service = PullRequestHoldService(FakeStore(), loop, lambda h: answered.append((h, loop.time())))
        await service.start()
        conn = FakeConn()
        pulls = [held_pull(conn) for _ in range(20)]
        for held in pulls:
            service.suspend(held, 0.2)
        assert service.held_count == 20 and len(service._timers) <= 2
        service.notify_arriving("T", 0, 5, None)  # a message: all of them are woken now
        assert len(answered) == 20 and service.held_count == 0
        answered.clear()
        late = held_pull(conn)
        parked_at = loop.time()
        service.suspend(late, 0.15)
        await asyncio.sleep(0.3)
        assert [h for h, _ in answered] == [late]  # the early-woken pulls are not answered twice
        elapsed = answered[0][1] - parked_at
        assert 0.15 - 0.0015 <= elapsed <= 0.15 + DEADLINE_GRANULE_S + 0.1
        assert not service._timers or all(g * DEADLINE_GRANULE_S > loop.time() for g in service._timers)
        await service.close()

    asyncio.run(scenario())


def test_a_closed_connection_drops_its_pulls_before_their_deadline() -> None:
    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        answered: list[HeldPull] = []
        service = PullRequestHoldService(FakeStore(), loop, answered.append)
        conn, other = FakeConn(), FakeConn()
        service.suspend(held_pull(conn), 0.05)
        kept = held_pull(other)
        service.suspend(kept, 0.05)
        service.drop_connection(cast(Connection, conn))
        await asyncio.sleep(0.12)
        assert answered == [kept] and service.held_count == 0
        await service.close()

    asyncio.run(scenario())
