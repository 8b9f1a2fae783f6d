"""`StoreStats`: the store's counters (puts, their latency buckets, reads), read by the broker's
runtime info and metrics; `MessageStore` updates them.

`record_put` runs once per send on the event loop, so it is plain int adds on slots: the latency
buckets are five int fields (the common `<1ms` case is one compare and one add), and the dict the
readers see (`put_latency_buckets`) is built only when asked for."""

from __future__ import annotations

import logging
from dataclasses import dataclass
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
    # put latency buckets: < 1 ms, < 10 ms, < 100 ms, < 500 ms, >= 500 ms
    put_lt_1ms: int = 0
    put_lt_10ms: int = 0
    put_lt_100ms: int = 0
    put_lt_500ms: int = 0
    put_ge_500ms: int = 0

    @property
    def put_latency_buckets(self) -> dict[str, int]:
        """The bucket counts by label, in order (metrics and brokerStatus print them)."""
        return {
            "<1ms": self.put_lt_1ms,
            "<10ms": self.put_lt_10ms,
            "<100ms": self.put_lt_100ms,
            "<500ms": self.put_lt_500ms,
            ">=500ms": self.put_ge_500ms,
        }

    def record_put(self, elapsed_ms: float, size: int, n: int) -> None:
        self.put_count += n
        self.put_bytes += size
        if elapsed_ms > self.put_max_ms:  # noqa: PLR1730 (a compare is cheaper than max())
            self.put_max_ms = elapsed_ms
        if elapsed_ms < 1:
            self.put_lt_1ms += 1
        elif elapsed_ms < 10:
            self.put_lt_10ms += 1
        elif elapsed_ms < 100:
            self.put_lt_100ms += 1
        elif elapsed_ms < SLOW_PUT_MS:
            self.put_lt_500ms += 1
        else:
            self.put_ge_500ms += 1
            self.put_slow_count += 1
            log.warning("slow put: %.1f ms for %d message(s)", elapsed_ms, n)
