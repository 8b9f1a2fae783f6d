"""RocketMQ's own name server and broker (5.3.3, Maven Central jars) as processes beside rocketlite.

`make test` fetches them (the `rocketmq-peer` target): tests/peers/rocketmq/pom.xml copies
rocketmq-namesrv and rocketmq-broker with their runtime jars into `.clients/rocketmq/lib`. Each
server is one JVM started from those jars, as RocketMQ's `bin/mqnamesrv` / `bin/mqbroker` would,
but with a small heap, loopback ports and everything under one work directory:

- `-Drocketmq.home.dir` and `-Duser.home` point into the work directory (logs go to
  `<home>/logs/rocketmqlogs/`), `-Drmq.logback.configurationFile` picks the server's own logback
  file out of its jar;
- Java 17 needs the `--add-opens` below (the store casts to `sun.nio.ch.DirectBuffer`);
- a broker's store settings are the ones rocketlite's test stores use (`PEER_STORE`), so a store
  written by one opens in the other.

A JVM is ready when it prints RocketMQ's "boot success" line; the broker registers with its name
server before it prints it, so routes are there at once. `stop` is SIGTERM, RocketMQ's clean
shutdown (its hooks flush the store and remove the abort file). Start-up takes a few seconds (7 s
for both on an idle 2-core machine), so tests share a cluster where they can.

Without `java` or the jars the tests skip saying why; with CI=true they fail instead.
"""

from __future__ import annotations

import contextlib
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.foreign_clients import process
from tests.support.foreign_clients.real import CLIENTS
from tests.support.ports import broker_port, free_port

VERSION = "5.3.3"
PEER_LIB = CLIENTS / "rocketmq" / "lib"
NAMESRV_MAIN = "org.apache.rocketmq.namesrv.NamesrvStartup"
BROKER_MAIN = "org.apache.rocketmq.broker.BrokerStartup"
# What RocketMQ's own scripts pass on JDK >= 9, for its direct-buffer and reflection use.
JAVA17_OPENS = [
    "--add-opens=java.base/java.lang=ALL-UNNAMED",
    "--add-opens=java.base/java.nio=ALL-UNNAMED",
    "--add-opens=java.base/java.util=ALL-UNNAMED",
    "--add-opens=java.base/jdk.internal.ref=ALL-UNNAMED",
    "--add-exports=java.base/sun.nio.ch=ALL-UNNAMED",
]
# Small, quick JVMs on 2 shared cores: serial GC, C1 only, no pre-touch.
JVM_COMMON = [
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
    "-XX:-OmitStackTraceInFastThrow",
    "-Dfile.encoding=UTF-8",
]
NAMESRV_HEAP = ["-Xms64m", "-Xmx256m"]
BROKER_HEAP = ["-Xms128m", "-Xmx512m", "-XX:MaxDirectMemorySize=256m"]
# A JVM stopped by SIGTERM exits 128 + 15 once its shutdown hooks (RocketMQ's clean stop) ran.
CLEAN_EXIT = (0, 143)
# JVM start-up on a loaded 2-core machine can take far longer than on an idle one.
BOOT_TIMEOUT = 180.0

