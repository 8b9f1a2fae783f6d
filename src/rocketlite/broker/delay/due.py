"""`DueDelivery`: the wake-up loop shared by the services that hold messages until a time comes
(the 4.x delay levels in `levels.py`, the 5.x timers in `timer/service.py`).

Both hold messages in a system topic and re-put each to its real topic when it is due. What they
share is when to look: one asyncio task calls the service's `deliver()` whenever something may be
due, that is when the time `deliver()` last named comes (a loop timer, not a poll), when the
dispatcher reports new units in the service's system topic (a new message may be due sooner), or
after `SAFETY_TICK_S` in case a wake-up is ever missed. `deliver()` returns the seconds until the
next due message (0: call again at once, after yielding to the loop; None: nothing pending). A
failing `deliver()` is logged and retried after `FAILURE_BACKOFF_S`. A second task calls the
service's `save()` every `save_interval_s`, so its cursors reach the disk off the delivery path.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

from rocketlite.runtime import cancel_tasks
from rocketlite.store.api import StoreAPI

SAFETY_TICK_S = 1.0
FAILURE_BACKOFF_S = 1.0


class DueDelivery:
    def __init__(
        self,
        store: StoreAPI,
        topic: str,
        name: str,
        deliver: Callable[[], float | None],
        save: Callable[[], Awaitable[None]],
        save_interval_s: float,
        log: logging.Logger,
    ) -> None:
        self.store = store
        self.topic = topic
        self.name = name
        self.deliver = deliver
        self.save = save
        self.save_interval_s = save_interval_s
        self.log = log
        self._closed = False
        self._wake: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._tasks: list[asyncio.Task[None]] = []

    def _on_arrival(self, topic: str, queue_id: int, max_offset: int, tags: int, store_ts: int) -> None:
        """Dispatch listener (any thread): new units in the topic may be due sooner."""
        del queue_id, max_offset, tags, store_ts
        if topic != self.topic or self._closed:
            return
        loop, wake = self._loop, self._wake
        if loop is not None and wake is not None:
            with contextlib.suppress(RuntimeError):  # the loop closed under us (shutdown)
                loop.call_soon_threadsafe(wake.set)

    async def _run(self) -> None:
        assert self._wake is not None and self._loop is not None
        wake, loop = self._wake, self._loop
        while True:
            wake.clear()
            try:
                delay = self.deliver()
            except Exception:
                self.log.exception("%s: delivering due messages failed", self.name)
                delay = FAILURE_BACKOFF_S
            if delay == 0:
                await asyncio.sleep(0)
                continue
            timeout = SAFETY_TICK_S if delay is None else min(delay, SAFETY_TICK_S)
            # A millisecond of slack: the loop may fire a timer up to its clock resolution early.
            timer = loop.call_later(timeout + 0.001, wake.set)
            try:
                await wake.wait()
            finally:
                timer.cancel()

    async def _save_loop(self) -> None:
        while True:
            await asyncio.sleep(self.save_interval_s)
            try:
                await self.save()
            except Exception:
                self.log.exception("%s: saving progress failed", self.name)

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._wake = asyncio.Event()
        self.store.add_arrival_listener(self._on_arrival)
        self._tasks = [
            asyncio.create_task(self._run(), name=self.name),
            asyncio.create_task(self._save_loop(), name=f"{self.name}-persist"),
        ]

    async def close(self) -> None:
        """Stop both tasks and the listener; the service saves its final state itself."""
        self._closed = True
        await cancel_tasks(*self._tasks)
        self._tasks = []
        self.store.remove_arrival_listener(self._on_arrival)
