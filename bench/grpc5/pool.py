"""The parent's side of the 5.x load generators: `procs` worker processes (bench/grpc5/workers.py)
run a job at once, metered from /proc (bench/broker/report.py's Meter) between "go" and the last
result."""

from __future__ import annotations

import asyncio
import multiprocessing
from dataclasses import replace
from multiprocessing.connection import Connection as Pipe
from multiprocessing.process import BaseProcess

from bench.broker.pool import stop_workers
from bench.broker.report import Meter, PhaseResult
from bench.grpc5.workers import Job, JobResult, worker_main


class GrpcLoadGen:
    def __init__(self, procs: int, endpoint: str, server: tuple[str, int]) -> None:
        ctx = multiprocessing.get_context("spawn")
        self.server = server
        self.pipes: list[Pipe] = []
        self.procs: list[BaseProcess] = []
        self.tally = ctx.Array("q", 3)  # the workers' shared counts (workers.Tally), per job
        for _ in range(procs):
            parent, child = ctx.Pipe()
            proc = ctx.Process(target=worker_main, args=(child, endpoint, self.tally, procs), daemon=True)
            proc.start()
            child.close()
            self.pipes.append(parent)
            self.procs.append(proc)

    def names(self) -> list[str]:
        return [f"grpc-gen#{w + 1}" for w in range(len(self.procs))]

    def _run(self, job: Job) -> tuple[list[JobResult], Meter]:
        n = len(self.pipes)
        share = replace(
            job,
            cap=-(-job.cap // n) if job.cap else 0,
            rate=job.rate / n,
        )
        self.tally[:] = [0, 0, 0]
        for pipe in self.pipes:
            pipe.send(share)
        for pipe in self.pipes:
            pipe.recv()  # "ready"
        pids = {name: p.pid for name, p in zip(self.names(), self.procs, strict=True) if p.pid}
        meter = Meter(self.server[0], {self.server[0]: self.server[1], **pids})
        for pipe in self.pipes:
            pipe.send("go")
        results = [pipe.recv() for pipe in self.pipes]
        errors = [r.error for r in results if r.error]
        if errors:
            raise RuntimeError(f"5.x load generator failed:\n{errors[0]}")
        return results, meter

    async def run(self, job: Job) -> PhaseResult:
        results, meter = await asyncio.get_running_loop().run_in_executor(None, self._run, job)
        elapsed = max(r.end for r in results) - min(r.start for r in results)
        res = meter.result(sum(r.messages for r in results), elapsed=elapsed)
        res.sent = sum(r.sent for r in results)
        res.latencies_ms = sorted(x for r in results for x in r.latencies_ms)
        res.ack_latencies_ms = sorted(x for r in results for x in r.ack_ms)
        res.send_lag_ms = sorted(x for r in results for x in r.lag_ms)
        return res

    def close(self) -> None:
        stop_workers(self.pipes, self.procs)
