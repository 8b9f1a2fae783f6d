"""Controller mode end to end: 3 etcd members, 2 controllers, a name server and 3 broker replicas
as processes on loopback (tests.support.controller_mode.cluster).

The writer sends SYNC messages with unique bodies to whichever broker the controller names
master, recording every SUCCESS; the master is killed with SIGKILL mid-stream; after the old
master is back (as a slave) every acknowledged message must be readable from the new master,
once each and in order within its queue.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import time
from pathlib import Path

import pytest

from rocketlite.protocol.codes import RequestCode, ResponseCode
from rocketlite.protocol.formats.epoch_file import decode as decode_epochs
from rocketlite.protocol.wire import fastjson
from rocketlite.protocol.wire.controller import ControllerRequestCode, EpochEntryCache
from tests.support import processes
from tests.support.aio import run
from tests.support.controller_mode.cluster import (
    BROKER_NAME,
    TOPIC,
    FailoverCluster,
    Writer,
    failover_cluster,
    in_sync_ids,
    read_queue,
    wait_sync_state,
)
from tests.support.ha_harness import Raw

pytestmark = pytest.mark.timeout(240)


def admin(*args: str) -> str:
    """`rocketlite admin ARGS`, its output (it must succeed)."""
    result = subprocess.run(
        [*processes.ROCKETLITE, "admin", *args], capture_output=True, text=True, env=processes.child_env(),
        timeout=60, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def test_kill_the_master_nothing_acknowledged_is_lost(tmp_path: Path) -> None:
    async def scenario(c: FailoverCluster) -> None:
        raw = Raw()
        try:
            ctl = c.controller("controller1")
            c.controller("controller2")
            ns = c.namesrv()
            replicas = {i: c.replica(i, ns) for i in (1, 2, 3)}
            state = await wait_sync_state(raw, ctl, lambda s: in_sync_ids(s) == {1, 2, 3}, what="all in sync")
            first_master = int(state["masterBrokerId"])
            assert state["masterEpoch"] == 1

            writer = Writer(raw, ctl)
            task = asyncio.create_task(writer.run())
            while len(writer.acked) < 200:
                await asyncio.sleep(0.05)
            killed_at = time.monotonic()
            replicas[first_master].kill9()
            acked_before = len(writer.acked)
            state = await wait_sync_state(
                raw, ctl, lambda s: s["masterBrokerId"] not in (first_master, -1), 30, "a new master"
            )
            while len(writer.acked) < acked_before + 200:
                await asyncio.sleep(0.05)
                assert time.monotonic() - killed_at < 60, "no writes through the new master"
            failover_s = writer.longest_gap
            new_master = int(state["masterBrokerId"])
            assert state["masterEpoch"] == 2

            replicas[first_master] = c.restart(replicas[first_master])  # comes back as a slave
            await wait_sync_state(
                raw, ctl, lambda s: in_sync_ids(s) == {1, 2, 3}, 40, "old master back in sync"
            )
            writer.stop.set()
            await task

            final = await wait_sync_state(raw, ctl, lambda s: s["masterBrokerId"] == new_master)
            read = await read_queue(raw, final["masterAddress"])
            lost = sorted(set(writer.acked) - set(read))
            assert not lost, f"acknowledged and lost: {lost[:10]} ({len(lost)})"
            assert len(read) == len(set(read)), "duplicates in the queue"
            positions = [read.index(b) for b in writer.acked]
            assert positions == sorted(positions), "acknowledged messages out of order"
            # The old master is a slave of epoch 2 and holds exactly the new master's queue.
            old = replicas[first_master]
            assert old.store is not None
            epochs = decode_epochs((old.store / "epochFileCheckpoint").read_text())
            assert [e.epoch for e in epochs] == [1, 2]
            r = await raw.call(old.addr, ControllerRequestCode.GET_BROKER_EPOCH_CACHE)
            assert [e for e, _ in EpochEntryCache.decode(r.body).epochs] == [1, 2]
            # The operations verbs, as an operator runs them (--json: the same data, parsed here).
            view = json.loads(admin("getSyncStateSet", "-a", ctl.addr, "-b", BROKER_NAME, "--json"))
            assert (view["masterBrokerId"], view["masterEpoch"]) == (new_master, 2), view
            assert {m["brokerId"] for m in view["inSyncReplicas"]} == {1, 2, 3}, view
            meta = json.loads(admin("getControllerMetaData", "-a", ctl.addr, "--json"))
            assert meta["IsLeader"] is True, meta
            epochs = json.loads(admin("getBrokerEpoch", "-n", ns.addr, "-b", BROKER_NAME, "--json"))
            for broker in epochs["brokers"].values():
                assert [e["epoch"] for e in broker["epochs"]] == [1, 2], epochs
            print(f"failover: longest gap between acks {failover_s:.2f} s; acked {len(writer.acked)}, "
                  f"failed sends {writer.failed}")  # fmt: skip
        finally:
            await raw.close()

    with failover_cluster(tmp_path) as c:
        run(scenario(c))


def test_the_controller_inside_the_name_server(tmp_path: Path) -> None:
    """`enableControllerInNamesrv=true`: the name server's port is the controller too (the
    replicas' controllerAddr and namesrvAddr are one address). Kill -9 the master of two: the
    other takes over, the name server's route names it brokerId 0, nothing acknowledged is lost."""

    async def scenario(c: FailoverCluster) -> None:
        raw = Raw()
        try:
            ns = c.namesrv_with_controller()
            replicas = {i: c.replica(i, ns) for i in (1, 2)}
            state = await wait_sync_state(raw, ns, lambda s: in_sync_ids(s) == {1, 2}, what="both in sync")
            first = int(state["masterBrokerId"])
            writer = Writer(raw, ns)
            task = asyncio.create_task(writer.run())
            while len(writer.acked) < 100:
                await asyncio.sleep(0.05)
            killed_at = time.monotonic()
            replicas[first].kill9()
            state = await wait_sync_state(
                raw, ns, lambda s: s["masterBrokerId"] not in (first, -1), 30, "a new master"
            )
            acked_before = len(writer.acked)
            while len(writer.acked) < acked_before + 100:
                await asyncio.sleep(0.05)
                assert time.monotonic() - killed_at < 60, "no writes through the new master"
            writer.stop.set()
            await task
            read = await read_queue(raw, state["masterAddress"])
            lost = sorted(set(writer.acked) - set(read))
            assert not lost, f"acknowledged and lost: {lost[:10]} ({len(lost)})"
            deadline = time.monotonic() + 30
            while True:  # the new master registered itself as brokerId 0 of the group
                r = await raw.call(ns.addr, RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": TOPIC})
                route = fastjson.loads(r.body or b"{}") if r.code == ResponseCode.SUCCESS else {}
                assert isinstance(route, dict)
                addrs = [b["brokerAddrs"] for b in route.get("brokerDatas", [])]
                if addrs and addrs[0].get("0") == state["masterAddress"]:
                    break
                assert time.monotonic() < deadline, f"the route never named the new master: {route}"
                await asyncio.sleep(0.1)
        finally:
            await raw.close()

    with failover_cluster(tmp_path) as c:
        run(scenario(c))
