"""Fixed parameters of the broker benchmark: connections, batch and window sizes, goals, the
full and quick plans."""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from typing import Final

from rocketlite.protocol.wire.headers import SendMessageRequestHeader

KIB: Final = 1 << 10
MIB: Final = 1 << 20
GIB: Final = 1 << 30
CONNECTIONS: Final = 16
BATCH: Final = 32  # messages per SEND_BATCH_MESSAGE / XADDs per pipeline
WINDOW: Final = 32  # single-message requests in flight per connection
PULL_BATCH: Final = 32  # maxMsgNums of a pull
XRANGE_COUNT: Final = 1000
LATENCY_RATE: Final = 20_000  # msgs/s, all producers together
PACE_TICK: Final = 0.001  # s between the latency phase's send bursts (uvloop's timer resolution)
SEGMENT: Final = 128 * MIB  # commit-log segment size of the benchmark broker
PRODUCER_GROUP: Final = "BenchProducerGroup"
CONSUMER_GROUP: Final = "BenchConsumerGroup"
DEFAULT_TOPIC: Final = "TBW102"
LOADGEN_PROCS: Final = 2  # load-generator processes for our broker (--procs)
REDIS_INSTALL_HINT: Final = (
    "redis-server (with redis-benchmark) not found: install it with `apt-get install -y redis-server` "
    "(Debian/Ubuntu; `apt-get update` first), point --redis-server at it, or run with --no-redis"
)

# PullSysFlag bits (RocketMQ's PullSysFlag).

# Goals (from the broker benchmark issue).
GOAL_BATCH_RATIO: Final = 1.0  # batched produce, ours / Redis
GOAL_BATCH_US: Final = 2.5  # broker CPU per message, SEND_BATCH_MESSAGE of 32 x 1 KiB
GOAL_SINGLE_US: Final = 10.0  # broker CPU per message, single SEND_MESSAGE_V2
GOAL_SINGLE_RATE: Final = 60_000  # single-message produce 1 KiB, msgs/s ...
GOAL_SINGLE_RATIO: Final = 0.5  # ... and of Redis's XADD with a window of 32
GOAL_CONSUME_RATIO: Final = 1.0
GOAL_P99_MS: Final = 5.0
GOAL_P50_MS: Final = 1.0
CLK_TCK: Final = os.sysconf("SC_CLK_TCK")  # /proc stat times are in these ticks
SATURATED: Final = 0.85  # CPU share of one core from which a process counts as the bottleneck
OTHER_LOAD: Final = 0.15  # CPU of other processes (share of one core) that makes a phase suspect
OTHER_LOAD_WARNING: Final = " [!! the machine was not idle: figures disturbed]"

SEND_NS: Final = struct.Struct(">q")  # first 8 bytes of a latency-phase body: perf_counter_ns at send

SEND_V2_BORN_TS: Final = SendMessageRequestHeader.V2_NAMES["born_timestamp"]
SEND_V2_PROPERTIES: Final = SendMessageRequestHeader.V2_NAMES["properties"]


# -- plan ---------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Plan:
    name: str
    seconds: float  # produce / consume phases (at most)
    latency_seconds: float
    phase_cap_bytes: int  # body bytes per produce phase and side (bounds the disk)
    sizes: tuple[int, ...]
    sync: bool  # also run the SYNC_FLUSH / appendfsync always group


FULL = Plan("full", seconds=5.0, latency_seconds=5.0, phase_cap_bytes=200 * MIB, sizes=(128, KIB), sync=True)
QUICK = Plan("quick", seconds=0.5, latency_seconds=1.0, phase_cap_bytes=32 * MIB, sizes=(128, KIB), sync=True)


def out(text: str = "") -> None:
    """Print a line of the report now (the bench runs for minutes; output must not wait)."""
    print(text, flush=True)
