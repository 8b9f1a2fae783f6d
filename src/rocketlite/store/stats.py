"""`StoreStats`: the store's counters (puts, their latency buckets, reads), read by the broker's
runtime info and metrics; `MessageStore` updates them."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Final

log = logging.getLogger("rocketlite.store")

SLOW_PUT_MS: Final = 500


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
    put_latency_buckets: dict[str, int] = field(
        default_factory=lambda: {"<1ms": 0, "<10ms": 0, "<100ms": 0, "<500ms": 0, ">=500ms": 0}
    )

    def record_put(self, elapsed_ms: float, size: int, n: int) -> None:
        self.put_count += n
        self.put_bytes += size
        self.put_max_ms = max(self.put_max_ms, elapsed_ms)
        bucket = (
            "<1ms" if elapsed_ms < 1 else "<10ms" if elapsed_ms < 10 else "<100ms" if elapsed_ms < 100
            else "<500ms" if elapsed_ms < SLOW_PUT_MS else ">=500ms"
        )  # fmt: skip
        self.put_latency_buckets[bucket] += 1
        if elapsed_ms >= SLOW_PUT_MS:
            self.put_slow_count += 1
            log.warning("slow put: %.1f ms for %d message(s)", elapsed_ms, n)
