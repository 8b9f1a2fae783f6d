"""`bench/grpc5_bench.py --ghz` counts right: ghz, driven with our shipped .proto files and the
SendMessageRequest of bench/grpc5/ghz.py (as JSON data, then serialized once), gets OK for every
call on both 5.x front doors, and the broker stored exactly as many messages as ghz counted OK
answers (a gRPC OK alone would not show it: SendMessageResponse carries RocketMQ's own status).

Not a speed test (no figure is judged). ghz is a bench tool that `make test` does not install
(`make ghz` does), so without it this test skips, with CI=true too.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from bench.broker.servers import stop_all_children
from bench.grpc5 import ghz, native


@pytest.mark.parametrize("impl", ["nghttp2", "grpcio"])
def test_ghz_send_is_all_ok_and_all_stored(impl: str, tmp_path: Path) -> None:
    if not ghz.GHZ.exists():
        pytest.skip(f"ghz ({ghz.GHZ}) is not installed (`make ghz`; `make test` does not need it)")
    s = native.Native(work=tmp_path, seconds=0.5, warmup=0.0, window=2, consume=False, impl=impl)
    try:
        rows = asyncio.run(ghz.run(s, go=False))
    finally:
        stop_all_children()
    assert rows["ghz_before"]["stored"] == 16  # the warm-up message of each queue
    for key in ("ghz5", "ghz5b"):  # JSON data, then the request serialized once
        r = rows[key]
        assert r["messages"] > 0
        assert r["statuses"] == {"OK": r["calls"]}
        assert r["stored"] == r["messages"]
        assert r["server_cpu_s"] > 0 and r["gen_cpu_s"] > 0
        assert 0 < r["p50_ms"] <= r["p99_ms"]
