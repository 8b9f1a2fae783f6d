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

from tests.support.controller_mode.netns import netns_unavailable
from tests.support.controller_mode.partitions import SCENARIOS, Report, Round, check, describe, group


def _p50_worst(xs: list[float]) -> str:
    return f"p50 {statistics.median(xs):.2f} s, worst {max(xs):.2f} s" if xs else "-"


async def bench(tmp: Path, scenarios: list[str], runs: int, fast: bool) -> int:
    rounds: dict[str, list[Round]] = {name: [] for name in scenarios}
    failed: list[str] = []
    report = Report()
    began = time.monotonic()
    task = asyncio.current_task()
    assert task is not None
    for sig in (signal.SIGTERM, signal.SIGINT):  # stop the processes and remove the namespaces
        asyncio.get_running_loop().add_signal_handler(sig, task.cancel)
    async with group(tmp, fast=fast, pace=0.005) as g:
        for name in scenarios:
            for k in range(runs):
                try:
                    r = await SCENARIOS[name](g)
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
            if not report.ok:
                failed.append(f"{name}: {report}")
    print(f"\n{sum(map(len, rounds.values()))} rounds in {time.monotonic() - began:.0f} s; "
          f"{'default' if not fast else 'short'} timings; {report}")  # fmt: skip
    print(
        "| scenario | runs | new master elected | first ack by the new master | longest time without an ack |"
    )
    print("|---|---|---|---|---|")
    for name, rs in rounds.items():
        elected = _p50_worst([r.elected_s for r in rs if r.elected_s is not None])
        recovered = _p50_worst([r.recovered_s for r in rs if r.recovered_s is not None])
        gaps = _p50_worst([r.longest_gap_s for r in rs])
        print(f"| {name} | {len(rs)} | {elected} | {recovered} | {gaps} |")
    for line in failed:
        print("FAILED", line)
    return 1 if failed else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--runs", type=int, default=20, help="rounds per scenario")
    parser.add_argument(
        "--scenario", action="append", choices=sorted(SCENARIOS), help="(repeatable) default: all"
    )
    parser.add_argument(
        "--defaults", action="store_true", help="default timings (10 s lease) instead of short"
    )
    parser.add_argument("--keep", type=Path, help="put the processes' stores and logs here, and keep them")
    args = parser.parse_args()
    why = netns_unavailable()
    if why is not None:
        print(f"failover bench: {why}", file=sys.stderr)
        return 2
    scenarios = args.scenario or list(SCENARIOS)
    if args.keep is not None:
        args.keep.mkdir(parents=True, exist_ok=False)
        return asyncio.run(bench(args.keep.resolve(), scenarios, args.runs, not args.defaults))
    with tempfile.TemporaryDirectory(prefix="failover-bench-") as tmp:
        return asyncio.run(bench(Path(tmp), scenarios, args.runs, not args.defaults))


if __name__ == "__main__":
    sys.exit(main())
