"""5.x SendMessage / ReceiveMessage+Ack beside 4.x SEND_MESSAGE_V2 / PULL_MESSAGE, on one broker in
one run, both driven by the native generator (bench/peers/loadgen, `-proto grpc` and
`-proto remoting`), so neither side is limited by a Python client.

The 5.x requests are serialized here once with rocketlite's generated stubs (one 1 KiB NORMAL
message per SendMessageRequest, a distinct message id per connection; a ReceiveMessageRequest of
32 for any queue of the topic, as the 5.x clients' POP receive asks) and handed to the generator
as bytes. `source5` picks how the generator sends SendMessage: "grpcraw" (the default) writes
prebuilt HTTP/2 frames (x/net/http2's Framer and hpack, the header block encoded once, one write per
call), as the 4.x side writes prebuilt remoting frames, so both sides cost the generator about the
same; "grpc" calls through google.golang.org/grpc with a pass-through codec, whose transport costs
the generator several times the broker's CPU per call (on 2 cores it then starves the broker).
`source5c` picks the source of the phases that receive (consume and latency) the same way:
"grpcraw" (the default) sends the ReceiveMessage, AckMessage (and, in the latency phase,
SendMessage) calls as prebuilt HTTP/2 frames and reads the answer streams with the Framer and a
minimal protobuf reader (bench/peers/loadgen/grpcrawconsume.go, grpcrawe2e.go), "grpc" through
grpc-go. The 4.x frames are bench/peers/frames.py's. Both sides:
16 connections (HTTP/2 connections on the 5.x side); 4.x keeps 32 requests in flight per
connection, 5.x `window` calls.

The latency phase (`e2e -proto grpcraw` or `grpc`: bench/peers/loadgen/grpcrawe2e.go, grpce2e.go)
paces SendMessage calls at `latency_rate` over LATENCY_CONNS connections, each body stamped with
the generator's monotonic send time, while LATENCY_RECEIVERS loops long-poll ReceiveMessage (batches of 32,
5 s long polling, 60 s invisible) on another topic and group and ack each batch without waiting
for the answer; it reports sent / received, e2e p50 / p99 / max, the send answer's p50 / p99,
the broker's CPU per delivered message and how long the broker's and the generator's threads
waited for a CPU (/proc/<pid>/task/*/schedstat; in "cores": seconds waited per second), which
says when a busy machine, not either process, sets the latency.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import zlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.support.ports import free_port

from bench.broker.config import CONNECTIONS, WINDOW, out
from bench.broker.loadgen import close_all, latency_body, open_broker
from bench.broker.runner import settle, warm_up
from bench.broker.servers import Child, start_broker, wait_listening
from bench.peers.frames import write_frames
from bench.peers.servers import GENERATOR
from rocketlite.remoting.connection import Connection

__all__ = [
    "GENERATOR",
    "SOURCES5",
    "Native",
    "Served",
    "produce",
    "run",
    "serving",
    "table",
    "write_grpc_frames",
]

SOURCES5 = ("grpcraw", "grpc")  # the generator's 5.x produce and consume load sources (-proto)
SATURATED = 0.85  # share of one core
TOPIC4, TOPIC5, GROUP5 = "Native4", "Native5", "Native5Group"
TOPIC5E, GROUP5E = "Native5E2E", "Native5E2EGroup"
LATENCY_CONNS, LATENCY_RECEIVERS = 4, 4
STAMP = b"E2ESTAMP"  # where the generator writes each send time (grpce2e.go's stampMarker)
METADATA = {"x-mq-client-id": "peersgen@1@0@native", "x-mq-language": "GOLANG", "x-mq-protocol": "v2"}


@dataclass(slots=True)
class Native:
    work: Path
    seconds: float = 5.0
    warmup: float = 1.0
    size: int = 1024
    window: int = 32  # 5.x calls in flight per connection
    consume: bool = True
    rows: dict[str, dict[str, Any]] = field(default_factory=dict)
    impl: str = "grpcio"  # grpcServerImpl: the 5.x endpoint's server (grpcio | nghttp2)
    produce: bool = True
    latency: bool = False
    latency_rate: float = 1000.0
    latency_seconds: float = 5.0
    source5: str = "grpcraw"  # the 5.x produce load source: grpcraw (prebuilt frames) | grpc (grpc-go)
    source5c: str = "grpcraw"  # the 5.x consume and latency load source: grpcraw | grpc


def write_grpc_frames(
    path: Path, topic: str, group: str, size: int, *, stamp: bool = False, poll: int = 1
) -> Path:
    """The generator's `-frames` file for `-proto grpc` (bench/peers/loadgen/grpcgen.go); with
    `stamp`, bodies start with STAMP (for grpce2e.go); `poll`: long polling seconds."""
    from rocketlite.protocol.proto.v2 import definition_pb2 as pb  # noqa: PLC0415
    from rocketlite.protocol.proto.v2 import service_pb2 as spb  # noqa: PLC0415

    body = STAMP + bytes(size - len(STAMP)) if stamp else bytes(size)
    digest = pb.Digest(type=pb.DigestType.CRC32, checksum=f"{zlib.crc32(body):08X}")

    def send(n: int) -> bytes:
        system = pb.SystemProperties(
            tag="TagA",
            message_id=f"01{os.getpid() & 0xFFFFFFFF:08X}{n:024X}",
            body_digest=digest,
            body_encoding=pb.Encoding.IDENTITY,
            message_type=pb.MessageType.NORMAL,
        )
        message = pb.Message(topic=pb.Resource(name=topic), system_properties=system, body=body)
        raw: bytes = spb.SendMessageRequest(messages=[message]).SerializeToString()
        return raw

    receive = spb.ReceiveMessageRequest(
        group=pb.Resource(name=group),
        message_queue=pb.MessageQueue(topic=pb.Resource(name=topic), id=-1),
        filter_expression=pb.FilterExpression(type=pb.FilterType.TAG, expression="*"),
        batch_size=32,
        invisible_duration={"seconds": 60},
        long_polling_timeout={"seconds": poll},
    ).SerializeToString()
    ack = spb.AckMessageRequest(group=pb.Resource(name=group), topic=pb.Resource(name=topic))

    def b64(raw: bytes) -> str:
        return base64.b64encode(raw).decode()

    doc = {
        "send": [b64(send(n)) for n in range(CONNECTIONS)],
        "receive": [b64(receive)] * CONNECTIONS,
        "ack_prefix": b64(ack.SerializeToString()),
        "metadata": METADATA,
    }
    path.write_text(json.dumps(doc))
    return path


def generate(mode: str, proto: str, addr: str, pid: int, *args: str) -> dict[str, Any]:
    argv = [str(GENERATOR), mode, "-proto", proto, "-addr", addr, "-server-pid", str(pid),
            "-conns", str(CONNECTIONS), *args]  # fmt: skip
    proc = subprocess.run(argv, check=False, capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        raise RuntimeError(f"peersgen {mode} -proto {proto} failed:\n{proc.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def cores(r: dict[str, Any], key: str) -> float:
    return float(r.get(key, 0.0)) / r["seconds"] if r.get("seconds") else 0.0


def saturated(r: dict[str, Any]) -> str:
    srv, gen, mach = cores(r, "server_cpu_s"), cores(r, "gen_cpu_s"), cores(r, "machine_busy_s")
    if mach >= 2 * 0.92:
        return f"2 cores (broker {srv:.2f}, generator {gen:.2f})"
    return " + ".join(n for n, c in (("broker", srv), ("generator", gen)) if c >= SATURATED) or "none"


def us_per_msg(r: dict[str, Any]) -> float:
    return float(r["server_cpu_s"]) / r["messages"] * 1e6 if r.get("messages") else float("nan")


def gen_us_per_msg(r: dict[str, Any]) -> float:
    return float(r.get("gen_cpu_s", 0.0)) / r["messages"] * 1e6 if r.get("messages") else float("nan")


def line(name: str, r: dict[str, Any]) -> str:
    lat = f"p50 {r['p50_ms']:.2f} ms p99 {r['p99_ms']:.2f} ms  " if r.get("samples") else ""
    text = (
        f"  {name:32s} {r['rate']:>10,.0f} msg/s  {us_per_msg(r):6.1f} us/msg broker CPU  "
        f"{gen_us_per_msg(r):6.1f} us/msg generator CPU  {lat}"
        f"broker {cores(r, 'server_cpu_s'):.2f} / generator {cores(r, 'gen_cpu_s'):.2f} / "
        f"machine {cores(r, 'machine_busy_s'):.2f} cores  saturated: {saturated(r)}"
    )
    if r.get("errors"):
        text += f"  [{r['errors']} errors: {r.get('first_error', '')[:160]}]"
    return text


@dataclass(slots=True)
class Served:
    """A broker started for one run: its process, both ports, the 4.x connections of the warm-up
    and the generator's frame files."""

    broker: Child
    port: int
    grpc_port: int
    conns: list[Connection]
    frames4: Path
    frames5: Path


