"""The benchmark run: for each durability and body size, our broker's phases then Redis's, each
on a fresh server; the results keyed by (durability, size, phase) feed the two closing tables."""

from __future__ import annotations

import asyncio
import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

from bench.broker.config import (
    BATCH,
    CONNECTIONS,
    LATENCY_RATE,
    LOADGEN_PROCS,
    MIB,
    PULL_BATCH,
    WINDOW,
    Plan,
    out,
)
from bench.broker.loadgen import Sender, close_all, latency_body, open_broker, ours_wait_dispatched, submit
from bench.broker.peers import redis_latency, redis_ready, start_redis
from bench.broker.pool import LoadGen, redis_benchmark
from bench.broker.profiling import Profiler
from bench.broker.report import Meter, PhaseResult, fmt_size, print_latency, print_phase
from bench.broker.servers import Child, disk_usage, start_broker, wait_listening
from bench.broker.workers import Job
from rocketlite.protocol.codes import ResponseCode
from rocketlite.remoting.connection import Connection

PHASES = ("batch", "single", "consume", "latency")
Key = tuple[bool, int, str]  # (SYNC_FLUSH?, body size, phase)


@dataclass(slots=True)
class Settings:
    plan: Plan
    redis_binary: str | None
    redis_benchmark: str | None
    work: Path
    profiler: Profiler
    latency_rate: float = LATENCY_RATE
    procs: int = LOADGEN_PROCS
    serialize: str = "JSON"
    redis_version: str = ""
    peak_disk: int = 0
    source: str = "rocketlite"  # `rocketlite <commit>` when run from a git checkout
    loop_kind: str = "asyncio"  # the load generators' event loop
    phases: tuple[str, ...] = PHASES  # --phases: the phases to run (consume needs batch)
    sizes: tuple[int, ...] | None = None  # --sizes: body sizes to run (default: the plan's)

    def wants(self, phase: str) -> bool:
        return phase in self.phases


@dataclass(slots=True)
class Results:
    ours: dict[Key, PhaseResult] = field(default_factory=dict)
    redis: dict[Key, PhaseResult] = field(default_factory=dict)


async def settle() -> None:
    """Write back dirty pages left by the previous phase so they do not land in the next one."""
    await asyncio.get_running_loop().run_in_executor(None, os.sync)
    await asyncio.sleep(0.2)


