"""`StoreStats`: the store's counters (puts, their latency buckets, reads), read by the broker's
runtime info and metrics; `MessageStore` updates them.

`record_put` runs once per send on the event loop, so it is plain int adds: the latency buckets
are RocketMQ's 13 (`StoreStatsService.PUT_MESSAGE_ENTIRE_TIME_MAX_DESC`, on whole milliseconds:
`[<=0ms]`, `[0~10ms]`, `[10~50ms]`, ... `[10s~]`; the common sub-millisecond case is one compare
and one add), and rocketlite's five (`put_latency_buckets`: <1ms, <10ms, <100ms, <500ms, >=500ms)
are sums of them, built only when asked for. `get_max_ms` is the slowest read
(`getMessageEntireTimeMax`)."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Final

log = logging.getLogger("rocketlite.store")

SLOW_PUT_MS: Final = 500
# StoreStatsService's buckets: [<=0ms] (under 1 ms), then upper bounds (exclusive) in ms.
DISTRIBUTE_LABELS: Final = (
    "[<=0ms]", "[0~10ms]", "[10~50ms]", "[50~100ms]", "[100~200ms]", "[200~500ms]", "[500ms~1s]",
    "[1~2s]", "[2~3s]", "[3~4s]", "[4~5s]", "[5~10s]", "[10s~]",
)  # fmt: skip
DISTRIBUTE_BOUNDS_MS: Final = (10, 50, 100, 200, 500, 1000, 2000, 3000, 4000, 5000, 10_000)


@dataclass(slots=True)
class StoreStats:
    put_count: int = 0
    put_bytes: int = 0
    put_max_ms: float = 0.0
    put_slow_count: int = 0
    put_failures: int = 0
    get_found: int = 0
    get_miss: int = 0
    started_ms: int = 0
    get_max_ms: float = 0.0
    # RocketMQ's put latency buckets (DISTRIBUTE_BOUNDS_MS), cumulative since start
    put_distribution: list[int] = field(default_factory=lambda: [0] * len(DISTRIBUTE_LABELS))

    @property
    def put_latency_buckets(self) -> dict[str, int]:
        """rocketlite's five bucket counts by label, in order (metrics and brokerStatus print them)."""
        d = self.put_distribution
        return {
            "<1ms": d[0],
            "<10ms": d[1],
            "<100ms": d[2] + d[3],
            "<500ms": d[4] + d[5],
            ">=500ms": sum(d[6:]),
        }

    @property
    def put_lt_500ms(self) -> int:
        return self.put_latency_buckets["<500ms"]

    @property
    def put_ge_500ms(self) -> int:
        return self.put_latency_buckets[">=500ms"]

    def record_put(self, elapsed_ms: float, size: int, n: int) -> None:
        self.put_count += n
        self.put_bytes += size
        if elapsed_ms > self.put_max_ms:  # noqa: PLR1730 (a compare is cheaper than max())
            self.put_max_ms = elapsed_ms
        d = self.put_distribution
        if elapsed_ms < 1:
            d[0] += 1
            return
        index = 1
        for bound in DISTRIBUTE_BOUNDS_MS:
            if elapsed_ms < bound:
                break
            index += 1
        d[index] += 1
        if elapsed_ms >= SLOW_PUT_MS:
            self.put_slow_count += 1
            log.warning("slow put: %.1f ms for %d message(s)", elapsed_ms, n)

    def record_get(self, elapsed_ms: float) -> None:
        if elapsed_ms > self.get_max_ms:  # noqa: PLR1730
            self.get_max_ms = elapsed_ms
