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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from rocketlite.controller.etcd import EtcdClient, EtcdError
from rocketlite.protocol.codes import ResponseCode
from rocketlite.protocol.wire import fastjson
from rocketlite.protocol.wire.command import RemotingCommand
from rocketlite.protocol.wire.controller import ControllerRequestCode
from tests.support import processes
from tests.support.controller_mode.netns import Net
from tests.support.ha_harness import HaCluster, Proc, Raw, msg_offset
from tests.support.ports import broker_port, free_port
from tests.support.wire import send_command

ROOT = Path(__file__).resolve().parents[3]
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
    """etcd members, each with its own data dir and log: on 127.0.0.1 (free ports), or each in a
    network namespace of `net` (node `etcd<i>`, ports 2379/2380 at its address)."""

    def __init__(self, tmp: Path, members: int = 3, net: Net | None = None) -> None:
        self.binary = etcd_binary()
        self.tmp, self.net = tmp, net
        taken: set[int] = set()
        self.addrs: list[tuple[str, int, int]] = []  # host, client port, peer port
        for i in range(members):
            if net is not None:
                self.addrs.append((net.node(f"etcd{i}").ip, 2379, 2380))
                continue
            client = free_port(taken)
            taken.add(client)
            peer = free_port(taken)
            taken.add(peer)
            self.addrs.append(("127.0.0.1", client, peer))
        self.cluster = ",".join(f"e{i}=http://{h}:{p}" for i, (h, _, p) in enumerate(self.addrs))
        self.endpoints = [f"{h}:{c}" for h, c, _ in self.addrs]
        self.procs: list[subprocess.Popen[bytes]] = [self._start(i, "new") for i in range(members)]
        for i in range(members):
            self.wait(i)

    def _start(self, i: int, state: str) -> subprocess.Popen[bytes]:
        host, client, peer = self.addrs[i]
        prefix = self.net.exec_args(f"etcd{i}") if self.net is not None else []
        with (self.tmp / f"etcd{i}.log").open("ab") as log:
            return subprocess.Popen(
                [
                    *prefix, str(self.binary), "--name", f"e{i}", "--data-dir", str(self.tmp / f"etcd{i}"),
                    "--listen-client-urls", f"http://{host}:{client}",
                    "--advertise-client-urls", f"http://{host}:{client}",
                    "--listen-peer-urls", f"http://{host}:{peer}",
                    "--initial-advertise-peer-urls", f"http://{host}:{peer}",
                    "--initial-cluster", self.cluster, "--initial-cluster-state", state,
                    "--heartbeat-interval", "100", "--election-timeout", "1000",
                ],
                stdout=log, stderr=subprocess.STDOUT,
            )  # fmt: skip

    def wait(self, i: int) -> None:
        host, client, _ = self.addrs[i]
        processes.wait_listening(self.procs[i], client, f"etcd{i}", host=host)

    def leader(self) -> int:
        """The index of the member that leads now (asked of the members that answer)."""
        ids: dict[int, int] = {}
        leader = 0
        for i, endpoint in enumerate(self.endpoints):
            if self.procs[i].poll() is not None:
                continue
            with contextlib.suppress(EtcdError):
                status = EtcdClient([endpoint], timeout=2.0).status()
                ids[int(status["header"]["member_id"])] = i
                leader = int(status.get("leader", 0)) or leader
        if leader not in ids:
            raise AssertionError(f"no etcd leader among {ids}")
        return ids[leader]

    def kill9(self, i: int) -> None:
        processes.kill9(self.procs[i])

    def restart(self, i: int) -> None:
        self.procs[i] = self._start(i, "existing")
        self.wait(i)

    def close(self) -> None:
        for popen in self.procs:
            processes.stop(popen)


