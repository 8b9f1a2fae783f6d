"""The native generator's 5.x latency phase (`peersgen e2e -proto grpc`, driven by
bench/grpc5/native.py) counts right against a real broker's gRPC endpoint: every paced
SendMessage is answered OK, and every stamped message is received back by the long-polling
receivers (acked without waiting), none missing; the latencies and the broker's CPU are read.
The phase's default source, prebuilt HTTP/2 frames (`-proto grpcraw`), is
tests/bench/test_grpc5_native_grpcraw.py's.

Not a speed test (no latency is judged): the counts are. `make test` builds the generator
(`clients` → .clients/peers/bin/peersgen); without it the test skips, with CI=true it fails.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest
from bench.broker.servers import stop_all_children
from bench.grpc5 import native

RATE, SECONDS = 200.0, 2.0


@pytest.mark.parametrize("impl", ["grpcio", "nghttp2"])
def test_native_latency_phase_receives_every_message_it_sent(tmp_path: Path, impl: str) -> None:
    if not native.GENERATOR.exists():
        why = f"the load generator {native.GENERATOR} is not built (`make peersgen`)"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(why)
        pytest.skip(why)
    s = native.Native(
        work=tmp_path, impl=impl, produce=False, consume=False, latency=True,
        latency_rate=RATE, latency_seconds=SECONDS, source5c="grpc",
    )  # fmt: skip
    try:
        rows = asyncio.run(native.run(s))
    finally:
        stop_all_children()
    r = rows["latency5"]
    # the pacer's last tick may come a little before the end of the window: at most a few short
    assert RATE * SECONDS * 0.95 <= r["sent"] <= RATE * SECONDS
    assert (r["requests"], r["messages"], r["errors"]) == (r["sent"], r["sent"], 0), r.get("first_error")
    assert r["samples"] == r["sent"]
    assert 0 < r["p50_ms"] <= r["p99_ms"] <= r["max_ms"]
    assert 0 < r["send_p50_ms"] <= r["send_p99_ms"]
    assert r["server_cpu_s"] > 0  # the broker's /proc CPU over the window
