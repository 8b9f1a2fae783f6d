"""Server child processes of the broker benchmark: a `Child` that dies with this process, and our
broker (`python -m rocketlite broker`) on a fresh temporary store."""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Final

from tests.support.ports import broker_port

from bench.broker.config import CLK_TCK, CONNECTIONS, SEGMENT, out

# -- child processes ----------------------------------------------------------------------------
# `setpriv --pdeathsig TERM` (util-linux) sets the death signal and execs the server, so the child
# gets SIGTERM if this benchmark dies without cleaning up. It replaces a `preexec_fn`, which made
# CPython fork instead of vfork: grpc5_probe.py forks brokers after its in-process probe ran a gRPC
# endpoint, and a fork while grpc's threads run can crash the child before its exec (see
# rocketlite/protocol/proto/__init__.py). Without setpriv the server just lacks the death signal.
_DIE_WITH_PARENT: Final = ["setpriv", "--pdeathsig", "TERM", "--"] if shutil.which("setpriv") else []


class Child:
    """A server process in its own session (a Ctrl-C reaches us, and we stop it in order)."""

    def __init__(self, name: str, argv: list[str], log_path: Path) -> None:
        self.name = name
        self.log_path = log_path
        self._log = log_path.open("wb")
        self.proc: subprocess.Popen[bytes] = subprocess.Popen(
            [*_DIE_WITH_PARENT, *argv],
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        CHILDREN.append(self)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def cpu_seconds(self) -> float:
        """User + system CPU of the process (all its threads) so far."""
        try:
            stat = Path(f"/proc/{self.pid}/stat").read_text()
        except OSError:
            return math.nan
        fields = stat.rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLK_TCK  # utime, stime (fields 14, 15)

    def log_tail(self, lines: int = 20) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def stop(self, timeout: float = 20.0) -> None:
        """SIGTERM (a graceful shutdown), SIGKILL if it is not gone after `timeout` seconds."""
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                out(f"({self.name} did not stop in {timeout:.0f} s: killed)")
                with contextlib.suppress(ProcessLookupError):
                    self.proc.kill()
                self.proc.wait()
        self._log.close()
        if self in CHILDREN:
            CHILDREN.remove(self)


CHILDREN: list[Child] = []


def stop_all_children() -> None:
    for child in reversed(list(CHILDREN)):
        try:
            child.stop()
        except Exception as exc:  # keep stopping the others
            print(f"stopping {child.name} failed: {exc}", file=sys.stderr)


def disk_usage(path: Path) -> int:
    """Allocated bytes under `path` (sparse files count what they use)."""
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.lstat(Path(root) / name).st_blocks * 512
    return total


# -- our broker ---------------------------------------------------------------------------------
def write_broker_conf(
    path: Path, store: Path, port: int, sync: bool, extra: dict[str, str] | None = None
) -> None:
    props = {
        "brokerClusterName": "BenchCluster",
        "brokerName": "bench-broker",
        "brokerId": "0",
        "brokerRole": "ASYNC_MASTER",
        "listenPort": str(port),
        "listenHost": "127.0.0.1",
        "storePathRootDir": str(store),
        "flushDiskType": "SYNC_FLUSH" if sync else "ASYNC_FLUSH",
        "mapedFileSizeCommitLog": str(SEGMENT),
        "autoCreateTopicEnable": "true",
        "autoCreateSubscriptionGroup": "true",
        "defaultTopicQueueNums": str(CONNECTIONS),
        "grpcServerPort": "0",  # the broker bench measures the 4.x remoting side only
        **(extra or {}),
    }
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()), encoding="utf-8")


def start_broker(
    work: Path, sync: bool, avoid: set[int], extra: dict[str, str] | None = None
) -> tuple[Child, int]:
    """Our broker on a fresh store under `work`; `extra` adds or overrides broker.conf keys."""
    port = broker_port(avoid)  # listenPort, VIP (P-2) and HA (P+1) all free
    conf = work / "broker.conf"
    write_broker_conf(conf, work / "store", port, sync, extra)
    argv = [sys.executable, "-m", "rocketlite", "--log-level", "INFO", "broker", "-c", str(conf)]
    return Child("broker", argv, work / "broker.log"), port


async def wait_listening(child: Child, port: int, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        if not child.alive():
            raise RuntimeError(f"{child.name} exited ({child.proc.returncode}):\n{child.log_tail()}")
        try:
            _r, w = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{child.name} not listening on {port} after {timeout:.0f} s") from None
            await asyncio.sleep(0.05)
            continue
        w.close()
        with contextlib.suppress(OSError):
            await w.wait_closed()
        return
