"""The closing tables of the broker benchmark: the issue's figures (rocketlite, Redis, ratio, goal,
PASS/MISS, saturated processes, CPU per message of each server) and every phase of the run."""

from __future__ import annotations

import os
import platform
from pathlib import Path

from bench.broker.config import (
    BATCH,
    CONNECTIONS,
    GOAL_BATCH_RATIO,
    GOAL_BATCH_US,
    GOAL_CONSUME_RATIO,
    GOAL_P50_MS,
    GOAL_P99_MS,
    GOAL_SINGLE_RATE,
    GOAL_SINGLE_RATIO,
    GOAL_SINGLE_US,
    KIB,
    MIB,
    OTHER_LOAD,
    PULL_BATCH,
    SATURATED,
    WINDOW,
    out,
)
from bench.broker.profiling import summarize_profile
from bench.broker.report import (
    DISTURBED,
    PhaseResult,
    Row,
    fmt_rate,
    fmt_size,
    lat_text,
    mark,
    percentile,
    ratio,
    us_text,
)
from bench.broker.runner import PHASES, Results, Settings


def _sat(o: PhaseResult | None, t: PhaseResult | None) -> str:
    return f"{o.saturated() if o else '-'} / {t.saturated() if t else '-'}"


def _us(r: PhaseResult | None) -> float | None:
    return None if r is None else r.us_per_msg


def _rate(r: PhaseResult | None) -> float | None:
    return None if r is None else r.rate


def latency_ok(r: PhaseResult | None) -> bool | None:
    if r is None:
        return None
    lat = r.latencies_ms
    return (
        bool(lat)
        and percentile(lat, 0.99) <= GOAL_P99_MS
        and percentile(lat, 0.5) <= GOAL_P50_MS
        and r.messages == r.sent
    )


def rate_row(figure: str, o: PhaseResult | None, t: PhaseResult | None, goal: float, issue: bool) -> Row:
    rt = ratio(_rate(o), _rate(t))
    return Row(
        figure, fmt_rate(_rate(o)), fmt_rate(_rate(t)), rt, f"ours/Redis >= {goal:.1f}",
        None if rt is None else rt >= goal, _sat(o, t), _us(o), _us(t), issue,
    )  # fmt: skip


def issue_rows(res: Results, rate: float) -> list[Row]:
    """The rows of the issue's table, in its order."""

    def get(sync: bool, size: int, phase: str) -> tuple[PhaseResult | None, PhaseResult | None]:
        return res.ours.get((sync, size, phase)), res.redis.get((sync, size, phase))

    rows: list[Row] = []
    o, t = get(False, KIB, "batch")
    rows.append(
        Row(
            f"broker CPU per message, SEND_BATCH_MESSAGE of {BATCH} x 1 KiB (ASYNC_FLUSH) "
            "vs XADD (AOF everysec)",
            us_text(_us(o)), us_text(_us(t)), ratio(_us(o), _us(t)), f"<= {GOAL_BATCH_US} us",
            None if _us(o) is None else (_us(o) or 0) <= GOAL_BATCH_US, _sat(o, t), _us(o), _us(t), True,
        )
    )  # fmt: skip
    o, t = get(False, KIB, "single")
    rows.append(
        Row(
            f"broker CPU per message, single SEND_MESSAGE_V2 1 KiB, {WINDOW} in flight per connection",
            us_text(_us(o)), us_text(_us(t)), ratio(_us(o), _us(t)), f"<= {GOAL_SINGLE_US:.0f} us",
            None if _us(o) is None else (_us(o) or 0) <= GOAL_SINGLE_US, _sat(o, t), _us(o), _us(t), True,
        )
    )  # fmt: skip
    o, t = get(False, KIB, "batch")
    rows.append(rate_row("batched produce 1 KiB, ASYNC_FLUSH vs everysec", o, t, GOAL_BATCH_RATIO, True))
    o, t = get(False, 128, "batch")
    rows.append(rate_row("batched produce 128 B, ASYNC_FLUSH vs everysec", o, t, GOAL_BATCH_RATIO, True))
    o, t = get(True, KIB, "batch")
    rows.append(
        rate_row("batched produce 1 KiB, SYNC_FLUSH vs appendfsync always", o, t, GOAL_BATCH_RATIO, True)
    )
    o, t = get(False, KIB, "single")
    rt = ratio(_rate(o), _rate(t))
    ok = None if o is None else o.rate >= GOAL_SINGLE_RATE and (rt is None or rt >= GOAL_SINGLE_RATIO)
    rows.append(
        Row(
            f"single-message produce 1 KiB (Redis: window {WINDOW})", fmt_rate(_rate(o)), fmt_rate(_rate(t)),
            rt, f">= {GOAL_SINGLE_RATE:,} msgs/s and >= {GOAL_SINGLE_RATIO}x", ok, _sat(o, t), _us(o), _us(t),
            True,
        )
    )  # fmt: skip
    o, t = get(False, KIB, "latency")
    rows.append(
        Row(
            f"end-to-end latency at {rate:,.0f} msg/s, send -> long-polling consumer (vs XREAD BLOCK)",
            lat_text(o), lat_text(t), None, f"p99 <= {GOAL_P99_MS:.0f} ms, p50 <= {GOAL_P50_MS:.0f} ms",
            latency_ok(o), _sat(o, t), _us(o), _us(t), True,
        )
    )  # fmt: skip
    return rows


