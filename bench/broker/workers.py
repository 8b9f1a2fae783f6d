"""Load-generator processes for our broker: prebuilt frames out, responses counted.

Each worker is a separate process (`multiprocessing`, spawn) with its own event loop (uvloop when
installed) and its share of the 16 connections (queue q goes to worker q % procs), so the load
generator can use more than one core when one process would saturate. A job runs in three steps
driven by the parent over a pipe: the worker opens its connections and renders its frames
(`prepare`), answers "ready", waits for "go", runs, and sends back a `JobResult`. The parent reads
every process's CPU from /proc around the "go" .. result window (bench/broker/pool.py).

Per message the worker does what redis-benchmark does per command: write a prebuilt buffer, find
the answer's end, read its code and opaque (bench/broker/frames.py) and count. Jobs:

* produce (`batch` / `single`): `window` requests in flight per connection, each slot with its
  own fixed opaque and a ring of prebuilt frames (distinct UNIQ_KEYs); an answer re-sends its
  slot's next frame until the per-connection cap or the deadline;
* `consume`: one PULL_MESSAGE of 32 in flight per queue, the offset patched into the frame; the
  count comes from nextBeginOffset (the subscription is "*": every unit is a message);
* `latency`: producers paced at this worker's share of the rate, the send time (CLOCK_MONOTONIC,
  perf_counter_ns) in the first 8 bytes of the body, and long-polling consumers on the same queues
  in the same process, so send and receive times come from one clock.
"""

from __future__ import annotations

import asyncio
import time
import traceback
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from multiprocessing.connection import Connection as Pipe
from typing import Any, Final

from bench.broker.config import BATCH, PACE_TICK, SEND_NS
from bench.broker.frames import (
    OPAQUE_BASE,
    FrameTemplate,
    body_heads,
    ext_int,
    opaque_of,
    response_code_opaque,
)
from bench.broker.loadgen import Sender, pull_request, pull_template
from rocketlite.protocol.codes import ResponseCode, SerializeType
from rocketlite.protocol.wire.frame import FRAME_PREFIX, HEADER_LENGTH_MASK
from rocketlite.runtime import new_event_loop

VARIANTS: Final = 4  # prebuilt frames per slot (distinct UNIQ_KEYs), sent in turn
_SUCCESS: Final = int(ResponseCode.SUCCESS)
_NOT_YET: Final = frozenset({int(ResponseCode.PULL_NOT_FOUND), int(ResponseCode.PULL_RETRY_IMMEDIATELY)})
_NOT_SUPPORTED: Final = int(ResponseCode.REQUEST_CODE_NOT_SUPPORTED)


@dataclass(frozen=True, slots=True)
class Job:
    """One phase's work for one worker (picklable)."""

    kind: str  # "batch" | "single" | "consume" | "latency"
    topic: str
    queues: tuple[int, ...]  # the queues (= connections) this worker drives
    body_size: int = 0
    seconds: float = 0.0
    window: int = 1  # produce: requests in flight per connection
    cap_per_conn: int = 0  # produce: messages per connection
    targets: tuple[int, ...] = ()  # consume: read each queue up to this offset
    start_offsets: tuple[int, ...] = ()  # latency: consumers start here
    rate: float = 0.0  # latency: this worker's msgs/s
    grace: float = 3.0  # latency: how long a backlog may take to drain


@dataclass(slots=True)
class JobResult:
    messages: int = 0
    per_queue: list[int] = field(default_factory=list)
    start: float = 0.0  # perf_counter of the first request (CLOCK_MONOTONIC: same in every process)
    end: float = 0.0  # perf_counter of the last answer
    failures: list[str] = field(default_factory=list)
    latencies_ms: list[float] = field(default_factory=list)
    ack_ms: list[float] = field(default_factory=list)
    lag_ms: list[float] = field(default_factory=list)  # latency: how late each send left vs its slot
    sent: int = 0
    error: str = ""  # the traceback of a worker that failed


Handler = Callable[[int, int, bytearray, int, int, int], None]  # code, opaque, buf, h0, h1, end