def phase_cap(plan: Plan, size: int) -> int:
    """Messages per connection and produce phase: the byte cap, whole batches."""
    return max(BATCH, plan.phase_cap_bytes // size // CONNECTIONS // BATCH * BATCH)


async def warm_up(conns: list[Connection], topic: str, body: bytes) -> None:
    """One message per queue: creates the topic and its 16 queues before any measurement."""
    warm = [submit(c, Sender(topic, q, batch=False).single(body)) for q, c in enumerate(conns)]
    for resp in await asyncio.gather(*warm):
        if resp.code != ResponseCode.SUCCESS:
            raise RuntimeError(f"warm-up send to {topic}: code {resp.code} {resp.remark}")


async def run_ours(s: Settings, res: Results, work: Path, sync: bool, size: int) -> None:
    plan = s.plan
    name = f"{'sync' if sync else 'async'}-{size}"
    broker, port = start_broker(work, sync, set())
    conns: list[Connection] = []
    gen: LoadGen | None = None
    queues = list(range(CONNECTIONS))
    cap = phase_cap(plan, size)
    try:
        await wait_listening(broker, port)
        conns = await open_broker(port, CONNECTIONS)
        gen = LoadGen(s.procs, port, s.serialize, ("broker", broker.pid))
        for topic in ("BenchBatch", "BenchSingle", "BenchLatency"):
            await warm_up(conns, topic, latency_body(size)())
        await ours_wait_dispatched(conns[0], "BenchLatency", [1] * CONNECTIONS)

        async def caught_up(r: PhaseResult, topic: str) -> None:
            """Wait until the phase's messages are dispatched (the reput thread would otherwise
            still be working through them during the next phase)."""
            t0 = time.perf_counter()
            if await ours_wait_dispatched(conns[0], topic, [n + 1 for n in r.per_queue]):
                r.catch_up = time.perf_counter() - t0

        produce = [
            ("batch", "BenchBatch", 1, f"batched produce ({BATCH}/request)"),
            ("single", "BenchSingle", WINDOW, f"single produce (window {WINDOW}/conn)"),
        ]
        for kind, topic, window, what in produce:
            if not s.wants(kind):
                continue
            await settle()
            job = Job(kind, topic, (), size, plan.seconds, window=window, cap_per_conn=cap)
            with s.profiler.recording(broker, f"{name}-{kind}", plan.seconds):
                r = await gen.run(job, queues)
            await caught_up(r, topic)
            print_phase("rocketlite", what, r)
            res.ours[(sync, size, kind)] = r
        if sync:
            return
        if s.wants("consume") and (sync, size, "batch") in res.ours:
            await settle()
            targets = tuple(n + 1 for n in res.ours[(sync, size, "batch")].per_queue)  # + the warm-up
            job = Job("consume", "BenchBatch", (), seconds=plan.seconds * 2, targets=targets)
            with s.profiler.recording(broker, f"{name}-consume", plan.seconds):
                r = await gen.run(job, queues)
            print_phase("rocketlite", f"consume, pull {PULL_BATCH}/request", r)
            res.ours[(sync, size, "consume")] = r
        if not s.wants("latency"):
            return
        await settle()
        job = Job(
            "latency", "BenchLatency", (), size, plan.latency_seconds, rate=s.latency_rate,
            start_offsets=(1,) * CONNECTIONS, grace=max(3.0, plan.latency_seconds),
        )  # fmt: skip
        with s.profiler.recording(broker, f"{name}-latency", plan.latency_seconds):
            r = await gen.run(job, queues)
        print_latency("rocketlite", r, s.latency_rate)
        res.ours[(sync, size, "latency")] = r
    finally:
        close_all(conns)
        if gen is not None:
            await asyncio.get_running_loop().run_in_executor(None, gen.close)
        await finish_server(s, broker, work / "store")


async def run_redis(s: Settings, res: Results, work: Path, sync: bool, size: int) -> None:
    assert s.redis_binary is not None and s.redis_benchmark is not None
    plan = s.plan
    redis, port = start_redis(s.redis_binary, work, sync, set())
    loop = asyncio.get_running_loop()
    try:
        s.redis_version = await redis_ready(port, redis)
        value = os.urandom(size).hex()[:size]
        n = CONNECTIONS * phase_cap(plan, size)

        async def bench(
            phase: str,
            command: list[str],
            requests: int,
            clients: int,
            pipeline: int,
            per_request: int,
            threads: int = 1,
        ) -> PhaseResult:
            await settle()

            def call() -> PhaseResult:
                return redis_benchmark(
                    s.redis_benchmark or "", port, redis.pid, command, requests=requests, clients=clients,
                    pipeline=pipeline, keyspace=CONNECTIONS, msgs_per_request=per_request,
                    log=work / f"redis-benchmark-{phase}.log", threads=threads,
                )  # fmt: skip

            r = await loop.run_in_executor(None, call)
            res.redis[(sync, size, phase)] = r
            return r

        xadd = ["XADD", "batch:__rand_int__", "*", "d", value]
        if s.wants("batch"):
            r = await bench("batch", xadd, n, CONNECTIONS, BATCH, 1)
            print_phase("redis", f"XADD, redis-benchmark -c {CONNECTIONS} -P {BATCH}", r)
        if s.wants("single"):
            xadd_single = ["XADD", "single:__rand_int__", "*", "d", value]
            r = await bench("single", xadd_single, n, CONNECTIONS * WINDOW, 1, 1)
            print_phase("redis", f"XADD, redis-benchmark -c {CONNECTIONS * WINDOW} -P 1", r)
        if sync:
            return
        if s.wants("consume") and s.wants("batch"):
            # XRANGE from the start of each stream: the entries are read again and again, so the
            # count is not bounded by what was written; it is sized for a phase of ~plan.seconds.
            pulls = int(40_000 * plan.seconds)
            xrange = ["XRANGE", "batch:__rand_int__", "-", "+", "COUNT", str(PULL_BATCH)]
            r = await bench("consume", xrange, pulls, CONNECTIONS, 1, PULL_BATCH, threads=2)
            what = f"XRANGE COUNT {PULL_BATCH}, redis-benchmark -c {CONNECTIONS} --threads 2"
            print_phase("redis", what, r)
        if not s.wants("latency"):
            return
        await settle()

        def meter() -> Meter:
            return Meter("redis-server", {"redis-server": redis.pid})

        r = await redis_latency(port, "lat", size, plan.latency_seconds, s.latency_rate, meter)
        res.redis[(sync, size, "latency")] = r
        print_latency("redis", r, s.latency_rate)
    finally:
        await finish_server(s, redis, work / "redis")


async def finish_server(s: Settings, child: Child, data: Path) -> None:
    """Record the disk it used, stop it, delete its data."""
    usage = disk_usage(data)
    s.peak_disk = max(s.peak_disk, usage)
    await asyncio.get_running_loop().run_in_executor(None, child.stop)
    out(f"  ({child.name} stopped; its data took {usage / MIB:,.0f} MiB)")
    shutil.rmtree(data, ignore_errors=True)


async def run(s: Settings, res: Results) -> None:
    sizes = s.sizes if s.sizes is not None else s.plan.sizes
    groups = [(False, size) for size in sizes]
    if s.plan.sync and (s.wants("batch") or s.wants("single")):  # SYNC_FLUSH has no other phase
        groups += [(True, size) for size in sizes]
    for sync, size in groups:
        durability = "SYNC_FLUSH vs appendfsync always" if sync else "ASYNC_FLUSH vs appendfsync everysec"
        work = s.work / f"{'sync' if sync else 'async'}-{size}"
        work.mkdir()
        out(f"## {durability}, {fmt_size(size)} bodies")
        try:
            await run_ours(s, res, work, sync, size)
            if s.redis_binary is not None:
                await run_redis(s, res, work, sync, size)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        out()
