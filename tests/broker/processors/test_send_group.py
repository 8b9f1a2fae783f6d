"""The coalescing lane of SEND_MESSAGE_V2 (`broker/processors/send_group.py`) pinned against the
per-message path, its reference: two real brokers (temporary stores, the same fixed clock, the
same store host, the same queue generator seed), one with the lane and one without, are fed the
same reads, each several requests on one connection: single sends on the common path mixed with
ones the lane leaves to the handler (a delay level, a timer property, a prepared transaction, a
retry topic, a queue id out of range, a record over maxMessageSize, an unknown topic, a one-way
send, a SEND_MESSAGE (10), properties with non-ASCII text). The answer frames must be the same
bytes in the same order, and so must the commit log's segments (small: the groups roll over
several, split where a record does not fit) and every consume queue file; and the stats (put
counts and sizes, the per-topic items, the traffic and its size histogram) must end the same.
"""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import Sequence
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rocketlite.broker.processors.send_group import SendGroupLane
from rocketlite.protocol.codes import PullSysFlag, RequestCode, SerializeType
from rocketlite.protocol.formats import speedups
from rocketlite.protocol.formats.batch import BatchEntry, encode_batch
from rocketlite.protocol.message import MessageSysFlag, properties_to_string
from rocketlite.protocol.wire.command import make_request
from rocketlite.protocol.wire.frame import encode_command
from rocketlite.protocol.wire.headers import PullMessageRequestHeader, SendMessageRequestHeader
from rocketlite.protocol.wire.speedups import REFERENCE as WIRE_REFERENCE
from rocketlite.remoting.connection import Connection, RequestObserver
from tests.support.lanes import reads_of, serve_lane, side_by_side

pytestmark = pytest.mark.skipif(speedups.encode_group is None, reason="the lane runs only compiled")

TOPICS = ("GroupT", "GroupT", "GroupT", "OtherT", "MultiT", "%RETRY%g", "Fresh-T")
PROPS: Sequence[dict[str, str]] = (
    {},
    {"TAGS": "a"},
    {"TAGS": "b", "KEYS": "k1 k2"},
    {"WAIT": "false", "TAGS": "x"},
    {"TAGS": "日本", "note": "é"},
    {"DELAY": "2"},
    {"TIMER_DELAY_SEC": "3"},
    {"__SHARDINGKEY": "s"},
)


@st.composite
def request_frames(draw: st.DrawFn, opaque: int) -> bytes:
    topic = draw(st.sampled_from(TOPICS))
    props = dict(draw(st.sampled_from(PROPS)))
    props["UNIQ_KEY"] = f"U{opaque:08d}"
    kind = draw(st.sampled_from(["common"] * 8 + ["prepared", "oneway", "v1", "bad_queue"]))
    header = SendMessageRequestHeader(
        producer_group="pg", topic=topic, default_topic="TBW102", default_topic_queue_nums=4,
        queue_id=9 if kind == "bad_queue" else draw(st.integers(-1, 3)),
        sys_flag=int(MessageSysFlag.TRANSACTION_PREPARED_TYPE) if kind == "prepared" else 0,
        born_timestamp=1_700_000_000_000 + opaque, flag=draw(st.integers(0, 5)),
        properties=properties_to_string(props), reconsume_times=draw(st.sampled_from([None, 0, 2])),
    )  # fmt: skip
    body = draw(st.binary(min_size=0, max_size=40)) * draw(st.sampled_from([1, 1, 1, 30, 80]))
    code = RequestCode.SEND_MESSAGE if kind == "v1" else RequestCode.SEND_MESSAGE_V2
    ext = header.to_ext() if kind == "v1" else header.to_ext_v2()
    serialize = draw(st.sampled_from([SerializeType.JSON, SerializeType.ROCKETMQ]))
    return encode_command(
        make_request(code, ext, body, opaque, oneway=kind == "oneway", serialize_type=serialize)
    )


@st.composite
def reads(draw: st.DrawFn) -> list[bytes]:
    return reads_of(draw, request_frames, 6, 12)


async def serve(
    root: Path, data: list[bytes], lane: bool | str, observed: list[int] | None = None
) -> tuple[bytes, dict[str, bytes], dict[str, bytes], int, object]:
    """Feed `data` (one read each) to a fresh broker; (answers, commit log, consume queues, lane
    count (`lane="raw"`: of those served from the bytes), stats)."""
    observer: RequestObserver | None = None
    if observed is not None:  # RocketMQ 5's rpc latency: each request is timed on its own
        observer = lambda code, answer, ms, held, result: observed.append(code)  # noqa: E731
    return await serve_lane(root, data, lane, int(RequestCode.SEND_MESSAGE_V2), 16 * 1024, 2400, observer)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(reads())
def test_the_lane_stores_and_answers_what_the_per_message_path_does(data: list[bytes]) -> None:
    fast, slow = side_by_side(serve, data)
    assert slow[3] == 0
    assert fast[0] == slow[0]  # the answer frames, byte for byte, in order
    assert fast[1] == slow[1]  # the commit log's segments
    assert fast[2] == slow[2]  # every consume queue file
    assert fast[4] == slow[4]  # the stats


