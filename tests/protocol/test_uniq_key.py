"""UNIQ_KEY (`protocol.uniq_key`): Java's `MessageClientIDSetter` layout, unique all month long.

The TIME field is `(int) (now - monthStart)`: it passes 2^31 - 1 on day 24.86 of every month and
must go on counting (a clamped field made every id of the month's last week differ only by the
16-bit counter, so a process repeated ids every 65,536 messages). Ids are checked at the start,
the middle, day 28 and the last millisecond of a month and across a month's end, a million at a
time; across two processes; decoded by Java's rules; and the month start against Java's own
`Calendar` (where midnight on the 1st is skipped or repeated by a DST change).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from datetime import UTC, tzinfo
from pathlib import Path
from zoneinfo import ZoneInfo

import numpy as np
import pytest

from rocketlite.clock import ManualClock
from rocketlite.protocol.uniq_key import UniqIdGenerator, month_bounds
from tests.support.processes import child_env
from tests.support.uniq_ids import SteppingClock, decode_java, java_month_start, ms

BERLIN = ZoneInfo("Europe/Berlin")
MILLION = 1_000_000
PER_MS = 40  # ids a millisecond: a million ids span 25 s of clock
JAVA_MONTH_START = Path(__file__).resolve().parents[1] / "support" / "java" / "MonthStart.java"


def suffixes(ids: list[str]) -> np.ndarray:
    """TIME and COUNT (the last 12 hex digits) of each id, as integers."""
    return np.array([int(i[-12:], 16) for i in ids], dtype=np.uint64)


def set_clock(clock: ManualClock, when: int) -> None:
    clock.advance(when - clock.now_ms())


def make_ids(start: int, count: int = MILLION) -> list[str]:
    gen = UniqIdGenerator("192.168.7.9", clock=SteppingClock(start, PER_MS), tz=UTC)
    return [gen.next_id() for _ in range(count)]


@pytest.mark.parametrize(
    ("when", "start"),
    [
        ("start of month", ms(2026, 3, 1)),
        ("middle of month", ms(2026, 3, 16)),
        ("day 28", ms(2026, 3, 28)),  # 27 days: 2,332,800,000 ms, past 2^31 - 1
        ("last millisecond of a 31-day month", ms(2026, 4, 1) - 1),
        ("across a month boundary", ms(2026, 4, 1) - 12_000),  # 12 s before, 13 s after
    ],
)
def test_a_million_ids_are_unique(when: str, start: int) -> None:
    ids = make_ids(start)
    assert len({i[:20] for i in ids}) == 1, "one prefix (ip, pid, hash) per process"
    tails = suffixes(ids)
    assert np.unique(tails).size == MILLION, f"{when}: repeated ids"
    times = tails >> np.uint64(16)
    month_start = java_month_start(start, UTC)
    first_time = start - month_start
    assert int(times[0]) == first_time & 0xFFFF_FFFF
    if when == "day 28":
        assert int(times.min()) > 0x7FFF_FFFF, "the TIME field goes on past 2^31 - 1"


def test_the_time_field_counts_through_the_whole_month() -> None:
    """Every day of a 31-day month, its last millisecond, and the next month's first: TIME is the
    ms since the month start (no clamp at 2^31 - 1), and it restarts at 0 on the 1st."""
    clock = ManualClock(ms(2026, 1, 1))
    gen = UniqIdGenerator("10.0.0.1", clock=clock, tz=UTC)
    for day in range(31):
        set_clock(clock, ms(2026, 1, 1) + day * 86_400_000 + 12_345)
        assert int(gen.next_id()[20:28], 16) == day * 86_400_000 + 12_345
    set_clock(clock, ms(2026, 2, 1) - 1)
    assert gen.next_id()[20:28] == f"{31 * 86_400_000 - 1:08X}"  # 0x9FA523FF
    set_clock(clock, ms(2026, 2, 1))
    assert gen.next_id()[20:28] == "00000000"


def test_a_clock_set_back_behaves_as_java() -> None:
    """Java keeps the newer month start; a step back of less than 1,000 s before it gives 0, a
    longer one wraps like the int it is."""
    clock = ManualClock(ms(2026, 5, 1) + 10)
    gen = UniqIdGenerator("10.0.0.1", clock=clock, tz=UTC)
    assert gen.next_id()[20:28] == "0000000A"
    set_clock(clock, ms(2026, 5, 1) - 999_999)
    assert gen.next_id()[20:28] == "00000000"
    set_clock(clock, ms(2026, 5, 1) - 1_000_000)
    assert gen.next_id()[20:28] == f"{-1_000_000 & 0xFFFF_FFFF:08X}"


def test_ids_of_two_processes_are_unique(tmp_path: Path) -> None:
    """Two producer processes on the same clock, at the same instants, across a month's end."""
    start = ms(2026, 4, 1) - 12_000
    outs = [tmp_path / f"ids-{n}.bin" for n in range(2)]
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "tests.support.uniq_ids", str(out), str(start), str(PER_MS), str(MILLION)],
            cwd=Path(__file__).resolve().parents[2],
            env=child_env(),
        )
        for out in outs
    ]
    assert [p.wait(120) for p in procs] == [0, 0]
    raw = [np.frombuffer(out.read_bytes(), dtype=np.uint8).reshape(-1, 16) for out in outs]
    assert [r.shape[0] for r in raw] == [MILLION, MILLION]
    prefixes = [bytes(r[0, :10]) for r in raw]
    assert prefixes[0] != prefixes[1], "pid and class-loader hash tell the processes apart"
    assert bytes(raw[0][0, 10:]) == bytes(raw[1][0, 10:]), "the same TIME and COUNT in both"
    both = np.concatenate(raw).view(np.dtype((np.void, 16)))
    assert np.unique(both).size == 2 * MILLION


