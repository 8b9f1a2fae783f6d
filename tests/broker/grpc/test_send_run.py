"""The compiled loop of SendMessage's group lane (`speedups.send_run`, `_native/_send_run.pxi`)
pinned against its reference, the lane's per-call Python step (`Run.take`), with hypothesis:
for a run of calls (mostly the lane's shape, with the values that take a call off the compiled
path: property separators, "TIMER_", "__S", non-ASCII text, empty tags and keys, born times at
Java's limits, parsed requests, unknown topics; and every digest type, none to SHA1, right and
wrong, in the spellings `send.digest_problem` takes and others), `Run.gather` with the
compiled loop must give the same `encode_group` entries, record sizes, consume-queue keys,
message ids and stats kinds as with the reference loop (which leaves every call to `Run.take`),
drawing the same queues from generators of the same seed. The records and answers of real runs
are pinned by `test_send_lane.py`.
"""

from __future__ import annotations

import asyncio
import hashlib
import random
import tempfile
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from bench.grpc5_h2_path import StubTransport
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rocketlite.broker.config import BrokerConfig, GrpcServerImpl
from rocketlite.broker.controller import BrokerController
from rocketlite.broker.grpc import h2door
from rocketlite.broker.grpc.send_lane import Run, SendMessageLane
from rocketlite.clock import ManualClock
from rocketlite.protocol.bodies.route import TopicConfig
from rocketlite.protocol.proto import send_fields, speedups
from rocketlite.protocol.proto.v2 import definition_pb2 as pb
from rocketlite.protocol.proto.v2 import service_pb2 as spb
from rocketlite.store.config import StoreConfig
from tests.support.ports import free_port

pytestmark = pytest.mark.skipif(
    speedups.send_run is send_fields.send_run or h2door.unavailable_reason() is not None,
    reason="the compiled loop runs only compiled, on the nghttp2 door",
)

TOPICS = ["LaneT", "LaneT", "MultiT", "OneQ", "NoSuchT", "%RETRY%g1"]
ODD = ["\x01", "\x02", "\x00", "TIMER_", "__S", "日本", "a b", ""]
TEXT = st.sampled_from(["a", "TagB", "k1", "x" * 40]) | st.sampled_from(ODD) | st.text(max_size=12)
HEADERS = [(b"x-mq-client-id", b"c1"), (b"x-mq-language", b"PYTHON")]


@pytest.fixture(scope="module")
def lane() -> Iterator[tuple[SendMessageLane, Any]]:
    """A started broker's lane, and a connection of its h2 door (no socket: a stub transport)."""
    from rocketlite.remoting.h2.server import GrpcConnection  # noqa: PLC0415

    loop = asyncio.new_event_loop()
    with tempfile.TemporaryDirectory() as root:
        store = StoreConfig(store_path_root_dir=Path(root), max_message_size=4096)
        broker = BrokerConfig(
            listen_port=0, listen_host="127.0.0.1", grpc_server_port=free_port(),
            grpc_server_impl=GrpcServerImpl.NGHTTP2, auto_create_topic_enable=False,
        )  # fmt: skip
        controller = BrokerController(broker, store, clock=ManualClock())
        loop.run_until_complete(controller.start())
        try:
            parts = controller.parts
            assert parts is not None and parts.grpc is not None and parts.grpc.h2 is not None
            controller.topics.update(TopicConfig("LaneT", 4, 4))
            controller.topics.update(TopicConfig("MultiT", 8, 8, topic_filter_type="MULTI_TAG"))
            controller.topics.update(TopicConfig("OneQ", 1, 1))
            for topic in ("LaneT", "MultiT", "OneQ", "NoSuchT"):
                parts.send._check_topic_name(topic)
            found = parts.grpc.send_lane
            assert isinstance(found, SendMessageLane)

            methods = parts.grpc.h2.methods

            async def connect() -> GrpcConnection:
                conn = GrpcConnection(methods, 4 << 20)
                conn.connection_made(StubTransport())
                return conn

            yield found, loop.run_until_complete(connect())
        finally:
            loop.run_until_complete(controller.close())
            loop.close()


def spellings(body: bytes, kind: str) -> st.SearchStrategy[str]:
    """A digest's checksum of `kind` for `body`: the spellings `send.digest_problem` takes (each
    case, decimal with leading zeros, unpadded hex) and ones it does not (another body's, cut
    short, padded too far, non-ASCII digits, "²"), or any text."""
    crc = zlib.crc32(body)
    if kind == "CRC32":
        mixed = f"{crc:08X}"[:4] + f"{crc:08x}"[4:]
        right = [f"{crc:08X}", f"{crc:08x}", mixed, str(crc), f"00{crc}", f"{crc:x}"]
        wrong = [str(crc + 1), f"{crc ^ 1:08X}", f"0{crc:08x}", f"{crc:08X}"[:7], "0", "²", "", " 1", "+1"]
        arabic = "".join(chr(0x660 + int(d)) for d in str(crc))  # `int` reads them; `isdigit` too
        wrong += [arabic, "0" * 5000]
    elif kind in ("MD5", "SHA1"):
        h = hashlib.new(kind.lower(), body).hexdigest()
        other = hashlib.new(kind.lower(), body + b"x").hexdigest()
        right = [h.upper(), h, h[:10].upper() + h[10:]]
        wrong = [other.upper(), h[:-1], h + "0", "", f"{crc:08X}", h[:-1] + "\u0130"]
    else:
        right, wrong = ["", f"{crc:08X}", "anything"], []
    return st.sampled_from(right * 2 + wrong) | st.text(max_size=12)