class Counted(asyncio.Protocol):
    """A connection that cuts answers out of the stream and hands code, opaque and the frame's
    positions to a handler; nothing is decoded unless the handler asks."""

    def __init__(self, binary: bool) -> None:
        self.binary = binary
        self.buf = bytearray()
        self.handler: Handler = _unexpected
        self.transport: asyncio.Transport | None = None
        self.lost = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's is not a subclass

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True

    def write(self, frame: bytes) -> None:
        assert self.transport is not None
        self.transport.write(frame)

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()

    def data_received(self, data: bytes) -> None:
        buf = self.buf
        buf += data
        pos, end = 0, len(buf)
        unpack = FRAME_PREFIX.unpack_from
        binary, handler = self.binary, self.handler
        while end - pos >= 8:
            length, word = unpack(buf, pos)
            stop = pos + 4 + length
            if stop > end:
                break
            h0 = pos + 8
            h1 = h0 + (word & HEADER_LENGTH_MASK)
            code, opaque = response_code_opaque(buf, h0, h1, binary)
            handler(code, opaque, buf, h0, h1, stop)
            pos = stop
        if pos:
            del buf[:pos]


def _unexpected(code: int, opaque: int, _buf: bytearray, _h0: int, _h1: int, _end: int) -> None:
    raise RuntimeError(f"answer (code {code}, opaque {opaque}) with no request in flight")


async def connect(port: int, n: int, binary: bool) -> list[Counted]:
    loop = asyncio.get_running_loop()
    conns: list[Counted] = []
    for _ in range(n):
        _t, conn = await loop.create_connection(lambda: Counted(binary), "127.0.0.1", port)
        conns.append(conn)
    return conns