@asynccontextmanager
async def serving(s: Native, topics: tuple[str, ...] = ()) -> AsyncIterator[Served]:
    """One broker (`s.impl` door) with TOPIC4, TOPIC5 and `topics` created (16 queues each, one
    message per queue) before any window; stopped on the way out."""
    grpc_port = free_port()
    extra = {"grpcServerPort": str(grpc_port), "grpcServerImpl": s.impl}
    broker, port = start_broker(s.work, False, {grpc_port}, extra=extra)
    conns: list[Connection] = []
    try:
        await wait_listening(broker, port)
        await wait_listening(broker, grpc_port)
        conns = await open_broker(port, CONNECTIONS)
        for topic in (TOPIC4, TOPIC5, *topics):  # the topics and their 16 queues exist before any window
            await warm_up(conns, topic, latency_body(s.size)())
        frames4 = write_frames(s.work / "frames4.json", TOPIC4, s.size, batch=False)
        frames5 = write_grpc_frames(s.work / "frames5.json", TOPIC5, GROUP5, s.size)
        yield Served(broker, port, grpc_port, conns, frames4, frames5)
    finally:
        close_all(conns)
        broker.stop()


async def produce(s: Native, b: Served) -> None:
    """4.x SEND_MESSAGE_V2 (prebuilt frames) then 5.x SendMessage, both from the Go generator."""
    timed = ["-seconds", str(s.seconds), "-warmup", str(s.warmup), "-size", str(s.size)]
    await phase(s, b.broker, "4.x SEND_MESSAGE_V2", "send4", "produce", "remoting", b.port,
                *timed, "-window", str(WINDOW), "-frames", str(b.frames4))  # fmt: skip
    await phase(s, b.broker, f"5.x SendMessage ({s.source5})", "send5", "produce", s.source5, b.grpc_port,
                *timed, "-window", str(s.window), "-frames", str(b.frames5))  # fmt: skip


