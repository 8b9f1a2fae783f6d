"""The servers of bench/peers_bench.py, each a child process on a fresh directory, started and
judged ready the way its own tools would: rocketlite's broker, RocketMQ's broker (5.3.3 jars,
ASYNC_FLUSH, no name server: the generator talks to the broker), Kafka 4.4 in KRaft mode (one
combined broker + controller), NATS JetStream (Debian's nats-server, file storage) and Redis
(Debian's redis-server, AOF everysec). Everything listens on 127.0.0.1 only.

JVMs get the settings their projects' start scripts give for a small machine (G1, 1 GiB heap,
full JIT), not the test suite's quick-start settings: a benchmark measures the warmed-up server.
"""

from __future__ import annotations

import base64
import os
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from tests.support.foreign_clients.rocketmq_peer import (
    BROKER_MAIN,
    JAVA17_OPENS,
    PEER_LIB,
    broker_props,
)
from tests.support.ports import broker_port, free_port

from bench.broker.config import CONNECTIONS, SEGMENT
from bench.broker.servers import Child, start_broker

ROOT: Final = Path(__file__).resolve().parents[2]
PEERS: Final = ROOT / ".clients" / "peers"
DEBS_ROOT: Final = PEERS / "root"
NATS_SERVER: Final = DEBS_ROOT / "usr" / "sbin" / "nats-server"
REDIS_SERVER: Final = DEBS_ROOT / "usr" / "bin" / "redis-server"
KAFKA_LIB: Final = PEERS / "kafka" / "lib"
# PEERSGEN: another build of bench/peers/loadgen (a work tree's own), else the Makefile's.
GENERATOR: Final = Path(os.environ.get("PEERSGEN") or PEERS / "bin" / "peersgen")
SETUP_HINT: Final = "run `make bench-peers-deps`"
# RocketMQ's runbroker.sh / Kafka's kafka-server-start.sh, with the 1 GiB heap both suggest for a small box.
RMQ_JVM: Final = [
    "-server", "-Xms1g", "-Xmx1g", "-XX:MaxDirectMemorySize=1g", "-XX:+UseG1GC",
    "-XX:G1HeapRegionSize=16m", "-XX:G1ReservePercent=25", "-XX:InitiatingHeapOccupancyPercent=30",
    "-XX:SoftRefLRUPolicyMSPerMB=0", "-XX:-OmitStackTraceInFastThrow",
]  # fmt: skip
KAFKA_JVM: Final = [
    "-server", "-Xms1g", "-Xmx1g", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
    "-XX:InitiatingHeapOccupancyPercent=35", "-XX:+ExplicitGCInvokesConcurrent",
    "-XX:MaxInlineLevel=15", "-Djava.awt.headless=true",
]  # fmt: skip


