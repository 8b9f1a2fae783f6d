"""Output of the broker benchmark: formatting, the result tables, phase results and the CPU they
cost (this process, the server's /proc stat and the whole machine), ratios and warnings."""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

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
    """One line of a final table: the issue's figures (`issue`) or every phase."""

    figure: str
    ours: str
    redis: str
    ratio: float | None = None
    goal: str = ""
    passed: bool | None = None
    saturated: str = ""  # ours / Redis
    broker_us: float | None = None  # broker CPU per message
    redis_us: float | None = None  # redis-server CPU per message
    issue: bool = False


def cpu_self() -> float:
    t = os.times()
    return t.user + t.system


# -- phase results ------------------------------------------------------------------------------
PARENT: Final = "bench"  # this process (idle in our phases; Redis's load generator for XREAD BLOCK)


@dataclass(slots=True)
class PhaseResult:
    messages: int
    elapsed: float  # first request -> last answer: the rate's denominator
    wall: float  # the window over which CPU was measured (>= elapsed)
    cpu: dict[str, float]  # CPU seconds used in the window, per process (server, load generators)
    server: str  # the key of the server in `cpu`
    per_queue: list[int] = field(default_factory=list)
    latencies_ms: list[float] = field(default_factory=list)
    ack_latencies_ms: list[float] = field(default_factory=list)  # latency phase: send -> ack
    send_lag_ms: list[float] = field(default_factory=list)  # latency phase: send time - scheduled time
    sent: int = 0
    catch_up: float | None = None  # s from the last ack until all was dispatched (ours)
    other_cpu: float = 0.0  # CPU used by the rest of the machine (other sessions, kernel threads)

    @property
    def rate(self) -> float:
        return self.messages / self.elapsed if self.elapsed > 0 else 0.0

    @property
    def server_cpu(self) -> float:
        return self.cpu.get(self.server, math.nan)

    @property
    def client_cpu(self) -> float:
        return sum(v for k, v in self.cpu.items() if k != self.server)

    @property
    def us_per_msg(self) -> float | None:
        """The server's CPU seconds per acknowledged (or received) message, in microseconds."""
        return self.server_cpu / self.messages * 1e6 if self.messages else None

    def share(self, name: str) -> float:
        return self.cpu[name] / self.wall if self.wall > 0 else 0.0

    def saturated(self) -> str:
        """The processes at >= SATURATED of a core during the phase (the bottleneck candidates)."""
        hot = [name for name in self.cpu if self.share(name) >= SATURATED]
        return " + ".join(hot) if hot else "none"

    def cpu_text(self) -> str:
        other = self.other_cpu / self.wall if self.wall > 0 else 0.0
        us = self.us_per_msg
        gens = [k for k in self.cpu if k != self.server]
        parts = ", ".join(f"{k} {self.share(k):.0%}" for k in gens)
        return (
            f"CPU {self.server} {self.share(self.server):.0%}"
            f"{'' if us is None else f' = {us:.2f} us/msg'}; load generator "
            f"{self.client_cpu / self.wall if self.wall > 0 else 0.0:.0%} ({parts}); other processes "
            f"{other:.0%}{OTHER_LOAD_WARNING if other >= OTHER_LOAD else ''} (100% = one core)"
        )


def machine_busy_seconds() -> float:
    """Busy CPU time of the whole machine so far (/proc/stat), all cores together."""
    try:
        with Path("/proc/stat").open() as f:
            fields = f.readline().split()[1:]
    except OSError:
        return math.nan
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(x) for x in fields[:8])
    return (user + nice + system + irq + softirq + steal) / CLK_TCK


def proc_stat(pid: int) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name (field 3, the state, first), or None
    when the process is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()


def proc_cpu_seconds(pid: int, *, reaped: bool = False) -> float:
    """User + system CPU of a process (all its threads) so far, from /proc/PID/stat; with
    `reaped`, that of its children it has waited for instead."""
    fields = proc_stat(pid)
    if fields is None:
        return math.nan
    at = 13 if reaped else 11  # cutime, cstime (fields 16, 17); utime, stime (fields 14, 15)
    return (int(fields[at]) + int(fields[at + 1])) / CLK_TCK


