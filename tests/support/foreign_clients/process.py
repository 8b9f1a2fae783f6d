"""What the drivers of foreign clients and tools share: the rule for a missing one, and their processes.

- `require(why, built_by)`: a missing driver skips its tests saying why; with CI=true it fails
  instead (`make test` must have built it, `built_by` says which step does).
- `spawn`: a driver process with piped stdin/stdout (text) and its stderr in a file.
- `JsonLinesDriver`: one long-lived driver (mqadmin's shell, the dashboard driver) that answers
  JSON lines written to its stdin with JSON lines on its stdout; a thread pumps those into a queue,
  the first one is its "ready" line, and closing its stdin ends it.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import subprocess
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

# Small, quick JVMs on 2 shared cores: a small heap, serial GC, C1 only.
SMALL_JVM = ["-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Dfile.encoding=UTF-8"]
READY_TIMEOUT_S = 120.0


def require(why: str | None, built_by: str) -> None:
    """Nothing when `why` is None (the driver can run); else skip, or fail with CI=true."""
    if why is None:
        return
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{why} (CI=true: `make test` {built_by})")
    pytest.skip(why)


def classpath(base: Path) -> str:
    """The classpath of a driver built by Maven under `base`: its classes and its jars."""
    return os.pathsep.join([str(base / "build" / "classes"), str(base / "lib" / "*")])


def env_without(*names: str) -> dict[str, str]:
    """This process's environment less `names` (RocketMQ's tools read ROCKETMQ_HOME, NAMESRV_ADDR)."""
    return {k: v for k, v in os.environ.items() if k not in names}


def spawn(
    cmd: Sequence[str], cwd: Path, stderr_path: Path, env: Mapping[str, str] | None = None
) -> subprocess.Popen[str]:
    """`cmd` with piped stdin and stdout (text), its stderr written to `stderr_path`."""
    with stderr_path.open("w") as err:
        return subprocess.Popen(
            list(cmd), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, text=True, cwd=cwd, env=env
        )


class JsonLinesDriver:
    """A driver process talking JSON lines; `what` names it in failures."""

    def __init__(self, what: str, popen: subprocess.Popen[str], stderr_path: Path) -> None:
        self.what = what
        self.popen = popen
        self.stderr_path = stderr_path
        self._events: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self._pump_thread = threading.Thread(target=self._pump, name=f"{what}-stdout", daemon=True)
        self._pump_thread.start()

    def _pump(self) -> None:
        assert self.popen.stdout is not None
        for line in self.popen.stdout:
            if line.startswith("{"):
                self._events.put(json.loads(line))
        self._events.put(None)

    def send(self, request: dict[str, Any]) -> None:
        assert self.popen.stdin is not None
        self.popen.stdin.write(json.dumps(request) + "\n")
        self.popen.stdin.flush()

    def next_event(self, timeout: float) -> dict[str, Any]:
        """The next JSON line; fails (with the driver's stderr) on silence or exit."""
        try:
            event = self._events.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(
                f"{self.what} gave no answer within {timeout:.0f}s\n{self.stderr()}"
            ) from None
        if event is None:
            raise AssertionError(f"{self.what} exited ({self.popen.poll()})\n{self.stderr()}")
        return event

    def wait_ready(self, timeout: float = READY_TIMEOUT_S) -> dict[str, Any]:
        """The driver's first line, which must be its "ready" event."""
        ready = self.next_event(timeout)
        assert ready["event"] == "ready", ready
        return ready

    def stderr(self) -> str:
        path = self.stderr_path
        return path.read_text(errors="replace")[-4000:] if path.is_file() else ""

    def close(self) -> None:
        """End of input ends the driver; killed if it does not end within 30 s."""
        if self.popen.poll() is None:
            assert self.popen.stdin is not None
            with contextlib.suppress(OSError):
                self.popen.stdin.close()
            try:
                self.popen.wait(30)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait(10)
        self._pump_thread.join(10)  # it ends at the pipe's end of file
        if self.popen.stdout is not None:
            self.popen.stdout.close()
