"""Broker-process crash loop: N cycles of load + SIGKILL + restart, then verify every ack.

    python -m bench.crash_cycles --cycles 100                                # SYNC_FLUSH: lost must be 0
    python -m bench.crash_cycles --cycles 30 --flush ASYNC_FLUSH             # process kill: lost must be 0
    python -m bench.crash_cycles --cycles 30 --flush ASYNC_FLUSH --power-loss
    python -m bench.crash_cycles --cycles 30 --flush ASYNC_FLUSH --write-buffer

Prints ``cycles=… sent=… acked=… lost=…`` (and the exit status is 1 if anything was lost under
SYNC_FLUSH). The harness is `tests/reliability/test_broker_crash.py`.

ASYNC_FLUSH loss window, measured. A SIGKILL ends the *process*, not the machine: every append is
in the commit log's page cache (the mapped file) when the broker answers, and the kernel writes
dirty pages back whether or not the process still exists, so a process kill loses nothing under
ASYNC_FLUSH either (lost must be 0, else exit status 1). What ASYNC_FLUSH gives up is the machine
crash (power loss, kernel panic): what was appended after the last fdatasync. In the ASYNC modes
GET /metrics is polled every ``--sample-ms`` under the same multi-producer load, and the script
reports the window: ``commitlog_unflushed_bytes`` (max, p99; in messages via the mean record
size), and per acked message the time from its answer until a sample showed the flushed offset
past it (p50, p99, max; resolution: the sampling period plus one GET).

``--power-loss`` emulates the machine crash: right before each kill the flushed offset is read (it
only grows, so the value read is a lower bound of the flushed offset at the kill: the emulation
can only lose more than a real crash, never less; a real crash may also lose less, as the kernel
writes dirty pages back on its own), after the kill the commit log is cut there (the rest of the
segment zeroed, later segments deleted), and the restarted broker must recover cleanly (queues
contiguous, no duplicates) having lost only acks at or above that offset. Lost per cycle is
printed next to the bound "acks in the last ``flushIntervalCommitLog`` before the kill".

``--write-buffer`` (transientStorePoolEnable=true) keeps appends in the process's memory until the
commit service writes them to the file, every ``commitIntervalCommitLog`` ms: a plain kill loses
the acks not committed yet. The committed offset is read before each kill; lost per cycle is
printed next to "acks in the last ``commitIntervalCommitLog`` before the kill". Sends the broker
refuses with SYSTEM_BUSY (every write buffer of ``transientStorePoolSize`` taken) are not acks;
they are counted as ``busy=``.

The flush and commit services go on through every segment a round filled (RocketMQ's advance one
per round), so the windows above hold with the harness's 64 KiB segments (``--segment-bytes``) too.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import math
import random
import statistics
import sys
import tempfile
import time
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from tests.support.crash.broker import (
    SEGMENT_BYTES,
    Ack,
    BrokerProcess,
    CrashState,
    LogPositions,
    Sampler,
    crash_cycles,
    read_positions,
    verify,
)

from rocketlite.store.config import StoreConfig

_DEFAULTS = StoreConfig()
FLUSH_INTERVAL_MS = _DEFAULTS.flush_interval_commit_log  # 500
COMMIT_INTERVAL_MS = _DEFAULTS.commit_interval_commit_log  # 200

Samples = dict[int, list[LogPositions]]  # cycle -> GET /metrics answers during its load


def make_sampler(state: CrashState, samples: Samples, period_s: float) -> Sampler:
    """Poll the commit-log gauges every `period_s` until the broker goes away."""

    async def sample(broker: BrokerProcess) -> None:
        out = samples.setdefault(state.cycles, [])
        while True:
            try:
                out.append(await read_positions(broker.metrics_port))
            except (OSError, asyncio.IncompleteReadError):
                return  # killed
            await asyncio.sleep(period_s)  # a sampling period, not an event to wait for

    return sample


def pct(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (0 for no values)."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[max(math.ceil(q / 100 * len(ordered)) - 1, 0)]


def exposure_ms(
    acks: Sequence[Ack], samples: Sequence[LogPositions], offset: Callable[[LogPositions], int]
) -> tuple[list[float], int]:
    """Per ack, ms from its answer until the first later sample whose `offset` is past it; and how
    many acks no sample saw covered before the kill. `offset` only grows within a cycle."""
    offsets = [offset(p) for p in samples]
    times = [p.at for p in samples]
    out: list[float] = []
    never = 0
    for a in acks:
        j = max(bisect_right(offsets, a.phys), bisect_left(times, a.at))
        if j < len(samples):
            out.append(max(samples[j].at - a.at, 0.0) * 1000)
        else:
            never += 1
    return out, never


@dataclass(frozen=True, slots=True)
class Window:
    """A position that trails the appends (flushed, committed) and the bytes it trails by."""

    name: str
    offset: Callable[[LogPositions], int]
    behind: Callable[[LogPositions], int]
    what: str


FLUSHED = Window("flushed", lambda p: p.flushed, lambda p: p.unflushed, "unflushed bytes")
COMMITTED = Window("committed", lambda p: p.committed, lambda p: p.uncommitted, "write-buffer bytes")


def window_lines(state: CrashState, samples: Samples, win: Window, rate: float) -> list[str]:
    """Bytes behind (max, p99; in messages, and in ms at the ack rate), and the measured time from
    each ack until the position passed it."""
    every = [p for cycle in samples.values() for p in cycle]
    if not every:
        return [f"{win.name}: no samples"]
    lasts = [c[-1] for c in samples.values() if c]  # the put counters restart with each broker
    record = sum(p.put_bytes for p in lasts) / max(sum(p.put_count for p in lasts), 1)
    gaps = [(b.at - a.at) * 1000 for c in samples.values() for a, b in itertools.pairwise(c)]
    sizes = [win.behind(p) for p in every]
    top, p99 = max(sizes), pct(sizes, 99)
    waits: list[float] = []
    never = 0
    for kill in state.kills:
        w, n = exposure_ms(kill.acks, samples.get(kill.cycle, []), win.offset)
        waits += w
        never += n
    ms = 1000 / record / rate if rate else 0.0
    return [
        f"{win.what} ({len(every)} samples, one every {statistics.median(gaps) if gaps else 0:.1f} ms): "
        f"max={top} p99={p99:.0f}; in messages max={top / record:.0f} p99={p99 / record:.0f} "
        f"({record:.0f} B/record); at {rate:.0f} acks/s max={top * ms:.0f} ms p99={p99 * ms:.0f} ms",
        f"  ack -> {win.name}, measured: p50={pct(waits, 50):.0f} p99={pct(waits, 99):.0f} "
        f"max={max(waits, default=0):.0f} ms over {len(waits)} acks ({never} more not yet "
        f"{win.name} when their broker was killed)",
    ]


def loss_lines(state: CrashState, bound_ms: int, rate: float, what: str) -> list[str]:
    """Lost per cycle against the acks of the last `bound_ms` before the kill."""
    kills = state.kills
    lost = [len(k.lost) for k in kills]
    recent = [sum(1 for a in k.acks if a.at >= k.at - bound_ms / 1000) for k in kills]
    risk = [len(k.at_risk) for k in kills]
    over = sum(1 for n, r in zip(lost, recent, strict=True) if n > r)
    lines = [
        f"{what}: lost per cycle max={max(lost)} mean={statistics.mean(lost):.1f}; bound: acks in "
        f"the last {bound_ms} ms before the kill max={max(recent)} mean={statistics.mean(recent):.1f} "
        f"({rate:.0f} acks/s x {bound_ms} ms = {rate * bound_ms / 1000:.0f}); cycles over the bound: "
        f"{over}/{len(kills)}",
        f"  acks at or above the offset read before the kill (the only ones that may be lost): "
        f"max={max(risk)} mean={statistics.mean(risk):.1f}; violations={len(state.violations)}",
    ]
    if state.power_loss:
        cut = [k.cut_bytes for k in kills]
        lines.append(f"  bytes cut per cycle: max={max(cut)} mean={statistics.mean(cut):.0f}")
    lines += [f"  VIOLATION {v}" for v in state.violations[:20]]
    return lines


async def main_async(args: argparse.Namespace, root: Path) -> int:
    state = CrashState(
        root, flush=args.flush, transient=args.write_buffer, power_loss=args.power_loss,
        metrics=args.flush == "ASYNC_FLUSH", segment_bytes=args.segment_bytes,
        flush_interval_ms=args.flush_interval,
    )  # fmt: skip
    samples: Samples = {}
    sampler = make_sampler(state, samples, args.sample_ms / 1000) if state.metrics else None
    max_acks = args.max_acks or (500 if args.flush == "SYNC_FLUSH" else 20000)
    started = time.monotonic()
    await crash_cycles(state, args.cycles, random.Random(args.seed), max_acks, sampler)
    elapsed = time.monotonic() - started
    lost = await verify(state, by_key=not args.no_key_check)
    acked = len(state.acks) + len(state.lost)
    busy = f" busy={state.busy}" if state.busy else ""
    print(f"flush={args.flush} cycles={state.cycles} sent={state.sent}{busy} acked={acked} lost={lost} "
          f"elapsed={elapsed:.1f}s")  # fmt: skip
    if args.flush == "SYNC_FLUSH":
        return 1 if lost else 0
    flush_ms = args.flush_interval or FLUSH_INTERVAL_MS
    load_s = sum(k.at - k.started for k in state.kills)
    rate = acked / load_s if load_s else 0.0
    mode = "power loss" if state.power_loss else "process kill"
    print(f"mode: {mode}{' + write buffer' if state.transient else ''}, segments of {state.segment_bytes} "
          f"bytes, flushIntervalCommitLog={flush_ms} ms, {rate:.0f} acks/s while loaded")  # fmt: skip
    lines = window_lines(state, samples, FLUSHED, rate)
    if state.transient:
        lines += window_lines(state, samples, COMMITTED, rate)
    if state.power_loss:
        lines += loss_lines(state, flush_ms, rate, "power loss (cut at the flushed offset)")
    elif state.transient:
        lines += loss_lines(state, COMMIT_INTERVAL_MS, rate, "process kill with a write buffer")
    else:
        lines.append(f"process kill: lost={lost} (the page cache survives a process kill)")
    print("\n".join(lines))
    return 1 if lost or state.violations else 0


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--cycles", type=int, default=50)
    parser.add_argument("--max-acks", type=int, default=0,
                        help="kill after 1..N acks per cycle (default 500 SYNC, 20000 ASYNC)")  # fmt: skip
    parser.add_argument("--flush", choices=("SYNC_FLUSH", "ASYNC_FLUSH"), default="SYNC_FLUSH")
    parser.add_argument("--power-loss", action="store_true",
                        help="ASYNC: cut the log at the flushed offset read before each kill")  # fmt: skip
    parser.add_argument("--write-buffer", action="store_true", help="ASYNC: transientStorePoolEnable=true")
    parser.add_argument("--segment-bytes", type=int, default=SEGMENT_BYTES, help="mapedFileSizeCommitLog")
    parser.add_argument("--flush-interval", type=int, default=0, help="flushIntervalCommitLog ms (0: 500)")
    parser.add_argument("--sample-ms", type=float, default=5.0, help="GET /metrics period (ASYNC)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--no-key-check", action="store_true", help="skip QUERY_MESSAGE per ack")
    parser.add_argument("--root", type=Path, help="store directory (default: a temporary one)")
    args = parser.parse_args()
    if args.flush == "SYNC_FLUSH" and (args.power_loss or args.write_buffer):
        parser.error("--power-loss and --write-buffer measure ASYNC_FLUSH")
    if args.root:
        args.root.mkdir(parents=True, exist_ok=True)
        return asyncio.run(main_async(args, args.root))
    with tempfile.TemporaryDirectory(prefix="crash-cycles-") as tmp:
        return asyncio.run(main_async(args, Path(tmp)))


if __name__ == "__main__":
    sys.exit(main())
