"""`PullRequestHoldService`: long polling, RocketMQ's `PullRequestHoldService` on the event loop.

A pull that finds nothing new (PULL_NOT_FOUND) with the SUSPEND flag is parked here under its
(topic, queueId) instead of being answered, because a push consumer answered 19 at once re-pulls
at once and spins. A parked pull is re-run (without suspend) and answered when:

* the store reports new units in its queue (`on_arrival`, once per queue per dispatch round:
  called on the loop itself when the round ran there, as rounds after sends do, else hopped onto
  the loop from the reput thread) beyond the pull's offset whose tag code passes the pull's
  filter; the re-run answers with everything the queue holds by then (up to maxMsgNums);
* the periodic check (every `longPollingCheckIntervalMs`, 5 s) sees the queue's max offset beyond
  the pull's offset (tags unknown, so it matches, as in Java);
* its deadline passes (suspendTimeoutMillis from the request, or shortPollingTimeMills): unlike
  Java, whose deadlines are only looked at by the 5 s check, a pull is answered at most
  `DEADLINE_GRANULE_S` (10 ms) after its deadline and never before it (ali-ons drops the
  connection when a pull is late). Deadlines are rounded up to that granule and the pulls of one
  granule share one loop timer, made when the first of them parks: a long-polling consumer parks
  and is woken once per message, so a timer per pull (made, then cancelled at the wake) cost more
  than the rest of the parking. A granule's timer is left pending when its pulls are all woken
  early (it then finds nothing): at most one timer per 10 ms of the longest suspend timeout.

A held SQL92 pull carries a `probe`: the new units are read through its filter and the pull is
woken only when one of them matches (the tag code alone cannot tell), on an arrival and on the
periodic check alike; otherwise it waits on for the next arrival or its deadline. (RocketMQ wakes
it at its periodic check whatever arrived, and the re-run answers PULL_RETRY_IMMEDIATELY.)

The dispatcher reports one tag code per queue per batch (the last unit's). Each held pull
remembers the max offset it has already seen: when a report covers more than one new unit, the
earlier units' tags are unknown and the report matches, so a wanted message is never sat on.

A pull whose connection closes is dropped. `close` answers what is still held.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from rocketlite.protocol.wire.command import RemotingCommand
from rocketlite.protocol.wire.headers import PullMessageRequestHeader
from rocketlite.remoting.connection import Connection
from rocketlite.runtime import cancel_tasks

log = logging.getLogger("rocketlite.broker.pull_hold")

_CLOSE_HOOK = "rocketlite.pull_hold"  # conn.attrs key: close callback installed

QueueKey = tuple[str, int]

DEADLINE_GRANULE_S = 0.01  # deadlines rounded up to this; one loop timer per granule


class MaxOffsetSource(Protocol):
    """What the service needs from the store."""

    def get_max_offset_in_queue(self, topic: str, queue_id: int) -> int: ...


@dataclass(slots=True, eq=False)
class HeldPull:
    """A parked PULL_MESSAGE. `codes` None accepts every tag; `seen_max` is the queue's max
    offset as of the last report this pull looked at; `header` is the request's, decoded once
    (the re-run skips decoding it again); `probe(start, end)`, for an SQL92 pull, tells whether
    queue offsets [start, end) hold a message it takes."""

    conn: Connection
    request: RemotingCommand
    topic: str
    queue_id: int
    offset: int
    codes: frozenset[int] | None
    seen_max: int
    granule: int | None = None  # the deadline granule it waits in (None once unparked)
    header: PullMessageRequestHeader | None = None
    probe: Callable[[int, int], bool] | None = None
    held_at: float = field(default_factory=time.perf_counter)  # for rocketmq_rpc_latency

    def matches(self, tags_code: int | None) -> bool:
        return self.codes is None or tags_code is None or tags_code in self.codes


def _probe(probe: Callable[[int, int], bool], start: int, end: int) -> bool:
    """The probe's answer; True when it fails (the re-run then answers, with the error)."""
    try:
        return probe(start, end)
    except Exception:
        log.exception("probing offsets %d..%d for a held SQL92 pull failed", start, end)
        return True


