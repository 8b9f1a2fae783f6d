"""Crash and partition scenarios of controller mode, each process in a network namespace of its own.

`group(tmp)` starts, inside `netns.Net`: 3 etcd members, 2 controllers, a name server and 3
broker replicas of one group (`failover.FailoverCluster`), and two `Writer`s (queues 0 and 1) in
this process, which sits on the bridge too. Each scenario (`SCENARIOS`) waits until all three
replicas are in the SyncStateSet, injects its fault, waits for a new master and for sends it
acknowledges, heals, and waits until all three are in sync again; it returns a `Round` (timings
and notes). `check` then reads every queue back from the master and counts, over every
acknowledgement so far (`Report`):

* lost: acknowledged, not in the queue (the goal: 0);
* duplicated: in a queue more than once; reordered: acknowledged in one order, stored in another;
* overlapping: two masters acknowledging at the same time. Each ack's commit-log offset falls in
  one epoch of the master's epoch file; taken in the order they arrived, the epochs must never go
  down (an ack of epoch 2 arriving after one of epoch 3 means the deposed master still took
  writes). Also every replica's epoch file must be the master's, and the brokers' logs must name
  one replica per epoch as its master.

Timings are the short ones of `failover.FAST` (a 2 s lease, 300 ms heartbeats). The same code
runs the short profile in `make test` (tests/failover/test_partitions.py) and the full one
(bench/failover_bench.py, 20+ rounds per scenario). The ASYNC replication scenarios, whose losses
must be reported rather than absent, are `async_scenarios.py`'s.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from rocketlite.protocol.codes import ResponseCode
from rocketlite.protocol.formats.epoch_file import EpochEntry
from rocketlite.protocol.formats.epoch_file import decode as decode_epochs
from rocketlite.protocol.wire.command import make_request
from rocketlite.protocol.wire.controller import ControllerRequestCode, ElectMasterRequestHeader
from tests.support.controller_mode.cluster import (
    BROKER_NAME,
    ROOT,
    Ack,
    FailoverCluster,
    Writer,
    etcd_binary,
    in_sync_ids,
    read_queue,
    sync_state,
    wait_sync_state,
)
from tests.support.controller_mode.netns import Net, netns_unavailable
from tests.support.ha_harness import Proc, Raw

FAKETIME_LIB = (
    ROOT / ".clients" / "faketime" / "usr" / "lib" / "x86_64-linux-gnu" / "faketime" / "libfaketimeMT.so.1"
)
SKEW = "-1d x0.5"  # a clock a day behind that runs at half speed (libfaketime's FAKETIME)
QUEUES = (0, 1)
_MASTER_LINE = re.compile(r"replica (\d+) now \w*MASTER \(brokerId 0\), epoch (\d+)")


def require_netns() -> None:
    """Skip (fail under CI=true, which runs as root with `ip netns`) when namespaces cannot be made."""
    why = netns_unavailable()
    if why is None:
        return
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"partition tests: {why}; CI=true requires them")
    pytest.skip(f"partition tests: {why}")


def faketime_env() -> dict[str, str] | None:
    """The environment that runs a process with a skewed clock (None: libfaketime is missing)."""
    if not FAKETIME_LIB.is_file():
        return None
    return {"LD_PRELOAD": str(FAKETIME_LIB), "FAKETIME": SKEW}


@dataclass
class Round:
    scenario: str
    old_master: int
    new_master: int | None = None
    elected_s: float | None = None  # fault -> the controllers name a new master
    recovered_s: float | None = None  # fault -> first send acknowledged by the new master
    longest_gap_s: float = 0.0  # the longest time without any acknowledged send in the round
    notes: dict[str, Any] = field(default_factory=dict)


@dataclass
class Report:
    acked: int = 0
    lost: list[str] = field(default_factory=list)  # acknowledged, gone, and not reported: never
    reported_lost: int = 0  # acknowledged, gone, and reported cut by a deposed master (ASYNC only)
    duplicated: int = 0
    reordered: int = 0
    overlapping: list[str] = field(default_factory=list)
    epoch_problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (self.lost or self.duplicated or self.reordered or self.overlapping or self.epoch_problems)

    def __str__(self) -> str:
        return (
            f"acknowledged {self.acked}, lost {len(self.lost)} {self.lost[:5]} (and {self.reported_lost} "
            f"lost as reported by a truncation), duplicated "
            f"{self.duplicated}, reordered {self.reordered}, overlapping {self.overlapping[:5]}, "
            f"epochs {self.epoch_problems[:5]}"
        )


class Group:
    """The running processes, the writers, and what the scenarios need to reach them."""

    def __init__(
        self, c: FailoverCluster, net: Net, raw: Raw, ns: Proc, replicas: dict[int, Proc], pace: float = 0.0
    ) -> None:
        self.c, self.net, self.raw, self.ns, self.replicas, self.pace = c, net, raw, ns, replicas, pace
        self.writers: list[Writer] = []
        self.probes: list[Writer] = []  # writers aimed at one broker, whatever its role
        self._tasks: list[asyncio.Task[None]] = []
        self._probe_count = itertools.count()
        self._asking: list[Proc] = list(c.controllers)  # the order to ask them in (`sync_state`)
        # Acknowledged messages a deposed master reported cutting (ASYNC scenarios): `check`
        # counts them apart; any other loss is a silent one.
        self.reported_cut: set[str] = set()

    @property
    def controllers(self) -> list[Proc]:
        return self.c.controllers

    async def state(
        self, pred: Callable[[dict[str, Any]], Any], timeout: float = 60, what: str = ""
    ) -> dict[str, Any]:
        if {id(c) for c in self._asking} != {id(c) for c in self.controllers}:
            self._asking = list(self.controllers)  # one was restarted
        return await wait_sync_state(self.raw, self._asking, pred, timeout, what)

    async def all_in_sync(self, timeout: float = 60) -> dict[str, Any]:
        return await self.state(
            lambda s: in_sync_ids(s) == set(self.replicas) and s["masterBrokerId"] in self.replicas,
            timeout, "all replicas in the SyncStateSet",
        )  # fmt: skip

    async def new_master(self, old: int, timeout: float = 60) -> dict[str, Any]:
        return await self.state(
            lambda s: s["masterBrokerId"] not in (old, -1), timeout, f"a master other than {old}"
        )

    # -- writers ----------------------------------------------------------------------------
    def resume(self) -> None:
        if not self.writers:
            self.writers = [Writer(self.raw, self.controllers, q, f"q{q}", self.pace) for q in QUEUES]
        for w in self.writers:
            w.stop = asyncio.Event()
            w.controllers = list(self.controllers)
            self._tasks.append(asyncio.create_task(w.run()))

    async def pause(self) -> None:
        for w in self.writers:
            w.stop.set()
        tasks, self._tasks = self._tasks, []
        await asyncio.gather(*tasks)

    def acks(self) -> list[Ack]:
        return sorted((a for w in [*self.writers, *self.probes] for a in w.acks), key=lambda a: a.at)

    async def wait_acks(
        self, n: int, *, after: float = 0.0, via: str | None = None, timeout: float = 60
    ) -> float:
        """Until `n` sends acknowledged after `after` (by `via`); the time of the first of them."""
        deadline = time.monotonic() + timeout
        while True:
            mine = [a.at for a in self.acks() if a.at > after and (via is None or a.addr == via)]
            if len(mine) >= n:
                return mine[0]
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"only {len(mine)} of {n} sends acknowledged (via {via}) in {timeout:.0f} s"
                )
            await asyncio.sleep(0.02)

    def longest_gap(self, since: float) -> float:
        times = [since, *(a.at for a in self.acks() if a.at > since), time.monotonic()]
        return max(b - a for a, b in itertools.pairwise(times))

    @contextlib.asynccontextmanager
    async def probe(self, addr: str) -> AsyncIterator[Writer]:
        """A writer that keeps sending to `addr` (a master being cut off), queue 2."""
        w = Writer(self.raw, self.controllers, queue_id=2, prefix=f"p{next(self._probe_count)}")
        self.probes.append(w)

        async def loop() -> None:
            while not w.stop.is_set():
                await w.send_one(addr)

        task = asyncio.create_task(loop())
        try:
            yield w
        finally:
            w.stop.set()
            await task

    def node(self, replica_id: int) -> str:
        return f"replica{replica_id}"

    async def restart(self, replica_id: int, env: dict[str, str] | None = None) -> None:
        self.replicas[replica_id] = await asyncio.to_thread(self.c.restart, self.replicas[replica_id], env)


@contextlib.contextmanager
def group_in_loop(tmp: Path, **kw: Any) -> Iterator[tuple[asyncio.AbstractEventLoop, Group]]:
    """`group` for synchronous tests (a pytest fixture): on an event loop of its own, which the
    tests drive with `run_until_complete`. Skips without namespaces or etcd (fails under CI)."""
    require_netns()
    etcd_binary()
    loop = asyncio.new_event_loop()
    setup = group(tmp, **kw)
    g = loop.run_until_complete(setup.__aenter__())
    try:
        yield loop, g
    finally:
        loop.run_until_complete(setup.__aexit__(None, None, None))
        loop.close()


@contextlib.asynccontextmanager
async def group(
    tmp: Path, *, fast: bool = True, pace: float = 0.0, broker: dict[str, str] | None = None
) -> AsyncIterator[Group]:
    """The whole set-up in namespaces; removed (processes stopped, namespaces deleted) at the end.
    `fast=False`: the brokers' and controllers' default timings (a 10 s lease, 1 s heartbeats);
    `pace`: seconds each writer waits between sends (0: as fast as acknowledgements come);
    `broker`: more broker settings (`ASYNC`)."""
    require_netns()
    net = Net()
    raw = Raw()
    c: FailoverCluster | None = None
    try:
        c = await asyncio.to_thread(lambda: FailoverCluster(tmp, net, fast=fast))
        for name in ("controller1", "controller2"):
            await asyncio.to_thread(c.controller, name)
        ns = await asyncio.to_thread(c.namesrv)
        replicas = {}
        for i in (1, 2, 3):
            replicas[i] = await asyncio.to_thread(c.replica, i, ns, None, **(broker or {}))
        g = Group(c, net, raw, ns, replicas, pace)
        await g.all_in_sync()
        g.resume()
        yield g
        await g.pause()
    finally:
        await raw.close()
        if c is not None:
            await asyncio.to_thread(c.close)
        net.close()


# -- the checker ----------------------------------------------------------------------------------
def _epoch_of(entries: list[EpochEntry], offset: int) -> int:
    epoch = 0
    for e in entries:
        if e.start_offset <= offset:
            epoch = e.epoch
    return epoch


def _epoch_file(proc: Proc) -> list[EpochEntry]:
    assert proc.store is not None
    return decode_epochs((proc.store / "epochFileCheckpoint").read_text())


async def check(g: Group) -> Report:
    """Read every queue back from the master (writers paused, all replicas in sync) and count."""
    await g.pause()
    try:
        state = await g.all_in_sync()
        master = int(state["masterBrokerId"])
        report = Report()
        acks = g.acks()
        report.acked = len(acks)
        missing: set[str] = set()
        for queue_id, writers in (
            (q, [w for w in [*g.writers, *g.probes] if w.queue_id == q]) for q in (*QUEUES, 2)
        ):
            if not any(w.acks for w in writers):
                continue
            read = await read_queue(g.raw, state["masterAddress"], queue_id)
            where = {b: i for i, b in enumerate(read)}
            report.duplicated += len(read) - len(where)
            for w in writers:
                gone = [a.body for a in w.acks if a.body not in where]
                silent = [b for b in gone if b not in g.reported_cut]
                report.lost += silent
                report.reported_lost += len(gone) - len(silent)
                missing.update(gone)
                positions = [where[a.body] for a in w.acks if a.body in where]
                report.reordered += sum(1 for a, b in itertools.pairwise(positions) if b < a)
        entries = _epoch_file(g.replicas[master])
        for i, proc in g.replicas.items():
            if i != master and _epoch_file(proc) != entries:
                report.epoch_problems.append(f"replica {i}'s epoch file differs from the master's")
        highest = 0
        by_epoch: dict[int, set[str]] = {}
        for a in acks:
            if a.body in missing:
                continue  # its offset now holds another message (or nothing): no epoch to check
            epoch = _epoch_of(entries, a.offset)
            by_epoch.setdefault(epoch, set()).add(a.addr)
            if epoch < highest:
                report.overlapping.append(
                    f"{a.body} (epoch {epoch}, by {a.addr}) after an ack of epoch {highest}"
                )
            highest = max(highest, epoch)
        report.epoch_problems += [
            f"epoch {e} acknowledged by {sorted(s)}" for e, s in by_epoch.items() if len(s) > 1
        ]
        masters: dict[int, set[int]] = {}
        for proc in g.replicas.values():
            with contextlib.suppress(OSError):
                for m in _MASTER_LINE.finditer(proc.log_path.read_text(errors="replace")):
                    masters.setdefault(int(m.group(2)), set()).add(int(m.group(1)))
        report.epoch_problems += [
            f"epoch {e} served by replicas {sorted(r)}" for e, r in masters.items() if len(r) > 1
        ]
        return report
    finally:
        g.resume()


# -- scenarios ------------------------------------------------------------------------------------
async def steady_master(g: Group) -> tuple[int, str]:
    state = await g.all_in_sync()
    await g.wait_acks(20, after=time.monotonic())
    return int(state["masterBrokerId"]), str(state["masterAddress"])


async def await_failover(g: Group, r: Round, fault_at: float) -> dict[str, Any]:
    state = await g.new_master(r.old_master)
    r.elected_s = time.monotonic() - fault_at
    r.new_master = int(state["masterBrokerId"])
    first = await g.wait_acks(20, after=fault_at, via=state["masterAddress"])
    r.recovered_s = first - fault_at
    return state


async def _fenced(g: Group, replica_id: int, since: int, timeout: float = 30) -> None:
    """Until the replica's log says its lease fence stopped it (read from disk: it may be unreachable)."""
    path = g.replicas[replica_id].log_path
    deadline = time.monotonic() + timeout
    while "lease fence" not in path.read_text(errors="replace")[since:]:
        if time.monotonic() > deadline:
            raise AssertionError(f"replica {replica_id} never stopped serving (no lease fence in its log)")
        await asyncio.sleep(0.05)


