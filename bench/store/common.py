"""Shared parts of the store benchmark: goals, the full and quick plans, the report, messages
with a Java producer's properties, store configs sized so every run rolls segments."""

from __future__ import annotations

import math
import os
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from rocketlite.protocol.formats.record import MessageInner, encode_record
from rocketlite.protocol.message import HostAddress, properties_to_string
from rocketlite.store.config import StoreConfig
from rocketlite.store.mapped_file import segment_name, staging_path

KIB = 1 << 10
MIB = 1 << 20
GIB = 1 << 30
MB = 1_000_000
TOPIC = "BenchTopic"
HOST = HostAddress.parse("127.0.0.1:10911")
GROUP_COMMIT_THREAD = "rocketlite-group-commit"

# Goals (from the store's performance brief).
GOAL_BATCH_RATIO = 0.50  # batches of 1000 x 1 KiB: appended+flushed >= 50% of raw bandwidth
GOAL_SINGLE_128 = 150_000  # single puts of 128 B, msgs/s
GOAL_SYNC_ACKED = 50_000  # SYNC_FLUSH, 64 producers, 1 KiB, acked msgs/s
GOAL_SYNC_P99_MS = 10.0
GOAL_DISPATCH = 300_000  # CQ units/s and index entries/s
GOAL_GET = 1_000_000  # msgs/s
GOAL_RECOVERY_S = 3.0  # abnormal recovery of a 1 GiB log (scaled per GiB for other sizes)


# -- plan ---------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Plan:
    raw_mib: int
    fsync_count: int
    # (body size, batch size) -> messages
    append_counts: dict[tuple[int, int], int]
    sync_messages: int
    sync_thread_messages: int
    dispatch_messages: int
    dispatch_queues: int
    get_min_messages: int
    dispatch_segment: int
    recovery_gib: float
    recovery_segment: int


FULL = Plan(
    raw_mib=1024,
    fsync_count=1000,
    append_counts={
        (128, 1): 400_000,
        (1024, 1): 250_000,
        (128, 32): 1_000_000,
        (1024, 32): 500_000,
        (128, 1000): 2_000_000,
        (1024, 1000): 1_000_000,
    },
    sync_messages=300_000,
    sync_thread_messages=64_000,
    dispatch_messages=1_000_000,
    dispatch_queues=4,
    get_min_messages=1_000_000,
    dispatch_segment=128 * MIB,
    recovery_gib=1.0,
    recovery_segment=GIB,
)

QUICK = Plan(
    raw_mib=64,
    fsync_count=200,
    append_counts={
        (128, 1): 30_000,
        (1024, 1): 20_000,
        (128, 32): 64_000,
        (1024, 32): 32_000,
        (128, 1000): 100_000,
        (1024, 1000): 50_000,
    },
    sync_messages=10_000,
    sync_thread_messages=3_200,
    dispatch_messages=60_000,
    dispatch_queues=4,
    get_min_messages=60_000,
    dispatch_segment=8 * MIB,
    recovery_gib=1 / 16,
    recovery_segment=16 * MIB,
)


# -- results ------------------------------------------------------------------------------------
@dataclass(slots=True)
class Row:
    """One line of the summary table."""

    name: str
    figure: str
    mbps: float | None = None
    ratio: float | None = None
    goal: str = ""
    passed: bool | None = None
    issue: bool = False  # one of the issue's figures (printed first)


@dataclass(slots=True)
class Report:
    rows: list[Row] = field(default_factory=list)
    raw_mbps: float = 0.0
    raw_pattern_mbps: float = 0.0  # the append goal's write pattern, by hand
    fsync_us: float = 0.0
    load_start: float = 0.0

    def add(self, row: Row) -> None:
        self.rows.append(row)


def mark(passed: bool | None) -> str:
    if passed is None:
        return ""
    return "PASS" if passed else "MISS"


def out(text: str = "") -> None:
    print(text, flush=True)


def fmt_int(n: float) -> str:
    return f"{n:,.0f}"


def pct(ratio: float | None) -> str:
    return "" if ratio is None else f"{ratio * 100:.0f}%"


def percentile(sorted_values: list[float], q: float) -> float:
    """Nearest-rank percentile of an already sorted list."""
    if not sorted_values:
        return math.nan
    k = min(len(sorted_values) - 1, max(0, math.ceil(q * len(sorted_values)) - 1))
    return sorted_values[k]


# -- messages -----------------------------------------------------------------------------------
def uniq_key(i: int) -> str:
    """A 32-hex-digit UNIQ_KEY like the Java client's (ip, pid, counter)."""
    return f"7F000001{os.getpid() & 0xFFFF:04X}{i:020X}"


def make_message(body: bytes, queue_id: int, i: int, *, keys: bool = False) -> MessageInner:
    """A message as a Java producer sends it: TAGS, WAIT and UNIQ_KEY (and KEYS if asked)."""
    props = {"TAGS": "TagA", "WAIT": "true", "UNIQ_KEY": uniq_key(i)}
    if keys:
        props["KEYS"] = f"order-{i:012d}"
    return MessageInner(
        topic=TOPIC,
        body=body,
        born_host=HOST,
        store_host=HOST,
        queue_id=queue_id,
        properties_string=properties_to_string(props),
        born_timestamp=time.time_ns() // 1_000_000,
    )


def record_size(msg: MessageInner) -> int:
    return len(encode_record(msg))


def segment_size_for(total_bytes: int, cap: int = GIB) -> int:
    """The largest power-of-two segment (>= 1 MiB, <= cap) that `total_bytes` overflows by 25%+."""
    seg = MIB
    while seg * 2 <= cap and seg * 2 * 1.25 <= total_bytes:
        seg *= 2
    return seg


def store_config(root: Path, **overrides: object) -> StoreConfig:
    return StoreConfig(store_path_root_dir=root, **overrides)  # type: ignore[arg-type]


def wait_staged(root: Path, segment: int, start_offset: int, timeout: float = 60.0) -> None:
    """Wait until the allocator has staged (reserved or pre-zeroed) the segment after the one at
    `start_offset`, so its preparation is not timed."""
    nxt = root / "commitlog" / segment_name(start_offset + segment)
    tmp = staging_path(nxt)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if nxt.exists() or (tmp.exists() and tmp.stat().st_size == segment):
            time.sleep(0.01)  # the last pwrite returned; let the allocator drop its lock
            return
        time.sleep(0.005)
    # An allocator that makes segments in the append path (no service) never stages one: say so,
    # or the bench only looks hung (a minute per store, idle).
    print(f"warning: no staged segment {tmp.name} after {timeout:.0f} s", file=sys.stderr)


def remove(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)
