"""RocketMQ 5's `minInSyncReplicas` and `asyncLearner` in controller mode, over real processes
(etcd, a controller, a name server and broker replicas on loopback; tests.support.controller_mode).

* minInSyncReplicas=3 on a group of 3 with allAckInSyncStateSet: while one replica is dead and the
  SyncStateSet has shrunk to 2, a SYNC send is refused before it is stored — SYSTEM_ERROR "in-sync
  replicas not enough", as RocketMQ's send processor answers its IN_SYNC_REPLICAS_NOT_ENOUGH put
  status — and taken again once the replica is back in the set.
* asyncLearner=true on one replica: it receives the whole log, but never joins the SyncStateSet;
  so it is not elected when the master dies, and follows the replica that is.
Needs etcd (`make etcd`; skips without it, fails under CI=true).
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from rocketlite.protocol.codes import ResponseCode
from rocketlite.protocol.wire.command import RemotingCommand
from tests.support.aio import run
from tests.support.controller_mode.cluster import (
    FAST,
    TOPIC,
    FailoverCluster,
    Writer,
    etcd_binary,
    failover_cluster,
    in_sync_ids,
    read_queue,
    wait_sync_state,
)
from tests.support.ha_harness import Raw
from tests.support.wire import send_command

pytestmark = pytest.mark.timeout(180)

NOT_ENOUGH = "in-sync replicas not enough"


async def _send_until(writer: Writer, addr: str, code: int, timeout: float = 20) -> tuple[str, str | None]:
    """Send to `addr` until one send is answered `code`: (its body, its remark)."""
    deadline = time.monotonic() + timeout
    while True:
        body = f"{writer.prefix}-{writer.n:06d}"
        writer.n += 1
        r = await writer.raw.client.invoke(addr, _send(body), 3.0)
        if r.code == code:
            return body, r.remark
        assert time.monotonic() < deadline, f"never answered {code}; last {r.code} {r.remark}"
        await asyncio.sleep(0.1)


def _send(body: str) -> RemotingCommand:
    return send_command(TOPIC, body.encode(), queue_id=0, group="fo_pg", keys=body)


def test_min_in_sync_replicas_refuses_sync_sends_while_the_set_is_short(tmp_path: Path) -> None:
    etcd_binary()

    async def scenario(c: FailoverCluster) -> None:
        raw = Raw()
        try:
            ctl = c.controller("controller1")
            ns = c.namesrv()
            replicas = {i: c.replica(i, ns, minInSyncReplicas="3") for i in (1, 2, 3)}
            state = await wait_sync_state(raw, ctl, lambda s: in_sync_ids(s) == {1, 2, 3}, what="all in sync")
            master, addr = int(state["masterBrokerId"]), state["masterAddress"]
            writer = Writer(raw, ctl, prefix="isr")
            first, _ = await _send_until(writer, addr, ResponseCode.SUCCESS)

            dead = next(i for i in replicas if i != master)
            replicas[dead].kill9()
            await wait_sync_state(raw, ctl, lambda s: dead not in in_sync_ids(s), 30, "the set shrunk")
            refused, remark = await _send_until(writer, addr, ResponseCode.SYSTEM_ERROR)
            assert remark == NOT_ENOUGH
            # Every send is refused while the set is short, and none of them is stored.
            more = [await writer.raw.client.invoke(addr, _send(f"isr-more-{i}"), 3.0) for i in range(5)]
            assert [(r.code, r.remark) for r in more] == [(ResponseCode.SYSTEM_ERROR, NOT_ENOUGH)] * 5
            stored = await read_queue(raw, addr)
            assert first in stored
            assert refused not in stored and not any(b.startswith("isr-more-") for b in stored), stored

            replicas[dead] = c.restart(replicas[dead])
            await wait_sync_state(raw, ctl, lambda s: in_sync_ids(s) == {1, 2, 3}, 40, "back in the set")
            again, _ = await _send_until(writer, addr, ResponseCode.SUCCESS)
            assert again in await read_queue(raw, addr)
        finally:
            await raw.close()

    with failover_cluster(tmp_path) as c:
        run(scenario(c))


def test_an_async_learner_replicates_but_never_joins_the_set(tmp_path: Path) -> None:
    etcd_binary()
    check_s = int(FAST["checkSyncStateSetPeriod"]) / 1000

    async def learner_holds_all(learner_addr: str, master_addr: str) -> int:
        """The learner's commit log ends where the master's does (awaited); that end."""
        deadline = time.monotonic() + 30
        while True:
            m = int((await raw.runtime(master_addr))["commitLogMaxOffset"])
            mine = int((await raw.runtime(learner_addr))["commitLogMaxOffset"])
            if mine == m > 0:
                return m
            assert time.monotonic() < deadline, f"the learner holds {mine} of {m} bytes"
            await asyncio.sleep(0.1)

    raw = Raw()

    async def scenario(c: FailoverCluster) -> None:
        try:
            ctl = c.controller("controller1")
            ns = c.namesrv()
            replicas = {i: c.replica(i, ns) for i in (1, 2)}
            state = await wait_sync_state(raw, ctl, lambda s: in_sync_ids(s) == {1, 2}, what="1, 2 in set")
            master, addr = int(state["masterBrokerId"]), state["masterAddress"]
            replicas[3] = c.replica(3, ns, asyncLearner="true")
            writer = Writer(raw, ctl, prefix="learn")
            for _ in range(20):
                await _send_until(writer, addr, ResponseCode.SUCCESS)
            await learner_holds_all(replicas[3].addr, addr)
            # Caught up, connected and alive: a plain replica joins within a check or two; the
            # learner is still outside after ten.
            await asyncio.sleep(10 * check_s)
            state = await wait_sync_state(raw, ctl, lambda s: True)
            assert in_sync_ids(state) == {1, 2}, state
            assert (await raw.runtime(addr))["syncStateSet"] == "1,2"

            # The master dies: the other in-sync replica is elected, never the learner, which
            # follows the new master (epoch 2) and receives what it is sent.
            other = 2 if master == 1 else 1
            replicas[master].kill9()
            state = await wait_sync_state(
                raw, ctl, lambda s: s["masterBrokerId"] not in (master, -1), 30, "a new master"
            )
            assert int(state["masterBrokerId"]) == other, state
            new_addr = state["masterAddress"]
            await raw.wait_runtime(replicas[3].addr, "controllerModeEpoch", lambda v: v == "2")
            # (a SYNC send needs the set: the dead master leaves it first)
            await wait_sync_state(raw, ctl, lambda s: in_sync_ids(s) == {other}, 30, "the set shrunk")
            body, _ = await _send_until(writer, new_addr, ResponseCode.SUCCESS)
            await learner_holds_all(replicas[3].addr, new_addr)
            assert body in await read_queue(raw, replicas[3].addr)
            state = await wait_sync_state(raw, ctl, lambda s: True)
            assert 3 not in in_sync_ids(state), state
        finally:
            await raw.close()

    with failover_cluster(tmp_path) as c:
        run(scenario(c))
