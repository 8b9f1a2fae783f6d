"""Helpers of the tests of rocketlite's own SDK: the embedded cluster's settings, a collector,
route and queue readers. The `embedded_cluster` fixture (one per module) is in tests/client/conftest.py.

Every test uses its own topic and group names, so tests of one module share a cluster (starting
one costs a few hundred ms) without seeing each other's messages.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, TypeVar

from rocketlite.client import AsyncPullConsumer, MessageExt, MessageQueue, NoRouteError

T = TypeVar("T")


FAST_DELAYS = " ".join(["1s"] * 18)  # every delay level is 1 s: retries and delays finish quickly


class Collector:
    """Messages handed over by listeners; tests await conditions on them instead of sleeping."""

    def __init__(self) -> None:
        self.items: list[Any] = []
        self._cond: asyncio.Condition | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def cond(self) -> asyncio.Condition:
        if self._cond is None:
            self._cond = asyncio.Condition()
        return self._cond

    async def add(self, *items: Any) -> None:
        async with self.cond:
            self.items.extend(items)
            self.cond.notify_all()

    def push(self, *items: Any) -> None:
        """`add` for plain callbacks running on the loop (queue listeners)."""
        self.items.extend(items)
        task = asyncio.get_running_loop().create_task(self._notify())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _notify(self) -> None:
        async with self.cond:
            self.cond.notify_all()

    async def wait_for(self, predicate: Callable[[list[Any]], bool], timeout: float = 15.0) -> list[Any]:
        async with self.cond:
            await asyncio.wait_for(self.cond.wait_for(lambda: predicate(self.items)), timeout)
            return list(self.items)

    async def wait_count(self, n: int, timeout: float = 15.0) -> list[Any]:
        return await self.wait_for(lambda items: len(items) >= n, timeout)


async def wait_route(consumer: AsyncPullConsumer, topic: str, timeout: float = 10.0) -> list[MessageQueue]:
    """The topic's queues once the name server knows it.

    A topic the broker creates by itself (%DLQ%, %RETRY%) reaches the name server with the broker's
    next registration; no client-visible event marks that, so this is the one place that retries.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        try:
            return await consumer.fetch_queues(topic)
        except NoRouteError:
            if loop.time() > deadline:
                raise
            await asyncio.sleep(0.05)


async def read_queues(
    consumer: AsyncPullConsumer,
    queues: list[MessageQueue],
    n: int,
    *,
    expression: str = "*",
    timeout: float = 15.0,
) -> list[MessageExt]:
    """The first `n` messages of `queues` from offset 0, long-polling until they are visible.

    A send is answered before the broker's dispatcher makes the message pullable (as in Java),
    so reads right after a send must wait; long polls wake up when the message lands.
    """
    consumer.assign(queues, expression)
    for mq in queues:
        consumer.seek(mq, 0)
    got: list[MessageExt] = []
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while len(got) < n:
        left = deadline - loop.time()
        if left <= 0:
            raise TimeoutError(f"{len(got)} of {n} messages arrived in {queues}")
        got.extend(await consumer.poll(min(left, 3.0)))
    return got


async def wait_messages(
    consumer: AsyncPullConsumer, topic: str, n: int, *, timeout: float = 15.0
) -> list[MessageExt]:
    """The first `n` messages of every queue of `topic`, waiting for the route and the messages."""
    return await read_queues(consumer, await wait_route(consumer, topic, timeout), n, timeout=timeout)