# The store layout both brokers use (rocketlite's `embedded()` sizes): RocketMQ refuses to load a
# commit-log file whose length is not mappedFileSizeCommitLog, and the index and consume-queue
# files are mapped at the configured sizes.
PEER_STORE: dict[str, int] = {
    "mappedFileSizeCommitLog": 64 * 1024 * 1024,
    "mappedFileSizeConsumeQueue": 30_000 * 20,
    "maxHashSlotNum": 50_000,
    "maxIndexNum": 200_000,
}
# Level 1 is 1 s as in RocketMQ; the rest short, so retries (level 3 + reconsumeTimes) are quick.
DELAY_LEVELS = " ".join(["1s"] * 18)
# Settings that keep a loaded test machine from answering "broker busy" (RocketMQ's flow control
# counts the time a send waits in its queue and the time the put lock is held).
PEER_BROKER: dict[str, str] = {
    "brokerClusterName": "DefaultCluster",
    "brokerId": "0",
    "brokerRole": "ASYNC_MASTER",
    "flushDiskType": "ASYNC_FLUSH",
    "brokerIP1": "127.0.0.1",
    "bindAddress": "127.0.0.1",
    "autoCreateTopicEnable": "true",
    "autoCreateSubscriptionGroup": "true",
    "messageDelayLevel": DELAY_LEVELS,
    "enablePropertyFilter": "true",
    "brokerFastFailureEnable": "false",
    "waitTimeMillsInSendQueue": "10000",
    "osPageCacheBusyTimeOutMills": "10000",
    "diskMaxUsedSpaceRatio": "95",
    "mappedFileSizeTimerLog": str(4 * 1024 * 1024),
}


def probe() -> str | None:
    """None when the peer can run here, else why not."""
    if shutil.which("java") is None:
        return "java is not on the PATH (the RocketMQ peer needs Java 17)"
    if not any(PEER_LIB.glob(f"rocketmq-broker-{VERSION}.jar")) or not any(
        PEER_LIB.glob(f"rocketmq-namesrv-{VERSION}.jar")
    ):
        return f"RocketMQ {VERSION} namesrv/broker jars are not in {PEER_LIB} (run `make rocketmq-peer`)"
    return None


def require() -> None:
    process.require(probe(), "fetches the RocketMQ peer")


def _props(path: Path, props: Mapping[str, object]) -> Path:
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    return path


@dataclass
class JavaServer:
    """One RocketMQ JVM: its process, console file and work directory."""

    what: str
    popen: subprocess.Popen[bytes]
    console: Path
    home: Path
    port: int

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.port}"

    def wait_booted(self, marker: str, timeout: float = BOOT_TIMEOUT) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if marker in self.console.read_text(errors="replace"):
                return
            if self.popen.poll() is not None:
                raise AssertionError(f"{self.what} exited with {self.popen.returncode}\n{self.diagnostics()}")
            time.sleep(0.1)
        raise AssertionError(f"{self.what} did not boot within {timeout:.0f}s\n{self.diagnostics()}")

    def diagnostics(self, lines: int = 30) -> str:
        out = [f"--- {self.console} (tail)", *self.console.read_text(errors="replace").splitlines()[-lines:]]
        logs = self.home / "logs" / "rocketmqlogs"
        for name in ("broker.log", "store.log", "namesrv.log"):
            path = logs / name
            if path.is_file():
                out += [f"--- {path} (tail)", *path.read_text(errors="replace").splitlines()[-lines:]]
        return "\n".join(out)

    def stop(self, timeout: float = 60.0) -> int:
        """SIGTERM: RocketMQ's shutdown hook stops the broker cleanly (store flushed, abort removed)."""
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
            try:
                return self.popen.wait(timeout)
            except subprocess.TimeoutExpired:
                self.popen.kill()
        return self.popen.wait(10)

    def kill9(self) -> None:
        if self.popen.poll() is None:
            self.popen.kill()
        self.popen.wait(10)


def _java(
    what: str, work: Path, main: str, heap: list[str], logback: str, args: list[str], port: int
) -> JavaServer:
    require()
    work.mkdir(parents=True, exist_ok=True)
    home = work / "home"
    home.mkdir(exist_ok=True)
    console = work / "console.txt"
    cmd = [
        "java",
        *heap,
        *JVM_COMMON,
        *JAVA17_OPENS,
        f"-Drocketmq.home.dir={home}",
        f"-Duser.home={home}",
        f"-Drmq.logback.configurationFile={logback}",
        "-cp",
        str(PEER_LIB / "*"),
        main,
        *args,
    ]
    env = process.env_without("ROCKETMQ_HOME")
    with console.open("wb") as out:
        popen = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, cwd=work, env=env)
    return JavaServer(what, popen, console, home, port)