class Meter:
    """Wall time and the CPU of named processes (server, load generators, this process) and of the
    whole machine over a phase."""

    def __init__(self, server: str, pids: dict[str, int]) -> None:
        self.server = server
        self.pids = pids
        self.t0 = time.perf_counter()
        self.c0 = {name: proc_cpu_seconds(pid) for name, pid in pids.items()}
        self.self0 = cpu_self()
        self.m0 = machine_busy_seconds()

    def result(
        self,
        messages: int,
        *,
        elapsed: float | None = None,
        per_queue: list[int] | None = None,
        extra_cpu: dict[str, float] | None = None,
    ) -> PhaseResult:
        wall = time.perf_counter() - self.t0
        cpu = {name: proc_cpu_seconds(pid) - self.c0[name] for name, pid in self.pids.items()}
        cpu.update(extra_cpu or {})
        cpu[PARENT] = cpu_self() - self.self0
        span = wall if elapsed is None else elapsed
        res = PhaseResult(messages, span, wall, cpu, self.server, per_queue or [])
        res.other_cpu = max(0.0, machine_busy_seconds() - self.m0 - sum(cpu.values()))
        return res


@dataclass(slots=True)
class Budget:
    """When a phase stops issuing: a deadline and a message cap per connection."""

    seconds: float
    cap_per_conn: int

    def start(self) -> float:
        return time.perf_counter() + self.seconds


DISTURBED: list[str] = []  # phases during which other processes used the machine


def note_disturbed(side: str, what: str, res: PhaseResult) -> None:
    if res.wall > 0 and res.other_cpu / res.wall >= OTHER_LOAD:
        DISTURBED.append(f"{side} {what} ({res.other_cpu / res.wall:.0%})")


def print_phase(side: str, what: str, res: PhaseResult) -> None:
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
        f"{res.rate:>9,.0f} msgs/s; {res.cpu_text()}{extra}"
    )


def print_latency(side: str, res: PhaseResult, rate: float) -> None:
    note_disturbed(side, "e2e latency", res)
    lat = res.latencies_ms
    lost = res.sent - res.messages
    out(
        f"  {side:<10} {f'e2e latency @ {rate:,.0f} msgs/s':<42} sent {res.sent:,}, "
        f"received {res.messages:,}{f' ({lost:,} missing)' if lost else ''}: "
        f"p50 {percentile(lat, 0.5):.2f} ms, "
        f"p99 {percentile(lat, 0.99):.2f} ms, p99.9 {percentile(lat, 0.999):.2f} ms, "
        f"max {lat[-1] if lat else math.nan:.1f} ms; {res.cpu_text()}"
    )
    ack = res.ack_latencies_ms
    out(
        f"  {'':<10} {'  of which send -> ack (the send path)':<42} "
        f"p50 {percentile(ack, 0.5):.2f} ms, p99 {percentile(ack, 0.99):.2f} ms, "
        f"max {ack[-1] if ack else math.nan:.1f} ms"
    )
    lag = res.send_lag_ms
    if lag:
        out(
            f"  {'':<10} {'  (load generator: send behind schedule by)':<42} "
            f"p50 {percentile(lag, 0.5):.2f} ms, p99 {percentile(lag, 0.99):.2f} ms, max {lag[-1]:.1f} ms"
        )


def ratio(ours: float | None, redis: float | None) -> float | None:
    if ours is None or not redis:
        return None
    return ours / redis


def us_text(us: float | None) -> str:
    return "" if us is None else f"{us:.2f} us"


def lat_text(res: PhaseResult | None) -> str:
    if res is None:
        return "n/a"
    lat = res.latencies_ms
    missing = res.sent - res.messages
    text = f"p50 {percentile(lat, 0.5):.2f} ms, p99 {percentile(lat, 0.99):.2f} ms"
    return text + (f" ({missing:,} of {res.sent:,} not received)" if missing else "")
