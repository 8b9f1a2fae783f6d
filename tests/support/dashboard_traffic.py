"""Real traffic for the dashboard suite (tests/peers/dashboard/test_dashboard_services.py), sent
and consumed with rocketlite's SDK, and the reads that check the dashboard's answers against the
cluster's state: a consumer group's committed offsets against the queues' ends, a query retried
until the index has the key, a raw admin request's body.

`traffic_on(cluster)`: `N` messages (keys key-i, tags tagA/tagB) to a new topic of `QUEUES`
queues, from a producer that stays connected, all consumed by a group whose consumer stays online
(its `Listener` records every message, and fails them while `failing` is set, for the DLQ page).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from rocketlite.client import (
    ClientConfig,
    ConsumeFromWhere,
    ConsumeStatus,
    Message,
    MessageExt,
    Producer,
    PushConsumer,
)
from rocketlite.client.message import SendResult
from rocketlite.embedded import EmbeddedCluster
from rocketlite.protocol.codes import ResponseCode
from tests.support.foreign_clients.dashboard import Dashboard, DriverError
from tests.support.foreign_clients.real import client_id_of
from tests.support.names import unique
from tests.support.topics import create_topic, wait_until
from tests.support.wire import raw_request

QUEUES = 4
N = 8


class Listener:
    """Records each message the consumer gets (thread-safe: the SDK's listeners run in a pool);
    fails every message while `failing` is set (for the DLQ)."""

    def __init__(self) -> None:
        self.messages: list[MessageExt] = []
        self.lock = threading.Lock()
        self.failing = False

    def __call__(self, msgs: list[MessageExt], ctx: Any) -> ConsumeStatus:
        with self.lock:
            self.messages.extend(msgs)
        return ConsumeStatus.RECONSUME_LATER if self.failing else ConsumeStatus.CONSUME_SUCCESS

    def bodies(self) -> Counter[bytes]:
        with self.lock:
            return Counter(m.body for m in self.messages)


@dataclass
class Traffic:
    topic: str
    group: str
    producer_group: str
    sent: list[SendResult]
    listener: Listener
    client_id: str
    started_ms: int


def start_consumer(
    cluster: EmbeddedCluster, group: str, topic: str, listener: Listener, **kw: Any
) -> PushConsumer:
    config = ClientConfig(
        cluster.namesrv_addr, instance_name=unique("dash"), persist_consumer_offset_interval=0.2
    )
    # from the first offset: the topics are new, and a rebalance that comes after the first sends
    # would otherwise start a new group at the end of its queues
    first = ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
    consumer = PushConsumer(group, config=config, consume_from_where=first, **kw)
    consumer.subscribe(topic, "*")
    consumer.register_message_listener(listener)
    consumer.start()
    return consumer


def max_offsets(cluster: EmbeddedCluster, topic: str) -> list[int]:
    return [cluster.broker.store.get_max_offset_in_queue(topic, q) for q in range(QUEUES)]


def committed_offsets(cluster: EmbeddedCluster, group: str, topic: str) -> list[int]:
    return [cluster.broker.offsets.query(group, topic, q) for q in range(QUEUES)]


def all_consumed(cluster: EmbeddedCluster, group: str, topic: str) -> None:
    wait_until(
        lambda: committed_offsets(cluster, group, topic) == max_offsets(cluster, topic),
        20,
        f"{group} caught up",
    )


@contextlib.contextmanager
def traffic_on(cluster: EmbeddedCluster) -> Iterator[Traffic]:
    """N messages (keys key-i, tags tagA/tagB) from a producer that stays connected, all consumed
    by a group whose consumer stays online."""
    topic, group, producer_group = unique("DashT"), unique("DashG"), unique("DashP")
    create_topic(cluster, topic, queues=QUEUES)
    listener = Listener()
    consumer = start_consumer(cluster, group, topic, listener)
    producer = Producer(producer_group, cluster.namesrv_addr)
    producer.start()
    try:
        client_id = client_id_of(cluster, group)
        started = int(time.time() * 1000)
        sent = [
            producer.send(
                Message(topic, f"body-{i}".encode(), tags="tagA" if i % 2 else "tagB", keys=f"key-{i}")
            )
            for i in range(N)
        ]
        wait_until(lambda: sum(listener.bodies().values()) >= N, 20, "the consumer got every message")
        all_consumed(cluster, group, topic)
        yield Traffic(topic, group, producer_group, sent, listener, client_id, started)
    finally:
        producer.close()
        consumer.shutdown()


def until_found(dash: Dashboard, call: str, **args: Any) -> list[dict[str, Any]]:
    """A query by key until it finds something (before, the Java client raises NO_MESSAGE)."""
    found: list[dict[str, Any]] = []

    def some() -> bool:
        try:
            found[:] = dash.call(call, **args)
        except DriverError as exc:
            if exc.code != ResponseCode.NO_MESSAGE:
                raise
        return bool(found)

    wait_until(some, 15, f"{call} {args} to find something", interval=0.2)
    return found


def raw_body(addr: str, code: int, ext: dict[str, str] | None = None) -> bytes:
    resp = raw_request(addr, code, ext or {})
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    return resp.body or b""
