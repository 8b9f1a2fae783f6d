"""A push consumer's per-topic consumption figures (Java's `ConsumerStatsManager`), for the
`statusTable` of its answer to GET_CONSUMER_RUNNING_INFO (mqadmin consumerStatus, the dashboard).

Per topic over the last minute: pull round-trip time (ms per pull) and messages pulled per
second, listener time (ms per batch), messages consumed per second, succeeded and failed; the
failed messages of the last hour. Counts go into one-second buckets (one-minute buckets for the
hour), so a busy consumer costs a dict update per pull or batch, and nothing is kept longer
than the window it feeds. The clock is `time.monotonic` unless one is given.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from rocketlite.protocol.bodies.running_info import ConsumeStatus

MINUTE_S = 60
HOUR_MINUTES = 60


@dataclass(slots=True)
class _Bucket:
    pull_rt: float = 0.0
    pulls: int = 0
    pulled: int = 0
    consume_rt: float = 0.0
    batches: int = 0
    ok: int = 0
    failed: int = 0


@dataclass(slots=True)
class _Topic:
    seconds: dict[int, _Bucket] = field(default_factory=dict)
    failed_minutes: dict[int, int] = field(default_factory=dict)


class ConsumerStats:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.topics: dict[str, _Topic] = {}

    def _bucket(self, topic: str) -> tuple[_Topic, _Bucket, int]:
        now = int(self.clock())
        t = self.topics.get(topic)
        if t is None:
            t = self.topics[topic] = _Topic()
        bucket = t.seconds.get(now)
        if bucket is None:
            bucket = t.seconds[now] = _Bucket()
            for old in [s for s in t.seconds if s <= now - MINUTE_S]:
                del t.seconds[old]
        return t, bucket, now

    def record_pull(self, topic: str, rt_ms: float, found: int) -> None:
        _, b, _ = self._bucket(topic)
        b.pull_rt += rt_ms
        b.pulls += 1
        b.pulled += found

    def record_consume(self, topic: str, rt_ms: float, ok: int, failed: int) -> None:
        t, b, now = self._bucket(topic)
        b.consume_rt += rt_ms
        b.batches += 1
        b.ok += ok
        b.failed += failed
        if failed:
            minute = now // MINUTE_S
            t.failed_minutes[minute] = t.failed_minutes.get(minute, 0) + failed
            for old in [m for m in t.failed_minutes if m <= minute - HOUR_MINUTES]:
                del t.failed_minutes[old]

    def status(self, topic: str) -> ConsumeStatus:
        """`ConsumerStatsManager.consumeStatus`: the topic's last minute (failed: last hour)."""
        t = self.topics.get(topic)
        if t is None:
            return ConsumeStatus()
        now = int(self.clock())
        recent = [b for s, b in t.seconds.items() if s > now - MINUTE_S]
        pulls = sum(b.pulls for b in recent)
        batches = sum(b.batches for b in recent)
        minute = now // MINUTE_S
        return ConsumeStatus(
            pull_rt=sum(b.pull_rt for b in recent) / pulls if pulls else 0.0,
            pull_tps=sum(b.pulled for b in recent) / MINUTE_S,
            consume_rt=sum(b.consume_rt for b in recent) / batches if batches else 0.0,
            consume_ok_tps=sum(b.ok for b in recent) / MINUTE_S,
            consume_failed_tps=sum(b.failed for b in recent) / MINUTE_S,
            consume_failed_msgs=sum(n for m, n in t.failed_minutes.items() if m > minute - HOUR_MINUTES),
        )
