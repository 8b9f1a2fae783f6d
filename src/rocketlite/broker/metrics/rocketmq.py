"""RocketMQ 5's broker metrics, under RocketMQ's names and labels, read from the live broker.

A `prometheus_client` collector: each scrape builds the families from what the broker keeps (the
traffic counters of `BrokerStats`, the rpc latency histograms, topic and group tables, client
connections, consumer offsets and the store's positions), as RocketMQ's observable gauges call
back into the broker on each collection. Names and labels are those of RocketMQ 5.3's
`BrokerMetricsConstant`, `RemotingMetricsConstant` and `DefaultStoreMetricsConstant`; every
sample carries RocketMQ's `cluster`, `node_type` ("broker") and `node_id` (the broker name), plus
the `metricsLabel` pairs. Booleans are "true"/"false", as OpenTelemetry writes them.

What is read where (RocketMQ's source in brackets):

- `rocketmq_messages_in_total`, `rocketmq_throughput_in_total`, `rocketmq_message_size`
  {topic, message_type, is_system}: stored sends, by the topic they were stored under (a delayed
  message first under SCHEDULE_TOPIC_XXXX, then under its topic when delivered, type `delay`)
  [`SendMessageProcessor`, `ScheduleMessageService`]; retry and DLQ topics are left out.
- `rocketmq_messages_out_total`, `rocketmq_throughput_out_total` {topic, consumer_group,
  is_system}: messages handed to pulls [`DefaultPullMessageResultHandler`].
- `rocketmq_consumer_lag_messages`, `_lag_latency`, `_inflight_messages`, `_queueing_latency`,
  `_ready_messages` {consumer_group, topic, is_retry, is_system}: for each online group and each
  topic it subscribes (retry topics skipped), over the topic's write queues: max offset minus
  committed offset; now minus the store time of the first unconsumed message; pulled minus
  committed; now minus the store time of the first message not pulled yet; max minus pulled
  [`ConsumerLagCalculator`].
- `rocketmq_send_to_dlq_messages_total` {consumer_group, topic, is_system}.
- `rocketmq_producer_connections` {language, version, protocol_type},
  `rocketmq_consumer_connections` {consumer_group, language, version, consume_mode,
  protocol_type, is_system}: one per registered client and group.
- `rocketmq_topic_number`, `rocketmq_consumer_group_number`, `rocketmq_broker_permission`.
- `rocketmq_processor_watermark` {processor}: RocketMQ's thread-pool queue lengths. The event loop
  has no such queues: `send` is the sends waiting for a SYNC_FLUSH group commit, the others 0.
- `rocketmq_rpc_latency` {protocol_type, request_code, response_code, is_long_polling, result}
  (broker/metrics/rpc.py).
- `rocketmq_storage_size`, `rocketmq_storage_flush_behind_bytes`,
  `rocketmq_storage_dispatch_behind_bytes`, `rocketmq_storage_message_reserve_time`
  {storage_type="local", storage_medium="disk"} [`DefaultStoreMetricsManager`].

The names are RocketMQ's instrument names; the OpenTelemetry Prometheus exporter of some
RocketMQ builds also appends the unit to a few of them (`rocketmq_rpc_latency_milliseconds`).
"""

from __future__ import annotations

import shutil
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Final

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from rocketlite.broker.client_manager import ClientManager
from rocketlite.broker.config import BrokerConfig
from rocketlite.broker.metrics.rpc import (
    RpcLatency,
    request_code_desc,
    response_code_desc,
)
from rocketlite.broker.metrics.versions import version_desc
from rocketlite.broker.processors.admin_requests import is_system_topic
from rocketlite.broker.state_files import ConsumerOffsetTable
from rocketlite.broker.stats import MESSAGE_SIZE_BUCKETS, BrokerStats
from rocketlite.broker.subscription_group import SubscriptionGroupManager
from rocketlite.broker.topic_config import TopicConfigManager
from rocketlite.clock import Clock
from rocketlite.protocol import perm, reserved
from rocketlite.protocol.bodies.heartbeat import ConsumeType
from rocketlite.store.api import StoreAPI

