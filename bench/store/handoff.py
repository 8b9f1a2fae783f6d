"""What the commit-log copy costs the event loop, written there or handed to a writer thread.

Issue 24's batched produce spends about a third of the broker's loop in the `pwrite` of the
records (the kernel's copy into the page cache). Moving that copy to a writer thread frees the
loop only if the hand-off costs less than the copy: a queue put, the writer's wake-up, the GIL
taken back by the writer around each write, and one `call_soon_threadsafe` per completed write
back to the loop (where the dispatch and the answers would follow). This measures both on a file
in a temporary directory, with the record size and count of a batched 1 KiB produce (32 records
of ~1.1 KiB a request), without the broker: the loop thread's CPU per request (`thread_time`),
the process's CPU, and the wall time. `--work-us` makes the loop busy between requests, as the
handling around each write keeps it: the writer then has to win the GIL back after each `pwrite`
(it releases it for the copy) from a thread that rarely lets go of it.

    .venv/bin/python bench/store/handoff.py [--requests 20000] [--size 36000] [--runs 5] [--work-us 50]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import queue
import tempfile
import threading
import time
from pathlib import Path

SEGMENT = 256 * 1024 * 1024
WORK_S = 0.0  # the loop's other work per request (`--work-us`): Python holding the GIL


def work() -> None:
    """Hold the GIL for WORK_S of this thread's CPU, as the handling around each write does."""
    end = time.thread_time() + WORK_S
    while time.thread_time() < end:
        pass


async def direct(fd: int, buf: bytes, n: int) -> None:
    pos = 0
    for i in range(n):
        work()
        os.pwrite(fd, buf, pos)
        pos = (pos + len(buf)) % (SEGMENT - len(buf))
        if i % 4 == 3:
            await asyncio.sleep(0)  # a loop turn now and then, as reads arrive


async def handed_off(fd: int, buf: bytes, n: int) -> None:
    loop = asyncio.get_running_loop()
    jobs: queue.SimpleQueue[tuple[int, int] | None] = queue.SimpleQueue()
    done = asyncio.Event()
    completed = 0

    def on_done(count: int) -> None:  # on the loop: where the dispatch and answers would go
        nonlocal completed
        completed += count
        if completed == n:
            done.set()

    def writer() -> None:
        while True:
            job = jobs.get()
            if job is None:
                return
            count = 1
            os.pwrite(fd, buf, job[0])
            while True:  # drain what queued meanwhile: one wake-up of the loop per round
                try:
                    more = jobs.get_nowait()
                except queue.Empty:
                    break
                if more is None:
                    loop.call_soon_threadsafe(on_done, count)
                    return
                os.pwrite(fd, buf, more[0])
                count += 1
            loop.call_soon_threadsafe(on_done, count)

    thread = threading.Thread(target=writer, name="bench-writer")
    thread.start()
    pos = 0
    for i in range(n):
        work()
        jobs.put((pos, i))
        pos = (pos + len(buf)) % (SEGMENT - len(buf))
        if i % 4 == 3:
            await asyncio.sleep(0)
    await done.wait()
    jobs.put(None)
    thread.join()


def measure(kind: str, path: Path, size: int, n: int) -> tuple[float, float, float]:
    buf = os.urandom(size)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC)
    try:
        os.posix_fallocate(fd, 0, SEGMENT)
        body = direct if kind == "direct" else handed_off
        loop0, cpu0, wall0 = time.thread_time(), time.process_time(), time.perf_counter()
        asyncio.run(body(fd, buf, n))
        loop_cpu, cpu, wall = (
            time.thread_time() - loop0,
            time.process_time() - cpu0,
            time.perf_counter() - wall0,
        )
    finally:
        os.close(fd)
        path.unlink()
    return loop_cpu / n * 1e6, cpu / n * 1e6, wall / n * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--requests", type=int, default=20000)
    ap.add_argument(
        "--size", type=int, default=36000, help="bytes a request appends (32 records of ~1.1 KiB)"
    )
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--work-us", type=float, default=0.0, help="the loop's own CPU per request (GIL held)")
    args = ap.parse_args()
    global WORK_S
    WORK_S = args.work_us / 1e6
    with tempfile.TemporaryDirectory() as tmp:
        for kind in ("direct", "handed off"):
            runs = [measure(kind, Path(tmp) / "log", args.size, args.requests) for _ in range(args.runs)]
            loop_cpu, cpu, wall = (min(r[i] for r in runs) for i in range(3))
            print(
                f"{kind:10s} µs per request: loop thread CPU {loop_cpu:7.2f}, process CPU {cpu:7.2f}, "
                f"wall {wall:7.2f}"
            )


if __name__ == "__main__":
    main()
