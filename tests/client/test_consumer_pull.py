"""The pull consumer of `rocketlite.client` (async and sync) against a real embedded cluster:
the offset lookups, fetch with RocketMQ's statuses, seek by offset and by time, poll, commit, and a
long poll for news. The push consumers are test_consumer.py.
"""

from __future__ import annotations

import asyncio
import time

from rocketlite.client import (
    AsyncProducer,
    AsyncPullConsumer,
    Message,
    MessageQueue,
    PullConsumer,
    PullStatus,
)
from rocketlite.embedded import EmbeddedCluster
from tests.support.aio import run
from tests.support.names import unique
from tests.support.sdk import read_queues


def test_pull_consumer_seek_poll_commit(embedded_cluster: EmbeddedCluster) -> None:
    topic, group = unique("ConsPull"), unique("cg")

    async def main() -> None:
        async with AsyncProducer(unique("pg"), embedded_cluster.namesrv_addr) as producer:
            await producer.send(Message(topic, b"create"), queue=MessageQueue(topic, "broker-a", 0))
            queues = await producer.fetch_publish_queues(topic)
            mq = queues[1]  # an empty queue
            before = [await producer.send(Message(topic, f"old{i}".encode()), queue=mq) for i in range(5)]
            await asyncio.sleep(0.01)  # store timestamps are ms: keep the two batches apart
            boundary = int(time.time() * 1000)
            after = [await producer.send(Message(topic, f"new{i}".encode()), queue=mq) for i in range(5)]
            assert after[0].queue_offset == 5 and before[-1].queue_offset == 4
            async with AsyncPullConsumer(
                unique("cg"), embedded_cluster.namesrv_addr, heartbeat=False
            ) as waiter:
                await read_queues(waiter, [mq], 10)  # all ten dispatched and pullable

            async with AsyncPullConsumer(group, embedded_cluster.namesrv_addr, auto_commit=False) as pc:
                assert sorted(await pc.fetch_queues(topic)) == sorted(queues)
                assert await pc.get_min_offset(mq) == 0
                assert await pc.get_max_offset(mq) == 10
                assert await pc.search_offset_by_timestamp(mq, boundary) == 5
                assert await pc.get_earliest_msg_store_time(mq) > 0
                status, next_offset, lo, hi, msgs = await pc.fetch(mq, 3, 4)
                assert status is PullStatus.FOUND and (next_offset, lo, hi) == (7, 0, 10)
                assert [m.queue_offset for m in msgs] == [3, 4, 5, 6]
                status, next_offset, *_ = await pc.fetch(mq, 10, 4)
                assert status is PullStatus.NO_NEW_MSG and next_offset == 10
                status, next_offset, *_ = await pc.fetch(mq, 99, 4)
                # OFFSET_OVERFLOW_BADLY: moved to the queue's end, as RocketMQ >= 4.9.4 does
                assert status is PullStatus.OFFSET_ILLEGAL and next_offset == 10

                pc.assign([mq])
                await pc.seek_by_timestamp(mq, boundary)
                assert pc.position(mq) == 5
                got = await pc.poll(2)
                assert [m.body for m in got] == [f"new{i}".encode() for i in range(5)]
                assert pc.position(mq) == 10
                await pc.commit()
                assert await pc.committed(mq) == 10
                pc.seek(mq, 0)
                assert [m.body for m in await pc.poll(2)][:2] == [b"old0", b"old1"]

            # A new reader of the group starts at the committed offset and long-polls for news.
            async with AsyncPullConsumer(group, embedded_cluster.namesrv_addr, heartbeat=False) as pc2:
                pc2.assign([mq])
                assert await pc2.poll(0) == []
                assert pc2.position(mq) == 10
                poll = asyncio.ensure_future(pc2.poll(5))
                await producer.send(Message(topic, b"late"), queue=mq)
                assert [m.body for m in await poll] == [b"late"]

    run(main(), timeout=60)


def test_sync_pull_consumer(embedded_cluster: EmbeddedCluster) -> None:
    topic = unique("ConsPullSync")
    from rocketlite.client import Producer  # noqa: PLC0415

    with Producer(unique("pg"), embedded_cluster.namesrv_addr) as producer:
        result = producer.send(Message(topic, b"x1"))
        with PullConsumer(unique("cg"), embedded_cluster.namesrv_addr) as pc:
            pc.assign([result.queue])
            pc.seek_to_begin(result.queue)
            assert [m.body for m in pc.poll(2)] == [b"x1"]
            pc.commit()
            assert pc.committed(result.queue) == 1
            status, nxt, _lo, hi, msgs = pc.fetch(result.queue, 0)
            assert status is PullStatus.FOUND and nxt == hi == 1 and msgs[0].body == b"x1"
