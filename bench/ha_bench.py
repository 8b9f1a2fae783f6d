"""Replication cost: SYNC_MASTER vs ASYNC_MASTER vs a single SYNC_FLUSH broker, in one run.

    .venv/bin/python bench/ha_bench.py              # full run (~1.5 minutes)
    .venv/bin/python bench/ha_bench.py --quick      # small run (< 30 s)

Every setup runs as separate processes (``python -m rocketlite broker -c broker.conf``) on fresh
temporary stores under --dir (default: the current directory's filesystem; removed at the end), on
127.0.0.1, no name server (the slave is given ``haMasterAddress``):

* ``single SYNC_FLUSH``: one ASYNC_MASTER broker with flushDiskType=SYNC_FLUSH (group commit), no
  slave — the durability a single machine can give;
* ``ASYNC_MASTER + slave``: ASYNC_FLUSH master, the slave replicates in the background;
* ``SYNC_MASTER + slave``: ASYNC_FLUSH master; every send is answered once the slave holds it;
* ``SYNC_MASTER+SYNC_FLUSH + slave``: both: on the master's disk and in the slave's memory.

Load (this process, one asyncio loop, uvloop when installed): --conns connections, each keeping
--window SEND_MESSAGE_V2 requests of --size bytes in flight for --seconds, all on one topic with a
queue per connection. Latency = answer time - send time of every request; msgs/s = acknowledged
messages / wall time. Then one connection sends --seq requests one at a time (no pipelining): the
latency of a lone producer. After each setup with a slave, the benchmark waits for the slave to
catch up and checks that the two commit logs are byte-identical.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import filecmp
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Final

if __package__ in (None, ""):  # run as a script (`python bench/ha_bench.py`): import tests.support
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support.ports import broker_port

from rocketlite.protocol.bodies.lists import KVTable
from rocketlite.protocol.codes import RequestCode, ResponseCode
from rocketlite.protocol.wire.command import RemotingCommand, make_request
from rocketlite.protocol.wire.headers import SendMessageRequestHeader
from rocketlite.remoting.client import RemotingClient
from rocketlite.remoting.connection import Connection, RequestTable, next_opaque
from rocketlite.runtime import new_event_loop

TOPIC: Final = "HaBench"
SEGMENT: Final = 128 * 1024 * 1024


@dataclass(frozen=True)
class Setup:
    name: str
    role: str
    sync_flush: bool
    slave: bool


SETUPS: Final = (
    Setup("single SYNC_FLUSH", "ASYNC_MASTER", True, False),
    Setup("ASYNC_MASTER + slave", "ASYNC_MASTER", False, True),
    Setup("SYNC_MASTER + slave", "SYNC_MASTER", False, True),
    Setup("SYNC_MASTER+SYNC_FLUSH + slave", "SYNC_MASTER", True, True),
)


def out(text: str = "") -> None:
    print(text, flush=True)


def percentile(values: list[float], q: float) -> float:
    if not values:
        return math.nan
    return values[min(len(values) - 1, max(0, math.ceil(q * len(values)) - 1))]


class Broker:
    """One `rocketlite broker` process."""

    def __init__(self, work: Path, name: str, setup: Setup, *, master_port: int | None = None) -> None:
        self.port = broker_port()
        self.store = work / name
        role = "SLAVE" if master_port is not None else setup.role
        props = {
            "brokerName": "bench-ha",
            "brokerId": "1" if master_port is not None else "0",
            "brokerRole": role,
            "listenPort": str(self.port),
            "listenHost": "127.0.0.1",
            "brokerIP1": "127.0.0.1",
            "storePathRootDir": str(self.store),
            "flushDiskType": "SYNC_FLUSH" if setup.sync_flush else "ASYNC_FLUSH",
            "mapedFileSizeCommitLog": str(SEGMENT),
            "defaultTopicQueueNums": "16",
        }
        if master_port is not None:
            props["haMasterAddress"] = f"127.0.0.1:{master_port + 1}"
        conf = work / f"{name}.conf"
        conf.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        self.log = (work / f"{name}.log").open("wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "rocketlite", "broker", "-c", str(conf)],
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.port}"

    async def ready(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"broker exited with {self.proc.returncode}; see {self.log.name}")
            try:
                _r, w = await asyncio.open_connection("127.0.0.1", self.port)
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"broker not listening; see {self.log.name}") from None
                await asyncio.sleep(0.05)
                continue
            w.close()
            return

    def cpu_seconds(self) -> float:
        try:
            fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return math.nan
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


def send_request(qid: int, body: bytes) -> RemotingCommand:
    header = SendMessageRequestHeader(
        producer_group="ha_bench_pg", topic=TOPIC, default_topic="TBW102", default_topic_queue_nums=16,
        queue_id=qid, sys_flag=0, born_timestamp=int(time.time() * 1000), flag=0,
        properties="WAIT\x01true", reconsume_times=0,
    )  # fmt: skip
    return make_request(RequestCode.SEND_MESSAGE_V2, header.to_ext_v2(), body)


@dataclass
class Result:
    msgs: int
    seconds: float
    latencies_ms: list[float]
    seq_latencies_ms: list[float]
    server_cpu: float
    slave_cpu: float

    @property
    def rate(self) -> float:
        return self.msgs / self.seconds if self.seconds else math.nan


def submit(conn: Connection, cmd: RemotingCommand) -> asyncio.Future[RemotingCommand]:
    """Send without a per-request timeout task (the load is bounded as a whole)."""
    assert conn.loop is not None
    cmd.opaque = next_opaque()
    fut: asyncio.Future[RemotingCommand] = conn.loop.create_future()
    conn.pending[cmd.opaque] = fut
    conn.send(cmd)
    return fut


async def load(port: int, args: argparse.Namespace) -> tuple[int, float, list[float]]:
    """--window requests in flight on each of --conns connections for --seconds; every answer (a
    done callback, no task per request) sends the next one."""
    loop = asyncio.get_running_loop()
    body = os.urandom(args.size // 2).hex().encode()[: args.size]
    conns: list[Connection] = []
    for _ in range(args.conns):
        _t, conn = await loop.create_connection(lambda: Connection(RequestTable()), "127.0.0.1", port)
        conns.append(conn)
    try:
        for conn in conns:  # warm up (topic auto-created) before the clock starts
            r = await submit(conn, send_request(0, body))
            if r.code != ResponseCode.SUCCESS:
                raise RuntimeError(f"warm-up send: code {r.code} {r.remark}")
        latencies: list[float] = []
        failures: list[str] = []
        acked = [0]
        inflight = [0]
        done = loop.create_future()
        began = time.perf_counter()
        deadline = began + args.seconds

        def fire(i: int) -> None:
            t0 = time.perf_counter()
            inflight[0] += 1
            submit(conns[i], send_request(i, body)).add_done_callback(lambda f: answered(i, t0, f))

        def answered(i: int, t0: float, fut: asyncio.Future[RemotingCommand]) -> None:
            now = time.perf_counter()
            inflight[0] -= 1
            if fut.cancelled() or fut.exception() is not None:
                failures.append("connection lost")
            elif fut.result().code != ResponseCode.SUCCESS:
                failures.append(f"code {fut.result().code}: {fut.result().remark}")
            else:
                acked[0] += 1
                latencies.append((now - t0) * 1000)
            if not failures and now < deadline:
                fire(i)
            elif inflight[0] == 0 and not done.done():
                done.set_result(time.perf_counter())

        for i in range(args.conns):
            for _ in range(args.window):
                fire(i)
        ended = await done
        if failures:
            raise RuntimeError(f"{len(failures)} sends failed, first: {failures[0]}")
        return acked[0], ended - began, latencies
    finally:
        for conn in conns:
            conn.close()


async def sequential(addr: str, n: int, size: int) -> list[float]:
    client = RemotingClient()
    body = b"s" * size
    out_ms: list[float] = []
    try:
        for _ in range(n):
            t0 = time.perf_counter()
            r = await client.invoke(addr, send_request(0, body), 30)
            out_ms.append((time.perf_counter() - t0) * 1000)
            if r.code != ResponseCode.SUCCESS:
                raise RuntimeError(f"send: code {r.code} {r.remark}")
    finally:
        await client.close()
    return out_ms


async def runtime(addr: str) -> dict[str, str]:
    client = RemotingClient()
    try:
        r = await client.invoke(addr, make_request(RequestCode.GET_BROKER_RUNTIME_INFO), 10)
        return dict(KVTable.from_json(r.body or b"{}").table)
    finally:
        await client.close()


async def run_setup(setup: Setup, work: Path, args: argparse.Namespace) -> tuple[Result, str]:
    master = Broker(work, "master", setup)
    slave: Broker | None = None
    try:
        await master.ready()
        if setup.slave:
            slave = Broker(work, "slave", setup, master_port=master.port)
            await slave.ready()
            deadline = time.monotonic() + 30
            while (await runtime(master.addr)).get("haConnections") != "1":
                if time.monotonic() > deadline:
                    raise RuntimeError("the slave never connected")
                await asyncio.sleep(0.1)
        cpu0 = master.cpu_seconds()
        slave_cpu0 = slave.cpu_seconds() if slave is not None else math.nan
        msgs, seconds, lat = await load(master.port, args)
        cpu = (master.cpu_seconds() - cpu0) / seconds
        slave_cpu = (slave.cpu_seconds() - slave_cpu0) / seconds if slave is not None else math.nan
        seq = await sequential(master.addr, args.seq, args.size)
        check = "-"
        if slave is not None:
            deadline = time.monotonic() + 120
            while True:
                m, s = await runtime(master.addr), await runtime(slave.addr)
                if m["commitLogMaxOffset"] == s["commitLogMaxOffset"]:
                    break
                if time.monotonic() > deadline:
                    raise RuntimeError("the slave did not catch up")
                await asyncio.sleep(0.1)
            master.stop()
            slave.stop()
            names = sorted(p.name for p in (master.store / "commitlog").iterdir() if p.name.isdigit())
            same = all(
                filecmp.cmp(master.store / "commitlog" / n, slave.store / "commitlog" / n, shallow=False)
                for n in names
            )
            check = f"identical ({len(names)} segments)" if same else "DIFFERENT"
        lat.sort()
        seq.sort()
        return Result(msgs, seconds, lat, seq, cpu, slave_cpu), check
    finally:
        master.stop()
        if slave is not None:
            slave.stop()


async def run_all(args: argparse.Namespace, root: Path) -> None:
    out(f"# HA bench: {args.conns} connections x window {args.window}, {args.size} B bodies, "
        f"{args.seconds:.0f} s per setup; {args.seq} sequential sends; {os.cpu_count()} CPUs")  # fmt: skip
    out()
    out(
        "| setup | msgs/s | p50 ms | p99 ms | max ms | lone p50 ms | lone p99 ms | master CPU | slave CPU "
        "| slave log |"
    )
    out("|---|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for i, setup in enumerate(SETUPS):
        work = root / f"setup{i}"
        work.mkdir()
        res, check = await run_setup(setup, work, args)
        lat, seq = res.latencies_ms, res.seq_latencies_ms
        slave_cpu = "-" if math.isnan(res.slave_cpu) else f"{res.slave_cpu * 100:.0f}%"
        out(
            f"| {setup.name} | {res.rate:,.0f} | {percentile(lat, 0.5):.2f} | {percentile(lat, 0.99):.2f} | "
            f"{lat[-1]:.1f} | {percentile(seq, 0.5):.2f} | {percentile(seq, 0.99):.2f} | "
            f"{res.server_cpu * 100:.0f}% | {slave_cpu} | {check} |"
        )
        shutil.rmtree(work, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--quick", action="store_true", help="3 s per setup")
    parser.add_argument("--seconds", type=float, default=15.0)
    parser.add_argument("--conns", type=int, default=8)
    parser.add_argument("--window", type=int, default=8, help="requests in flight per connection")
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--seq", type=int, default=2000, help="one-at-a-time sends after the load")
    parser.add_argument("--dir", default=".", help="where the temporary stores go")
    args = parser.parse_args(argv)
    if args.quick:
        args.seconds, args.seq = 3.0, 300
    with tempfile.TemporaryDirectory(prefix="ha-bench-", dir=args.dir) as tmp:
        loop = new_event_loop()
        try:
            loop.run_until_complete(run_all(args, Path(tmp)))
        finally:
            with contextlib.suppress(Exception):
                loop.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
