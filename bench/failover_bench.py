"""Failover figures of controller mode (docs/benchmarks.md#failover): kill -9 the master, again and again.

One cluster (tests.support.failover: 3 etcd members, 2 controllers, a name server, 3 broker
replicas on loopback, lease 2 s, heartbeats every 300 ms, allAckInSyncStateSet). A writer sends
SYNC messages to queue 0 of whichever replica the controller names master. Each round kills the
master with SIGKILL, measures the time to the controller's new master and to the first send that
new master acknowledges, restarts the killed replica and waits until all three are in sync
again. At the end every acknowledged message is read back from the last master: lost,
duplicated and reordered ones are counted (the goal: 0, 0, 0).

    .venv/bin/python bench/failover_bench.py --kills 20     # needs `make etcd`; about 15 s a kill

Runs inside its own network namespace when started with `unshare --net` (as `make bench-failover`
does), so its ports collide with nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support.failover import (
    Writer,
    failover_cluster,
    in_sync_ids,
    read_queue,
    wait_sync_state,
)
from tests.support.ha_harness import Raw


async def rounds(tmp: Path, kills: int) -> int:
    with failover_cluster(tmp) as c:
        raw = Raw()
        try:
            ctl = c.controller("controller1")
            c.controller("controller2")
            ns = c.namesrv()
            replicas = {i: c.replica(i, ns) for i in (1, 2, 3)}
            await wait_sync_state(raw, ctl, lambda s: in_sync_ids(s) == {1, 2, 3}, 60, "all in sync")
            writer = Writer(raw, ctl)
            task = asyncio.create_task(writer.run())
            elections: list[float] = []
            failovers: list[float] = []
            for k in range(kills):
                state = await wait_sync_state(raw, ctl, lambda s: in_sync_ids(s) == {1, 2, 3}, 60, "in sync")
                master = int(state["masterBrokerId"])
                start = len(writer.acked)
                while len(writer.acked) < start + 100:
                    await asyncio.sleep(0.02)
                killed = time.monotonic()
                replicas[master].kill9()
                await wait_sync_state(raw, ctl, lambda s, m=master: s["masterBrokerId"] not in (m, -1), 60)
                elections.append(time.monotonic() - killed)
                while writer.first_ack_after(killed) is None:
                    await asyncio.sleep(0.02)
                    if time.monotonic() - killed > 60:
                        raise AssertionError("no send acknowledged within 60 s of the kill")
                failovers.append(writer.first_ack_after(killed) or 0.0)
                print(f"kill {k + 1}: replica {master}; new master after {elections[-1]:.2f} s, "
                      f"first acknowledged send after {failovers[-1]:.2f} s", flush=True)  # fmt: skip
                replicas[master] = c.restart(replicas[master])
            await wait_sync_state(raw, ctl, lambda s: in_sync_ids(s) == {1, 2, 3}, 60, "in sync")
            writer.stop.set()
            await task
            final = await wait_sync_state(raw, ctl, lambda s: s["masterBrokerId"] != -1)
            read = await read_queue(raw, final["masterAddress"])
        finally:
            await raw.close()
    lost = len(set(writer.acked) - set(read))
    dups = len(read) - len(set(read))
    where = {b: i for i, b in enumerate(read)}
    pos = [where[b] for b in writer.acked if b in where]
    reordered = sum(1 for a, b in itertools.pairwise(pos) if b < a)
    acked = len(writer.acked)
    print(f"\n{kills} kills; acknowledged {acked}, lost {lost}, duplicated {dups}, reordered {reordered}")
    for name, xs in (("new master elected", elections), ("first acknowledged send", failovers)):
        print(f"{name}: p50 {statistics.median(xs):.2f} s, worst {max(xs):.2f} s")
    return 1 if lost or dups or reordered else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--kills", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="failover-bench-") as tmp:
        return asyncio.run(rounds(Path(tmp), args.kills))


if __name__ == "__main__":
    sys.exit(main())
