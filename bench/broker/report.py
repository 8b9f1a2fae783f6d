"""Output of the broker benchmark: formatting, the result tables, phase results and the CPU they
cost (this process, the server's /proc stat and the whole machine), ratios and warnings."""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from bench.broker.config import CLK_TCK, KIB, OTHER_LOAD, OTHER_LOAD_WARNING, SATURATED, out


# -- output -------------------------------------------------------------------------------------
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


def cpu_self() -> float:
    t = os.times()
    return t.user + t.system


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


class Measured(Protocol):
    """A server process whose CPU time can be read (`servers.Child`)."""

    def cpu_seconds(self) -> float: ...


class Meter:
    """Wall time and CPU of the server and of this process over a phase."""

    def __init__(self, server: Measured) -> None:
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


def lat_text(res: PhaseResult | None) -> str:
    if res is None:
        return "n/a"
    lat = res.latencies_ms
    missing = res.sent - res.messages
    text = f"p50 {percentile(lat, 0.5):.2f} ms, p99 {percentile(lat, 0.99):.2f} ms"
    return text + (f" ({missing:,} of {res.sent:,} not received)" if missing else "")
