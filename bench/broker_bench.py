"""Over-loopback benchmark of the broker against Redis Streams, at equal durability, in one run.

    .venv/bin/python bench/broker_bench.py              # full run (~2 minutes, <= ~1 GiB of disk)
    .venv/bin/python bench/broker_bench.py --quick      # small run (< 30 s; the smoke test)
    .venv/bin/python bench/broker_bench.py --no-redis   # our broker only
    .venv/bin/python bench/broker_bench.py --profile /tmp/prof   # + py-spy of the broker per phase
    .venv/bin/python bench/broker_bench.py --latency-rate 5000   # latency below saturation

Servers run as separate processes, one at a time (each group of phases runs our broker, stops it,
then runs Redis), each on a fresh temporary directory under --dir (default: the current
directory's filesystem), deleted when the server stops:

* ours: ``python -m rocketlite broker -c broker.conf`` (storePathRootDir in the temp dir, a free
  listenPort on 127.0.0.1, no name server, 16 queues per auto-created topic, 128 MiB commit-log
  segments so a phase rolls segments as production does);
* Redis: ``redis-server --port X --dir D --appendonly yes --appendfsync everysec|always --save ''``
  (plus ``--bind 127.0.0.1``), Debian's package (``apt-get install -y redis-server``).

Equal durability: our ASYNC_FLUSH against ``appendfsync everysec``, our SYNC_FLUSH (group commit)
against ``appendfsync always``. Bodies of 128 B and 1 KiB. The load generator is this process, one
asyncio loop (uvloop when installed, via `rocketlite.runtime.new_event_loop`), 16 connections:

* ours is driven by rocketlite's own remoting client (`rocketlite.remoting.connection.Connection`:
  many requests in flight per connection, matched by opaque; headers built with
  `SendMessageRequestHeader.to_ext_v2` / `PullMessageRequestHeader`, batches with `encode_batch`);
* Redis is driven by the minimal pipelined RESP client in this file (`RespConnection`: an
  `asyncio.Protocol` with an incremental RESP2 parser, replies matched in order).

Phases (each bounded by --seconds and by a per-phase byte cap that keeps the disk use down;
connection i writes and reads queue i of the topic / stream i):

1. batched produce: SEND_BATCH_MESSAGE of 32 messages, one batch in flight per connection, vs 32
   XADDs written at once (pipelined 32 deep), one pipeline in flight per connection;
2. single-message produce: SEND_MESSAGE_V2, a window of 32 requests in flight per connection, vs
   XADD with a window of 32;
3. consume (ASYNC group only) of what phase 1 wrote, the same count per queue on both sides:
   PULL_MESSAGE of 32 (subscription in the request, no suspend), one pull in flight per queue, vs
   ``XRANGE stream (last-id + COUNT 1000``, one in flight per stream;
4. end-to-end latency (ASYNC group only): 16 producer connections send single messages paced at
   20k msgs/s (body starts with the send time), 16 consumers long-poll (PULL_MESSAGE with SUSPEND)
   / ``XREAD BLOCK``; latency = receive time - send time, both in this process; the send -> ack
   part is printed too.

Every message carries what a Java producer sends (UNIQ_KEY, TAGS, WAIT), so the broker indexes it.
msgs/s count acknowledged (produce) or received (consume) messages over the phase's wall time,
from the first request to the last answer. Phases do not leak into each other: before each one
the page cache is written back (`os.sync`), and after each of our produce phases the benchmark
waits until the broker has dispatched everything (the time that took is printed, with the
"consumable" rate it implies). Each phase prints the CPU used by the server, by the load
generator and by the rest of the machine (100% = one core): which side was the bottleneck, and
whether another workload disturbed the run (flagged, and summed up under the table).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ctypes
import functools
import math
import os
import platform
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from rocketlite.protocol.batch import BatchEntry, encode_batch
from rocketlite.protocol.codes import RequestCode, ResponseCode
from rocketlite.protocol.command import RemotingCommand, make_request
from rocketlite.protocol.headers import PullMessageRequestHeader, SendMessageRequestHeader
from rocketlite.remoting.connection import Connection, RequestTable, next_opaque
from rocketlite.runtime import new_event_loop

KIB: Final = 1 << 10
MIB: Final = 1 << 20
GIB: Final = 1 << 30
CONNECTIONS: Final = 16
BATCH: Final = 32  # messages per SEND_BATCH_MESSAGE / XADDs per pipeline
WINDOW: Final = 32  # single-message requests in flight per connection
PULL_BATCH: Final = 32  # maxMsgNums of a pull
XRANGE_COUNT: Final = 1000
LATENCY_RATE: Final = 20_000  # msgs/s, all producers together
PACE_TICK: Final = 0.001  # s between the latency phase's send bursts (uvloop's timer resolution)
SEGMENT: Final = 128 * MIB  # commit-log segment size of the benchmark broker
PRODUCER_GROUP: Final = "BenchProducerGroup"
CONSUMER_GROUP: Final = "BenchConsumerGroup"
DEFAULT_TOPIC: Final = "TBW102"
REDIS_INSTALL_HINT: Final = (
    "redis-server not found: install it with `apt-get install -y redis-server` (Debian/Ubuntu; "
    "`apt-get update` first), point --redis-server at it, or run with --no-redis"
)

# PullSysFlag bits (RocketMQ's PullSysFlag).
PULL_FLAG_SUSPEND: Final = 0x2
PULL_FLAG_SUBSCRIPTION: Final = 0x4

# Goals (from the broker benchmark issue).
GOAL_BATCH_RATIO: Final = 1.0
GOAL_SINGLE_RATE: Final = 50_000
GOAL_CONSUME_RATIO: Final = 1.0
GOAL_P99_MS: Final = 5.0
SATURATED: Final = 0.85  # CPU share of one core from which a process counts as the bottleneck
OTHER_LOAD: Final = 0.15  # CPU of other processes (share of one core) that makes a phase suspect
OTHER_LOAD_WARNING: Final = " [!! the machine was not idle: figures disturbed]"

INT: Final = struct.Struct(">i")
SEND_NS: Final = struct.Struct(">q")  # first 8 bytes of a latency-phase body: perf_counter_ns at send
# Stored record (RocketMQ 4.x, IPv4 hosts): SYSFLAG at 36, BODYLEN at 84; +12 per IPv6 host.
REC_SYSFLAG_POS: Final = 36
REC_BODYLEN_POS: Final = 84
BORNHOST_V6: Final = 0x10
STOREHOST_V6: Final = 0x20

SEND_V2_BORN_TS: Final = SendMessageRequestHeader.V2_NAMES["born_timestamp"]
SEND_V2_PROPERTIES: Final = SendMessageRequestHeader.V2_NAMES["properties"]


# -- plan ---------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Plan:
    name: str
    seconds: float  # produce / consume phases (at most)
    latency_seconds: float
    phase_cap_bytes: int  # body bytes per produce phase and side (bounds the disk)
    sizes: tuple[int, ...]
    sync: bool  # also run the SYNC_FLUSH / appendfsync always group


FULL = Plan("full", seconds=5.0, latency_seconds=5.0, phase_cap_bytes=200 * MIB, sizes=(128, KIB), sync=True)
QUICK = Plan("quick", seconds=0.5, latency_seconds=1.0, phase_cap_bytes=16 * MIB, sizes=(128, KIB), sync=True)


# -- output -------------------------------------------------------------------------------------
def out(text: str = "") -> None:
    print(text, flush=True)


def fmt_size(n: int) -> str:
    return f"{n} B" if n < KIB else f"{n // KIB} KiB"


def fmt_rate(rate: float | None) -> str:
    return "n/a" if rate is None else f"{rate:,.0f} msgs/s"


def mark(passed: bool | None) -> str:
    if passed is None:
        return ""
    return "PASS" if passed else "MISS"


def percentile(sorted_values: list[float], q: float) -> float:
    """Nearest-rank percentile of an already sorted list."""
    if not sorted_values:
        return math.nan
    k = min(len(sorted_values) - 1, max(0, math.ceil(q * len(sorted_values)) - 1))
    return sorted_values[k]


@dataclass(slots=True)
class Row:
    """One line of the final table."""

    benchmark: str
    durability: str
    body: str
    ours: str
    redis: str
    ratio: float | None = None
    goal: str = ""
    passed: bool | None = None
    saturated: str = ""


@dataclass(slots=True)
class Report:
    rows: list[Row] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    profiles: list[Path] = field(default_factory=list)


# -- child processes ----------------------------------------------------------------------------
CLK_TCK: Final = os.sysconf("SC_CLK_TCK")
PR_SET_PDEATHSIG: Final = 1


def _die_with_parent() -> None:
    """In the child before exec: get SIGTERM if this benchmark dies without cleaning up."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


