"""rocketlite beside RocketMQ, Kafka, NATS JetStream and Redis, one after the other in one run,
on the same cores, driven by one native load generator.

    .venv/bin/python bench/peers_bench.py                    # all five servers, every phase
    .venv/bin/python bench/peers_bench.py --quick            # short phases (the smoke run)
    .venv/bin/python bench/peers_bench.py --servers rocketlite,nats --phases single

`make bench-peers` fetches what it needs first (`make bench-peers-deps`): RocketMQ 5.3.3 and Kafka
4.4.0 jars from Maven Central, Debian's nats-server and redis-server unpacked into .clients/peers
(no root needed), and the generator, bench/peers/loadgen (Go: franz-go's kmsg encodes Kafka's
requests, nats.go runs JetStream's consumers), built into .clients/peers/bin/peersgen.

Each server runs alone on a fresh directory; the phases (1 KiB bodies, 16 connections, one queue /
partition / subject / stream each):

1. idle: resident memory of the freshly started server (VmRSS, /proc/<pid>/status), 3 s after
   it answered;
2. single produce: 32 requests in flight per connection, one message per request, one write per
   request (a Java client's `send`): SEND_MESSAGE_V2, a one-record ProduceRequest (acks=1), a
   JetStream publish (PUB with a reply subject), XADD;
3. batched produce, 32 messages a round trip: SEND_BATCH_MESSAGE of 32 and a ProduceRequest of one
   32-record batch (what a Kafka producer's linger fills), one in flight per connection; NATS and
   Redis have no batch request, so 32 publishes / XADDs are written at once and all answered
   before the next 32 (redis-benchmark's -P 32);
4. consume all that 2 and 3 wrote, from the start: PULL_MESSAGE of 32 (one in flight per queue),
   franz-go's consumer (Kafka's fetch sizes), a JetStream pull consumer fetching 32 (no acks),
   XRANGE COUNT 32;
5. end to end: 20,000 msg/s paced on a 1 ms tick, the send time in the body, to long-polling
   consumers (PULL_MESSAGE with SUSPEND, a Kafka consumer, a JetStream push consumer,
   XREAD BLOCK); latency = receive - send.

The generator measures each phase's window itself: the server's CPU (/proc/<pid>/stat, all
threads), its own CPU, and the machine's busy CPU over the same interval. CPU per message is the
server's; "saturated" names the process that used >= 85% of a core, or "2 cores" when the machine
was busy on both. The machine is shared: `uptime` load is printed at the start and at the end;
ratios within one run are what carries.
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: import bench.*
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import argparse
import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from bench.broker.config import CONNECTIONS, WINDOW, out
from bench.broker.servers import stop_all_children
from bench.peers.frames import E2E_SUSPEND_MS, write_frames
from bench.peers.servers import GENERATOR, SETUP_HINT, STARTERS, Server, missing

SIZE = 1024
PHASES = ("single", "batch", "consume", "e2e")
SATURATED = 0.85  # share of one core
REMOTING_TOPIC = "BenchPeers"
TOPIC = "bench"


@dataclass
class Plan:
    seconds: float
    warmup: float
    consume_cap: float
    e2e_seconds: float
    rate: float


FULL = Plan(seconds=5.0, warmup=2.0, consume_cap=30.0, e2e_seconds=5.0, rate=20_000)
QUICK = Plan(seconds=1.0, warmup=0.3, consume_cap=10.0, e2e_seconds=1.0, rate=5_000)


@dataclass
class Row:
    server: str
    phase: str
    result: dict[str, Any] = field(default_factory=dict)
    rss_mib: float = float("nan")

    @property
    def rate(self) -> float:
        return float(self.result.get("rate", 0.0))

    def cpu_us(self) -> float:
        msgs = self.result.get("messages", 0)
        return self.result["server_cpu_s"] / msgs * 1e6 if msgs else float("nan")

    def cores(self, key: str) -> float:
        secs = self.result.get("seconds", 0.0)
        return self.result.get(key, 0.0) / secs if secs else float("nan")

    def saturated(self) -> str:
        srv, gen, mach = self.cores("server_cpu_s"), self.cores("gen_cpu_s"), self.cores("machine_busy_s")
        if mach >= 2 * 0.92:
            return f"2 cores (server {srv:.2f}, generator {gen:.2f})"
        names = [n for n, c in (("server", srv), ("generator", gen)) if c >= SATURATED]
        return " + ".join(names) or "none"


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def generate(mode: str, server: Server, *args: str, timeout: float = 300.0) -> dict[str, Any]:
    argv = [str(GENERATOR), mode, "-proto", server.proto, "-addr", server.addr,
            "-server-pid", str(server.child.pid), "-conns", str(CONNECTIONS), *args]  # fmt: skip
    proc = subprocess.run(argv, check=False, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"peersgen {mode} against {server.name} failed:\n{proc.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def run_server(name: str, plan: Plan, phases: list[str], scratch: Path) -> list[Row]:
    work = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=scratch))
    rows: list[Row] = []
    server = STARTERS[name](work)
    try:
        time.sleep(3.0)
        idle = Row(server.name, "idle", rss_mib=server.rss_mib())
        rows.append(idle)
        out(f"== {server.name} {server.version}: pid {server.child.pid}, idle RSS {idle.rss_mib:.0f} MiB")
        topic = REMOTING_TOPIC if server.proto == "remoting" else TOPIC
        generate("setup", server, "-topic", topic)
        remoting: Callable[[str, bool, int], list[str]] = lambda t, batch, suspend: (  # noqa: E731
            [
                "-frames",
                str(write_frames(work / f"{t}-{batch}.json", t, SIZE, batch=batch, suspend_ms=suspend)),
            ]
            if server.proto == "remoting"
            else []
        )
        timed = [
            "-seconds",
            str(plan.seconds),
            "-warmup",
            str(plan.warmup),
            "-size",
            str(SIZE),
            "-topic",
            topic,
        ]
        for phase in phases:
            os.sync()
            if phase == "single":
                res = generate("produce", server, *timed, "-window", str(WINDOW), *remoting(topic, False, 0))
            elif phase == "batch":
                if server.proto in ("remoting", "kafka"):
                    shape = ["-window", "1", "-batch", "32"]
                else:
                    shape = ["-window", "32", "-group", "32"]
                res = generate("produce", server, *timed, *shape, *remoting(topic, True, 0))
            elif phase == "consume":
                res = generate(
                    "consume",
                    server,
                    "-seconds",
                    str(plan.consume_cap),
                    "-topic",
                    topic,
                    *remoting(topic, False, 0),
                )
            else:
                e2e_topic = topic + "E2E" if server.proto == "remoting" else topic
                res = generate(
                    "e2e", server, "-seconds", str(plan.e2e_seconds), "-rate", str(plan.rate),
                    "-size", str(SIZE), "-topic", e2e_topic, *remoting(e2e_topic, False, E2E_SUSPEND_MS),
                )  # fmt: skip
            row = Row(server.name, phase, res)
            rows.append(row)
            out(line(row))
        return rows
    finally:
        server.child.stop(timeout=60)
        shutil.rmtree(work, ignore_errors=True)


def line(row: Row) -> str:
    r = row.result
    lat = f"p50 {r.get('p50_ms', 0):.2f} ms p99 {r.get('p99_ms', 0):.2f} ms  " if r.get("samples") else ""
    text = (
        f"  {row.phase:8s} {row.rate:>12,.0f} msg/s  {row.cpu_us():6.2f} us/msg server CPU  {lat}"
        f"server {row.cores('server_cpu_s'):.2f} / generator {row.cores('gen_cpu_s'):.2f} / "
        f"machine {row.cores('machine_busy_s'):.2f} cores  saturated: {row.saturated()}"
    )
    others = row.cores("machine_busy_s") - row.cores("server_cpu_s") - row.cores("gen_cpu_s")
    if others >= 0.15:
        text += f"  [other processes: {others:.2f} cores]"
    if r.get("sent"):
        text += f"  (received {r['messages']:,} of {r['sent']:,})"
    if r.get("errors"):
        text += f"  [{r['errors']} errors: {r.get('first_error', '')[:120]}]"
    return text


def latency(row: Row) -> str:
    return f"{row.result.get('p50_ms', 0):.2f} / {row.result.get('p99_ms', 0):.2f} ms"


def table(rows: list[Row]) -> str:
    """The docs' table: one line per phase, one column per server, ratios to rocketlite."""
    by = {(r.server, r.phase): r for r in rows}
    names = list(dict.fromkeys(r.server for r in rows))
    head = "| figure | " + " | ".join(names) + " |"
    lines = [head, "|---|" + "---:|" * len(names)]
    ours = names[0] if names and names[0] == "rocketlite" else None

    def cell(name: str, phase: str, fmt: Callable[[Row], str]) -> str:
        row = by.get((name, phase))
        return fmt(row) if row is not None else "-"

    def ratio(name: str, phase: str) -> str:
        if ours is None or name == ours or (ours, phase) not in by or (name, phase) not in by:
            return ""
        peer = by[(name, phase)].rate
        return f" ({by[(ours, phase)].rate / peer:.2f}x)" if peer else ""

    lines.append("| idle RSS, fresh store | " + " | ".join(
        cell(n, "idle", lambda r: f"{r.rss_mib:.0f} MiB") for n in names) + " |")  # fmt: skip
    for phase, label in (
        ("single", "single 1 KiB produce, msg/s"),
        ("batch", "batched 1 KiB produce (32 a request), msg/s"),
        ("consume", "consume, msg/s"),
        ("e2e", "end to end at the paced rate, msg/s received"),
    ):
        if not any((n, phase) in by for n in names):
            continue
        lines.append(f"| {label} (ours / theirs) | " + " | ".join(
            cell(n, phase, lambda r: f"{r.rate:,.0f}") + ratio(n, phase) for n in names) + " |")  # fmt: skip
        lines.append(f"| {phase}: server CPU per message | " + " | ".join(
            cell(n, phase, lambda r: f"{r.cpu_us():.1f} µs") for n in names) + " |")  # fmt: skip
        if phase != "consume":  # consume phases have no per-message latency
            lines.append(f"| {phase}: p50 / p99 | " + " | ".join(
                cell(n, phase, latency) for n in names) + " |")  # fmt: skip
        lines.append(f"| {phase}: saturated | " + " | ".join(
            cell(n, phase, lambda r: r.saturated()) for n in names) + " |")  # fmt: skip
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="short phases (about a minute a server)")
    ap.add_argument("--servers", default=",".join(STARTERS), help=f"comma list of {', '.join(STARTERS)}")
    ap.add_argument("--phases", default=",".join(PHASES), help=f"comma list of {', '.join(PHASES)}")
    ap.add_argument("--dir", type=Path, default=Path.cwd(), help="where the servers' stores go")
    ap.add_argument("--json", type=Path, help="also write every result here")
    args = ap.parse_args()
    lacking = missing()
    if lacking:
        print("missing: " + "; ".join(lacking) + f" ({SETUP_HINT})", file=sys.stderr)
        return 2
    servers = [s for s in args.servers.split(",") if s]
    phases = [p for p in args.phases.split(",") if p]
    for bad in set(servers) - set(STARTERS) | set(phases) - set(PHASES):
        ap.error(f"unknown server or phase {bad!r}")
    plan = QUICK if args.quick else FULL
    out(f"peers bench, {'quick' if args.quick else 'full'}; load average at start: {load()}")
    rows: list[Row] = []
    scratch = Path(tempfile.mkdtemp(prefix="peers-bench-", dir=args.dir))
    try:
        for name in servers:
            rows += run_server(name, plan, phases, scratch)
    finally:
        stop_all_children()
        shutil.rmtree(scratch, ignore_errors=True)
    out(f"load average at end: {load()}")
    out()
    out(table(rows))
    if args.json:
        args.json.write_text(json.dumps([r.__dict__ for r in rows], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
