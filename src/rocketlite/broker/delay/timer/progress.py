"""`config/timerProgress.json`: how far the timer service has delivered the timer topic.

    {"cursor":120,"done":[[125,3],[130,1]]}

- `cursor`: every unit of `rmq_sys_wheel_timer` queue 0 below this queue offset is done
  (delivered, rolled to the tail, or unreadable and skipped);
- `done`: the runs of done units at or above the cursor, as `[first offset, count]`, sorted and
  not touching each other. Timers are delivered in time order, not queue order, so a long timer
  holds the cursor while later, shorter ones are delivered around it.

A restart reads the queue from the cursor only, skipping the done runs, so rebuilding the
pending timers costs the units above the cursor, which the service keeps bounded by rolling
(see `service.py`). Written like the other state files (`broker/state_files.py`: temp file,
fsync, `.bak`, rename) every `timerFlushIntervalMs` when something changed, and on close.
"""

from __future__ import annotations

from pathlib import Path

from rocketlite.broker.state_files import JsonConfigFile
from rocketlite.protocol.wire import fastjson

FILE_NAME = "timerProgress.json"


def to_runs(offsets: set[int]) -> list[list[int]]:
    """Sorted offsets as `[first, count]` runs."""
    runs: list[list[int]] = []
    for off in sorted(offsets):
        if runs and runs[-1][0] + runs[-1][1] == off:
            runs[-1][1] += 1
        else:
            runs.append([off, 1])
    return runs


def from_runs(runs: object) -> set[int]:
    """The offsets of `[first, count]` runs; anything malformed raises ValueError."""
    if not isinstance(runs, list):
        raise ValueError("done: expected a list of [first, count] runs")
    out: set[int] = set()
    for run in runs:
        if not (isinstance(run, list) and len(run) == 2 and all(isinstance(v, int) for v in run)):
            raise ValueError(f"done: bad run {run!r}")
        first, count = run
        if first < 0 or count <= 0:
            raise ValueError(f"done: bad run {run!r}")
        out.update(range(first, first + count))
    return out


class TimerProgressFile(JsonConfigFile):
    """The cursor and the done offsets above it; the service owns them, this file keeps them."""

    file_name = FILE_NAME

    def __init__(self, config_dir: Path) -> None:
        super().__init__(config_dir)
        self.cursor = 0
        self.done: set[int] = set()

    def encode(self) -> str:
        done = {off for off in self.done if off >= self.cursor}
        return fastjson.dumps({"cursor": self.cursor, "done": to_runs(done)})

    def decode(self, text: str) -> None:
        data = fastjson.loads(text)
        if not isinstance(data, dict):
            raise ValueError(f"{FILE_NAME}: expected a JSON object")
        cursor = data.get("cursor", 0)
        if not isinstance(cursor, int) or cursor < 0:
            raise ValueError(f"{FILE_NAME}: bad cursor {cursor!r}")
        self.cursor = cursor
        self.done = {off for off in from_runs(data.get("done", [])) if off >= cursor}
