"""What the differential tests of the 4.x lanes (`test_send_group.py`, `test_pull_lane.py`) share:
a broker on a fixed clock and store host, reads cut anywhere, one connection fed those reads, and
the two brokers' runs side by side."""

from __future__ import annotations

import asyncio
import random
import tempfile
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from bench.send_path import StubTransport
from hypothesis import strategies as st

from rocketlite.broker.config import BrokerConfig
from rocketlite.broker.controller import BrokerController, BrokerParts
from rocketlite.broker.stats import BrokerStats
from rocketlite.clock import ManualClock
from rocketlite.protocol.bodies.route import TopicConfig
from rocketlite.protocol.message import HostAddress
from rocketlite.remoting.connection import Connection, RequestObserver
from rocketlite.store.config import StoreConfig


@asynccontextmanager
async def fixed_broker(
    store_cfg: StoreConfig, broker: BrokerConfig
) -> AsyncIterator[tuple[BrokerController, BrokerParts]]:
    """A started broker whose records do not depend on the run: a fixed clock, a fixed store host."""
    controller = BrokerController(broker, store_cfg, clock=ManualClock())
    await controller.start()
    try:
        parts = controller.parts
        assert parts is not None
        parts.send.store_host = HostAddress.parse("192.168.0.9:10911")
        yield controller, parts
    finally:
        await controller.close()


@asynccontextmanager
async def send_broker(
    root: Path, commit_log_bytes: int, max_message_size: int
) -> AsyncIterator[tuple[BrokerController, BrokerParts]]:
    """`fixed_broker` as the send lanes' differential tests use it: small segments, topics
    auto-created, a seeded queue generator and a MULTI_TAG topic `MultiT`."""
    store_cfg = StoreConfig(
        store_path_root_dir=root, maped_file_size_commit_log=commit_log_bytes,
        maped_file_size_consume_queue=20 * 64, max_message_size=max_message_size,
    )  # fmt: skip
    broker = BrokerConfig(
        listen_port=0, listen_host="127.0.0.1", grpc_server_port=0, auto_create_topic_enable=True
    )
    async with fixed_broker(store_cfg, broker) as (controller, parts):
        parts.send.rng = random.Random(7)
        controller.topics.update(TopicConfig("MultiT", 4, 4, topic_filter_type="MULTI_TAG"))
        yield controller, parts


async def serve_lane(
    root: Path, data: list[bytes], lane: bool | str, code: int, commit_log_bytes: int, max_message_size: int,
    observer: RequestObserver | None = None,
) -> tuple[bytes, dict[str, bytes], dict[str, bytes], int, object]:  # fmt: skip
    """Feed `data` (one read each) to a fresh `send_broker` with its lanes (`lane` true or
    "raw") or none; (answers, commit log, consume queues, how many the group lane of `code` took
    (`lane="raw"`: of those, how many from the read's bytes), stats)."""
    async with send_broker(root, commit_log_bytes, max_message_size) as (controller, parts):
        lanes = controller.table.groups
        lane_obj: Any = lanes.get(code)
        assert lane_obj is not None
        if not lane:
            lanes.clear()
            controller.table.raw = None
        controller.table.observer = observer
        return (
            await feed(controller, data),
            files_under(root / "commitlog"),
            files_under(root / "consumequeue"),
            lane_obj.raw_taken if lane == "raw" else lane_obj.taken,
            stats_of(parts.send.stats),
        )


def stats_of(stats: BrokerStats) -> object:
    """What the sends added to: the broker's totals, each topic's put items, the traffic."""
    items = stats.items
    return (
        stats.put_nums,
        stats.put_size,
        {name: {k: (i.value, i.times) for k, i in found.items.items()} for name, found in items.sets.items()},
        {k: (t.messages, t.size, list(t.buckets), t.size_sum) for k, t in stats.traffic_in.items()},
    )


def files_under(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def reads_of(
    draw: st.DrawFn, frame: Callable[[int], st.SearchStrategy[bytes]], most_reads: int, most_frames: int
) -> list[bytes]:
    """Up to `most_reads` reads of up to `most_frames` frames each (`frame(opaque)`, the opaques
    counting from 1), then `cut_anywhere`."""
    out, opaque = [], 1
    for _ in range(draw(st.integers(1, most_reads))):
        frames = []
        for _ in range(draw(st.integers(1, most_frames))):
            frames.append(draw(frame(opaque)))
            opaque += 1
        out.append(b"".join(frames))
    return cut_anywhere(draw, out)


def cut_anywhere(draw: st.DrawFn, reads: list[bytes]) -> list[bytes]:
    """`reads` as they are, or (drawn) the same bytes cut anywhere: frames split across reads."""
    if not draw(st.booleans()):
        return reads
    stream = b"".join(reads)
    cuts = sorted(draw(st.lists(st.integers(1, len(stream) - 1), max_size=6, unique=True)))
    return [stream[a:b] for a, b in zip([0, *cuts], [*cuts, len(stream)], strict=True)]


async def feed(controller: BrokerController, data: list[bytes]) -> bytes:
    """Feed `data` (one read each) to one new connection of `controller`'s table; its answers,
    once the dispatch has caught up with what the reads stored."""
    conn = Connection(controller.table)
    transport = StubTransport(keep=True)  # the in-process bench's: peer 127.0.0.1:50000
    conn.connection_made(transport)  # type: ignore[arg-type]
    for chunk in data:
        conn.data_received(chunk)
    await asyncio.sleep(0)
    assert await asyncio.to_thread(controller.store.wait_dispatched, 10.0)
    return b"".join(transport.kept or [])


Serve = Callable[[Path, list[bytes], bool], Coroutine[Any, Any, tuple[Any, ...]]]


def side_by_side(serve: Serve, data: list[bytes]) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
    """`serve` on a fresh store each with the lane and without: (with, without)."""
    with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
        return asyncio.run(serve(Path(a), data, True)), asyncio.run(serve(Path(b), data, False))