def _log_size(g: Group, replica_id: int) -> int:
    return len(g.replicas[replica_id].log_path.read_text(errors="replace"))


async def kill_master(g: Group) -> Round:
    """kill -9 the master; restart it (it comes back as a slave of the new master)."""
    return await kill_round(g, "kill-master")


# What `kill_round` runs once the killed master is back in sync: (round, old master id, its address,
# when the round began). The ASYNC scenarios read what it cut there (`async_scenarios.py`).
Rejoin = Callable[[Round, int, str, float], Awaitable[None]]


async def kill_round(g: Group, scenario: str, *, on_rejoin: Rejoin | None = None) -> Round:
    since = time.monotonic()
    old, addr = await steady_master(g)
    r = Round(scenario, old)
    fault = time.monotonic()
    g.replicas[old].kill9()
    await await_failover(g, r, fault)
    await g.restart(old)
    await g.all_in_sync()
    if on_rejoin is not None:
        await on_rejoin(r, old, addr, since)
    r.longest_gap_s = g.longest_gap(fault)
    return r


async def isolate_master(g: Group) -> Round:
    """The master's link goes down: nothing reaches it or leaves it. It must stop serving by
    itself (its lease fence); after healing it rejoins as a slave."""
    old, _ = await steady_master(g)
    r = Round("isolate-master", old)
    mark = _log_size(g, old)
    fault = time.monotonic()
    g.net.isolate(g.node(old))
    try:
        await await_failover(g, r, fault)
        await _fenced(g, old, mark)
    finally:
        g.net.rejoin(g.node(old))
    await g.all_in_sync()
    r.longest_gap_s = g.longest_gap(fault)
    return r


