"""The batch lane of SEND_BATCH_MESSAGE (`broker/processors/send_batch_lane.py`) pinned against
the per-request path, its reference: two real brokers (temporary stores, the same fixed clock, the
same store host, the same queue generator seed), one with the lane and one without, are fed the
same reads, each several requests on one connection: batches on the common path mixed with ones
the lane leaves to the handler (an entry with a delay level, an empty body, a torn body, a batch
over maxMessageSize, a retry topic, an unknown topic, a queue id out of range or drawn (-1), a
one-way batch, a prepared transaction's flag) and single sends between them. The answer frames
must be the same bytes in the same order, and so must the commit log's segments (small: a read's
batches roll over several) and every consume queue file; and the stats must end the same.
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rocketlite.protocol.codes import RequestCode, SerializeType
from rocketlite.protocol.formats import speedups
from rocketlite.protocol.formats.batch import BatchEntry, encode_batch
from rocketlite.protocol.message import MessageSysFlag, properties_to_string
from rocketlite.protocol.wire.command import make_request
from rocketlite.protocol.wire.frame import encode_command
from rocketlite.protocol.wire.headers import SendMessageRequestHeader
from tests.support.lanes import reads_of, serve_lane, side_by_side

pytestmark = pytest.mark.skipif(speedups.encode_group is None, reason="the lane runs only compiled")

TOPICS = ("BatchT", "BatchT", "BatchT", "OtherT", "MultiT", "%RETRY%g", "Fresh-T")
ENTRY_PROPS = ("", "TAGS\x01a", "TAGS\x01b\x02KEYS\x01k1 k2", "WAIT\x01false", "TAGS\x01日本", "DELAY\x012")


@st.composite
def request_frames(draw: st.DrawFn, opaque: int) -> bytes:
    topic = draw(st.sampled_from(TOPICS))
    kind = draw(
        st.sampled_from(["common"] * 8 + ["prepared", "oneway", "single", "bad_queue", "empty", "torn"])
    )
    n = 0 if kind == "empty" else draw(st.integers(1, 6))
    entries = []
    for k in range(n):
        props = draw(st.sampled_from(ENTRY_PROPS[:-1] * 6 + ENTRY_PROPS[-1:]))
        props = (
            f"{props}\x02UNIQ_KEY\x01U{opaque:06d}{k:02d}" if props else f"UNIQ_KEY\x01U{opaque:06d}{k:02d}"
        )
        body = draw(st.binary(min_size=0, max_size=40)) * draw(st.sampled_from([1, 1, 1, 30, 80]))
        entries.append(BatchEntry(draw(st.integers(0, 3)), body, props))
    body = encode_batch(entries)
    if kind == "torn":
        body = body[:-1] if body else b"\x00\x00"
    header = SendMessageRequestHeader(
        producer_group="pg", topic=topic, default_topic="TBW102", default_topic_queue_nums=4,
        queue_id=9 if kind == "bad_queue" else draw(st.integers(-1, 3)),
        sys_flag=int(MessageSysFlag.TRANSACTION_PREPARED_TYPE) if kind == "prepared" else 0,
        born_timestamp=1_700_000_000_000 + opaque, flag=0,
        properties=properties_to_string(draw(st.sampled_from([{}, {"WAIT": "true"}, {"TAGS": "h"}]))),
        reconsume_times=draw(st.sampled_from([None, 0, 2])), batch=kind != "single",
    )  # fmt: skip
    code = RequestCode.SEND_MESSAGE_V2 if kind == "single" else RequestCode.SEND_BATCH_MESSAGE
    if kind == "single":
        body = b"one"
    serialize = draw(st.sampled_from([SerializeType.JSON, SerializeType.ROCKETMQ]))
    return encode_command(
        make_request(
            code, header.to_ext_v2(), body, opaque, oneway=kind == "oneway", serialize_type=serialize
        )
    )


@st.composite
def reads(draw: st.DrawFn) -> list[bytes]:
    return reads_of(draw, request_frames, 5, 8)


async def serve(
    root: Path, data: list[bytes], lane: bool | str
) -> tuple[bytes, dict[str, bytes], dict[str, bytes], int, object]:
    """Feed `data` (one read each) to a fresh broker; (answers, commit log, consume queues, how
    many the batch lane took (`lane="raw"`: of those, how many from the read's bytes), stats)."""
    return await serve_lane(root, data, lane, int(RequestCode.SEND_BATCH_MESSAGE), 32 * 1024, 6000)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(reads())
def test_the_batch_lane_stores_and_answers_what_the_per_request_path_does(data: list[bytes]) -> None:
    with_lane, reference = side_by_side(serve, data)
    assert reference[3] == 0  # the reference run took nothing through the lane
    # the answer frames byte for byte and in order, the commit log's segments, every consume
    # queue file, the stats
    assert with_lane[:3] + with_lane[4:] == reference[:3] + reference[4:]


def common_batches(n: int, per: int = 4) -> list[bytes]:
    frames = []
    for i in range(n):
        header = SendMessageRequestHeader(
            producer_group="pg", topic="BatchT", default_topic="TBW102", default_topic_queue_nums=4,
            queue_id=i % 4, sys_flag=0, born_timestamp=1_700_000_000_000, flag=0, properties="", batch=True,
        )  # fmt: skip
        entries = [BatchEntry(0, b"x" * 1024, f"UNIQ_KEY\x01R{i}-{k}") for k in range(per)]
        request = make_request(
            RequestCode.SEND_BATCH_MESSAGE, header.to_ext_v2(), encode_batch(entries), i + 1
        )
        frames.append(encode_command(request))
    return [frames[0], b"".join(frames[1:])]  # the topic is created (and found legal) by the handler first


def test_a_read_of_common_batches_is_one_append_across_segment_rolls() -> None:
    """The differential test above cannot fail by the lane never running: here a read of 19
    batches of 4 KiB goes through it, in one append split at each segment roll."""
    with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
        fast = asyncio.run(serve(Path(a), common_batches(20), lane=True))
        slow = asyncio.run(serve(Path(b), common_batches(20), lane=False))
    assert fast[3] == 19
    with tempfile.TemporaryDirectory() as c:  # all of them from the bytes: no command made
        assert asyncio.run(serve(Path(c), common_batches(20), lane="raw"))[3] == 19
    assert len(fast[1]) >= 3  # 80 KiB over 32 KiB segments
    assert fast[:3] == slow[:3]
    assert fast[4] == slow[4]
