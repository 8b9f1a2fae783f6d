"""RocketMQ 5's timer, POP and transaction families, the rpc latency labels and rocketlite's role
family, after real traffic: a timer message through the SDK, a POP receive, redelivery and ack over
the wire, a transaction committed and one rolled back by the SDK's transaction producer."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from rocketlite.broker.config import MetricsExporterType
from rocketlite.broker.failover.epochs import EpochFile, epoch_file_path
from rocketlite.client import (
    AsyncProducer,
    AsyncPullConsumer,
    AsyncTransactionProducer,
    LocalTransactionState,
    Message,
)
from rocketlite.protocol.codes import PullSysFlag, ResponseCode
from rocketlite.protocol.formats.epoch_file import EpochEntry
from rocketlite.protocol.requests.pull import build_pull, parse_pull
from rocketlite.remoting.client import RemotingClient
from tests.broker.test_metrics_traffic import Samples, metrics_cluster, scrape, value
from tests.support.aio import run
from tests.support.broker_harness import broker_under_test
from tests.support.names import unique
from tests.support.pop_client import ack, handles, pop
from tests.support.sdk import wait_messages
from tests.support.topics import create_topic
from tests.support.wire import send_command

__all__ = ["metrics_cluster"]  # the fixture, shared with the traffic test

pytestmark = pytest.mark.timeout(90)

STORE = {"storage_type": "local", "storage_medium": "disk"}


class _Decide:
    """Commits bodies starting with "c", rolls back the others."""

    def execute_local_transaction(self, msg: Message, arg: Any) -> LocalTransactionState:
        return LocalTransactionState.COMMIT_MESSAGE if msg.body[:1] == b"c" else (
            LocalTransactionState.ROLLBACK_MESSAGE
        )  # fmt: skip

    async def check_local_transaction(self, msg: Any) -> LocalTransactionState:
        return LocalTransactionState.ROLLBACK_MESSAGE


def test_timer_pop_and_transaction_families(metrics_cluster: tuple[Any, int]) -> None:
    cluster, port = metrics_cluster
    timer_topic, pop_topic, tx_topic = unique("TmT"), unique("PopT"), unique("TxT")
    pop_group = unique("PopG")
    for topic in (timer_topic, pop_topic, tx_topic):
        create_topic(cluster, topic, queues=1)

    async def main() -> tuple[Samples, Samples, Samples, Samples]:
        loop = asyncio.get_running_loop()
        async with (
            AsyncProducer(unique("TmP"), cluster.namesrv_addr) as producer,
            AsyncPullConsumer(unique("TmR"), cluster.namesrv_addr, heartbeat=False) as reader,
        ):
            due = int(time.time() * 1000) + 1500
            await producer.send(Message(timer_topic, b"later", properties={"TIMER_DELIVER_MS": str(due)}))
            parked = await loop.run_in_executor(None, scrape, port)
            [delivered] = await wait_messages(reader, timer_topic, 1, timeout=20)
            assert delivered.body == b"later"
            timers = await loop.run_in_executor(None, scrape, port)

            # POP: receive with 1 ms invisible time, take it back (redelivery), ack it
            await producer.send(Message(pop_topic, b"popped"))
            client = RemotingClient()
            try:
                addr, name = cluster.broker_addr, cluster.broker.broker.broker_name
                first = await pop(client, addr, pop_group, pop_topic, invisible_ms=1)
                assert first.code == ResponseCode.SUCCESS, first.remark
                popped_at = time.monotonic()
                while time.monotonic() < popped_at + 0.005:  # past its 1 ms invisible time
                    await asyncio.sleep(0.005)
                waiting = await loop.run_in_executor(None, scrape, port)
                again = await pop(client, addr, pop_group, pop_topic, poll_ms=5000)
                [(record, handle)] = handles(again, name)
                assert record.reconsume_times == 1
                assert (await ack(client, addr, pop_group, record, handle)).code == ResponseCode.SUCCESS
            finally:
                await client.close()

            # transactions: the rollback's END_TRANSACTION goes first on the connection, so the
            # committed message being readable means both ends were handled
            tx = AsyncTransactionProducer(unique("TxP"), cluster.namesrv_addr, listener=_Decide())
            async with tx:
                await tx.send_message_in_transaction(Message(tx_topic, b"rollback"), None)
                await tx.send_message_in_transaction(Message(tx_topic, b"commit"), None)
                [committed] = await wait_messages(reader, tx_topic, 1, timeout=20)
                assert committed.body == b"commit"
            done = await loop.run_in_executor(None, scrape, port)
        return parked, timers, waiting, done

    parked, timers, waiting, done = run(main())
    t = {**STORE, "topic": timer_topic}
    # before delivery the timer is either still in the timer queue or read and pending
    assert (
        value(parked, "rocketmq_timer_enqueue_lag", **STORE)
        + sum(v for ls, v in parked.get("rocketmq_timing_messages", []) if ls.get("topic") == timer_topic)
        == 1
    )
    assert value(timers, "rocketmq_timer_enqueue_total", **t) == 1
    assert value(timers, "rocketmq_timer_dequeue_total", **t) == 1
    assert value(timers, "rocketmq_delay_message_latency_count", **t) == 1
    assert not [ls for ls, _ in timers.get("rocketmq_timing_messages", []) if ls.get("topic") == timer_topic]
    assert value(timers, "rocketmq_timer_enqueue_lag", **STORE) == 0
    assert value(timers, "rocketmq_timer_dequeue_lag", **STORE) == 0
    bounds = [ls["timer_bound_s"] for ls, _ in timers["rocketmq_timer_message_snapshot"]]
    assert bounds == ["5", "60", "300", "900", "3600", "14400", "28800", "86400"]

    g = {"consumer_group": pop_group, "topic": pop_topic}
    assert value(waiting, "rocketmq_pop_revive_lag", queue_id="0") >= 1
    assert value(waiting, "rocketmq_pop_revive_latency", queue_id="0") >= 0
    assert value(done, "rocketmq_pop_revive_in_message_total", **g, revive_message_type="CK") == 2
    assert value(done, "rocketmq_pop_revive_in_message_total", **g, revive_message_type="ACK") == 1
    assert value(done, "rocketmq_pop_revive_out_message_total", **g, revive_message_type="CK") == 1
    assert value(done, "rocketmq_pop_revive_retry_messages_total", **g, put_status="PUT_OK") == 1
    assert value(done, "rocketmq_pop_revive_lag", queue_id="0") == 0
    # the POP log's lengths: its 16-byte header and the records of those two pops and the ack
    written, flushed = (
        value(done, "rocketlite_pop_log_written_bytes"),
        value(done, "rocketlite_pop_log_flushed_bytes"),
    )
    assert 16 <= flushed <= written and written > 16 and value(done, "rocketlite_pop_log_epoch") == 0

    assert value(done, "rocketmq_commit_messages_total", topic=tx_topic) == 1
    assert value(done, "rocketmq_rollback_messages_total", topic=tx_topic) == 1
    assert value(done, "rocketmq_finish_message_latency_count", topic=tx_topic) == 1
    assert not [ls for ls, v in done.get("rocketmq_half_messages", []) if ls.get("topic") == tx_topic and v]

    assert value(done, "rocketlite_broker_role", role="ASYNC_MASTER") == 1
    assert "rocketlite_broker_epoch" not in done  # controller mode only
    sends = value(
        done, "rocketmq_rpc_latency_count", request_code="send_message_v2", response_code="success",
        is_long_polling="false", result="success",
    )  # fmt: skip
    assert sends >= 3
    assert value(done, "rocketmq_broker_permission") == 6


def test_a_held_pull_is_timed_as_long_polling(metrics_cluster: tuple[Any, int]) -> None:
    """A pull parked for long polling and answered when a message arrives: is_long_polling="true"."""
    cluster, port = metrics_cluster
    topic, group = unique("LpT"), unique("LpG")
    create_topic(cluster, topic, queues=1)

    async def main() -> Samples:
        client = RemotingClient()
        try:
            addr = cluster.broker_addr
            request = build_pull(group=group, topic=topic, queue_id=0, offset=0, max_nums=32,
                                 sys_flag=PullSysFlag.SUBSCRIPTION | PullSysFlag.SUSPEND,
                                 suspend_timeout_ms=15_000)  # fmt: skip
            held = asyncio.ensure_future(client.invoke(addr, request, 20.0))
            await asyncio.sleep(0)  # the pull leaves first, on the connection the send then uses
            send = send_command(topic, b"wakes it", queue_id=0, group=unique("LpP"))
            assert (await client.invoke(addr, send, 5.0)).code == ResponseCode.SUCCESS
            woken = parse_pull(await held)
            assert [r.body for r in woken.records()] == [b"wakes it"]
        finally:
            await client.close()
        return await asyncio.get_running_loop().run_in_executor(None, scrape, port)

    samples = run(main())
    assert value(
        samples, "rocketmq_rpc_latency_count", request_code="pull_message", response_code="success",
        is_long_polling="true", result="success",
    ) == 1  # fmt: skip


def test_controller_mode_role_and_epoch(tmp_path: Path) -> None:
    """In controller mode the epoch file's last epoch is `rocketlite_broker_epoch`; the role and
    `rocketmq_broker_permission` follow the broker's config (read-only here: 4)."""

    async def scenario() -> str:
        root = tmp_path / "store"
        root.mkdir(parents=True)
        EpochFile(epoch_file_path(None, root)).save([EpochEntry(1, 0), EpochEntry(3, 4096)])
        async with broker_under_test(
            root, enable_controller_mode=True, controller_addr="127.0.0.1:9", broker_permission=4,
            metrics_exporter_type=MetricsExporterType.PROM, metrics_prom_exporter_host="127.0.0.1",
            metrics_prom_exporter_port=0,
        ) as b:  # fmt: skip
            parts = b.controller.parts
            assert parts is not None and parts.metrics is not None
            return parts.metrics.exposition().decode()

    families = {f.name: f for f in text_string_to_metric_families(run(scenario()))}
    [epoch] = families["rocketlite_broker_epoch"].samples
    assert epoch.value == 3
    [role] = families["rocketlite_broker_role"].samples
    assert (role.labels["role"], role.value) == ("ASYNC_MASTER", 1)
    [permission] = families["rocketmq_broker_permission"].samples
    assert permission.value == 4
    # the truncation counters are the controller-mode process's (FailoverBroker; test_async_loss)
    assert "rocketlite_broker_truncated_messages" not in families