class FailoverCluster(HaCluster):
    """etcd + controllers + name server + controller-mode brokers of one group; with `net`, every
    process in a network namespace of its own (node = the process's name)."""

    def __init__(self, tmp: Path, net: Net | None = None, *, fast: bool = True) -> None:
        super().__init__(tmp)
        self.net, self.fast = net, fast
        self.etcd = EtcdCluster(tmp, net=net)
        self.controllers: list[Proc] = []

    def where(self, name: str) -> tuple[str, list[str]]:
        if self.net is None:
            return super().where(name)
        return self.net.node(name).ip, self.net.exec_args(name)

    def _host_port(self, name: str, fixed: int) -> tuple[str, int]:
        """Where process `name` listens: its namespace's address and a fixed port, or a free
        port on loopback."""
        host, _ = self.where(name)
        return (host, fixed) if self.net is not None else (host, broker_port())

    def controller(self, name: str = "controller") -> Proc:
        host, port = self._host_port(name, 9878)
        props = {
            "listenPort": str(port),
            "listenHost": host,
            "controllerAddr": host,
            "etcdEndpoints": ";".join(self.etcd.endpoints),
        }
        if self.fast:
            props["scanNotActiveBrokerInterval"] = "300"
        conf = processes.write_conf(self.tmp / f"{name}.conf", props)
        proc = self._spawn(name, ["controller", "-c", str(conf)], port)
        self.controllers.append(proc)
        return proc

    def restart_controller(self, proc: Proc) -> Proc:
        new = self._spawn(proc.name, ["controller", "-c", str(self.tmp / f"{proc.name}.conf")], proc.port)
        self.controllers[self.controllers.index(proc)] = new
        return new

    @property
    def controller_addr(self) -> str:
        return ";".join(c.addr for c in self.controllers)

    def namesrv(self) -> Proc:
        if self.net is None:
            return super().namesrv()
        host, port = self._host_port("namesrv", 9876)
        props = {"listenPort": str(port), "listenHost": host, "kvConfigPath": str(self.tmp / "kvConfig.json")}
        conf = processes.write_conf(self.tmp / "namesrv.conf", props)
        return self._spawn("namesrv", ["namesrv", "-c", str(conf)], port)

    def namesrv_with_controller(self) -> Proc:
        """A name server hosting the controller (`enableControllerInNamesrv=true`, loopback): it
        counts as this cluster's controller, so replicas name it in their controllerAddr."""
        port = broker_port()
        props = {
            "listenPort": str(port), "listenHost": "127.0.0.1",
            "kvConfigPath": str(self.tmp / "kvConfig.json"), "enableControllerInNamesrv": "true",
            "etcdEndpoints": ";".join(self.etcd.endpoints),
            "scanNotActiveBrokerInterval": "300",
        }  # fmt: skip
        conf = processes.write_conf(self.tmp / "namesrv.conf", props)
        proc = self._spawn("namesrv", ["namesrv", "-c", str(conf)], port)
        self.controllers.append(proc)
        return proc

    def replica(
        self, replica_id: int, namesrv: Proc, env: dict[str, str] | None = None, **extra: str
    ) -> Proc:
        """Broker replica `replica_id` (brokerId) in controller mode; returns once it listens,
        i.e. once the controller gave it a role. `env`: for its process (libfaketime)."""
        name = f"replica{replica_id}"
        host, port = self._host_port(name, 10911)
        props = {
            "brokerName": BROKER_NAME,
            "brokerId": str(replica_id),
            "brokerRole": "SLAVE",
            "enableControllerMode": "true",
            "controllerAddr": self.controller_addr,
            "listenHost": host,
            "brokerIP1": host,
            **(FAST if self.fast else {"allAckInSyncStateSet": "true"}),
            **extra,
        }
        port = int(props.pop("listenPort", 0)) or port
        return self.broker(name, "SLAVE", namesrv=namesrv, env=env, listenPort=str(port), **props)

    def close(self) -> None:
        super().close()
        self.etcd.close()


@contextlib.contextmanager
def failover_cluster(tmp: Path, net: Net | None = None) -> Iterator[FailoverCluster]:
    c = FailoverCluster(tmp, net)
    try:
        yield c
    finally:
        c.close()


Controllers = Proc | list[Proc]


