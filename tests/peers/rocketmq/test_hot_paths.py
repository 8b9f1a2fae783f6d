"""The hot paths, RocketMQ 5.3.3 vs rocketlite: the same requests, the same answers.

Each test is one scenario (tests/peers/rocketmq/differential.py): it runs on the real broker and
name server, then on rocketlite, and every answer is compared after normalisation.
"""

from __future__ import annotations

import pytest

from rocketlite.protocol.message import parse_msg_id
from rocketlite.protocol.requests.offsets import (
    build_get_earliest_msg_store_time,
    build_get_max_offset,
    build_get_min_offset,
    build_query_consumer_offset,
    build_search_offset,
    build_update_consumer_offset,
)
from rocketlite.protocol.requests.query import build_query_message, build_view_message
from rocketlite.protocol.requests.route import build_get_route
from tests.peers.rocketmq.differential import Side
from tests.peers.rocketmq.runner import Pair
from tests.peers.rocketmq.steps import batch, heartbeat, pull, records, send, send_v1, setup_topic
from tests.support.names import unique

pytestmark = pytest.mark.timeout(600)


def test_send_pull_and_queue_offsets(pair: Pair) -> None:
    topic, group = unique("DiffHot"), unique("diff_cg")

    async def scenario(s: Side) -> None:
        await setup_topic(s, topic, 4)
        await s.call("route", build_get_route(topic), to="namesrv")
        for i, tag in enumerate(["TagA", "TagB", "TagA"]):
            await s.call(
                f"send {i}", send(topic, f"m{i}".encode(), tags=tag, keys=f"k{i} shared", uniq=f"U{i}")
            )
        await s.call("send v1", send_v1(topic, b"v1", tags="TagC", uniq="U3"))
        await s.call("send flag", send(topic, b"flagged", queue_id=1, flag=7, uniq="U4"))
        await s.wait_messages(topic, 0, 4)
        await s.wait_messages(topic, 1, 1)
        await s.call("pull all", pull(group, topic, 0))
        await s.call("pull TagA", pull(group, topic, 0, expression="TagA || TagX"))
        await s.call("pull TagX", pull(group, topic, 0, expression="TagX"))
        await s.call("pull from 2, max 1", pull(group, topic, 2, max_nums=1))
        await s.call("pull at the end", pull(group, topic, 4))
        await s.call("pull past the end", pull(group, topic, 10))
        await s.call("pull queue 1", pull(group, topic, 0, queue_id=1))
        await s.call("pull empty queue", pull(group, topic, 0, queue_id=2))
        await s.call("pull empty queue past 0", pull(group, topic, 3, queue_id=2))
        await s.call("max offset", build_get_max_offset(topic, 0))
        await s.call("min offset", build_get_min_offset(topic, 0))
        await s.call("max offset, empty queue", build_get_max_offset(topic, 3))
        await s.call("earliest store time", build_get_earliest_msg_store_time(topic, 0))
        stored = await records(s, group, topic)
        await s.call("search by 2nd store time", build_search_offset(topic, 0, stored[1].store_timestamp))
        await s.call("search before all", build_search_offset(topic, 0, 1))
        await s.call("search after all", build_search_offset(topic, 0, stored[-1].store_timestamp + 60_000))
        await s.call("search empty queue", build_search_offset(topic, 2, stored[1].store_timestamp))

    pair.check("send, pull and queue offsets", scenario)


def test_batch(pair: Pair) -> None:
    topic, group = unique("DiffBatch"), unique("diff_cg")

    async def scenario(s: Side) -> None:
        await setup_topic(s, topic, 2)
        await s.call("batch of 5", batch(topic, [f"b{i}".encode() for i in range(5)], queue_id=1))
        await s.call(
            "batch with header tags",
            batch(topic, [b"x", b"y"], queue_id=1, uniq_prefix="H", header_props="TAGS\x01bt"),
        )
        await s.wait_messages(topic, 1, 7)
        await s.call("pull", pull(group, topic, 0, queue_id=1))
        await s.call("pull tag bt", pull(group, topic, 0, queue_id=1, expression="bt"))

    pair.check("batch send", scenario)


def test_consumer_offsets(pair: Pair) -> None:
    topic, group = unique("DiffOffsets"), unique("diff_cg")

    async def scenario(s: Side) -> None:
        await setup_topic(s, topic, 2)
        await s.call("heartbeat (creates the group)", heartbeat(group, topic))
        for i in range(3):
            s.expect(await s.call(f"send {i}", send(topic, b"x", uniq=f"O{i}")))
        await s.wait_messages(topic, 0, 3)
        await s.call("query before any commit", build_query_consumer_offset(group, topic, 0))
        await s.call("query empty queue", build_query_consumer_offset(group, topic, 1))
        await s.call("commit 2", build_update_consumer_offset(group, topic, 0, 2))
        await s.call("query after commit", build_query_consumer_offset(group, topic, 0))
        await s.call("commit 1 (backwards)", build_update_consumer_offset(group, topic, 0, 1))
        await s.call("query after going back", build_query_consumer_offset(group, topic, 0))
        await s.call("commit past the end", build_update_consumer_offset(group, topic, 0, 50))
        await s.call("query past the end", build_query_consumer_offset(group, topic, 0))
        await s.call("pull at 3", pull(group, topic, 3))
        await s.call("query other queue", build_query_consumer_offset(group, topic, 1))

    pair.check("consumer offsets", scenario)


def test_query_by_key_and_view_by_id(pair: Pair) -> None:
    topic = unique("DiffQuery")

    async def scenario(s: Side) -> None:
        await setup_topic(s, topic, 1)
        first = s.expect(await s.call("send k1 k2", send(topic, b"findme", keys="k1 k2", uniq="QU1")))
        await s.call("send k3", send(topic, b"other", keys="k3", uniq="QU2"))
        await s.wait_messages(topic, 0, 2)
        await s.call("query k2", build_query_message(topic, "k2", max_num=32, unique=False))
        await s.call("query uniq", build_query_message(topic, "QU1", max_num=32, unique=True))
        await s.call("query missing", build_query_message(topic, "nope", max_num=32, unique=False))
        await s.call(
            "query future window",
            build_query_message(
                topic, "k1", max_num=32, begin_ms=1 << 60, end_ms=(1 << 60) + 1, unique=False
            ),
        )
        offset = parse_msg_id(first.ext_fields["msgId"]).offset
        await s.call("view by id", build_view_message(offset))
        await s.call("view mid-record", build_view_message(offset + 1))
        await s.call("view far past the end", build_view_message(offset + (1 << 40)))

    pair.check("query by key and view by id", scenario)
