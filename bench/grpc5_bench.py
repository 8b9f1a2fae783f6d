"""RocketMQ 5.x clients' path (gRPC) beside the 4.x remoting path, on one broker in one run.

    .venv/bin/python bench/grpc5_bench.py            # full run (about a minute)
    .venv/bin/python bench/grpc5_bench.py --quick    # small run (the smoke test)
    .venv/bin/python bench/grpc5_bench.py --native   # both sides from the native Go generator
    .venv/bin/python bench/grpc5_bench.py --native --phases latency   # 5.x e2e only, native
    .venv/bin/python bench/grpc5_bench.py --ghz      # 5.x SendMessage from ghz, beside --native's produce

`--impl` picks the 5.x endpoint's server (`grpcServerImpl`): by default both, grpc.aio then the
compiled nghttp2 core, each on a broker of its own, in the same run.

One broker process (ASYNC_FLUSH, 16 queues per topic, its gRPC endpoint on a free port) serves
both sides, one phase at a time (bench/grpc5/runner.py): produce, consume (4.x pull vs 5.x
receive + ack), and end-to-end latency at a fixed rate. The 4.x side is driven by
bench/broker's frame-level generator; the 5.x side by `--procs` processes calling the RPCs with
requests serialized once (bench/grpc5/workers.py), as an unmodified 5.x client would send them
(one message per SendMessage, receive batches of 32, one AckMessage per batch). Every phase
reports the broker's CPU per message from /proc, the generators' CPU, and which processes were
saturated (>= 85% of a core).

`--native` runs the same comparison with an independent generator instead (bench/grpc5/native.py):
bench/peers/loadgen's gRPC mode (google.golang.org/grpc, prebuilt protobuf bytes) for 5.x and its
prebuilt remoting frames for 4.x, so neither side is bounded by a Python client
(`make peersgen` builds it). `--source5` picks the 5.x produce load source: `grpcraw` (default),
prebuilt HTTP/2 frames written one call per write like the 4.x side's frames, or `grpc`
(grpc-go, whose own CPU per call is several times the broker's); `--source5c` picks the source
of the 5.x phases that receive (consume: ReceiveMessage + AckMessage; latency) the same way,
`grpcraw` by default. Its latency phase is the generator's `e2e -proto grpcraw` (or `grpc`):
paced SendMessage calls with the send time in the body,
long-polling receivers that ack without waiting, latency on the generator's own clock
(`--phases latency` runs only that one).

`--ghz` adds a third, unrelated generator to the produce comparison (bench/grpc5/ghz.py): ghz,
a gRPC load tool that compiles our .proto files and builds each SendMessageRequest from JSON
(`make ghz` builds it), after the Go generator's 4.x and 5.x produce phases on the same broker.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # `bench` and `tests.support`

from bench.broker.config import out
from bench.broker.servers import stop_all_children
from bench.grpc5 import ghz, native
from bench.grpc5.runner import PHASES, Settings, describe_machine, run, table
from rocketlite.protocol.proto import available


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="short phases (a smoke run)")
    parser.add_argument("--procs", type=int, default=2, help="load-generator processes per side")
    parser.add_argument("--window", type=int, default=64, help="5.x SendMessage calls in flight per process")
    parser.add_argument("--latency-rate", type=float, default=1000.0, help="msgs/s of the latency phases")
    parser.add_argument(
        "--ack-behind",
        action="store_true",
        help="5.x latency phase: receive again without waiting for the AckMessage answer",
    )
    parser.add_argument(
        "--phases",
        default=",".join(PHASES),
        help="after produce: consume,latency",
    )
    parser.add_argument("--native", action="store_true", help="the native Go generator on both sides")
    parser.add_argument("--ghz", action="store_true", help="5.x SendMessage from ghz too")
    parser.add_argument(
        "--source5",
        choices=native.SOURCES5,
        default=native.SOURCES5[0],
        help="--native/--ghz 5.x produce: prebuilt HTTP/2 frames (grpcraw) or grpc-go (grpc)",
    )
    parser.add_argument(
        "--source5c",
        choices=native.SOURCES5,
        default=native.SOURCES5[0],
        help="--native 5.x consume and latency: prebuilt HTTP/2 frames (grpcraw) or grpc-go (grpc)",
    )
    parser.add_argument(
        "--impl",
        default="grpcio,nghttp2",
        help="grpcServerImpl values, one broker each in this run (grpcio: grpc.aio; nghttp2: compiled core)",
    )
    parser.add_argument("--dir", type=Path, default=Path.cwd(), help="where the temporary store goes")
    args = parser.parse_args(argv)
    why = available()
    if why is not None:
        print(f"the 5.x endpoint cannot run: {why}", file=sys.stderr)
        return 2
    impls = [i for i in args.impl.split(",") if i]
    if args.ghz:
        return max(run_ghz(args, impl) for impl in impls)
    if args.native:
        return max(run_native(args, impl) for impl in impls)
    for impl in impls:
        run_python_side(args, impl)
    return 0


def run_python_side(args: argparse.Namespace, impl: str) -> None:
    quick = args.quick
    with tempfile.TemporaryDirectory(prefix="grpc5-bench-", dir=args.dir) as tmp:
        s = Settings(
            work=Path(tmp),
            seconds=0.5 if quick else 5.0,
            latency_seconds=1.0 if quick else 5.0,
            procs=args.procs,
            window=args.window,
            latency_rate=args.latency_rate,
            ack_behind=args.ack_behind,
            cap=20_000 if quick else 200_000,
            phases=tuple(p for p in args.phases.split(",") if p),
            impl=impl,
        )
        out(f"5.x gRPC ({impl}) vs 4.x remoting, one broker, 1 KiB bodies, {describe_machine()}")
        try:
            res = asyncio.run(run(s))
        finally:
            stop_all_children()
    out()
    for line in table(res):
        out(line)


def native_settings(args: argparse.Namespace, work: Path, impl: str, *, consume: bool) -> native.Native:
    """The one broker + generator set-up that both the native and the ghz runs start from."""
    return native.Native(
        work=work,
        seconds=1.0 if args.quick else 5.0,
        warmup=0.3 if args.quick else 1.0,
        window=args.window,
        consume=consume,
        impl=impl,
        produce="produce" in args.phases or "consume" in args.phases,
        latency="latency" in args.phases,
        latency_rate=args.latency_rate,
        latency_seconds=2.0 if args.quick else 5.0,
        source5=args.source5,
        source5c=args.source5c,
    )


def missing(tools: tuple[tuple[Path, str], ...]) -> bool:
    """Say which generator is missing and the make target that fetches it."""
    for tool, hint in tools:
        if not tool.exists():
            print(f"{tool} is missing: run `{hint}`", file=sys.stderr)
            return True
    return False


def run_native(args: argparse.Namespace, impl: str) -> int:
    if missing(((native.GENERATOR, "make peersgen"),)):
        return 2
    with tempfile.TemporaryDirectory(prefix="grpc5-native-", dir=args.dir) as tmp:
        s = native_settings(args, Path(tmp), impl, consume="consume" in args.phases)
        machine = describe_machine()
        out(f"5.x gRPC ({impl}) vs 4.x remoting, native generator, one broker, 1 KiB bodies, {machine}")
        try:
            rows = asyncio.run(native.run(s))
        finally:
            stop_all_children()
    out()
    for line in native.table(rows):
        out(line)
    return 0


def run_ghz(args: argparse.Namespace, impl: str) -> int:
    if missing(((native.GENERATOR, "make peersgen"), (ghz.GHZ, "make ghz"))):
        return 2
    with tempfile.TemporaryDirectory(prefix="grpc5-ghz-", dir=args.dir) as tmp:
        s = native_settings(args, Path(tmp), impl, consume=False)
        s.latency = False
        out(f"5.x gRPC ({impl}): ghz and the native generator, 1 KiB, {describe_machine()}")
        try:
            rows = asyncio.run(ghz.run(s))
        finally:
            stop_all_children()
    out()
    for line in ghz.table(rows):
        out(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