class PullRequestHoldService:
    """Parks pulls and re-runs them through `wake` (which answers on the pull's connection)."""

    def __init__(
        self,
        store: MaxOffsetSource,
        loop: asyncio.AbstractEventLoop,
        wake: Callable[[HeldPull], None],
        *,
        check_interval_s: float = 5.0,
    ) -> None:
        self.store = store
        self.loop = loop
        self.wake = wake
        self.check_interval_s = check_interval_s
        self.holds: dict[QueueKey, list[HeldPull]] = {}
        # deadline granule (loop time / DEADLINE_GRANULE_S, rounded up) -> its held pulls, and
        # the one timer per granule (kept until it fires, even when its pulls were woken early)
        self._granules: dict[int, dict[HeldPull, None]] = {}
        self._timers: dict[int, asyncio.TimerHandle] = {}
        self._task: asyncio.Task[None] | None = None
        self.closed = False
        self._loop_thread = 0  # the loop's thread id, once `start` ran there

    @property
    def held_count(self) -> int:
        return sum(len(v) for v in self.holds.values())

    # -- parking ----------------------------------------------------------------------------
    def suspend(self, held: HeldPull, timeout_s: float) -> None:
        """Park `held` until a matching arrival or `timeout_s` from now."""
        if self.closed:
            self.wake(held)
            return
        key = (held.topic, held.queue_id)
        self.holds.setdefault(key, []).append(held)
        loop = self.loop
        granule = math.ceil((loop.time() + max(timeout_s, 0.0)) / DEADLINE_GRANULE_S)
        held.granule = granule
        pulls = self._granules.get(granule)
        if pulls is None:
            pulls = self._granules[granule] = {}
        pulls[held] = None
        if granule not in self._timers:
            self._timers[granule] = loop.call_at(granule * DEADLINE_GRANULE_S, self._expire, granule)
        conn = held.conn
        if not conn.attrs.get(_CLOSE_HOOK):
            conn.attrs[_CLOSE_HOOK] = True
            conn.close_callbacks.append(self.drop_connection)
        # A unit dispatched between the pull's read and the park above was reported while the
        # queue had no holds (`on_arrival` skips those): look once more.
        newest = self.store.get_max_offset_in_queue(held.topic, held.queue_id)
        if newest > held.seen_max:
            self.loop.call_soon(self.notify_arriving, held.topic, held.queue_id, newest, None)

    def _unpark(self, held: HeldPull) -> bool:
        """Take `held` out of the table; False if it was not there any more."""
        key = (held.topic, held.queue_id)
        pulls = self.holds.get(key)
        if pulls is None or held not in pulls:
            return False
        pulls.remove(held)
        if not pulls:
            del self.holds[key]
        granule = held.granule
        if granule is not None:
            held.granule = None
            waiting = self._granules.get(granule)
            if waiting is not None:
                waiting.pop(held, None)
        return True

    def _expire(self, granule: int) -> None:
        """A granule's deadline passed: answer the pulls still parked in it."""
        self._timers.pop(granule, None)
        pulls = self._granules.pop(granule, None)
        if not pulls:
            return
        for held in pulls:
            held.granule = None
            if self._unpark(held):
                self._run(held)

    def _run(self, held: HeldPull) -> None:
        try:
            self.wake(held)
        except Exception:
            log.exception("re-running a held pull of %s:%d failed", held.topic, held.queue_id)

    def drop_connection(self, conn: Connection) -> None:
        """The connection closed: nobody can receive its held pulls' answers."""
        for pulls in list(self.holds.values()):
            for held in [h for h in pulls if h.conn is conn]:
                self._unpark(held)

    # -- waking -----------------------------------------------------------------------------
    def on_arrival(self, topic: str, queue_id: int, max_offset: int, tags_code: int, store_ts: int) -> None:
        """The store's arrival listener. On the loop's thread (a dispatch round run there) it
        answers at once; from the reput thread it hops to the loop.

        Queues without held pulls are skipped without touching the loop (the common case); the
        race with a pull being parked right now is closed by the re-check in `suspend`.
        """
        del store_ts
        if (topic, queue_id) not in self.holds or self.closed:
            return
        if threading.get_ident() == self._loop_thread:
            self.notify_arriving(topic, queue_id, max_offset, tags_code)
            return
        with contextlib.suppress(RuntimeError):  # the loop is closing
            self.loop.call_soon_threadsafe(self.notify_arriving, topic, queue_id, max_offset, tags_code)

    def notify_arriving(self, topic: str, queue_id: int, max_offset: int, tags_code: int | None) -> None:
        """`notifyMessageArriving`: re-run the held pulls of the queue that the new units satisfy."""
        key = (topic, queue_id)
        pulls = self.holds.get(key)
        if not pulls:
            return
        woken: list[HeldPull] = []
        for held in list(pulls):
            newest, known = max_offset, tags_code
            if newest <= held.offset:
                newest, known = self.store.get_max_offset_in_queue(topic, queue_id), None
            if newest <= held.offset:
                continue
            since = max(held.seen_max, held.offset)
            if newest - since > 1:
                known = None  # several new units, only the last one's tag was reported
            held.seen_max = max(held.seen_max, newest)
            if held.probe is not None:
                if newest > since and _probe(held.probe, since, newest):
                    woken.append(held)
            elif held.matches(known):
                woken.append(held)
        # The answers of one round go out at its end, one write per connection, not a loop
        # turn later through each connection's deferred flush.
        opened: list[Connection] = []
        for held in woken:
            if self._unpark(held):
                conn = held.conn
                if conn.open_output():
                    opened.append(conn)
                self._run(held)
        for conn in opened:
            conn.flush_output()

    def check_all(self) -> None:
        """The periodic check: compare every held queue with its current max offset."""
        for topic, queue_id in list(self.holds):
            try:
                newest = self.store.get_max_offset_in_queue(topic, queue_id)
                self.notify_arriving(topic, queue_id, newest, None)
            except Exception:
                log.exception("checking held pulls of %s:%d failed", topic, queue_id)

    # -- service ----------------------------------------------------------------------------
    async def start(self) -> None:
        self._loop_thread = threading.get_ident()
        self._task = asyncio.create_task(self._check_loop(), name="broker-pull-hold")

    async def _check_loop(self) -> None:
        while True:
            await asyncio.sleep(self.check_interval_s)
            self.check_all()

    async def close(self) -> None:
        """Stop checking and answer every held pull whose connection is still open."""
        self.closed = True
        task, self._task = self._task, None
        await cancel_tasks(task)
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()
        for pulls in list(self.holds.values()):
            for held in list(pulls):
                if self._unpark(held) and not held.conn.closed:
                    self._run(held)
