"""A fixed-bucket histogram: what a broker component counts for a RocketMQ 5 histogram family
(`rocketmq_delay_message_latency`, `rocketmq_finish_message_latency`), read by the metrics
collector at each scrape.

A data structure only (no exposition, no clock): `counts[i]` is the number of observations at or
below `bounds[i]` and above the bound before it, the last slot the ones above every bound (+Inf).
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass, field


@dataclass(slots=True)
class Histogram:
    bounds: tuple[float, ...]
    counts: list[int] = field(default_factory=list)
    total: float = 0.0

    def __post_init__(self) -> None:
        if not self.counts:
            self.counts = [0] * (len(self.bounds) + 1)

    def observe(self, value: float) -> None:
        self.counts[bisect_left(self.bounds, value)] += 1
        self.total += value

    def cumulative(self) -> list[tuple[float, int]]:
        """(upper bound, observations at or below it), +Inf last: Prometheus' buckets."""
        out, running = [], 0
        for bound, count in zip((*self.bounds, float("inf")), self.counts, strict=True):
            running += count
            out.append((bound, running))
        return out
