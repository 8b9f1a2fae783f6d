"""`LogProgress`: a line every interval while a scan runs, one at the end, figures a person reads."""

from __future__ import annotations

import logging

import pytest

from rocketlite.clock import ManualClock
from rocketlite.progress import LogProgress, human_bytes, human_rate

MiB = 1024 * 1024
GiB = 1024 * MiB


def test_a_line_every_interval_and_one_at_the_end(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="rocketlite.test.progress")
    clock = ManualClock()
    watcher = LogProgress(logging.getLogger("rocketlite.test.progress"), "recovering commit log", clock=clock)
    watcher(64 * MiB, GiB)
    clock.advance(1000)
    watcher(128 * MiB, GiB)  # within the first 2 s: nothing yet
    assert caplog.messages == []
    clock.advance(1000)
    watcher(640 * MiB, GiB)
    clock.advance(500)
    watcher(700 * MiB, GiB)  # the next line is due 2 s after the last one
    clock.advance(1500)
    watcher(800 * MiB, GiB)
    clock.advance(1000)
    watcher.finish("valid data ends at offset 42")
    assert caplog.messages == [
        "recovering commit log: 640.0 MiB of 1.0 GiB, 335.5 MB/s",
        "recovering commit log: 800.0 MiB of 1.0 GiB, 209.7 MB/s",
        "recovering commit log: valid data ends at offset 42, 800.0 MiB of 1.0 GiB, 167.8 MB/s in 5.00 s",
    ]


def test_a_scan_that_ends_at_once_says_one_thing(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="rocketlite.test.progress")
    watcher = LogProgress(logging.getLogger("rocketlite.test.progress"), "store verify", clock=ManualClock())
    watcher(100, 1000)
    watcher.finish()
    assert caplog.messages == ["store verify: done, 100 B of 1000 B, - in 0.00 s"]


def test_figures() -> None:
    assert [human_bytes(n) for n in (0, 1023, 1536, 8 * MiB + 60_000, 3 * GiB, 5 * 1024 * GiB)] == [
        "0 B", "1023 B", "1.5 KiB", "8.1 MiB", "3.0 GiB", "5.0 TiB"
    ]  # fmt: skip
    assert [human_rate(r) for r in (1.5e6, 2.5e9)] == ["1.5 MB/s", "2.5 GB/s"]
