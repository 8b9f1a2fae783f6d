"""In-process benchmark of the message store, against the disk's own limits measured in the same run.

    .venv/bin/python bench/store_bench.py            # full run (~2-3 minutes, < 4 GiB of disk)
    .venv/bin/python bench/store_bench.py --quick    # small counts (< 30 s; the smoke test)
    .venv/bin/python bench/store_bench.py --dir /mnt/fast --gib 2

Everything runs in a temporary directory (under `--dir`, default the current directory, so on the
file system being measured), each store in its own subdirectory deleted when done. In order:

1. The physical limits: raw write bandwidth (N MiB of record bytes written with `os.pwrite` in 1 MiB
   chunks into a pre-zeroed, fdatasynced file, then one fdatasync: the denominator of every ratio),
   the cost of one fdatasync (1000 x (4 KiB pwrite + fdatasync)), and the same after a 4 KiB copy
   into a shared mapping (how the store appends single records).
2. Appends with ASYNC_FLUSH, bodies of 128 B and 1 KiB: single `put_message_nowait` calls, and
   `put_messages_nowait` batches of 32 and 1000 messages of one topic-queue, with the properties a
   Java producer sends (TAGS, WAIT, UNIQ_KEY). Segment sizes are chosen so that every run rolls at
   least once; rolls, and the pre-zeroing of the next segment they start, happen inside the run.
   The reput service dispatches in the background as in production. Reported as "appended" (the
   puts returned), "+flushed" (and an fdatasync of everything) and "+dispatched" (and the consume
   queues and index caught up: the sustainable rate). Two runs repeat with the reput service
   stopped, to show the append path alone.
3. SYNC_FLUSH, 1 KiB bodies, 64 concurrent producers: modelled as one thread keeping 64 puts in
   flight (`put_message_nowait`, the next put when the oldest flush future resolves, as the
   asyncio broker does), and as 64 threads calling `put_message`. Acked msgs/s, ack latency
   p50/p99, and fdatasync calls/s of the group-commit thread against the single-fdatasync cost.
4. Dispatch: a commit log of messages with KEYS and UNIQ_KEY is written, its consumequeue/ and
   index/ directories deleted, and the store reopened: recovery re-dispatches everything
   synchronously. The re-dispatch is timed on its own (CQ units/s, index entries/s).
5. Reads: `get_message` over one queue of the store from (4), 32 messages per call, results kept as
   zero-copy slices (released, never joined).
6. Recovery of a `--gib` GiB commit log of 1 KiB messages: abnormal (abort file present, CRC checks,
   consume queues and index deleted and rebuilt) and a normal restart after a clean shutdown.

MB/s are 10^6 bytes per second of record bytes (what lands in the commit log). Timings use
`time.perf_counter`; the page cache is warm for reads and recovery (nothing is dropped). The store
is CPU-bound Python sharing one GIL between the caller and its services, so other load on the
machine lowers every figure: the load average is printed at the start and the end.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import math
import mmap
import os
import platform
import shutil
import statistics
import sys
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from rocketlite.protocol.message import HostAddress, properties_to_string
from rocketlite.protocol.record import MessageInner, encode_record
from rocketlite.store.config import FlushDiskType, StoreConfig
from rocketlite.store.mapped_file import prezero, segment_name, staging_path
from rocketlite.store.message_store import MessageStore, PendingPut

if TYPE_CHECKING:
    from _typeshed import FileDescriptorLike

KIB = 1 << 10
MIB = 1 << 20
GIB = 1 << 30
MB = 1_000_000
TOPIC = "BenchTopic"
HOST = HostAddress.parse("127.0.0.1:10911")
GROUP_COMMIT_THREAD = "rocketlite-group-commit"

# Goals (from the store's performance brief).
GOAL_BATCH_RATIO = 0.50  # batches of 1000 x 1 KiB: appended+flushed >= 50% of raw bandwidth
GOAL_SINGLE_128 = 150_000  # single puts of 128 B, msgs/s
GOAL_SYNC_ACKED = 50_000  # SYNC_FLUSH, 64 producers, 1 KiB, acked msgs/s
GOAL_SYNC_P99_MS = 10.0
GOAL_DISPATCH = 300_000  # CQ units/s and index entries/s
GOAL_GET = 1_000_000  # msgs/s
GOAL_RECOVERY_S = 15.0


# -- plan ---------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Plan:
    raw_mib: int
    fsync_count: int
    # (body size, batch size) -> messages
    append_counts: dict[tuple[int, int], int]
    sync_messages: int
    sync_thread_messages: int
    dispatch_messages: int
    dispatch_queues: int
    get_min_messages: int
    dispatch_segment: int
    recovery_gib: float
    recovery_segment: int


FULL = Plan(
    raw_mib=1024,
    fsync_count=1000,
    append_counts={
        (128, 1): 400_000,
        (1024, 1): 250_000,
        (128, 32): 1_000_000,
        (1024, 32): 500_000,
        (128, 1000): 2_000_000,
        (1024, 1000): 1_000_000,
    },
    sync_messages=300_000,
    sync_thread_messages=64_000,
    dispatch_messages=1_000_000,
    dispatch_queues=4,
    get_min_messages=1_000_000,
    dispatch_segment=128 * MIB,
    recovery_gib=1.0,
    recovery_segment=GIB,
)

QUICK = Plan(
    raw_mib=64,
    fsync_count=200,
    append_counts={
        (128, 1): 30_000,
        (1024, 1): 20_000,
        (128, 32): 64_000,
        (1024, 32): 32_000,
        (128, 1000): 100_000,
        (1024, 1000): 50_000,
    },
    sync_messages=10_000,
    sync_thread_messages=3_200,
    dispatch_messages=60_000,
    dispatch_queues=4,
    get_min_messages=60_000,
    dispatch_segment=8 * MIB,
    recovery_gib=1 / 16,
    recovery_segment=16 * MIB,
)


# -- results ------------------------------------------------------------------------------------
@dataclass(slots=True)
class Row:
    """One line of the summary table."""

    name: str
    figure: str
    mbps: float | None = None
    ratio: float | None = None
    goal: str = ""
    passed: bool | None = None


@dataclass(slots=True)
class Report:
    rows: list[Row] = field(default_factory=list)
    raw_mbps: float = 0.0
    fsync_us: float = 0.0
    load_start: float = 0.0

    def add(self, row: Row) -> None:
        self.rows.append(row)


def mark(passed: bool | None) -> str:
    if passed is None:
        return ""
    return "PASS" if passed else "MISS"


def out(text: str = "") -> None:
    print(text, flush=True)


def fmt_int(n: float) -> str:
    return f"{n:,.0f}"


def pct(ratio: float | None) -> str:
    return "" if ratio is None else f"{ratio * 100:.0f}%"


def percentile(sorted_values: list[float], q: float) -> float:
    """Nearest-rank percentile of an already sorted list."""
    if not sorted_values:
        return math.nan
    k = min(len(sorted_values) - 1, max(0, math.ceil(q * len(sorted_values)) - 1))
    return sorted_values[k]


# -- messages -----------------------------------------------------------------------------------
def uniq_key(i: int) -> str:
    """A 32-hex-digit UNIQ_KEY like the Java client's (ip, pid, counter)."""
    return f"7F000001{os.getpid() & 0xFFFF:04X}{i:020X}"


