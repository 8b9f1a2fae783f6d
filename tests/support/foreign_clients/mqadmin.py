"""RocketMQ's admin tool, mqadmin 5.3.3 (Maven Central's rocketmq-tools), run against rocketlite.

`make test` builds it (the `mqadmin` target): tests/peers/mqadmin/pom.xml copies rocketmq-tools
5.3.3 with its runtime jars into `.clients/mqadmin/lib` and compiles our shell,
`rocketlite.peers.MqAdminShell`, which runs the sub-commands `MQAdminStartup` registers, many in
one JVM (a JVM costs about a second to start, and there are 89 sub-commands): each line written
to its stdin is one command line (JSON), each line it prints is that command's result,
with what the command printed (`Result.out`, `Result.err`) and the exception it ended with, if
any (`Result.error`). A command runs as `mqadmin` runs it: signed with the keys of
`<work>/conf/tools.yml` (`MqAdmin.use_keys`), unsigned without that file.

Everything the tool writes (its log under `user.home`, consumerStatus's files under the working
directory) stays in the test's temp directory. Without `java` or the jars the tests skip saying
why; with CI=true they fail instead.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.support.foreign_clients import process
from tests.support.foreign_clients.process import SMALL_JVM, JsonLinesDriver
from tests.support.foreign_clients.real import CLIENTS

VERSION = "5.3.3"
MQADMIN_DIR = CLIENTS / "mqadmin"
MAIN = "rocketlite.peers.MqAdminShell"
MAIN_CLASS = MQADMIN_DIR / "build" / "classes" / "rocketlite" / "peers" / "MqAdminShell.class"
COMMAND_TIMEOUT_S = 60.0


def probe() -> str | None:
    """None when mqadmin can run here, else why not."""
    if shutil.which("java") is None:
        return "java is not on the PATH (mqadmin needs Java 17)"
    if not MAIN_CLASS.is_file() or not any((MQADMIN_DIR / "lib").glob(f"rocketmq-tools-{VERSION}.jar")):
        return f"mqadmin {VERSION} (rocketmq-tools) is not built in {MQADMIN_DIR} (run `make mqadmin`)"
    return None


def require() -> None:
    process.require(probe(), "builds mqadmin")


@dataclass(frozen=True)
class Result:
    """One sub-command's run: its arguments, what it printed, how it ended."""

    args: list[str]
    out: str
    err: str
    error: dict[str, Any] | None
    ms: int

    @property
    def ok(self) -> bool:
        """Ended without an exception and printed no stack trace."""
        return self.error is None and "Exception" not in self.err

    def lines(self) -> list[str]:
        return [line for line in self.out.splitlines() if line.strip()]

    def table(self, header: str) -> list[list[str]]:
        """The whitespace-split rows after the line starting with `header` (up to a blank line)."""
        rows: list[list[str]] = []
        started = False
        for line in self.out.splitlines():
            if not started:
                started = line.startswith(header)
                continue
            if not line.strip():
                break
            rows.append(line.split())
        assert started, f"no {header!r} header in:\n{self.out}"
        return rows

    def describe(self) -> str:
        head = f"mqadmin {' '.join(self.args)}\n--- error: {self.error}"
        return f"{head}\n--- out:\n{self.out}\n--- err:\n{self.err}"


class MqAdmin(JsonLinesDriver):
    """One shell JVM; `run` sends it a command line and waits for the result, `run_all` sends
    several at once (the shell runs them in order) and waits for all."""

    def __init__(self, popen: subprocess.Popen[str], home: Path, namesrv: str) -> None:
        super().__init__("mqadmin shell", popen, home / "stderr.txt")
        self.home = home
        self.namesrv = namesrv
        self.commands: list[str] = []
        self._done: dict[int, Result] = {}
        self._ids = itertools.count(1)

    def argv(self, verb: str, *args: object, namesrv: bool = True) -> list[str]:
        """`verb args... -n <namesrv>` (no -n when `namesrv` is False)."""
        out = [verb, *(str(a) for a in args)]
        return [*out, "-n", self.namesrv] if namesrv else out

    def _send(self, argv: list[str], stop_after: float = 0.0) -> int:
        ident = next(self._ids)
        self.send({"id": ident, "args": argv, "stopAfterMs": int(stop_after * 1000)})
        return ident

    def _wait(self, ident: int) -> Result:
        while ident not in self._done:
            event = self.next_event(COMMAND_TIMEOUT_S + 30)
            assert event["event"] == "result", event
            self._done[event["id"]] = Result(
                event["args"], event.get("out", ""), event.get("err", ""), event.get("error"), event["ms"]
            )
        return self._done.pop(ident)

    def run(self, verb: str, *args: object, namesrv: bool = True, stop_after: float = 0.0) -> Result:
        """`mqadmin verb args... -n <namesrv>`, to its end; one that runs until stopped (clusterRT)
        is interrupted after `stop_after` seconds, as Ctrl-C would end it."""
        return self._wait(self._send(self.argv(verb, *args, namesrv=namesrv), stop_after))

    def run_all(self, *argvs: list[str]) -> list[Result]:
        """Several command lines (from `argv`) at once; their results in the same order."""
        idents = [self._send(a) for a in argvs]
        return [self._wait(i) for i in idents]

    def ok(self, verb: str, *args: object, namesrv: bool = True) -> Result:
        """`run`, asserting the command ended without an exception or a printed stack trace."""
        result = self.run(verb, *args, namesrv=namesrv)
        assert result.ok, result.describe()
        return result

    def use_keys(self, access_key: str | None, secret_key: str | None = None) -> None:
        """Sign the next commands with these keys (ACL 2.0: a user's name and password), written to
        `conf/tools.yml` as mqadmin reads them; None: unsigned."""
        tools = self.home / "conf" / "tools.yml"
        if access_key is None:
            tools.unlink(missing_ok=True)
            return
        tools.parent.mkdir(parents=True, exist_ok=True)
        tools.write_text(f"accessKey: {json.dumps(access_key)}\nsecretKey: {json.dumps(secret_key)}\n")


@contextlib.contextmanager
def mqadmin_shell(work: Path, namesrv: str) -> Iterator[MqAdmin]:
    """A running shell JVM pointed at `namesrv`; its files (log, consumerStatus's output) under `work`."""
    require()
    work.mkdir(parents=True, exist_ok=True)
    cmd = [
        "java",
        *SMALL_JVM,
        f"-Drocketmq.home.dir={work}",
        f"-Duser.home={work}",
        "-Drmq.logback.configurationFile=rmq.tools.logback.xml",
        "-cp",
        process.classpath(MQADMIN_DIR),
        MAIN,
        str(int(COMMAND_TIMEOUT_S * 1000)),
    ]
    env = process.env_without("ROCKETMQ_HOME", "NAMESRV_ADDR")
    shell = MqAdmin(process.spawn(cmd, work, work / "stderr.txt", env), work, namesrv)
    try:
        shell.commands = list(shell.wait_ready()["commands"])
        yield shell
    finally:
        shell.close()
