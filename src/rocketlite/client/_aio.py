"""Small asyncio helpers that stay correct under cancellation on Python 3.11.

`asyncio.wait_for` in 3.11 can swallow a cancellation that races with the awaited thing
completing (fixed in 3.12, gh-86296), which left a cancelled background loop waiting forever and
could leak a lock acquired just as the timeout fired. These helpers wait through `asyncio.wait`
instead, which never swallows the caller's cancellation, and clean up their helper task.
"""

from __future__ import annotations

import asyncio
from typing import Any


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