def test_a_run_of_common_sends_is_taken_by_the_lane_and_rolls_segments() -> None:
    """The differential test above cannot fail by the lane never running: here a read of 40
    common sends of 1 KiB goes through it (as one group split at each segment roll)."""
    with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
        fast = asyncio.run(serve(Path(a), common_sends(40), lane=True))
        slow = asyncio.run(serve(Path(b), common_sends(40), lane=False))
    assert fast[3] == 39
    with tempfile.TemporaryDirectory() as c:  # all of them from the bytes: no command made
        assert asyncio.run(serve(Path(c), common_sends(40), lane="raw"))[3] == 39
    assert len(fast[1]) >= 3  # 39 KiB over 16 KiB segments
    assert fast[:3] == slow[:3]
    assert fast[4] == slow[4]


def common_sends(n: int) -> list[bytes]:
    frames = send_frames(n)
    return [frames[0], b"".join(frames[1:])]  # the topic is created (and found legal) by the handler first


def send_frames(n: int) -> list[bytes]:
    """`n` single sends on the common path (1 KiB each, to GroupT), one frame each."""
    frames = []
    for i in range(n):
        header = SendMessageRequestHeader(
            producer_group="pg", topic="GroupT", default_topic="TBW102", default_topic_queue_nums=4,
            queue_id=i % 4, sys_flag=0, born_timestamp=1_700_000_000_000, flag=0,
            properties=properties_to_string({"UNIQ_KEY": f"R{i}"}),
        )  # fmt: skip
        request = make_request(RequestCode.SEND_MESSAGE_V2, header.to_ext_v2(), b"x" * 1024, i + 1)
        frames.append(encode_command(request))
    return frames


def test_a_table_with_an_observer_times_every_send_on_its_own() -> None:
    """With a request observer (metrics served) each send is timed by the handler: no lane."""
    observed: list[int] = []
    with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
        timed = asyncio.run(serve(Path(a), common_sends(10), lane=True, observed=observed))
        plain = asyncio.run(serve(Path(b), common_sends(10), lane=False))
    assert timed[3] == 0 and observed == [int(RequestCode.SEND_MESSAGE_V2)] * 10
    assert timed[:3] == plain[:3]


def test_frames_of_other_codes_never_reach_the_send_lanes_reader(monkeypatch: pytest.MonkeyPatch) -> None:
    """`chain_raw` is the one place that picks a raw lane by code: the send lane's `raw` (its
    checks and its reader) is offered only frames that are SEND_MESSAGE_V2. Reads that start with
    or hold a batch (320), a SEND_MESSAGE (10) or a pull, in both serializations, go to the
    broker's table as clients send them; the real lane records the code of each frame it is
    offered (decoded apart) and serves it. Every answer and stored byte matches the broker
    without lanes. (Offered a batch, the lane had refused it after ~5 us of checks and a header
    parse: the 128 B batch dip in docs/benchmarks.md.)"""
    offered: list[int] = []
    real_raw = SendGroupLane.raw

    def recording(self: SendGroupLane, conn: Connection, src: bytes, pos: int) -> int:
        (first, *_), _ = WIRE_REFERENCE.decode_frames(src[pos:], 1 << 24)
        offered.append(first.code)
        return real_raw(self, conn, src, pos)

    monkeypatch.setattr(SendGroupLane, "raw", recording)
    first, *single = send_frames(9)
    entries = [BatchEntry(0, f"b{i}".encode(), f"UNIQ_KEY\x01B{i}") for i in range(3)]
    batch_header = SendMessageRequestHeader(
        producer_group="pg", topic="GroupT", default_topic="TBW102", default_topic_queue_nums=4,
        queue_id=1, sys_flag=0, born_timestamp=1, flag=0, properties="", batch=True,
    )  # fmt: skip
    pull_header = PullMessageRequestHeader(
        consumer_group="cg", topic="MultiT", queue_id=0, queue_offset=0, max_msg_nums=4,
        sys_flag=int(PullSysFlag.SUBSCRIPTION), commit_offset=0, suspend_timeout_millis=0,
        subscription="*", sub_version=1,
    )  # fmt: skip
    others = []
    for n, serialize in enumerate((SerializeType.JSON, SerializeType.ROCKETMQ)):
        batch = make_request(
            RequestCode.SEND_BATCH_MESSAGE, batch_header.to_ext_v2(), encode_batch(entries), 100 + n,
            serialize_type=serialize,
        )  # fmt: skip
        v1 = make_request(
            RequestCode.SEND_MESSAGE, batch_header.to_ext(), b"v1", 110 + n, serialize_type=serialize
        )
        pull = make_request(
            RequestCode.PULL_MESSAGE, pull_header.to_ext(), b"", 120 + n, serialize_type=serialize
        )
        others += [encode_command(batch), encode_command(v1), encode_command(pull)]
    data = [
        first,  # the topic created and found legal by the handler
        others[0] + single[0] + others[4],  # a batch first (the batch lane's): then single[0] offered
        single[1] + single[2] + others[3] + single[3] + others[1],  # offered at single[1] and single[3]
        others[2] + single[4] + others[5] + single[5],  # a pull (of an empty queue: its lane leaves it) first
        b"".join(single[6:]) + others[0],
    ]
    with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
        fast = asyncio.run(serve(Path(a), data, "raw"))
        slow = asyncio.run(serve(Path(b), data, False))
    # offered at the first frame of reads 1, 3 and 5, and after the batch lane took a batch (reads 2, 3)
    assert offered == [int(RequestCode.SEND_MESSAGE_V2)] * 5
    assert fast[3] == 6  # the singles served from the bytes (was 4 before the batch lane)
    assert fast[:3] == slow[:3]
    assert fast[4] == slow[4]
