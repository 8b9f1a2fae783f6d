"""The RocketMQ Go client (github.com/apache/rocketmq-client-go/v2, pure Go) run as a scenario driver.

`make test` builds it (the `go-clients` target): tests/peers/go/ is our own Go module, pinning the
client in its go.mod/go.sum; `go build` fetches it from the module proxy into `.clients/go/gopath`
(GOPATH, GOMODCACHE and GOCACHE all live under `.clients/go/`) and writes the driver binary
`.clients/go/bin/peers`.

The driver runs one scenario per process (`peers <scenario> <namesrv> key=value...`) and prints
JSON lines, read here through `ClientProc` (tests.support.foreign_clients.real): "sent", "recv", "check",
"wait" (it reads a line from stdin before going on), "done" at the end, "fatal" with the error.
Without the built driver the tests skip saying why; with CI=true they fail instead.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from tests.support.foreign_clients import process
from tests.support.foreign_clients.real import CLIENTS, ClientProc, finish

VERSION = "rocketmq-client-go/v2 v2.1.2"
DRIVER = CLIENTS / "go" / "bin" / "peers"


def probe() -> str | None:
    """None when the Go driver can run, else why not."""
    if not os.access(DRIVER, os.X_OK):
        return f"the {VERSION} driver is not built at {DRIVER} (run `make go-clients`; it needs `go`)"
    return None


def require() -> None:
    process.require(probe(), "builds the Go client")


@dataclass
class GoClients:
    """Starts scenario processes for one test (stderr logs under `tmp`); kills leftovers."""

    tmp: Path
    procs: list[ClientProc]

    def start(
        self,
        scenario: str,
        namesrv: str,
        *,
        timeout: float = 60,
        exec_prefix: Sequence[str] = (),
        **args: object,
    ) -> ClientProc:
        """Start `scenario`; `exec_prefix` goes before the driver (`ip netns exec NS`: in a namespace)."""
        return self._start(scenario, namesrv, timeout, exec_prefix, args)

    def _start(
        self, scenario: str, namesrv: str, timeout: float, exec_prefix: Sequence[str], args: dict[str, object]
    ) -> ClientProc:
        require()
        label = f"go-{scenario}-{len(self.procs) + 1}"
        home = self.tmp / label
        home.mkdir()
        cmd = [*exec_prefix, str(DRIVER), scenario, namesrv, f"timeoutMs={int(timeout * 1000) - 5000}"]
        cmd += [f"{k}={v}" for k, v in args.items()]
        # The client keeps nothing on disk in clustering mode; HOME still points at the test's folder.
        env = {
            **os.environ,
            "HOME": str(home),
            "ROCKETMQ_GO_LOG_LEVEL": os.environ.get("ROCKETMQ_GO_LOG_LEVEL", "warn"),
        }
        stderr_path = home / "stderr.txt"
        cp = ClientProc(label, process.spawn(cmd, home, stderr_path, env), stderr_path, None)
        self.procs.append(cp)
        return cp

    def run(self, scenario: str, namesrv: str, *, timeout: float = 60, **args: object) -> ClientProc:
        """Run a scenario to its end; fails (with the driver's stderr) unless it printed "done"."""
        cp = self._start(scenario, namesrv, timeout, (), args)
        finish(cp, timeout)
        return cp


@contextlib.contextmanager
def go_clients(tmp: Path) -> Iterator[GoClients]:
    gc = GoClients(tmp, [])
    try:
        yield gc
    finally:
        for cp in gc.procs:
            cp.kill()