def phase_rows(res: Results, rate: float) -> list[Row]:
    """Every phase of the run, both sides."""
    rows: list[Row] = []
    keys = sorted({*res.ours, *res.redis}, key=lambda k: (k[0], k[1], PHASES.index(k[2])))
    for sync, size, phase in keys:
        o, t = res.ours.get((sync, size, phase)), res.redis.get((sync, size, phase))
        where = f"{'SYNC_FLUSH/always' if sync else 'ASYNC_FLUSH/everysec'}, {fmt_size(size)}"
        if phase == "batch":
            rows.append(
                rate_row(f"batched produce ({BATCH}/request), {where}", o, t, GOAL_BATCH_RATIO, False)
            )
        elif phase == "single":
            rows.append(
                rate_row(f"single produce (window {WINDOW}), {where}", o, t, GOAL_SINGLE_RATIO, False)
            )
        elif phase == "consume":
            name = f"consume: PULL of {PULL_BATCH} vs XRANGE COUNT {PULL_BATCH}, {where}"
            rows.append(rate_row(name, o, t, GOAL_CONSUME_RATIO, False))
        else:
            rows.append(
                Row(
                    f"e2e latency at {rate:,.0f} msg/s, {where}", lat_text(o), lat_text(t), None,
                    f"p99 <= {GOAL_P99_MS:.0f} ms, p50 <= {GOAL_P50_MS:.0f} ms", latency_ok(o), _sat(o, t),
                    _us(o), _us(t),
                )
            )  # fmt: skip
    return rows


def print_table(rows: list[Row]) -> None:
    out(
        "| figure | rocketlite | Redis | ratio | goal | | saturated (ours / Redis) "
        "| broker CPU/msg | Redis CPU/msg |"
    )
    out("|---|---:|---:|---:|---|---|---|---:|---:|")
    for r in rows:
        rt = "" if r.ratio is None else f"{r.ratio:.2f}x"
        out(
            f"| {r.figure} | {r.ours} | {r.redis} | {rt} | {r.goal} | {mark(r.passed)} | {r.saturated} "
            f"| {us_text(r.broker_us)} | {us_text(r.redis_us)} |"
        )
    out()


def summary(s: Settings, res: Results, elapsed: float, profiles: list[Path]) -> None:
    out("## Summary (markdown)")
    out()
    redis = f"Redis {s.redis_version}" if s.redis_version else "Redis not run"
    out(
        f"Loopback, one run ({s.plan.name}), {os.cpu_count()} cores, Python {platform.python_version()}, "
        f"{s.loop_kind}; {CONNECTIONS} connections per side; phases <= {s.plan.seconds:g} s "
        f"(and <= {s.plan.phase_cap_bytes // MIB} MiB of bodies per produce phase); {s.source}; {redis}."
    )
    out(
        f"Load generators: rocketlite <- {s.procs} worker process(es) (bench/broker/workers.py) writing "
        f"prebuilt {s.serialize} frames and reading only each answer's code and opaque; Redis <- "
        "redis-benchmark (produce, consume) and bench/broker/peers.py (XREAD BLOCK latency, this process)."
    )
    out()
    rows = issue_rows(res, s.latency_rate)
    print_table(rows)
    out("### Every phase")
    out()
    print_table(phase_rows(res, s.latency_rate))
    out(
        f"Saturated: the processes at >= {SATURATED:.0%} of a core during the phase (broker, redis-server, "
        "loadgen#N, redis-benchmark, bench = this process). CPU/msg: the server's CPU seconds (all its "
        "threads, /proc/PID/stat) per acknowledged or received message."
    )
    out()
    if DISTURBED:
        out(
            f"WARNING: other processes used >= {OTHER_LOAD:.0%} of a core during {len(DISTURBED)} phase(s): "
            f"{'; '.join(DISTURBED)}. Re-run on an idle machine before quoting those figures."
        )
        out()
    misses = [r.figure for r in rows if r.passed is False]
    out(
        f"Total benchmark time {elapsed:.0f} s; peak disk of one server's data {s.peak_disk / MIB:,.0f} MiB; "
        f"issue goals missed: {'; '.join(misses) if misses else 'none'}"
    )
    for p in profiles:
        out()
        for line in summarize_profile(p):
            out(line)
