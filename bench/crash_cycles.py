"""Broker-process crash loop: N cycles of load + SIGKILL + restart, then verify every ack.

    python -m bench.crash_cycles --cycles 100                 # SYNC_FLUSH: lost must be 0
    python -m bench.crash_cycles --cycles 30 --flush ASYNC_FLUSH

Prints ``cycles=… sent=… acked=… lost=…`` (and the exit status is 1 if anything was lost under
SYNC_FLUSH). The harness is `tests/reliability/test_broker_crash.py`.

ASYNC_FLUSH loss window, stated precisely: a SIGKILL ends the *process*, not the machine. Every
append has already been copied into the commit-log's page cache (the mapped file) when the
broker answers, and the kernel writes dirty pages back whether or not the process still exists,
so a process kill loses nothing under ASYNC_FLUSH either (this script measures that: lost=0).
What ASYNC_FLUSH gives up is the machine-crash (power loss, kernel panic) case: the messages
acknowledged since the last flush, i.e. at most ``flushIntervalCommitLog`` ms (500 by default)
of writes, plus whatever the OS had not yet written back. The script reports that window as
``acks/s x flushIntervalCommitLog`` from the measured ack rate; it cannot be observed without
cutting the power, which a test cannot do.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import tempfile
import time
from pathlib import Path

from tests.reliability.test_broker_crash import CrashState, crash_cycles, verify

FLUSH_INTERVAL_MS = 500  # StoreConfig.flush_interval_commit_log default


async def main_async(args: argparse.Namespace, root: Path) -> int:
    state = CrashState(root, flush=args.flush)
    started = time.monotonic()
    await crash_cycles(state, args.cycles, random.Random(args.seed), args.max_acks)
    elapsed = time.monotonic() - started
    lost = await verify(state, by_key=not args.no_key_check)
    acked = len(state.acks)
    print(f"flush={args.flush} cycles={state.cycles} sent={state.sent} acked={acked} lost={lost} "
          f"elapsed={elapsed:.1f}s")  # fmt: skip
    if args.flush == "ASYNC_FLUSH":
        rate = acked / elapsed if elapsed else 0.0
        print(f"process kill: lost={lost} (page cache survives a process kill)")
        at_risk = rate * FLUSH_INTERVAL_MS / 1000
        print(f"machine-crash window: <= {FLUSH_INTERVAL_MS} ms of acks = ~{at_risk:.0f} "
              f"messages at {rate:.0f} acks/s (incl. restarts)")  # fmt: skip
    return 1 if lost and args.flush == "SYNC_FLUSH" else 0


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--cycles", type=int, default=50)
    parser.add_argument("--max-acks", type=int, default=500, help="kill after 1..N acks per cycle")
    parser.add_argument("--flush", choices=("SYNC_FLUSH", "ASYNC_FLUSH"), default="SYNC_FLUSH")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--no-key-check", action="store_true", help="skip QUERY_MESSAGE per ack")
    parser.add_argument("--root", type=Path, help="store directory (default: a temporary one)")
    args = parser.parse_args()
    if args.root:
        args.root.mkdir(parents=True, exist_ok=True)
        return asyncio.run(main_async(args, args.root))
    with tempfile.TemporaryDirectory(prefix="crash-cycles-") as tmp:
        return asyncio.run(main_async(args, Path(tmp)))


if __name__ == "__main__":
    sys.exit(main())