async def run(s: Native) -> dict[str, dict[str, Any]]:
    async with serving(s, (TOPIC5E,) if s.latency else ()) as b:
        if s.produce:
            await produce(s, b)
        if s.latency:
            await latency(s, b)
        if s.consume and s.produce:
            cap = ["-seconds", str(max(10.0, 4 * s.seconds))]
            await phase(s, b.broker, "4.x PULL_MESSAGE of 32", "consume4", "consume", "remoting", b.port,
                        *cap, "-frames", str(b.frames4))  # fmt: skip
            await phase(s, b.broker, f"5.x ReceiveMessage of 32 + Ack ({s.source5c})", "consume5", "consume",
                        s.source5c, b.grpc_port, *cap, "-frames", str(b.frames5))  # fmt: skip
    return s.rows


async def latency(s: Native, b: Served) -> None:
    """5.x e2e latency at `s.latency_rate` from the generator's `e2e -proto grpc`."""
    frames = write_grpc_frames(s.work / "frames5e.json", TOPIC5E, GROUP5E, s.size, stamp=True, poll=5)
    await settle()
    r = generate("e2e", s.source5c, f"127.0.0.1:{b.grpc_port}", b.broker.pid, "-frames", str(frames),
                 "-rate", str(s.latency_rate), "-seconds", str(s.latency_seconds), "-size", str(s.size),
                 "-conns", str(LATENCY_CONNS), "-receivers", str(LATENCY_RECEIVERS))  # fmt: skip
    s.rows["latency5"] = r
    out(latency_line(r))


