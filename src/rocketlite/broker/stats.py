"""Counters the broker reports in GET_BROKER_RUNTIME_INFO (RocketMQ's `BrokerStatsManager`, small).

`record_put` runs once per send on the event loop: plain int adds on slots. The per-topic count
of a run of sends to one topic (the common case) accumulates in one int and is folded into the
per-topic table only when the topic changes or a reader asks (`topic_put_nums`)."""

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
    _topic_puts: Counter[str] = field(default_factory=Counter)
    _last_topic: str = ""  # the topic of the latest puts, whose count is `_last_topic_puts`
    _last_topic_puts: int = 0

    @property
    def topic_put_nums(self) -> Counter[str]:
        """Messages stored, by topic (the pending run of the latest topic folded in)."""
        if self._last_topic_puts:
            self._topic_puts[self._last_topic] += self._last_topic_puts
            self._last_topic_puts = 0
        return self._topic_puts

    def record_put(self, topic: str, n: int, size: int) -> None:
        self.put_nums += n
        self.put_size += size
        if topic == self._last_topic:
            self._last_topic_puts += n
            return
        if self._last_topic_puts:
            self._topic_puts[self._last_topic] += self._last_topic_puts
        self._last_topic, self._last_topic_puts = topic, n

    def record_get(self, group: str, found: int) -> None:
        if found:
            self.get_found_nums += found
            self.group_get_nums[group] += found
        else:
            self.get_miss_nums += 1
