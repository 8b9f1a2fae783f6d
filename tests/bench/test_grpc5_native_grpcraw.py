"""The native generator's cheap 5.x load source (prebuilt HTTP/2 frames, `-proto grpcraw`:
bench/peers/loadgen/grpcraw.go and grpcrawconsume.go) counts right against a real broker's gRPC
endpoint, on both doors.

Produce (`peersgen produce`): every SendMessage call is answered with grpc-status 0 and RocketMQ's
status 20000, and every one of them is a message stored in the topic (its queues' max offsets,
read over 4.x). Each connection keeps 128 calls of about 1.1 KiB in flight: more than the 65,535
bytes of a connection's initial window hold, so some of the first calls must wait (the generator
counts them, `flow_waits`) until the server's WINDOW_UPDATEs let them go; writing past the window
would be a FLOW_CONTROL_ERROR, and not honouring the updates would leave the fill unfinished.

Consume (`peersgen consume`): after such a fill, the receivers (ReceiveMessage of 32, then one
AckMessage per batch, read and built from the raw frames) take every stored message exactly once
and ack it: the count equals what the topic holds, the group's committed offset of every queue
reaches the queue's max offset (the POP state commits an offset only once everything below it is
acked): none is left in flight, none was taken twice.

E2E (`peersgen e2e`): paced SendMessage calls with the send time in the body, while long-polling
receivers take each message as its DATA frame arrives and ack every batch without waiting: every
sent message is received once, with a latency sample, and the group's offsets reach the topic's end.
At the end the receives parked in their long polls are cancelled (RST_STREAM CANCEL, as grpc-go's
cancelled context), then GOAWAY: the server's late frames on them are not errors.

Not a speed test: the counts are. `make test` builds the generator (`clients` →
.clients/peers/bin/peersgen); without it the tests skip, with CI=true they fail.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import pytest
from bench.broker.config import CONNECTIONS
from bench.broker.loadgen import submit
from bench.broker.servers import stop_all_children
from bench.grpc5 import ghz, native

from rocketlite.protocol.requests.offsets import (
    build_get_max_offset,
    build_query_consumer_offset,
    parse_get_max_offset,
    parse_query_consumer_offset,
)
from rocketlite.remoting.connection import Connection

PER_CONN, WINDOW = 256, 128
CALLS = CONNECTIONS * PER_CONN


def need_generator() -> None:
    if not native.GENERATOR.exists():
        why = f"the load generator {native.GENERATOR} is not built (`make peersgen`)"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(why)
        pytest.skip(why)


def generate(b: native.Served, mode: str, *args: str, frames: Path | None = None) -> dict[str, Any]:
    return native.generate(mode, "grpcraw", f"127.0.0.1:{b.grpc_port}", b.broker.pid, *args,
                           "-frames", str(frames or b.frames5))  # fmt: skip


async def fill(b: native.Served) -> tuple[dict[str, Any], int, int]:
    """The generator's -count run on TOPIC5; the topic's message count before and after."""
    conn = b.conns[0]
    before = await ghz.wait_stored(conn, native.TOPIC5, CONNECTIONS)  # one warm-up message per queue
    r = generate(b, "produce", "-count", str(CALLS), "-window", str(WINDOW))
    after = await ghz.wait_stored(conn, native.TOPIC5, before + CALLS)
    return r, before, after


def run(s: native.Native, work: Any, topics: tuple[str, ...] = ()) -> Any:
    """`work(b)` on a broker of `s` (with `topics` too), the broker stopped after."""

    async def main() -> Any:
        async with native.serving(s, topics) as b:
            return await work(b)

    try:
        return asyncio.run(main())
    finally:
        stop_all_children()


@pytest.mark.parametrize("impl", ["grpcio", "nghttp2"])
def test_grpcraw_produce_answers_and_stores_every_call(tmp_path: Path, impl: str) -> None:
    need_generator()
    r, before, after = run(native.Native(work=tmp_path, impl=impl, consume=False), fill)
    assert (r["requests"], r["messages"], r["errors"]) == (CALLS, CALLS, 0), r.get("first_error")
    assert r["samples"] == CALLS
    assert 0 < r["p50_ms"] <= r["p99_ms"]
    assert r["server_cpu_s"] > 0  # the broker's /proc CPU over the fill
    assert r.get("flow_waits", 0) > 0  # the initial connection window held some calls back
    assert before == CONNECTIONS
    assert after - before == CALLS


async def offsets(conn: Connection, build: Any, parse: Any) -> list[int | None]:
    return [parse(await submit(conn, build(q))) for q in range(CONNECTIONS)]


async def progress(conn: Connection, topic: str, group: str) -> tuple[list[Any], list[Any]]:
    """The topic's max offsets and the group's committed offsets, queue by queue."""
    maxes = await offsets(conn, lambda q: build_get_max_offset(topic, q), parse_get_max_offset)
    committed = await offsets(
        conn, lambda q: build_query_consumer_offset(group, topic, q), parse_query_consumer_offset
    )
    return maxes, committed


@pytest.mark.parametrize("impl", ["grpcio", "nghttp2"])
def test_grpcraw_consume_receives_and_acks_every_message_once(tmp_path: Path, impl: str) -> None:
    need_generator()

    async def work(b: native.Served) -> tuple[int, dict[str, Any], list[Any], list[Any]]:
        _, _, stored = await fill(b)
        first = generate(b, "consume", "-seconds", "60")
        maxes, committed = await progress(b.conns[0], native.TOPIC5, native.GROUP5)
        return stored, first, maxes, committed

    stored, first, maxes, committed = run(native.Native(work=tmp_path, impl=impl, consume=True), work)
    assert stored == CONNECTIONS + CALLS
    assert (first["messages"], first["errors"]) == (stored, 0), first.get("first_error")
    # one request and one latency sample per receive + ack round, of up to 32 messages
    assert stored / 32 <= first["requests"] == first["samples"] < stored
    assert first["server_cpu_s"] > 0 and first["gen_cpu_s"] > 0
    assert committed == maxes
    assert sum(maxes) == stored


@pytest.mark.parametrize("impl", ["grpcio", "nghttp2"])
def test_grpcraw_e2e_receives_every_stamped_message_and_acks_it(tmp_path: Path, impl: str) -> None:
    """The e2e phase (paced stamped sends, long-polling receivers acking without waiting) from raw
    frames: every sent message is received (each with a latency sample) and acked."""
    need_generator()
    topic, group = native.TOPIC5E, native.GROUP5E

    async def work(b: native.Served) -> tuple[dict[str, Any], int, list[Any], list[Any]]:
        conn = b.conns[0]
        warm = await ghz.wait_stored(conn, topic, CONNECTIONS)  # the warm-up messages, received too
        frames = native.write_grpc_frames(tmp_path / "e2e.json", topic, group, 1024, stamp=True, poll=5)
        r = generate(b, "e2e", "-rate", "500", "-seconds", "1", "-size", "1024", "-conns", "4",
                     "-receivers", "4", frames=frames)  # fmt: skip
        return r, warm, *await progress(conn, topic, group)

    r, warm, maxes, committed = run(native.Native(work=tmp_path, impl=impl, consume=False), work, (topic,))
    assert r["errors"] == 0, r.get("first_error")
    assert (
        400 <= r["sent"] == r["messages"] == r["requests"] == r["samples"]
    )  # every send answered and received
    assert 0 < r["p50_ms"] <= r["p99_ms"] <= r["max_ms"] and 0 < r["send_p50_ms"] <= r["send_p99_ms"]
    assert sum(maxes) == warm + r["sent"]
    assert committed == maxes  # the warm-up messages and every stamped one acked
    assert 1 <= r["cancelled"] <= 4  # the receivers' parked long polls, cancelled at the end
