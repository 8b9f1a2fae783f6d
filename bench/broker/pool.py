"""The parent's side of the load generators: our broker's worker processes (bench/broker/workers.py)
and Redis's C client, redis-benchmark; each phase metered from /proc.

* `LoadGen` starts `procs` worker processes (spawn) for one broker and runs a phase on all of them
  at once: every worker prepares (connections, frames), then the meter starts, all get "go", and
  the meter stops when the last result is in. The rate is measured from the first request to the
  last answer (worker clocks are CLOCK_MONOTONIC, one clock for the machine).
* `redis_benchmark` runs one redis-benchmark (`--csv`) and takes the requests/s it reports; its own
  CPU comes from `os.wait4`'s rusage (it has exited before /proc could be read again).
"""

from __future__ import annotations

import asyncio
import contextlib
import csv
import itertools
import multiprocessing
import os
import subprocess
from dataclasses import replace
from multiprocessing.connection import Connection as Pipe
from multiprocessing.process import BaseProcess
from pathlib import Path

from bench.broker.report import Meter, PhaseResult
from bench.broker.workers import Job, JobResult, worker_main


class LoadGen:
    """`procs` load-generator processes against the broker on `port`; queue q is driven by worker
    q % procs."""

    def __init__(self, procs: int, port: int, serialize: str, server: tuple[str, int]) -> None:
        ctx = multiprocessing.get_context("spawn")
        self.server = server  # (name, pid) of the measured server
        self.pipes: list[Pipe] = []
        self.procs: list[BaseProcess] = []
        for _ in range(procs):
            parent, child = ctx.Pipe()
            proc = ctx.Process(target=worker_main, args=(child, port, serialize), daemon=True)
            proc.start()
            child.close()
            self.pipes.append(parent)
            self.procs.append(proc)

    def names(self) -> list[str]:
        return [f"loadgen#{w + 1}" for w in range(len(self.procs))]

    def share(self, queues: list[int]) -> list[tuple[int, ...]]:
        """Queues per worker (q % procs), in queue order."""
        n = len(self.procs)
        return [tuple(q for q in queues if q % n == w) for w in range(n)]

    def _run(self, jobs: list[Job | None]) -> tuple[list[JobResult | None], Meter]:
        busy = [(pipe, job) for pipe, job in zip(self.pipes, jobs, strict=True) if job is not None]
        for pipe, job in busy:
            pipe.send(job)
        answers = [pipe.recv() for pipe, _job in busy]
        errors = [a.error for a in answers if isinstance(a, JobResult)]
        if errors:
            for (pipe, _job), answer in zip(busy, answers, strict=True):
                if answer == "ready":
                    pipe.send("cancel")  # it skips the job and waits for the next
            raise RuntimeError(f"load generator failed to prepare:\n{errors[0]}")
        pids = {name: p.pid for name, p in zip(self.names(), self.procs, strict=True) if p.pid}
        meter = Meter(self.server[0], {self.server[0]: self.server[1], **pids})
        for pipe, _job in busy:
            pipe.send("go")
        results: list[JobResult | None] = []
        it = iter(busy)
        for maybe in jobs:
            if maybe is None:
                results.append(None)
                continue
            pipe, _job = next(it)
            res = pipe.recv()
            if res.error:
                raise RuntimeError(f"load generator failed:\n{res.error}")
            results.append(res)
        return results, meter

    async def run(self, job: Job, queues: list[int], per_worker: list[Job] | None = None) -> PhaseResult:
        """Run `job` split over the workers (each gets its queues, and the matching targets and
        start offsets); returns the merged result, per_queue in the order of `queues`."""
        if per_worker is None:
            per_worker = []
            for mine in self.share(queues):
                idx = [queues.index(q) for q in mine]
                per_worker.append(
                    replace(
                        job,
                        queues=mine,
                        targets=tuple(job.targets[i] for i in idx) if job.targets else (),
                        start_offsets=tuple(job.start_offsets[i] for i in idx) if job.start_offsets else (),
                        rate=job.rate * len(mine) / len(queues),
                    )
                )
        jobs: list[Job | None] = [j if j.queues else None for j in per_worker]
        loop = asyncio.get_running_loop()
        results, meter = await loop.run_in_executor(None, self._run, jobs)
        done = [r for r in results if r is not None]
        per_queue = [0] * len(queues)
        for j, r in zip(jobs, results, strict=True):
            if j is None or r is None:
                continue
            for q, n in zip(j.queues, r.per_queue, strict=False):
                per_queue[queues.index(q)] = n
        elapsed = max(r.end for r in done) - min(r.start for r in done)
        res = meter.result(sum(r.messages for r in done), elapsed=elapsed, per_queue=per_queue)
        failures = [f for r in done for f in r.failures]
        if failures:
            raise RuntimeError(f"{len(failures)} failures in the {job.kind} phase, first: {failures[0]}")
        res.latencies_ms = sorted(x for r in done for x in r.latencies_ms)
        res.ack_latencies_ms = sorted(x for r in done for x in r.ack_ms)
        res.send_lag_ms = sorted(x for r in done for x in r.lag_ms)
        res.sent = sum(r.sent for r in done)
        return res

    def close(self) -> None:
        stop_workers(self.pipes, self.procs)