@pytest.mark.parametrize("tz", [UTC, BERLIN], ids=["UTC", "Europe/Berlin"])
@pytest.mark.parametrize(
    "made_at",
    [
        ms(2026, 3, 1),
        ms(2026, 3, 16, 13),
        ms(2026, 3, 28, 23),
        ms(2026, 4, 1) - 1,
        ms(2026, 10, 31, 23),  # the day Berlin leaves DST
    ],
)
def test_java_decodes_our_ids(tz: tzinfo, made_at: int) -> None:
    """`getIPFromID`, `getPidFromID` and `getNearlyTimeFromID` give back what we put in: the
    address, the pid, a 31-bit class-loader hash, the counter and the time it was made."""
    gen = UniqIdGenerator("172.16.5.4", clock=ManualClock(made_at), tz=tz)
    first, second = gen.next_id(), gen.next_id()
    for later in (1, 60_000, 3 * 86_400_000):  # read a moment later, or days later (next month too)
        view = decode_java(first, made_at + later, tz)
        assert view.ip == bytes([172, 16, 5, 4])
        assert view.pid == os.getpid() & 0xFFFF
        assert 0 < view.class_hash <= 0x7FFF_FFFF
        assert view.nearly_time_ms == made_at
    assert (
        decode_java(second, made_at + 1, tz).counter
        == (decode_java(first, made_at + 1, tz).counter + 1) & 0xFFFF
    )


def test_ipv6_and_fake_ip() -> None:
    v6 = UniqIdGenerator("2001:db8::1", clock=ManualClock(ms(2026, 6, 2)), tz=UTC).next_id()
    assert len(v6) == 56 and v6.startswith("20010DB8")
    assert decode_java(v6, ms(2026, 6, 3), UTC).nearly_time_ms == ms(2026, 6, 2)
    fake = UniqIdGenerator("not-an-ip", clock=ManualClock(0x1234_5678_9ABC), tz=UTC).next_id()
    assert fake.startswith("56789ABC")  # createFakeIP: the clock's low 4 bytes


# Months whose first midnight a DST change skips (Asuncion, 2017-10-01 00:00 -> 01:00) or repeats
# (Havana, 2020-11-01 01:00 -> 00:00), and plain ones; Java's Calendar is the judge.
ZONE_CASES = {
    "America/Asuncion": [ms(2017, 9, 15, 12), ms(2017, 10, 15, 12), ms(2017, 11, 1, 3) + 1_800_000],
    "America/Havana": [ms(2020, 10, 20), ms(2020, 11, 1, 4) + 100_000, ms(2020, 11, 15)],
    "Europe/Berlin": [ms(2026, 3, 31, 12), ms(2026, 10, 31, 12), ms(2026, 12, 31, 23)],
    "UTC": [ms(2026, 2, 14), ms(2024, 2, 29, 23)],
}


def _java_bounds(zone: str, instants: list[int]) -> list[tuple[int, int]]:
    java = shutil.which("java")
    if java is None:
        pytest.skip("no Java runtime on the PATH")
    out = subprocess.run(
        [java, f"-Duser.timezone={zone}", str(JAVA_MONTH_START), *map(str, instants)],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout
    return [(int(a), int(b)) for a, b in (line.split() for line in out.splitlines())]


@pytest.mark.parametrize("zone", sorted(ZONE_CASES))
def test_month_start_matches_java_calendar(zone: str) -> None:
    instants = ZONE_CASES[zone]
    java = _java_bounds(zone, instants)
    assert [month_bounds(t, ZoneInfo(zone)) for t in instants] == java
    # The process's own zone (tz=None) is the TZ it runs under, as Java's default zone is.
    code = "import sys; from rocketlite.protocol.uniq_key import month_bounds as b; " + (
        "print(*(' '.join(map(str, b(int(t)))) for t in sys.argv[1:]), sep='\\n')"
    )
    local = subprocess.run(
        [sys.executable, "-c", code, *map(str, instants)],
        env=child_env({"TZ": zone}),
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert [tuple(map(int, line.split())) for line in local.splitlines()] == java
