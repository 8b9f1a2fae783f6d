"""The waits with a timeout of `rocketlite.runtime` (what the broker, the client and the remoting
layer use instead of `asyncio.wait_for`): the result or the timeout, and a caller's cancellation
that is never swallowed and never leaves the awaited thing running or a lock held."""

from __future__ import annotations

import asyncio

import pytest

from rocketlite.runtime import acquire_within, result_within, wait_event
from tests.support.aio import run


def test_result_within_gives_the_result_or_the_exception() -> None:
    async def scenario() -> None:
        done: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        done.set_result(7)
        assert await result_within(done, 1.0) == 7
        failed: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        failed.set_exception(ConnectionResetError("gone"))
        with pytest.raises(ConnectionResetError, match="gone"):
            await result_within(failed, 1.0)

    run(scenario())


def test_result_within_times_out_and_ends_what_it_waited_for() -> None:
    async def scenario() -> None:
        never: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        with pytest.raises(TimeoutError):
            await result_within(never, 0.01)
        assert never.cancelled()
        ended = asyncio.Event()

        async def slow() -> int:
            try:
                await asyncio.Event().wait()
            finally:
                ended.set()
            return 1

        with pytest.raises(TimeoutError):
            await result_within(slow(), 0.01)
        assert ended.is_set()  # ended before TimeoutError was raised, as wait_for promises

    run(scenario())


def test_a_cancelled_caller_is_cancelled_and_cancels_what_it_waited_for() -> None:
    async def scenario() -> None:
        inner: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        waiting = asyncio.ensure_future(result_within(inner, 60.0))
        await asyncio.sleep(0)  # let it start waiting
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        assert inner.cancelled()

    run(scenario())


def test_wait_event_and_acquire_within() -> None:
    async def scenario() -> None:
        event = asyncio.Event()
        assert not await wait_event(event, 0.01)
        asyncio.get_running_loop().call_soon(event.set)
        assert await wait_event(event, 60.0)
        lock = asyncio.Lock()
        assert await acquire_within(lock, 0.01)
        assert not await acquire_within(lock, 0.01)  # held: not taken, and not left pending
        lock.release()
        assert not lock.locked()
        assert await acquire_within(lock, 0.01)
        lock.release()

    run(scenario())
