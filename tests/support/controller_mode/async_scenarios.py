"""The ASYNC replication scenarios of controller mode (`allAckInSyncStateSet=false`): losses bounded
and reported.

An ASYNC master acknowledges a send before any replica has it, so a failover may lose the last
acknowledged messages. What these scenarios check is that no loss is silent: the deposed master,
back as a slave, cuts what the new master lacks and says so (its runtime info), and `check`
(`partitions.py`) counts the acknowledged sends that cut covers as reported, not as lost. The
group set-up, the faults and the checks are `partitions.py`'s; a group for these scenarios is
started with `broker=ASYNC`.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Awaitable, Callable

from tests.support.controller_mode.partitions import Group, Round, await_failover, kill_round, steady_master

ASYNC = {"allAckInSyncStateSet": "false"}  # the group's brokers: ASYNC_MASTER, acks before replicas


async def _rejoined(g: Group, r: Round, old: int, old_addr: str, since: float) -> None:
    """The deposed master `old` is back as a slave: what it reports cutting (its runtime info), and
    the acknowledged sends that covers — its acks since `since` at or past the cut offset (also
    those that arrived after the kill: answers already on their way). Those are the ones `check`
    may find missing without calling them silent (`g.reported_cut`)."""
    info = await g.raw.runtime(g.replicas[old].addr)
    offset = int(info.get("controllerModeLastTruncationOffset", "-1"))
    covered = [
        a.body for a in g.acks()
        if offset >= 0 and a.addr == old_addr and a.at >= since and a.offset >= offset
    ]  # fmt: skip
    g.reported_cut.update(covered)
    r.notes["cut messages"] = int(info.get("controllerModeTruncatedMessages", "0"))
    r.notes["cut bytes"] = int(info.get("controllerModeTruncatedBytes", "0"))
    r.notes["acknowledged past the cut"] = len(covered)
    r.notes["cut offset"] = offset


async def kill_master_async(g: Group) -> Round:
    """kill -9 an ASYNC master under load: the new master may lack the last messages the old one
    acknowledged; the old one, back as a slave, cuts them and says so (`_rejoined`)."""
    return await kill_round(g, "kill-master-async", on_rejoin=functools.partial(_rejoined, g))


async def async_unreplicated_tail(g: Group, n: int = 50) -> Round:
    """An ASYNC master cut from its replicas (not from the controllers or clients) acknowledges `n`
    more sends no replica receives, then is killed: those are lost by design, and must be
    reported — the new master is elected with a shorter log, and the old one cuts them when it
    rejoins. (The cut stays until the new master serves, so no retransmission of the dead
    master's sockets reaches a replica late.)"""
    since = time.monotonic()
    old, addr = await steady_master(g)
    r = Round("async-unreplicated-tail", old)
    others = [g.node(i) for i in g.replicas if i != old]
    g.net.cut(g.node(old), others)
    try:
        await g.wait_acks(n, after=time.monotonic(), via=addr)
        fault = time.monotonic()
        g.replicas[old].kill9()
        await await_failover(g, r, fault)
    finally:
        g.net.uncut(g.node(old), others)
    await g.restart(old)
    await g.all_in_sync()
    await _rejoined(g, r, old, addr, since)
    r.longest_gap_s = g.longest_gap(fault)
    return r


ASYNC_SCENARIOS: dict[str, Callable[[Group], Awaitable[Round]]] = {
    "kill-master-async": kill_master_async,
    "async-unreplicated-tail": async_unreplicated_tail,
}
