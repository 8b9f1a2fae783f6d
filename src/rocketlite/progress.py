"""Progress of long scans (store inspect/verify, recovery), without knowing who watches.

A scan calls a `ProgressCallback` with the bytes it has looked at and the bytes it could look at
at most (`done`, `total`); `done` only grows, and the last call is the figure the scan ended on
(a scan stops at the end of valid data, usually far short of `total`, which counts the segments'
preallocated size). The store passes these numbers on and knows nothing of terminals: the CLI
turns them into a rich bar on a TTY, and everything else uses `LogProgress`, which writes a log
line every few seconds and one at the end.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Final, TypeAlias

from rocketlite.clock import Clock, SystemClock

ProgressCallback: TypeAlias = Callable[[int, int], None]
"""`(done, total)` in bytes."""

DEFAULT_INTERVAL_S: Final = 2.0


def no_progress(done: int, total: int) -> None:
    """The callback of a scan nobody watches."""


def human_bytes(n: float) -> str:
    """1536 -> '1.5 KiB' (binary units, as `du -h` counts)."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")


def human_rate(bytes_per_s: float) -> str:
    """Bytes per second as 'MB/s' or 'GB/s' (decimal, as disks are rated)."""
    if bytes_per_s >= 1e9:
        return f"{bytes_per_s / 1e9:.1f} GB/s"
    return f"{bytes_per_s / 1e6:.1f} MB/s"


class LogProgress:
    """A `ProgressCallback` that logs `what: 640.0 MiB of 1.0 GiB, 1.2 GB/s` every `interval_s`.

    Nothing is logged for a scan that ends within the first interval until `finish()`, which logs
    one summary line: a quick scan says one thing, a long one says where it is every few seconds.
    """

    def __init__(
        self,
        logger: logging.Logger,
        what: str,
        *,
        interval_s: float = DEFAULT_INTERVAL_S,
        clock: Clock | None = None,
    ) -> None:
        self._log = logger
        self._what = what
        self._interval = interval_s
        self._clock = clock or SystemClock()
        self._started = self._clock.monotonic()
        self._next = self._started + interval_s
        self.done = 0
        self.total = 0

    def __call__(self, done: int, total: int) -> None:
        self.done, self.total = done, total
        now = self._clock.monotonic()
        if now >= self._next:
            self._next = now + self._interval
            self._log.info("%s: %s", self._what, self._figures(now))

    def _figures(self, now: float) -> str:
        elapsed = now - self._started
        rate = human_rate(self.done / elapsed) if elapsed > 0 else "-"
        return f"{human_bytes(self.done)} of {human_bytes(self.total)}, {rate}"

    def finish(self, outcome: str = "done") -> None:
        """Log the last line: figures, time taken and `outcome` (e.g. where the data ended)."""
        now = self._clock.monotonic()
        self._log.info("%s: %s, %s in %.2f s", self._what, outcome, self._figures(now), now - self._started)
