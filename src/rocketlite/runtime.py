"""Running rocketlite's asyncio servers: the event loop choice (uvloop when installed), stopping
background tasks, a background-thread runner for synchronous callers (embedded clusters, tests,
the Spark source), and waits with a timeout that stay correct under cancellation.

`asyncio.wait_for` in 3.11 can swallow a cancellation that races with the awaited thing
completing (fixed in 3.12, gh-86296), which left a cancelled background loop waiting forever and
could leak a lock acquired just as the timeout fired. `wait_event`, `acquire_within` and
`result_within` wait through `asyncio.wait` instead, which never swallows the caller's
cancellation, and clean up their helper task; the broker, the client and the remoting layer use
them wherever they wait with a timeout."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import threading
from collections.abc import Awaitable, Coroutine
from typing import Any, TypeVar

log = logging.getLogger("rocketlite.runtime")

T = TypeVar("T")


def new_event_loop() -> asyncio.AbstractEventLoop:
    """uvloop's loop if available (about half the CPU per request), else asyncio's."""
    try:
        import uvloop  # noqa: PLC0415

        return uvloop.new_event_loop()
    except ImportError:
        return asyncio.new_event_loop()


async def cancel_tasks(*tasks: asyncio.Task[Any] | None) -> None:
    """Cancel the tasks (None entries skipped) and wait until each has ended.

    All are cancelled before the first is awaited, so none runs on while another winds down; their
    CancelledError stays here, any other exception they end with is raised.
    """
    live = [t for t in tasks if t is not None]
    for task in live:
        task.cancel()
    for task in live:
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def wait_event(event: asyncio.Event, timeout: float) -> bool:
    """Wait until `event` is set or `timeout` passes; True if it is set."""
    if event.is_set():
        return True
    waiter = asyncio.ensure_future(event.wait())
    try:
        await asyncio.wait({waiter}, timeout=timeout)
    finally:
        if not waiter.done():
            waiter.cancel()
    return event.is_set()


async def acquire_within(lock: asyncio.Lock, timeout: float) -> bool:
    """Acquire `lock` within `timeout`; False (and not held) otherwise."""
    if not lock.locked():
        await lock.acquire()
        return True
    task = asyncio.ensure_future(lock.acquire())
    try:
        await asyncio.wait({task}, timeout=timeout)
    except asyncio.CancelledError:
        _abandon(lock, task)
        raise
    if task.done() and not task.cancelled() and task.exception() is None:
        return True
    _abandon(lock, task)
    return False


def _abandon(lock: asyncio.Lock, task: asyncio.Future[Any]) -> None:
    def give_back(t: asyncio.Future[Any]) -> None:
        if not t.cancelled() and t.exception() is None:
            lock.release()  # the acquisition won the race with the cancel

    if task.done():
        give_back(task)
    else:
        task.cancel()
        task.add_done_callback(give_back)


async def result_within(awaitable: Awaitable[T], timeout: float) -> T:
    """The result of `awaitable` (its exception raised), or `TimeoutError` once `timeout` seconds
    pass: `asyncio.wait_for` as 3.11 means it, without the swallowed cancellation. On a timeout
    the awaited thing is cancelled and has ended before `TimeoutError` is raised (its result,
    should it finish regardless, is returned); a cancellation of the caller cancels it too."""
    task = asyncio.ensure_future(awaitable)
    try:
        await asyncio.wait({task}, timeout=timeout)
        if not task.done():
            task.cancel()
            await asyncio.wait({task})
            if task.cancelled():
                raise TimeoutError
    except asyncio.CancelledError:
        task.cancel()
        raise
    return task.result()


class LoopThread:
    """An event loop running in a daemon thread; `call` runs a coroutine on it and waits."""

    def __init__(self, name: str = "rocketlite-loop") -> None:
        self.loop = new_event_loop()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._started = threading.Event()
        self._thread.start()
        self._started.wait()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.call_soon(self._started.set)
        self.loop.run_forever()
        pending = asyncio.all_tasks(self.loop)
        for task in pending:
            task.cancel()
        if pending:
            self.loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        self.loop.run_until_complete(self.loop.shutdown_asyncgens())
        self.loop.close()

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def call(self, coro: Coroutine[Any, Any, T], timeout: float | None = 60.0) -> T:
        return self.submit(coro).result(timeout)

    def stop(self) -> None:
        if self.loop.is_running():
            self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=30)
