"""3. SYNC_FLUSH: acked messages/s with many producers in flight (and on threads), and how many
fdatasyncs the group commit needed."""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from rocketlite.store.config import FlushDiskType
from rocketlite.store.message_store import MessageStore
from rocketlite.store.results import PendingPut

if TYPE_CHECKING:
    from _typeshed import FileDescriptorLike

from bench.store.common import (
    GOAL_SYNC_ACKED,
    GOAL_SYNC_P99_MS,
    GROUP_COMMIT_THREAD,
    KIB,
    MB,
    Plan,
    Report,
    Row,
    fmt_int,
    make_message,
    mark,
    out,
    percentile,
    record_size,
    remove,
    segment_size_for,
    store_config,
    wait_staged,
)


# -- 3. SYNC_FLUSH --------------------------------------------------------------------------------
class FdatasyncCounter:
    """Counts `os.fdatasync` calls made by one thread (patched in for the duration of a run)."""

    def __init__(self, thread_name: str) -> None:
        self.thread_name = thread_name
        self.count = 0
        self._real: Callable[[FileDescriptorLike], None] = os.fdatasync

    def _call(self, fd: FileDescriptorLike) -> None:
        if threading.current_thread().name == self.thread_name:
            self.count += 1
        self._real(fd)

    @contextlib.contextmanager
    def installed(self) -> Iterator[FdatasyncCounter]:
        self._real = os.fdatasync
        os.fdatasync = self._call
        try:
            yield self
        finally:
            os.fdatasync = self._real


@dataclass(slots=True)
class SyncFigures:
    model: str
    acked: int
    elapsed: float
    latencies: list[float]
    fdatasyncs: int
    record_bytes: int


def sync_store(root: Path, total_bytes: int) -> MessageStore:
    store = MessageStore(
        store_config(
            root,
            flush_disk_type=FlushDiskType.SYNC_FLUSH,
            maped_file_size_commit_log=segment_size_for(total_bytes),
        )
    )
    store.start()
    return store


def run_sync_inflight(work: Path, count: int, inflight: int) -> SyncFigures:
    """One thread keeps `inflight` puts pending; each ack (future resolved) lets its producer send again."""
    root = work / "sync-inflight"
    body = os.urandom(KIB)
    pool = [make_message(body, i % 8, i) for i in range(1024)]
    rec = record_size(pool[0])
    store = sync_store(root, rec * count)
    try:
        assert store.put_message(make_message(body, 9, 0)).ok
        wait_staged(root, store.commit_log.file_size, 0)
        put = store.put_message_nowait
        pending: deque[tuple[float, Future[bool]]] = deque()
        latencies: list[float] = []
        failures = 0
        issued = 0

        def issue() -> None:
            nonlocal issued
            t = time.perf_counter()
            p: PendingPut = put(pool[issued & 1023])
            fut = p.flush_future
            if fut is None:
                raise RuntimeError(f"put failed: {p.result}")
            pending.append((t, fut))
            issued += 1

        counter = FdatasyncCounter(GROUP_COMMIT_THREAD)
        with counter.installed():
            t0 = time.perf_counter()
            while issued < min(inflight, count):
                issue()
            while pending:
                t, fut = pending.popleft()
                if not fut.result(timeout=30):
                    failures += 1
                latencies.append(time.perf_counter() - t)
                if issued < count:
                    issue()
            elapsed = time.perf_counter() - t0
        if failures:
            raise RuntimeError(f"{failures} puts were not flushed")
    finally:
        store.shutdown()
        remove(root)
    return SyncFigures(
        f"{inflight} in flight, 1 thread", count, elapsed, latencies, counter.count, rec * count
    )


