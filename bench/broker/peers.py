"""The Redis Streams peer of the broker benchmark: the redis-server process, and a pipelining RESP
client for what redis-benchmark cannot do: the readiness check and the latency phase (paced XADDs
with the send time in the value, XREAD BLOCK consumers). Produce and consume are measured with
redis-benchmark (bench/broker/pool.py)."""

from __future__ import annotations

import asyncio
import functools
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.support.ports import free_port

from bench.broker.config import CONNECTIONS, XRANGE_COUNT
from bench.broker.loadgen import LatencyLog, latency_body, paced
from bench.broker.report import Meter, PhaseResult
from bench.broker.servers import Child, wait_listening


def start_redis(binary: str, work: Path, always: bool, avoid: set[int]) -> tuple[Child, int]:
    port = free_port(avoid)
    data = work / "redis"
    data.mkdir()
    argv = [
        binary, "--port", str(port), "--bind", "127.0.0.1", "--dir", str(data),
        "--appendonly", "yes", "--appendfsync", "always" if always else "everysec", "--save", "",
    ]  # fmt: skip
    return Child("redis-server", argv, work / "redis.log"), port


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
