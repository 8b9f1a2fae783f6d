"""Message ids (UNIQ_KEY) for tests: a clock that moves on as ids are made, Java's decoding rules,
and a child process that writes ids to a file.

`SteppingClock` gives `start` for the first `per_ms` readings, then one millisecond more every
`per_ms` readings: a producer making `per_ms` ids a millisecond, so a million ids span a known
stretch of time (and cross a month's end when started before it).

`decode_java` reads an id the way `MessageClientIDSetter`'s getters do (`getIPFromID`,
`getPidFromID`, `getNearlyTimeFromID`), written from their rules, independently of
`rocketlite.protocol.uniq_key`.

Run as a script (`python -m tests.support.uniq_ids OUT START PER_MS COUNT`) it writes COUNT ids,
made with a `SteppingClock(START, PER_MS)` in UTC, to OUT as raw bytes (16 a piece).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from datetime import UTC, datetime, tzinfo
from pathlib import Path


class SteppingClock:
    """A `Clock` whose milliseconds advance by one every `per_ms` readings."""

    def __init__(self, start: int, per_ms: int) -> None:
        self.start = start
        self.per_ms = per_ms
        self.readings = 0

    def now_ms(self) -> int:
        n = self.readings
        self.readings = n + 1
        return self.start + n // self.per_ms

    def monotonic(self) -> float:
        return (self.start + self.readings // self.per_ms) / 1000.0


def ms(year: int, month: int, day: int = 1, hour: int = 0, tz: tzinfo = UTC) -> int:
    """Milliseconds of a wall-clock time in `tz` (not in a transition gap)."""
    return round(datetime(year, month, day, hour, tzinfo=tz).timestamp() * 1000)


def java_month_start(now_ms: int, tz: tzinfo, months_back: int = 0) -> int:
    """00:00 on the 1st of `now_ms`'s month (minus `months_back`) in `tz`, for zones whose
    midnights all exist (UTC, Europe/Berlin): what `Calendar` gives there."""
    local = datetime.fromtimestamp(now_ms / 1000, tz)
    year, month = local.year, local.month - months_back
    while month < 1:
        year, month = year - 1, month + 12
    return ms(year, month, tz=tz)


@dataclass(frozen=True)
class JavaView:
    ip: bytes
    pid: int
    class_hash: int
    span_ms: int  # the TIME field as `getNearlyTimeFromID` reads it: 4 zero bytes + 4 bytes, a long
    counter: int
    nearly_time_ms: int


def decode_java(msg_id: str, now_ms: int, tz: tzinfo) -> JavaView:
    """`getIPFromID`, `getPidFromID` and `getNearlyTimeFromID` at `now_ms` in `tz`."""
    raw = bytes.fromhex(msg_id)
    ip_len = 16 if len(raw) == 28 else 4
    pid = int.from_bytes(raw[len(raw) - 12 : len(raw) - 10], "big", signed=True) & 0xFFFF
    class_hash = int.from_bytes(raw[ip_len + 2 : ip_len + 6], "big", signed=True)
    span = int.from_bytes(bytes(4) + raw[ip_len + 6 : ip_len + 10], "big", signed=True)
    counter = int.from_bytes(raw[-2:], "big")
    month_start = java_month_start(now_ms, tz)
    if month_start + span >= now_ms:  # made in the month before
        month_start = java_month_start(now_ms, tz, months_back=1)
    return JavaView(raw[:ip_len], pid, class_hash, span, counter, month_start + span)


def main(argv: list[str]) -> int:
    from rocketlite.protocol.uniq_key import UniqIdGenerator  # noqa: PLC0415

    out, start, per_ms, count = argv[0], int(argv[1]), int(argv[2]), int(argv[3])
    gen = UniqIdGenerator("10.0.0.7", clock=SteppingClock(start, per_ms), tz=UTC)
    with Path(out).open("wb") as fh:
        fh.write(b"".join(bytes.fromhex(gen.next_id()) for _ in range(count)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
