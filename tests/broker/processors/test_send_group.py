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

from rocketlite.broker.processors.send_group import other_request_first
from rocketlite.protocol.codes import RequestCode, SerializeType
from rocketlite.protocol.formats import speedups
from rocketlite.protocol.message import MessageSysFlag, properties_to_string
from rocketlite.protocol.wire.command import make_request
from rocketlite.protocol.wire.frame import encode_command
from rocketlite.protocol.wire.headers import SendMessageRequestHeader
from rocketlite.remoting.connection import RequestObserver
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
    frames = []
    for i in range(n):
        header = SendMessageRequestHeader(
            producer_group="pg", topic="GroupT", default_topic="TBW102", default_topic_queue_nums=4,
            queue_id=i % 4, sys_flag=0, born_timestamp=1_700_000_000_000, flag=0,
            properties=properties_to_string({"UNIQ_KEY": f"R{i}"}),
        )  # fmt: skip
        request = make_request(RequestCode.SEND_MESSAGE_V2, header.to_ext_v2(), b"x" * 1024, i + 1)
        frames.append(encode_command(request))
    return [frames[0], b"".join(frames[1:])]  # the topic is created (and found legal) by the handler first


def test_a_table_with_an_observer_times_every_send_on_its_own() -> None:
    """With a request observer (metrics served) each send is timed by the handler: no lane."""
    observed: list[int] = []
    with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
        timed = asyncio.run(serve(Path(a), common_sends(10), lane=True, observed=observed))
        plain = asyncio.run(serve(Path(b), common_sends(10), lane=False))
    assert timed[3] == 0 and observed == [int(RequestCode.SEND_MESSAGE_V2)] * 10
    assert timed[:3] == plain[:3]


def test_a_read_that_starts_with_another_request_is_left_to_the_decoder_at_a_glance() -> None:
    """`other_request_first` spares a connection of batches or pulls the lane's checks and its
    header parse on every read: True only for a frame that plainly is not a SEND_MESSAGE_V2 (a
    ROCKETMQ header's code, a JSON header that starts with another code, as clients write it);
    a single send in either serialization, a JSON header with `code` elsewhere, or a frame too
    short to tell go on to the lane's reader."""
    header = SendMessageRequestHeader(
        producer_group="pg", topic="GroupT", default_topic="TBW102", default_topic_queue_nums=4,
        queue_id=0, sys_flag=0, born_timestamp=1, flag=0, properties="",
    )  # fmt: skip

    def frame(code: int, serialize: SerializeType) -> bytes:
        ext = header.to_ext_v2() if code == RequestCode.SEND_MESSAGE_V2 else header.to_ext()
        return encode_command(make_request(code, ext, b"body", 7, serialize_type=serialize))

    for serialize in (SerializeType.JSON, SerializeType.ROCKETMQ):
        single = frame(RequestCode.SEND_MESSAGE_V2, serialize)
        assert not other_request_first(single, 0)
        assert not other_request_first(b"tail" + single, 4)
        for other in (RequestCode.SEND_BATCH_MESSAGE, RequestCode.SEND_MESSAGE, RequestCode.PULL_MESSAGE):
            assert other_request_first(frame(other, serialize) + single, 0)
    batch = frame(RequestCode.SEND_BATCH_MESSAGE, SerializeType.JSON)
    assert batch[8:16] == b'{"code":'  # the shape the glance reads
    reordered = batch[:8] + b'{"flag":0,"code":320' + batch[8 + len(b'{"code":320') :]
    assert not other_request_first(reordered, 0)
    assert not other_request_first(batch[:12], 0)
