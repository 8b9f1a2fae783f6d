"""Counters the broker reports in GET_BROKER_RUNTIME_INFO (RocketMQ's `BrokerStatsManager`, small).

`record_put` runs once per send on the event loop: plain int adds on slots, and the per-topic
count in a plain dict (`dict.get` costs half of a `Counter`'s `__missing__`-backed `+=`)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field


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

    def record_put(self, topic: str, n: int, size: int) -> None:
        self.put_nums += n
        self.put_size += size
        nums = self.topic_put_nums
        nums[topic] = nums.get(topic, 0) + n

    def record_get(self, group: str, found: int) -> None:
        if found:
            self.get_found_nums += found
            self.group_get_nums[group] += found
        else:
            self.get_miss_nums += 1
