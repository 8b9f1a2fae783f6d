"""Controller mode with real processes on loopback: a 3-member etcd cluster (Debian's etcd-server,
fetched by `make etcd` into .clients/etcd), controllers, a name server and controller-mode brokers.

`etcd_binary()` skips the test when etcd is missing, except with CI=true, where it fails. The
brokers use short timings (a 2 s lease, 300 ms heartbeats) so a failover takes a few seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rocketlite.protocol.codes import ResponseCode
from rocketlite.protocol.wire import fastjson
from rocketlite.protocol.wire.command import RemotingCommand
from rocketlite.protocol.wire.controller import ControllerRequestCode
from tests.support import processes
from tests.support.ha_harness import HaCluster, Proc, Raw
from tests.support.ports import broker_port, free_port
from tests.support.wire import send_command

ROOT = Path(__file__).resolve().parents[2]
ETCD = ROOT / ".clients" / "etcd" / "usr" / "bin" / "etcd"
BROKER_NAME = "broker-fo"
TOPIC = "FailoverTopic"

FAST = {
    "brokerHeartbeatInterval": "300",
    "controllerHeartBeatTimeoutMills": "2000",
    "checkSyncStateSetPeriod": "300",
    "haMaxTimeSlaveNotCatchup": "3000",
    "allAckInSyncStateSet": "true",
    "haSendHeartbeatInterval": "300",
    "haHousekeepingInterval": "3000",
    "syncFlushTimeout": "2000",
}


def etcd_binary() -> Path:
    if ETCD.is_file():
        return ETCD
    why = f"etcd is not installed at {ETCD.relative_to(ROOT)} (run `make etcd`)"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{why}; CI=true requires it")
    pytest.skip(why)


class EtcdCluster:
    """Three etcd members on 127.0.0.1, each with its own data dir and log."""

    def __init__(self, tmp: Path, members: int = 3) -> None:
        binary = etcd_binary()
        self.tmp = tmp
        taken: set[int] = set()
        ports = []
        for _ in range(members):
            client, peer = free_port(taken), 0
            taken.add(client)
            peer = free_port(taken)
            taken.add(peer)
            ports.append((client, peer))
        cluster = ",".join(f"e{i}=http://127.0.0.1:{p}" for i, (_, p) in enumerate(ports))
        self.endpoints = [f"127.0.0.1:{c}" for c, _ in ports]
        self.procs: list[subprocess.Popen[bytes]] = []
        for i, (client, peer) in enumerate(ports):
            log = (tmp / f"etcd{i}.log").open("ab")
            self.procs.append(
                subprocess.Popen(
                    [
                        str(binary), "--name", f"e{i}", "--data-dir", str(tmp / f"etcd{i}"),
                        "--listen-client-urls", f"http://127.0.0.1:{client}",
                        "--advertise-client-urls", f"http://127.0.0.1:{client}",
                        "--listen-peer-urls", f"http://127.0.0.1:{peer}",
                        "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer}",
                        "--initial-cluster", cluster, "--initial-cluster-state", "new",
                        "--heartbeat-interval", "100", "--election-timeout", "1000",
                    ],
                    stdout=log, stderr=subprocess.STDOUT,
                )
            )  # fmt: skip
            log.close()
        for popen, (client, _) in zip(self.procs, ports, strict=True):
            processes.wait_listening(popen, client, "etcd")

    def close(self) -> None:
        for popen in self.procs:
            processes.stop(popen)


class FailoverCluster(HaCluster):
    """etcd + controllers + name server + controller-mode brokers of one group."""

    def __init__(self, tmp: Path) -> None:
        super().__init__(tmp)
        self.etcd = EtcdCluster(tmp)
        self.controllers: list[Proc] = []

    def controller(self, name: str = "controller") -> Proc:
        port = free_port()
        props = {
            "listenPort": str(port),
            "listenHost": "127.0.0.1",
            "etcdEndpoints": ";".join(self.etcd.endpoints),
            "scanNotActiveBrokerInterval": "300",
        }
        conf = processes.write_conf(self.tmp / f"{name}.conf", props)
        proc = self._spawn(name, ["controller", "-c", str(conf)], port)
        self.controllers.append(proc)
        return proc

    @property
    def controller_addr(self) -> str:
        return ";".join(c.addr for c in self.controllers)

    def replica(self, replica_id: int, namesrv: Proc, **extra: str) -> Proc:
        """Broker replica `replica_id` (brokerId) in controller mode; returns once it listens,
        i.e. once the controller gave it a role."""
        props = {
            "brokerName": BROKER_NAME,
            "brokerId": str(replica_id),
            "brokerRole": "SLAVE",
            "enableControllerMode": "true",
            "controllerAddr": self.controller_addr,
            **FAST,
            **extra,
        }
        port = int(props.pop("listenPort", 0)) or broker_port()
        return self.broker(f"replica{replica_id}", "SLAVE", namesrv=namesrv, listenPort=str(port), **props)

    def close(self) -> None:
        super().close()
        self.etcd.close()


@contextlib.contextmanager
def failover_cluster(tmp: Path) -> Iterator[FailoverCluster]:
    c = FailoverCluster(tmp)
    try:
        yield c
    finally:
        c.close()


async def sync_state(raw: Raw, controller: Proc, broker_name: str = BROKER_NAME) -> dict[str, Any]:
    body = fastjson.dumps([broker_name]).encode()
    r = await raw.call(controller.addr, ControllerRequestCode.CONTROLLER_GET_SYNC_STATE_DATA, body=body)
    assert r.code == ResponseCode.SUCCESS, r.remark
    view = fastjson.loads(r.body or b"{}")
    assert isinstance(view, dict)
    return dict(view.get(broker_name) or {})


async def wait_sync_state(
    raw: Raw, controller: Proc, pred: Any, timeout: float = 30.0, what: str = "state"
) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    state: dict[str, Any] = {}
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError, TimeoutError, AssertionError):
            state = await sync_state(raw, controller)
            if state and pred(state):
                return state
        await asyncio.sleep(0.1)
    raise AssertionError(f"{what} never reached; last {state}")


def in_sync_ids(state: dict[str, Any]) -> set[int]:
    return {int(m["brokerId"]) for m in state.get("inSyncReplicas", [])}


class Writer:
    """Sends `fo-<n>` bodies to queue 0 of the current master until stopped; records acks."""

    def __init__(self, raw: Raw, controller: Proc) -> None:
        self.raw, self.controller = raw, controller
        self.acked: list[str] = []
        self.ack_times: list[float] = []
        self.failed = 0
        self.n = 0
        self.stop = asyncio.Event()
        self.last_ok = time.monotonic()
        self.longest_gap = 0.0

    async def run(self) -> None:
        master = ""
        while not self.stop.is_set():
            if not master:
                with contextlib.suppress(AssertionError):
                    state = await wait_sync_state(self.raw, self.controller, lambda s: s["masterAddress"], 5)
                    master = state["masterAddress"]
                if not master:
                    continue
            body = f"fo-{self.n:06d}"
            self.n += 1
            try:
                r = await self.raw.client.invoke(master, _send(body), 3.0)
            except (OSError, TimeoutError):
                master, self.failed = "", self.failed + 1
                await asyncio.sleep(0.05)
                continue
            if r.code == ResponseCode.SUCCESS:
                now = time.monotonic()
                self.longest_gap = max(self.longest_gap, now - self.last_ok)
                self.last_ok = now
                self.acked.append(body)
                self.ack_times.append(now)
            else:
                self.failed += 1
                master = ""  # maybe not the master any more: ask again
                await asyncio.sleep(0.05)

    def first_ack_after(self, t: float) -> float | None:
        """Seconds from `t` to the first acknowledged send after it."""
        return next((a - t for a in self.ack_times if a > t), None)


def _send(body: str) -> RemotingCommand:
    return send_command(TOPIC, body.encode(), queue_id=0, group="fo_pg")


async def read_queue(raw: Raw, addr: str) -> list[str]:
    return [r.body.decode() for r in await raw.pull_all(addr, TOPIC, 0, group="fo_cg")]
