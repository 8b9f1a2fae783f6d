"""Counters the broker reports in GET_BROKER_RUNTIME_INFO (RocketMQ's `BrokerStatsManager`, small)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field


@dataclass
class BrokerStats:
    put_nums: int = 0
    put_size: int = 0
    put_failures: int = 0
    get_found_nums: int = 0
    get_miss_nums: int = 0
    send_back_nums: int = 0
    topic_put_nums: Counter[str] = field(default_factory=Counter)
    group_get_nums: Counter[str] = field(default_factory=Counter)

    def record_put(self, topic: str, n: int, size: int) -> None:
        self.put_nums += n
        self.put_size += size
        self.topic_put_nums[topic] += n

    def record_get(self, group: str, found: int) -> None:
        if found:
            self.get_found_nums += found
            self.group_get_nums[group] += found
        else:
            self.get_miss_nums += 1
