"""The Java RocketMQ clients (Maven Central jars) run as scenario drivers against rocketlite.

`make test` builds them (the `java-clients` target): tests/peers/java/pom.xml compiles our drivers
against each client line and copies its jars under `.clients/java/<line>/`:

- `client4`: org.apache.rocketmq:rocketmq-client 4.9.8 + rocketmq-acl, main `rocketlite.peers.Scenarios`
  (and `rocketlite.peers.RequestReply`: either half of request-reply alone, `main=REQUEST_REPLY`;
  `rocketlite.peers.KeepSending`: a producer that sends until told to stop, `main=KEEP_SENDING`);
- `client5`: org.apache.rocketmq:rocketmq-client 5.3.3, main `rocketlite.peers.Scenarios5`;
- `grpc5`: org.apache.rocketmq:rocketmq-client-java 5.2.0 (the 5.x gRPC client), main
  `rocketlite.peers.Scenarios5Grpc`; its second argument is the gRPC endpoint, not a name server.

The remoting clients log under `rocketmq.client.logRoot`, the gRPC client under `rocketmq.log.root`:
both are the JVM's own `logs/` folder in the test's temp dir.

A driver runs one scenario per JVM (`Scenarios <scenario> <namesrv> key=value...`) and prints JSON
lines, read here through `ClientProc` (tests.support.foreign_clients.real): "sent", "recv", "wait" (it
reads a line from stdin before going on), "done" at the end, "fatal" with the exception. A JVM
starts in under a second, so each test runs its own. Without `java` or the built drivers, the tests
skip saying why; with CI=true they fail instead (`make test` must have built them).
"""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from tests.support.foreign_clients import process
from tests.support.foreign_clients.process import SMALL_JVM
from tests.support.foreign_clients.real import CLIENTS, ClientProc, answer, events, finish, received

__all__ = ["JavaClients", "answer", "events", "finish", "java_clients", "probe", "received", "require"]

JAVA_CLIENTS = CLIENTS / "java"
MAINS = {
    "client4": "rocketlite.peers.Scenarios",
    "client5": "rocketlite.peers.Scenarios5",
    "grpc5": "rocketlite.peers.Scenarios5Grpc",
}
REQUEST_REPLY = "rocketlite.peers.RequestReply"  # a second driver of client4
KEEP_SENDING = "rocketlite.peers.KeepSending"  # client4: sends through a failover (tests/failover)
VERSIONS = {
    "client4": "rocketmq-client 4.9.8",
    "client5": "rocketmq-client 5.3.3",
    "grpc5": "rocketmq-client-java 5.2.0",
}

_why: dict[str, str | None] = {}


def probe(line: str) -> str | None:
    """None when the driver of `line` can run, else why not."""
    if line not in _why:
        main_class = JAVA_CLIENTS / line / "build" / "classes" / (MAINS[line].replace(".", "/") + ".class")
        lib = JAVA_CLIENTS / line / "lib"
        why = None
        if shutil.which("java") is None:
            why = "java is not on the PATH (the Java client tests need Java 17)"
        elif not main_class.is_file() or not any(lib.glob("rocketmq-client-*.jar")):
            why = (
                f"the {VERSIONS[line]} driver is not built in {JAVA_CLIENTS / line} (run `make java-clients`)"
            )
        _why[line] = why
    return _why[line]


def require(line: str) -> None:
    process.require(probe(line), "builds the Java clients")


@dataclass
class JavaClients:
    """Starts scenario JVMs for one test (logs and client state under `tmp`); kills leftovers."""

    tmp: Path
    procs: list[ClientProc]

    def start(
        self,
        line: str,
        scenario: str,
        namesrv: str,
        *,
        main: str | None = None,
        jvm: Mapping[str, object] | None = None,
        exec_prefix: Sequence[str] = (),
        **args: object,
    ) -> ClientProc:
        """Start `scenario` of the line's driver (or of the driver class `main`, another of the line);
        `jvm` adds system properties (`-Dkey=value`), e.g. the client's `tls.*` settings;
        `exec_prefix` goes before `java` (`ip netns exec NS`: the client in a network namespace)."""
        require(line)
        label = f"{line}-{scenario}-{len(self.procs) + 1}"
        home = self.tmp / label  # the clients keep logs and local (broadcast) offsets under user.home
        home.mkdir()
        cmd = [
            *exec_prefix,
            "java",
            *SMALL_JVM,  # one client per JVM
            f"-Duser.home={home}",
            f"-Drocketmq.client.logRoot={home / 'logs'}",
            f"-Drocketmq.log.root={home / 'logs'}",
            *(f"-D{k}={v}" for k, v in (jvm or {}).items()),
            "-cp",
            process.classpath(JAVA_CLIENTS / line),
            main or MAINS[line],
            scenario,
            namesrv,
            *(f"{k}={v}" for k, v in args.items()),
        ]
        stderr_path = home / "stderr.txt"
        cp = ClientProc(label, process.spawn(cmd, home, stderr_path), stderr_path, home / "logs")
        self.procs.append(cp)
        return cp

    def run(
        self,
        line: str,
        scenario: str,
        namesrv: str,
        *,
        timeout: float = 90,
        main: str | None = None,
        jvm: Mapping[str, object] | None = None,
        **args: object,
    ) -> ClientProc:
        """Run a scenario to its end; fails (with the driver's stderr and log) unless it printed "done"."""
        cp = self.start(
            line,
            scenario,
            namesrv,
            main=main,
            jvm=jvm,
            exec_prefix=(),  # a run's scenario arguments may include the driver's own `prefix`
            timeoutMs=int(timeout * 1000) - 5000,
            **args,
        )
        finish(cp, timeout)
        return cp


@contextlib.contextmanager
def java_clients(tmp: Path) -> Iterator[JavaClients]:
    jc = JavaClients(tmp, [])
    try:
        yield jc
    finally:
        for cp in jc.procs:
            cp.kill()