class Child:
    """A server process in its own session (a Ctrl-C reaches us, and we stop it in order)."""

    def __init__(self, name: str, argv: list[str], log_path: Path) -> None:
        self.name = name
        self.log_path = log_path
        self._log = log_path.open("wb")
        self.proc: subprocess.Popen[bytes] = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=_die_with_parent,  # noqa: PLW1509 - no threads here
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


def cpu_self() -> float:
    t = os.times()
    return t.user + t.system


def free_port(avoid: set[int], *, with_vip: bool = False) -> int:
    """A port free on 127.0.0.1 (and port-2 too when `with_vip`: the broker's VIP channel)."""
    for _ in range(200):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        if port in avoid or port - 2 in avoid or port < 1030:
            continue
        if not with_vip:
            return port
        try:
            with socket.socket() as s:
                s.bind(("127.0.0.1", port - 2))
            return port
        except OSError:
            continue
    raise RuntimeError("no free port pair found")


def disk_usage(path: Path) -> int:
    """Allocated bytes under `path` (sparse files count what they use)."""
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.lstat(Path(root) / name).st_blocks * 512
    return total


# -- our broker ---------------------------------------------------------------------------------
def write_broker_conf(path: Path, store: Path, port: int, sync: bool) -> None:
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
    }
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()), encoding="utf-8")


def start_broker(work: Path, sync: bool, avoid: set[int]) -> tuple[Child, int]:
    port = free_port(avoid, with_vip=True)
    conf = work / "broker.conf"
    write_broker_conf(conf, work / "store", port, sync)
    argv = [sys.executable, "-m", "rocketlite", "--log-level", "INFO", "broker", "-c", str(conf)]
    return Child("broker", argv, work / "broker.log"), port


def start_redis(binary: str, work: Path, always: bool, avoid: set[int]) -> tuple[Child, int]:
    port = free_port(avoid)
    data = work / "redis"
    data.mkdir()
    argv = [
        binary, "--port", str(port), "--bind", "127.0.0.1", "--dir", str(data),
        "--appendonly", "yes", "--appendfsync", "always" if always else "everysec", "--save", "",
    ]  # fmt: skip
    return Child("redis-server", argv, work / "redis.log"), port


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


# -- our client side ----------------------------------------------------------------------------
def submit(conn: Connection, cmd: RemotingCommand) -> asyncio.Future[RemotingCommand]:
    """`Connection.request` without its per-request `wait_for` (phases are bounded as a whole):
    register a future under a fresh opaque and send; the connection resolves it."""
    loop = conn.loop
    if loop is None or conn.closed:
        raise ConnectionError("connection closed")
    cmd.opaque = next_opaque()
    fut: asyncio.Future[RemotingCommand] = loop.create_future()
    conn.pending[cmd.opaque] = fut
    conn.send(cmd)
    return fut


async def open_broker(port: int, n: int) -> list[Connection]:
    loop = asyncio.get_running_loop()
    conns: list[Connection] = []
    for _ in range(n):
        _t, conn = await loop.create_connection(lambda: Connection(RequestTable()), "127.0.0.1", port)
        conns.append(conn)
    return conns


def close_all(conns: list[Connection]) -> None:
    for c in conns:
        c.close()


_uniq_counter = 0


def uniq_key() -> str:
    """A 32-hex-digit UNIQ_KEY like the Java client's (ip, pid, counter)."""
    global _uniq_counter
    _uniq_counter += 1
    return f"7F000001{os.getpid() & 0xFFFF:04X}{_uniq_counter:020X}"


def single_properties() -> str:
    return f"TAGS\x01TagA\x02UNIQ_KEY\x01{uniq_key()}\x02WAIT\x01true"


