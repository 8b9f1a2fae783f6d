"""2. Appends with ASYNC_FLUSH: single puts and batches, appended, +flushed and +dispatched."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

from tests.support.store import batch_request

from bench.store.common import (
    GOAL_BATCH_RATIO,
    GOAL_SINGLE_128,
    KIB,
    MB,
    MIB,
    Plan,
    Report,
    Row,
    fmt_int,
    make_message,
    mark,
    out,
    record_size,
    remove,
    segment_size_for,
    store_config,
    wait_staged,
)
from rocketlite.protocol.formats.speedups import encode_batch_records
from rocketlite.store.message_store import MessageStore


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
    # a batch goes the broker's way: its SEND_BATCH_MESSAGE body made into records per put
    request, target = batch_request(pool) if batch > 1 else (b"", None)
    rec = (
        record_size(pool[0])
        if target is None
        else len(encode_batch_records(request, target).records) // batch
    )
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
            assert target is not None
            put_batch = store.put_encoded_nowait
            topic, queue_id, host = target.topic, target.queue_id, target.store_host
            t0 = time.perf_counter()
            for _ in range(count // batch):
                if not put_batch(encode_batch_records(request, target), topic, queue_id, host).result.ok:
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
    out("## 2. Appends, ASYNC_FLUSH (ratio: of the 1 MiB pwrite raw bandwidth; the batch-1000 goal")
    out("   is judged against the raw disk with its own write pattern, measured in section 1)")
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
            same = f_mb / report.raw_pattern_mbps
            f_goal, f_pass = f">= {GOAL_BATCH_RATIO:.0%} of raw (same pattern)", same >= GOAL_BATCH_RATIO
            report.add(
                Row(
                    "in-process append, batches of 1000 x 1 KiB, appended+flushed, vs raw disk with the "
                    f"same write pattern ({report.raw_pattern_mbps:,.0f} MB/s in this run)",
                    f"{fmt_int(f_rate)} msg/s ({same:.0%} of raw)",
                    f_mb,
                    same,
                    f_goal,
                    f_pass,
                    issue=True,
                )
            )
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
