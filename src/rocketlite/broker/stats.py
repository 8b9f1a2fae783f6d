"""Counters the broker reports in GET_BROKER_RUNTIME_INFO (RocketMQ's `BrokerStatsManager`, small).

`record_put` runs once per send on the event loop: plain int adds on slots, and the per-topic
count in a plain dict (`dict.get` costs half of a `Counter`'s `__missing__`-backed `+=`).
`items` holds the same counts by RocketMQ's statistic names and keys, with their minute, hour
and day windows (`stats_items`), for VIEW_BROKER_STATS_DATA and the consume TPS figures.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from rocketlite.broker.stats_items import BrokerStatsItems


@dataclass(slots=True)
class BrokerStats:
    put_nums: int = 0
    put_size: int = 0
    put_failures: int = 0
    get_found_nums: int = 0
    get_miss_nums: int = 0
    send_back_nums: int = 0
    group_get_nums: Counter[str] = field(default_factory=Counter)
    topic_put_nums: dict[str, int] = field(default_factory=dict)  # messages stored, by topic
    items: BrokerStatsItems = field(default_factory=lambda: BrokerStatsItems("DefaultCluster"))

    def record_put(self, topic: str, n: int, size: int) -> None:
        self.put_nums += n
        self.put_size += size
        nums = self.topic_put_nums
        nums[topic] = nums.get(topic, 0) + n
        self.items.put(topic, n, size)

    def record_get(self, group: str, found: int, topic: str = "", size: int = 0) -> None:
        if found:
            self.get_found_nums += found
            self.group_get_nums[group] += found
            if topic:
                self.items.get(topic, group, found, size)
        else:
            self.get_miss_nums += 1

    def record_send_back(self, topic: str, group: str) -> None:
        self.send_back_nums += 1
        self.items.send_back(topic, group)
