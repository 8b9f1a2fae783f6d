"""Failover figures of controller mode (docs/benchmarks.md#failover): the crash and partition
scenarios of tests/support/controller_mode/partitions.py, each run again and again on one set-up.

The set-up: 3 etcd members, 2 controllers, a name server and 3 broker replicas, each process in a
network namespace of its own, and two writers in this process sending SYNC messages with unique
keys (allAckInSyncStateSet). Every round injects its fault, waits for the new master, heals, and
waits until all three replicas are in sync again; then every acknowledged message so far is read
back and the lost, duplicated, reordered and overlapping (two masters acknowledging at once)
ones are counted (the goal: 0 each). Per scenario it prints, p50 and worst, the time from the
fault until the controllers name a new master, until the first send the new master acknowledged,
and the longest time without any acknowledged send.

The ASYNC scenarios (`kill-master-async`, `async-unreplicated-tail`, in async_scenarios.py beside
partitions.py) run on a second set-up whose brokers have allAckInSyncStateSet=false: there
acknowledged messages may be lost on failover, and the bench counts them per kill — each one must
be covered by what the deposed master reported cutting when it rejoined (its runtime info); a loss
nothing reported fails the bench.

    .venv/bin/python bench/failover_bench.py --runs 20            # every scenario, short timings
    .venv/bin/python bench/failover_bench.py --defaults --runs 20 --scenario kill-master

`--defaults` uses the brokers' and controllers' default timings (a 10 s lease, 1 s heartbeats)
instead of the short ones (2 s, 300 ms). Needs root (`ip netns`), `make etcd` and, for the
clock-skew scenario, `make faketime`; `make bench-failover` runs the full profile.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support.controller_mode.async_scenarios import ASYNC, ASYNC_SCENARIOS
from tests.support.controller_mode.netns import netns_unavailable
from tests.support.controller_mode.partitions import (
    SCENARIOS,
    Group,
    Report,
    Round,
    check,
    describe,
    group,
)

ALL = {**SCENARIOS, **ASYNC_SCENARIOS}


def _p50_worst(xs: list[float]) -> str:
    return f"p50 {statistics.median(xs):.2f} s, worst {max(xs):.2f} s" if xs else "-"


async def _run(
    g: Group, names: list[str], runs: int, rounds: dict[str, list[Round]], failed: list[str]
) -> Report:
    report = Report()
    for name in names:
        for k in range(runs):
            try:
                r = await ALL[name](g)
            except AssertionError as exc:  # a round that did not recover: say so, go on if it heals
                failed.append(f"{name} {k + 1}: {exc}")
                print(f"{name} {k + 1}/{runs}: FAILED {exc}", flush=True)
                g.net.heal_all()
                await g.all_in_sync(180)
                continue
            rounds[name].append(r)
            print(f"{name} {k + 1}/{runs}: {describe(r)}", flush=True)
        report = await check(g)  # everything acknowledged so far, read back once per scenario
        print(f"{name}: {report}", flush=True)
        if not report.ok:  # with ASYNC: a loss no truncation reported (a silent one)
            failed.append(f"{name}: {report}")
    return report


async def bench(tmp: Path, scenarios: list[str], runs: int, fast: bool, pace: float) -> int:
    rounds: dict[str, list[Round]] = {name: [] for name in scenarios}
    failed: list[str] = []
    began = time.monotonic()
    task = asyncio.current_task()
    assert task is not None
    for sig in (signal.SIGTERM, signal.SIGINT):  # stop the processes and remove the namespaces
        asyncio.get_running_loop().add_signal_handler(sig, task.cancel)
    reports = []
    for sub in ("sync", "async"):
        (tmp / sub).mkdir(exist_ok=True)
    sync = [n for n in scenarios if n in SCENARIOS]
    if sync:
        async with group(tmp / "sync", fast=fast, pace=pace) as g:
            reports.append(await _run(g, sync, runs, rounds, failed))
    asynchronous = [n for n in scenarios if n in ASYNC_SCENARIOS]
    if asynchronous:  # a group of its own: its brokers acknowledge before replicating
        async with group(tmp / "async", fast=fast, pace=pace, broker=ASYNC) as g:
            reports.append(await _run(g, asynchronous, runs, rounds, failed))
    print(f"\n{sum(map(len, rounds.values()))} rounds in {time.monotonic() - began:.0f} s; "
          f"{'default' if not fast else 'short'} timings; {'; '.join(map(str, reports))}")  # fmt: skip
    print(
        "| scenario | runs | new master elected | first ack by the new master | longest time without an ack |"
    )
    print("|---|---|---|---|---|")
    for name, rs in rounds.items():
        elected = _p50_worst([r.elected_s for r in rs if r.elected_s is not None])
        recovered = _p50_worst([r.recovered_s for r in rs if r.recovered_s is not None])
        gaps = _p50_worst([r.longest_gap_s for r in rs])
        print(f"| {name} | {len(rs)} | {elected} | {recovered} | {gaps} |")
    for name, rs in rounds.items():
        if name in ASYNC_SCENARIOS and rs:
            lost = [r.notes["acknowledged past the cut"] for r in rs]
            cut = [r.notes["cut messages"] for r in rs]
            print(
                f"{name}: acknowledged and lost (all reported) per kill: p50 {statistics.median(lost):g}, "
                f"worst {max(lost)}, total {sum(lost)} over {len(rs)} kills; messages cut: total {sum(cut)}"
            )
    for line in failed:
        print("FAILED", line)
    return 1 if failed else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--runs", type=int, default=20, help="rounds per scenario")
    parser.add_argument("--scenario", action="append", choices=sorted(ALL), help="(repeatable) default: all")
    parser.add_argument(
        "--defaults", action="store_true", help="default timings (10 s lease) instead of short"
    )
    parser.add_argument(
        "--pace", type=float, default=0.005, help="seconds each writer waits between sends (0: none)"
    )
    parser.add_argument("--keep", type=Path, help="put the processes' stores and logs here, and keep them")
    args = parser.parse_args()
    why = netns_unavailable()
    if why is not None:
        print(f"failover bench: {why}", file=sys.stderr)
        return 2
    scenarios = args.scenario or list(ALL)
    if args.keep is not None:
        args.keep.mkdir(parents=True, exist_ok=False)
        return asyncio.run(bench(args.keep.resolve(), scenarios, args.runs, not args.defaults, args.pace))
    with tempfile.TemporaryDirectory(prefix="failover-bench-") as tmp:
        return asyncio.run(bench(Path(tmp), scenarios, args.runs, not args.defaults, args.pace))


if __name__ == "__main__":
    sys.exit(main())
