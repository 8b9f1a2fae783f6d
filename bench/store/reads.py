"""4. Dispatch (consume queues and index), 5. reads (get_message) and 6. recovery after a crash."""

from __future__ import annotations

import os
import time
from pathlib import Path

from tests.support.store import put_batch

from bench.store.common import (
    GIB,
    GOAL_DISPATCH,
    GOAL_GET,
    GOAL_RECOVERY_S,
    KIB,
    MB,
    MIB,
    TOPIC,
    Plan,
    Report,
    Row,
    fmt_int,
    make_message,
    mark,
    out,
    record_size,
    remove,
    store_config,
)
from rocketlite.progress import ProgressCallback, no_progress
from rocketlite.store.message_store import MessageStore


# -- 4. dispatch and 5. reads -------------------------------------------------------------------
def write_keyed_log(store: MessageStore, total: int, queues: int, body: bytes, batch: int = 1000) -> int:
    """`total` messages with KEYS and UNIQ_KEY over `queues` queues, in batches; returns the count."""
    written = 0
    q = 0
    while written < total:
        n = min(batch, total - written)
        msgs = [make_message(body, q, written + j, keys=True) for j in range(n)]
        res = put_batch(store, msgs)
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

    def timed_dispatch_all(*, verify_crc: bool = False, progress: ProgressCallback = no_progress) -> int:
        t = time.perf_counter()
        try:
            return real_dispatch_all(verify_crc=verify_crc, progress=progress)
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
                f"dispatch rate (re-dispatch of {n:,} records with KEYS + UNIQ_KEY: CQ units, index entries)",
                f"{fmt_int(cq_rate)} units/s, {fmt_int(idx_rate)} entries/s",
                goal=f">= {fmt_int(GOAL_DISPATCH)}/s",
                passed=min(cq_rate, idx_rate) >= GOAL_DISPATCH,
                issue=True,
            )
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
    per_gib = abnormal_s * GIB / log_bytes
    passed = per_gib <= GOAL_RECOVERY_S
    goal = f"<= {GOAL_RECOVERY_S:.0f} s per GiB"
    out(
        f"abnormal recovery (abort file, CRC checks, CQ + index rebuilt): {abnormal_s:.2f} s "
        f"({log_bytes / abnormal_s / MB:,.0f} MB/s, {n / abnormal_s:,.0f} records/s, "
        f"{per_gib:.2f} s per GiB; goal {goal}) {mark(passed)}"
    )
    report.add(
        Row(
            f"abnormal recovery of a {log_bytes / GIB:.2f} GiB log, CQ + index rebuilt, CRC checked",
            f"{abnormal_s:.2f} s ({per_gib:.2f} s per GiB)",
            log_bytes / abnormal_s / MB,
            None,
            goal,
            passed,
            issue=True,
        )
    )
    out(f"normal restart after a clean shutdown: {normal_s:.2f} s ({rep2.records_scanned:,} records scanned)")
    report.add(
        Row(
            f"abnormal recovery, {log_bytes / GIB:.2f} GiB log, CQ + index rebuilt",
            f"{abnormal_s:.2f} s",
            log_bytes / abnormal_s / MB,
            None,
            goal,
            passed,
        )
    )
    report.add(Row(f"normal restart, {log_bytes / GIB:.2f} GiB log", f"{normal_s:.2f} s"))
    out()