@dataclass
class Server:
    """A started server: its process (whose /proc CPU and memory are measured), its address and
    which protocol the generator speaks to it."""

    name: str
    version: str
    proto: str
    child: Child
    port: int

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.port}"

    def rss_mib(self) -> float:
        for line in Path(f"/proc/{self.child.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return float("nan")


def missing() -> list[str]:
    """What the peers need and is not there."""
    need = {
        "the load generator (.clients/peers/bin/peersgen)": GENERATOR,
        "nats-server (Debian, unpacked into .clients/peers/root)": NATS_SERVER,
        "redis-server (Debian, unpacked into .clients/peers/root)": REDIS_SERVER,
        "Kafka 4.4 jars (.clients/peers/kafka/lib)": KAFKA_LIB / "kafka_2.13-4.4.0.jar",
        "RocketMQ 5.3.3 jars (.clients/rocketmq/lib, `make rocketmq-peer`)": PEER_LIB
        / "rocketmq-broker-5.3.3.jar",
    }
    return [what for what, path in need.items() if not path.exists()]


def wait_port(child: Child, port: int, timeout: float = 180.0, marker: str | None = None) -> None:
    """Until the port accepts connections (and `marker` is in the log, when given)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not child.alive():
            raise RuntimeError(f"{child.name} exited ({child.proc.returncode}):\n{child.log_tail()}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                if marker is None or marker in child.log_path.read_text(errors="replace"):
                    return
        except OSError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"{child.name} not ready on {port} after {timeout:.0f} s:\n{child.log_tail()}")


def start_rocketlite(work: Path) -> Server:
    work.mkdir(parents=True, exist_ok=True)
    child, port = start_broker(work, sync=False, avoid=set())
    wait_port(child, port)
    return Server("rocketlite", "this commit", "remoting", child, port)


def start_rocketmq(work: Path) -> Server:
    port = broker_port()
    home = work / "home"
    home.mkdir(parents=True)
    store = work / "store"
    props = broker_props(
        store, None, port, "broker-a",
        {
            "defaultTopicQueueNums": CONNECTIONS,  # the generator sends to queues 0..15
            "mappedFileSizeCommitLog": SEGMENT,  # as rocketlite's bench broker
            "mappedFileSizeConsumeQueue": 300_000 * 20, "maxHashSlotNum": 5_000_000,
            "maxIndexNum": 20_000_000,  # RocketMQ's defaults, as rocketlite uses
        },
    )  # fmt: skip
    conf = work / "broker.conf"
    conf.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    argv = [
        "java", *RMQ_JVM, *JAVA17_OPENS, f"-Drocketmq.home.dir={home}", f"-Duser.home={home}",
        "-Drmq.logback.configurationFile=rmq.broker.logback.xml", "-cp", str(PEER_LIB / "*"),
        BROKER_MAIN, "-c", str(conf),
    ]  # fmt: skip
    child = Child("rocketmq-broker", argv, work / "console.txt")
    wait_port(child, port, marker="boot success")
    return Server("RocketMQ", "5.3.3", "remoting", child, port)


def cluster_id() -> str:
    """A KRaft cluster id: 16 random bytes, URL-safe base64 without padding (Kafka's Uuid)."""
    return base64.urlsafe_b64encode(os.urandom(16)).rstrip(b"=").decode()


def start_kafka(work: Path) -> Server:
    port = free_port()
    ctrl = free_port({port})
    data = work / "data"
    props = {
        "process.roles": "broker,controller",
        "node.id": "1",
        "controller.quorum.voters": f"1@127.0.0.1:{ctrl}",
        "listeners": f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{ctrl}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port}",
        "inter.broker.listener.name": "PLAINTEXT",
        "controller.listener.names": "CONTROLLER",
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
        "log.dirs": str(data),
        "log.segment.bytes": str(SEGMENT),
        "offsets.topic.replication.factor": "1",
        "transaction.state.log.replication.factor": "1",
        "transaction.state.log.min.isr": "1",
        "share.coordinator.state.topic.replication.factor": "1",
        "share.coordinator.state.topic.min.isr": "1",
        "group.initial.rebalance.delay.ms": "0",
    }
    work.mkdir(parents=True, exist_ok=True)
    conf = work / "server.properties"
    conf.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    cp = ["-cp", str(KAFKA_LIB / "*")]
    subprocess.run(
        ["java", *cp, "kafka.tools.StorageTool", "format", "-t", cluster_id(), "-c", str(conf)],
        check=True, capture_output=True, timeout=120,
    )  # fmt: skip
    argv = ["java", *KAFKA_JVM, f"-Dkafka.logs.dir={work}", *cp, "kafka.Kafka", str(conf)]
    child = Child("kafka", argv, work / "console.txt")
    wait_port(child, port)
    return Server("Kafka", "4.4.0 (KRaft)", "kafka", child, port)


def start_nats(work: Path) -> Server:
    port = free_port()
    work.mkdir(parents=True, exist_ok=True)
    argv = [str(NATS_SERVER), "-a", "127.0.0.1", "-p", str(port), "-js", "-sd", str(work / "js")]
    child = Child("nats-server", argv, work / "nats.log")
    wait_port(child, port)
    return Server("NATS JetStream", "2.9.10 (Debian)", "nats", child, port)


def start_redis(work: Path) -> Server:
    port = free_port()
    data = work / "redis"
    data.mkdir(parents=True)
    libs = DEBS_ROOT / "usr" / "lib" / "x86_64-linux-gnu"
    os.environ["LD_LIBRARY_PATH"] = str(libs)  # Debian's jemalloc and lzf, unpacked beside it
    argv = [
        str(REDIS_SERVER), "--port", str(port), "--bind", "127.0.0.1", "--dir", str(data),
        "--appendonly", "yes", "--appendfsync", "everysec", "--save", "",
    ]  # fmt: skip
    child = Child("redis-server", argv, work / "redis.log")
    wait_port(child, port)
    return Server("Redis Streams", "7.0.15 (Debian)", "redis", child, port)


STARTERS: Final = {
    "rocketlite": start_rocketlite,
    "rocketmq": start_rocketmq,
    "kafka": start_kafka,
    "nats": start_nats,
    "redis": start_redis,
}
