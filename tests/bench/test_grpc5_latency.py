"""The 5.x latency phase of bench/grpc5_bench.py counts right: its generator processes send
exactly rate x seconds messages, and every one is received (its workers share one consumer group,
so none may stop receiving while another's messages are still on their way).

Not a speed test (no latency is judged): the counts are. Before, a late last pacing tick sent
998 of 1,000, and a worker that had counted enough (some of them the other worker's messages)
cancelled its receive streams with the other's messages in them, which then stayed invisible
past the phase: "64 missing". On the compiled HTTP/2 door the receivers' QueryAssignment could
come before the first send had auto-created the topic: they died on TOPIC_NOT_FOUND and nothing
was received (half the runs); they now ask again until the topic exists.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from bench.broker.servers import start_broker, stop_all_children, wait_listening
from bench.grpc5.pool import GrpcLoadGen
from bench.grpc5.workers import Job

from tests.support.ports import free_port

RATE, SECONDS = 400.0, 1.0


async def _latency_phase(work: Path) -> tuple[int, int]:
    grpc_port = free_port()
    broker, port = start_broker(work, False, {grpc_port}, extra={"grpcServerPort": str(grpc_port)})
    gen = None
    try:
        await wait_listening(broker, port)
        await wait_listening(broker, grpc_port)
        gen = GrpcLoadGen(2, f"127.0.0.1:{grpc_port}", ("broker", broker.pid))
        job = Job(
            "latency", "Latency5", group="Latency5Group", body_size=256, seconds=SECONDS,
            window=2, rate=RATE, grace=20.0,
        )  # fmt: skip
        r = await gen.run(job)
        return r.sent, r.messages
    finally:
        if gen is not None:
            gen.close()
        stop_all_children()


def test_latency_phase_sends_exactly_its_rate_and_receives_all(tmp_path: Path) -> None:
    sent, received = asyncio.run(_latency_phase(tmp_path))
    assert sent == round(RATE * SECONDS)
    assert received == sent
