"""5.x SendMessage driven by ghz (github.com/bojand/ghz, a gRPC load tool in Go built with
`make ghz`), beside the Go generator's 5.x SendMessage and the 4.x prebuilt-frame single send, on
one broker in one run (bench/grpc5/native.py starts it and runs those two).

ghz knows nothing of RocketMQ: it compiles our shipped .proto files itself (`--proto` with
src/rocketlite/protocol/proto as the import path) and builds each SendMessageRequest from JSON
data: one 1 KiB NORMAL message, body base64, a CRC32 digest, a message id made distinct per call
by ghz's template (`{{.RequestNumber}}`), and the metadata the broker needs (x-mq-client-id,
x-mq-language, x-mq-protocol). Load shape as the Go generator's: CONNECTIONS HTTP/2 connections,
`window` calls in flight on each (`--concurrency` = CONNECTIONS x window), for `seconds` (after
a `warmup` run of its own whose figures are dropped); `--duration-stop wait` lets the calls in
flight finish, so every call counted was answered.

Figures: ghz's JSON report (rps, p50/p99, the status and error distributions); the broker's CPU
from /proc/PID/stat over the ghz process's life (bench/broker/report.py's Meter), ghz's own CPU
from its rusage (`os.wait4`), the machine's from /proc/stat. A gRPC OK does not mean a stored
message (SendMessageResponse carries RocketMQ's own status), so the topic's max offsets are read
afterwards over 4.x and the stored count is reported beside ghz's OK count.

ghz counts a server-streaming ReceiveMessage as one call whatever number of messages it streamed,
so its calls/s is not a message rate, and it cannot send the AckMessage that follows (its requests
do not depend on answers); nor does the broker count POP deliveries anywhere a bench could read
(the committed offset stays at the lowest unacked message). Only SendMessage is driven here.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import subprocess
import time
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from bench.broker.config import CONNECTIONS, out
from bench.broker.loadgen import submit
from bench.broker.report import Meter
from bench.broker.runner import settle
from bench.grpc5 import native
from bench.peers.servers import ROOT
from rocketlite.protocol.requests.offsets import build_get_max_offset, parse_get_max_offset
from rocketlite.remoting.connection import Connection

__all__ = ["GHZ", "SEND_CALL", "run", "run_ghz", "send_data", "table"]

# GHZ: another ghz binary, else the Makefile's.
GHZ: Final = Path(os.environ.get("GHZ") or ROOT / ".clients" / "ghz" / "bin" / "ghz")
PROTO_ROOT: Final = ROOT / "src" / "rocketlite" / "protocol" / "proto"
SERVICE_PROTO: Final = PROTO_ROOT / "apache" / "rocketmq" / "v2" / "service.proto"
SEND_CALL: Final = "apache.rocketmq.v2.MessagingService/SendMessage"
TOPIC: Final = "Ghz5"
TEMPLATE: Final = "{{printf `%024X` .RequestNumber}}"  # ghz's call number, 24 hex digits
METADATA: Final = {"x-mq-client-id": "ghz@1@0@bench", "x-mq-language": "GOLANG", "x-mq-protocol": "v2"}


def send_data(topic: str, size: int) -> dict[str, Any]:
    """The SendMessageRequest as ghz's JSON call data (protobuf's JSON mapping: bytes in base64,
    enums by name); the message id's last 24 hex digits are the call's number."""
    body = bytes(size)
    message_id = f"01{os.getpid() & 0xFFFFFFFF:08X}{TEMPLATE}"
    system = {
        "tag": "TagA",
        "messageId": message_id,
        "bodyDigest": {"type": "CRC32", "checksum": f"{zlib.crc32(body):08X}"},
        "bodyEncoding": "IDENTITY",
        "messageType": "NORMAL",
    }
    message = {"topic": {"name": topic}, "systemProperties": system, "body": base64.b64encode(body).decode()}
    return {"messages": [message]}


@dataclass(slots=True)
class Ghz:
    """One ghz invocation: a unary call against `addr` with `data`, CONNECTIONS connections."""

    addr: str
    call: str
    data: dict[str, Any]
    concurrency: int
    seconds: float
    work: Path
    binary: bool = False  # the request serialized once here (--binary-file) instead of JSON data

    def data_args(self) -> list[str]:
        if not self.binary:
            path = self.work / "ghz-data.json"
            path.write_text(json.dumps(self.data))
            return ["--data-file", str(path)]
        from google.protobuf import json_format  # noqa: PLC0415

        from rocketlite.protocol.proto.v2 import service_pb2 as spb  # noqa: PLC0415

        fixed = json.loads(json.dumps(self.data).replace(TEMPLATE, "0" * 24))
        path = self.work / "ghz-data.bin"
        path.write_bytes(json_format.ParseDict(fixed, spb.SendMessageRequest()).SerializeToString())
        return ["--binary-file", str(path)]

    def argv(self, report: Path) -> list[str]:
        return [
            str(GHZ), "--insecure", "--proto", str(SERVICE_PROTO), "--import-paths", str(PROTO_ROOT),
            "--call", self.call, *self.data_args(), "--metadata", json.dumps(METADATA),
            "--connections", str(CONNECTIONS), "--concurrency", str(self.concurrency),
            "--duration", f"{self.seconds}s", "--duration-stop", "wait", "--timeout", "20s",
            "--format", "json", "--output", str(report), self.addr,
        ]  # fmt: skip


def run_ghz(g: Ghz, server_pid: int) -> dict[str, Any]:
    """Run ghz to its end and return its figures in the Go generator's row shape (native.line and
    native.table read them) plus ghz's status and error distributions. Blocking."""
    report, log = g.work / "ghz-report.json", g.work / "ghz.log"
    meter = Meter("broker", {"broker": server_pid})
    t0 = time.perf_counter()
    with log.open("wb") as f:
        proc = subprocess.Popen(g.argv(report), stdin=subprocess.DEVNULL, stdout=f, stderr=f)
        _pid, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - t0
    measured = meter.result(0, extra_cpu={"ghz": usage.ru_utime + usage.ru_stime})
    if proc.returncode != 0 or not report.exists():
        raise RuntimeError(f"ghz exited {proc.returncode}:\n{log.read_text(errors='replace')[-2000:]}")
    doc: dict[str, Any] = json.loads(report.read_text())
    return ghz_row(doc, measured.cpu, wall, measured.other_cpu + sum(measured.cpu.values()))


