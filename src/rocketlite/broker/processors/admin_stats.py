"""Admin requests about consumption and traffic: how far groups are, how fast, what a queue holds.

Answered as RocketMQ 5.3's `AdminBrokerProcessor`:

- GET_CONSUME_STATS (208): one group's ConsumeStats, per queue the broker's and the group's
  offsets, the store time of the last consumed message, and `consumeTps`, the messages per second
  the group pulled over the last minute (GROUP_GET_NUMS of each topic@group). Which topics: the
  5.x `topicList` if given, else the one topic asked for, else every topic the group has offsets
  for; an online group's topics it does not subscribe are left out;
- GET_BROKER_CONSUME_STATS (317, mqadmin brokerConsumeStats): the same for every subscription
  group, one ConsumeStats per topic, with the broker-wide lag (`totalDiff`);
- VIEW_BROKER_STATS_DATA (315, mqadmin statsAll, the dashboard's and the exporter's TPS): one
  statistic's minute, hour and day windows (`broker/stats_items.py`); SYSTEM_ERROR "The stats
  <name> <key> not exist" for a statistic never counted;
- QUERY_CONSUME_QUEUE (321, mqadmin queryCq): `count` units of a consume queue from `index`,
  with the group's subscription when one is named;
- GET_BROKER_HA_STATUS (907, mqadmin haStatus): replication, as `broker/ha/status.py` reads it.

A queue's `pullOffset` is its consumer offset: the broker keeps no separate pull offsets (Java's
`pullOffsetTable`), so mqadmin's "#Inflight" column shows 0.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from rocketlite.broker.client_manager import ClientManager
from rocketlite.broker.config import BrokerConfig
from rocketlite.broker.state_files import ConsumerOffsetTable
from rocketlite.broker.stats_items import BrokerStatsItems
from rocketlite.broker.subscription_group import SubscriptionGroupManager
from rocketlite.broker.topic_config import TopicConfigManager
from rocketlite.protocol.bodies.admin import (
    ConsumeQueueData,
    ConsumeStatsList,
    HARuntimeInfo,
    QueryConsumeQueueResponseBody,
)
from rocketlite.protocol.bodies.message_queue import ConsumeStats, MessageQueue, OffsetWrapper
from rocketlite.protocol.codes import ResponseCode
from rocketlite.protocol.wire import fastjson
from rocketlite.protocol.wire.admin import (
    GetConsumeStatsInBrokerHeader,
    QueryConsumeQueueRequestHeader,
    ViewBrokerStatsDataRequestHeader,
)
from rocketlite.protocol.wire.command import RemotingCommand, make_response
from rocketlite.protocol.wire.headers import GetConsumeStatsRequestHeader
from rocketlite.remoting.connection import Connection
from rocketlite.store.api import StoreAPI

log = logging.getLogger("rocketlite.broker.admin")

TOPIC_NAME_SEPARATOR = ";"  # GetConsumeStatsRequestHeader.fetchTopicList


class AdminStatsProcessor:
    """The consumption and traffic request codes (registered in `broker/requests.py`)."""

    def __init__(
        self,
        broker: BrokerConfig,
        store: StoreAPI,
        topics: TopicConfigManager,
        groups: SubscriptionGroupManager,
        offsets: ConsumerOffsetTable,
        clients: ClientManager,
        stats: BrokerStatsItems,
        broker_addr: str,
        ha_info: Callable[[], HARuntimeInfo | None],
    ) -> None:
        self.broker = broker
        self.store = store
        self.topics = topics
        self.groups = groups
        self.offsets = offsets
        self.clients = clients
        self.stats = stats
        self.broker_addr = broker_addr
        self.ha_info = ha_info

    # -- consume stats ----------------------------------------------------------------------
    def topics_of_group(self, group: str) -> set[str]:
        """`ConsumerOffsetManager.whichTopicByConsumer`."""
        with self.offsets.lock:
            keys = list(self.offsets.offset_table)
        return {topic for topic, _, g in (k.partition("@") for k in keys) if g == group}

    def _subscribed(self, group: str, topic: str) -> bool:
        """False for a topic an online group with subscriptions does not subscribe to."""
        info = self.clients.consumer_group(group)
        return info is None or not info.subscription_table or topic in info.subscription_table

    def consume_stats(self, group: str, topic: str, queue_nums: int) -> ConsumeStats:
        """One topic's ConsumeStats for `group` over its first `queue_nums` queues."""
        table: dict[MessageQueue, OffsetWrapper] = {}
        for qid in range(queue_nums):
            broker_offset = max(self.store.get_max_offset_in_queue(topic, qid), 0)
            consumer_offset = max(self.offsets.query(group, topic, qid), 0)
            last = 0
            if consumer_offset > 0:
                last = max(self.store.get_message_store_timestamp(topic, qid, consumer_offset - 1), 0)
            mq = MessageQueue(topic, self.broker.broker_name, qid)
            table[mq] = OffsetWrapper(broker_offset, consumer_offset, last, consumer_offset)
        return ConsumeStats(table, self.stats.group_get_tps(group, topic))

    def get_consume_stats(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        del conn
        header = GetConsumeStatsRequestHeader.from_ext(request.ext_fields)
        group = header.consumer_group
        listed = [t for t in (header.topic_list or "").split(TOPIC_NAME_SEPARATOR) if t]
        if listed:
            topics = set(listed)
        else:
            wanted = {header.topic} if header.topic else self.topics_of_group(group)
            topics = {t for t in wanted if self._subscribed(group, t)}
        table: dict[MessageQueue, OffsetWrapper] = {}
        tps = 0.0
        for topic in sorted(topics):
            tc = self.topics.select(topic)
            if tc is None:
                log.warning("consumeStats: topic config of %s does not exist", topic)
                continue
            stats = self.consume_stats(group, topic, tc.read_queue_nums)
            table.update(stats.offset_table)
            tps += stats.consume_tps
        return make_response(request, ResponseCode.SUCCESS, body=ConsumeStats(table, tps).to_bytes())

    def get_broker_consume_stats(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        """`fetchAllConsumeStatsInBroker`: every subscription group, one ConsumeStats per topic."""
        del conn
        header = GetConsumeStatsInBrokerHeader.from_ext(request.ext_fields)
        entries: list[dict[str, tuple[ConsumeStats, ...]]] = []
        total_diff = 0
        for group in list(self.groups.table):
            per_topic: list[ConsumeStats] = []
            for topic in sorted(self.topics_of_group(group)):
                tc = self.topics.select(topic)
                if tc is None or (header.is_order and not tc.order) or not self._subscribed(group, topic):
                    continue
                stats = self.consume_stats(group, topic, tc.write_queue_nums)
                total_diff += sum(w.broker_offset - w.consumer_offset for w in stats.offset_table.values())
                per_topic.append(stats)
            entries.append({group: tuple(per_topic)})
        body = ConsumeStatsList(tuple(entries), self.broker_addr, total_diff, 0)
        return make_response(request, ResponseCode.SUCCESS, body=body.to_bytes())

    # -- traffic ----------------------------------------------------------------------------
    def view_broker_stats_data(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        del conn
        header = ViewBrokerStatsDataRequestHeader.from_ext(request.ext_fields)
        data = self.stats.data(header.stats_name, header.stats_key)
        if data is None:
            remark = f"The stats <{header.stats_name}> <{header.stats_key}> not exist"
            return make_response(request, ResponseCode.SYSTEM_ERROR, remark)
        return make_response(request, ResponseCode.SUCCESS, body=data.to_bytes())

    # -- queue contents ---------------------------------------------------------------------
    def query_consume_queue(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        del conn
        header = QueryConsumeQueueRequestHeader.from_ext(request.ext_fields)
        topic, qid = header.topic, header.queue_id
        if self.store.get_min_offset_in_queue(topic, qid) < 0:  # no such queue
            return make_response(request, ResponseCode.SYSTEM_ERROR, f"{qid}@{topic} is not exist!")
        sub = None
        filter_data = None
        if header.consumer_group is not None:
            sub = self.clients.find_subscription(header.consumer_group, topic)
            if sub is None:
                filter_data = f"{header.consumer_group}@{topic} is not online!"
            else:
                filter_data = fastjson.dumps(None)  # no SQL92 filter data: tag filters only
        view = self.store.queue(topic, qid)
        units = view.units(header.index, header.count) if view is not None else None
        if units is None:  # Java answers SUCCESS with this remark and no body
            remark = f"Index {header.index} of {qid}@{topic} is not exist!"
            return make_response(request, ResponseCode.SUCCESS, remark)
        body = QueryConsumeQueueResponseBody(
            tuple(ConsumeQueueData(phy, size, tags) for phy, size, tags in units),
            max(self.store.get_max_offset_in_queue(topic, qid), 0),
            max(self.store.get_min_offset_in_queue(topic, qid), 0),
            sub,
            filter_data,
        )
        return make_response(request, ResponseCode.SUCCESS, body=body.to_bytes())

    # -- replication ------------------------------------------------------------------------
    def get_broker_ha_status(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        del conn
        info = self.ha_info()
        if info is None:
            remark = "Can not get HARuntimeInfo, may be duplicationEnable is true"
            return make_response(request, ResponseCode.SYSTEM_ERROR, remark)
        return make_response(request, ResponseCode.SUCCESS, body=info.to_bytes())