class Sender:
    """Builds SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE requests for one topic-queue, as Java does."""

    def __init__(self, topic: str, queue_id: int, *, batch: bool) -> None:
        header = SendMessageRequestHeader(
            producer_group=PRODUCER_GROUP,
            topic=topic,
            default_topic=DEFAULT_TOPIC,
            default_topic_queue_nums=CONNECTIONS,
            queue_id=queue_id,
            sys_flag=0,
            born_timestamp=0,
            flag=0,
            properties="WAIT\x01true" if batch else "",
            reconsume_times=0,
            batch=batch,
        )
        self.template = header.to_ext_v2()
        self.batch = batch

    def single(self, body: bytes) -> RemotingCommand:
        ext = self.template.copy()
        ext[SEND_V2_BORN_TS] = str(time.time_ns() // 1_000_000)
        ext[SEND_V2_PROPERTIES] = single_properties()
        return make_request(RequestCode.SEND_MESSAGE_V2, ext, body)

    def batch_of(self, body: bytes, n: int) -> RemotingCommand:
        entries = [BatchEntry(0, body, f"TAGS\x01TagA\x02UNIQ_KEY\x01{uniq_key()}") for _ in range(n)]
        ext = self.template.copy()
        ext[SEND_V2_BORN_TS] = str(time.time_ns() // 1_000_000)
        return make_request(RequestCode.SEND_BATCH_MESSAGE, ext, encode_batch(entries))


def pull_template(topic: str, queue_id: int, *, suspend_ms: int) -> dict[str, str]:
    flags = PULL_FLAG_SUBSCRIPTION | (PULL_FLAG_SUSPEND if suspend_ms else 0)
    return PullMessageRequestHeader(
        consumer_group=CONSUMER_GROUP,
        topic=topic,
        queue_id=queue_id,
        queue_offset=0,
        max_msg_nums=PULL_BATCH,
        sys_flag=flags,
        commit_offset=0,
        suspend_timeout_millis=suspend_ms,
        subscription="*",
        sub_version=0,
        expression_type="TAG",
    ).to_ext()


def pull_request(template: dict[str, str], offset: int) -> RemotingCommand:
    ext = template.copy()
    ext["queueOffset"] = str(offset)
    return make_request(RequestCode.PULL_MESSAGE, ext)


def record_bodies(buf: bytes) -> list[bytes]:
    """The bodies of the stored records of a pull answer (RocketMQ 4.x record layout)."""
    bodies: list[bytes] = []
    pos, end = 0, len(buf)
    unpack = INT.unpack_from
    while pos < end:
        (total,) = unpack(buf, pos)
        if total <= 0:
            raise RuntimeError(f"bad record size {total} at {pos} of a pull answer")
        (sys_flag,) = unpack(buf, pos + REC_SYSFLAG_POS)
        at = (
            pos
            + REC_BODYLEN_POS
            + (12 if sys_flag & BORNHOST_V6 else 0)
            + (12 if sys_flag & STOREHOST_V6 else 0)
        )
        (body_len,) = unpack(buf, at)
        bodies.append(buf[at + 4 : at + 4 + body_len])
        pos += total
    return bodies


class PullUnsupportedError(RuntimeError):
    """The broker answered PULL_MESSAGE with REQUEST_CODE_NOT_SUPPORTED."""


def check_pull_code(resp: RemotingCommand) -> None:
    if resp.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED:
        raise PullUnsupportedError(f"PULL_MESSAGE not supported by this broker ({resp.remark})")


# -- Redis client side --------------------------------------------------------------------------
class RespError(Exception):
    """An error reply (-ERR ...)."""


Reply = Any  # bytes | int | str | RespError | None | list[Reply]


class RespConnection(asyncio.Protocol):
    """A minimal pipelined RESP2 client: `request(payload, n)` writes one or more commands and
    resolves with their `n` replies, in order. The parser is incremental: a reply split over many
    reads (a 1 MiB XRANGE) is parsed once, element by element, never re-scanned."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.buf = bytearray()
        self.stack: list[list[Any]] = []  # open arrays: [remaining, items]
        self.waiters: deque[tuple[int, list[Reply], asyncio.Future[list[Reply]]]] = deque()
        self.closed = False
        self.loop: asyncio.AbstractEventLoop | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's is not a subclass
        self.loop = asyncio.get_running_loop()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        for _n, _items, fut in self.waiters:
            if not fut.done():
                fut.set_exception(ConnectionError("redis connection closed"))
                fut.exception()  # an awaiter still gets it; nobody left = no "never retrieved" noise
        self.waiters.clear()

    def request(self, payload: bytes, n: int = 1) -> asyncio.Future[list[Reply]]:
        if self.transport is None or self.loop is None or self.closed:
            raise ConnectionError("redis connection closed")
        fut: asyncio.Future[list[Reply]] = self.loop.create_future()
        self.waiters.append((n, [], fut))
        self.transport.write(payload)
        return fut

    def close(self) -> None:
        if self.transport is not None and not self.closed:
            self.transport.close()
        self.closed = True

    def data_received(self, data: bytes) -> None:
        buf = self.buf
        buf += data
        stack = self.stack
        pos, end = 0, len(buf)
        find = buf.find
        while pos < end:
            eol = find(b"\r\n", pos)
            if eol < 0:
                break
            kind = buf[pos]
            value: Reply
            if kind == 36:  # $ bulk string
                size = int(buf[pos + 1 : eol])
                if size < 0:
                    value, pos = None, eol + 2
                else:
                    stop = eol + 2 + size
                    if stop + 2 > end:
                        break
                    value, pos = bytes(buf[eol + 2 : stop]), stop + 2
            elif kind == 42:  # * array
                count = int(buf[pos + 1 : eol])
                pos = eol + 2
                if count > 0:
                    stack.append([count, []])
                    continue
                value = None if count < 0 else []
            elif kind == 43:  # + simple string
                value, pos = buf[pos + 1 : eol].decode(), eol + 2
            elif kind == 58:  # : integer
                value, pos = int(buf[pos + 1 : eol]), eol + 2
            elif kind == 45:  # - error
                value, pos = RespError(buf[pos + 1 : eol].decode()), eol + 2
            else:
                raise RuntimeError(f"bad RESP type byte {kind!r}")
            while stack:
                top = stack[-1]
                top[1].append(value)
                top[0] -= 1
                if top[0]:
                    break
                stack.pop()
                value = top[1]
            else:
                self._deliver(value)
        del buf[:pos]

    def _deliver(self, value: Reply) -> None:
        n, items, fut = self.waiters[0]
        items.append(value)
        if len(items) == n:
            self.waiters.popleft()
            if not fut.done():
                fut.set_result(items)


def resp_command(*args: bytes | str) -> bytes:
    parts = [f"*{len(args)}\r\n".encode()]
    for a in args:
        b = a.encode() if isinstance(a, str) else a
        parts += [f"${len(b)}\r\n".encode(), b, b"\r\n"]
    return b"".join(parts)


def xadd_prefix(stream: str, body_len: int) -> bytes:
    """`XADD stream * d <body>` up to the body: per message, prefix + body + CRLF."""
    head = resp_command("XADD", stream, "*", "d")
    return b"*5" + head[2:] + f"${body_len}\r\n".encode()


async def open_redis(port: int, n: int) -> list[RespConnection]:
    loop = asyncio.get_running_loop()
    conns: list[RespConnection] = []
    for _ in range(n):
        _t, conn = await loop.create_connection(RespConnection, "127.0.0.1", port)
        conns.append(conn)
    return conns


def close_redis(conns: list[RespConnection]) -> None:
    for c in conns:
        c.close()


async def redis_ready(port: int, child: Child, timeout: float = 30.0) -> str:
    """Wait for PING -> PONG (Redis loads its AOF before answering); returns the server version."""
    await wait_listening(child, port, timeout)
    deadline = time.monotonic() + timeout
    (conn,) = await open_redis(port, 1)
    try:
        while True:
            (reply,) = await conn.request(resp_command("PING"))
            if reply == "PONG":
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"redis not ready: {reply!r}")
            await asyncio.sleep(0.05)
        (info,) = await conn.request(resp_command("INFO", "server"))
        for line in bytes(info).decode().splitlines():
            if line.startswith("redis_version:"):
                return line.split(":", 1)[1]
        return "?"
    finally:
        conn.close()


def check_reply(reply: Reply) -> None:
    if isinstance(reply, RespError):
        raise RuntimeError(f"redis error: {reply}")


# -- phase results ------------------------------------------------------------------------------
@dataclass(slots=True)
class PhaseResult:
    messages: int
    elapsed: float
    server_cpu: float
    client_cpu: float
    per_queue: list[int] = field(default_factory=list)
    latencies_ms: list[float] = field(default_factory=list)
    ack_latencies_ms: list[float] = field(default_factory=list)  # latency phase: send -> ack
    sent: int = 0
    catch_up: float | None = None  # s from the last ack until all was dispatched (ours)
    other_cpu: float = 0.0  # CPU used by the rest of the machine (other sessions, kernel threads)

    @property
    def rate(self) -> float:
        return self.messages / self.elapsed if self.elapsed > 0 else 0.0

    def bound(self, server: str) -> str:
        """Which side was CPU-saturated (>= SATURATED of a core) during the phase."""
        if self.elapsed <= 0:
            return "?"
        hot = [
            name
            for name, cpu in ((server, self.server_cpu), ("load gen", self.client_cpu))
            if cpu / self.elapsed >= SATURATED
        ]
        return " + ".join(hot) if hot else "neither"

    def cpu_text(self, server: str) -> str:
        other = self.other_cpu / self.elapsed if self.elapsed > 0 else 0.0
        return (
            f"CPU {server} {self.server_cpu / self.elapsed:.0%}, "
            f"load generator {self.client_cpu / self.elapsed:.0%}, "
            f"other processes {other:.0%}{OTHER_LOAD_WARNING if other >= OTHER_LOAD else ''} (of one core)"
        )


class Meter:
    """Wall time and CPU of the server and of this process over a phase."""

    def __init__(self, server: Child) -> None:
        self.server = server
        self.t0 = time.perf_counter()
        self.s0 = server.cpu_seconds()
        self.c0 = cpu_self()
        self.m0 = machine_busy_seconds()

    def result(self, messages: int, per_queue: list[int] | None = None) -> PhaseResult:
        elapsed = time.perf_counter() - self.t0
        server = self.server.cpu_seconds() - self.s0
        client = cpu_self() - self.c0
        res = PhaseResult(messages, elapsed, server, client, per_queue or [])
        res.other_cpu = max(0.0, machine_busy_seconds() - self.m0 - server - client)
        return res


def machine_busy_seconds() -> float:
    """Busy CPU time of the whole machine so far (/proc/stat), all cores together."""
    try:
        with Path("/proc/stat").open() as f:
            fields = f.readline().split()[1:]
    except OSError:
        return math.nan
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(x) for x in fields[:8])
    return (user + nice + system + irq + softirq + steal) / CLK_TCK


@dataclass(slots=True)
class Budget:
    """When a phase stops issuing: a deadline and a message cap per connection."""

    seconds: float
    cap_per_conn: int

    def start(self) -> float:
        return time.perf_counter() + self.seconds


# -- produce phases -------------------------------------------------------------------------------
async def ours_produce_batch(
    conns: list[Connection], topic: str, body: bytes, budget: Budget, meter_of: Callable[[], Meter]
) -> PhaseResult:
    senders = [Sender(topic, i, batch=True) for i in range(len(conns))]
    acked = [0] * len(conns)
    failures: list[str] = []
    meter = meter_of()
    deadline = budget.start()

    async def run(i: int) -> None:
        conn, sender = conns[i], senders[i]
        while acked[i] + BATCH <= budget.cap_per_conn and time.perf_counter() < deadline:
            resp = await submit(conn, sender.batch_of(body, BATCH))
            if resp.code != ResponseCode.SUCCESS:
                failures.append(f"code {resp.code}: {resp.remark}")
                return
            acked[i] += BATCH

    await asyncio.gather(*(run(i) for i in range(len(conns))))
    res = meter.result(sum(acked), acked)
    if failures:
        raise RuntimeError(f"{len(failures)} batch sends failed, first: {failures[0]}")
    return res


async def windowed(
    n_conns: int,
    issue: Callable[[int], asyncio.Future[Any]],
    ok: Callable[[Any], str | None],
    budget: Budget,
    meter: Meter,
) -> PhaseResult:
    """Keep WINDOW requests in flight on each connection until the budget runs out; every answer
    (a done callback, no task per request) issues the next one."""
    loop = asyncio.get_running_loop()
    acked = [0] * n_conns
    issued = [0] * n_conns
    inflight = [0] * n_conns
    failures: list[str] = []
    done = loop.create_future()
    deadline = budget.start()
    open_conns = [n_conns]

    def finish_conn() -> None:
        open_conns[0] -= 1
        if open_conns[0] == 0 and not done.done():
            done.set_result(None)

    def fire(i: int) -> None:
        fut = issue(i)
        issued[i] += 1
        inflight[i] += 1
        fut.add_done_callback(lambda f: answered(i, f))

    def answered(i: int, fut: asyncio.Future[Any]) -> None:
        inflight[i] -= 1
        if fut.cancelled() or fut.exception() is not None:
            failures.append(repr(fut.exception()) if not fut.cancelled() else "cancelled")
        else:
            problem = ok(fut.result())
            if problem is None:
                acked[i] += 1
            else:
                failures.append(problem)
        if not failures and issued[i] < budget.cap_per_conn and time.perf_counter() < deadline:
            fire(i)
        elif inflight[i] == 0:
            finish_conn()

    for i in range(n_conns):
        for _ in range(min(WINDOW, budget.cap_per_conn)):
            fire(i)
    await done
    res = meter.result(sum(acked), acked)
    if failures:
        raise RuntimeError(f"{len(failures)} sends failed, first: {failures[0]}")
    return res


def _send_ok(resp: RemotingCommand) -> str | None:
    return None if resp.code == ResponseCode.SUCCESS else f"code {resp.code}: {resp.remark}"


async def ours_produce_single(
    conns: list[Connection], topic: str, body: bytes, budget: Budget, meter_of: Callable[[], Meter]
) -> PhaseResult:
    senders = [Sender(topic, i, batch=False) for i in range(len(conns))]

    def issue(i: int) -> asyncio.Future[RemotingCommand]:
        return submit(conns[i], senders[i].single(body))

    return await windowed(len(conns), issue, _send_ok, budget, meter_of())


async def redis_produce_batch(
    conns: list[RespConnection], prefix: str, body: bytes, budget: Budget, meter_of: Callable[[], Meter]
) -> PhaseResult:
    heads = [xadd_prefix(f"{prefix}:{i}", len(body)) for i in range(len(conns))]
    acked = [0] * len(conns)
    meter = meter_of()
    deadline = budget.start()

    async def run(i: int) -> None:
        conn, head = conns[i], heads[i]
        while acked[i] + BATCH <= budget.cap_per_conn and time.perf_counter() < deadline:
            payload = b"".join([part for _ in range(BATCH) for part in (head, body, b"\r\n")])
            replies = await conn.request(payload, BATCH)
            for r in replies:
                check_reply(r)
            acked[i] += BATCH

    await asyncio.gather(*(run(i) for i in range(len(conns))))
    return meter.result(sum(acked), acked)


def _xadd_ok(replies: list[Reply]) -> str | None:
    return f"redis error: {replies[0]}" if isinstance(replies[0], RespError) else None


async def redis_produce_single(
    conns: list[RespConnection], prefix: str, body: bytes, budget: Budget, meter_of: Callable[[], Meter]
) -> PhaseResult:
    heads = [xadd_prefix(f"{prefix}:{i}", len(body)) for i in range(len(conns))]

    def issue(i: int) -> asyncio.Future[list[Reply]]:
        return conns[i].request(b"".join((heads[i], body, b"\r\n")))

    return await windowed(len(conns), issue, _xadd_ok, budget, meter_of())


# -- consume phases -------------------------------------------------------------------------------
_NOT_YET_CODES: Final = frozenset(
    {ResponseCode.PULL_NOT_FOUND, ResponseCode.PULL_RETRY_IMMEDIATELY, ResponseCode.PULL_OFFSET_MOVED}
)


async def ours_wait_dispatched(
    conn: Connection, topic: str, targets: list[int], timeout: float = 60.0, *, pull_optional: bool = False
) -> bool:
    """Until the last message of every queue can be pulled (the dispatcher caught up). With
    `pull_optional`, a broker without PULL_MESSAGE gets a second instead (and False is returned)."""
    deadline = time.monotonic() + timeout
    for q, target in enumerate(targets):
        if target == 0:
            continue
        template = pull_template(topic, q, suspend_ms=0)
        while True:
            resp = await submit(conn, pull_request(template, target - 1))
            if pull_optional and resp.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED:
                await asyncio.sleep(1.0)
                return False
            check_pull_code(resp)
            if resp.code == ResponseCode.SUCCESS:
                break
            # Not dispatched that far yet: 19 at maxOffset, 21 (OFFSET_OVERFLOW_BADLY) beyond it.
            not_yet = int(resp.ext_fields.get("maxOffset", "-1")) < target
            if not not_yet or resp.code not in _NOT_YET_CODES:
                raise RuntimeError(f"pull of {topic}:{q}@{target - 1}: code {resp.code} {resp.remark}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"{topic}:{q} not dispatched up to {target} after {timeout:.0f} s")
            await asyncio.sleep(0.01)
    return True


async def ours_consume(
    conns: list[Connection], topic: str, targets: list[int], seconds: float, meter_of: Callable[[], Meter]
) -> PhaseResult:
    got = [0] * len(conns)
    meter = meter_of()
    deadline = time.perf_counter() + seconds

    async def run(q: int) -> None:
        conn, template = conns[q], pull_template(topic, q, suspend_ms=0)
        offset = 0
        while got[q] < targets[q] and time.perf_counter() < deadline:
            resp = await submit(conn, pull_request(template, offset))
            check_pull_code(resp)
            if resp.code == ResponseCode.SUCCESS:
                got[q] += len(record_bodies(resp.body or b""))
                offset = int(resp.ext_fields["nextBeginOffset"])
            elif resp.code in (ResponseCode.PULL_NOT_FOUND, ResponseCode.PULL_RETRY_IMMEDIATELY):
                await asyncio.sleep(0.001)
            else:
                raise RuntimeError(f"pull of {topic}:{q}@{offset}: code {resp.code} {resp.remark}")

    await asyncio.gather(*(run(q) for q in range(len(conns))))
    return meter.result(sum(min(g, t) for g, t in zip(got, targets, strict=True)), got)


async def redis_consume(
    conns: list[RespConnection],
    prefix: str,
    targets: list[int],
    seconds: float,
    meter_of: Callable[[], Meter],
) -> PhaseResult:
    got = [0] * len(conns)
    meter = meter_of()
    deadline = time.perf_counter() + seconds

    async def run(q: int) -> None:
        conn, stream = conns[q], f"{prefix}:{q}"
        start: bytes = b"-"
        while got[q] < targets[q] and time.perf_counter() < deadline:
            count = str(min(XRANGE_COUNT, targets[q] - got[q]))
            (entries,) = await conn.request(resp_command("XRANGE", stream, start, "+", "COUNT", count))
            check_reply(entries)
            if not entries:
                raise RuntimeError(f"XRANGE {stream}: nothing after {start!r}, {got[q]} of {targets[q]} read")
            got[q] += sum(1 for _id, fields in entries if fields[1])
            start = b"(" + entries[-1][0]

    await asyncio.gather(*(run(q) for q in range(len(conns))))
    return meter.result(sum(got), got)


# -- latency phases -------------------------------------------------------------------------------
def latency_body(size: int) -> Callable[[], bytes]:
    pad = os.urandom(max(0, size - SEND_NS.size))

    def make() -> bytes:
        return SEND_NS.pack(time.perf_counter_ns()) + pad

    return make


async def paced(rate: float, seconds: float, send: Callable[[int], None]) -> int:
    """Call `send(k)` (k = 0, 1, ...) `rate` times a second for `seconds`, catching up each tick.

    Ticks are 1 ms apart: uvloop's timers have millisecond resolution and a shorter sleep returns
    at once, which would turn this loop into a spin taking a core from the servers."""
    t0 = time.perf_counter()
    sent = 0
    while True:
        elapsed = time.perf_counter() - t0
        if elapsed >= seconds:
            return sent
        due = int(elapsed * rate) + 1
        while sent < due:
            send(sent)
            sent += 1
        await asyncio.sleep(max(PACE_TICK, (sent / rate) - (time.perf_counter() - t0)))


class LatencyLog:
    def __init__(self, t_start_ns: int) -> None:
        self.t_start_ns = t_start_ns
        self.values_ms: list[float] = []
        self.received = 0

    def add(self, body: bytes, now_ns: int) -> None:
        (sent_ns,) = SEND_NS.unpack_from(body, 0)
        if sent_ns >= self.t_start_ns:
            self.received += 1
            self.values_ms.append((now_ns - sent_ns) / 1e6)


async def ours_latency(
    port: int, topic: str, size: int, seconds: float, rate: float, meter_of: Callable[[], Meter]
) -> PhaseResult:
    producers = await open_broker(port, CONNECTIONS)
    consumers = await open_broker(port, CONNECTIONS)
    make_body = latency_body(size)
    senders = [Sender(topic, q, batch=False) for q in range(CONNECTIONS)]
    try:
        # Create the topic and its 16 queues (one message each, sent before the measurement).
        warm = [submit(producers[q], senders[q].single(make_body())) for q in range(CONNECTIONS)]
        for resp in await asyncio.gather(*warm):
            if resp.code != ResponseCode.SUCCESS:
                raise RuntimeError(f"warm-up send: code {resp.code} {resp.remark}")
        # Wait until they can be pulled: creating the consume queues of a new topic is not measured.
        t_new = time.perf_counter()
        await ours_wait_dispatched(consumers[0], topic, [1] * CONNECTIONS)
        out(
            f"  (new topic {topic}: its {CONNECTIONS} queues' first messages were pullable "
            f"{(time.perf_counter() - t_new) * 1000:.0f} ms after their acks)"
        )
        log = LatencyLog(time.perf_counter_ns())
        stop = [False]
        failures: list[str] = []

        async def consume(q: int) -> None:
            conn, template = consumers[q], pull_template(topic, q, suspend_ms=1000)
            offset = 0
            while not stop[0]:
                try:
                    resp = await submit(conn, pull_request(template, offset))
                except ConnectionError:
                    return
                now = time.perf_counter_ns()
                check_pull_code(resp)
                if resp.code == ResponseCode.SUCCESS:
                    for b in record_bodies(resp.body or b""):
                        log.add(b, now)
                    offset = int(resp.ext_fields["nextBeginOffset"])
                elif resp.code in (ResponseCode.PULL_NOT_FOUND, ResponseCode.PULL_RETRY_IMMEDIATELY):
                    offset = int(resp.ext_fields.get("nextBeginOffset", offset))
                else:
                    raise RuntimeError(f"long poll of {topic}:{q}: code {resp.code} {resp.remark}")

        tasks = [asyncio.ensure_future(consume(q)) for q in range(CONNECTIONS)]
        await asyncio.sleep(0.2)  # let the first pulls reach the hold service
        acks: list[asyncio.Future[RemotingCommand]] = []

        ack_ms: list[float] = []

        def note(t0: int, fut: asyncio.Future[RemotingCommand]) -> None:
            ack_ms.append((time.perf_counter_ns() - t0) / 1e6)
            if fut.cancelled() or fut.exception() is not None or fut.result().code != ResponseCode.SUCCESS:
                failures.append("send failed")

        def send(k: int) -> None:
            q = k % CONNECTIONS
            t0 = time.perf_counter_ns()
            fut = submit(producers[q], senders[q].single(make_body()))
            fut.add_done_callback(functools.partial(note, t0))
            acks.append(fut)

        meter = meter_of()
        sent = await paced(rate, seconds, send)
        await asyncio.gather(*acks, return_exceptions=True)
        grace = time.perf_counter() + max(3.0, seconds)  # a backlog drains
        while log.received < sent and time.perf_counter() < grace:
            await asyncio.sleep(0.01)
        res = meter.result(log.received)
        stop[0] = True
        close_all(consumers)
        for t in tasks:
            if t.done() and t.exception() is not None:
                raise t.exception()  # type: ignore[misc]
        await asyncio.gather(*tasks, return_exceptions=True)
        if failures:
            raise RuntimeError(f"{len(failures)} latency-phase sends failed")
        res.latencies_ms = sorted(log.values_ms)
        res.ack_latencies_ms = sorted(ack_ms)
        res.sent = sent
        return res
    finally:
        close_all(producers)
        close_all(consumers)


async def redis_latency(
    port: int, prefix: str, size: int, seconds: float, rate: float, meter_of: Callable[[], Meter]
) -> PhaseResult:
    producers = await open_redis(port, CONNECTIONS)
    consumers = await open_redis(port, CONNECTIONS)
    make_body = latency_body(size)
    heads = [xadd_prefix(f"{prefix}:{q}", size) for q in range(CONNECTIONS)]
    try:
        log = LatencyLog(time.perf_counter_ns())
        stop = [False]

        async def consume(q: int) -> None:
            conn, stream = consumers[q], f"{prefix}:{q}"
            last: bytes = b"0-0"
            while not stop[0]:
                try:
                    (reply,) = await conn.request(
                        resp_command(
                            "XREAD", "COUNT", str(XRANGE_COUNT), "BLOCK", "1000", "STREAMS", stream, last
                        )
                    )
                except ConnectionError:
                    return
                now = time.perf_counter_ns()
                check_reply(reply)
                if reply is None:
                    continue
                for _key, entries in reply:
                    for _id, fields in entries:
                        log.add(fields[1], now)
                    last = entries[-1][0]

        tasks = [asyncio.ensure_future(consume(q)) for q in range(CONNECTIONS)]
        await asyncio.sleep(0.2)
        acks: list[asyncio.Future[list[Reply]]] = []

        ack_ms: list[float] = []

        def note(t0: int, _fut: asyncio.Future[list[Reply]]) -> None:
            ack_ms.append((time.perf_counter_ns() - t0) / 1e6)

        def send(k: int) -> None:
            q = k % CONNECTIONS
            t0 = time.perf_counter_ns()
            fut = producers[q].request(b"".join((heads[q], make_body(), b"\r\n")))
            fut.add_done_callback(functools.partial(note, t0))
            acks.append(fut)

        meter = meter_of()
        sent = await paced(rate, seconds, send)
        for replies in await asyncio.gather(*acks):
            check_reply(replies[0])
        grace = time.perf_counter() + max(3.0, seconds)  # a backlog drains
        while log.received < sent and time.perf_counter() < grace:
            await asyncio.sleep(0.01)
        res = meter.result(log.received)
        stop[0] = True
        close_redis(consumers)
        await asyncio.gather(*tasks, return_exceptions=True)
        res.latencies_ms = sorted(log.values_ms)
        res.ack_latencies_ms = sorted(ack_ms)
        res.sent = sent
        return res
    finally:
        close_redis(producers)
        close_redis(consumers)


# -- profiling ----------------------------------------------------------------------------------
def find_py_spy() -> str | None:
    local = Path(sys.executable).parent / "py-spy"
    return str(local) if local.exists() else shutil.which("py-spy")


class Profiler:
    """py-spy record of the broker during each of our phases (raw = collapsed stacks)."""

    def __init__(self, binary: str | None, directory: Path | None, extra: tuple[str, ...] = ()) -> None:
        self.binary = binary
        self.directory = directory
        self.extra = extra
        self.current: Child | None = None
        self.outputs: list[Path] = []

    @contextlib.contextmanager
    def recording(self, broker: Child, name: str, seconds: float) -> Iterator[None]:
        if self.binary is None or self.directory is None:
            yield
            return
        output = self.directory / f"{name}.txt"
        argv = [
            self.binary, "record", "--pid", str(broker.pid), "--rate", "250", "--format", "raw",
            "--duration", str(max(1, math.ceil(seconds))), "--output", str(output), "--threads",
            *self.extra,
        ]  # fmt: skip
        if "--native" not in self.extra:  # native stacks need the process paused per sample
            argv.append("--nonblocking")
        child = Child("py-spy", argv, self.directory / f"{name}.log")
        time.sleep(0.3)  # attach before the load starts
        try:
            yield
        finally:
            with contextlib.suppress(subprocess.TimeoutExpired):
                child.proc.wait(timeout=seconds + 15)
            child.stop(5)
            if output.exists():
                self.outputs.append(output)


def summarize_profile(path: Path, top: int = 12) -> list[str]:
    """Samples per thread, then the top functions (self and inclusive share of that thread's
    samples) of the two busiest threads, from a py-spy raw (collapsed stacks, --threads) profile."""
    threads: dict[str, int] = {}
    self_count: dict[str, dict[str, int]] = {}
    incl_count: dict[str, dict[str, int]] = {}
    for line in path.read_text(errors="replace").splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        n = int(count_text)
        frames = stack.split(";")
        thread = "all"
        if frames[0].startswith("thread ("):
            thread = frames[0].split(": ", 1)[-1]
            frames = frames[1:] or ["(no Python frame) (?)"]
        names = [_frame_name(f) for f in frames]
        threads[thread] = threads.get(thread, 0) + n
        own = self_count.setdefault(thread, {})
        own[names[-1]] = own.get(names[-1], 0) + n
        incl = incl_count.setdefault(thread, {})
        for name in set(names):
            incl[name] = incl.get(name, 0) + n
    if not threads:
        return [f"{path.name}: no samples"]
    busiest = sorted(threads.items(), key=lambda kv: -kv[1])
    lines = [f"{path.name}: samples per thread: " + ", ".join(f"{t} {n}" for t, n in busiest)]
    for thread, total in busiest[:2]:
        lines.append(f"  {thread} ({total} samples): self% incl% function")
        for name, n in sorted(self_count[thread].items(), key=lambda kv: -kv[1])[:top]:
            lines.append(f"    {n / total:6.1%} {incl_count[thread][name] / total:6.1%}  {name}")
    return lines


def _frame_name(frame: str) -> str:
    """`func (path/to/file.py:123)` -> `file.py:func` (line numbers dropped to aggregate)."""
    name, _, where = frame.partition(" (")
    file = where.rsplit(":", 1)[0].rstrip(")")
    marker = "site-packages/"
    if "rocketlite/" in file:
        file = "rocketlite/" + file.split("rocketlite/", 1)[1]
    elif marker in file:
        file = file.split(marker, 1)[1]
    else:
        file = Path(file).name
    return f"{file}:{name}"


# -- the run --------------------------------------------------------------------------------------
@dataclass(slots=True)
class Settings:
    plan: Plan
    redis_binary: str | None
    work: Path
    profiler: Profiler
    latency_rate: float = LATENCY_RATE
    redis_version: str = ""
    peak_disk: int = 0


DISTURBED: list[str] = []  # phases during which other processes used the machine


def note_disturbed(side: str, what: str, res: PhaseResult) -> None:
    if res.elapsed > 0 and res.other_cpu / res.elapsed >= OTHER_LOAD:
        DISTURBED.append(f"{side} {what} ({res.other_cpu / res.elapsed:.0%})")


def print_phase(side: str, what: str, res: PhaseResult, server: str) -> None:
    note_disturbed(side, what, res)
    extra = ""
    if res.per_queue:
        extra = f", per queue {min(res.per_queue):,}..{max(res.per_queue):,}"
    if res.catch_up is not None:
        extra += (
            f"; dispatched {res.catch_up:.2f} s after the last ack "
            f"(= {res.messages / (res.elapsed + res.catch_up):,.0f} msgs/s consumable)"
        )
    out(
        f"  {side:<10} {what:<42} {res.messages:>9,} msgs in {res.elapsed:5.2f} s = "
        f"{res.rate:>9,.0f} msgs/s; {res.cpu_text(server)}{extra}"
    )


def print_latency(side: str, res: PhaseResult, server: str, rate: float) -> None:
    note_disturbed(side, "e2e latency", res)
    lat = res.latencies_ms
    lost = res.sent - res.messages
    out(
        f"  {side:<10} {f'e2e latency @ {rate:,.0f} msgs/s':<42} sent {res.sent:,}, "
        f"received {res.messages:,}{f' ({lost:,} missing)' if lost else ''}: "
        f"p50 {percentile(lat, 0.5):.2f} ms, "
        f"p99 {percentile(lat, 0.99):.2f} ms, p99.9 {percentile(lat, 0.999):.2f} ms, "
        f"max {lat[-1] if lat else math.nan:.1f} ms; {res.cpu_text(server)}"
    )
    ack = res.ack_latencies_ms
    out(
        f"  {'':<10} {'  of which send -> ack (the send path)':<42} "
        f"p50 {percentile(ack, 0.5):.2f} ms, p99 {percentile(ack, 0.99):.2f} ms, "
        f"max {ack[-1] if ack else math.nan:.1f} ms"
    )


def ratio(ours: float | None, redis: float | None) -> float | None:
    if ours is None or not redis:
        return None
    return ours / redis


@dataclass(slots=True)
class SideResults:
    """One server's figures for one group (durability x body size)."""

    batch: PhaseResult
    single: PhaseResult
    consume: PhaseResult | None = None
    latency: PhaseResult | None = None
    pull_problem: str = ""


async def settle() -> None:
    """Write back dirty pages left by the previous phase so they do not land in the next one."""
    await asyncio.get_running_loop().run_in_executor(None, os.sync)
    await asyncio.sleep(0.2)


def phase_cap(plan: Plan, size: int) -> int:
    """Messages per connection and produce phase: the byte cap, whole batches."""
    return max(BATCH, plan.phase_cap_bytes // size // CONNECTIONS // BATCH * BATCH)


async def run_ours(s: Settings, work: Path, sync: bool, size: int) -> SideResults:
    plan = s.plan
    name = f"{'sync' if sync else 'async'}-{size}"
    broker, port = start_broker(work, sync, set())
    conns: list[Connection] = []
    try:
        await wait_listening(broker, port)
        conns = await open_broker(port, CONNECTIONS)
        body = os.urandom(size)
        budget = Budget(plan.seconds, phase_cap(plan, size))

        def meter() -> Meter:
            return Meter(broker)

        # Warm-up: create the topics (and their 16 queues) and touch every connection.
        for topic in ("BenchBatch", "BenchSingle"):
            warm = [submit(c, Sender(topic, q, batch=False).single(body)) for q, c in enumerate(conns)]
            for resp in await asyncio.gather(*warm):
                if resp.code != ResponseCode.SUCCESS:
                    raise RuntimeError(f"warm-up send to {topic}: code {resp.code} {resp.remark}")
        await ours_wait_dispatched(conns[0], "BenchSingle", [1] * CONNECTIONS, pull_optional=True)

        async def caught_up(res: PhaseResult, topic: str) -> None:
            """Wait until the phase's messages are dispatched (the reput thread would otherwise
            still be working through them, sharing the GIL, during the next phase)."""
            t0 = time.perf_counter()
            # Queue q holds one warm-up message, then the phase's.
            targets = [n + 1 for n in res.per_queue]
            if await ours_wait_dispatched(conns[0], topic, targets, pull_optional=True):
                res.catch_up = time.perf_counter() - t0

        await settle()
        with s.profiler.recording(broker, f"{name}-batch", plan.seconds):
            batch = await ours_produce_batch(conns, "BenchBatch", body, budget, meter)
        await caught_up(batch, "BenchBatch")
        print_phase("rocketlite", f"batched produce ({BATCH}/request)", batch, "broker")
        await settle()
        with s.profiler.recording(broker, f"{name}-single", plan.seconds):
            single = await ours_produce_single(conns, "BenchSingle", body, budget, meter)
        await caught_up(single, "BenchSingle")
        print_phase("rocketlite", f"single produce (window {WINDOW}/conn)", single, "broker")
        res = SideResults(batch, single)
        if sync:
            return res
        # Consume what the batched phase wrote (queue q also holds one warm-up message first).
        try:
            await settle()
            with s.profiler.recording(broker, f"{name}-consume", plan.seconds):
                res.consume = await ours_consume(
                    conns, "BenchBatch", batch.per_queue, plan.seconds * 2, meter
                )
            print_phase("rocketlite", f"consume, pull {PULL_BATCH}/request", res.consume, "broker")
            await settle()
            with s.profiler.recording(broker, f"{name}-latency", plan.latency_seconds):
                res.latency = await ours_latency(
                    port, "BenchLatency", size, plan.latency_seconds, s.latency_rate, meter
                )
            print_latency("rocketlite", res.latency, "broker", s.latency_rate)
        except PullUnsupportedError as exc:
            res.pull_problem = str(exc)
            out(f"  rocketlite consume and e2e latency: n/a: {exc}")
        return res
    finally:
        close_all(conns)
        await finish_server(s, broker, work / "store")


async def run_redis(
    s: Settings, binary: str, work: Path, sync: bool, size: int, consume_targets: list[int]
) -> SideResults:
    plan = s.plan
    redis, port = start_redis(binary, work, sync, set())
    conns: list[RespConnection] = []
    try:
        version = await redis_ready(port, redis)
        s.redis_version = version
        conns = await open_redis(port, CONNECTIONS)
        body = os.urandom(size)
        budget = Budget(plan.seconds, phase_cap(plan, size))

        def meter() -> Meter:
            return Meter(redis)

        await settle()
        batch = await redis_produce_batch(conns, "batch", body, budget, meter)
        print_phase("redis", f"XADD pipelined {BATCH} deep", batch, "redis")
        await settle()
        single = await redis_produce_single(conns, "single", body, budget, meter)
        print_phase("redis", f"XADD, window {WINDOW}/conn", single, "redis")
        res = SideResults(batch, single)
        if sync:
            return res
        targets = [min(a, b) for a, b in zip(consume_targets, batch.per_queue, strict=True)]
        await settle()
        res.consume = await redis_consume(conns, "batch", targets, plan.seconds * 2, meter)
        print_phase("redis", f"XRANGE COUNT {XRANGE_COUNT}", res.consume, "redis")
        await settle()
        res.latency = await redis_latency(port, "lat", size, plan.latency_seconds, s.latency_rate, meter)
        print_latency("redis", res.latency, "redis", s.latency_rate)
        return res
    finally:
        close_redis(conns)
        await finish_server(s, redis, work / "redis")


async def finish_server(s: Settings, child: Child, data: Path) -> None:
    """Record the disk it used, stop it, delete its data."""
    usage = disk_usage(data)
    s.peak_disk = max(s.peak_disk, usage)
    await asyncio.get_running_loop().run_in_executor(None, child.stop)
    out(f"  ({child.name} stopped; its data took {usage / MIB:,.0f} MiB)")
    shutil.rmtree(data, ignore_errors=True)


def lat_text(res: PhaseResult | None) -> str:
    if res is None:
        return "n/a"
    lat = res.latencies_ms
    missing = res.sent - res.messages
    text = f"p50 {percentile(lat, 0.5):.2f} ms, p99 {percentile(lat, 0.99):.2f} ms"
    return text + (f" ({missing:,} of {res.sent:,} not received)" if missing else "")


async def run_group(s: Settings, report: Report, sync: bool, size: int) -> None:
    dur_ours = "SYNC_FLUSH" if sync else "ASYNC_FLUSH"
    dur_redis = "appendfsync always" if sync else "appendfsync everysec"
    durability = f"{dur_ours} vs {dur_redis}"
    body = fmt_size(size)
    work = s.work / f"{'sync' if sync else 'async'}-{size}"
    work.mkdir()
    out(f"## {durability}, {body} bodies")
    try:
        ours = await run_ours(s, work, sync, size)
        theirs: SideResults | None = None
        if s.redis_binary is not None:
            theirs = await run_redis(s, s.redis_binary, work, sync, size, ours.batch.per_queue)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    out()

    def rate_of(res: PhaseResult | None) -> float | None:
        return None if res is None else res.rate

    def sat(o: PhaseResult | None, t: PhaseResult | None) -> str:
        return f"{o.bound('broker') if o else '-'} / {t.bound('redis') if t else '-'}"

    t_batch, t_single, t_consume, t_latency = (
        (theirs.batch, theirs.single, theirs.consume, theirs.latency) if theirs else (None, None, None, None)
    )
    r = ratio(ours.batch.rate, rate_of(t_batch))
    report.rows.append(
        Row(
            f"batched produce: SEND_BATCH_MESSAGE of {BATCH} vs XADD pipelined {BATCH} deep",
            durability, body, fmt_rate(ours.batch.rate), fmt_rate(rate_of(t_batch)), r,
            f"ratio >= {GOAL_BATCH_RATIO:.1f}", None if r is None else r >= GOAL_BATCH_RATIO,
            sat(ours.batch, t_batch),
        )
    )  # fmt: skip
    report.rows.append(
        Row(
            f"single-message produce, {WINDOW} in flight per connection",
            durability, body, fmt_rate(ours.single.rate), fmt_rate(rate_of(t_single)),
            ratio(ours.single.rate, rate_of(t_single)),
            f">= {GOAL_SINGLE_RATE:,} msgs/s", ours.single.rate >= GOAL_SINGLE_RATE,
            sat(ours.single, t_single),
        )
    )  # fmt: skip
    if sync:
        return
    r = ratio(rate_of(ours.consume), rate_of(t_consume))
    report.rows.append(
        Row(
            f"consume: PULL_MESSAGE of {PULL_BATCH} vs XRANGE COUNT {XRANGE_COUNT}",
            durability, body, fmt_rate(rate_of(ours.consume)), fmt_rate(rate_of(t_consume)), r,
            f"ratio >= {GOAL_CONSUME_RATIO:.1f}", None if r is None else r >= GOAL_CONSUME_RATIO,
            sat(ours.consume, t_consume),
        )
    )  # fmt: skip
    passed = None
    if ours.latency is not None:
        lat = ours.latency
        passed = percentile(lat.latencies_ms, 0.99) <= GOAL_P99_MS and lat.messages == lat.sent
    report.rows.append(
        Row(
            f"e2e latency at {s.latency_rate:,.0f} msgs/s: send -> long-polling pull / XREAD BLOCK",
            durability, body, lat_text(ours.latency), lat_text(t_latency),
            None, f"p99 <= {GOAL_P99_MS:.0f} ms", passed,
            sat(ours.latency, t_latency),
        )
    )  # fmt: skip
    if ours.pull_problem and ours.pull_problem not in report.notes:
        report.notes.append(ours.pull_problem)


async def run(s: Settings, report: Report) -> None:
    groups = [(False, size) for size in s.plan.sizes]
    if s.plan.sync:
        groups += [(True, size) for size in s.plan.sizes]
    for sync, size in groups:
        await run_group(s, report, sync, size)


def summary(s: Settings, report: Report, elapsed: float) -> None:
    out("## Summary (markdown)")
    out()
    redis = f"Redis {s.redis_version}" if s.redis_version else "Redis not run"
    out(
        f"Loopback, one run ({s.plan.name}), {os.cpu_count()} cores, Python {platform.python_version()}, "
        f"{LOOP_KIND}; {CONNECTIONS} connections per side; phases <= {s.plan.seconds:g} s "
        f"(and <= {s.plan.phase_cap_bytes // MIB} MiB of bodies per produce phase). "
        f"{'; '.join([SOURCE, redis, *report.notes])}."
    )
    out(
        "Load generator: this process, one asyncio loop. rocketlite was driven by rocketlite's own remoting "
        "client (`rocketlite.remoting.connection.Connection`, requests pipelined by opaque); Redis by the "
        "minimal pipelined RESP client in `bench/broker_bench.py`."
    )
    out()
    out("| Benchmark | Durability | Body | rocketlite | Redis | ours/Redis | Goal | | Saturated |")
    out("|---|---|---|---:|---:|---:|---|---|---|")
    for r in report.rows:
        rt = "" if r.ratio is None else f"{r.ratio:.2f}"
        out(
            f"| {r.benchmark} | {r.durability} | {r.body} | {r.ours} | {r.redis} | {rt} | {r.goal} "
            f"| {mark(r.passed)} | {r.saturated} |"
        )
    out()
    out(
        f"Saturated (ours / Redis): the processes at >= {SATURATED:.0%} of a core during the phase "
        "(the server, and/or `load gen`, this process). A figure measured while only the load generator "
        "was saturated says more about the Python client than about the server."
    )
    out()
    if DISTURBED:
        out(
            f"WARNING: other processes used >= {OTHER_LOAD:.0%} of a core during {len(DISTURBED)} phase(s): "
            f"{'; '.join(DISTURBED)}. Re-run on an idle machine before quoting those figures."
        )
        out()
    misses = [f"{r.benchmark} ({r.durability}, {r.body})" for r in report.rows if r.passed is False]
    out(
        f"Total benchmark time {elapsed:.0f} s; peak disk of one server's data {s.peak_disk / MIB:,.0f} MiB; "
        f"goals missed: {'; '.join(misses) if misses else 'none'}"
    )
    if report.profiles:
        out()
        out("## Broker profiles (py-spy, self time of the broker process)")
        for p in report.profiles:
            out()
            for line in summarize_profile(p):
                out(line)


LOOP_KIND = "asyncio"
SOURCE = "rocketlite"


def source_version() -> str:
    """`rocketlite <commit>` (+ "with uncommitted changes in src/") when run from a git checkout."""
    root = Path(__file__).resolve().parent.parent
    try:
        head = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
            timeout=10,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--", "src"],
            capture_output=True,
            text=True,
            check=True,
            timeout=10,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "rocketlite (not a git checkout)"
    return f"rocketlite {head}{' with uncommitted changes in src/' if dirty else ''}"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0] if __doc__ else None)
    ap.add_argument("--quick", action="store_true", help="short phases (< 30 s in all), for the smoke test")
    ap.add_argument("--no-redis", action="store_true", help="run our broker only")
    ap.add_argument("--redis-server", default=None, help="redis-server binary (default: from PATH)")
    ap.add_argument(
        "--dir",
        type=Path,
        default=None,
        help="directory for the servers' data (a temporary subdirectory is created and removed); "
        "default: the current directory's filesystem",
    )
    ap.add_argument(
        "--profile-flags",
        default="",
        help="extra py-spy record flags for --profile, e.g. '--native' or '--gil'",
    )
    ap.add_argument(
        "--latency-rate",
        type=float,
        default=LATENCY_RATE,
        help=f"send rate of the latency phase, msgs/s (default {LATENCY_RATE:,}: the goal's rate)",
    )
    ap.add_argument("--seconds", type=float, default=None, help="length of each produce/consume phase")
    ap.add_argument(
        "--profile",
        type=Path,
        default=None,
        metavar="DIR",
        help="record the broker with py-spy during each of our phases into DIR (raw collapsed stacks) "
        "and print its hot spots (needs py-spy: `.venv/bin/pip install py-spy`); py-spy takes CPU, so "
        "its phases run slower and are flagged as disturbed",
    )
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    global LOOP_KIND, SOURCE
    args = parse_args(argv)
    SOURCE = source_version()
    plan = QUICK if args.quick else FULL
    if args.seconds is not None:
        if args.seconds <= 0:
            raise SystemExit("--seconds must be positive")
        plan = Plan(
            plan.name, args.seconds, plan.latency_seconds, plan.phase_cap_bytes, plan.sizes, plan.sync
        )
    redis_binary: str | None = None
    if not args.no_redis:
        redis_binary = args.redis_server or shutil.which("redis-server")
        if redis_binary is None and Path("/usr/bin/redis-server").exists():
            redis_binary = "/usr/bin/redis-server"
        if redis_binary is None or not os.access(redis_binary, os.X_OK):
            print(REDIS_INSTALL_HINT, file=sys.stderr)
            return 2
    spy: str | None = None
    if args.profile is not None:
        spy = find_py_spy()
        if spy is None:
            print("py-spy not found: install it with `.venv/bin/pip install py-spy`", file=sys.stderr)
            return 2
        args.profile.mkdir(parents=True, exist_ok=True)
    parent = args.dir if args.dir is not None else Path.cwd()
    parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=".broker-bench-", dir=parent))
    loop = new_event_loop()
    LOOP_KIND = f"{type(loop).__module__.split('.')[0]} event loop"
    settings = Settings(
        plan,
        redis_binary,
        work,
        Profiler(spy, args.profile, tuple(args.profile_flags.split())),
        args.latency_rate,
    )
    report = Report()
    t0 = time.perf_counter()
    try:
        out(f"# rocketlite broker vs Redis Streams ({plan.name}), {SOURCE}, work dir {work}")
        out(
            f"load generator: this process ({LOOP_KIND}); rocketlite <- rocketlite.remoting.Connection; "
            f"Redis <- RespConnection (this file){'' if redis_binary else '; Redis skipped (--no-redis)'}"
        )
        out()
        # Ctrl-C / SIGTERM cancel the run: its `finally` blocks stop the servers in order.
        main_task = loop.create_task(run(settings, report))
        received: list[int] = []

        def interrupt(signum: int) -> None:
            received.append(signum)
            main_task.cancel()

        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, interrupt, signum)
        try:
            loop.run_until_complete(main_task)
        except asyncio.CancelledError:
            if not received:
                raise
            print(f"interrupted ({signal.Signals(received[0]).name}): servers stopped", file=sys.stderr)
            return 128 + received[0]
        report.profiles = settings.profiler.outputs
        summary(settings, report, time.perf_counter() - t0)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    finally:
        stop_all_children()
        pending = asyncio.all_tasks(loop)
        for task in pending:
            task.cancel()
        with contextlib.suppress(Exception):
            if pending:
                loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            loop.run_until_complete(asyncio.sleep(0.05))  # run the callbacks of closed connections
        loop.close()
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
