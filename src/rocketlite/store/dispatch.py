"""Dispatch ("reput"): turn new commit-log records into consume-queue units and index entries.

`Dispatcher` is the algorithm, with no thread: it reads records from a commit-log offset, groups
them per queue, and feeds the consume queues (only non-transactional and COMMIT records) and the
index (every record but ROLLBACK). Recovery runs it synchronously; `ReputService` runs it in the
background, woken when something is appended.

Arrival listeners (long polling, HA, the delay schedule) hear once per queue per dispatch round
(`dispatch_available`), after the round's units are written and its offset published: a burst of
sends to a queue wakes its held pulls once, and the pulls then read all of it.

Where a round runs (`ReputService`): appends made on the broker's event-loop thread schedule one
round on that loop (`run_on`, `MessageStore.dispatch_on`), coalesced per loop iteration, so a
send's units are readable, and its held pulls answered, within the same iteration: no thread
wake-up, no GIL hand-over (a thread waiting for the GIL behind a busy loop waits up to the
interpreter's 5 ms switch interval), no hop back to the loop. A round that finds more than
`INLINE_MAX_BYTES` waiting (bulk produce) leaves the rest to the reput thread, whose byte loops
run without the GIL beside the loop. The thread also serves appends from other threads and polls
as a safety net (a poll leaves the records to the loop while its rounds run:
`loop_rounds_running`).

The loop never waits for the thread. One lock serializes rounds; a loop round that finds it taken
(the thread is in a round) does not block on it but runs again `PACED_ROUND_S` later, by which
time the thread has usually dispatched the records itself (the deferred round then has nothing to
do). Blocking there would stall every connection of the loop behind a thread that may itself be
waiting for the GIL the loop holds.

Paced appends (`wakeup(paced=True)`, passed down the put path by the 5.x gRPC endpoint's sends):
grpc.aio runs each RPC in a loop iteration of its own, so "a round per iteration" would be a round
per message (tens of microseconds each). A paced append's round runs at most `PACED_ROUND_S` after
the previous round (at once when the last round is older), so a stream of RPCs shares rounds, as
Java's reput thread shares its 1 ms sleeps; an unpaced append (4.x) still gets its round in the
next iteration. Deferred rounds, paced or after a busy lock, are one rule: at most one is pending.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from rocketlite.progress import ProgressCallback, no_progress
from rocketlite.protocol.formats.record import DispatchRequest, ScanKind, ScanResult
from rocketlite.store.codec.dispatch_ref import QueueBatch
from rocketlite.store.codec.speedups import dispatch_batch, queue_runs, scan_messages
from rocketlite.store.commit_log import CommitLog
from rocketlite.store.consume_queue_store import ConsumeQueueStore
from rocketlite.store.index.service import IndexService

log = logging.getLogger("rocketlite.store.dispatch")

# (topic, queue_id, max_offset after dispatch, tags_code of the last unit, store timestamp)
ArrivalListener = Callable[[str, int, int, int, int], None]

_DISPATCH_CHUNK = 4 * 1024 * 1024
# A round on the event loop dispatches at most this much (~0.3 ms of compiled dispatch for 1 KiB
# records, small beside the loop's cost of receiving them); more goes on to the reput thread. A
# lower limit hands rounds of a loaded loop to the thread, and the GIL hand-overs between the two
# (the convoy) cost the loop more than dispatching itself.
INLINE_MAX_BYTES = 1024 * 1024
_POLL_S = 0.05  # the reput thread's safety-net poll (every append wakes it or the loop's round)
# A paced append's round runs at most this long after the previous loop round; a loop round that
# finds the thread in a round is deferred by as much.
PACED_ROUND_S = 0.001


@dataclass(slots=True)
class DispatchStats:
    records: int = 0
    cq_units: int = 0
    last_store_timestamp: int = 0


class Dispatcher:
    """Builds consume queues and the index from commit-log bytes."""

    def __init__(
        self,
        commit_log: CommitLog,
        cq_store: ConsumeQueueStore,
        index: IndexService | None,
        *,
        delay_levels_ms: tuple[int, ...] = (),
    ) -> None:
        self.commit_log = commit_log
        self.cq_store = cq_store
        self.index = index
        self.delay_levels_ms = delay_levels_ms
        self.listeners: list[ArrivalListener] = []
        # This round's arrivals: (topic, queue) -> (max offset, last tags code, store timestamp).
        self._arrivals: dict[tuple[str, int], tuple[int, int, int]] = {}
        self.stats = DispatchStats()
        self.reput_from_offset = 0
        # Records below this commit-log offset are not indexed (recovery: already in the index).
        self.index_from_offset = 0
        # The offset this dispatcher last published, and whether the index's end (its newest
        # entry's offset) was then seen below the records still to dispatch: see `_index_start`.
        self._published = -1
        self._index_behind = False

    def dispatch_available(self, *, verify_crc: bool = False, limit_bytes: int = _DISPATCH_CHUNK) -> int:
        """Dispatch records from `reput_from_offset` up to the readable end (at most ~limit_bytes).

        Returns the number of bytes consumed (0 when caught up).
        """
        start = cursor = self.reput_from_offset
        if start != self._published:  # moved by someone else (recovery): ask the index again
            self._index_behind = False
        commit_log = self.commit_log
        consumed = 0
        while consumed < limit_bytes and cursor < commit_log.max_offset:
            offset = cursor
            data = commit_log.get_data(offset)
            if data is None or len(data) == 0:
                if offset < commit_log.min_offset:
                    # The segment under us was deleted (retention): continue at the log's start.
                    log.warning("reput offset %d below the commit log's min offset; jumping", offset)
                    cursor = commit_log.min_offset
                    continue
                break
            pos, res = self._dispatch_segment(data, offset, limit_bytes - consumed, verify_crc)
            rolled = res is not None and res.kind is ScanKind.BLANK
            stop = res is not None and not rolled
            if res is not None and res.kind is ScanKind.CORRUPT:
                log.error("dispatch stopped at offset %d: %s", offset + pos, res.reason)
            data.release()
            if rolled:
                cursor = commit_log.roll_next_file(offset)
                consumed += cursor - offset
                continue
            cursor = offset + pos
            consumed += pos
            if stop or pos == 0:
                break
        # Published only after the queues and index hold the records, so a reader that sees the
        # new offset also sees the units.
        self.reput_from_offset = self._published = cursor
        self._announce()
        return cursor - start

    def _announce(self) -> None:
        """Tell the listeners, once per queue, what this round added."""
        arrivals = self._arrivals
        if not arrivals:
            return
        self._arrivals = {}
        listeners = tuple(self.listeners)
        for (topic, queue_id), (max_offset, tags_code, store_ts) in arrivals.items():
            for listener in listeners:
                try:
                    listener(topic, queue_id, max_offset, tags_code, store_ts)
                except Exception:
                    log.exception("arrival listener %r failed", listener)

    def _index_start(self, index: IndexService, base: int) -> int:
        """Where indexing starts for records from commit-log offset `base` on: records below
        the index's end (its newest entry's offset) are already indexed (recovery), and so are
        those below `index_from_offset`.

        The index is written only by this dispatcher, with records below the offset it then
        publishes, and otherwise only shrinks (files deleted, truncated at recovery), so once its
        end was seen below `base` it stays below every record dispatched after, as long as
        nobody else moved `reput_from_offset`: then it filters nothing, and is not asked again
        (a lock and a lookup per round, saved)."""
        if self._index_behind:
            return self.index_from_offset
        end = index.end_phy_offset()
        if end < base:
            self._index_behind = True
        return max(self.index_from_offset, end)

    def _dispatch_segment(
        self, data: memoryview, base: int, limit: int, verify_crc: bool
    ) -> tuple[int, ScanResult | None]:
        """Dispatch the records of one segment's readable bytes (from commit-log offset `base`)
        up to `limit`, batch by batch (`speedups.dispatch_batch`: the compiled one reads bytes and
        writes unit bytes and key hashes without the GIL), each record it leaves to the scanner
        through `apply`. Returns the position reached and what stopped the scan there (as
        `scan_messages`)."""
        pos = 0
        index = self.index
        while True:
            index_start = None if index is None else self._index_start(index, base + pos)
            pos, res, count, last_ts, queues, entries = dispatch_batch(
                data,
                pos,
                limit,
                verify_crc=verify_crc,
                delay_levels_ms=self.delay_levels_ms,
                index_start=index_start,
            )
            if count:
                self._apply_queues(queues)
                if index is not None:
                    index.put_entries(*entries)
                self.stats.records += count
                self.stats.last_store_timestamp = last_ts
            if res is not None or pos >= len(data) or pos >= limit:
                return pos, res
            reqs: list[DispatchRequest] = []
            pos, res = scan_messages(
                data, pos, pos + 1, reqs, verify_crc=verify_crc, delay_levels_ms=self.delay_levels_ms
            )
            if reqs:
                self.apply(reqs)
            if res is not None:
                return pos, res

    def _apply_queues(self, queues: list[QueueBatch]) -> None:
        for topic, queue_id, runs, count, last_offset, last_tags, last_ts in queues:
            cq = self.cq_store.find_or_create(topic, queue_id)
            for first_cq_offset, data in runs:
                cq.put_packed(data, first_cq_offset)
            self.stats.cq_units += count
            self._arrivals[(topic, queue_id)] = (last_offset + 1, last_tags, last_ts)

    def apply(self, reqs: list[DispatchRequest]) -> None:
        """Feed a run of dispatch requests (in log order) to the consume queues and the index
        (part of a round: the listeners hear at the round's end)."""
        self._apply_queues(queue_runs(reqs))
        if self.index is not None:
            floor = self.index_from_offset
            if reqs[0].commit_log_offset >= floor:
                self.index.build_index_batch(reqs)
            else:
                self.index.build_index_batch([r for r in reqs if r.commit_log_offset >= floor])
        self.stats.records += len(reqs)
        self.stats.last_store_timestamp = reqs[-1].store_timestamp

    def dispatch_all(self, *, verify_crc: bool = False, progress: ProgressCallback = no_progress) -> int:
        """Dispatch synchronously until caught up (recovery); returns records dispatched.

        `progress` gets (bytes dispatched, bytes to dispatch) after each chunk: re-dispatching a
        large log after a crash takes long enough that the operator must see it move."""
        before = self.stats.records
        start = self.reput_from_offset
        while self.dispatch_available(verify_crc=verify_crc):
            progress(self.reput_from_offset - start, max(self.commit_log.max_offset - start, 0))
        return self.stats.records - before


class ReputService:
    """Runs the dispatcher: a round on the event loop after appends made there (`run_on`), and
    a background thread for bulk, for appends from other threads, and as a safety net.

    One lock serializes rounds; whoever holds it dispatches everything up to the end it sees. The
    loop never waits for it: a loop round that finds the thread in a round is deferred by
    `PACED_ROUND_S` (the thread may well take the records meanwhile; the deferred round then
    finds nothing to do), the same rule that spaces paced rounds.
    """

    def __init__(self, dispatcher: Dispatcher) -> None:
        self.dispatcher = dispatcher
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._caught_up = threading.Condition()
        self._waiters = 0
        self._round = threading.Lock()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._owner = 0  # thread id of `_loop`
        self._soon_pending = False  # a round is scheduled for the loop's next iteration
        self._later_pending = False  # a deferred round is scheduled (`PACED_ROUND_S`)
        self._last_round = 0.0  # time.monotonic() of the last round on the loop

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="rocketlite-reput", daemon=True)
        self._thread.start()

    def run_on(self, loop: asyncio.AbstractEventLoop) -> None:
        """Call from `loop`'s thread: appends made on this thread are then dispatched by a round
        on the loop, once per loop iteration (paced ones: at most once per `PACED_ROUND_S`)."""
        self._loop = loop
        self._owner = threading.get_ident()

    def wakeup(self, paced: bool = False) -> None:
        """Called after every append; `paced` for an append whose round may be shared with the
        appends of the next few loop iterations (see the module docstring)."""
        if self._loop is not None and threading.get_ident() == self._owner:
            if self._soon_pending:
                return
            if paced:
                if not self._later_pending:
                    self._round_after(self._last_round + PACED_ROUND_S - time.monotonic())
            else:
                self._round_after(0.0)
            return
        # Skip Event.set's lock and notify when a wake-up is pending.
        if not self._wake.is_set():
            self._wake.set()

    def _round_after(self, delay: float) -> None:
        """Schedule a loop round: in the next iteration (`delay` <= 0), or `delay` seconds on
        (deferred: at most one pending). A closed loop hands the work back to the thread alone."""
        loop = self._loop
        assert loop is not None  # (checked by the callers)
        try:
            if delay <= 0:
                loop.call_soon(self._soon_round)
                self._soon_pending = True
            elif not self._later_pending:
                loop.call_later(delay, self._later_round)
                self._later_pending = True
        except RuntimeError:  # the loop is closed: back to the thread alone
            self._loop, self._soon_pending, self._later_pending = None, False, False
            self._wake.set()

    def _soon_round(self) -> None:
        self._soon_pending = False
        self._loop_round()

    def _later_round(self) -> None:
        self._later_pending = False
        self._loop_round()

    def _loop_round(self) -> None:
        """The loop's round: everything appended up to now, or a first `INLINE_MAX_BYTES` of it.
        Never blocks: with the thread in a round, it is deferred by `PACED_ROUND_S`."""
        self._last_round = time.monotonic()
        dispatcher = self.dispatcher
        if dispatcher.reput_from_offset >= dispatcher.commit_log.max_offset:
            return  # taken by the thread (or an earlier round) meanwhile
        if not self._round.acquire(blocking=False):
            self._round_after(PACED_ROUND_S)
            return
        try:
            if self._stop.is_set():
                return
            try:
                dispatcher.dispatch_available(limit_bytes=INLINE_MAX_BYTES)
            except Exception:
                log.exception("dispatch on the event loop failed; the reput thread retries")
            if dispatcher.reput_from_offset < dispatcher.commit_log.max_offset:
                self._wake.set()  # bulk: the rest on the thread, beside the loop
        finally:
            self._round.release()
        if self._waiters:
            with self._caught_up:
                self._caught_up.notify_all()

    def loop_rounds_running(self) -> bool:
        """The loop had a round within the last poll period: then the thread's safety-net poll
        leaves what was appended since to the loop's next round. Taking the round there would
        make the loop skip its rounds (the lock is taken) and leave the records to a thread that
        a busy loop starves of the GIL: dispatch, and the pulls it answers, would lag by many
        milliseconds. A loop with no round for a poll period (stalled, or closed) is not counted
        on; explicit wake-ups (bulk, other threads' appends, waiters) always dispatch."""
        return self._loop is not None and time.monotonic() - self._last_round < _POLL_S

    def _run(self) -> None:
        dispatcher = self.dispatcher
        while not self._stop.is_set():
            woken = self._wake.wait(_POLL_S)
            self._wake.clear()
            if dispatcher.reput_from_offset >= dispatcher.commit_log.max_offset:
                if self._waiters:
                    with self._caught_up:
                        self._caught_up.notify_all()
                continue
            if not woken and self.loop_rounds_running():
                continue
            try:
                more = True
                while more and not self._stop.is_set():
                    with self._round:  # released between chunks: a loop round may take the next
                        more = dispatcher.dispatch_available() > 0
            except Exception:
                log.exception("dispatch failed; retrying")
                self._stop.wait(0.1)
            with self._caught_up:
                self._caught_up.notify_all()

    def wait_caught_up(self, offset: int, timeout: float = 10.0) -> bool:
        """Block until everything before `offset` is dispatched (tests, shutdown)."""
        with self._caught_up:
            self._waiters += 1
            try:
                self._wake.set()
                return self._caught_up.wait_for(
                    lambda: self.dispatcher.reput_from_offset >= offset, timeout=timeout
                )
            finally:
                self._waiters -= 1

    def shutdown(self) -> None:
        """Dispatch what is left, then stop."""
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
        with self._round:
            while self.dispatcher.dispatch_available():
                pass
