"""The native load generator of bench/peers_bench.py works: against a real rocketlite broker it
sends exactly what it was asked to, with prebuilt frames, and reads back exactly that many.

Not a speed test (no figure is judged): the counts are. The same for its 5.x gRPC mode against
the broker's gRPC endpoint. `make test` builds the generator
(`clients` → .clients/peers/bin/peersgen); without it the test skips, with CI=true it fails.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from bench.broker.config import BATCH, CONNECTIONS
from bench.broker.servers import start_broker, stop_all_children
from bench.grpc5.native import write_grpc_frames
from bench.peers.frames import write_frames
from bench.peers.servers import GENERATOR, Server, start_rocketlite, wait_port

from tests.support.ports import free_port

TOPIC = "PeersSmoke"


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Server]:
    if not GENERATOR.exists():
        why = f"the load generator {GENERATOR} is not built (`make peersgen`)"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(why)
        pytest.skip(why)
    server = start_rocketlite(tmp_path / "broker")
    try:
        yield server
    finally:
        stop_all_children()


def peersgen(server: Server, mode: str, *args: str) -> dict[str, Any]:
    argv = [
        str(GENERATOR),
        mode,
        "-proto",
        server.proto,
        "-addr",
        server.addr,
        "-server-pid",
        str(server.child.pid),
    ]
    proc = subprocess.run([*argv, *args], check=True, capture_output=True, text=True, timeout=120)
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


SINGLES = CONNECTIONS * 500


def test_generator_sends_and_reads_back_exact_counts(broker: Server, tmp_path: Path) -> None:
    single = write_frames(tmp_path / "single.json", TOPIC, 1024, batch=False)
    batch = write_frames(tmp_path / "batch.json", TOPIC, 1024, batch=True)

    # enough sends that the broker's /proc CPU (in 10 ms ticks) cannot round to 0 over the window:
    # 160 compiled-lane sends took under a tick, and the check below failed once
    sent = peersgen(broker, "produce", "-frames", str(single), "-count", str(SINGLES))
    assert (sent["requests"], sent["messages"], sent["errors"]) == (SINGLES, SINGLES, 0)
    assert sent["server_cpu_s"] > 0  # the broker's /proc CPU is read over the window
    assert 0 < sent["p50_ms"] <= sent["p99_ms"]

    batched = peersgen(
        broker,
        "produce",
        "-frames",
        str(batch),
        "-count",
        str(CONNECTIONS * 2),
        "-window",
        "1",
        "-batch",
        str(BATCH),
    )
    assert (batched["requests"], batched["messages"], batched["errors"]) == (
        CONNECTIONS * 2,
        CONNECTIONS * 2 * BATCH,
        0,
    )

    read = peersgen(broker, "consume", "-frames", str(single), "-seconds", "30")
    assert read["errors"] == 0, read.get("first_error")
    assert read["messages"] == SINGLES + CONNECTIONS * 2 * BATCH


def test_a_refused_request_is_counted_as_an_error(broker: Server, tmp_path: Path) -> None:
    """The generator reads each answer's code: a request the broker refuses (here a request code
    it does not know, REQUEST_CODE_NOT_SUPPORTED) is counted as an error, not as throughput."""
    doc = json.loads(write_frames(tmp_path / "single.json", TOPIC, 1024, batch=False).read_text())
    frame = base64.b64decode(doc["frames"][0]["data"])
    assert frame.count(b'"code":310,') == 1  # SEND_MESSAGE_V2; 999 has as many digits
    doc["frames"] = [
        {**doc["frames"][0], "data": base64.b64encode(frame.replace(b'"code":310,', b'"code":999,')).decode()}
    ]
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(doc))

    res = peersgen(broker, "produce", "-frames", str(bad), "-count", str(CONNECTIONS))
    assert (res["requests"], res["errors"]) == (CONNECTIONS, CONNECTIONS)
    assert res["first_error"].startswith("code 3:"), res["first_error"]


def test_grpc_mode_sends_and_receives_exact_counts(tmp_path: Path) -> None:
    """`-proto grpc` (google.golang.org/grpc, protobuf bytes serialized here) against the broker's
    5.x endpoint: exactly the SendMessage calls asked for succeed, and ReceiveMessage + AckMessage
    read every one of them back."""
    if not GENERATOR.exists():
        why = f"the load generator {GENERATOR} is not built (`make peersgen`)"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(why)
        pytest.skip(why)
    grpc_port = free_port()
    child, port = start_broker(tmp_path, False, {grpc_port}, extra={"grpcServerPort": str(grpc_port)})
    try:
        wait_port(child, port)
        wait_port(child, grpc_port)
        server = Server("rocketlite", "this commit", "grpc", child, grpc_port)
        frames = write_grpc_frames(tmp_path / "grpc.json", "PeersSmoke5", "PeersSmoke5Group", 1024)
        count = CONNECTIONS * 4 * 3
        sent = peersgen(server, "produce", "-frames", str(frames), "-count", str(count), "-window", "4")
        assert (sent["requests"], sent["errors"]) == (count, 0), sent.get("first_error")
        assert 0 < sent["p50_ms"] <= sent["p99_ms"]

        read = peersgen(server, "consume", "-frames", str(frames), "-seconds", "30")
        assert read["errors"] == 0, read.get("first_error")
        assert read["messages"] == count
    finally:
        stop_all_children()