async def _cut_from_controllers(g: Group, r: Round, old: str) -> None:
    controllers = [c.name for c in g.controllers]
    fault = time.monotonic()
    mark = _log_size(g, r.old_master)
    async with g.probe(old) as probe:
        g.net.cut(g.node(r.old_master), controllers)
        try:
            state = await await_failover(g, r, fault)
            await _fenced(g, r.old_master, mark)
            await asyncio.sleep(0.5)  # the probe meets the closed port
        finally:
            g.net.uncut(g.node(r.old_master), controllers)
    last_probe_ack = max((a.at for a in probe.acks), default=fault)
    r.notes["old master's last ack after the cut (s)"] = round(last_probe_ack - fault, 2)
    r.notes["new master"] = state["masterAddress"]
    await g.all_in_sync()
    r.longest_gap_s = g.longest_gap(fault)


async def cut_master_from_controllers(g: Group) -> Round:
    """The master can reach its replicas and clients but no controller. It must stop accepting
    SYNC sends once its lease is over; a probe keeps sending to it directly all along."""
    old, addr = await steady_master(g)
    r = Round("cut-master-from-controllers", old)
    await _cut_from_controllers(g, r, addr)
    return r


async def partition_heals(g: Group) -> Round:
    """A minority — the master, controller1 and the etcd leader — cut from the majority (the
    other replicas, controller2, two etcd members, the name server); this process reaches both.
    The majority elects; the minority's controller has no quorum. Then it heals."""
    old, _ = await steady_master(g)
    leader = await asyncio.to_thread(g.c.etcd.leader)
    minority = [g.node(old), g.controllers[0].name, f"etcd{leader}"]
    r = Round("partition-heals", old, notes={"minority": minority})
    mark = _log_size(g, old)
    fault = time.monotonic()
    g.net.partition(minority)
    try:
        await await_failover(g, r, fault)
        await _fenced(g, old, mark)
    finally:
        g.net.heal_all()
    await g.all_in_sync()
    r.longest_gap_s = g.longest_gap(fault)
    return r


