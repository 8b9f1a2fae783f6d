"""SendMessage's group lane on the h2 door (`broker/grpc/send_lane.py`, `remoting/h2/group.py`)
pinned against the per-message path, its reference. What a real grpc.aio client writes for a mix of
SendMessage calls (several in flight, so several end in one read) is captured once; the same reads
are then fed, read for read, to two real brokers (temporary stores, the same fixed clock, store
host and queue generator seed) through a `GrpcConnection` on a stub transport: one with the lane,
one with `Method.group` taken away. The calls mix common sends with ones the lane leaves to the
handler (FIFO, DELAY and TRANSACTION types, user properties, bad CRC32, MD5 and SHA1 digests
(right ones, and none, are the lane's), no message id, a
resource namespace, two messages in one call, a topic not yet found legal, a TIMER_ tag, a topic
that does not exist and cannot be created). The answer bytes (HTTP/2 frames, in order), the commit
log's segments (small: groups split where a segment rolls) and every consume queue file must be
the same, and so must the put stats. Most of the lane's calls are taken by its compiled loop
(`speedups.send_run`; `test_send_run.py` pins it against the lane's per-call Python step).
`ok_answer` is pinned in `tests/protocol/test_send_fields.py`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import random
import tempfile
import time
import zlib
from pathlib import Path
from typing import Any

import pytest
from bench.grpc5_h2_path import StubTransport, capture
from bench.grpc5_probe import SERVICE

from rocketlite.broker.config import BrokerConfig, GrpcServerImpl
from rocketlite.broker.controller import BrokerController
from rocketlite.broker.grpc import h2door
from rocketlite.broker.grpc.send_lane import SendMessageLane
from rocketlite.clock import ManualClock
from rocketlite.protocol.bodies.route import TopicConfig
from rocketlite.protocol.formats import speedups
from rocketlite.protocol.message import HostAddress
from rocketlite.protocol.proto.v2 import definition_pb2 as pb
from rocketlite.protocol.proto.v2 import service_pb2 as spb
from rocketlite.store.config import StoreConfig
from tests.support.ports import free_port

pytestmark = pytest.mark.skipif(
    speedups.encode_group is None or h2door.unavailable_reason() is not None,
    reason="the lane runs only compiled, on the nghttp2 door",
)

TOPICS = ("LaneT", "LaneT", "LaneT", "MultiT", "Fresh5")
TAGS = (None, "a", "TagB", "日本", "TIMER_x")
KINDS = ["common"] * 10 + ["no_digest"] * 4 + [
    "fifo", "delay", "transaction", "user_props", "bad_digest", "no_id", "namespace", "two", "denied",
    "crc_decimal", "md5", "sha1", "bad_md5", "bad_sha1",
]  # fmt: skip


def digest(body: bytes, kind: str) -> pb.Digest | None:
    """None (what the official clients send), or a CRC32, MD5 or SHA1 digest, right or wrong."""
    crc = zlib.crc32(body)
    if kind == "no_digest":
        return None
    if kind in ("md5", "sha1", "bad_md5", "bad_sha1"):
        name = kind.removeprefix("bad_")
        text = hashlib.new(name, body + (b"x" if kind.startswith("bad_") else b"")).hexdigest().upper()
        return pb.Digest(type=pb.DigestType.MD5 if name == "md5" else pb.DigestType.SHA1, checksum=text)
    checksum = {"bad_digest": "0", "crc_decimal": str(crc)}.get(kind, f"{crc:08x}")
    return pb.Digest(type=pb.DigestType.CRC32, checksum=checksum)


def message(rng: random.Random, i: int, kind: str) -> pb.Message:
    body = bytes([i % 251]) * rng.choice([1, 100, 1024, 3000])
    system = pb.SystemProperties(
        message_id="" if kind == "no_id" else f"01{i:032X}",
        message_type=pb.MessageType.NORMAL,
        body_digest=digest(body, kind),
        queue_id=rng.choice([0, 0, 1, 3]),  # (Java and Node set the queue they address)
    )
    system.born_timestamp.FromMilliseconds(1_700_000_000_000 + i)
    tag = rng.choice(TAGS)
    if tag is not None:
        system.tag = tag
    if rng.random() < 0.3:
        system.keys.extend(["k1", f"k{i}"])
    if kind == "fifo":
        system.message_type = pb.MessageType.FIFO
        system.message_group = f"g{i % 3}"
    elif kind == "delay":
        system.message_type = pb.MessageType.DELAY
        system.delivery_timestamp.FromMilliseconds(int(time.time() * 1000) + 3_600_000)
    elif kind == "transaction":
        system.message_type = pb.MessageType.TRANSACTION
    topic = pb.Resource(name="%SYS%no" if kind == "denied" else rng.choice(TOPICS))
    if kind == "namespace":
        topic.resource_namespace = "ns1"
    out = pb.Message(topic=topic, body=body, system_properties=system)
    if kind == "user_props":
        out.user_properties["color"] = "red"
    return out


def requests(count: int, seed: int) -> list[tuple[str, bytes]]:
    rng = random.Random(seed)
    out = []
    for i in range(count):
        kind = rng.choice(KINDS)
        messages = [message(rng, i, kind)]
        if kind == "two":
            messages.append(message(rng, i + 100_000, "common"))
        out.append(("SendMessage", spb.SendMessageRequest(messages=messages).SerializeToString()))
    return out


async def client_reads(calls: list[tuple[str, bytes]]) -> list[bytes]:
    """The reads a server sees from a grpc.aio client making `calls`, 16 in flight (answered by a
    stub method: only the client's bytes matter)."""
    from rocketlite.remoting.h2.server import Method  # noqa: PLC0415

    async def ok(request: Any, context: Any) -> Any:
        return spb.SendMessageResponse()

    path = f"{SERVICE}SendMessage".encode()
    methods = {path: Method("unary", spb.SendMessageRequest.FromString, h2door.serialize, ok)}
    return await capture(methods, calls, 16)  # with bench/grpc5_probe.py's client metadata


def put_stats(stats: Any) -> Any:
    """What the sends added to the broker's stats: totals, per-topic items, traffic histograms."""
    traffic = {key: (t.messages, t.size, list(t.buckets), t.size_sum) for key, t in stats.traffic_in.items()}
    slots = {
        topic: [(item.value, item.times) for item in slot[:3]] for topic, slot in stats._put_slots.items()
    }
    return stats.put_nums, stats.put_size, traffic, slots


def files_under(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


async def serve(
    root: Path, reads: list[bytes], lane: bool
) -> tuple[bytes, dict[str, bytes], dict[str, bytes], int, int, Any, int]:
    """Feed `reads` to a fresh broker's h2 methods; (answers, commit log, consume queues, lane count,
    calls opened the ordinary way: with a `_Call` and `CallContext` of their own, the put stats,
    the lane's calls its compiled loop took)."""
    from rocketlite.remoting.h2.server import GrpcConnection  # noqa: PLC0415

    opened = 0

    class Counting(GrpcConnection):
        def open_call(self, stream_id: int, headers: list[tuple[bytes, bytes]]) -> Any:
            nonlocal opened
            opened += 1
            return super().open_call(stream_id, headers)

    store_cfg = StoreConfig(
        store_path_root_dir=root, maped_file_size_commit_log=32 * 1024,
        maped_file_size_consume_queue=20 * 64, max_message_size=8192,
    )  # fmt: skip
    broker = BrokerConfig(
        listen_port=0, listen_host="127.0.0.1", grpc_server_port=free_port(), auto_create_topic_enable=True,
        grpc_server_impl=GrpcServerImpl.NGHTTP2,
    )  # fmt: skip
    controller = BrokerController(broker, store_cfg, clock=ManualClock())
    await controller.start()
    try:
        parts = controller.parts
        assert parts is not None and parts.grpc is not None and parts.grpc.h2 is not None
        parts.send.store_host = HostAddress.parse("192.168.0.9:10911")
        parts.send.rng = random.Random(7)
        controller.topics.update(TopicConfig("LaneT", 4, 4))
        controller.topics.update(TopicConfig("MultiT", 4, 4, topic_filter_type="MULTI_TAG"))
        lane_obj = parts.grpc.send_lane
        assert isinstance(lane_obj, SendMessageLane)
        methods = parts.grpc.h2.methods
        if not lane:
            methods = {path: dataclasses.replace(m, group=None) for path, m in methods.items()}
        conn = Counting(methods, 4 << 20)
        transport = StubTransport()
        conn.connection_made(transport)
        for data in reads:
            conn.data_received(data)
            await asyncio.sleep(0)  # the answers' flush, as the loop runs it between reads
        for _ in range(3):
            await asyncio.sleep(0)
        assert await asyncio.to_thread(controller.store.wait_dispatched, 10.0)
        return (
            b"".join(transport.out),
            files_under(root / "commitlog"),
            files_under(root / "consumequeue"),
            lane_obj.taken,
            opened,
            put_stats(parts.send.stats),
            lane_obj.compiled,
        )
    finally:
        await controller.close()


@pytest.mark.parametrize("seed", [1, 2])
def test_the_lane_stores_and_answers_what_the_per_message_path_does(seed: int) -> None:
    reads = asyncio.run(client_reads(requests(160, seed)))
    assert len(reads) < 80  # several calls end in one read: the lane has runs to take
    with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
        fast = asyncio.run(serve(Path(a), reads, lane=True))
        slow = asyncio.run(serve(Path(b), reads, lane=False))
    assert slow[3] == 0
    assert fast[3] > 40  # most common sends went through the lane
    assert fast[6] > 30  # most by its compiled loop
    assert slow[4] == 160  # every call its own `_Call` and context
    assert fast[4] < 160 - 40  # the lane's were GROUPED by the session: none of their own
    assert len(fast[1]) >= 3  # the commit log rolled over segments
    assert fast[0] == slow[0]  # the answers, HTTP/2 frames byte for byte, in order
    assert fast[1] == slow[1]  # the commit log's segments
    assert fast[2] == slow[2]  # every consume queue file
    assert fast[5] == slow[5] and fast[5][0] > 40  # the put stats
