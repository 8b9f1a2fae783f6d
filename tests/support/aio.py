"""Running a test's coroutine: tests are plain functions (pytest-asyncio is not used).

Write `async def scenario()` and call `run(scenario())`; each call gets a fresh event loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def run(coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
    """Run `coro` on a new loop; with `timeout`, fail it (TimeoutError) if it takes longer."""
    if timeout is None:
        return asyncio.run(coro)

    async def bounded() -> T:
        return await asyncio.wait_for(coro, timeout)

    return asyncio.run(bounded())
