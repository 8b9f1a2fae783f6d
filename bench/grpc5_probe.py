"""Where a 5.x RPC's broker CPU goes: small A/B probes beside bench/grpc5_bench.py.

    .venv/bin/python bench/grpc5_probe.py                 # both probes
    .venv/bin/python bench/grpc5_probe.py --probe inproc  # the send handler in a loop, no gRPC
    .venv/bin/python bench/grpc5_probe.py --probe rpc --only SendMessage --calls 40000 --rounds 1

* `inproc`: the SendMessage handler called in a loop on a broker in this process (no socket, no
  grpc.aio), 1 KiB messages: bare, guarded (as the servicer calls it), and with a loop iteration
  every 64 calls or after every call (what grpc.aio does: each RPC runs in an iteration of its
  own, and each iteration may run the store's dispatch round);
* `rpc`: a broker process with its gRPC endpoint, hammered from this process with raw request
  bytes, `--window` calls in flight: Heartbeat (grpc.aio's own floor for a unary call),
  Heartbeat with a 1 KiB unknown field (the same floor: request size is not the cost) and
  SendMessage (1 KiB, one message a call). It prints the broker's pid first (for
  `py-spy record -p PID` or `perf record -p PID`), then the broker's CPU per call from /proc, the
  minimum of `--rounds` rounds (a busy machine only ever adds).

The broker inherits this process's environment, so an A/B of a knob read from the environment (or
of another source tree, via PYTHONPATH) runs as two invocations.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # `bench` and `tests.support`

from tests.support.ports import free_port

from bench.broker.report import proc_cpu_seconds
from bench.broker.servers import start_broker, stop_all_children, wait_listening
from rocketlite.protocol.proto import available

SERVICE = "/apache.rocketmq.v2.MessagingService/"
METADATA = (("x-mq-client-id", "probe@1@0@probe"), ("x-mq-language", "PYTHON"), ("x-mq-protocol", "v2"))
TOPIC = "Probe5"


def send_requests(count: int, size: int = 1024, topic: str = TOPIC) -> list[Any]:
    """`count` SendMessageRequests of one `size`-byte NORMAL message each, distinct message ids."""
    from rocketlite.protocol.proto.v2 import definition_pb2 as pb  # noqa: PLC0415
    from rocketlite.protocol.proto.v2 import service_pb2 as spb  # noqa: PLC0415

    body = b"x" * size
    digest = pb.Digest(type=pb.DigestType.CRC32, checksum=f"{zlib.crc32(body):08X}")
    return [
        spb.SendMessageRequest(
            messages=[
                pb.Message(
                    topic=pb.Resource(name=topic),
                    body=body,
                    system_properties=pb.SystemProperties(
                        tag="TagA",
                        message_id=f"01{i:032X}",
                        message_type=pb.MessageType.NORMAL,
                        body_digest=digest,
                    ),
                )
            ]
        )
        for i in range(count)
    ]


# -- in process ---------------------------------------------------------------------------------
class _Context:
    """What the handlers read of a grpc.aio ServicerContext."""

    def peer(self) -> str:
        return "ipv4:127.0.0.1:5555"

    def invocation_metadata(self) -> tuple[tuple[str, str], ...]:
        return METADATA

    def time_remaining(self) -> float | None:
        return None


async def inproc(calls: int) -> None:
    from tests.support.broker_harness import broker_under_test  # noqa: PLC0415

    requests = send_requests(calls)
    context = _Context()
    with tempfile.TemporaryDirectory() as tmp:
        async with broker_under_test(Path(tmp)) as broker:
            await broker.send(TOPIC)  # the topic exists
            parts = broker.controller.parts
            assert parts is not None and parts.grpc is not None
            endpoint = parts.grpc
            servicer: Any = endpoint._servicer()  # as grpc calls it
            guarded = servicer.SendMessage
            # (name, handler, loop iterations every n calls: each runs the store's dispatch round)
            variants: list[tuple[str, Callable[..., Any], int]] = [
                ("bare, no loop iteration", endpoint.producer.send_message, 0),
                ("guarded, no loop iteration", guarded, 0),
                ("guarded, a loop iteration per 64 calls", guarded, 64),
                ("guarded, a loop iteration per call", guarded, 1),
            ]
            for name, handler, every in variants:
                for request in requests[: calls // 10]:  # warm-up
                    await handler(request, context)
                await asyncio.sleep(0)
                t0 = time.process_time()
                for n, request in enumerate(requests, 1):
                    await handler(request, context)
                    if every and n % every == 0:
                        await asyncio.sleep(0)
                await asyncio.sleep(0)
                used = time.process_time() - t0
                print(f"in-process SendMessage handler, {name}: {used / calls * 1e6:.1f} us/call")


# -- over gRPC ----------------------------------------------------------------------------------
async def hammer(endpoint: str, rpc: str, payloads: list[bytes], calls: int, window: int) -> float:
    """`calls` unary calls of `rpc`, `window` in flight; returns the wall seconds."""
    import grpc  # noqa: PLC0415

    channel = grpc.aio.insecure_channel(endpoint)
    call = channel.unary_unary(SERVICE + rpc)
    issued = 0

    async def slot() -> None:
        nonlocal issued
        while issued < calls:
            payload = payloads[issued % len(payloads)]
            issued += 1
            await call(payload, metadata=METADATA)

    t0 = time.perf_counter()
    await asyncio.gather(*(slot() for _ in range(window)))
    elapsed = time.perf_counter() - t0
    await channel.close()
    return elapsed


async def rpc(calls: int, window: int, rounds: int, only: str) -> None:
    from rocketlite.protocol.proto.v2 import service_pb2 as spb  # noqa: PLC0415

    heartbeat = [spb.HeartbeatRequest().SerializeToString()]
    # field 100 (unknown to HeartbeatRequest, kept as unknown bytes): a send-sized request
    padded = [b"\xa2\x06\x80\x08" + b"x" * 1024]
    sends = [r.SerializeToString() for r in send_requests(4 * window)]
    with tempfile.TemporaryDirectory(prefix="grpc5-probe-") as tmp:
        grpc_port = free_port()
        broker, port = start_broker(Path(tmp), False, {grpc_port}, extra={"grpcServerPort": str(grpc_port)})
        try:
            await wait_listening(broker, port)
            await wait_listening(broker, grpc_port)
            endpoint = f"127.0.0.1:{grpc_port}"
            probes = {"Heartbeat": heartbeat, "Heartbeat+1KiB": padded, "SendMessage": sends}
            probes = {k: v for k, v in probes.items() if only in ("", k)}
            print(f"broker pid {broker.pid}", flush=True)
            for name, payloads in probes.items():  # warm-up (and SendMessage creates the topic)
                await hammer(endpoint, name.split("+")[0], payloads, calls // 5, window)
            best: dict[str, tuple[float, float, float]] = {}
            for _ in range(rounds):
                for name, payloads in probes.items():
                    c0, s0 = proc_cpu_seconds(broker.pid), os.times()
                    wall = await hammer(endpoint, name.split("+")[0], payloads, calls, window)
                    c1, s1 = proc_cpu_seconds(broker.pid), os.times()
                    mine = (s1.user + s1.system) - (s0.user + s0.system)
                    figures = ((c1 - c0) / calls * 1e6, mine / calls * 1e6, calls / wall)
                    if name not in best or figures[0] < best[name][0]:
                        best[name] = figures
            for name, (broker_us, client_us, per_second) in best.items():
                print(
                    f"{name}: broker {broker_us:.0f} us/call, client {client_us:.0f} us/call, "
                    f"{per_second:,.0f} calls/s (window {window}, best of {rounds})"
                )
        finally:
            stop_all_children()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--probe", choices=("inproc", "rpc", "all"), default="all")
    parser.add_argument("--calls", type=int, default=4000, help="calls per probe and round")
    parser.add_argument("--window", type=int, default=64, help="calls in flight")
    parser.add_argument(
        "--only", choices=("Heartbeat", "Heartbeat+1KiB", "SendMessage"), default="", help="one RPC"
    )
    parser.add_argument("--rounds", type=int, default=3, help="rounds; the least broker CPU is shown")
    args = parser.parse_args(argv)
    why = available()
    if why is not None:
        print(f"the 5.x endpoint cannot run: {why}", file=sys.stderr)
        return 2
    if args.probe in ("inproc", "all"):
        asyncio.run(inproc(args.calls))
    if args.probe in ("rpc", "all"):
        asyncio.run(rpc(args.calls, args.window, args.rounds, args.only))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