def make_message(body: bytes, queue_id: int, i: int, *, keys: bool = False) -> MessageInner:
    """A message as a Java producer sends it: TAGS, WAIT and UNIQ_KEY (and KEYS if asked)."""
    props = {"TAGS": "TagA", "WAIT": "true", "UNIQ_KEY": uniq_key(i)}
    if keys:
        props["KEYS"] = f"order-{i:012d}"
    return MessageInner(
        topic=TOPIC,
        body=body,
        born_host=HOST,
        store_host=HOST,
        queue_id=queue_id,
        properties_string=properties_to_string(props),
        born_timestamp=time.time_ns() // 1_000_000,
    )


def record_size(msg: MessageInner) -> int:
    return len(encode_record(msg))


def segment_size_for(total_bytes: int, cap: int = GIB) -> int:
    """The largest power-of-two segment (>= 1 MiB, <= cap) that `total_bytes` overflows by 25%+."""
    seg = MIB
    while seg * 2 <= cap and seg * 2 * 1.25 <= total_bytes:
        seg *= 2
    return seg


def store_config(root: Path, **overrides: object) -> StoreConfig:
    return StoreConfig(store_path_root_dir=root, **overrides)  # type: ignore[arg-type]


def wait_staged(root: Path, segment: int, start_offset: int, timeout: float = 60.0) -> None:
    """Wait until the allocator has pre-zeroed the segment after the one at `start_offset`."""
    nxt = root / "commitlog" / segment_name(start_offset + segment)
    tmp = staging_path(nxt)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if nxt.exists() or (tmp.exists() and tmp.stat().st_size == segment):
            time.sleep(0.01)  # the last pwrite returned; let the allocator drop its lock
            return
        time.sleep(0.005)


