"""The native generator's cheap 5.x load source (`peersgen produce -proto grpcraw`: prebuilt HTTP/2
frames, bench/peers/loadgen/grpcraw.go) counts right against a real broker's gRPC endpoint, on
both doors: every SendMessage call is answered with grpc-status 0 and RocketMQ's status 20000, and
every one of them is a message stored in the topic (its queues' max offsets, read over 4.x).

Each connection keeps 128 calls of about 1.1 KiB in flight: more than the 65,535 bytes of a
connection's initial window hold, so some of the first calls must wait (the generator counts them,
`flow_waits`) until the server's WINDOW_UPDATEs let them go; writing past the window would be a
FLOW_CONTROL_ERROR, and not honouring the updates would leave the fill unfinished.

Not a speed test: the counts are. `make test` builds the generator (`clients` →
.clients/peers/bin/peersgen); without it the test skips, with CI=true it fails.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import pytest
from bench.broker.config import CONNECTIONS
from bench.broker.servers import stop_all_children
from bench.grpc5 import ghz, native

PER_CONN, WINDOW = 256, 128
CALLS = CONNECTIONS * PER_CONN


async def fill(s: native.Native) -> tuple[dict[str, Any], int, int]:
    """The generator's -count run on TOPIC5; the topic's message count before and after."""
    async with native.serving(s) as b:
        conn = b.conns[0]
        before = await ghz.wait_stored(conn, native.TOPIC5, CONNECTIONS)  # one warm-up message per queue
        args = ("-count", str(CALLS), "-window", str(WINDOW), "-frames", str(b.frames5))
        r = native.generate("produce", "grpcraw", f"127.0.0.1:{b.grpc_port}", b.broker.pid, *args)
        after = await ghz.wait_stored(conn, native.TOPIC5, before + CALLS)
    return r, before, after


@pytest.mark.parametrize("impl", ["grpcio", "nghttp2"])
def test_grpcraw_produce_answers_and_stores_every_call(tmp_path: Path, impl: str) -> None:
    if not native.GENERATOR.exists():
        why = f"the load generator {native.GENERATOR} is not built (`make peersgen`)"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(why)
        pytest.skip(why)
    s = native.Native(work=tmp_path, impl=impl, consume=False)
    try:
        r, before, after = asyncio.run(fill(s))
    finally:
        stop_all_children()
    assert (r["requests"], r["messages"], r["errors"]) == (CALLS, CALLS, 0), r.get("first_error")
    assert r["samples"] == CALLS
    assert 0 < r["p50_ms"] <= r["p99_ms"]
    assert r["server_cpu_s"] > 0  # the broker's /proc CPU over the fill
    assert r.get("flow_waits", 0) > 0  # the initial connection window held some calls back
    assert before == CONNECTIONS
    assert after - before == CALLS
