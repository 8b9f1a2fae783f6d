"""Routes to queues: which queues of a topic a producer may write and a consumer may read.

Pure functions over a `TopicRouteData` (the name server's answer), mirroring
`MQClientInstance.topicRouteData2TopicPublishInfo` / `topicRouteData2TopicSubscribeInfo`, so the
instance can recompute them from its route table whenever a route changes.
"""

from __future__ import annotations

from dataclasses import dataclass

from rocketlite.protocol.bodies.message_queue import MessageQueue
from rocketlite.protocol.bodies.route import TopicRouteData

PERM_READ = 4
PERM_WRITE = 2


@dataclass(frozen=True, slots=True)
class TopicPublishInfo:
    """Writable queues of a topic, in Java's order (brokers by name, then queue id)."""

    queues: tuple[MessageQueue, ...]
    order_topic: bool = False


def publish_info_of(topic: str, route: TopicRouteData) -> TopicPublishInfo:
    """`topicRouteData2TopicPublishInfo`: orderTopicConf, else writable queues of brokers with a master."""
    if route.order_topic_conf:
        queues = []
        for item in route.order_topic_conf.split(";"):
            name, _, nums = item.partition(":")
            if name and nums.strip().isdigit():
                queues += [MessageQueue(topic, name, i) for i in range(int(nums))]
        return TopicPublishInfo(tuple(queues), order_topic=True)
    masters = {b.broker_name for b in route.broker_datas if b.master_addr}
    queues = [
        MessageQueue(topic, qd.broker_name, i)
        for qd in sorted(route.queue_datas, key=lambda q: q.broker_name)
        if qd.perm & PERM_WRITE and qd.broker_name in masters
        for i in range(qd.write_queue_nums)
    ]
    return TopicPublishInfo(tuple(queues))


def subscribe_info_of(topic: str, route: TopicRouteData) -> list[MessageQueue]:
    """`topicRouteData2TopicSubscribeInfo`: readQueueNums queues of every readable queue data."""
    return sorted(
        MessageQueue(topic, qd.broker_name, i)
        for qd in route.queue_datas
        if qd.perm & PERM_READ
        for i in range(qd.read_queue_nums)
    )
