"""A real broker in the states the Spark source's driver-side logic must handle.

The source's tests drive `StreamReader` and `read_range` against an embedded name server + broker
on 127.0.0.1, with nothing of ours replaced: the states come from the broker itself.

- `fill`: a given number of messages into each named queue (so backlogs differ per queue);
- `committed`: a group's offsets read back from the broker (QUERY_CONSUMER_OFFSET on the wire);
- `shrink_queues`: a topic's queue count lowered, the way a queue leaves the route;
- `delete_topic`: DELETE_TOPIC_IN_BROKER and DELETE_TOPIC_IN_NAMESRV, as mqadmin deleteTopic sends;
- `expire_segments`: retention really run: every commit-log segment but the newest made older
  than `fileReservedTime`, then DELETE_EXPIRED_COMMITLOG (mqadmin deleteExpiredCommitLog), whose
  pass deletes them and moves the consume queues' minimum offsets past the records they held;
- `retention_cluster`: a cluster of its own for that (small segments, one-hour retention), since
  expiring segments of the run's shared cluster would remove other tests' messages.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import Iterable, Iterator, Mapping

from rocketlite.embedded import EmbeddedCluster, embedded
from rocketlite.protocol.bodies.route import TopicConfig
from rocketlite.protocol.codes import RequestCode, ResponseCode
from rocketlite.protocol.requests.offsets import build_query_consumer_offset, parse_query_consumer_offset
from rocketlite.remoting.client import RemotingClient
from rocketlite.spark.offsets import QueueRef
from rocketlite.store.config import FlushDiskType
from tests.support.topics import wait_until
from tests.support.wire import raw_request

SEGMENT_BYTES = 4096  # the smallest commit-log segment the store accepts: a few records each
RESERVED_HOURS = 1


@contextlib.contextmanager
def retention_cluster() -> Iterator[EmbeddedCluster]:
    """A name server + broker whose commit log is cut in 4 KiB segments kept one hour.

    SYNC_FLUSH: a send returns once its segment is on disk, so no later flush touches an aged
    segment's mtime. `deleteWhen` is an hour other than this one: only the admin verb deletes.
    """
    other_hour = str((time.localtime().tm_hour + 12) % 24)
    with embedded(
        store_maped_file_size_commit_log=SEGMENT_BYTES,
        store_file_reserved_time=RESERVED_HOURS,
        store_delete_when=other_hour,
        store_flush_disk_type=FlushDiskType.SYNC_FLUSH,
        grpc_server_port=0,  # as spark_session's cluster: grpc stays out of the Spark tests' process
    ) as cluster:
        yield cluster


def fill(cluster: EmbeddedCluster, topic: str, per_queue: Mapping[int, int], *, body_size: int = 16) -> None:
    """Send `per_queue[q]` messages to queue `q` of `topic` with the SDK; wait until dispatched."""
    from rocketlite.client import Message, Producer  # noqa: PLC0415

    with Producer("spark-broker-fill", cluster.namesrv_addr) as producer:
        targets = {mq.queue_id: mq for mq in producer.fetch_publish_queues(topic)}
        for queue_id, count in per_queue.items():
            for i in range(count):
                body = f"{topic}-{queue_id}-{i}-".encode().ljust(body_size, b".")
                producer.send(Message(topic, body), queue=targets[queue_id])
    assert cluster.broker.store.wait_dispatched(10.0)


def committed(cluster: EmbeddedCluster, group: str, refs: Iterable[QueueRef]) -> dict[QueueRef, int | None]:
    """The group's committed offset of each queue, asked of the broker (None where it has none)."""

    async def ask() -> dict[QueueRef, int | None]:
        client = RemotingClient()
        try:
            out: dict[QueueRef, int | None] = {}
            for ref in refs:
                cmd = build_query_consumer_offset(group, ref.topic, ref.queue_id)
                out[ref] = parse_query_consumer_offset(await client.invoke(cluster.broker_addr, cmd, 5.0))
            return out
        finally:
            await client.close()

    return asyncio.run(ask())


def shrink_queues(cluster: EmbeddedCluster, topic: str, queues: int) -> None:
    """Lower the topic's read and write queue counts; the broker registers the new route at once."""
    cluster.broker.topics.update(TopicConfig(topic, queues, queues))


def delete_topic(cluster: EmbeddedCluster, topic: str) -> None:
    """Delete the topic from the broker (config, offsets, consume queues) and the name server."""
    for addr, code in (
        (cluster.broker_addr, RequestCode.DELETE_TOPIC_IN_BROKER),
        (cluster.namesrv_addr, RequestCode.DELETE_TOPIC_IN_NAMESRV),
    ):
        answer = raw_request(addr, code, {"topic": topic})
        assert answer.code == ResponseCode.SUCCESS, (code, answer.remark)


def expire_segments(cluster: EmbeddedCluster) -> int:
    """Age every commit-log segment but the newest past retention, then ask the broker to clean.

    Returns the commit log's new minimum physical offset (the start of the newest segment).
    """
    store = cluster.broker.store
    assert store.wait_dispatched(10.0)
    segments = list(store.commit_log.queue)
    assert len(segments) > 1, "fill the store past one segment first"
    wait_until(
        lambda: store.commit_log.queue.flushed_where >= store.commit_log.queue.max_wrote_offset,
        10,
        "the commit log flushed to its end",
    )
    old = time.time() - (RESERVED_HOURS + 1) * 3600
    for segment in segments[:-1]:
        os.utime(segment.path, (old, old))
    answer = raw_request(cluster.broker_addr, RequestCode.DELETE_EXPIRED_COMMITLOG, {}, timeout=30.0)
    assert answer.code == ResponseCode.SUCCESS, answer.remark
    assert store.commit_log.min_offset == segments[-1].file_from_offset, "the expired segments are gone"
    return store.commit_log.min_offset