async def slow_replica(g: Group) -> Round:
    """One slave gets 1 kbit/s: it falls behind, leaves the SyncStateSet (sends stop waiting for
    it), and rejoins once the link is fast again. No failover. (At 16 kbit/s it kept up with
    the sends it held back itself — each waiting syncFlushTimeout — and so never left: a replica
    slower than syncFlushTimeout but faster than haMaxTimeSlaveNotCatchup stays in the set.)"""
    old, _ = await steady_master(g)
    slow = min(i for i in g.replicas if i != old)
    r = Round("slow-replica", old, notes={"slow replica": slow})
    fault = time.monotonic()
    g.net.slow(g.node(slow), kbit=1)
    try:
        await g.state(lambda s: slow not in in_sync_ids(s), 60, f"replica {slow} out of the SyncStateSet")
        r.notes["left after (s)"] = round(time.monotonic() - fault, 2)
        await g.wait_acks(20, after=time.monotonic())  # sends go on without it
    finally:
        g.net.unslow(g.node(slow))
    healed = time.monotonic()
    await g.all_in_sync()
    r.notes["rejoined after (s)"] = round(time.monotonic() - healed, 2)
    r.longest_gap_s = g.longest_gap(fault)
    return r


async def clock_skew(g: Group) -> Round:
    """A replica whose clock is a day behind and runs at half speed (libfaketime) is made master
    (electMaster) and cut from the controllers. Its lease fence, timed by its slow clock, comes
    late: for a while two replicas think they are master. The new master's replicas no longer
    acknowledge the old one, so it cannot acknowledge a SYNC send: nothing overlaps."""
    env = faketime_env()
    if env is None:
        why = f"libfaketime is not installed at {FAKETIME_LIB.relative_to(ROOT)} (run `make faketime`)"
        if os.environ.get("CI", "").lower() == "true":
            raise AssertionError(f"{why}; CI=true requires it")
        pytest.skip(why)
    current, _ = await steady_master(g)
    skewed = min(i for i in g.replicas if i != current)
    await asyncio.to_thread(g.replicas[skewed].stop)
    await g.restart(skewed, env)
    await g.all_in_sync()
    await _elect(g, skewed)
    state = await g.state(lambda s: s["masterBrokerId"] == skewed, 60, f"replica {skewed} master")
    await g.wait_acks(20, after=time.monotonic(), via=state["masterAddress"])
    await g.all_in_sync()
    r = Round("clock-skew", skewed, notes={"FAKETIME": SKEW})
    await _cut_from_controllers(g, r, state["masterAddress"])
    await asyncio.to_thread(g.replicas[skewed].stop)  # its clock back to normal
    await g.restart(skewed)
    await g.all_in_sync()
    return r