SYSTEM_GROUP_PREFIX: Final = "cid_rmq_sys_"  # MixAll.CID_RMQ_SYS_PREFIX, compared lower-cased
PROCESSORS: Final = (
    "send", "async_put", "pull", "ack", "query_message", "client_manager", "heartbeat", "lite_pull",
    "transaction", "consumer_manager", "admin", "reply",
)  # fmt: skip
STORAGE_LABELS: Final = {"storage_type": "local", "storage_medium": "disk"}


def _bool(value: bool) -> str:
    return "true" if value else "false"


def is_system_group(group: str) -> bool:
    return group.lower().startswith(SYSTEM_GROUP_PREFIX)


def parse_metrics_label(text: str) -> dict[str, str]:
    """`metricsLabel` ("k1:v1,k2:v2"): extra labels on every sample; malformed pairs are skipped,
    as Java skips them (with a warning there)."""
    out: dict[str, str] = {}
    for item in text.split(","):
        parts = item.split(":")
        if len(parts) == 2 and parts[0].strip():
            out[parts[0].strip()] = parts[1].strip()
    return out


@dataclass(slots=True)
class BrokerView:
    """What the collector reads, each the broker's own object."""

    broker: BrokerConfig
    store: StoreAPI
    stats: BrokerStats
    topics: TopicConfigManager
    groups: SubscriptionGroupManager
    clients: ClientManager
    offsets: ConsumerOffsetTable
    clock: Clock
    rpc: RpcLatency | None = None
    send_waiters: Callable[[], int] = lambda: 0


@dataclass(slots=True)
class _Lag:
    lag: int = 0
    earliest_unconsumed: int = 0
    inflight: int = 0
    earliest_unpulled: int = 0
    ready: int = 0


class LabelledCollector(Collector):
    """A collector whose every sample carries RocketMQ's base labels (`cluster`, `node_type`,
    `node_id` and the `metricsLabel` pairs)."""

    def __init__(self, broker: BrokerConfig) -> None:
        self.base = {
            **parse_metrics_label(broker.metrics_label),
            "cluster": broker.broker_cluster_name,
            "node_type": "broker",
            "node_id": broker.broker_name,
        }

    def collect(self) -> Iterator[Metric]:
        return iter(())

    def _gauge(self, name: str, doc: str, labels: tuple[str, ...] = ()) -> GaugeMetricFamily:
        return GaugeMetricFamily(name, doc, labels=[*self.base, *labels])

    def _counter(self, name: str, doc: str, labels: tuple[str, ...] = ()) -> CounterMetricFamily:
        return CounterMetricFamily(name, doc, labels=[*self.base, *labels])

    def _histogram(self, name: str, doc: str, labels: tuple[str, ...] = ()) -> HistogramMetricFamily:
        return HistogramMetricFamily(name, doc, labels=[*self.base, *labels])

    def _values(self, *values: str) -> list[str]:
        return [*self.base.values(), *values]


