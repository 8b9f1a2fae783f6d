"""UNIQ_KEY, the message id a producer makes: Java's `MessageClientIDSetter`, bit for bit.

Layout, as upper-case hex of these bytes (32 characters with an IPv4 address, 56 with IPv6)::

    offset   size  field
    0        4|16  IP     the producer's address; one that does not parse gives the low 4 bytes of
                          the clock in ms instead (Java's `createFakeIP`)
    +0       2     PID    the process id's low 16 bits (`(short) UtilAll.getPid()`)
    +2       4     HASH   Java: the class loader's identity hash, fixed for the process; HotSpot's
                          identity hashes are 31 bits and never 0, so here a number drawn once per
                          process from 1..2^31-1
    +6       4     TIME   `(int) (now - monthStart)`: ms since 00:00 on the 1st of the current month
                          in the producer's local time zone, as a Java int: its low 32 bits, so it
                          counts on past 2^31 - 1 (day 24.86) up to the month's end (a 31-day month
                          is 2,678,400,000 ms) and is never clamped. A clock set back by less than
                          1,000 s before the month start gives 0 (Java's NTP guard).
    +10      2     COUNT  a process-wide counter's low 16 bits (an `AtomicInteger` from 0)

The month start is computed as `java.util.Calendar` does (`month_bounds`) and kept until the
clock reaches the next month's start (`nextStartTime`): Java recomputes it only then, so a clock
moved back stays on the newer month. Ids of one process differ by TIME and COUNT: a process
repeats an id only after 65,536 ids in one millisecond. Ids of two processes differ by PID and
HASH. A forked child draws its own HASH and PID field and restarts the counter, as a new JVM would.
"""

from __future__ import annotations

import ipaddress
import itertools
import os
import random
import threading
from datetime import datetime, tzinfo

from rocketlite.clock import SYSTEM_CLOCK, Clock

__all__ = ["UniqIdGenerator", "month_bounds"]

NTP_GUARD_MS = 1_000_000  # `diff < 0 && diff > -1000_000`: a clock stepped back gives 0
_INT_MASK = 0xFFFF_FFFF


class _Process:
    """What Java keeps per JVM (per class loader): the HASH field and the counter."""

    def __init__(self) -> None:
        self.class_hash = random.randint(1, 0x7FFF_FFFF)
        self.counter = itertools.count()
        self.generation = 0

    def after_fork(self) -> None:
        self.class_hash = random.randint(1, 0x7FFF_FFFF)
        self.counter = itertools.count()
        self.generation += 1


_PROCESS = _Process()
os.register_at_fork(after_in_child=_PROCESS.after_fork)


def _wall(ms: int, tz: tzinfo | None) -> datetime:
    """The wall-clock time (naive) at `ms` in `tz` (None: the process's local time zone)."""
    return datetime.fromtimestamp(ms // 1000, tz).replace(tzinfo=None)


def _instant(wall: datetime, tz: tzinfo | None) -> int:
    """`wall` as ms, resolved as `GregorianCalendar` resolves it: a time skipped by a transition
    takes the offset before it, a repeated time the standard (second) one; both are the later of
    the two readings (`fold` 0 and 1)."""
    first = wall.replace(tzinfo=tz, fold=0).timestamp()
    second = wall.replace(tzinfo=tz, fold=1).timestamp()
    return round(max(first, second) * 1000)


def month_bounds(now_ms: int, tz: tzinfo | None = None) -> tuple[int, int]:
    """`setStartTime`: (start of `now_ms`'s month, start of the next) in ms, in `tz` (None: local).

    Java sets DAY_OF_MONTH 1 and 00:00:00.000 on a Calendar at `now`, then adds one MONTH to that
    instant. Where midnight of the 1st does not exist (a DST change at 00:00), the start is the
    first instant after the gap (01:00), and the next start is 01:00 on the next month's 1st too,
    since `add` keeps the time of day.
    """
    start = _instant(_wall(now_ms, tz).replace(day=1, hour=0, minute=0, second=0, microsecond=0), tz)
    begun = _wall(start, tz)
    year, month = (begun.year + 1, 1) if begun.month == 12 else (begun.year, begun.month + 1)
    return start, _instant(begun.replace(year=year, month=month), tz)


def _ip_bytes(ip: str | bytes, now_ms: int) -> bytes:
    if isinstance(ip, bytes) and len(ip) in (4, 16):
        return ip
    try:
        return ipaddress.ip_address(ip if isinstance(ip, str) else ip.decode()).packed
    except (ValueError, UnicodeDecodeError):
        return (now_ms & _INT_MASK).to_bytes(4, "big")  # createFakeIP


class UniqIdGenerator:
    """Makes UNIQ_KEYs for one client address (see the module docstring for the layout).

    `clock` gives the time (tests set it to any instant), `tz` the zone the month starts in
    (None: the process's local zone, as Java's default `TimeZone`). The HASH field and the counter
    are the process's, shared by every generator, as Java's are static.
    """

    def __init__(
        self, ip: str | bytes = "127.0.0.1", *, clock: Clock = SYSTEM_CLOCK, tz: tzinfo | None = None
    ) -> None:
        self.ip = ip
        self.clock = clock
        self.tz = tz
        self._lock = threading.Lock()
        self._generation = -1
        self._prefix = ""
        self._bounds = (0, 0)  # (startTime, nextStartTime); replaced whole, read without the lock

    def _refresh_prefix(self, now_ms: int) -> None:
        raw = _ip_bytes(self.ip, now_ms) + (os.getpid() & 0xFFFF).to_bytes(2, "big")
        self._prefix = (raw + _PROCESS.class_hash.to_bytes(4, "big")).hex().upper()
        self._generation = _PROCESS.generation

    def next_id(self) -> str:
        now = self.clock.now_ms()
        if self._generation != _PROCESS.generation:
            with self._lock:
                self._refresh_prefix(now)
        start, next_start = self._bounds
        if now >= next_start:
            with self._lock:
                if now >= self._bounds[1]:
                    self._bounds = month_bounds(now, self.tz)
                start = self._bounds[0]
        diff = (now - start) & _INT_MASK
        if diff > _INT_MASK - NTP_GUARD_MS + 1:  # as an int: -1,000,000 < diff < 0
            diff = 0
        count = next(_PROCESS.counter) & 0xFFFF
        return f"{self._prefix}{diff:08X}{count:04X}"