def remove(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)


# -- 1. physical limits -------------------------------------------------------------------------
def measure_raw_bandwidth(work: Path, mib: int, chunk: bytes) -> tuple[float, list[float]]:
    """Best of two passes of `mib` x 1 MiB pwrite + one fdatasync into a pre-zeroed file."""
    path = work / "raw.bin"
    size = mib * MIB
    prezero(path, size)
    fd = os.open(path, os.O_RDWR)
    try:
        os.fdatasync(fd)
        passes: list[float] = []
        for _ in range(2):
            t0 = time.perf_counter()
            pos = 0
            while pos < size:
                pos += os.pwrite(fd, chunk, pos)
            os.fdatasync(fd)
            passes.append(size / (time.perf_counter() - t0) / MB)
    finally:
        os.close(fd)
        path.unlink()
    return max(passes), passes


def measure_fdatasync(work: Path, count: int, *, mapped: bool = False) -> list[float]:
    """Seconds of each of `count` x (4 KiB write at the next offset + fdatasync), the write a
    `pwrite` or (`mapped`) a copy into a shared mapping of the file, as the store appends."""
    path = work / "fsync.bin"
    size = count * 4 * KIB
    prezero(path, size)
    page = os.urandom(4 * KIB)
    fd = os.open(path, os.O_RDWR)
    mm = mmap.mmap(fd, size, access=mmap.ACCESS_WRITE) if mapped else None
    try:
        os.fdatasync(fd)
        times: list[float] = []
        for i in range(count):
            pos = i * 4 * KIB
            t0 = time.perf_counter()
            if mm is not None:
                mm[pos : pos + len(page)] = page
            else:
                os.pwrite(fd, page, pos)
            os.fdatasync(fd)
            times.append(time.perf_counter() - t0)
    finally:
        if mm is not None:
            mm.close()
        os.close(fd)
        path.unlink()
    return times


