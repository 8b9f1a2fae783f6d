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
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tests.support.foreign_clients import process
from tests.support.foreign_clients.process import SMALL_JVM, JsonLinesDriver
from tests.support.foreign_clients.real import CLIENTS

VERSION = "5.3.3"
DASHBOARD_DIR = CLIENTS / "dashboard"
MAIN = "rocketlite.peers.DashboardDriver"
MAIN_CLASS = DASHBOARD_DIR / "build" / "classes" / "rocketlite" / "peers" / "DashboardDriver.class"
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
    process.require(probe(), "builds the dashboard driver")


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


class Dashboard(JsonLinesDriver):
    """The driver JVM: `call` sends one service call and waits for its answer."""

    def __init__(self, popen: subprocess.Popen[str], home: Path) -> None:
        super().__init__("dashboard driver", popen, home / "stderr.txt")
        self.home = home
        self.calls: list[str] = []
        self.timings: dict[str, int] = {}
        self._ids = itertools.count(1)

    def call(self, name: str, **args: Any) -> Any:
        """One dashboard service call (a name of `calls`) with its arguments; its result."""
        ident = next(self._ids)
        self.send({"id": ident, "call": name, "args": args})
        event = self.next_event(CALL_TIMEOUT_S)
        assert event["event"] == "result" and event["id"] == ident, event
        self.timings[name] = max(self.timings.get(name, 0), int(event["ms"]))
        if event.get("error") is not None:
            raise DriverError(name, event["error"])
        return event["result"]


@contextlib.contextmanager
def dashboard_driver(work: Path, namesrv: str, keys: tuple[str, str] | None = None) -> Iterator[Dashboard]:
    """A running driver JVM with its admin client started against `namesrv`; its files under `work`.
    With `keys` (access key, secret key) the admin client signs every request with them, as the
    dashboard's does when `rocketmq.config.accessKey` / `secretKey` are set (ACL 2.0: a user)."""
    require()
    work.mkdir(parents=True, exist_ok=True)
    cmd = ["java", *SMALL_JVM, f"-Duser.home={work}", "-cp", process.classpath(DASHBOARD_DIR), MAIN, namesrv]
    cmd += list(keys or ())
    env = process.env_without("ROCKETMQ_HOME", "NAMESRV_ADDR")
    driver = Dashboard(process.spawn(cmd, work, work / "stderr.txt", env), work)
    try:
        driver.calls = list(driver.wait_ready()["calls"])
        yield driver
    finally:
        driver.close()
