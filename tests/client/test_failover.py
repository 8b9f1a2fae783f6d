"""Two masters behind one name server: sends fail over when a broker goes away, consumers see both."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from rocketlite.broker.config import BrokerConfig
from rocketlite.broker.controller import BrokerController
from rocketlite.client import (
    AsyncProducer,
    AsyncPullConsumer,
    ClientConfig,
    Message,
    SendStatus,
)
from rocketlite.embedded import EmbeddedCluster, embedded
from rocketlite.store.config import StoreConfig
from tests.support.aio import run
from tests.support.names import unique
from tests.support.sdk import wait_messages


@pytest.fixture
def two_masters(tmp_path: Path) -> Iterator[tuple[EmbeddedCluster, BrokerController]]:
    with embedded() as cluster:
        second = BrokerController(
            BrokerConfig(
                broker_name="broker-b",
                listen_port=0,
                listen_host="127.0.0.1",
                namesrv_addr=cluster.namesrv_addr,
            ),
            StoreConfig(
                store_path_root_dir=tmp_path / "broker-b",
                maped_file_size_commit_log=16 * 1024 * 1024,
                maped_file_size_consume_queue=30_000 * 20,
                max_hash_slot_num=50_000,
                max_index_num=200_000,
            ),
        )
        cluster.runner.call(second.start())
        try:
            yield cluster, second
        finally:
            cluster.runner.call(second.close())


def test_send_fails_over_to_the_other_master(two_masters: tuple[EmbeddedCluster, BrokerController]) -> None:
    cluster, second = two_masters
    topic = unique("Failover")

    async def main() -> None:
        config = ClientConfig(cluster.namesrv_addr, instance_name=unique("failover"), request_timeout=1.0)
        async with AsyncProducer(unique("pg"), config=config, send_timeout=5) as producer:
            # TBW102 lives on both brokers, so the topic is created on both by round-robin sends.
            brokers = {(await producer.send(Message(topic, b"spread"))).queue.broker_name for _ in range(16)}
            assert brokers == {"broker-a", "broker-b"}
            await asyncio.wrap_future(cluster.runner.submit(second.close()))
            # The cached route still lists broker-b: each send to it fails to connect and is retried
            # on broker-a within the same call.
            results = [await producer.send(Message(topic, f"after{i}".encode())) for i in range(8)]
            assert all(r.status is SendStatus.SEND_OK for r in results)
            assert {r.queue.broker_name for r in results} == {"broker-a"}
            async with AsyncPullConsumer(unique("cg"), config=config, heartbeat=False) as reader:
                got = await wait_messages(reader, topic, 8 + 16 // 2)
            assert {m.body for m in got} >= {f"after{i}".encode() for i in range(8)}

    run(main(), timeout=60)