async def _elect(g: Group, replica_id: int) -> None:
    header = ElectMasterRequestHeader(
        cluster_name="HaCluster", broker_name=BROKER_NAME, broker_id=replica_id, designate_elect=True
    )
    request = make_request(ControllerRequestCode.CONTROLLER_ELECT_MASTER, header.to_ext())
    r = await g.raw.client.invoke(g.controllers[-1].addr, request, 10.0)
    assert r.code == ResponseCode.SUCCESS, r.remark


async def controller_killed_mid_election(g: Group) -> Round:
    """The master is isolated; the moment its lease is gone — before a controller has elected —
    controller1 (the one the brokers talk to) and the etcd leader are killed with SIGKILL. The
    remaining controller and etcd members finish the election. Both are restarted after."""
    old, _ = await steady_master(g)
    r = Round("controller-killed-mid-election", old)
    leader = await asyncio.to_thread(g.c.etcd.leader)
    ctl = g.controllers[0]
    fault = time.monotonic()
    g.net.isolate(g.node(old))
    try:
        while True:  # polled through controller2, 20 ms apart: the scans run every 300 ms
            with contextlib.suppress(OSError, TimeoutError, AssertionError):
                state = await sync_state(g.raw, g.controllers[1])
                if not _alive(state, old) or state["masterBrokerId"] != old:
                    break
            if time.monotonic() - fault > 60:
                raise AssertionError(f"master {old}'s lease never expired")
            await asyncio.sleep(0.02)
        ctl.kill9()
        g.c.etcd.kill9(leader)
        r.notes["killed before the election"] = state["masterBrokerId"] == old
        r.notes["etcd leader killed"] = f"etcd{leader}"
        await await_failover(g, r, fault)
    finally:
        g.net.rejoin(g.node(old))
    await asyncio.to_thread(g.c.etcd.restart, leader)
    await asyncio.to_thread(g.c.restart_controller, ctl)
    await g.all_in_sync()
    r.longest_gap_s = g.longest_gap(fault)
    return r


def _alive(state: dict[str, Any], replica_id: int) -> bool:
    members = [*state.get("inSyncReplicas", []), *state.get("notInSyncReplicas", [])]
    return any(m["brokerId"] == replica_id and m["alive"] for m in members)


SCENARIOS: dict[str, Callable[[Group], Awaitable[Round]]] = {
    "kill-master": kill_master,
    "isolate-master": isolate_master,
    "cut-master-from-controllers": cut_master_from_controllers,
    "partition-heals": partition_heals,
    "slow-replica": slow_replica,
    "clock-skew": clock_skew,
    "controller-killed-mid-election": controller_killed_mid_election,
}


def describe(r: Round) -> str:
    recovered = f"{r.recovered_s:.2f} s" if r.recovered_s is not None else "-"
    elected = f"{r.elected_s:.2f} s" if r.elected_s is not None else "-"
    notes = ", ".join(f"{k}: {v}" for k, v in r.notes.items())
    return (
        f"{r.scenario}: master {r.old_master} -> {r.new_master}; elected after {elected}, first ack by "
        f"the new master after {recovered}; longest gap {r.longest_gap_s:.2f} s"
        + (f"; {notes}" if notes else "")
    )