def start_namesrv(work: Path) -> JavaServer:
    """RocketMQ's name server on a free loopback port; returns once it booted."""
    port = free_port()
    conf = _props(_mk(work) / "namesrv.conf", {"listenPort": port, "bindAddress": "127.0.0.1"})
    return _booted(
        "The Name Server boot success",
        _java(
            "RocketMQ namesrv",
            work,
            NAMESRV_MAIN,
            NAMESRV_HEAP,
            "rmq.namesrv.logback.xml",
            ["-c", str(conf)],
            port,
        ),
    )


def _booted(marker: str, server: JavaServer) -> JavaServer:
    """`server` once it printed `marker`; killed if it does not."""
    try:
        server.wait_booted(marker)
    except BaseException:
        server.kill9()
        raise
    return server


def _mk(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path


def broker_props(
    store_root: Path,
    namesrv_addr: str | None,
    port: int,
    broker_name: str,
    overrides: Mapping[str, object] | None = None,
) -> dict[str, object]:
    props: dict[str, object] = {
        **PEER_BROKER,
        **PEER_STORE,
        "brokerName": broker_name,
        "listenPort": port,
        "haListenPort": port + 1,
        "storePathRootDir": store_root,
        "storePathCommitLog": store_root / "commitlog",
    }
    if namesrv_addr:
        props["namesrvAddr"] = namesrv_addr
    props.update(overrides or {})
    return props


def launch_broker(
    work: Path,
    store_root: Path,
    namesrv_addr: str | None,
    *,
    broker_name: str = "broker-a",
    overrides: Mapping[str, object] | None = None,
) -> JavaServer:
    """Start RocketMQ's broker on `store_root` without waiting for it (see `start_broker`)."""
    port = broker_port()
    props = broker_props(store_root, namesrv_addr, port, broker_name, overrides)
    conf = _props(_mk(work) / "broker.conf", props)
    return _java(
        f"RocketMQ broker {broker_name}",
        work,
        BROKER_MAIN,
        BROKER_HEAP,
        "rmq.broker.logback.xml",
        ["-c", str(conf)],
        port,
    )


def start_broker(
    work: Path,
    store_root: Path,
    namesrv_addr: str | None,
    *,
    broker_name: str = "broker-a",
    overrides: Mapping[str, object] | None = None,
) -> JavaServer:
    """RocketMQ's broker on `store_root`; returns once it booted (and registered, with a name server)."""
    server = launch_broker(work, store_root, namesrv_addr, broker_name=broker_name, overrides=overrides)
    return _booted("boot success", server)


@dataclass
class PeerCluster:
    """A RocketMQ name server and broker; `servers` are killed at the end."""

    work: Path
    namesrv: JavaServer
    broker: JavaServer
    servers: list[JavaServer] = field(default_factory=list)

    @property
    def namesrv_addr(self) -> str:
        return self.namesrv.addr

    @property
    def broker_addr(self) -> str:
        return self.broker.addr

    @property
    def store_root(self) -> Path:
        return self.work / "store"


@contextlib.contextmanager
def peer_cluster(work: Path, overrides: Mapping[str, object] | None = None) -> Iterator[PeerCluster]:
    """RocketMQ's name server + broker under `work` (store in `work/store`), killed after: the
    cluster and its store are thrown away, and a clean stop (RocketMQ's shutdown hooks) costs
    about 20 s of the suite."""
    require()
    servers: list[JavaServer] = []
    try:
        namesrv = start_namesrv(work / "namesrv")
        servers.append(namesrv)
        broker = start_broker(work / "broker", work / "store", namesrv.addr, overrides=overrides)
        servers.append(broker)
        yield PeerCluster(work, namesrv, broker, servers)
    finally:
        for server in reversed(servers):
            server.kill9()