def run_sync_threads(work: Path, count: int, threads: int) -> SyncFigures:
    """`threads` producer threads, each calling the blocking `put_message` in a loop."""
    root = work / "sync-threads"
    body = os.urandom(KIB)
    per_thread = count // threads
    rec = record_size(make_message(body, 0, 0))
    store = sync_store(root, rec * per_thread * threads)
    latencies: list[list[float]] = [[] for _ in range(threads)]
    failures = [0]
    start = threading.Barrier(threads + 1)

    def producer(k: int) -> None:
        msgs = [make_message(body, k % 8, k * per_thread + j) for j in range(16)]
        mine = latencies[k]
        start.wait()
        for j in range(per_thread):
            t = time.perf_counter()
            res = store.put_message(msgs[j & 15])
            mine.append(time.perf_counter() - t)
            if not res.ok:
                failures[0] += 1

    try:
        assert store.put_message(make_message(body, 9, 0)).ok
        wait_staged(root, store.commit_log.file_size, 0)
        workers = [threading.Thread(target=producer, args=(k,), daemon=True) for k in range(threads)]
        for w in workers:
            w.start()
        counter = FdatasyncCounter(GROUP_COMMIT_THREAD)
        with counter.installed():
            start.wait()
            t0 = time.perf_counter()
            for w in workers:
                w.join()
            elapsed = time.perf_counter() - t0
        if failures[0]:
            raise RuntimeError(f"{failures[0]} puts failed")
    finally:
        store.shutdown()
        remove(root)
    flat = [x for lat in latencies for x in lat]
    n = per_thread * threads
    return SyncFigures(f"{threads} threads x put_message", n, elapsed, flat, counter.count, rec * n)


def bench_sync(work: Path, plan: Plan, report: Report) -> None:
    out("## 3. SYNC_FLUSH, 64 concurrent producers, 1 KiB bodies")
    max_fsync = 1e6 / report.fsync_us
    header = (
        f"{'model':>28} {'acked':>9} | {'acked msg/s':>11} {'MB/s':>6} {'ratio':>5} | {'p50 ms':>6} "
        f"{'p99 ms':>6} {'max ms':>6} | {'fdatasync/s':>11} {'of max':>6} {'msg/sync':>8} | goal"
    )
    out(header)
    out("-" * len(header))
    runs = [
        run_sync_inflight(work, plan.sync_messages, 64),
        run_sync_threads(work, plan.sync_thread_messages, 64),
    ]
    for i, f in enumerate(runs):
        lat = sorted(f.latencies)
        rate = f.acked / f.elapsed
        mbps = f.record_bytes / f.elapsed / MB
        p50, p99 = percentile(lat, 0.5) * 1000, percentile(lat, 0.99) * 1000
        syncs = f.fdatasyncs / f.elapsed
        passed = rate >= GOAL_SYNC_ACKED and p99 <= GOAL_SYNC_P99_MS
        goal = f">= {fmt_int(GOAL_SYNC_ACKED)} msg/s, p99 <= {GOAL_SYNC_P99_MS:.0f} ms"
        out(
            f"{f.model:>28} {f.acked:>9,} | {rate:>11,.0f} {mbps:>6,.0f} {mbps / report.raw_mbps:>5.0%} | "
            f"{p50:>6.2f} {p99:>6.2f} {lat[-1] * 1000:>6.1f} | {syncs:>11,.0f} {syncs / max_fsync:>6.0%} "
            f"{f.acked / max(f.fdatasyncs, 1):>8.1f} | {goal} {mark(passed)}"
        )
        report.add(
            Row(
                f"SYNC_FLUSH 1 KiB, {f.model}",
                f"{fmt_int(rate)} msg/s, p50 {p50:.2f} ms, p99 {p99:.2f} ms, "
                f"{syncs:,.0f} fdatasync/s ({syncs / max_fsync:.0%} of max)",
                mbps,
                mbps / report.raw_mbps,
                goal if i == 0 else "",
                passed if i == 0 else None,
            )
        )
    out(f"(max fdatasync/s = 1 / measured single-fdatasync cost = {max_fsync:,.0f}/s)")
    out()