class RocketMQCollector(LabelledCollector):
    """The families of RocketMQ 5's broker, built at each scrape from `view`."""

    def __init__(self, view: BrokerView) -> None:
        super().__init__(view.broker)
        self.view = view

    def collect(self) -> Iterator[Metric]:
        yield from self._stats()
        yield from self._traffic()
        yield from self._connections()
        yield from self._lag()
        yield from self._rpc()
        yield from self._storage()

    # -- broker stats ------------------------------------------------------------------------
    def _stats(self) -> Iterator[Metric]:
        v = self.view
        watermark = self._gauge("rocketmq_processor_watermark", "Request processor watermark", ("processor",))
        for processor in PROCESSORS:
            watermark.add_metric(self._values(processor), v.send_waiters() if processor == "send" else 0)
        yield watermark
        for name, doc, value in (
            ("rocketmq_broker_permission", "Broker permission", v.broker.broker_permission),
            ("rocketmq_topic_number", "Active topic number", len(v.topics.table)),
            ("rocketmq_consumer_group_number", "Active subscription group number", len(v.groups.table)),
        ):
            gauge = self._gauge(name, doc)
            gauge.add_metric(self._values(), value)
            yield gauge

    # -- messages in and out -----------------------------------------------------------------
    def _traffic(self) -> Iterator[Metric]:
        stats = self.view.stats
        in_labels = ("topic", "message_type", "is_system")
        msgs_in = self._counter("rocketmq_messages_in_total", "Total number of incoming messages", in_labels)
        bytes_in = self._counter(
            "rocketmq_throughput_in_total", "Total traffic of incoming messages", in_labels
        )
        size = self._histogram("rocketmq_message_size", "Incoming messages size", in_labels)
        for (topic, kind), t in sorted(stats.traffic_in.items()):
            values = self._values(topic, kind, _bool(is_system_topic(topic)))
            msgs_in.add_metric(values, t.messages)
            bytes_in.add_metric(values, t.size)
            cumulative, buckets = 0, []
            for bound, count in zip((*MESSAGE_SIZE_BUCKETS, float("inf")), t.buckets, strict=True):
                cumulative += count
                buckets.append((le(bound), cumulative))
            size.add_metric(values, buckets, t.size_sum)
        out_labels = ("topic", "consumer_group", "is_system")
        msgs_out = self._counter(
            "rocketmq_messages_out_total", "Total number of outgoing messages", out_labels
        )
        bytes_out = self._counter(
            "rocketmq_throughput_out_total", "Total traffic of outgoing messages", out_labels
        )
        for (topic, group), (n, nbytes) in sorted(stats.traffic_out.items()):
            values = self._values(topic, group, _bool(is_system_topic(topic) or is_system_group(group)))
            msgs_out.add_metric(values, n)
            bytes_out.add_metric(values, nbytes)
        dlq = self._counter("rocketmq_send_to_dlq_messages_total", "Consumer send to DLQ messages",
            ("consumer_group", "topic", "is_system"),
        )  # fmt: skip
        for (topic, group), n in sorted(stats.send_to_dlq.items()):
            dlq.add_metric(
                self._values(group, topic, _bool(is_system_topic(topic) or is_system_group(group))), n
            )
        yield from (msgs_in, bytes_in, size, msgs_out, bytes_out, dlq)

    # -- connections -------------------------------------------------------------------------
    def _connections(self) -> Iterator[Metric]:
        clients = self.view.clients
        producers: Counter[tuple[str, str]] = Counter()
        for channels in clients.producers.values():
            for info in channels.values():
                producers[(info.language.lower(), version_desc(info.version).lower())] += 1
        fam = self._gauge("rocketmq_producer_connections", "Producer connections",
            ("language", "version", "protocol_type"),
        )  # fmt: skip
        for (language, version), n in sorted(producers.items()):
            fam.add_metric(self._values(language, version, "remoting"), n)
        yield fam
        consumers: Counter[tuple[str, str, str, str]] = Counter()
        for group, group_info in clients.consumers.items():
            pulls = group_info.consume_type == ConsumeType.CONSUME_ACTIVELY
            for ch in group_info.channels.values():
                mode = "pop" if ch.pops else ("pull" if pulls else "push")
                consumers[(group, ch.language.lower(), version_desc(ch.version).lower(), mode)] += 1
        fam = self._gauge("rocketmq_consumer_connections", "Consumer connections",
            ("consumer_group", "language", "version", "consume_mode", "protocol_type", "is_system"),
        )  # fmt: skip
        for (group, language, version, mode), n in sorted(consumers.items()):
            fam.add_metric(
                self._values(group, language, version, mode, "remoting", _bool(is_system_group(group))), n
            )
        yield fam

    # -- consumer lag ------------------------------------------------------------------------
    def _lag_of(self, group: str, topic: str, queues: int) -> _Lag:
        v = self.view
        store, pulls = v.store, v.stats.pull_offsets
        out = _Lag()
        unconsumed: list[int] = []
        unpulled: list[int] = []
        for q in range(queues):
            max_offset = max(store.get_max_offset_in_queue(topic, q), 0)
            committed = v.offsets.query(group, topic, q)
            if committed < 0:
                committed = max_offset
            pulled = pulls.get((group, topic, q), -1)
            ready_from = pulled if pulled >= 0 else committed
            if pulled < 0:
                pulled = committed
            out.lag += max(max_offset - committed, 0)
            out.inflight += max(pulled - committed, 0)
            out.ready += max(max_offset - ready_from, 0)
            if committed < max_offset:
                unconsumed.append(store.get_message_store_timestamp(topic, q, committed))
            if pulled < max_offset:
                unpulled.append(store.get_message_store_timestamp(topic, q, pulled))
        now = v.clock.now_ms()
        first = min((t for t in unconsumed if t > 0), default=0)
        out.earliest_unconsumed = now - first if first else 0
        first = min((t for t in unpulled if t > 0), default=0)
        out.earliest_unpulled = now - first if first else 0
        return out

    def _lag(self) -> Iterator[Metric]:
        v = self.view
        labels = ("consumer_group", "topic", "is_retry", "is_system")
        families = {
            "lag": self._gauge("rocketmq_consumer_lag_messages", "Consumer lag messages", labels),
            "earliest_unconsumed": self._gauge(
                "rocketmq_consumer_lag_latency", "Consumer lag time (milliseconds)", labels
            ),
            "inflight": self._gauge(
                "rocketmq_consumer_inflight_messages", "Consumer inflight messages", labels
            ),
            "earliest_unpulled": self._gauge(
                "rocketmq_consumer_queueing_latency", "Consumer queueing time (milliseconds)", labels
            ),
            "ready": self._gauge("rocketmq_consumer_ready_messages", "Consumer ready messages", labels),
        }
        broker_perm = v.broker.broker_permission
        for group, info in sorted(v.clients.consumers.items()):
            for topic in sorted(info.subscription_table):
                if topic.startswith(reserved.RETRY_GROUP_TOPIC_PREFIX):
                    continue
                tc = v.topics.select(topic)
                if tc is None:
                    continue
                topic_perm = tc.perm & broker_perm
                if not (perm.is_readable(topic_perm) or perm.is_writeable(topic_perm)):
                    continue
                lag = self._lag_of(group, topic, tc.write_queue_nums)
                values = self._values(
                    group, topic, "false", _bool(is_system_topic(topic) or is_system_group(group))
                )
                for field_name, fam in families.items():
                    fam.add_metric(values, getattr(lag, field_name))
        yield from families.values()

    # -- remoting ----------------------------------------------------------------------------
    def _rpc(self) -> Iterator[Metric]:
        fam = self._histogram("rocketmq_rpc_latency", "Rpc latency (milliseconds)",
            ("protocol_type", "request_code", "response_code", "is_long_polling", "result"),
        )  # fmt: skip
        rpc = self.view.rpc
        if rpc is not None:
            for (req, resp, long_polling, result), hist in sorted(rpc.histograms.items()):
                buckets = [(le(bound), n) for bound, n in hist.cumulative()]
                values = self._values(
                    "remoting", request_code_desc(req), response_code_desc(resp), _bool(long_polling), result
                )
                fam.add_metric(values, buckets, hist.total)
        yield fam

    # -- store -------------------------------------------------------------------------------
    def _storage(self) -> Iterator[Metric]:
        store = self.view.store
        labels = tuple(STORAGE_LABELS)
        values = self._values(*STORAGE_LABELS.values())
        try:
            usage = shutil.disk_usage(store.config.store_path_root_dir)
        except OSError:
            usage = None
        if usage is not None and usage.total > 0:
            fam = self._gauge("rocketmq_storage_size", "Broker storage size (bytes)", labels)
            fam.add_metric(values, usage.total - usage.free)
            yield fam
        fam = self._gauge("rocketmq_storage_flush_behind_bytes", "Broker flush behind bytes", labels)
        fam.add_metric(values, max(store.written_end - store.durable_end, 0))
        yield fam
        fam = self._gauge("rocketmq_storage_dispatch_behind_bytes", "Broker dispatch behind bytes", labels)
        fam.add_metric(values, int(store.runtime_info()["dispatchBehindBytes"]))
        yield fam
        first = store.look_message_by_offset(store.min_phy_offset) if store.max_phy_offset else None
        if first is not None and first.store_timestamp > 0:
            fam = self._gauge(
                "rocketmq_storage_message_reserve_time", "Broker message reserve time (milliseconds)", labels
            )
            fam.add_metric(values, self.view.clock.now_ms() - first.store_timestamp)
            yield fam


def le(bound: float) -> str:
    return "+Inf" if bound == float("inf") else f"{float(bound)}"
