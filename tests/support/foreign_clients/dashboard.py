"""The admin requests of rocketmq-dashboard's services, sent by RocketMQ 5.3.3's own MQAdminExt.

The dashboard itself cannot be fetched (Maven Central holds no rocketmq-dashboard jar; see
docs/operations/dashboard.md), so `make test` builds a driver instead (the `dashboard` target):
tests/peers/dashboard/pom.xml copies rocketmq-tools 5.3.3 with its runtime jars into
`.clients/dashboard/lib` and compiles `rocketlite.peers.DashboardDriver`, which calls the same
`DefaultMQAdminExt` methods as each of the dashboard's service methods. One JVM serves a whole
test module: `call("topic.stats", topic=...)` writes one JSON line to its stdin and returns the
`result` of the line it answers, or raises `DriverError` with the exception the call ended with.

The driver's RocketMQ log goes under the test's temp directory (`user.home`). Without `java` or
the jars the tests skip saying why; with CI=true they fail instead.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import queue
import shutil
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.foreign_clients.real import CLIENTS

VERSION = "5.3.3"
DASHBOARD_DIR = CLIENTS / "dashboard"
MAIN = "rocketlite.peers.DashboardDriver"
MAIN_CLASS = DASHBOARD_DIR / "build" / "classes" / "rocketlite" / "peers" / "DashboardDriver.class"
JVM_FLAGS = ["-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Dfile.encoding=UTF-8"]
CALL_TIMEOUT_S = 60.0


def probe() -> str | None:
    """None when the driver can run here, else why not."""
    if shutil.which("java") is None:
        return "java is not on the PATH (the dashboard driver needs Java 17)"
    if not MAIN_CLASS.is_file() or not any((DASHBOARD_DIR / "lib").glob(f"rocketmq-tools-{VERSION}.jar")):
        built = f"the dashboard driver (rocketmq-tools {VERSION}) is not built in {DASHBOARD_DIR}"
        return f"{built} (run `make dashboard`)"
    return None


def require() -> None:
    why = probe()
    if why is None:
        return
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{why} (CI=true: `make test` builds the dashboard driver)")
    pytest.skip(why)


class DriverError(AssertionError):
    """A call that ended with an exception: `error` holds its class, message, causes and, when the
    broker or name server answered with one, `responseCode` and `remark`."""

    def __init__(self, call: str, error: dict[str, Any]) -> None:
        super().__init__(f"{call}: {error}")
        self.call = call
        self.error = error

    @property
    def code(self) -> int | None:
        code = self.error.get("responseCode")
        return int(code) if code is not None else None


class Dashboard:
    """The driver JVM: `call` sends one service call and waits for its answer."""

    def __init__(self, popen: subprocess.Popen[str], home: Path) -> None:
        self.popen = popen
        self.home = home
        self.calls: list[str] = []
        self.timings: dict[str, int] = {}
        self._events: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self._ids = itertools.count(1)
        self._pump_thread = threading.Thread(target=self._pump, name="dashboard-stdout", daemon=True)
        self._pump_thread.start()

    def _pump(self) -> None:
        assert self.popen.stdout is not None
        for line in self.popen.stdout:
            if line.startswith("{"):
                self._events.put(json.loads(line))
        self._events.put(None)

    def next_event(self, timeout: float) -> dict[str, Any]:
        try:
            event = self._events.get(timeout=timeout)
        except queue.Empty:
            silent = f"dashboard driver gave no answer within {timeout:.0f}s"
            raise AssertionError(f"{silent}\n{self.stderr()}") from None
        if event is None:
            raise AssertionError(f"dashboard driver exited ({self.popen.poll()})\n{self.stderr()}")
        return event

    def stderr(self) -> str:
        path = self.home / "stderr.txt"
        return path.read_text(errors="replace")[-4000:] if path.is_file() else ""

    def call(self, name: str, **args: Any) -> Any:
        """One dashboard service call (a name of `calls`) with its arguments; its result."""
        ident = next(self._ids)
        assert self.popen.stdin is not None
        self.popen.stdin.write(json.dumps({"id": ident, "call": name, "args": args}) + "\n")
        self.popen.stdin.flush()
        event = self.next_event(CALL_TIMEOUT_S)
        assert event["event"] == "result" and event["id"] == ident, event
        self.timings[name] = max(self.timings.get(name, 0), int(event["ms"]))
        if event.get("error") is not None:
            raise DriverError(name, event["error"])
        return event["result"]

    def close(self) -> None:
        if self.popen.poll() is None:
            assert self.popen.stdin is not None
            with contextlib.suppress(OSError):
                self.popen.stdin.close()
            try:
                self.popen.wait(30)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait(10)
        self._pump_thread.join(10)
        if self.popen.stdout is not None:
            self.popen.stdout.close()


@contextlib.contextmanager
def dashboard_driver(work: Path, namesrv: str) -> Iterator[Dashboard]:
    """A running driver JVM with its admin client started against `namesrv`; its files under `work`."""
    require()
    work.mkdir(parents=True, exist_ok=True)
    classpath = os.pathsep.join([str(DASHBOARD_DIR / "build" / "classes"), str(DASHBOARD_DIR / "lib" / "*")])
    cmd = ["java", *JVM_FLAGS, f"-Duser.home={work}", "-cp", classpath, MAIN, namesrv]
    env = {k: v for k, v in os.environ.items() if k not in ("ROCKETMQ_HOME", "NAMESRV_ADDR")}
    with (work / "stderr.txt").open("w") as err:
        popen = subprocess.Popen(
            cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, text=True, cwd=work, env=env
        )
    driver = Dashboard(popen, work)
    try:
        ready = driver.next_event(120)
        assert ready["event"] == "ready", ready
        driver.calls = list(ready["calls"])
        yield driver
    finally:
        driver.close()
