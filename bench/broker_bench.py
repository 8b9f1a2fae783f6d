"""Over-loopback benchmark of the broker against Redis Streams, at equal durability, in one run.

    .venv/bin/python bench/broker_bench.py              # full run (a few minutes, <= ~1 GiB of disk)
    .venv/bin/python bench/broker_bench.py --quick      # small run (< ~60 s; the smoke test)
    .venv/bin/python bench/broker_bench.py --no-redis   # our broker only
    .venv/bin/python bench/broker_bench.py --procs 1    # one load-generator process for our broker
    .venv/bin/python bench/broker_bench.py --profile /tmp/prof   # + py-spy of the broker per phase
    .venv/bin/python bench/broker_bench.py --latency-rate 5000   # latency below saturation
    .venv/bin/python bench/broker_bench.py --quick --no-redis --phases latency --sizes 1024

Measure the broker, not the load generator. Servers run as separate processes, one at a time,
each on a fresh temporary directory under --dir (default: the current directory's filesystem):

* ours: ``python -m rocketlite broker -c broker.conf`` (no name server, 16 queues per topic,
  128 MiB commit-log segments), driven by `--procs` load-generator processes (default 2,
  bench/broker/workers.py): each writes prebuilt request frames (encoded once with rocketlite's
  encoder, JSON headers as a Java client sends, or ROCKETMQ with --serialize; fixed opaques and
  pull offsets patched in at fixed positions) and reads only the code and opaque of each answer
  (a pull answer also its nextBeginOffset), as redis-benchmark does for Redis;
* Redis: ``redis-server --appendonly yes --appendfsync everysec|always --save ''``, driven by
  redis-benchmark, its C client (``apt-get install -y redis-server`` installs both).

Equal durability: our ASYNC_FLUSH against ``appendfsync everysec``, our SYNC_FLUSH (group commit)
against ``appendfsync always``; bodies of 128 B and 1 KiB; 16 connections (queue / stream i):

1. batched produce: SEND_BATCH_MESSAGE of 32, one in flight per connection, vs
   ``redis-benchmark -c 16 -P 32 XADD batch:__rand_int__ * d <value>`` (32 XADDs written at once);
2. single-message produce: SEND_MESSAGE_V2, 32 in flight per connection, vs XADD with the same
   512 in flight (``-c 512 -P 1``: redis-benchmark's pipeline is a batch, not a window);
3. consume (ASYNC group only) of what phase 1 wrote: PULL_MESSAGE of 32, one in flight per queue,
   vs ``redis-benchmark -c 16 XRANGE batch:__rand_int__ - + COUNT 32`` (two client threads);
4. end-to-end latency (ASYNC group only): single messages paced at 20k msgs/s (send time in the
   body), long-polling consumers (PULL_MESSAGE with SUSPEND) in the same worker processes, vs
   paced XADDs and ``XREAD BLOCK`` from this process; latency = receive - send time.

Every message carries what a Java producer sends (UNIQ_KEY, TAGS, WAIT), so the broker indexes it.
Every phase reports, from /proc, the server's CPU (all threads) per acknowledged message, the CPU of
each load-generator process, and which processes were saturated (>= 85% of a core); the rest of
the machine's CPU is reported too, and phases it disturbed are flagged. Before each phase the page
cache is written back (`os.sync`), and after each of our produce phases the benchmark waits until
the broker has dispatched everything (the time that took is printed).
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script (`python bench/broker_bench.py`): import bench.broker
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import argparse
import asyncio
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.broker.config import FULL, LATENCY_RATE, LOADGEN_PROCS, QUICK, REDIS_INSTALL_HINT, Plan, out
from bench.broker.pool import find_redis_benchmark
from bench.broker.profiling import Profiler, find_py_spy
from bench.broker.runner import PHASES, Results, Settings, run
from bench.broker.servers import stop_all_children
from bench.broker.tables import summary
from rocketlite.runtime import new_event_loop


def source_version() -> str:
    """`rocketlite <commit>` (+ "with uncommitted changes in src/") when run from a git checkout."""
    root = Path(__file__).resolve().parent.parent
    try:
        head = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
            timeout=10,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--", "src"],
            capture_output=True,
            text=True,
            check=True,
            timeout=10,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "rocketlite (not a git checkout)"
    return f"rocketlite {head}{' with uncommitted changes in src/' if dirty else ''}"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0] if __doc__ else None)
    ap.add_argument("--quick", action="store_true", help="short phases (< ~60 s in all), for the smoke test")
    ap.add_argument(
        "--procs",
        type=int,
        default=LOADGEN_PROCS,
        help=f"load-generator processes for our broker (default {LOADGEN_PROCS})",
    )
    ap.add_argument(
        "--serialize",
        choices=("json", "rocketmq"),
        default="json",
        help="header serialization of our requests (default json, as the Java client)",
    )
    ap.add_argument("--no-redis", action="store_true", help="run our broker only")
    ap.add_argument("--redis-server", default=None, help="redis-server binary (default: from PATH)")
    ap.add_argument(
        "--dir",
        type=Path,
        default=None,
        help="directory for the servers' data (a temporary subdirectory is created and removed); "
        "default: the current directory's filesystem",
    )
    ap.add_argument(
        "--profile-flags",
        default="",
        help="extra py-spy record flags for --profile, e.g. '--native' or '--gil'",
    )
    ap.add_argument(
        "--latency-rate",
        type=float,
        default=LATENCY_RATE,
        help=f"send rate of the latency phase, msgs/s (default {LATENCY_RATE:,}: the goal's rate)",
    )
    ap.add_argument("--seconds", type=float, default=None, help="length of each produce/consume phase")
    ap.add_argument(
        "--phases",
        default=",".join(PHASES),
        help=f"comma-separated phases to run (default all: {','.join(PHASES)}; consume needs batch)",
    )
    ap.add_argument(
        "--sizes", default=None, help="comma-separated body sizes in bytes (default: the plan's, 128,1024)"
    )
    ap.add_argument(
        "--profile",
        type=Path,
        default=None,
        metavar="DIR",
        help="record the broker with py-spy during each of our phases into DIR (raw collapsed stacks) "
        "and print its hot spots (needs py-spy: `.venv/bin/pip install py-spy`); py-spy takes CPU, so "
        "its phases run slower and are flagged as disturbed",
    )
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    source = source_version()
    plan = QUICK if args.quick else FULL
    if args.seconds is not None:
        if args.seconds <= 0:
            raise SystemExit("--seconds must be positive")
        plan = Plan(
            plan.name, args.seconds, plan.latency_seconds, plan.phase_cap_bytes, plan.sizes, plan.sync
        )
    if args.procs < 1:
        raise SystemExit("--procs must be at least 1")
    phases = tuple(p for p in args.phases.split(",") if p)
    if not phases or any(p not in PHASES for p in phases):
        raise SystemExit(f"--phases takes a comma-separated subset of {','.join(PHASES)}")
    sizes = tuple(int(x) for x in args.sizes.split(",")) if args.sizes else None
    redis_binary: str | None = None
    redis_bench: str | None = None
    if not args.no_redis:
        redis_binary = args.redis_server or shutil.which("redis-server")
        if redis_binary is None and Path("/usr/bin/redis-server").exists():
            redis_binary = "/usr/bin/redis-server"
        if redis_binary is None or not os.access(redis_binary, os.X_OK):
            print(REDIS_INSTALL_HINT, file=sys.stderr)
            return 2
        redis_bench = find_redis_benchmark(redis_binary)
        if redis_bench is None:
            print(REDIS_INSTALL_HINT, file=sys.stderr)
            return 2
    spy: str | None = None
    if args.profile is not None:
        spy = find_py_spy()
        if spy is None:
            print("py-spy not found: install it with `.venv/bin/pip install py-spy`", file=sys.stderr)
            return 2
        args.profile.mkdir(parents=True, exist_ok=True)
    parent = args.dir if args.dir is not None else Path.cwd()
    parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=".broker-bench-", dir=parent))
    loop = new_event_loop()
    loop_kind = f"{type(loop).__module__.split('.')[0]} event loop"
    settings = Settings(
        plan,
        redis_binary,
        redis_bench,
        work,
        Profiler(spy, args.profile, tuple(args.profile_flags.split())),
        args.latency_rate,
        procs=args.procs,
        serialize=args.serialize.upper(),
        source=source,
        loop_kind=loop_kind,
        phases=phases,
        sizes=sizes,
    )
    results = Results()
    t0 = time.perf_counter()
    try:
        out(f"# rocketlite broker vs Redis Streams ({plan.name}), {source}, work dir {work}")
        out(
            f"load generators: rocketlite <- {args.procs} worker process(es) ({loop_kind}), prebuilt "
            f"{settings.serialize} frames; Redis <- {redis_bench or 'skipped (--no-redis)'}"
        )
        out()
        # Ctrl-C / SIGTERM cancel the run: its `finally` blocks stop the servers in order.
        main_task = loop.create_task(run(settings, results))
        received: list[int] = []

        def interrupt(signum: int) -> None:
            received.append(signum)
            main_task.cancel()

        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, interrupt, signum)
        try:
            loop.run_until_complete(main_task)
        except asyncio.CancelledError:
            if not received:
                raise
            print(f"interrupted ({signal.Signals(received[0]).name}): servers stopped", file=sys.stderr)
            return 128 + received[0]
        summary(settings, results, time.perf_counter() - t0, settings.profiler.outputs)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    finally:
        stop_all_children()
        pending = asyncio.all_tasks(loop)
        for task in pending:
            task.cancel()
        with contextlib.suppress(Exception):
            if pending:
                loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            loop.run_until_complete(asyncio.sleep(0.05))  # run the callbacks of closed connections
        loop.close()
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
