"""The 5.x benchmark run: one broker (ASYNC_FLUSH, its gRPC endpoint on), the 4.x remoting phases
and the 5.x gRPC phases on the same broker in one run, then the side-by-side table.

Phases, 1 KiB bodies (`--size`):
1. produce: 4.x SEND_MESSAGE_V2 (window 32 on each of 16 connections, bench/broker's frame-level
   generator) vs 5.x SendMessage, one message a call (what the 5.x clients send), `--window`
   calls in flight per generator process;
2. consume what phase 1 wrote: 4.x PULL_MESSAGE of 32 vs 5.x ReceiveMessage of 32 + one
   AckMessage per batch (POP: every message is acked);
3. end-to-end latency at `--latency-rate` msgs/s: send -> long-polling consumer (4.x PULL with
   SUSPEND, 5.x ReceiveMessage with long polling), send time in the body.
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.ports import free_port

from bench.broker.config import CONNECTIONS, WINDOW, out
from bench.broker.loadgen import close_all, latency_body, open_broker, ours_wait_dispatched
from bench.broker.pool import LoadGen
from bench.broker.report import PhaseResult, lat_text, print_latency, print_phase
from bench.broker.runner import settle, warm_up
from bench.broker.servers import start_broker, wait_listening
from bench.broker.workers import Job as Job4
from bench.grpc5.pool import GrpcLoadGen
from bench.grpc5.workers import Job as Job5

PHASES = ("consume", "latency")  # after produce, which always runs


@dataclass(slots=True)
class Settings:
    work: Path
    seconds: float = 5.0
    size: int = 1024
    procs: int = 2
    window: int = 64
    latency_rate: float = 1000.0
    latency_seconds: float = 5.0
    ack_behind: bool = False  # 5.x latency: receive again before the ack is answered
    cap: int = 200_000  # messages per produce phase and side (bounds the disk)
    phases: tuple[str, ...] = PHASES
    impl: str = "grpcio"  # grpcServerImpl: the 5.x endpoint's server (grpcio | nghttp2)


@dataclass(slots=True)
class Results:
    v4: dict[str, PhaseResult] = field(default_factory=dict)
    v5: dict[str, PhaseResult] = field(default_factory=dict)


async def run(s: Settings) -> Results:
    res = Results()
    grpc_port = free_port()
    extra = {"grpcServerPort": str(grpc_port), "grpcServerImpl": s.impl}
    broker, port = start_broker(s.work, False, {grpc_port}, extra=extra)
    gen4: LoadGen | None = None
    gen5: GrpcLoadGen | None = None
    conns = []
    try:
        await wait_listening(broker, port)
        await wait_listening(broker, grpc_port)
        conns = await open_broker(port, CONNECTIONS)
        for topic in ("Bench4", "Bench4Latency", "Bench5", "Bench5Latency"):
            await warm_up(conns, topic, latency_body(s.size)())
        gen4 = LoadGen(s.procs, port, "JSON", ("broker", broker.pid))
        gen5 = GrpcLoadGen(s.procs, f"127.0.0.1:{grpc_port}", ("broker", broker.pid))
        queues = list(range(CONNECTIONS))
        cap4 = s.cap // CONNECTIONS

        await settle()
        r = await gen4.run(
            Job4("single", "Bench4", (), s.size, s.seconds, window=WINDOW, cap_per_conn=cap4), queues
        )
        await ours_wait_dispatched(conns[0], "Bench4", [n + 1 for n in r.per_queue])
        print_phase("4.x", "SEND_MESSAGE_V2, window 32/conn", r)
        res.v4["send"] = r

        await settle()
        r = await gen5.run(
            Job5("send", "Bench5", body_size=s.size, seconds=s.seconds, window=s.window, cap=s.cap)
        )
        print_phase("5.x", f"SendMessage, {s.window} in flight/process", r)
        res.v5["send"] = r

        if "consume" in s.phases:
            await consume(s, res, gen4, gen5, queues)
        if "latency" in s.phases:
            await latency(s, res, gen4, gen5, queues)
    finally:
        close_all(conns)
        loop = asyncio.get_running_loop()
        for gen in (gen4, gen5):
            if gen is not None:
                await loop.run_in_executor(None, gen.close)
        broker.stop()
    return res


async def consume(s: Settings, res: Results, gen4: LoadGen, gen5: GrpcLoadGen, queues: list[int]) -> None:
    """What the produce phase wrote, read back: 4.x pulls, 5.x receives and acks."""
    await settle()
    targets = tuple(n + 1 for n in res.v4["send"].per_queue)
    r = await gen4.run(Job4("consume", "Bench4", (), seconds=s.seconds * 2, targets=targets), queues)
    print_phase("4.x", "PULL_MESSAGE of 32", r)
    res.v4["consume"] = r

    await settle()
    job = Job5("receive", "Bench5", group="Bench5Group", seconds=s.seconds * 4, window=4)
    r = await gen5.run(job)
    print_phase("5.x", "ReceiveMessage of 32 + AckMessage", r)
    written = res.v5["send"].messages + CONNECTIONS  # + the warm-up message of each queue
    if r.messages != written:
        out(f"  !! 5.x received {r.messages:,} of the {written:,} messages written")
    res.v5["consume"] = r


async def latency(s: Settings, res: Results, gen4: LoadGen, gen5: GrpcLoadGen, queues: list[int]) -> None:
    """Send -> long-polling consumer at a fixed rate, 4.x then 5.x."""
    await settle()
    job4 = Job4(
        "latency", "Bench4Latency", (), s.size, s.latency_seconds, rate=s.latency_rate,
        start_offsets=(1,) * CONNECTIONS, grace=3.0,
    )  # fmt: skip
    r = await gen4.run(job4, queues)
    print_latency("4.x", r, s.latency_rate)
    res.v4["latency"] = r

    await settle()
    job5 = Job5(
        "latency", "Bench5Latency", group="Bench5LatencyGroup", body_size=s.size,
        seconds=s.latency_seconds, window=2, rate=s.latency_rate, ack_behind=s.ack_behind,
    )  # fmt: skip
    r = await gen5.run(job5)
    print_latency("5.x", r, s.latency_rate)
    res.v5["latency"] = r


def table(res: Results) -> list[str]:
    """The closing table: 4.x and 5.x side by side."""

    def rate(r: PhaseResult | None) -> str:
        return "n/a" if r is None else f"{r.rate:,.0f} msgs/s"

    def us(r: PhaseResult | None) -> str:
        return "n/a" if r is None or r.us_per_msg is None else f"{r.us_per_msg:.1f} us"

    rows = [
        "| figure | 4.x remoting | 5.x gRPC | 5.x / 4.x | broker CPU/msg 4.x / 5.x | saturated 4.x / 5.x |",
        "|---|---:|---:|---:|---:|---|",
    ]
    for key, name in (("send", "produce 1 msg/request"), ("consume", "consume (pull / receive+ack)")):
        a, b = res.v4.get(key), res.v5.get(key)
        ratio = f"{b.rate / a.rate:.2f}x" if a and b and a.rate else "n/a"
        rows.append(
            f"| {name} | {rate(a)} | {rate(b)} | {ratio} | {us(a)} / {us(b)} | "
            f"{a.saturated() if a else 'n/a'} / {b.saturated() if b else 'n/a'} |"
        )
    a, b = res.v4.get("latency"), res.v5.get("latency")
    rows.append(f"| e2e latency | {lat_text(a)} | {lat_text(b)} | | {us(a)} / {us(b)} | |")
    return rows


def describe_machine() -> str:
    return f"{os.cpu_count()} cores"