# -- produce -------------------------------------------------------------------------------------
class Produce:
    """`window` requests in flight per connection; an answer re-sends its slot's next frame."""

    def __init__(self, job: Job, conns: list[Counted], serialize: SerializeType) -> None:
        self.job, self.conns = job, conns
        batch = job.kind == "batch"
        self.per_request = BATCH if batch else 1
        body = bytes(range(256)) * (job.body_size // 256 + 1)
        body = body[: job.body_size]
        # frames[i][slot][variant]
        self.frames: list[list[list[bytes]]] = []
        for q in job.queues:
            sender = Sender(job.topic, q, batch=batch, serialize=serialize)
            slots = []
            for slot in range(job.window):
                variants = []
                for _ in range(VARIANTS):
                    cmd = sender.batch_of(body, BATCH) if batch else sender.single(body)
                    variants.append(FrameTemplate(cmd).render(opaque_of(slot)))
                slots.append(variants)
            self.frames.append(slots)
        n = len(conns)
        self.acked = [0] * n
        self.issued = [0] * n
        self.inflight = [0] * n
        self.turn = [[0] * job.window for _ in range(n)]
        self.result = JobResult(per_queue=[0] * n)
        self.open = n
        self.done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        for i, conn in enumerate(conns):
            conn.handler = self._handler(i)

    def _handler(self, i: int) -> Handler:
        conn, frames, turn = self.conns[i], self.frames[i], self.turn[i]
        per, cap, res = self.per_request, self.job.cap_per_conn, self.result
        acked, issued, inflight = self.acked, self.issued, self.inflight
        clock = time.perf_counter

        def answered(code: int, opaque: int, _b: bytearray, _h0: int, _h1: int, _e: int) -> None:
            inflight[i] -= 1
            if code == _SUCCESS:
                acked[i] += per
            elif len(res.failures) < 10:
                res.failures.append(f"send answered with code {code}")
            if not res.failures and issued[i] < cap and clock() < self.deadline:
                slot = opaque - OPAQUE_BASE
                k = turn[slot] = (turn[slot] + 1) % VARIANTS
                conn.write(frames[slot][k])
                issued[i] += per
                inflight[i] += 1
            elif inflight[i] == 0:
                self._finish()

        return answered

    def _finish(self) -> None:
        self.open -= 1
        if self.open == 0 and not self.done.done():
            self.result.end = time.perf_counter()
            self.done.set_result(None)

    async def run(self) -> JobResult:
        res = self.result
        res.start = time.perf_counter()
        self.deadline = res.start + self.job.seconds
        for i, conn in enumerate(self.conns):
            for slot in range(self.job.window):
                if self.issued[i] >= self.job.cap_per_conn:
                    break
                conn.write(self.frames[i][slot][0])
                self.issued[i] += self.per_request
                self.inflight[i] += 1
            if self.inflight[i] == 0:
                self._finish()
        await self.done
        res.per_queue = list(self.acked)
        res.messages = sum(self.acked)
        return res


# -- consume ------------------------------------------------------------------------------------
class Consume:
    """One PULL_MESSAGE in flight per queue, from offset 0 up to the queue's target."""

    def __init__(self, job: Job, conns: list[Counted], serialize: SerializeType) -> None:
        self.job, self.conns = job, conns
        self.templates = [
            FrameTemplate(
                pull_request(pull_template(job.topic, q, suspend_ms=0), 0, serialize),
                offset_key="queueOffset",
            )
            for q in job.queues
        ]
        self.offsets = [0] * len(conns)
        self.result = JobResult(per_queue=[0] * len(conns))
        self.open = len(conns)
        self.loop = asyncio.get_running_loop()
        self.done: asyncio.Future[None] = self.loop.create_future()
        for i, conn in enumerate(conns):
            conn.handler = self._handler(i)

    def _send(self, i: int) -> None:
        self.conns[i].write(self.templates[i].render(opaque_of(0), offset=self.offsets[i]))

    def _handler(self, i: int) -> Handler:
        target, res, offsets = self.job.targets[i], self.result, self.offsets
        binary = self.conns[i].binary
        clock = time.perf_counter

        def answered(code: int, _opaque: int, buf: bytearray, h0: int, h1: int, _e: int) -> None:
            if code == _SUCCESS:
                nbo = ext_int(buf, h0, h1, "nextBeginOffset", binary)
                if nbo is None:
                    res.failures.append("pull answer without nextBeginOffset")
                else:
                    res.per_queue[i] += nbo - offsets[i]
                    offsets[i] = nbo
            elif code in _NOT_YET:
                self.loop.call_later(0.001, self._send, i)
                return
            else:
                res.failures.append(f"pull answered with code {code}")
            if not res.failures and offsets[i] < target and clock() < self.deadline:
                self._send(i)
                return
            self.open -= 1
            if self.open == 0 and not self.done.done():
                res.end = clock()
                self.done.set_result(None)

        return answered

    async def run(self) -> JobResult:
        res = self.result
        res.start = time.perf_counter()
        self.deadline = res.start + self.job.seconds
        for i in range(len(self.conns)):
            self._send(i)
        await self.done
        res.messages = sum(min(g, t) for g, t in zip(res.per_queue, self.job.targets, strict=True))
        return res


# -- latency -------------------------------------------------------------------------------------
class Latency:
    """Paced single sends with the send time in the body; long-polling pulls on the same queues."""

    def __init__(
        self, job: Job, producers: list[Counted], consumers: list[Counted], serialize: SerializeType
    ) -> None:
        self.job, self.producers, self.consumers = job, producers, consumers
        pad = bytes(job.body_size)
        self.sends = [
            [
                FrameTemplate(Sender(job.topic, q, batch=False, serialize=serialize).single(pad))
                for _ in range(VARIANTS)
            ]
            for q in job.queues
        ]
        self.pulls = [
            FrameTemplate(
                pull_request(pull_template(job.topic, q, suspend_ms=1000), 0, serialize),
                offset_key="queueOffset",
            )
            for q in job.queues
        ]
        self.offsets = list(job.start_offsets)
        self.sent_at: dict[int, int] = {}
        self.result = JobResult()
        self.t_start = time.perf_counter_ns()
        self.stopping = False
        for conn in producers:
            conn.handler = self._on_ack
        for i, conn in enumerate(consumers):
            conn.handler = self._on_pull(i)

    def _on_ack(self, code: int, opaque: int, _b: bytearray, _h0: int, _h1: int, _e: int) -> None:
        t0 = self.sent_at.pop(opaque, None)
        if t0 is not None:
            self.result.ack_ms.append((time.perf_counter_ns() - t0) / 1e6)
        if code != _SUCCESS and len(self.result.failures) < 10:
            self.result.failures.append(f"send answered with code {code}")

    def _pull(self, i: int) -> None:
        if not self.stopping and not self.consumers[i].lost:
            self.consumers[i].write(self.pulls[i].render(opaque_of(i), offset=self.offsets[i]))

    def _on_pull(self, i: int) -> Handler:
        res, binary = self.result, self.consumers[i].binary

        def answered(code: int, _opaque: int, buf: bytearray, h0: int, h1: int, end: int) -> None:
            now = time.perf_counter_ns()
            if code == _SUCCESS:
                for head in body_heads(buf, h1, end, SEND_NS.size):
                    (sent_ns,) = SEND_NS.unpack(head)
                    if sent_ns >= self.t_start:
                        res.latencies_ms.append((now - sent_ns) / 1e6)
                        res.messages += 1
                        res.end = time.perf_counter()
            elif code not in _NOT_YET and len(res.failures) < 10:
                res.failures.append(f"long poll answered with code {code}")
            nbo = ext_int(buf, h0, h1, "nextBeginOffset", binary)
            if nbo is not None:
                self.offsets[i] = nbo
            self._pull(i)

        return answered

    def _send(self, k: int, due_ns: int) -> None:
        """Send message k, stamped with the time it leaves (open loop: nothing waits for answers).
        How late it leaves against its slot in the schedule (`due_ns`) is kept apart (`lag_ms`),
        so a stalled generator shows instead of hiding inside the latency (coordinated omission)."""
        i = k % len(self.producers)
        opaque = opaque_of(k)
        now = time.perf_counter_ns()
        self.result.lag_ms.append(max(0, now - due_ns) / 1e6)
        self.sent_at[opaque] = now
        frame = self.sends[i][(k // len(self.producers)) % VARIANTS].render(
            opaque, body_head=SEND_NS.pack(now)
        )
        self.producers[i].write(frame)

    async def run(self) -> JobResult:
        res = self.result
        for i in range(len(self.consumers)):
            self._pull(i)
        await asyncio.sleep(0.2)  # let the first pulls reach the broker's hold service
        self.t_start = time.perf_counter_ns()
        res.start = time.perf_counter()
        start_ns = time.perf_counter_ns()
        rate, seconds = self.job.rate, self.job.seconds
        sent = 0
        total = round(seconds * rate)  # a late last tick still sends its share: exact counts
        while sent < total:
            elapsed = time.perf_counter() - res.start
            due = min(total, int(elapsed * rate) + 1)
            while sent < due:
                self._send(sent, start_ns + int(sent * 1e9 / rate))
                sent += 1
            await asyncio.sleep(max(PACE_TICK, sent / rate - (time.perf_counter() - res.start)))
        res.sent = sent
        grace = time.perf_counter() + self.job.grace
        while (self.sent_at or res.messages < sent) and time.perf_counter() < grace:
            await asyncio.sleep(0.005)
        self.stopping = True
        if self.sent_at:
            res.failures.append(f"{len(self.sent_at)} sends not acknowledged")
        if res.end == 0.0:
            res.end = time.perf_counter()
        return res


# -- the process -----------------------------------------------------------------------------------
async def prepare(
    job: Job, port: int, serialize: SerializeType
) -> tuple[Callable[[], Coroutine[Any, Any, JobResult]], list[Counted]]:
    binary = serialize is SerializeType.ROCKETMQ
    conns = await connect(port, len(job.queues), binary)
    runner: Produce | Consume | Latency
    if job.kind in ("batch", "single"):
        runner = Produce(job, conns, serialize)
    elif job.kind == "consume":
        runner = Consume(job, conns, serialize)
    elif job.kind == "latency":
        consumers = await connect(port, len(job.queues), binary)
        conns += consumers
        runner = Latency(job, conns[: len(job.queues)], consumers, serialize)
    else:
        raise ValueError(f"unknown job kind {job.kind!r}")
    return runner.run, conns


def worker_main(pipe: Pipe, port: int, serialize_name: str) -> None:
    """The worker's loop: a Job is answered "ready" (or a JobResult with the error), then "go" with
    the JobResult (anything else cancels the job); None ends the process."""
    serialize = SerializeType[serialize_name]
    loop = new_event_loop()
    asyncio.set_event_loop(loop)
    try:
        while True:
            job = pipe.recv()
            if job is None:
                return
            conns: list[Counted] = []
            try:
                try:
                    run, conns = loop.run_until_complete(prepare(job, port, serialize))
                except Exception:
                    pipe.send(JobResult(error=traceback.format_exc()))
                    continue
                pipe.send("ready")
                if pipe.recv() != "go":
                    continue
                try:
                    result = loop.run_until_complete(run())
                except Exception:
                    result = JobResult(error=traceback.format_exc())
                pipe.send(result)
            finally:
                for c in conns:
                    c.close()
                loop.run_until_complete(asyncio.sleep(0.01))  # let the transports close
    finally:
        loop.close()
