"""Real `rocketlite` processes on loopback for the HA tests: name server, master and slave brokers.

Each process is `python -m rocketlite ...` with its own broker.conf, logging to a file under the
test's tmp dir (shown when a wait fails). A raw remoting client (`Raw`) sends, pulls and asks for
runtime info; `segments` / `log_bytes` read a store's commit-log files straight from disk.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from rocketlite.protocol.bodies import KVTable
from rocketlite.protocol.codes import PullSysFlag, RequestCode, ResponseCode
from rocketlite.protocol.command import RemotingCommand, make_request
from rocketlite.protocol.headers import PullMessageRequestHeader, SendMessageRequestHeader
from rocketlite.protocol.record import StoredRecord, decode_records
from rocketlite.remoting.client import RemotingClient

SEGMENT = 256 * 1024  # small commit-log segments: every test rolls a few


def free_port() -> int:
    """A port P with P-2 (VIP channel) and P+1 (HA) free too."""
    for _ in range(200):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        if port < 1030 or port > 65000:
            continue
        ok = True
        for p in (port - 2, port + 1):
            with socket.socket() as probe:
                try:
                    probe.bind(("127.0.0.1", p))
                except OSError:
                    ok = False
        if ok:
            return port
    raise RuntimeError("no free port block")


@dataclass
class Proc:
    name: str
    popen: subprocess.Popen[bytes]
    log_path: Path
    port: int
    store: Path | None = None
    conf: dict[str, str] = field(default_factory=dict)

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.port}"

    def log_tail(self, lines: int = 40) -> str:
        try:
            text = self.log_path.read_text(errors="replace").splitlines()
        except OSError:
            return "(no log)"
        return f"--- {self.name} log ---\n" + "\n".join(text[-lines:])

    def kill9(self) -> None:
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGKILL)
        self.popen.wait(10)

    def stop(self) -> None:
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(30)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait(10)


class Cluster:
    """Starts processes for one test; kills whatever still runs at the end."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.procs: list[Proc] = []

    def _spawn(self, name: str, args: list[str], port: int) -> Proc:
        log_path = self.tmp / f"{name}.log"
        with log_path.open("ab") as log:
            popen = subprocess.Popen(
                [sys.executable, "-m", "rocketlite", "--log-level", "INFO", *args],
                stdout=log,
                stderr=subprocess.STDOUT,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )
        proc = Proc(name, popen, log_path, port)
        self.procs.append(proc)
        self.wait_listening(proc)
        return proc

    def wait_listening(self, proc: Proc, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if proc.popen.poll() is not None:
                raise AssertionError(f"{proc.name} exited with {proc.popen.returncode}\n{proc.log_tail()}")
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", proc.port), 0.5):
                return
            time.sleep(0.05)
        raise AssertionError(f"{proc.name} not listening on {proc.port}\n{proc.log_tail()}")

    def namesrv(self) -> Proc:
        port = free_port()
        conf = self.tmp / "namesrv.conf"
        conf.write_text(f"listenPort={port}\nkvConfigPath={self.tmp / 'kvConfig.json'}\n")
        return self._spawn("namesrv", ["namesrv", "-c", str(conf)], port)

    def broker(self, name: str, role: str, *, namesrv: Proc | None = None, **extra: str) -> Proc:
        port = int(extra.pop("listenPort", 0)) or free_port()
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
        conf = self.tmp / f"{name}.conf"
        conf.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        proc = self._spawn(name, ["broker", "-c", str(conf)], port)
        proc.store, proc.conf = store, props
        return proc

    def restart(self, proc: Proc) -> Proc:
        conf = self.tmp / f"{proc.name}.conf"
        new = self._spawn(proc.name, ["broker", "-c", str(conf)], proc.port)
        new.store, new.conf = proc.store, proc.conf
        return new

    def close(self) -> None:
        for proc in reversed(self.procs):
            proc.stop()


@contextlib.contextmanager
def cluster(tmp: Path) -> Iterator[Cluster]:
    c = Cluster(tmp)
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
        header = SendMessageRequestHeader(
            producer_group="ha_pg", topic=topic, default_topic="TBW102", default_topic_queue_nums=4,
            queue_id=queue_id, sys_flag=0, born_timestamp=int(time.time() * 1000), flag=0,
            properties="", reconsume_times=0,
        )  # fmt: skip
        return await self.call(addr, RequestCode.SEND_MESSAGE_V2, header.to_ext_v2(), body)

    async def pull_all(
        self, addr: str, topic: str, queue_id: int, group: str = "ha_cg"
    ) -> list[StoredRecord]:
        """Every record of a queue, pulled from offset 0 until PULL_NOT_FOUND."""
        out: list[StoredRecord] = []
        offset = 0
        while True:
            ext = PullMessageRequestHeader(
                consumer_group=group, topic=topic, queue_id=queue_id, queue_offset=offset,
                max_msg_nums=32, sys_flag=PullSysFlag.SUBSCRIPTION, commit_offset=0,
                suspend_timeout_millis=0, subscription="*", sub_version=0,
            ).to_ext()  # fmt: skip
            r = await self.call(addr, RequestCode.PULL_MESSAGE, ext)
            if r.code != ResponseCode.SUCCESS:
                assert r.code in (ResponseCode.PULL_NOT_FOUND, ResponseCode.PULL_RETRY_IMMEDIATELY), (
                    r.code,
                    r.remark,
                )
                return out
            out.extend(decode_records(r.body or b""))
            offset = int(r.ext_fields["nextBeginOffset"])

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
