"""Running rocketlite's asyncio servers: the event loop choice (uvloop when installed), stopping
background tasks, and a background-thread runner for synchronous callers (embedded clusters,
tests, the Spark source)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import threading
from collections.abc import Coroutine
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
