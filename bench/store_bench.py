"""In-process benchmark of the message store, against the disk's own limits measured in the same run.

    .venv/bin/python bench/store_bench.py            # full run (~2-3 minutes, < 4 GiB of disk)
    .venv/bin/python bench/store_bench.py --quick    # small counts (< 30 s; the smoke test)
    .venv/bin/python bench/store_bench.py --dir /mnt/fast --recovery-gib 2

Everything runs in a temporary directory (under `--dir`, default the current directory, so on the
file system being measured), each store in its own subdirectory deleted when done. In order:

1. The physical limits: raw write bandwidth (N MiB of record bytes written with `os.pwrite` in 1 MiB
   chunks into a pre-zeroed, fdatasynced file, then one fdatasync: the denominator of the ratios),
   the raw disk with the batch append's own write pattern (batches of 1000 x 1 KiB records copied
   into mappings of pre-zeroed segment-sized files, each fdatasynced: the append goal's denominator),
   the cost of one fdatasync (1000 x (4 KiB pwrite + fdatasync)), and the same after a 4 KiB copy
   into a shared mapping (how the store appends single records).
2. Appends with ASYNC_FLUSH, bodies of 128 B and 1 KiB: single `put_message_nowait` calls, and
   batches of 32 and 1000 messages of one topic-queue, with the properties a Java producer sends
   (TAGS, WAIT, UNIQ_KEY), taken the broker's way: the SEND_BATCH_MESSAGE body made into records
   (`encode_batch_records`) and `put_encoded_nowait`. Segment sizes are chosen so that every run rolls at
   least once; rolls, and the preparation of the next segment they start, happen inside the run.
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
6. Recovery of a `--recovery-gib` GiB commit log of 1 KiB messages: abnormal (abort file present, CRC checks,
   consume queues and index deleted and rebuilt) and a normal restart after a clean shutdown.

MB/s are 10^6 bytes per second of record bytes (what lands in the commit log). Timings use
`time.perf_counter`; the page cache is warm for reads and recovery (nothing is dropped). The store
is CPU-bound Python sharing one GIL between the caller and its services, so other load on the
machine lowers every figure: the load average is printed at the start and the end.
"""

from __future__ import annotations

import argparse
import logging
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script (`python bench/store_bench.py`): import bench.store
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.store.appends import bench_append
from bench.store.common import FULL, QUICK, Plan, Report, mark, out, pct, remove
from bench.store.limits import bench_limits
from bench.store.reads import bench_dispatch_and_get, bench_recovery
from bench.store.sync import bench_sync


# -- summary ---------------------------------------------------------------------------------------
def summary(report: Report, plan: Plan, elapsed: float) -> None:
    out("## Summary (markdown)")
    out()
    out(
        f"Machine: {os.cpu_count()} cores, Python {platform.python_version()}, "
        f"raw disk write {report.raw_mbps:,.0f} MB/s (1 MiB pwrite), {report.raw_pattern_mbps:,.0f} MB/s "
        f"(the batch append's pattern), one fdatasync {report.fsync_us:.0f} us "
        f"(measured in this run{', --quick' if plan is QUICK else ''}); MB = 10^6 bytes of records; "
        f"1-minute load average {report.load_start:.1f} at the start, {os.getloadavg()[0]:.1f} at the end."
    )
    out()
    out("### The issue's figures")
    out()
    out("| Figure | Result | MB/s | vs raw disk | Goal | |")
    out("|---|---:|---:|---:|---|---|")
    for r in report.rows:
        if r.issue:
            mbps = "" if r.mbps is None else f"{r.mbps:,.0f}"
            out(f"| {r.name} | {r.figure} | {mbps} | {pct(r.ratio)} | {r.goal} | {mark(r.passed)} |")
    out()
    out("### Every figure")
    out()
    out("| Benchmark | Result | MB/s | vs raw disk | Goal | |")
    out("|---|---:|---:|---:|---|---|")
    for r in report.rows:
        if r.issue:
            continue
        mbps = "" if r.mbps is None else f"{r.mbps:,.0f}"
        out(f"| {r.name} | {r.figure} | {mbps} | {pct(r.ratio)} | {r.goal} | {mark(r.passed)} |")
    out()
    misses = [r.name for r in report.rows if r.passed is False and not r.issue]
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
        "--recovery-gib",
        "--gib",
        dest="gib",
        type=float,
        default=None,
        help="size of the recovery commit log in GiB (default 1.0; --quick: 1/16, judged per GiB)",
    )
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    plan = QUICK if args.quick else FULL
    gib = args.gib if args.gib is not None else plan.recovery_gib
    if gib <= 0:
        raise SystemExit("--recovery-gib must be positive")
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
