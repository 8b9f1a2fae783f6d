"""Counters the broker reports in GET_BROKER_RUNTIME_INFO (RocketMQ's `BrokerStatsManager`, small)
and the traffic RocketMQ 5's metrics count (broker/metrics/rocketmq.py reads them).

`record_put` runs once per send on the event loop: plain int adds on slots, and the per-topic
and per-(topic, message type) figures found with one `dict.get` of the topic (the items and the
traffic a NORMAL send to it adds to, kept together) and added to in place. `items` holds the
counts by RocketMQ's statistic names and keys, with their minute, hour and day windows
(`stats_items`), for VIEW_BROKER_STATS_DATA and the consume TPS figures.

RocketMQ 5 (`SendMessageProcessor`, `DefaultPullMessageResultHandler`) counts
`rocketmq_messages_in_total` / `rocketmq_throughput_in_total` / `rocketmq_message_size` by topic
and message type, and `rocketmq_messages_out_total` / `rocketmq_throughput_out_total` by topic and
consumer group, leaving out retry and DLQ topics; sizes are the stored records' bytes
(`AppendMessageResult.getWroteBytes`) and the pulled buffers' bytes. The pull offsets
(`ConsumerOffsetManager.commitPullOffset`: where each group's last pull of a queue ended) give
the in-flight and ready figures of the lag gauges.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import Counter
from dataclasses import dataclass, field
from typing import Final

from rocketlite.broker.stats_items import BrokerStatsItems, StatsItem
from rocketlite.protocol import reserved

# rocketmq_message_size's buckets (BrokerMetricsManager.registerMetricsView): 1 KB .. 4 MB.
MESSAGE_SIZE_BUCKETS: Final = (1024, 4 * 1024, 512 * 1024, 1024 * 1024, 2 * 1024 * 1024, 4 * 1024 * 1024)
NORMAL: Final = "normal"  # TopicMessageType.NORMAL.getMetricsValue()
_FIRST_BUCKET: Final = MESSAGE_SIZE_BUCKETS[0]


# What marks a non-normal message (BrokerMetricsManager.getMessageType): a prepared transaction,
# a sharding key (FIFO), a delay level or a timer property (DELAY).
_SHARDING_KEY: Final = "__SHARDINGKEY"
_DELAY_MARKS: Final = ("TIMER_DELIVER_MS", "TIMER_DELAY_SEC", "TIMER_DELAY_MS", "__STARTDELIVERTIME")
# in every mark above or in the sharding key: without both, a message is NORMAL or a DELAY level
_MARK_NEEDLES: Final = ("TIMER_", "__S")


def message_type(properties: str, prepared: bool, delay: str | None) -> str:
    """`TopicMessageType.getMetricsValue` of a send: transaction, fifo, delay or normal."""
    if prepared:
        return "transaction"
    if _MARK_NEEDLES[0] not in properties and _MARK_NEEDLES[1] not in properties:
        return NORMAL if delay is None else "delay"  # the common case, two substring scans
    if _SHARDING_KEY in properties:
        return "fifo"
    if delay is not None or any(mark in properties for mark in _DELAY_MARKS):
        return "delay"
    return NORMAL


def counted_topic(topic: str) -> bool:
    """RocketMQ's metrics leave retry and DLQ topics out (`BrokerMetricsManager.isRetryOrDlqTopic`)."""
    return not topic.startswith((reserved.RETRY_GROUP_TOPIC_PREFIX, reserved.DLQ_GROUP_TOPIC_PREFIX))


@dataclass(slots=True)
class TrafficIn:
    """Messages and bytes stored for one (topic, message type), and the message-size histogram."""

    messages: int = 0
    size: int = 0
    buckets: list[int] = field(default_factory=lambda: [0] * (len(MESSAGE_SIZE_BUCKETS) + 1))
    size_sum: int = 0


# what one send adds to: TOPIC_PUT_NUMS, TOPIC_PUT_SIZE, BROKER_PUT_NUMS, the traffic (None when
# the topic is not counted: retry and DLQ)
_PutSlot = tuple[StatsItem, StatsItem, StatsItem, TrafficIn | None]