def bench_limits(work: Path, plan: Plan, report: Report) -> None:
    out("## 1. Physical limits")
    rec = encode_record(make_message(os.urandom(KIB), 0, 0))
    chunk = (rec * (MIB // len(rec) + 1))[:MIB]
    best, passes = measure_raw_bandwidth(work, plan.raw_mib, chunk)
    report.raw_mbps = best
    out(
        f"raw write bandwidth: {plan.raw_mib} MiB as 1 MiB pwrite + fdatasync into a pre-zeroed file: "
        f"{best:,.0f} MB/s (passes: {', '.join(f'{p:,.0f}' for p in passes)})"
    )
    times = sorted(measure_fdatasync(work, plan.fsync_count))
    mean = statistics.fmean(times)
    report.fsync_us = mean * 1e6
    out(
        f"fdatasync: {plan.fsync_count} x (4 KiB pwrite + fdatasync): mean {mean * 1e6:.0f} us, "
        f"p50 {percentile(times, 0.5) * 1e6:.0f} us, p99 {percentile(times, 0.99) * 1e6:.0f} us "
        f"-> at most {1 / mean:,.0f} fdatasync/s"
    )
    mapped = sorted(measure_fdatasync(work, plan.fsync_count, mapped=True))
    mapped_mean = statistics.fmean(mapped)
    out(
        f"fdatasync after a 4 KiB copy into a shared mapping (the store's append path): "
        f"mean {mapped_mean * 1e6:.0f} us, p50 {percentile(mapped, 0.5) * 1e6:.0f} us, "
        f"p99 {percentile(mapped, 0.99) * 1e6:.0f} us"
    )
    report.add(Row("raw disk write (1 MiB pwrite + fdatasync)", f"{best:,.0f} MB/s", best, 1.0))
    report.add(Row("one 4 KiB pwrite + fdatasync (mean)", f"{mean * 1e6:.0f} us = {1 / mean:,.0f}/s"))
    report.add(
        Row(
            "one 4 KiB mmap write + fdatasync (mean)",
            f"{mapped_mean * 1e6:.0f} us = {1 / mapped_mean:,.0f}/s",
        )
    )
    out()


# -- 2. appends, ASYNC_FLUSH ------------------------------------------------------------------------
@dataclass(slots=True)
class AppendFigures:
    messages: int
    record_bytes: int
    segment: int
    segments_used: int
    appended_s: float
    flushed_s: float
    dispatched_s: float | None  # until the consume queues and index caught up (None: reput stopped)
    max_put_ms: float


def run_append(work: Path, body_size: int, batch: int, count: int, *, dispatch: bool = True) -> AppendFigures:
    """Append `count` messages; without `dispatch`, the reput service is stopped first (the append
    path alone; the backlog is dispatched at shutdown, untimed)."""
    root = work / f"append-{body_size}-{batch}"
    body = os.urandom(body_size)
    pool_size = batch if batch > 1 else 1024
    pool = [make_message(body, 0, i) for i in range(pool_size)]
    rec = record_size(pool[0])
    count -= count % batch
    seg = segment_size_for(rec * count)
    store = MessageStore(store_config(root, maped_file_size_commit_log=seg))
    store.start()
    try:
        warm = store.put_message(make_message(body, 1, 0))
        assert warm.ok, warm
        wait_staged(root, seg, 0)
        if not dispatch:
            store.reput.shutdown()
        store.stats.put_max_ms = 0.0
        queue = store.commit_log.queue
        failures = 0
        if batch == 1:
            put = store.put_message_nowait
            mask = pool_size - 1
            t0 = time.perf_counter()
            for i in range(count):
                if not put(pool[i & mask]).result.ok:
                    failures += 1
        else:
            put_batch = store.put_messages_nowait
            t0 = time.perf_counter()
            for _ in range(count // batch):
                if not put_batch(pool).result.ok:
                    failures += 1
        appended = time.perf_counter() - t0
        end = queue.max_wrote_offset
        while queue.flushed_where < end:  # the background flusher may be mid-flush; finish it
            queue.flush_all_to(end)
        flushed = time.perf_counter() - t0
        dispatched: float | None = None
        if dispatch:
            if not store.wait_dispatched(timeout=300):
                raise RuntimeError("dispatch did not catch up within 300 s")
            dispatched = time.perf_counter() - t0
        if failures:
            raise RuntimeError(f"{failures} appends failed")
        segments = len(queue.files)
        max_put_ms = store.stats.put_max_ms
    finally:
        store.shutdown()
        remove(root)
    return AppendFigures(count, rec * count, seg, segments, appended, flushed, dispatched, max_put_ms)


def bench_append(work: Path, plan: Plan, report: Report) -> None:
    out("## 2. Appends, ASYNC_FLUSH")
    header = (
        f"{'body':>6} {'mode':>11} {'msgs':>10} {'rec B':>6} {'seg MiB':>7} | "
        f"{'appended msg/s':>14} {'MB/s':>7} {'ratio':>5} | {'+flushed msg/s':>14} {'MB/s':>7} "
        f"{'ratio':>5} | {'+dispatched':>11} | goal"
    )
    raw = report.raw_mbps
    runs = [(body_size, batch, True) for body_size in (128, 1024) for batch in (1, 32, 1000)]
    runs += [(128, 1, False), (1024, 1000, False)]
    for i, (body_size, batch, dispatch) in enumerate(runs):
        if i == 0:
            out("Store as in production: the reput service dispatches (CQ + index) in the background.")
            out("+flushed: until all is fdatasynced; +dispatched: msg/s until the CQ and index caught up.")
            out(header)
            out("-" * len(header))
        elif not dispatch and runs[i - 1][2]:
            out()
            out("The append path alone: reput service stopped (its backlog is dispatched at shutdown).")
            out(header)
            out("-" * len(header))
        f = run_append(work, body_size, batch, plan.append_counts[(body_size, batch)], dispatch=dispatch)
        a_rate, f_rate = f.messages / f.appended_s, f.messages / f.flushed_s
        d_rate = "n/a" if f.dispatched_s is None else f"{f.messages / f.dispatched_s:,.0f}"
        a_mb, f_mb = f.record_bytes / f.appended_s / MB, f.record_bytes / f.flushed_s / MB
        a_goal = f_goal = ""
        a_pass: bool | None = None
        f_pass: bool | None = None
        if dispatch and body_size == 128 and batch == 1:
            a_goal, a_pass = f">= {fmt_int(GOAL_SINGLE_128)} msg/s", a_rate >= GOAL_SINGLE_128
        elif dispatch and body_size == 1024 and batch == 1000:
            f_goal, f_pass = f">= {GOAL_BATCH_RATIO:.0%} of raw", f_mb / raw >= GOAL_BATCH_RATIO
        mode = "single" if batch == 1 else f"batch {batch}"
        body = f"{body_size} B" if body_size < KIB else f"{body_size // KIB} KiB"
        goals = " ".join(
            g for g in (f"{a_goal} {mark(a_pass)}".strip(), f"{f_goal} {mark(f_pass)}".strip()) if g
        )
        out(
            f"{body:>6} {mode:>11} {f.messages:>10,} {f.record_bytes // f.messages:>6} "
            f"{f.segment // MIB:>7} | {a_rate:>14,.0f} {a_mb:>7,.0f} {a_mb / raw:>5.0%} | "
            f"{f_rate:>14,.0f} {f_mb:>7,.0f} {f_mb / raw:>5.0%} | {d_rate:>11} | {goals}"
            f"  [{f.segments_used} segments, max put {f.max_put_ms:.1f} ms]"
        )
        name = f"append {body}, {mode}" + ("" if dispatch else " (reput stopped)")
        a_fig = f"{fmt_int(a_rate)} msg/s" + ("" if f.dispatched_s is None else f" ({d_rate}/s dispatched)")
        report.add(Row(f"{name}: appended", a_fig, a_mb, a_mb / raw, a_goal, a_pass))
        report.add(
            Row(f"{name}: appended+flushed", f"{fmt_int(f_rate)} msg/s", f_mb, f_mb / raw, f_goal, f_pass)
        )
    out()


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


# -- 4. dispatch and 5. reads -------------------------------------------------------------------
def write_keyed_log(store: MessageStore, total: int, queues: int, body: bytes, batch: int = 1000) -> int:
    """`total` messages with KEYS and UNIQ_KEY over `queues` queues, in batches; returns the count."""
    written = 0
    q = 0
    while written < total:
        n = min(batch, total - written)
        msgs = [make_message(body, q, written + j, keys=True) for j in range(n)]
        res = store.put_messages(msgs)
        if not res.ok:
            raise RuntimeError(f"batch failed: {res}")
        written += n
        q = (q + 1) % queues
    return written


def bench_dispatch_and_get(work: Path, plan: Plan, report: Report) -> None:
    out("## 4. Dispatch (recovery re-dispatch of a log whose consumequeue/ and index/ are gone)")
    root = work / "dispatch"
    seg = plan.dispatch_segment
    body = os.urandom(128)
    writer = MessageStore(store_config(root, maped_file_size_commit_log=seg, message_index_enable=False))
    writer.start()
    try:
        n = write_keyed_log(writer, plan.dispatch_messages, plan.dispatch_queues, body)
        log_bytes = writer.commit_log.max_offset
    finally:
        writer.shutdown()
    remove(root / "consumequeue")
    remove(root / "index")

    store = MessageStore(store_config(root, maped_file_size_commit_log=seg))
    dispatch_time = [0.0]
    real_dispatch_all = store.dispatcher.dispatch_all

    def timed_dispatch_all(*, verify_crc: bool = False) -> int:
        t = time.perf_counter()
        try:
            return real_dispatch_all(verify_crc=verify_crc)
        finally:
            dispatch_time[0] += time.perf_counter() - t

    store.dispatcher.dispatch_all = timed_dispatch_all  # type: ignore[method-assign]
    try:
        t0 = time.perf_counter()
        store.start()
        start_s = time.perf_counter() - t0
        rep = store.recovery_report
        assert rep is not None
        dispatched = rep.redispatched_records
        units = sum(store.get_max_offset_in_queue(TOPIC, q) for q in range(plan.dispatch_queues))
        assert store.index is not None
        entries = sum(f.index_count - 1 for f in store.index.files)
        d = dispatch_time[0]
        if dispatched != n or units != n:
            raise RuntimeError(f"re-dispatched {dispatched} records, {units} units; wrote {n}")
        cq_rate, idx_rate = units / d, entries / d
        out(
            f"{n:,} records ({log_bytes / MIB:,.0f} MiB log, {plan.dispatch_queues} queues, "
            f"{seg // MIB} MiB segments), {entries:,} index entries"
        )
        out(
            f"re-dispatch {d:.2f} s: {cq_rate:,.0f} CQ units/s, {idx_rate:,.0f} index entries/s "
            f"(goal >= {fmt_int(GOAL_DISPATCH)}/s) {mark(cq_rate >= GOAL_DISPATCH)}; "
            f"whole start() {start_s:.2f} s (scan with CRC {start_s - d:.2f} s)"
        )
        report.add(
            Row(
                "dispatch (records with KEYS + UNIQ_KEY): CQ units",
                f"{fmt_int(cq_rate)} units/s",
                goal=f">= {fmt_int(GOAL_DISPATCH)}/s",
                passed=cq_rate >= GOAL_DISPATCH,
            )
        )
        report.add(
            Row(
                "dispatch: index entries",
                f"{fmt_int(idx_rate)} entries/s",
                goal=f">= {fmt_int(GOAL_DISPATCH)}/s",
                passed=idx_rate >= GOAL_DISPATCH,
            )
        )
        out()
        bench_get(store, plan, report)
    finally:
        store.shutdown()
        remove(root)


def bench_get(store: MessageStore, plan: Plan, report: Report) -> None:
    out("## 5. Reads: get_message by queue, 32 per call, zero-copy slices")
    max_off = store.get_max_offset_in_queue(TOPIC, 0)
    get = store.get_message
    total = calls = nbytes = 0
    t0 = time.perf_counter()
    while total < plan.get_min_messages:
        offset = 0
        while offset < max_off:
            res = get("bench", TOPIC, 0, offset, 32, max_transfer_count=1024, max_transfer_bytes=4 * MIB)
            got = len(res.messages)
            if not got:
                raise RuntimeError(f"get_message at {offset}: {res.status}")
            total += got
            nbytes += res.buffer_total_size
            calls += 1
            offset = res.next_begin_offset
            res.release()
    elapsed = time.perf_counter() - t0
    rate = total / elapsed
    out(
        f"queue of {max_off:,} messages, {total:,} messages read in {calls:,} calls: {rate:,.0f} msg/s, "
        f"{calls / elapsed:,.0f} calls/s, {nbytes / elapsed / MB:,.0f} MB/s "
        f"(goal >= {fmt_int(GOAL_GET)} msg/s) {mark(rate >= GOAL_GET)}"
    )
    report.add(
        Row(
            f"get_message, 32 per call (queue of {max_off:,})",
            f"{fmt_int(rate)} msg/s",
            goal=f">= {fmt_int(GOAL_GET)} msg/s",
            passed=rate >= GOAL_GET,
        )
    )
    out()


# -- 6. recovery -----------------------------------------------------------------------------------
def bench_recovery(work: Path, plan: Plan, gib: float, report: Report) -> None:
    out(f"## 6. Recovery of a {gib:g} GiB commit log of 1 KiB messages")
    root = work / "recovery"
    seg = plan.recovery_segment
    cfg = store_config(root, maped_file_size_commit_log=seg)
    body = os.urandom(KIB)
    rec = record_size(make_message(body, 0, 0, keys=True))
    n = max(1, int((gib * GIB - MIB) // rec))
    store = MessageStore(cfg)
    store.start()
    try:
        t0 = time.perf_counter()
        write_keyed_log(store, n, 8, body)
        write_s = time.perf_counter() - t0
        log_bytes = store.commit_log.max_offset
        store.wait_dispatched(timeout=120)
    finally:
        store.shutdown()
    out(f"wrote {n:,} records, {log_bytes / GIB:.2f} GiB ({seg // MIB} MiB segments) in {write_s:.1f} s")
    try:
        remove(root / "consumequeue")
        remove(root / "index")
        cfg.abort_path.touch()
        store = MessageStore(cfg)
        t0 = time.perf_counter()
        store.start()
        abnormal_s = time.perf_counter() - t0
        rep = store.recovery_report
        assert rep is not None and rep.abnormal
        if rep.redispatched_records != n or rep.problem:
            raise RuntimeError(f"recovery: {rep}")
        store.shutdown()
        store = MessageStore(cfg)
        t0 = time.perf_counter()
        store.start()
        normal_s = time.perf_counter() - t0
        rep2 = store.recovery_report
        assert rep2 is not None and not rep2.abnormal
        store.shutdown()
    finally:
        store.shutdown()
        remove(root)
    passed = abnormal_s <= GOAL_RECOVERY_S
    out(
        f"abnormal recovery (abort file, CRC checks, CQ + index rebuilt): {abnormal_s:.2f} s "
        f"({log_bytes / abnormal_s / MB:,.0f} MB/s, {n / abnormal_s:,.0f} records/s; "
        f"goal <= {GOAL_RECOVERY_S:.0f} s) {mark(passed)}"
    )
    out(f"normal restart after a clean shutdown: {normal_s:.2f} s ({rep2.records_scanned:,} records scanned)")
    report.add(
        Row(
            f"abnormal recovery, {log_bytes / GIB:.2f} GiB log, CQ + index rebuilt",
            f"{abnormal_s:.2f} s",
            log_bytes / abnormal_s / MB,
            None,
            f"<= {GOAL_RECOVERY_S:.0f} s",
            passed,
        )
    )
    report.add(Row(f"normal restart, {log_bytes / GIB:.2f} GiB log", f"{normal_s:.2f} s"))
    out()


# -- summary ---------------------------------------------------------------------------------------
def summary(report: Report, plan: Plan, elapsed: float) -> None:
    out("## Summary (markdown)")
    out()
    out(
        f"Machine: {os.cpu_count()} cores, Python {platform.python_version()}, "
        f"raw disk write {report.raw_mbps:,.0f} MB/s, one fdatasync {report.fsync_us:.0f} us "
        f"(measured in this run{', --quick' if plan is QUICK else ''}); MB = 10^6 bytes of records; "
        f"1-minute load average {report.load_start:.1f} at the start, {os.getloadavg()[0]:.1f} at the end."
    )
    out()
    out("| Benchmark | Result | MB/s | vs raw disk | Goal | |")
    out("|---|---:|---:|---:|---|---|")
    for r in report.rows:
        mbps = "" if r.mbps is None else f"{r.mbps:,.0f}"
        out(f"| {r.name} | {r.figure} | {mbps} | {pct(r.ratio)} | {r.goal} | {mark(r.passed)} |")
    out()
    misses = [r.name for r in report.rows if r.passed is False]
    out(f"Total benchmark time {elapsed:.0f} s; goals missed: {', '.join(misses) if misses else 'none'}")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0] if __doc__ else None)
    ap.add_argument(
        "--dir",
        type=Path,
        default=None,
        help="directory to work in (a temporary subdirectory is created and removed); "
        "default: the current directory's filesystem",
    )
    ap.add_argument("--quick", action="store_true", help="small counts (< 30 s), for the smoke test")
    ap.add_argument(
        "--gib", type=float, default=None, help="size of the recovery commit log in GiB (default 1.0)"
    )
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    plan = QUICK if args.quick else FULL
    gib = args.gib if args.gib is not None else plan.recovery_gib
    if gib <= 0:
        raise SystemExit("--gib must be positive")
    logging.getLogger("rocketlite").setLevel(logging.ERROR)  # e.g. "abort file found" is expected here
    parent = args.dir if args.dir is not None else Path.cwd()
    parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=".store-bench-", dir=parent))
    report = Report()
    t0 = time.perf_counter()
    try:
        out(f"# rocketlite store benchmark ({'quick' if args.quick else 'full'}), work dir {work}")
        report.load_start = os.getloadavg()[0]
        cores = os.cpu_count() or 1
        if report.load_start > cores / 2:
            out(f"warning: load average {report.load_start:.1f} on {cores} cores; figures will be low")
        out()
        bench_limits(work, plan, report)
        bench_append(work, plan, report)
        bench_sync(work, plan, report)
        bench_dispatch_and_get(work, plan, report)
        bench_recovery(work, plan, gib, report)
        summary(report, plan, time.perf_counter() - t0)
    finally:
        remove(work)
    return 0


if __name__ == "__main__":
    sys.exit(main())
