"""Over-loopback benchmark of the broker against Redis Streams, at equal durability, in one run.

    .venv/bin/python bench/broker_bench.py              # full run (~2 minutes, <= ~1 GiB of disk)
    .venv/bin/python bench/broker_bench.py --quick      # small run (< 30 s; the smoke test)
    .venv/bin/python bench/broker_bench.py --no-redis   # our broker only
    .venv/bin/python bench/broker_bench.py --profile /tmp/prof   # + py-spy of the broker per phase
    .venv/bin/python bench/broker_bench.py --latency-rate 5000   # latency below saturation

Servers run as separate processes, one at a time (each group of phases runs our broker, stops it,
then runs Redis), each on a fresh temporary directory under --dir (default: the current
directory's filesystem), deleted when the server stops:

* ours: ``python -m rocketlite broker -c broker.conf`` (storePathRootDir in the temp dir, a free
  listenPort on 127.0.0.1, no name server, 16 queues per auto-created topic, 128 MiB commit-log
  segments so a phase rolls segments as production does);
* Redis: ``redis-server --port X --dir D --appendonly yes --appendfsync everysec|always --save ''``
  (plus ``--bind 127.0.0.1``), Debian's package (``apt-get install -y redis-server``).

Equal durability: our ASYNC_FLUSH against ``appendfsync everysec``, our SYNC_FLUSH (group commit)
against ``appendfsync always``. Bodies of 128 B and 1 KiB. The load generator is this process, one
asyncio loop (uvloop when installed, via `rocketlite.runtime.new_event_loop`), 16 connections:

* ours is driven by rocketlite's own remoting client (`rocketlite.remoting.connection.Connection`:
  many requests in flight per connection, matched by opaque; headers built with
  `SendMessageRequestHeader.to_ext_v2` / `PullMessageRequestHeader`, batches with `encode_batch`);
* Redis is driven by the minimal pipelined RESP client in bench/broker/peers.py (`RespConnection`: an
  `asyncio.Protocol` with an incremental RESP2 parser, replies matched in order).

Phases (each bounded by --seconds and by a per-phase byte cap that keeps the disk use down;
connection i writes and reads queue i of the topic / stream i):

1. batched produce: SEND_BATCH_MESSAGE of 32 messages, one batch in flight per connection, vs 32
   XADDs written at once (pipelined 32 deep), one pipeline in flight per connection;
2. single-message produce: SEND_MESSAGE_V2, a window of 32 requests in flight per connection, vs
   XADD with a window of 32;
3. consume (ASYNC group only) of what phase 1 wrote, the same count per queue on both sides:
   PULL_MESSAGE of 32 (subscription in the request, no suspend), one pull in flight per queue, vs
   ``XRANGE stream (last-id + COUNT 1000``, one in flight per stream;
4. end-to-end latency (ASYNC group only): 16 producer connections send single messages paced at
   20k msgs/s (body starts with the send time), 16 consumers long-poll (PULL_MESSAGE with SUSPEND)
   / ``XREAD BLOCK``; latency = receive time - send time, both in this process; the send -> ack
   part is printed too.

Every message carries what a Java producer sends (UNIQ_KEY, TAGS, WAIT), so the broker indexes it.
msgs/s count acknowledged (produce) or received (consume) messages over the phase's wall time,
from the first request to the last answer. Phases do not leak into each other: before each one
the page cache is written back (`os.sync`), and after each of our produce phases the benchmark
waits until the broker has dispatched everything (the time that took is printed, with the
"consumable" rate it implies). Each phase prints the CPU used by the server, by the load
generator and by the rest of the machine (100% = one core): which side was the bottleneck, and
whether another workload disturbed the run (flagged, and summed up under the table).
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

from bench.broker.config import FULL, LATENCY_RATE, QUICK, REDIS_INSTALL_HINT, Plan, out
from bench.broker.profiling import Profiler, find_py_spy
from bench.broker.report import Report
from bench.broker.runner import Settings, run, summary
from bench.broker.servers import stop_all_children
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
    ap.add_argument("--quick", action="store_true", help="short phases (< 30 s in all), for the smoke test")
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
    redis_binary: str | None = None
    if not args.no_redis:
        redis_binary = args.redis_server or shutil.which("redis-server")
        if redis_binary is None and Path("/usr/bin/redis-server").exists():
            redis_binary = "/usr/bin/redis-server"
        if redis_binary is None or not os.access(redis_binary, os.X_OK):
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
        work,
        Profiler(spy, args.profile, tuple(args.profile_flags.split())),
        args.latency_rate,
        source=source,
        loop_kind=loop_kind,
    )
    report = Report()
    t0 = time.perf_counter()
    try:
        out(f"# rocketlite broker vs Redis Streams ({plan.name}), {source}, work dir {work}")
        out(
            f"load generator: this process ({loop_kind}); rocketlite <- rocketlite.remoting.Connection; "
            f"Redis <- peers.RespConnection{'' if redis_binary else '; Redis skipped (--no-redis)'}"
        )
        out()
        # Ctrl-C / SIGTERM cancel the run: its `finally` blocks stop the servers in order.
        main_task = loop.create_task(run(settings, report))
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
        report.profiles = settings.profiler.outputs
        summary(settings, report, time.perf_counter() - t0)
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
