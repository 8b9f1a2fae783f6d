"""Consumer side of `rocketlite.client` against a real embedded cluster: the push consumers
(clustering, broadcasting, orderly, retries and dead letters, flow control, offsets). The pull
consumer's own API (offset lookups, fetch, seek, poll, commit) is test_consumer_pull.py.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from rocketlite.broker.subscription_group import SubscriptionGroupConfig
from rocketlite.client import (
    AsyncProducer,
    AsyncPullConsumer,
    AsyncPushConsumer,
    ConsumeConcurrentlyContext,
    ConsumeFromWhere,
    ConsumeOrderlyContext,
    ConsumeOrderlyStatus,
    ConsumeStatus,
    Message,
    MessageExt,
    MessageModel,
    MessageQueue,
    PushConsumer,
    select_by_hash,
)
from rocketlite.client.errors import ClientStateError
from rocketlite.client.instance import CLIENT_INNER_PRODUCER_GROUP
from rocketlite.embedded import EmbeddedCluster
from rocketlite.protocol.message import MessageConst
from tests.support.aio import run
from tests.support.names import unique
from tests.support.sdk import Collector, wait_messages
from tests.support.topics import create_topic as create_routed_topic


def ok_listener(collector: Collector) -> Any:
    async def listener(msgs: list[MessageExt], ctx: ConsumeConcurrentlyContext) -> ConsumeStatus:
        await collector.add(*msgs)
        return ConsumeStatus.CONSUME_SUCCESS

    return listener


async def create_topic(producer: AsyncProducer, topic: str) -> list[MessageQueue]:
    """Make the topic exist (auto-created on first send) and return its queues."""
    await producer.send(Message(topic, b"create"))
    return await producer.fetch_publish_queues(topic)


def test_push_clustering_split_and_rebalance_on_leave(embedded_cluster: EmbeddedCluster) -> None:
    topic, group = unique("ConsSplit"), unique("cg")

    async def main() -> None:
        assignments: dict[str, list[MessageQueue]] = {}
        changed = Collector()

        def on_change(name: str) -> Any:
            def listener(t: str, mq_all: list[MessageQueue], mine: list[MessageQueue]) -> None:
                if t == topic:
                    assignments[name] = mine
                    changed.push(name)

            return listener

        got = Collector()  # (consumer name, message)

        def tagged(name: str) -> Any:
            async def listener(msgs: list[MessageExt], ctx: ConsumeConcurrentlyContext) -> ConsumeStatus:
                await got.add(*((name, m) for m in msgs))
                return ConsumeStatus.CONSUME_SUCCESS

            return listener

        c1 = AsyncPushConsumer(
            group, embedded_cluster.namesrv_addr, instance_name="split-1", queue_listener=on_change("c1")
        )
        c2 = AsyncPushConsumer(
            group, embedded_cluster.namesrv_addr, instance_name="split-2", queue_listener=on_change("c2")
        )
        for c, name in ((c1, "c1"), (c2, "c2")):
            c.subscribe(topic, "*")
            c.register_message_listener(tagged(name))

        def bodies(items: list[tuple[str, MessageExt]], who: str | None = None) -> set[bytes]:
            return {m.body for name, m in items if who is None or name == who}

        async with AsyncProducer(unique("pg"), embedded_cluster.namesrv_addr) as producer:
            queues = await create_topic(producer, topic)
            await c1.start()
            await c2.start()

            def split(_: list[Any]) -> bool:
                a, b = assignments.get("c1", []), assignments.get("c2", [])
                return len(a) == 2 and len(b) == 2 and set(a) | set(b) == set(queues)

            await changed.wait_for(split)
            for i in range(20):
                await producer.send(Message(topic, f"m{i}".encode()))
            expected = {f"m{i}".encode() for i in range(20)}
            await got.wait_for(lambda items: bodies(items) >= expected)
            for name in ("c1", "c2"):
                mine = {mq.queue_id for mq in assignments[name]}
                theirs = {m.queue_id for who, m in got.items if who == name and m.body in expected}
                assert theirs and theirs <= mine  # each consumer only sees its own queues

            await c2.close()  # commits its offsets, unregisters: the broker tells c1 to rebalance
            await changed.wait_for(lambda _: len(assignments["c1"]) == 4)
            for i in range(20, 40):
                await producer.send(Message(topic, f"m{i}".encode()))
            late = {f"m{i}".encode() for i in range(20, 40)}
            await got.wait_for(lambda items: bodies(items, "c1") >= late)
            # c2 committed on close, so c1 does not see c2's share again
            assert not bodies(got.items, "c1") & (bodies(got.items, "c2") & expected)
            await c1.close()

    run(main(), timeout=60)


def test_broadcasting_local_offsets(embedded_cluster: EmbeddedCluster, tmp_path: Path) -> None:
    topic, group = unique("ConsBroadcast"), unique("cg")

    async def main() -> None:
        collectors = [Collector(), Collector()]
        ready = Collector()  # consumers that own all 4 queues (offsets found, pulling)
        consumers = []

        def on_ready(i: int) -> Any:
            def listener(t: str, mq_all: list[MessageQueue], mine: list[MessageQueue]) -> None:
                if t == topic and len(mine) == 4:
                    ready.push(i)

            return listener

        for i, got in enumerate(collectors):
            c = AsyncPushConsumer(
                group,
                embedded_cluster.namesrv_addr,
                instance_name=f"bc-{i}",
                message_model=MessageModel.BROADCASTING,
                offset_store_dir=tmp_path,
                queue_listener=on_ready(i),
            )
            c.subscribe(topic)
            c.register_message_listener(ok_listener(got))
            consumers.append(c)
        async with AsyncProducer(unique("pg"), embedded_cluster.namesrv_addr) as producer:
            await create_topic(producer, topic)
            for c in consumers:
                await c.start()
            await ready.wait_for(lambda items: set(items) == {0, 1})
            for i in range(10):
                await producer.send(Message(topic, f"b{i}".encode()))
            expected = {f"b{i}".encode() for i in range(10)}  # from the max offset: "create" is before
            for got in collectors:  # every member gets every message
                await got.wait_for(lambda items: {m.body for m in items} >= expected)
            client_id = consumers[0].instance.client_id
            for c in consumers:
                await c.close()
            files = sorted(tmp_path.glob(f"*/{group}/offsets.json"))
            assert len(files) == 2
            text = files[0].read_text()
            assert text.startswith('{"offsetTable":{{"brokerName":"broker-a","queueId":')  # Java's format
            assert client_id.split("@")[0] in str(files[0]) or client_id.split("@")[0] in str(files[1])

            # Restart one member: it resumes from its file, so only the new message arrives.
            again = Collector()
            c = AsyncPushConsumer(
                group,
                embedded_cluster.namesrv_addr,
                instance_name="bc-0",
                message_model=MessageModel.BROADCASTING,
                offset_store_dir=tmp_path,
            )
            c.subscribe(topic)
            c.register_message_listener(ok_listener(again))
            await c.start()
            await producer.send(Message(topic, b"after-restart"))
            await again.wait_for(lambda items: any(m.body == b"after-restart" for m in items))
            assert [m.body for m in again.items] == [b"after-restart"]
            await c.close()

    run(main(), timeout=60)


def test_orderly_consumer_keeps_order_and_retries_in_place(embedded_cluster: EmbeddedCluster) -> None:
    topic, group = unique("ConsOrder"), unique("cg")

    async def main() -> None:
        got = Collector()
        failed_once: set[str] = set()

        async def listener(msgs: list[MessageExt], ctx: ConsumeOrderlyContext) -> ConsumeOrderlyStatus:
            body = msgs[0].body.decode()
            if body.endswith("-3") and body not in failed_once:  # fail once: same message comes again first
                failed_once.add(body)
                ctx.suspend_current_queue_time_millis = 10
                return ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT
            await got.add((ctx.queue.queue_id, body, msgs[0].reconsume_times))
            return ConsumeOrderlyStatus.SUCCESS

        # From the first offset: the sends start while the consumer still claims its queues, and a
        # queue claimed empty (QUERY_NOT_FOUND) that a send lands on before its max-offset read
        # would otherwise start past that message (as in test_tag_filter_and_batch_listener).
        consumer = AsyncPushConsumer(
            group, embedded_cluster.namesrv_addr, instance_name="orderly-1",
            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        )  # fmt: skip
        consumer.subscribe(topic)
        consumer.register_message_listener_orderly(listener)
        async with AsyncProducer(unique("pg"), embedded_cluster.namesrv_addr) as producer:
            await create_topic(producer, topic)
            await consumer.start()
            for step in range(8):
                for order in range(3):
                    await producer.send(
                        Message(topic, f"order{order}-{step}".encode()), selector=select_by_hash, arg=order
                    )
            await got.wait_for(lambda items: sum(1 for i in items if i[1].startswith("order")) >= 24)
            await consumer.close()
        for order in range(3):
            seq = [(q, b, r) for q, b, r in got.items if b.startswith(f"order{order}-")]
            assert [b for _, b, _ in seq] == [f"order{order}-{s}" for s in range(8)]
            assert len({q for q, _, _ in seq}) == 1
            assert [r for _, b, r in seq if b.endswith("-3")] == [1]  # retried locally, counted
        assert len(failed_once) == 3

    run(main(), timeout=60)


def test_the_inner_producer_is_made_by_the_push_consumers_factory(embedded_cluster: EmbeddedCluster) -> None:
    """The client instance's own producer (send-back fallbacks) is made by the factory a push
    consumer hands the shared instance, even when a producer started that instance first; an
    instance that was given none says so instead of making one itself."""
    topic, group = unique("ConsInner"), unique("cg")

    async def main() -> None:
        async def listener(msgs: list[MessageExt], ctx: ConsumeConcurrentlyContext) -> ConsumeStatus:
            return ConsumeStatus.CONSUME_SUCCESS

        async with AsyncProducer(
            unique("pg"), embedded_cluster.namesrv_addr, instance_name="inner-1"
        ) as producer:
            await create_topic(producer, topic)
            with pytest.raises(ClientStateError, match="no producer factory"):
                await producer.instance.inner_producer()
            consumer = AsyncPushConsumer(group, embedded_cluster.namesrv_addr, instance_name="inner-1")
            consumer.subscribe(topic)
            consumer.register_message_listener(listener)
            await consumer.start()
            assert consumer.instance is producer.instance
            inner = await consumer.instance.inner_producer()
            assert isinstance(inner, AsyncProducer) and inner.group == CLIENT_INNER_PRODUCER_GROUP
            assert await consumer.instance.inner_producer() is inner
            sent = await inner.send(Message(topic, b"through the inner producer"))
            assert sent.msg_id
            await consumer.close()

    run(main(), timeout=60)


def test_retry_then_dead_letter(embedded_cluster: EmbeddedCluster) -> None:
    topic, group = unique("ConsRetry"), unique("cg")
    embedded_cluster.broker.groups.update(SubscriptionGroupConfig(group, retry_max_times=2))

    async def main() -> None:
        attempts = Collector()

        async def listener(msgs: list[MessageExt], ctx: ConsumeConcurrentlyContext) -> ConsumeStatus:
            for m in msgs:
                await attempts.add(m)
            return ConsumeStatus.RECONSUME_LATER

        # From the first offset: "poison" is sent while the consumer still claims its queues (see
        # test_orderly_consumer_keeps_order_and_retries_in_place)
        consumer = AsyncPushConsumer(
            group, embedded_cluster.namesrv_addr, instance_name="retry-1",
            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        )  # fmt: skip
        consumer.subscribe(topic)
        consumer.register_message_listener(listener)
        async with AsyncProducer(unique("pg"), embedded_cluster.namesrv_addr) as producer:
            await create_topic(producer, topic)
            await consumer.start()
            sent = await producer.send(Message(topic, b"poison", tags="T", keys="poison-key"))
            tries = await attempts.wait_for(
                lambda items: sum(1 for m in items if m.body == b"poison") >= 3, timeout=20
            )
            poison = [m for m in tries if m.body == b"poison"]
            assert [m.reconsume_times for m in poison][:3] == [0, 1, 2]
            assert all(m.topic == topic for m in poison)  # original topic restored from RETRY_TOPIC
            assert poison[1].properties[MessageConst.RETRY_TOPIC] == topic
            assert all(m.msg_id == sent.msg_id for m in poison)
            async with AsyncPullConsumer(
                unique("dlq-reader"), embedded_cluster.namesrv_addr, heartbeat=False
            ) as reader:
                # "create" fails as well, so two messages end up there
                dead_letters = await wait_messages(reader, f"%DLQ%{group}", 2, timeout=15)
            [dead] = [m for m in dead_letters if m.body == b"poison"]
            assert dead.body == b"poison" and dead.msg_id == sent.msg_id
            assert dead.properties[MessageConst.RETRY_TOPIC] == topic
            assert dead.reconsume_times == 3
            await consumer.close()

    run(main(), timeout=60)


def test_a_route_that_comes_late_is_picked_up_within_a_second(embedded_cluster: EmbeddedCluster) -> None:
    """A subscribed topic without a route is looked for again at least every second while it has
    none (`UNSETTLED_RETRY_MAX_S`, Java's minInterval), not after a backoff grown to 6.4 s and then
    12.8 s: the topic is created after the sixth unsettled round (about 3.4 s in; 6.2 s with the
    old backoff, whose next look came 6.4 s later) and its queues are taken within 3 s of the name
    server routing it. This is what made test_retry_then_dead_letter wait over 20 s once, when its
    %RETRY% topic's route came a few seconds late on a loaded machine."""
    topic, group = unique("ConsLate"), unique("cg")
    rounds: list[float] = []  # monotonic time of each unsettled round that looked for the route
    six_rounds = asyncio.Event()

    class Rounds(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if record.args and topic in record.args and "still has no route" in record.msg:
                rounds.append(time.monotonic())
                if len(rounds) >= 6:
                    six_rounds.set()

    async def main() -> None:
        taken = asyncio.Event()

        def listener(t: str, all_mqs: list[MessageQueue], mine: list[MessageQueue]) -> None:
            if t == topic and mine:
                taken.set()

        consumer = AsyncPushConsumer(group, embedded_cluster.namesrv_addr, queue_listener=listener)
        consumer.subscribe(topic)
        consumer.register_message_listener(ok_listener(Collector()))
        await consumer.start()
        try:
            await asyncio.wait_for(six_rounds.wait(), 30)
            await asyncio.to_thread(create_routed_topic, embedded_cluster, topic)
            routed = time.monotonic()
            await asyncio.wait_for(taken.wait(), 30)
            gaps = [round(b - a, 2) for a, b in itertools.pairwise(rounds)]
            assert time.monotonic() - routed < 3.0, f"queues taken late; gaps between rounds: {gaps}"
        finally:
            await consumer.close()

    log = logging.getLogger("rocketlite.client.rebalance")
    handler, level = Rounds(logging.DEBUG), log.level
    log.addHandler(handler)
    log.setLevel(logging.DEBUG)
    try:
        run(main(), timeout=60)
    finally:
        log.removeHandler(handler)
        log.setLevel(level)


def test_flow_control_pauses_pulling(embedded_cluster: EmbeddedCluster) -> None:
    topic, group = unique("ConsFlow"), unique("cg")

    async def main() -> None:
        gate = asyncio.Event()
        seen_counts = Collector()  # process-queue sizes the listener observed
        got = Collector()
        consumer = AsyncPushConsumer(
            group,
            embedded_cluster.namesrv_addr,
            instance_name="flow-1",
            pull_threshold_for_queue=5,
            pull_batch_size=4,
        )

        async def listener(msgs: list[MessageExt], ctx: ConsumeConcurrentlyContext) -> ConsumeStatus:
            rebalancer = consumer._rebalancer  # peeking at the process queue size
            assert rebalancer is not None
            await seen_counts.add(sum(pq.count for pq in rebalancer.process_queues.values()))
            await gate.wait()  # hold every message: the queue fills up
            await got.add(*msgs)
            return ConsumeStatus.CONSUME_SUCCESS

        consumer.subscribe(topic)
        consumer.register_message_listener(listener)
        async with AsyncProducer(unique("pg"), embedded_cluster.namesrv_addr) as producer:
            queues = await create_topic(producer, topic)
            for i in range(40):
                await producer.send(Message(topic, f"f{i}".encode()), queue=queues[0])
            await consumer.start()
            # Two pulls of 4 exceed the threshold of 5: the third pull waits for space.
            await seen_counts.wait_for(lambda counts: max(counts, default=0) > 5)
            assert consumer.flow_control_times > 0
            gate.set()
            await got.wait_for(lambda items: len({m.body for m in items if m.body != b"create"}) >= 40)
            assert max(seen_counts.items) <= 5 + 4  # never more than threshold + one pull batch
            await consumer.close()

    run(main(), timeout=60)


def test_consume_from_committed_offset_after_restart(embedded_cluster: EmbeddedCluster) -> None:
    topic, group = unique("ConsResume"), unique("cg")

    async def main() -> None:
        async with AsyncProducer(unique("pg"), embedded_cluster.namesrv_addr) as producer:
            await create_topic(producer, topic)
            first = Collector()
            # From the first offset: a queue claimed empty (QUERY_NOT_FOUND) while a send lands on
            # it would otherwise start at the max offset read just after, past that message.
            c = AsyncPushConsumer(
                group, embedded_cluster.namesrv_addr, instance_name="resume-1",
                consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
            )  # fmt: skip
            c.subscribe(topic)
            c.register_message_listener(ok_listener(first))
            await c.start()
            for i in range(10):
                await producer.send(Message(topic, f"r{i}".encode()))
            await first.wait_for(lambda items: len({m.body for m in items}) >= 11)
            await c.close()  # offsets committed synchronously before UNREGISTER_CLIENT

            second = Collector()
            c = AsyncPushConsumer(group, embedded_cluster.namesrv_addr, instance_name="resume-1")
            c.subscribe(topic)
            c.register_message_listener(ok_listener(second))
            await c.start()
            await producer.send(Message(topic, b"new"))
            await second.wait_for(lambda items: any(m.body == b"new" for m in items))
            assert [m.body for m in second.items] == [b"new"]
            await c.close()

    run(main(), timeout=60)


def test_tag_filter_and_batch_listener(embedded_cluster: EmbeddedCluster) -> None:
    topic, group = unique("ConsTags"), unique("cg")

    async def main() -> None:
        got = Collector()
        batch_sizes: list[int] = []

        async def listener(msgs: list[MessageExt], ctx: ConsumeConcurrentlyContext) -> ConsumeStatus:
            batch_sizes.append(len(msgs))
            await got.add(*msgs)
            return ConsumeStatus.CONSUME_SUCCESS

        # From the first offset: queue 0 may still be empty (the "create" message went to another
        # queue) when the consumer asks for its offset (QUERY_NOT_FOUND), and the batch may land
        # before it reads the max offset, which would then start it past all 18 messages.
        consumer = AsyncPushConsumer(
            group, embedded_cluster.namesrv_addr, instance_name="tags-1", consume_message_batch_max_size=8,
            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        )  # fmt: skip
        consumer.subscribe(topic, "TagA || TagB")
        consumer.register_message_listener(listener)
        async with AsyncProducer(unique("pg"), embedded_cluster.namesrv_addr) as producer:
            queues = await create_topic(producer, topic)
            await consumer.start()
            msgs = [
                Message(topic, f"{tag}{i}".encode(), tags=tag)
                for i in range(6)
                for tag in ("TagA", "TagB", "TagC")
            ]
            await producer.send_batch(msgs, queue=queues[0])
            await got.wait_for(lambda items: len(items) >= 12)
            await consumer.close()
        assert sorted({m.tags for m in got.items}) == ["TagA", "TagB"]
        assert max(batch_sizes) > 1

    run(main(), timeout=60)


def test_sync_push_consumer_with_plain_listener(embedded_cluster: EmbeddedCluster) -> None:
    topic, group = unique("ConsSyncFacade"), unique("cg")
    received: list[bytes] = []
    threads: set[str] = set()
    done = threading.Event()

    def listener(msgs: list[MessageExt], ctx: ConsumeConcurrentlyContext) -> ConsumeStatus:
        threads.add(threading.current_thread().name)
        received.extend(m.body for m in msgs)
        if len(received) >= 5:
            done.set()
        return ConsumeStatus.CONSUME_SUCCESS

    from rocketlite.client import Producer  # noqa: PLC0415

    with Producer(unique("pg"), embedded_cluster.namesrv_addr) as producer:
        for i in range(4):
            producer.send(Message(topic, f"s{i}".encode()))
        consumer = PushConsumer(group, embedded_cluster.namesrv_addr, instance_name="sync-1")
        consumer.subscribe(topic)
        consumer.register_message_listener(listener)
        with consumer:
            producer.send(Message(topic, b"s4"))
            assert done.wait(15)
            assert consumer.assigned_queues()
    assert sorted(received)[:5] == [b"s0", b"s1", b"s2", b"s3", b"s4"]
    assert all(name.startswith("rocketlite-consume") for name in threads)


def test_orderly_consumers_share_queues_through_broker_locks(embedded_cluster: EmbeddedCluster) -> None:
    topic, group = unique("ConsOrderLock"), unique("cg")

    async def main() -> None:
        got = Collector()  # (consumer name, order id, step)
        allocated: dict[str, list[MessageQueue]] = {}
        changed = Collector()

        def make(name: str) -> AsyncPushConsumer:
            async def listener(msgs: list[MessageExt], ctx: ConsumeOrderlyContext) -> ConsumeOrderlyStatus:
                for m in msgs:
                    if m.body == b"create":
                        continue
                    order, step = m.body.decode().split("-")
                    await got.add((name, order, int(step)))
                return ConsumeOrderlyStatus.SUCCESS

            def on_change(t: str, mq_all: list[MessageQueue], mine: list[MessageQueue]) -> None:
                if t == topic:
                    allocated[name] = mine
                    changed.push(name)

            # From the first offset: a consumer's listener hears of its queues even when it could
            # not lock them yet (the other still held them); it claims them on a later round, maybe
            # while the sends land (see test_orderly_consumer_keeps_order_and_retries_in_place). A
            # queue the other consumed from is unlocked only after its offset is committed, so this
            # never reads a message twice.
            c = AsyncPushConsumer(
                group, embedded_cluster.namesrv_addr, instance_name=f"lock-{name}", queue_listener=on_change,
                consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
            )  # fmt: skip
            c.subscribe(topic)
            c.register_message_listener_orderly(listener)
            return c

        def in_order(items: list[tuple[str, str, int]], orders: range, steps: range) -> bool:
            for order in orders:
                seq = [step for _, o, step in items if o == f"o{order}" and step in steps]
                if seq != list(steps):
                    return False
            return True

        async with AsyncProducer(unique("pg"), embedded_cluster.namesrv_addr) as producer:
            await create_topic(producer, topic)
            c1, c2 = make("c1"), make("c2")
            await c1.start()
            await c2.start()
            await changed.wait_for(
                lambda _: len(allocated.get("c1", [])) == len(allocated.get("c2", [])) == 2
            )
            for step in range(6):
                for order in range(4):
                    msg = Message(topic, f"o{order}-{step}".encode())
                    await producer.send(msg, selector=select_by_hash, arg=order)
            await got.wait_for(lambda items: in_order(items, range(4), range(6)), timeout=20)
            assert {name for name, _, _ in got.items} == {"c1", "c2"}

            await c2.close()  # unlocks its queues; c1 locks and continues from c2's committed offsets
            await changed.wait_for(lambda _: len(allocated["c1"]) == 4)
            for step in range(6, 10):
                for order in range(4):
                    await producer.send(
                        Message(topic, f"o{order}-{step}".encode()), selector=select_by_hash, arg=order
                    )
            await got.wait_for(lambda items: in_order(items, range(4), range(6, 10)), timeout=20)
            assert {name for name, _, step in got.items if step >= 6} == {"c1"}
            await c1.close()
        # each message exactly once: locks + committed offsets leave no overlap between owners
        keys = [(o, s) for _, o, s in got.items]
        assert len(keys) == len(set(keys)) == 40

    run(main(), timeout=60)


def test_offsets_persist_while_running(embedded_cluster: EmbeddedCluster) -> None:
    topic, group = unique("ConsPersist"), unique("cg")

    async def main() -> None:
        got = Collector()
        consumer = AsyncPushConsumer(group, embedded_cluster.namesrv_addr, instance_name="persist-1")
        consumer.subscribe(topic)
        consumer.register_message_listener(ok_listener(got))
        async with AsyncProducer(unique("pg"), embedded_cluster.namesrv_addr) as producer:
            mq = MessageQueue(topic, "broker-a", 2)
            for i in range(5):
                await producer.send(Message(topic, f"p{i}".encode()), queue=mq)
            await consumer.start()
            await got.wait_count(5)  # offsets are updated in memory before the listener's task yields
            await consumer.persist_offsets()  # what the 5 s timer does: one-way UPDATE_CONSUMER_OFFSET
            # Same instance name = same connection, so this query is answered after the update.
            async with AsyncPullConsumer(
                group, embedded_cluster.namesrv_addr, instance_name="persist-1", heartbeat=False
            ) as pc:
                assert await pc.committed(mq) == 5
            await consumer.close()

    run(main(), timeout=30)
