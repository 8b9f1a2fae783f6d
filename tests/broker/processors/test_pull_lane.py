"""The PULL_MESSAGE lane (`broker/processors/pull_lane.py`) pinned against the per-request path, its
reference: two real brokers (temporary stores, the same fixed clock and store host) hold the same
messages (sent through the handler, tags a, b and none, over four queues) and the same consumer
registration (a heartbeat: group "cg" subscribed to tag a or b); one serves with the lane, one
without. Both are fed the same reads on one connection: pulls on the common path (a registered
subscription, or one carried in the request, by tag or "*", JSON or ROCKETMQ headers, with and
without a piggy-backed commit offset) mixed with every reason to leave one to the handler (an
offset past the end or before the start, an unknown group or topic, a queue id out of range, an
SQL92 expression, a stale subscription version, a one-way pull, a class filter) and with single
sends to another topic, the reads cut anywhere. The answer frames must be the same bytes in the
same order; the stored consumer offsets and the pull stats (found and missed counts, per-group
counts, the per-topic get items, the traffic out, the pull offsets) must end the same.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from bench.send_path import StubTransport
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rocketlite.broker.config import BrokerConfig
from rocketlite.broker.processors.pull_lane import PullLane
from rocketlite.broker.processors.send_group import SendGroupLane
from rocketlite.broker.stats import BrokerStats
from rocketlite.protocol.bodies.route import TopicConfig
from rocketlite.protocol.codes import PullSysFlag, RequestCode, SerializeType
from rocketlite.protocol.message import properties_to_string
from rocketlite.protocol.wire import speedups
from rocketlite.protocol.wire.command import make_request
from rocketlite.protocol.wire.frame import encode_command
from rocketlite.protocol.wire.headers import PullMessageRequestHeader, SendMessageRequestHeader
from rocketlite.remoting.connection import Connection, chain_raw
from rocketlite.store.config import StoreConfig
from tests.support.lanes import cut_anywhere, feed, fixed_broker, side_by_side

pytestmark = pytest.mark.skipif(
    speedups.read_raw_pull is speedups.REFERENCE.read_raw_pull, reason="the lane runs only compiled"
)

TOPIC, OTHER = "PullT", "SendT"
MESSAGES = 40  # 10 a queue


def send_frame(topic: str, i: int, tag: str | None, serialize: SerializeType = SerializeType.JSON) -> bytes:
    props = {"UNIQ_KEY": f"U{i:06d}"} | ({"TAGS": tag} if tag else {})
    header = SendMessageRequestHeader(
        producer_group="pg", topic=topic, default_topic="TBW102", default_topic_queue_nums=4,
        queue_id=i % 4, sys_flag=0, born_timestamp=1_700_000_000_000 + i, flag=0,
        properties=properties_to_string(props),
    )  # fmt: skip
    body = bytes([i % 251]) * (20 + i % 7)
    return encode_command(
        make_request(
            RequestCode.SEND_MESSAGE_V2, header.to_ext_v2(), body, 100_000 + i, serialize_type=serialize
        )
    )


def heartbeat_frame() -> bytes:
    body = json.dumps(
        {"clientID": "c@1", "consumerDataSet": [{
            "groupName": "cg", "consumeType": "CONSUME_PASSIVELY", "messageModel": "CLUSTERING",
            "consumeFromWhere": "CONSUME_FROM_FIRST_OFFSET", "unitMode": False, "subscriptionDataSet": [
                {"topic": TOPIC, "subString": "a || b", "expressionType": "TAG", "classFilterMode": False,
                 "tagsSet": ["a", "b"], "codeSet": [97, 98], "subVersion": 5}]}],
         "producerDataSet": []}
    ).encode()  # fmt: skip
    return encode_command(make_request(RequestCode.HEART_BEAT, {}, body, 99_999))


@st.composite
def pull_frame(draw: st.DrawFn, opaque: int) -> bytes:
    kind = draw(
        st.sampled_from(
            ["registered"] * 4 + ["carried"] * 4
            + ["past", "before", "nogroup", "notopic", "badqueue", "sql", "stale", "oneway", "class"]
        )
    )  # fmt: skip
    sys_flag = 0
    if draw(st.booleans()):
        sys_flag |= int(PullSysFlag.COMMIT_OFFSET)
    expression, version = "a || b", 5
    if kind in ("carried", "sql"):
        sys_flag |= int(PullSysFlag.SUBSCRIPTION)
        expression = "a = 1" if kind == "sql" else draw(st.sampled_from(["*", "a", "b || a", "a || b"]))
    if kind == "class":
        sys_flag |= int(PullSysFlag.CLASS_FILTER)
    if kind == "stale":
        version = 6
    header = PullMessageRequestHeader(
        consumer_group="nog" if kind == "nogroup" else "cg",
        topic="NoSuchT" if kind == "notopic" else TOPIC,
        queue_id=4 if kind == "badqueue" else draw(st.integers(0, 3)),
        queue_offset={"past": draw(st.integers(11, 14)), "before": -3}.get(kind, draw(st.integers(0, 10))),
        max_msg_nums=draw(st.integers(1, 6)), sys_flag=sys_flag, commit_offset=draw(st.integers(0, 9)),
        suspend_timeout_millis=15_000, subscription=expression, sub_version=version,
        expression_type="SQL92" if kind == "sql" else "TAG",
    )  # fmt: skip
    serialize = draw(st.sampled_from([SerializeType.JSON, SerializeType.ROCKETMQ]))
    cmd = make_request(
        RequestCode.PULL_MESSAGE,
        header.to_ext(),
        None,
        opaque,
        oneway=kind == "oneway",
        serialize_type=serialize,
    )
    return encode_command(cmd)


@st.composite
def reads(draw: st.DrawFn) -> list[bytes]:
    out, opaque = [], 1
    for _ in range(draw(st.integers(1, 5))):
        frames = []
        for _ in range(draw(st.integers(1, 10))):
            if draw(st.integers(0, 5)) == 0:  # a send between the pulls (to another topic)
                frames.append(send_frame(OTHER, opaque, None, draw(st.sampled_from(list(SerializeType)))))
            else:
                frames.append(draw(pull_frame(opaque)))
            opaque += 1
        out.append(b"".join(frames))
    return cut_anywhere(draw, out)


def stats_of(stats: BrokerStats) -> object:
    """What the pulls added to."""
    return (
        stats.get_found_nums,
        stats.get_miss_nums,
        dict(stats.group_get_nums),
        {
            name: {k: (i.value, i.times) for k, i in found.items.items()}
            for name, found in stats.items.sets.items()
        },
        dict(stats.traffic_out),
        dict(stats.pull_offsets),
    )


async def serve(root: Path, data: list[bytes], lane: bool) -> tuple[bytes, object, object, int]:
    """Feed `data` (one read each) to a fresh broker holding the messages; (answers, consumer
    offsets, stats, pulls served by the lane)."""
    store_cfg = StoreConfig(store_path_root_dir=root, maped_file_size_commit_log=64 * 1024)
    broker = BrokerConfig(listen_port=0, listen_host="127.0.0.1", grpc_server_port=0)
    async with fixed_broker(store_cfg, broker) as (controller, parts):
        controller.topics.update(TopicConfig(TOPIC, 4, 4))
        controller.topics.update(TopicConfig(OTHER, 4, 4))
        table = controller.table
        setup = Connection(table)
        setup.connection_made(StubTransport())  # type: ignore[arg-type]
        tags = (None, "a", "b", "a", "c")
        setup.data_received(b"".join(send_frame(TOPIC, i, tags[i % 5]) for i in range(MESSAGES)))
        setup.data_received(heartbeat_frame())
        await asyncio.sleep(0)
        assert await asyncio.to_thread(controller.store.wait_dispatched, 10.0)
        pull_lane = PullLane(parts.pull)
        send_lane = table.groups.get(int(RequestCode.SEND_MESSAGE_V2))
        assert isinstance(send_lane, SendGroupLane)
        # the broker's own chain holds a pull lane too: this one is counted
        table.raw = (
            chain_raw(
                {
                    int(RequestCode.SEND_MESSAGE_V2): send_lane.raw,
                    int(RequestCode.PULL_MESSAGE): pull_lane.raw,
                }
            )
            if lane
            else None
        )
        answers = await feed(controller, data)
        offsets = {k: dict(v) for k, v in parts.pull.offsets.offset_table.items()}
        return answers, offsets, stats_of(parts.pull.stats), pull_lane.taken


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(reads())
def test_the_lane_answers_commits_and_counts_what_the_per_request_path_does(data: list[bytes]) -> None:
    fast, slow = side_by_side(serve, data)
    assert slow[3] == 0
    # the answer frames (byte for byte, in order), the stored consumer offsets, the stats
    assert fast[:3] == slow[:3]


def common_pulls(carried: bool) -> list[bytes]:
    frames = []
    for i in range(8):
        header = PullMessageRequestHeader(
            consumer_group="cg", topic=TOPIC, queue_id=i % 4, queue_offset=i // 4 * 2, max_msg_nums=4,
            sys_flag=int(PullSysFlag.COMMIT_OFFSET) | (int(PullSysFlag.SUBSCRIPTION) if carried else 0),
            commit_offset=i, suspend_timeout_millis=15_000, subscription="*", sub_version=5,
        )  # fmt: skip
        serialize = SerializeType.JSON if i % 2 else SerializeType.ROCKETMQ
        cmd = make_request(RequestCode.PULL_MESSAGE, header.to_ext(), None, i + 1, serialize_type=serialize)
        frames.append(encode_command(cmd))
    return [frames[0], b"".join(frames[1:])]  # a carried subscription is parsed by the handler first


def test_a_read_of_common_pulls_is_served_by_the_lane() -> None:
    """The differential test above cannot pass by the lane never running: here common pulls of
    both kinds go through it (all but a carried subscription's first, which the handler parses)."""
    for carried, taken in ((False, 8), (True, 7)):
        fast, slow = side_by_side(serve, common_pulls(carried))
        assert fast[3] == taken
        assert fast[:3] == slow[:3]
        assert fast[0].count(b"FOUND") == 8
