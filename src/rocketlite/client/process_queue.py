"""`ProcessQueue`: the messages of one assigned queue between pull and consume (Java's `ProcessQueue`).

Pulled messages wait here, keyed by queue offset, until the listener is done with them. The
offset a consumer may commit is the smallest offset still waiting (or one past the largest seen
when nothing waits): a slow message holds the committed offset back, so a crash re-delivers it
rather than losing it. Counting messages and bytes here is what flow control
(`pull_threshold_for_queue`) reads; `space` is set whenever the queue drains below a threshold so
a throttled pull loop can wait for it instead of polling.

Orderly consumption moves a batch to `consuming` (`take`) and either `commit`s it (offset = one
past the batch) or puts it back (`rollback`) to be retried in order. `dropped` marks a queue that
rebalance gave away: work still in flight for it is discarded, and its offset is not committed.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable

from rocketlite.client.message import MessageExt

REBALANCE_LOCK_MAX_LIVE_TIME = 30.0  # client-side lock validity (`rocketmq.client.rebalance.lockMaxLiveTime`)


class ProcessQueue:
    def __init__(self) -> None:
        self.msgs: dict[int, MessageExt] = {}  # ascending offsets (appended in order)
        self.consuming: dict[int, MessageExt] = {}
        self.msg_size = 0
        self.max_offset = -1
        self.dropped = False
        self.locked = False
        self.last_lock_time = 0.0
        self.last_pull_time = time.monotonic()
        self.last_consume_time = time.monotonic()
        self.space = asyncio.Event()
        self.space.set()
        self.consume_lock = asyncio.Lock()  # orderly: one batch at a time, and rebalance waits for it
        self.orderly_running = False
        self.pull_task: asyncio.Task[None] | None = None

    @property
    def count(self) -> int:
        return len(self.msgs) + len(self.consuming)

    def put(self, msgs: Iterable[MessageExt]) -> int:
        """Add pulled messages; returns how many were new."""
        added = 0
        for m in msgs:
            if m.queue_offset in self.msgs or m.queue_offset <= self.max_offset:
                continue
            self.msgs[m.queue_offset] = m
            self.msg_size += len(m.body)
            self.max_offset = m.queue_offset
            added += 1
        return added

    def _sorted(self) -> None:
        if any(a > b for a, b in zip(self.msgs, list(self.msgs)[1:], strict=False)):
            self.msgs = dict(sorted(self.msgs.items()))

    def remove(self, msgs: Iterable[MessageExt]) -> int:
        """Forget consumed messages; the offset to commit, or -1 when nothing was ever held."""
        result = -1
        if self.msgs:
            result = self.max_offset + 1
            for m in msgs:
                if self.msgs.pop(m.queue_offset, None) is not None:
                    self.msg_size -= len(m.body)
            if self.msgs:
                result = next(iter(self.msgs))
        self.last_consume_time = time.monotonic()
        return result

    def signal_space(self, threshold_count: int, threshold_bytes: int) -> None:
        if self.count <= threshold_count and self.msg_size <= threshold_bytes:
            self.space.set()

    # -- orderly ---------------------------------------------------------------------------
    def take(self, n: int) -> list[MessageExt]:
        """The next `n` messages in offset order, moved to `consuming`."""
        out: list[MessageExt] = []
        while self.msgs and len(out) < n:
            offset = next(iter(self.msgs))
            m = self.msgs.pop(offset)
            self.consuming[offset] = m
            out.append(m)
        self.last_consume_time = time.monotonic()
        return out

    def commit(self) -> int:
        """Finish the taken batch; the offset to commit (one past it), or -1 if none was taken."""
        if not self.consuming:
            return -1
        offset = max(self.consuming) + 1
        self.msg_size -= sum(len(m.body) for m in self.consuming.values())
        self.consuming.clear()
        return offset

    def rollback(self) -> None:
        """Put the taken batch back in front, to be consumed again in the same order."""
        self.msgs.update(self.consuming)
        self.consuming.clear()
        self._sorted()

    def lock_expired(self) -> bool:
        return time.monotonic() - self.last_lock_time > REBALANCE_LOCK_MAX_LIVE_TIME

    def span(self) -> int:
        return (self.max_offset - next(iter(self.msgs))) if self.msgs else 0
