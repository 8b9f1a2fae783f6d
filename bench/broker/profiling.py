"""Optional py-spy recording of our broker during each of its phases, and a summary of the hot
spots."""

from __future__ import annotations

import contextlib
import math
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from bench.broker.servers import Child


# -- profiling ----------------------------------------------------------------------------------
def find_py_spy() -> str | None:
    local = Path(sys.executable).parent / "py-spy"
    return str(local) if local.exists() else shutil.which("py-spy")


class Profiler:
    """py-spy record of the broker during each of our phases (raw = collapsed stacks)."""

    def __init__(self, binary: str | None, directory: Path | None, extra: tuple[str, ...] = ()) -> None:
        self.binary = binary
        self.directory = directory
        self.extra = extra
        self.current: Child | None = None
        self.outputs: list[Path] = []

    @contextlib.contextmanager
    def recording(self, broker: Child, name: str, seconds: float) -> Iterator[None]:
        if self.binary is None or self.directory is None:
            yield
            return
        output = self.directory / f"{name}.txt"
        argv = [
            self.binary, "record", "--pid", str(broker.pid), "--rate", "250", "--format", "raw",
            "--duration", str(max(1, math.ceil(seconds))), "--output", str(output), "--threads",
            *self.extra,
        ]  # fmt: skip
        if "--native" not in self.extra:  # native stacks need the process paused per sample
            argv.append("--nonblocking")
        child = Child("py-spy", argv, self.directory / f"{name}.log")
        time.sleep(0.3)  # attach before the load starts
        try:
            yield
        finally:
            with contextlib.suppress(subprocess.TimeoutExpired):
                child.proc.wait(timeout=seconds + 15)
            child.stop(5)
            if output.exists():
                self.outputs.append(output)


def summarize_profile(path: Path, top: int = 12) -> list[str]:
    """Samples per thread, then the top functions (self and inclusive share of that thread's
    samples) of the two busiest threads, from a py-spy raw (collapsed stacks, --threads) profile."""
    threads: dict[str, int] = {}
    self_count: dict[str, dict[str, int]] = {}
    incl_count: dict[str, dict[str, int]] = {}
    for line in path.read_text(errors="replace").splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        n = int(count_text)
        frames = stack.split(";")
        thread = "all"
        if frames[0].startswith("thread ("):
            thread = frames[0].split(": ", 1)[-1]
            frames = frames[1:] or ["(no Python frame) (?)"]
        names = [_frame_name(f) for f in frames]
        threads[thread] = threads.get(thread, 0) + n
        own = self_count.setdefault(thread, {})
        own[names[-1]] = own.get(names[-1], 0) + n
        incl = incl_count.setdefault(thread, {})
        for name in set(names):
            incl[name] = incl.get(name, 0) + n
    if not threads:
        return [f"{path.name}: no samples"]
    busiest = sorted(threads.items(), key=lambda kv: -kv[1])
    lines = [f"{path.name}: samples per thread: " + ", ".join(f"{t} {n}" for t, n in busiest)]
    for thread, total in busiest[:2]:
        lines.append(f"  {thread} ({total} samples): self% incl% function")
        for name, n in sorted(self_count[thread].items(), key=lambda kv: -kv[1])[:top]:
            lines.append(f"    {n / total:6.1%} {incl_count[thread][name] / total:6.1%}  {name}")
    return lines


def _frame_name(frame: str) -> str:
    """`func (path/to/file.py:123)` -> `file.py:func` (line numbers dropped to aggregate)."""
    name, _, where = frame.partition(" (")
    file = where.rsplit(":", 1)[0].rstrip(")")
    marker = "site-packages/"
    if "rocketlite/" in file:
        file = "rocketlite/" + file.split("rocketlite/", 1)[1]
    elif marker in file:
        file = file.split(marker, 1)[1]
    else:
        file = Path(file).name
    return f"{file}:{name}"
