"""Dispatch ("reput"): turn new commit-log records into consume-queue units and index entries.

`Dispatcher` is the algorithm, with no thread: it reads records from a commit-log offset, groups
them per queue, and feeds the consume queues (only non-transactional and COMMIT records) and the
index (every record but ROLLBACK). Recovery runs it synchronously; `ReputService` runs it in the
background, woken when something is appended.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass

from rocketlite.protocol.dispatch_codec import QueueBatch
from rocketlite.protocol.record import DispatchRequest, ScanKind, ScanResult
from rocketlite.protocol.speedups import dispatch_batch, queue_runs, scan_messages
from rocketlite.store.commit_log import CommitLog
from rocketlite.store.consume_queue_store import ConsumeQueueStore
from rocketlite.store.index_service import IndexService

log = logging.getLogger("rocketlite.store.dispatch")

# (topic, queue_id, max_offset after dispatch, tags_code of the last unit, store timestamp)
ArrivalListener = Callable[[str, int, int, int, int], None]

_DISPATCH_CHUNK = 4 * 1024 * 1024


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
        self.stats = DispatchStats()
        self.reput_from_offset = 0
        # Records below this commit-log offset are not indexed (recovery: already in the index).
        self.index_from_offset = 0

    def dispatch_available(self, *, verify_crc: bool = False, limit_bytes: int = _DISPATCH_CHUNK) -> int:
        """Dispatch records from `reput_from_offset` up to the readable end (at most ~limit_bytes).

        Returns the number of bytes consumed (0 when caught up).
        """
        start = cursor = self.reput_from_offset
        consumed = 0
        while consumed < limit_bytes and cursor < self.commit_log.max_offset:
            offset = cursor
            data = self.commit_log.get_data(offset)
            if data is None or len(data) == 0:
                if offset < self.commit_log.min_offset:
                    # The segment under us was deleted (retention): continue at the log's start.
                    log.warning("reput offset %d below the commit log's min offset; jumping", offset)
                    cursor = self.commit_log.min_offset
                    continue
                break
            pos, res = self._dispatch_segment(data, limit_bytes - consumed, verify_crc)
            rolled = res is not None and res.kind is ScanKind.BLANK
            stop = res is not None and not rolled
            if res is not None and res.kind is ScanKind.CORRUPT:
                log.error("dispatch stopped at offset %d: %s", offset + pos, res.reason)
            data.release()
            if rolled:
                cursor = self.commit_log.roll_next_file(offset)
                consumed += cursor - offset
                continue
            cursor = offset + pos
            consumed += pos
            if stop or pos == 0:
                break
        # Published only after the queues and index hold the records, so a reader that sees the
        # new offset also sees the units.
        self.reput_from_offset = cursor
        return cursor - start

    def _dispatch_segment(
        self, data: memoryview, limit: int, verify_crc: bool
    ) -> tuple[int, ScanResult | None]:
        """Dispatch the records of one segment's readable bytes up to `limit`, batch by batch
        (`speedups.dispatch_batch`: the compiled one reads bytes and writes unit bytes and key
        hashes without the GIL), each record it leaves to the scanner through `apply`. Returns
        the position reached and what stopped the scan there (as `scan_messages`)."""
        pos = 0
        index = self.index
        while True:
            index_start = None if index is None else max(self.index_from_offset, index.end_phy_offset())
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
            for listener in self.listeners:
                listener(topic, queue_id, last_offset + 1, last_tags, last_ts)

    def apply(self, reqs: list[DispatchRequest]) -> None:
        """Feed a run of dispatch requests (in log order) to the consume queues and the index."""
        self._apply_queues(queue_runs(reqs))
        if self.index is not None:
            floor = self.index_from_offset
            if reqs[0].commit_log_offset >= floor:
                self.index.build_index_batch(reqs)
            else:
                self.index.build_index_batch([r for r in reqs if r.commit_log_offset >= floor])
        self.stats.records += len(reqs)
        self.stats.last_store_timestamp = reqs[-1].store_timestamp

    def dispatch_all(self, *, verify_crc: bool = False) -> int:
        """Dispatch synchronously until caught up (recovery); returns records dispatched."""
        before = self.stats.records
        while self.dispatch_available(verify_crc=verify_crc):
            pass
        return self.stats.records - before


class ReputService:
    """Background thread running the dispatcher; `wakeup` after every append."""

    def __init__(self, dispatcher: Dispatcher) -> None:
        self.dispatcher = dispatcher
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._caught_up = threading.Condition()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="rocketlite-reput", daemon=True)
        self._thread.start()

    def wakeup(self) -> None:
        # Called after every append: skip Event.set's lock and notify when a wake-up is pending.
        if not self._wake.is_set():
            self._wake.set()

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(0.01)
            self._wake.clear()
            try:
                while self.dispatcher.dispatch_available():
                    pass
            except Exception:
                log.exception("dispatch failed; retrying")
                self._stop.wait(0.1)
            with self._caught_up:
                self._caught_up.notify_all()

    def wait_caught_up(self, offset: int, timeout: float = 10.0) -> bool:
        """Block until everything before `offset` is dispatched (tests, shutdown)."""
        with self._caught_up:
            return self._caught_up.wait_for(
                lambda: self.dispatcher.reput_from_offset >= offset, timeout=timeout
            )

    def shutdown(self) -> None:
        """Dispatch what is left, then stop."""
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
        while self.dispatcher.dispatch_available():
            pass