@dataclass(slots=True)
class BrokerStats:
    put_nums: int = 0
    put_size: int = 0
    put_failures: int = 0
    get_found_nums: int = 0
    get_miss_nums: int = 0
    send_back_nums: int = 0
    group_get_nums: Counter[str] = field(default_factory=Counter)
    traffic_in: dict[tuple[str, str], TrafficIn] = field(default_factory=dict)  # (topic, type)
    traffic_out: dict[tuple[str, str], list[int]] = field(default_factory=dict)  # (topic, group): [n, bytes]
    send_to_dlq: dict[tuple[str, str], int] = field(default_factory=dict)  # (topic, group)
    pull_offsets: dict[tuple[str, str, int], int] = field(default_factory=dict)  # (group, topic, queue)
    items: BrokerStatsItems = field(default_factory=lambda: BrokerStatsItems("DefaultCluster"))
    # per topic, the counters a NORMAL send adds to (`_put_slot`); `items` is not replaced later
    _put_slots: dict[str, _PutSlot] = field(default_factory=dict, repr=False, compare=False)

    def record_put(self, topic: str, n: int, size: int, message_type: str = NORMAL) -> None:
        """`n` messages of `size` stored bytes (body bytes where the record size is not known).

        Once per send: the counters a (topic, message type) adds to are found with one dict
        lookup (`_put_slot` on the first send) and added to in place."""
        self.put_nums += n
        self.put_size += size
        slot = self._put_slots.get(topic) if message_type == NORMAL else None
        if slot is None:
            slot = self._put_slot(topic, message_type)
        nums, sizes, broker, traffic = slot
        nums.value += n
        nums.times += 1
        sizes.value += size
        sizes.times += 1
        broker.value += n
        broker.times += 1
        if traffic is None:  # a retry or DLQ topic: not in RocketMQ's metrics
            return
        traffic.messages += n
        traffic.size += size
        each = size // n if n else 0
        # one observation per request (Java records wroteBytes / msgNum once); the first bucket
        # whose bound is >= each, the last (+Inf) when none is
        traffic.buckets[0 if each <= _FIRST_BUCKET else bisect_left(MESSAGE_SIZE_BUCKETS, each)] += 1
        traffic.size_sum += each

    def record_single_puts(self, topic: str, sizes: list[int]) -> None:
        """`record_put(topic, 1, size)` for each of `sizes` (NORMAL single sends of one topic, the
        coalescing lane's), with one slot lookup: every counter and the histogram end the same."""
        n = len(sizes)
        if not n:
            return
        total = sum(sizes)
        self.put_nums += n
        self.put_size += total
        slot = self._put_slots.get(topic)
        if slot is None:
            slot = self._put_slot(topic, NORMAL)
        nums, size_item, broker, traffic = slot
        nums.value += n
        nums.times += n
        size_item.value += total
        size_item.times += n
        broker.value += n
        broker.times += n
        if traffic is None:
            return
        traffic.messages += n
        traffic.size += total
        traffic.size_sum += total
        buckets = traffic.buckets
        low, high = min(sizes), max(sizes)
        first = 0 if low <= _FIRST_BUCKET else bisect_left(MESSAGE_SIZE_BUCKETS, low)
        if first == (0 if high <= _FIRST_BUCKET else bisect_left(MESSAGE_SIZE_BUCKETS, high)):
            buckets[first] += n  # all in one bucket (the common case: one size)
            return
        for size in sizes:
            buckets[0 if size <= _FIRST_BUCKET else bisect_left(MESSAGE_SIZE_BUCKETS, size)] += 1

    def _put_slot(self, topic: str, message_type: str) -> _PutSlot:
        """The counters of (topic, message type), made at its first send; NORMAL's are kept by
        topic for `record_put` (the other types are rare: found again each time)."""
        nums, sizes, broker = self.items.put_items(topic)
        traffic: TrafficIn | None = None
        if counted_topic(topic):
            key = (topic, message_type)
            traffic = self.traffic_in.get(key)
            if traffic is None:
                traffic = self.traffic_in[key] = TrafficIn()
        slot = (nums, sizes, broker, traffic)
        if message_type == NORMAL:
            self._put_slots[topic] = slot
        return slot

    def record_get(
        self,
        group: str,
        found: int,
        topic: str | None = None,
        queue_id: int = -1,
        next_offset: int = -1,
        size: int = 0,
    ) -> None:
        if found:
            self.get_found_nums += found
            self.group_get_nums[group] += found
            if topic:
                self.items.get(topic, group, found, size)
            if topic is not None and counted_topic(topic):
                out = self.traffic_out.get((topic, group))
                if out is None:
                    out = self.traffic_out[(topic, group)] = [0, 0]
                out[0] += found
                out[1] += size
        else:
            self.get_miss_nums += 1
        if topic is not None and next_offset >= 0:
            self.pull_offsets[(group, topic, queue_id)] = next_offset

    def record_dlq(self, topic: str, group: str) -> None:
        """A message moved to the group's DLQ (`rocketmq_send_to_dlq_messages_total`, labelled with
        the topic the consumer sent it back from)."""
        key = (topic, group)
        self.send_to_dlq[key] = self.send_to_dlq.get(key, 0) + 1

    def record_send_back(self, topic: str, group: str) -> None:
        self.send_back_nums += 1
        self.items.send_back(topic, group)
