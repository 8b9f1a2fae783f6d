"""Flush services: make appended bytes durable, per `flushDiskType`.

* `GroupCommitService` (SYNC_FLUSH): producers submit the end offset of their write and wait on a
  future; the service fdatasyncs once for everything queued, then completes every future whose
  offset is covered. One fdatasync costs ~0.2 ms whatever its size here, so durable throughput
  comes from how many writes share one.
* `FlushRealTimeService` (ASYNC_FLUSH): every `flushIntervalCommitLog` ms, flush when at least
  `flushCommitLogLeastPages` pages are pending (all of them every `flushCommitLogThoroughInterval`).
* `CommitRealTimeService` (`transientStorePoolEnable`): moves the write buffer into the file every
  `commitIntervalCommitLog` ms, then wakes the flusher.
* `FlushConsumeQueueService`: flushes consume queues and the index, then the checkpoint.

Each is a small thread built from its collaborators; none reaches back into a facade.
"""

from __future__ import annotations

import logging
import threading
from concurrent.futures import Future

from rocketlite.clock import Clock
from rocketlite.store.checkpoint import StoreCheckpoint
from rocketlite.store.commit_log import CommitLog
from rocketlite.store.consume_queue_store import ConsumeQueueStore
from rocketlite.store.dispatch import Dispatcher
from rocketlite.store.index.service import IndexService

log = logging.getLogger("rocketlite.store.flush")


class ServiceThread:
    """A named daemon thread that runs `run_once` every `interval_s` or when woken."""

    name = "service"

    def __init__(self, interval_s: float) -> None:
        self.interval_s = interval_s
        self._wake = threading.Event()
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name=f"rocketlite-{self.name}", daemon=True)
        self._thread.start()

    def wakeup(self) -> None:
        self._wake.set()

    @property
    def stopped(self) -> bool:
        return self._stopped.is_set()

    def _loop(self) -> None:
        while not self._stopped.is_set():
            self._wake.wait(self.interval_s)
            self._wake.clear()
            if self._stopped.is_set():
                break
            try:
                self.run_once()
            except Exception:
                log.exception("%s failed", self.name)
        try:
            self.on_shutdown()
        except Exception:
            log.exception("%s shutdown step failed", self.name)

    def run_once(self) -> None:
        raise NotImplementedError

    def on_shutdown(self) -> None:
        """Final work after the loop ends (a last flush)."""

    def shutdown(self) -> None:
        self._stopped.set()
        self._wake.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=30)


class PeriodicFlushService(ServiceThread):
    """A service that flushes or commits at least `least_pages` pages each round, and everything
    once every `thorough_interval_ms` (RocketMQ's "thorough" flush). Live config changes the
    three while it runs (`retune`)."""

    def __init__(
        self, clock: Clock, *, interval_ms: int, least_pages: int, thorough_interval_ms: int
    ) -> None:
        super().__init__(interval_ms / 1000)
        self.clock = clock
        self.least_pages = least_pages
        self.thorough_interval_ms = thorough_interval_ms
        self._last_thorough = clock.monotonic()

    def retune(self, *, interval_ms: int, least_pages: int, thorough_interval_ms: int) -> None:
        """New settings (UPDATE_BROKER_CONFIG); the service wakes so a new interval applies now."""
        self.interval_s = interval_ms / 1000
        self.least_pages = least_pages
        self.thorough_interval_ms = thorough_interval_ms
        self.wakeup()

    def pages_this_round(self) -> int:
        """`least_pages`, or 0 (flush everything) when a thorough round is due."""
        now = self.clock.monotonic()
        if (now - self._last_thorough) * 1000 >= self.thorough_interval_ms:
            self._last_thorough = now
            return 0
        return self.least_pages

    def run_once(self) -> None:
        self.flush(self.pages_this_round())

    def flush(self, least_pages: int) -> None:
        """One round's work: flush (or commit) at least `least_pages` pages, 0 meaning all."""
        raise NotImplementedError


class FlushRealTimeService(PeriodicFlushService):
    name = "flush-commitlog"

    def __init__(
        self,
        commit_log: CommitLog,
        checkpoint: StoreCheckpoint,
        clock: Clock,
        *,
        interval_ms: int,
        least_pages: int,
        thorough_interval_ms: int,
    ) -> None:
        super().__init__(
            clock, interval_ms=interval_ms, least_pages=least_pages, thorough_interval_ms=thorough_interval_ms
        )
        self.commit_log = commit_log
        self.checkpoint = checkpoint

    def flush(self, least_pages: int) -> None:
        self.commit_log.flush(least_pages)
        _record_physic_timestamp(self.commit_log, self.checkpoint)

    def on_shutdown(self) -> None:
        for _ in range(10):
            if self.commit_log.flush(0):
                break
        _record_physic_timestamp(self.commit_log, self.checkpoint)