def stop_workers(pipes: list[Pipe], procs: list[BaseProcess]) -> None:
    """Tell each worker process to end (None), wait a little, kill what is left, close the pipes."""
    for pipe in pipes:
        with contextlib.suppress(OSError):
            pipe.send(None)
    for proc in procs:
        proc.join(5)
        if proc.is_alive():
            proc.kill()
            proc.join()
    for pipe in pipes:
        pipe.close()


# -- redis-benchmark ----------------------------------------------------------------------------
def find_redis_benchmark(redis_server: str) -> str | None:
    """redis-benchmark beside redis-server (both come in Debian's redis-tools / redis-server)."""
    beside = Path(redis_server).with_name("redis-benchmark")
    if beside.exists():
        return str(beside)
    for d in os.environ.get("PATH", "").split(os.pathsep):
        p = Path(d) / "redis-benchmark"
        if p.exists():
            return str(p)
    return None


def redis_benchmark(
    binary: str,
    port: int,
    server_pid: int,
    command: list[str],
    *,
    requests: int,
    clients: int,
    pipeline: int,
    keyspace: int,
    msgs_per_request: int,
    log: Path,
    threads: int = 1,
) -> PhaseResult:
    """One redis-benchmark run of `command` (`__rand_int__` expands to 0..keyspace-1): its requests/s
    (times `msgs_per_request`) for the rate, redis-server's CPU from /proc, redis-benchmark's from
    its rusage. Blocking: call it in an executor."""
    argv = [
        binary, "-h", "127.0.0.1", "-p", str(port), "-c", str(clients), "-n", str(requests),
        "-P", str(pipeline), "-r", str(keyspace), "--csv", *command,
    ]  # fmt: skip
    if threads > 1:  # its own event loops: parsing 32 x 1 KiB XRANGE replies saturates one
        argv[1:1] = ["--threads", str(threads)]
    meter = Meter("redis-server", {"redis-server": server_pid})
    with log.open("wb") as f:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=f, stderr=subprocess.STDOUT)
        _pid, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
    text = log.read_text(errors="replace")
    if proc.returncode != 0:
        raise RuntimeError(f"redis-benchmark exited {proc.returncode}: {text[-2000:]}")
    rps = parse_csv_rps(text)
    messages = requests * msgs_per_request
    cpu = {"redis-benchmark": usage.ru_utime + usage.ru_stime}
    return meter.result(messages, elapsed=requests / rps, extra_cpu=cpu)


def parse_csv_rps(text: str) -> float:
    """The "rps" column of redis-benchmark --csv output (header "test","rps",...)."""
    rows = list(csv.reader(line for line in text.splitlines() if line.startswith('"')))
    for header, row in itertools.pairwise(rows):
        if "rps" in header and len(row) == len(header):
            return float(row[header.index("rps")])
    raise RuntimeError(f"no rps in redis-benchmark output: {text[-500:]!r}")