def latency_line(r: dict[str, Any]) -> str:
    text = (
        f"  5.x e2e at {r['sent'] / r['seconds']:,.0f} msg/s: sent {r['sent']} received {r['messages']} "
        f"missing {r['sent'] - r['messages']}  e2e p50 {r['p50_ms']:.2f} p99 {r['p99_ms']:.2f} "
        f"max {r.get('max_ms', 0.0):.2f} ms  send answer p50 {r.get('send_p50_ms', 0.0):.2f} "
        f"p99 {r.get('send_p99_ms', 0.0):.2f} ms  {us_per_msg(r):.0f} us/msg broker CPU  "
        f"broker {cores(r, 'server_cpu_s'):.2f} / generator {cores(r, 'gen_cpu_s'):.2f} / "
        f"machine {cores(r, 'machine_busy_s'):.2f} cores  saturated: {saturated(r)}  "
        f"waiting for a CPU: broker {cores(r, 'server_wait_s'):.2f} / generator {cores(r, 'gen_wait_s'):.2f}"
    )
    if r.get("errors"):
        text += f"  [{r['errors']} errors: {r.get('first_error', '')[:160]}]"
    return text


async def phase(
    s: Native, broker: Child, name: str, key: str, mode: str, proto: str, port: int, *args: str
) -> None:
    await settle()
    r = generate(mode, proto, f"127.0.0.1:{port}", broker.pid, *args)
    s.rows[key] = r
    out(line(name, r))


def table(rows: dict[str, dict[str, Any]]) -> list[str]:
    """4.x and 5.x side by side, the native generator on both."""
    head = [
        "| figure (native generator) | 4.x remoting | 5.x gRPC | 5.x / 4.x | broker CPU/msg 4.x / 5.x "
        "| generator CPU/msg 4.x / 5.x | p50 / p99 4.x | p50 / p99 5.x | saturated 4.x / 5.x |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    lines: list[str] = []

    def lat(r: dict[str, Any]) -> str:
        return f"{r['p50_ms']:.1f} / {r['p99_ms']:.1f} ms" if r.get("samples") else "-"

    for a_key, b_key, label in (("send4", "send5", "produce, 1 msg/request"),
                                ("consume4", "consume5", "consume (pull / receive+ack)")):  # fmt: skip
        a, b = rows.get(a_key), rows.get(b_key)
        if a is None or b is None:
            continue
        ratio = f"{b['rate'] / a['rate']:.2f}x" if a["rate"] else "n/a"
        lines.append(
            f"| {label} | {a['rate']:,.0f} msg/s | {b['rate']:,.0f} msg/s | {ratio} | "
            f"{us_per_msg(a):.1f} / {us_per_msg(b):.1f} µs | "
            f"{gen_us_per_msg(a):.1f} / {gen_us_per_msg(b):.1f} µs | {lat(a)} | {lat(b)} | "
            f"{saturated(a)} / {saturated(b)} |"
        )
    lines = head + lines if lines else []
    if (e := rows.get("latency5")) is not None:
        lines += [
            *([""] if lines else []),
            "| 5.x e2e (native generator) | sent / received / missing | e2e p50 / p99 / max "
            "| send answer p50 / p99 | broker CPU/msg | saturated | waiting for a CPU broker / generator |",
            "|---|---:|---:|---:|---:|---|---:|",
            f"| {e['sent'] / e['seconds']:,.0f} msg/s | {e['sent']} / {e['messages']} / "
            f"{e['sent'] - e['messages']} | {e['p50_ms']:.1f} / {e['p99_ms']:.1f} / "
            f"{e.get('max_ms', 0.0):.1f} ms | {e.get('send_p50_ms', 0.0):.2f} / "
            f"{e.get('send_p99_ms', 0.0):.2f} ms | {us_per_msg(e):.0f} µs | {saturated(e)} | "
            f"{cores(e, 'server_wait_s'):.2f} / {cores(e, 'gen_wait_s'):.2f} |",
        ]
    return lines
