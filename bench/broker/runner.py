"""The benchmark run: for each durability and body size, our broker's phases then Redis's, each
on a fresh server, and the closing summary."""

from __future__ import annotations

import asyncio
import os
import platform
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from bench.broker.config import (
    BATCH,
    CONNECTIONS,
    GOAL_BATCH_RATIO,
    GOAL_CONSUME_RATIO,
    GOAL_P99_MS,
    GOAL_SINGLE_RATE,
    LATENCY_RATE,
    MIB,
    OTHER_LOAD,
    PULL_BATCH,
    SATURATED,
    WINDOW,
    XRANGE_COUNT,
    Plan,
    out,
)
from bench.broker.loadgen import (
    PullUnsupportedError,
    Sender,
    close_all,
    open_broker,
    ours_consume,
    ours_latency,
    ours_produce_batch,
    ours_produce_single,
    ours_wait_dispatched,
    submit,
)
from bench.broker.peers import (
    RespConnection,
    close_redis,
    open_redis,
    redis_consume,
    redis_latency,
    redis_produce_batch,
    redis_produce_single,
    redis_ready,
    start_redis,
)
from bench.broker.profiling import Profiler, summarize_profile
from bench.broker.report import (
    DISTURBED,
    Budget,
    Meter,
    PhaseResult,
    Report,
    Row,
    fmt_rate,
    fmt_size,
    lat_text,
    mark,
    percentile,
    print_latency,
    print_phase,
    ratio,
)
from bench.broker.servers import Child, disk_usage, start_broker, wait_listening
from rocketlite.protocol.codes import ResponseCode
from rocketlite.remoting.connection import Connection


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
    source: str = "rocketlite"  # `rocketlite <commit>` when run from a git checkout
    loop_kind: str = "asyncio"  # the load generator's event loop


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
        f"{s.loop_kind}; {CONNECTIONS} connections per side; phases <= {s.plan.seconds:g} s "
        f"(and <= {s.plan.phase_cap_bytes // MIB} MiB of bodies per produce phase). "
        f"{'; '.join([s.source, redis, *report.notes])}."
    )
    out(
        "Load generator: this process, one asyncio loop. rocketlite was driven by rocketlite's own remoting "
        "client (`rocketlite.remoting.connection.Connection`, requests pipelined by opaque); Redis by the "
        "minimal pipelined RESP client in `bench/broker/peers.py`."
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
