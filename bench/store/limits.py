"""1. The disk's own limits, the denominators of every ratio: raw write bandwidth and the cost of
one fdatasync (after a pwrite, and after a copy into a shared mapping)."""

from __future__ import annotations

import mmap
import os
import statistics
import time
from pathlib import Path

from bench.store.common import (
    KIB,
    MB,
    MIB,
    Plan,
    Report,
    Row,
    make_message,
    out,
    percentile,
    segment_size_for,
)
from rocketlite.protocol.formats.record import encode_record

# -- 1. physical limits -------------------------------------------------------------------------
_ZEROS = bytes(MIB)


def prezero(path: Path, size: int) -> None:
    """Write `size` zero bytes to `path` (blocks allocated and written before a timed pass)."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        pos = 0
        while pos < size:
            pos += os.pwrite(fd, _ZEROS[: min(MIB, size - pos)], pos)
    finally:
        os.close(fd)


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


def measure_raw_pattern(work: Path, chunk: bytes, total: int, segment: int) -> float:
    """MB/s of the store's batch append done by hand: `chunk` (one batch's encoded records) copied
    into shared mappings of pre-zeroed `segment`-sized files (a chunk that does not fit starts the
    next file, as a batch rolls the commit log), each file fdatasynced once full; `total` bytes."""
    per_file = max(1, segment // len(chunk))
    chunks = max(1, total // len(chunk))
    paths = []
    for k in range(-(-chunks // per_file)):
        path = work / f"pattern-{k}.bin"
        prezero(path, segment)
        paths.append(path)
    written = 0
    try:
        t0 = time.perf_counter()
        left = chunks
        for path in paths:
            fd = os.open(path, os.O_RDWR)
            try:
                with mmap.mmap(fd, segment, access=mmap.ACCESS_WRITE) as mm:
                    pos = 0
                    for _ in range(min(per_file, left)):
                        mm[pos : pos + len(chunk)] = chunk
                        pos += len(chunk)
                    left -= min(per_file, left)
                    written += pos
                os.fdatasync(fd)
            finally:
                os.close(fd)
        elapsed = time.perf_counter() - t0
    finally:
        for path in paths:
            path.unlink(missing_ok=True)
    return written / elapsed / MB


def bench_raw_pattern(work: Path, plan: Plan, report: Report) -> None:
    """The raw disk with the write pattern of the append goal (batches of 1000 x 1 KiB)."""
    batch = 1000
    rec = encode_record(make_message(os.urandom(KIB), 0, 0))
    count = plan.append_counts[(KIB, batch)]
    total = len(rec) * count
    segment = segment_size_for(total)
    chunk = rec * batch
    best = max(measure_raw_pattern(work, chunk, total, segment) for _ in range(2))
    report.raw_pattern_mbps = best
    out(
        f"raw write, the append goal's pattern: {total / MIB:,.0f} MiB as {batch} x {len(rec)} B records "
        f"copied per batch into mappings of pre-zeroed {segment // MIB} MiB files, each fdatasynced: "
        f"{best:,.0f} MB/s (best of 2)"
    )
    report.add(
        Row(
            "raw disk write, batch pattern (mmap copy of 1000 records + fdatasync)", f"{best:,.0f} MB/s", best
        )
    )


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
    bench_raw_pattern(work, plan, report)
    report.add(Row("raw disk write (1 MiB pwrite + fdatasync)", f"{best:,.0f} MB/s", best, 1.0))
    report.add(Row("one 4 KiB pwrite + fdatasync (mean)", f"{mean * 1e6:.0f} us = {1 / mean:,.0f}/s"))
    report.add(
        Row(
            "one 4 KiB mmap write + fdatasync (mean)",
            f"{mapped_mean * 1e6:.0f} us = {1 / mapped_mean:,.0f}/s",
        )
    )
    out()