def ghz_row(doc: dict[str, Any], cpu: dict[str, float], wall: float, machine: float) -> dict[str, Any]:
    """ghz's report (durations in ns) as a row. The CPU shares are over ghz's whole life (`wall`,
    which includes its start: compiling the .proto files, dialling), the rate is ghz's own."""
    statuses: dict[str, int] = doc.get("statusCodeDistribution") or {}
    errors: dict[str, int] = doc.get("errorDistribution") or {}
    lat = {int(p["percentage"]): p["latency"] / 1e6 for p in doc.get("latencyDistribution") or []}
    ok = statuses.get("OK", 0)
    return {
        "messages": ok,
        "calls": int(doc.get("count", 0)),
        "rate": float(doc.get("rps", 0.0)) * (ok / doc["count"] if doc.get("count") else 0.0),
        "rps": float(doc.get("rps", 0.0)),
        "seconds": wall,
        "ghz_seconds": doc.get("total", 0) / 1e9,
        "server_cpu_s": cpu["broker"],
        "gen_cpu_s": cpu["ghz"],
        "machine_busy_s": machine,
        "p50_ms": lat.get(50, float("nan")),
        "p99_ms": lat.get(99, float("nan")),
        "samples": ok,
        "errors": sum(n for code, n in statuses.items() if code != "OK"),
        "first_error": next(iter(errors), ""),
        "statuses": statuses,
    }


async def stored(conn: Connection, topic: str) -> int:
    """Messages in `topic` (its 16 queues' max offsets, i.e. what was dispatched)."""
    total = 0
    for q in range(CONNECTIONS):
        total += parse_get_max_offset(await submit(conn, build_get_max_offset(topic, q)))
    return total


