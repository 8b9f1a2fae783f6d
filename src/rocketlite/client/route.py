"""Routes to queues: which queues of a topic a producer may write and a consumer may read.

Pure functions over a `TopicRouteData` (the name server's answer), mirroring
`MQClientInstance.topicRouteData2TopicPublishInfo` / `topicRouteData2TopicSubscribeInfo`, so the
instance can recompute them from its route table whenever a route changes; and `RouteTable`, the
routes and broker addresses a client instance knows, with the lookups Java's `MQClientInstance`
makes over them (`findBrokerAddressInSubscribe`, `findBrokerAddrByTopic`, `cleanOfflineBroker`).
It does no I/O: the instance fetches routes and installs them here.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from rocketlite.protocol.bodies.message_queue import MessageQueue
from rocketlite.protocol.bodies.route import TopicRouteData, subscribe_info_of
from rocketlite.protocol.reserved import MASTER_ID

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


class RouteTable:
    """The routes of the topics a client instance uses and the addresses of their brokers."""

    def __init__(self) -> None:
        self.routes: dict[str, TopicRouteData] = {}
        self.broker_addrs: dict[str, dict[int, str]] = {}

    def install_route(self, topic: str, route: TopicRouteData) -> bool:
        """Keep `route` for `topic`; True when it names a broker, or addresses, not known before."""
        self.routes[topic] = route
        new_broker = False
        for bd in route.broker_datas:
            addrs = dict(bd.broker_addrs)
            new_broker = new_broker or self.broker_addrs.get(bd.broker_name) != addrs
            self.broker_addrs[bd.broker_name] = addrs
        return new_broker

    def clean_offline_brokers(self) -> None:
        """Forget broker addresses no route mentions any more (`cleanOfflineBroker`)."""
        live = {
            (bd.broker_name, addr)
            for route in self.routes.values()
            for bd in route.broker_datas
            for addr in bd.broker_addrs.values()
        }
        for name in list(self.broker_addrs):
            addrs = {i: a for i, a in self.broker_addrs[name].items() if (name, a) in live}
            if addrs:
                self.broker_addrs[name] = addrs
            else:
                del self.broker_addrs[name]

    def publish_info(self, topic: str) -> TopicPublishInfo | None:
        route = self.routes.get(topic)
        return None if route is None else publish_info_of(topic, route)

    def subscribe_info(self, topic: str) -> list[MessageQueue] | None:
        route = self.routes.get(topic)
        return None if route is None else subscribe_info_of(topic, route)

    def master_addr(self, broker_name: str) -> str | None:
        return self.broker_addrs.get(broker_name, {}).get(MASTER_ID)

    def broker_addr(self, broker_name: str, broker_id: int = MASTER_ID) -> str | None:
        """`findBrokerAddressInSubscribe`: that id if known, else the master, else any address."""
        addrs = self.broker_addrs.get(broker_name, {})
        addr = addrs.get(broker_id) or addrs.get(MASTER_ID)
        if addr is None and addrs:
            addr = addrs[min(addrs)]
        return addr

    def any_broker_of_topic(self, topic: str) -> str | None:
        """`findBrokerAddrByTopic`: a random broker of the route, its master if it has one."""
        route = self.routes.get(topic)
        if route is None or not route.broker_datas:
            return None
        bd = random.choice(route.broker_datas)
        return bd.master_addr or next(iter(bd.broker_addrs.values()), None)
