"""rocketlite's own metric families (`rocketlite_*`), kept where RocketMQ 5 has no equivalent,
and the figures GET_BROKER_RUNTIME_INFO adds for `rocketlite admin brokerStatus`.

The families: put and get failures and misses, send-backs, the store's own counters (every
append, retries and system topics included), its slowest put and put-latency buckets, 10 s TPS,
the disk's used ratio and full flag, and the commit log's positions (`commit_log_positions`):
`rocketlite_commitlog_flushed_offset` is where the last fdatasync reached; with
`transientStorePoolEnable`, `rocketlite_commitlog_uncommitted_bytes` more sit in the process's
write buffer, which a mere process kill takes. What RocketMQ names (messages in/out per topic,
consumer lag, connections, flush and dispatch behind) is in broker/metrics/rocketmq.py.

TPS is sampled here once a second over a 10 s window (`TpsSampler`).
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Iterator
from typing import Final

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from rocketlite.broker.client_manager import ClientManager
from rocketlite.broker.config import BrokerConfig
from rocketlite.broker.state_files import ConsumerOffsetTable
from rocketlite.broker.stats import BrokerStats
from rocketlite.store.api import StoreAPI

PREFIX: Final = "rocketlite_"
TPS_WINDOW_S: Final = 10.0


class TpsSampler:
    """Samples (time, puts, gets found) once a second; rates over the last `TPS_WINDOW_S`."""

    def __init__(self, store: StoreAPI, interval_s: float = 1.0) -> None:
        self.store = store
        self.interval_s = interval_s
        self.samples: deque[tuple[float, int, int]] = deque(maxlen=int(TPS_WINDOW_S / interval_s) + 2)
        self.sample()

    def current(self) -> tuple[float, int, int]:
        s = self.store.stats
        return time.monotonic(), s.put_count, s.get_found

    def sample(self) -> None:
        self.samples.append(self.current())

    def tps(self) -> tuple[float, float]:
        """(put TPS, get-found TPS) over the window (shorter while the broker is young)."""
        now = self.current()
        base = next((s for s in self.samples if now[0] - s[0] <= TPS_WINDOW_S), now)
        elapsed = now[0] - base[0]
        if elapsed <= 0:
            return 0.0, 0.0
        return (now[1] - base[1]) / elapsed, (now[2] - base[2]) / elapsed


class BrokerFigures:
    """The figures read from what the broker keeps, for /metrics and GET_BROKER_RUNTIME_INFO."""

    def __init__(
        self,
        broker: BrokerConfig,
        store: StoreAPI,
        stats: BrokerStats,
        offsets: ConsumerOffsetTable,
        clients: ClientManager,
    ) -> None:
        self.broker = broker
        self.store = store
        self.stats = stats
        self.offsets = offsets
        self.clients = clients

    def consumer_lag(self) -> dict[tuple[str, str], int]:
        """(group, topic) -> sum over queues of max(max offset - committed offset, 0)."""
        with self.offsets.lock:
            table = {key: dict(queues) for key, queues in self.offsets.offset_table.items()}
        lag: dict[tuple[str, str], int] = {}
        for key, queues in table.items():
            topic, _, group = key.partition("@")
            total = 0
            for queue_id, committed in queues.items():
                total += max(self.store.get_max_offset_in_queue(topic, queue_id) - max(committed, 0), 0)
            lag[(group, topic)] = total
        return lag

    def connection_count(self) -> int:
        """Distinct live connections of the registered producers and consumers."""
        clients = self.clients
        seen: set[int] = set()
        for channels in clients.producers.values():
            seen.update(id(info.conn) for info in channels.values() if not info.conn.closed)
        for group in clients.consumers.values():
            seen.update(id(conn) for conn in group.connections())
        return len(seen)

    def disk_ratio(self) -> float:
        try:
            return self.store.disk_used_ratio()
        except OSError:
            return 0.0

    def commit_log_positions(self) -> tuple[int, int, int]:
        """(flushed offset, unflushed bytes, uncommitted bytes) of the commit log.

        The flushed offset is read first, so the unflushed bytes may be overstated, never
        understated. Uncommitted bytes (in the write buffer, not yet in the file) are 0 without a
        write buffer.
        """
        store = self.store
        flushed = store.durable_end
        committed = store.committed_end
        wrote = store.written_end
        return flushed, max(wrote - flushed, 0), max(wrote - committed, 0)

    def runtime_figures(self) -> dict[str, str]:
        """The figures GET_BROKER_RUNTIME_INFO lacks, for `rocketlite admin brokerStatus`."""
        lag = self.consumer_lag()
        return {
            "putLatencyBuckets": " ".join(
                f"{k}:{v}" for k, v in self.store.stats.put_latency_buckets.items()
            ),
            "consumerLagTotal": str(sum(lag.values())),
            "clientConnections": str(self.connection_count()),
            "diskUsedRatio": f"{self.disk_ratio():.6f}",
        }


class RocketliteCollector(Collector):
    """The `rocketlite_*` families (labels `cluster`, `broker`)."""

    def __init__(self, figures: BrokerFigures, sampler: TpsSampler) -> None:
        self.figures = figures
        self.sampler = sampler

    def collect(self) -> Iterator[Metric]:
        f = self.figures
        bstats, store = f.stats, f.store
        sstats = store.stats
        info = store.runtime_info()
        put_tps, get_tps = self.sampler.tps()
        flushed, _unflushed, uncommitted = f.commit_log_positions()
        names = ["cluster", "broker"]
        base = [f.broker.broker_cluster_name, f.broker.broker_name]
        counters: list[tuple[str, str, float]] = [
            ("put_failures", "Sends refused or failed.", bstats.put_failures),
            ("get_miss", "Pulls that found nothing.", bstats.get_miss_nums),
            ("send_back", "Messages sent back by consumers.", bstats.send_back_nums),
            ("store_put_messages", "Messages appended to the commit log.", sstats.put_count),
            ("store_put_bytes", "Bytes appended to the commit log.", sstats.put_bytes),
            ("store_put_failures", "Failed commit-log appends.", sstats.put_failures),
            ("store_get_found", "Messages the store returned.", sstats.get_found),
            ("store_get_miss", "Store lookups that found nothing.", sstats.get_miss),
        ]
        for name, doc, value in counters:
            counter = CounterMetricFamily(PREFIX + name, doc, labels=names)
            counter.add_metric(base, value)
            yield counter
        gauges: list[tuple[str, str, float]] = [
            ("store_put_latency_max_ms", "Slowest append so far (ms).", sstats.put_max_ms),
            ("put_tps", f"Stored messages per second over {TPS_WINDOW_S:.0f} s.", put_tps),
            ("get_found_tps", f"Pulled messages per second over {TPS_WINDOW_S:.0f} s.", get_tps),
            ("disk_used_ratio", "Used fraction of the store's file system.", f.disk_ratio()),
            ("disk_full", "1 when the disk is full.", int(store.disk_full)),
            ("commitlog_min_offset", "Commit-log min physical offset.", int(info["commitLogMinOffset"])),
            ("commitlog_max_offset", "Commit-log max physical offset.", int(info["commitLogMaxOffset"])),
            ("commitlog_flushed_offset", "Commit-log offset the last flush reached.", flushed),
            ("commitlog_uncommitted_bytes", "Write-buffer bytes not in the file yet.", uncommitted),
        ]
        for name, doc, value in gauges:
            gauge = GaugeMetricFamily(PREFIX + name, doc, labels=names)
            gauge.add_metric(base, value)
            yield gauge
        latency = CounterMetricFamily(
            PREFIX + "store_put_latency", "Appends by latency bucket.", labels=[*names, "bucket"]
        )
        for bucket, count in sstats.put_latency_buckets.items():
            latency.add_metric([*base, bucket], count)
        yield latency