async def wait_stored(conn: Connection, topic: str, expect: int, timeout: float = 30.0) -> int:
    """The topic's message count once it reaches `expect` (the dispatcher caught up) or stops
    growing for 3 s (fewer were stored)."""
    deadline = time.monotonic() + timeout
    last, since = -1, time.monotonic()
    while True:
        n = await stored(conn, topic)
        if n >= expect or time.monotonic() > deadline:
            return n
        if n != last:
            last, since = n, time.monotonic()
        elif time.monotonic() - since > 3.0:
            return n
        await asyncio.sleep(0.05)


async def run(s: native.Native, *, go: bool = True) -> dict[str, dict[str, Any]]:
    """4.x and the Go generator's 5.x (`go`), then ghz's 5.x SendMessage with JSON data and with
    the request serialized once, on one broker."""
    async with native.serving(s, (TOPIC,)) as b:
        if go:
            await native.produce(s, b)
        conn = b.conns[0]
        total = await wait_stored(conn, TOPIC, CONNECTIONS)  # the warm-up message of each queue
        s.rows["ghz_before"] = {"stored": total}
        if s.warmup > 0:
            warm = Ghz(f"127.0.0.1:{b.grpc_port}", SEND_CALL, send_data(TOPIC, s.size),
                       CONNECTIONS * s.window, s.warmup, s.work)  # fmt: skip
            r = await asyncio.get_running_loop().run_in_executor(None, run_ghz, warm, b.broker.pid)
            total = await wait_stored(conn, TOPIC, total + r["messages"])
        for key, binary in (("ghz5", False), ("ghz5b", True)):
            total = await ghz_phase(s, b, key, binary, total)
    return s.rows


async def ghz_phase(s: native.Native, b: native.Served, key: str, binary: bool, base: int) -> int:
    """One measured ghz run on TOPIC, which holds `base` messages; returns what it holds after."""
    await settle()
    g = Ghz(f"127.0.0.1:{b.grpc_port}", SEND_CALL, send_data(TOPIC, s.size), CONNECTIONS * s.window,
            s.seconds, s.work, binary)  # fmt: skip
    r = await asyncio.get_running_loop().run_in_executor(None, run_ghz, g, b.broker.pid)
    r["stored"] = await wait_stored(b.conns[0], TOPIC, base + r["messages"]) - base
    s.rows[key] = r
    name = f"5.x SendMessage (ghz, {'binary' if binary else 'JSON'})"
    out(native.line(name, r) + f"  statuses {r['statuses']}, stored {r['stored']:,}")
    return base + int(r["stored"])


def table(rows: dict[str, dict[str, Any]]) -> list[str]:
    """ghz beside the Go generator (5.x) and the 4.x prebuilt frames, same broker, same run. "other"
    is the CPU of everything else on the machine (other sessions' work), in cores."""
    lines = [
        "| 1 KiB produce, 1 msg/request | msg/s | share of 4.x | CPU/msg broker / generator | p50 / p99 "
        "| cores broker / generator / other | saturated | non-OK calls |",
        "|---|---:|---:|---:|---:|---:|---|---:|",
    ]
    base = rows.get("send4")
    for key, label in (("send4", "4.x SEND_MESSAGE_V2, Go generator (prebuilt frames)"),
                       ("send5", "5.x SendMessage, Go generator (prebuilt protobuf)"),
                       ("ghz5", "5.x SendMessage, ghz (JSON data, templated id)"),
                       ("ghz5b", "5.x SendMessage, ghz (binary data)")):  # fmt: skip
        r = rows.get(key)
        if r is None:
            continue
        share = f"{r['rate'] / base['rate']:.2f}x" if base and base["rate"] else "n/a"
        lat = f"{r['p50_ms']:.1f} / {r['p99_ms']:.1f} ms" if r.get("samples") else "-"
        gen_us = r["gen_cpu_s"] / r["messages"] * 1e6 if r.get("messages") else float("nan")
        srv, gen = native.cores(r, "server_cpu_s"), native.cores(r, "gen_cpu_s")
        other = max(0.0, native.cores(r, "machine_busy_s") - srv - gen)
        cpu = f"{native.us_per_msg(r):.1f} / {gen_us:.1f} µs"
        lines.append(
            f"| {label} | {r['rate']:,.0f} | {share} | {cpu} | {lat} | "
            f"{srv:.2f} / {gen:.2f} / {other:.2f} | {native.saturated(r)} | {r.get('errors', 0):,} |"
        )
    return lines
