"""RocketMQ 5's metrics after real traffic from our SDK: what GET /metrics (metricsExporterType=PROM)
shows matches what was sent and consumed, under RocketMQ's names and labels."""

from __future__ import annotations

import asyncio
import json
import re
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from rocketlite.broker.config import MetricsExporterType
from rocketlite.client import AsyncProducer, AsyncPushConsumer, ConsumeStatus, Message, MessageQueue
from rocketlite.client.offset_store import ReadOffsetType
from rocketlite.embedded import EmbeddedCluster, embedded
from tests.support.aio import run
from tests.support.names import unique
from tests.support.ports import free_port
from tests.support.sdk import Collector
from tests.support.topics import create_topic

pytestmark = pytest.mark.timeout(90)

DOCS = Path(__file__).resolve().parents[2] / "docs"

Samples = dict[str, list[tuple[dict[str, str], float]]]


def scrape(port: int) -> Samples:
    """Sample name -> (labels, value) of every sample; a family without samples (a counter nothing
    has counted yet) is there as its name with no samples."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
        text = resp.read().decode()
    out: Samples = {}
    for family in text_string_to_metric_families(text):
        out.setdefault(family.name + ("_total" if family.type == "counter" else ""), [])
        for s in family.samples:
            out.setdefault(s.name, []).append((dict(s.labels), s.value))
    return out


def value(samples: Samples, name: str, **labels: str) -> float:
    """The one sample of `name` whose labels include `labels`."""
    found = [v for ls, v in samples.get(name, []) if all(ls.get(k) == x for k, x in labels.items())]
    assert len(found) == 1, (name, labels, samples.get(name))
    return found[0]


@pytest.fixture
def metrics_cluster(tmp_path: Path) -> Any:
    port = free_port()
    with embedded(
        tmp_path / "store",
        metrics_exporter_type=MetricsExporterType.PROM,
        metrics_prom_exporter_host="127.0.0.1",
        metrics_prom_exporter_port=port,
    ) as c:
        yield c, port


def test_sdk_traffic_shows_in_rocketmq_families(metrics_cluster: tuple[EmbeddedCluster, int]) -> None:
    cluster, port = metrics_cluster
    topic, group, pgroup = unique("MetT"), unique("MetG"), unique("MetP")
    create_topic(cluster, topic, queues=2)
    n_sent, n_consumed = 7, 7
    base = {"cluster": "DefaultCluster", "node_type": "broker", "node_id": "broker-a"}

    async def main() -> tuple[Samples, Samples]:
        got = Collector()
        async with AsyncProducer(pgroup, cluster.namesrv_addr) as producer:
            for i in range(n_sent):
                await producer.send(Message(topic, f"body-{i}".encode()))
            consumer = AsyncPushConsumer(group, cluster.namesrv_addr)
            consumer.subscribe(topic, "*")

            async def listener(msgs: list[Any], _ctx: Any) -> ConsumeStatus:
                await got.add(*msgs)
                return ConsumeStatus.CONSUME_SUCCESS

            consumer.register_message_listener(listener)
            await consumer.start()
            try:
                await got.wait_count(n_consumed)
                await consumer.persist_offsets()
                loop = asyncio.get_running_loop()
                during = await loop.run_in_executor(None, scrape, port)
            finally:
                await consumer.close()
            after = await loop.run_in_executor(None, scrape, port)
        return during, after

    during, after = run(main())
    labels = {**base, "topic": topic}
    assert (
        value(during, "rocketmq_messages_in_total", **labels, message_type="normal", is_system="false")
        == n_sent
    )
    assert value(during, "rocketmq_message_size_count", **labels, message_type="normal") == n_sent
    assert value(during, "rocketmq_throughput_in_total", **labels) > n_sent * len("body-0")
    assert value(during, "rocketmq_messages_out_total", **labels, consumer_group=group) == n_consumed
    assert value(during, "rocketmq_throughput_out_total", **labels, consumer_group=group) > 0
    assert (
        value(during, "rocketmq_producer_connections", **base, language="python", protocol_type="remoting")
        >= 1
    )
    assert (
        value(during, "rocketmq_consumer_connections", **base, consumer_group=group, consume_mode="push") == 1
    )
    lag_labels = {**labels, "consumer_group": group, "is_retry": "false", "is_system": "false"}
    assert value(during, "rocketmq_consumer_lag_messages", **lag_labels) == 0
    assert value(during, "rocketmq_consumer_inflight_messages", **lag_labels) == 0
    assert value(during, "rocketmq_consumer_ready_messages", **lag_labels) == 0
    assert value(during, "rocketmq_consumer_lag_latency", **lag_labels) == 0
    pulls = value(
        during, "rocketmq_rpc_latency_count", **base, request_code="pull_message", response_code="success"
    )
    assert pulls >= 1
    assert value(during, "rocketmq_topic_number", **base) >= 1
    # the consumer gone: its group's lag is no longer reported, the counters stay
    assert not [
        ls for ls, _ in after.get("rocketmq_consumer_lag_messages", []) if ls.get("consumer_group") == group
    ]
    assert value(after, "rocketmq_messages_in_total", **labels) == n_sent
    # docs/operations/grafana-rocketmq5.json: valid JSON, every metric its queries name is served
    dashboard = json.loads((DOCS / "operations" / "grafana-rocketmq5.json").read_text(encoding="utf-8"))
    exprs = [t["expr"] for panel in dashboard["panels"] for t in panel["targets"]]
    named = {name for expr in exprs for name in re.findall(r"\b(rocketmq_[a-z_]+)\b", expr)}
    assert len(named) >= 26, named  # timer, POP and transaction panels included
    missing = sorted(n for n in named if n not in during)
    assert not missing, f"the dashboard queries metrics /metrics does not serve: {missing}"


def test_lag_of_an_online_group_that_has_not_consumed(metrics_cluster: tuple[EmbeddedCluster, int]) -> None:
    """Lag counts what the group has not committed; latency is the age of the first such message."""
    cluster, port = metrics_cluster
    topic, group = unique("LagT"), unique("LagG")
    create_topic(cluster, topic, queues=1)

    async def main() -> Samples:
        async with AsyncProducer(unique("LagP"), cluster.namesrv_addr) as producer:
            consumer = AsyncPushConsumer(group, cluster.namesrv_addr)
            consumer.subscribe(topic, "*")
            gate = asyncio.Event()
            arrived = asyncio.Event()
            seen: list[Any] = []

            async def listener(msgs: list[Any], _ctx: Any) -> ConsumeStatus:
                seen.extend(msgs)
                if len(seen) >= 3:
                    arrived.set()  # pulled (the broker counted them) and held: in flight
                await gate.wait()  # holds the pulled messages: in flight, not committed
                return ConsumeStatus.CONSUME_SUCCESS

            consumer.register_message_listener(listener)
            await consumer.start()
            try:
                for i in range(3):
                    await producer.send(Message(topic, f"x{i}".encode()))
                async with asyncio.timeout(20):
                    await arrived.wait()
                await consumer.persist_offsets()  # one-way: the group's offset, where it started
                # a two-way read on the same connection is answered after the one-way commit
                mq = MessageQueue(topic, "broker-a", 0)
                assert await consumer.offset_store.read(mq, ReadOffsetType.STORE) == 0
                samples = await asyncio.get_running_loop().run_in_executor(None, scrape, port)
                gate.set()
                return samples
            finally:
                gate.set()
                await consumer.close()

    samples = run(main())
    labels = {"topic": topic, "consumer_group": group}
    assert value(samples, "rocketmq_consumer_lag_messages", **labels) == 3
    assert value(samples, "rocketmq_consumer_inflight_messages", **labels) == 3
    assert value(samples, "rocketmq_consumer_ready_messages", **labels) == 0
    assert value(samples, "rocketmq_consumer_lag_latency", **labels) > 0