def _record_physic_timestamp(commit_log: CommitLog, checkpoint: StoreCheckpoint) -> None:
    """The store time of the last record in the last fully flushed position's segment."""
    q = commit_log.queue
    mf = q.find_by_offset(max(q.flushed_where - 1, 0))
    if mf is not None and mf.store_timestamp and q.flushed_where >= q.max_wrote_offset:
        checkpoint.physic_msg_timestamp = mf.store_timestamp


class CommitRealTimeService(PeriodicFlushService):
    """Write-buffer mode: copy committed-but-unwritten bytes into the file, then wake a flusher."""

    name = "commit-commitlog"

    def __init__(
        self,
        commit_log: CommitLog,
        flusher: ServiceThread,
        clock: Clock,
        *,
        interval_ms: int,
        least_pages: int,
        thorough_interval_ms: int,
    ) -> None:
        super().__init__(
            clock, interval_ms=interval_ms, least_pages=least_pages, thorough_interval_ms=thorough_interval_ms
        )
        self.commit_log = commit_log
        self.flusher = flusher

    def flush(self, least_pages: int) -> None:
        if not self.commit_log.commit(least_pages):
            self.flusher.wakeup()

    def on_shutdown(self) -> None:
        for _ in range(10):
            if self.commit_log.commit(0):
                break


class GroupCommitService(ServiceThread):
    """SYNC_FLUSH: flush once for every write queued since the last flush."""

    name = "group-commit"

    def __init__(self, commit_log: CommitLog, checkpoint: StoreCheckpoint) -> None:
        super().__init__(0.01)
        self.commit_log = commit_log
        self.checkpoint = checkpoint
        self._lock = threading.Lock()
        self._requests: list[tuple[int, Future[bool]]] = []

    def submit(self, end_offset: int) -> Future[bool]:
        """A future that becomes True once everything before `end_offset` is on disk."""
        fut: Future[bool] = Future()
        with self._lock:
            self._requests.append((end_offset, fut))
        # The loop clears the event before taking the requests, so a set event means this
        # request will be seen: skip Event.set's lock and notify (one put in many pays it).
        if not self._wake.is_set():
            self._wake.set()
        return fut

    def run_once(self) -> None:
        with self._lock:
            requests, self._requests = self._requests, []
        if not requests:
            self.commit_log.flush(0)
            return
        target = max(off for off, _ in requests)
        q = self.commit_log.queue
        for _ in range(2):
            if q.flushed_where >= target:
                break
            q.flush_all_to(target)
        flushed = q.flushed_where
        for off, fut in requests:
            # A waiter that gave up (`runtime.result_within` on wrap_future cancels this future) must not
            # stop the round: set_result on it would raise and leave the later waiters hanging.
            if fut.set_running_or_notify_cancel():
                fut.set_result(flushed >= off)
        _record_physic_timestamp(self.commit_log, self.checkpoint)

    def on_shutdown(self) -> None:
        self.run_once()
        with self._lock:
            requests, self._requests = self._requests, []
        for _, fut in requests:
            if fut.set_running_or_notify_cancel():
                fut.set_result(False)


class FlushConsumeQueueService(PeriodicFlushService):
    """Flush consume queues and index, then write the checkpoint."""

    name = "flush-consumequeue"

    def __init__(
        self,
        cq_store: ConsumeQueueStore,
        index: IndexService | None,
        dispatcher: Dispatcher,
        checkpoint: StoreCheckpoint,
        clock: Clock,
        *,
        interval_ms: int,
        least_pages: int,
        thorough_interval_ms: int,
    ) -> None:
        super().__init__(
            clock, interval_ms=interval_ms, least_pages=least_pages, thorough_interval_ms=thorough_interval_ms
        )
        self.cq_store = cq_store
        self.index = index
        self.dispatcher = dispatcher
        self.checkpoint = checkpoint

    def flush(self, least_pages: int) -> None:
        logics_ts = self.dispatcher.stats.last_store_timestamp
        self.cq_store.flush_all(least_pages)
        if least_pages == 0 and logics_ts:
            self.checkpoint.logics_msg_timestamp = logics_ts
        if self.index is not None:
            index_ts = self.index.flush()
            if index_ts:
                self.checkpoint.index_msg_timestamp = index_ts
        if least_pages == 0:
            self.checkpoint.flush()

    def on_shutdown(self) -> None:
        self.flush(0)
