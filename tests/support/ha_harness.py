"""Real `rocketlite` processes on loopback for the HA tests: name server, master and slave brokers.

Each process is `python -m rocketlite ...` (tests.support.processes) with its own broker.conf,
logging to a file under the test's tmp dir (shown when a wait fails). A raw remoting client
(`Raw`) sends, pulls and asks for runtime info; `segments` / `log_bytes` read a store's commit-log
files straight from disk.
"""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from rocketlite.protocol.bodies.lists import KVTable
from rocketlite.protocol.codes import RequestCode, ResponseCode
from rocketlite.protocol.formats.record import StoredRecord
from rocketlite.protocol.requests.pull import PullStatus
from rocketlite.protocol.wire.command import RemotingCommand, make_request
from rocketlite.remoting.client import RemotingClient
from tests.support import processes
from tests.support.ports import broker_port
from tests.support.wire import pull_until_end, send_command

SEGMENT = 256 * 1024  # small commit-log segments: every test rolls a few


@dataclass
class Proc:
    name: str
    popen: subprocess.Popen[bytes]
    log_path: Path
    port: int
    store: Path | None = None
    conf: dict[str, str] = field(default_factory=dict)
    host: str = "127.0.0.1"

    @property
    def addr(self) -> str:
        return f"{self.host}:{self.port}"

    def log_tail(self, lines: int = 40) -> str:
        try:
            text = self.log_path.read_text(errors="replace").splitlines()
        except OSError:
            return "(no log)"
        return f"--- {self.name} log ---\n" + "\n".join(text[-lines:])

    def kill9(self) -> None:
        processes.kill9(self.popen)

    def stop(self) -> None:
        processes.stop(self.popen)


class HaCluster:
    """Starts a name server and master/slave brokers for one test; stops whatever still runs at the end."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.procs: list[Proc] = []

    def _spawn(self, name: str, args: list[str], port: int, env: dict[str, str] | None = None) -> Proc:
        log_path = self.tmp / f"{name}.log"
        host, prefix = self.where(name)
        proc = Proc(name, processes.spawn(args, log_path, env=env, prefix=prefix), log_path, port, host=host)
        self.procs.append(proc)
        self.wait_listening(proc)
        return proc

    def where(self, name: str) -> tuple[str, list[str]]:
        """The host process `name` listens on and the argv prefix that starts it there (a
        subclass puts each process in a network namespace of its own)."""
        del name
        return "127.0.0.1", []

    def wait_listening(self, proc: Proc, timeout: float = 30.0) -> None:
        try:
            processes.wait_listening(proc.popen, proc.port, proc.name, timeout, host=proc.host)
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n{proc.log_tail()}") from None

    def namesrv(self) -> Proc:
        port = broker_port()
        props = {"listenPort": str(port), "kvConfigPath": str(self.tmp / "kvConfig.json")}
        conf = processes.write_conf(self.tmp / "namesrv.conf", props)
        return self._spawn("namesrv", ["namesrv", "-c", str(conf)], port)

    def broker(self, name: str, role: str, *, namesrv: Proc | None = None, env: dict[str, str] | None = None,
               **extra: str) -> Proc:  # fmt: skip
        port = int(extra.pop("listenPort", 0)) or broker_port()
        store = self.tmp / name
        props = {
            "brokerClusterName": "HaCluster",
            "brokerName": "broker-ha",
            "brokerId": "0" if role != "SLAVE" else "1",
            "brokerRole": role,
            "listenPort": str(port),
            "listenHost": "127.0.0.1",
            "brokerIP1": "127.0.0.1",
            "storePathRootDir": str(store),
            "mapedFileSizeCommitLog": str(SEGMENT),
            "mapedFileSizeConsumeQueue": str(1000 * 20),
            "maxHashSlotNum": "1000",
            "maxIndexNum": "4000",
            "defaultTopicQueueNums": "4",
            "syncFlushTimeout": "3000",
            "haSendHeartbeatInterval": "1000",
            "haHousekeepingInterval": "5000",
        }
        if namesrv is not None:
            props["namesrvAddr"] = namesrv.addr
        props.update(extra)
        conf = processes.write_conf(self.tmp / f"{name}.conf", props)
        proc = self._spawn(name, ["broker", "-c", str(conf)], port, env)
        proc.store, proc.conf = store, props
        return proc

    def restart(self, proc: Proc, env: dict[str, str] | None = None) -> Proc:
        conf = self.tmp / f"{proc.name}.conf"
        new = self._spawn(proc.name, ["broker", "-c", str(conf)], proc.port, env)
        new.store, new.conf = proc.store, proc.conf
        return new

    def close(self) -> None:
        for proc in reversed(self.procs):
            proc.stop()


@contextlib.contextmanager
def ha_cluster(tmp: Path) -> Iterator[HaCluster]:
    """An `HaCluster` whose processes are stopped when the block ends."""
    c = HaCluster(tmp)
    try:
        yield c
    finally:
        c.close()


# -- a raw client ----------------------------------------------------------------------------------
class Raw:
    """Remoting requests to brokers by address."""

    def __init__(self) -> None:
        self.client = RemotingClient()

    async def call(self, addr: str, code: int, ext: dict[str, str] | None = None,
                   body: bytes | None = None, timeout: float = 10.0) -> RemotingCommand:  # fmt: skip
        return await self.client.invoke(addr, make_request(code, ext or {}, body), timeout)

    async def send(self, addr: str, topic: str, body: bytes, *, queue_id: int = -1) -> RemotingCommand:
        return await self.client.invoke(
            addr, send_command(topic, body, queue_id=queue_id, group="ha_pg"), 10.0
        )

    async def pull_all(
        self, addr: str, topic: str, queue_id: int, group: str = "ha_cg"
    ) -> list[StoredRecord]:
        """Every record of a queue, pulled from offset 0 until PULL_NOT_FOUND."""
        records, end = await pull_until_end(self.client, addr, topic, queue_id, group=group)
        assert end.status in (PullStatus.NO_NEW_MSG, PullStatus.NO_MATCHED_MSG), end
        return records

    async def runtime(self, addr: str) -> dict[str, str]:
        r = await self.call(addr, RequestCode.GET_BROKER_RUNTIME_INFO)
        assert r.code == ResponseCode.SUCCESS, r.remark
        return dict(KVTable.from_json(r.body or b"{}").table)

    async def wait_runtime(self, addr: str, key: str, pred: object, timeout: float = 20.0) -> dict[str, str]:
        assert callable(pred)
        deadline = time.monotonic() + timeout
        info: dict[str, str] = {}
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError, TimeoutError):
                info = await self.runtime(addr)
                if key in info and pred(info[key]):
                    return info
            await asyncio.sleep(0.1)
        raise AssertionError(f"{addr}: {key} never satisfied; last runtime info {info.get(key)!r}")

    async def close(self) -> None:
        await self.client.close()


def segments(store: Path) -> list[Path]:
    return sorted(p for p in (store / "commitlog").iterdir() if p.name.isdigit())


def log_bytes(store: Path, offset: int, size: int) -> bytes:
    """`size` bytes of a store's commit log at `offset`, read from its segment files on disk."""
    seg = offset - offset % SEGMENT
    path = store / "commitlog" / f"{seg:020d}"
    with path.open("rb") as f:
        f.seek(offset - seg)
        return f.read(size)


def msg_offset(msg_id: str) -> int:
    """The commit-log offset inside a msgId (the last 16 hex digits)."""
    return int(msg_id[-16:], 16)