async def sync_state(raw: Raw, controllers: Controllers, broker_name: str = BROKER_NAME) -> dict[str, Any]:
    """The group as the first controller that answers reports it (GET_SYNC_STATE_DATA); a list of
    controllers is reordered in place, the one that answered first (a controller cut from etcd's
    majority takes a second to say nothing)."""
    body = fastjson.dumps([broker_name]).encode()
    last: Exception | None = None
    for controller in list(controllers) if isinstance(controllers, list) else [controllers]:
        try:
            r = await raw.call(
                controller.addr, ControllerRequestCode.CONTROLLER_GET_SYNC_STATE_DATA, body=body, timeout=1.0
            )
        except (OSError, TimeoutError) as exc:
            last = exc
            continue
        if r.code != ResponseCode.SUCCESS:
            last = AssertionError(r.remark)
            continue
        view = fastjson.loads(r.body or b"{}")
        assert isinstance(view, dict)
        if isinstance(controllers, list) and controllers[0] is not controller:
            controllers.remove(controller)
            controllers.insert(0, controller)
        return dict(view.get(broker_name) or {})
    raise AssertionError(f"no controller answered: {last}")


async def wait_sync_state(
    raw: Raw, controllers: Controllers, pred: Any, timeout: float = 30.0, what: str = "state"
) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    state: dict[str, Any] = {}
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError, TimeoutError, AssertionError):
            state = await sync_state(raw, controllers)
            if state and pred(state):
                return state
        await asyncio.sleep(0.1)
    raise AssertionError(f"{what} never reached; last {state}")


def in_sync_ids(state: dict[str, Any]) -> set[int]:
    return {int(m["brokerId"]) for m in state.get("inSyncReplicas", [])}


@dataclass(frozen=True, slots=True)
class Ack:
    """One acknowledged send: its unique body (also its key), when, from whom, where it was stored."""

    body: str
    queue_id: int
    at: float  # time.monotonic() when SEND_OK arrived
    addr: str
    offset: int  # commit-log offset (from the msgId)


class Writer:
    """Sends SYNC messages with unique bodies and keys (`<prefix>-<n>`) to one queue of whichever
    broker the controllers name master, one at a time, until stopped; records every ack."""

    def __init__(
        self, raw: Raw, controllers: Controllers, queue_id: int = 0, prefix: str = "fo", pace: float = 0.0
    ) -> None:
        self.raw, self.queue_id, self.prefix = raw, queue_id, prefix
        self.controllers = list(controllers) if isinstance(controllers, list) else controllers
        self.pace = pace  # seconds between sends
        self.acks: list[Ack] = []
        self.acked: list[str] = []
        self.ack_times: list[float] = []
        self.failed = 0
        self.n = 0
        self.stop = asyncio.Event()
        self.last_ok = time.monotonic()
        self.longest_gap = 0.0
        self.master = ""

    async def run(self) -> None:
        while not self.stop.is_set():
            if not self.master:
                with contextlib.suppress(AssertionError):
                    state = await wait_sync_state(self.raw, self.controllers, lambda s: s["masterAddress"], 5)
                    self.master = state["masterAddress"]
                if not self.master:
                    continue
            await self.send_one(self.master)
            if self.pace:
                await asyncio.sleep(self.pace)

    async def send_one(self, addr: str) -> bool:
        body = f"{self.prefix}-{self.n:06d}"
        self.n += 1
        try:
            r = await self.raw.client.invoke(addr, _send(body, self.queue_id), 3.0)
        except (OSError, TimeoutError):
            self.master, self.failed = "", self.failed + 1
            await asyncio.sleep(0.05)
            return False
        if r.code != ResponseCode.SUCCESS:
            self.failed += 1
            self.master = ""  # maybe not the master any more: ask again
            await asyncio.sleep(0.05)
            return False
        now = time.monotonic()
        self.longest_gap = max(self.longest_gap, now - self.last_ok)
        self.last_ok = now
        self.acked.append(body)
        self.ack_times.append(now)
        self.acks.append(Ack(body, self.queue_id, now, addr, msg_offset(r.ext_fields["msgId"])))
        return True

    def first_ack_after(self, t: float) -> float | None:
        """Seconds from `t` to the first acknowledged send after it."""
        return next((a - t for a in self.ack_times if a > t), None)


def _send(body: str, queue_id: int = 0) -> RemotingCommand:
    return send_command(TOPIC, body.encode(), queue_id=queue_id, group="fo_pg", keys=body)


async def read_queue(raw: Raw, addr: str, queue_id: int = 0) -> list[str]:
    return [r.body.decode() for r in await raw.pull_all(addr, TOPIC, queue_id, group="fo_cg")]