@st.composite
def message(draw: st.DrawFn) -> pb.Message:
    body = draw(st.sampled_from([b"", b"x", b"hello" * 30]) | st.binary(max_size=80))
    system = pb.SystemProperties(
        message_id=draw(st.sampled_from(["01ABCDEF", "01" + "F" * 30]) | TEXT),
        message_type=draw(st.sampled_from([1] * 8 + [2])),  # type: ignore[arg-type]
    )
    kind = draw(st.sampled_from(["none", "CRC32", "CRC32", "CRC32", "MD5", "SHA1", "other"]))
    if kind != "none":
        system.body_digest.type = {"CRC32": 1, "MD5": 2, "SHA1": 3}.get(kind, 0)  # type: ignore[assignment]
        system.body_digest.checksum = draw(spellings(body, kind))
    if draw(st.integers(0, 3)) == 0:
        system.queue_id = draw(st.sampled_from([0, 1, 3, -1, 2**31 - 1]))  # (Java and Node set it)
    if draw(st.booleans()):
        system.tag = draw(TEXT)
    system.keys.extend(draw(st.lists(TEXT, max_size=3)))
    seconds = draw(st.sampled_from([1_700_000_000, 0, -1, 2**63 // 1000, -(2**63) // 1000]) | st.integers())
    system.born_timestamp.seconds = max(-(2**63), min(seconds, 2**63 - 1))
    system.born_timestamp.nanos = draw(st.sampled_from([0, 999_999_999, -1, -1_000_001]))
    topic = draw(st.sampled_from(TOPICS) | TEXT)
    return pb.Message(topic=pb.Resource(name=topic), body=body, system_properties=system)


def gather(found: SendMessageLane, calls: list[tuple[Any, Any]], runner: Any, seed: int) -> Run:
    found.producer.send.rng = random.Random(seed)
    run = Run(found, calls[0][1])
    run.gather(calls, 0, runner)
    return run


def outcome(run: Run) -> tuple[Any, ...]:
    return run.entries, run.sizes, run.keys, run.ids, run.kinds


@settings(max_examples=300, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(message(), st.integers(0, 9)), min_size=1, max_size=10), st.integers(0, 99))
def test_the_compiled_loop_takes_what_the_python_step_takes(
    lane: tuple[SendMessageLane, Any], drawn: list[tuple[pb.Message, int]], seed: int
) -> None:
    from rocketlite.remoting.h2.group import GroupedContext  # noqa: PLC0415

    found, conn = lane
    calls: list[tuple[Any, Any]] = []
    for msg, how in drawn:
        request = spb.SendMessageRequest(messages=[msg])
        # mostly GROUPED (bytes); sometimes parsed, as a call that came the ordinary way
        calls.append((request if how == 0 else request.SerializeToString(), GroupedContext(conn, HEADERS)))
    fast = gather(found, calls, speedups.send_run, seed)
    slow = gather(found, calls, send_fields.send_run, seed)
    assert slow.stepped == len(slow.entries)
    assert outcome(fast) == outcome(slow)


def test_common_sends_are_taken_by_the_compiled_loop(lane: tuple[SendMessageLane, Any]) -> None:
    from rocketlite.remoting.h2.group import GroupedContext  # noqa: PLC0415

    found, conn = lane
    calls: list[tuple[Any, Any]] = []
    for i in range(20):
        body = b"b%d" % i * 50
        system = pb.SystemProperties(message_id=f"01{i:030X}", message_type=pb.MessageType.NORMAL, tag="t")
        system.keys.extend(["k1", f"k{i}"][: i % 3])
        if i % 5:  # (none: what the official clients send)
            kind = ("CRC32", "CRC32", "MD5", "SHA1")[i % 4]
            system.body_digest.type = {"CRC32": 1, "MD5": 2, "SHA1": 3}[kind]  # type: ignore[assignment]
            crc = zlib.crc32(body)
            hexed = f"{crc:08X}" if kind == "CRC32" else hashlib.new(kind.lower(), body).hexdigest().upper()
            system.body_digest.checksum = str(crc) if i % 8 == 1 else hexed  # (decimal, lower case too)
            if i % 3 == 2:
                system.body_digest.checksum = system.body_digest.checksum.lower()
        system.queue_id = i % 4
        system.born_timestamp.seconds = 1_700_000_000 + i
        msg = pb.Message(topic=pb.Resource(name=TOPICS[i % 3]), body=body, system_properties=system)
        request = spb.SendMessageRequest(messages=[msg]).SerializeToString()
        calls.append((request, GroupedContext(conn, HEADERS)))
    fast = gather(found, calls, speedups.send_run, 3)
    slow = gather(found, calls, send_fields.send_run, 3)
    assert len(fast.entries) == 20
    assert fast.stepped == 0  # every digest spelling, and none, taken by the compiled loop
    assert outcome(fast) == outcome(slow)
