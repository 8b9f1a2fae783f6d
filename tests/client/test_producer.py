"""Producer side of `rocketlite.client` against a real embedded name server + broker."""

from __future__ import annotations

import asyncio
import re
import socket
import threading
import time
from typing import Any

import pytest

from rocketlite.client import (
    AsyncProducer,
    AsyncPullConsumer,
    AsyncTransactionProducer,
    BrokerError,
    BrokerSystemError,
    ClientConfig,
    ClientError,
    LocalTransactionState,
    Message,
    MessageExt,
    MessageIllegalError,
    MessageQueue,
    NoPermissionError,
    Producer,
    RemotingConnectError,
    RemotingTimeoutError,
    SendResult,
    SendStatus,
    SystemBusyError,
    TopicNotExistError,
    TransactionProducer,
    for_code,
    select_by_hash,
    select_by_sharding_key,
)
from rocketlite.client.message import UniqIdGenerator
from rocketlite.clock import ManualClock
from rocketlite.embedded import EmbeddedCluster
from rocketlite.protocol.codes import ResponseCode
from rocketlite.protocol.errors import RocketliteError
from rocketlite.protocol.message import MessageConst, MessageSysFlag, parse_msg_id
from rocketlite.protocol.uniq_key import month_bounds
from tests.support.aio import run
from tests.support.names import unique
from tests.support.sdk import read_queues, wait_messages, wait_route

UNIQ_RE = re.compile(r"^[0-9A-F]{32}$")


def test_send_sync_result_and_round_trip(embedded_cluster: EmbeddedCluster) -> None:
    topic = unique("ProdSync")

    async def main() -> None:
        async with (
            AsyncProducer(unique("pg"), embedded_cluster.namesrv_addr) as producer,
            AsyncPullConsumer(unique("cg"), embedded_cluster.namesrv_addr, heartbeat=False) as reader,
        ):
            msg = Message(topic, b"hello", tags="TagA", keys=["k1", "k2"], properties={"color": "blue"})
            result = await producer.send(msg)
            assert result.status is SendStatus.SEND_OK
            assert UNIQ_RE.match(result.msg_id)
            stored_at = parse_msg_id(result.offset_msg_id)
            assert str(stored_at.address) == embedded_cluster.broker_addr
            assert result.queue.topic == topic and result.queue.broker_name == "broker-a"
            assert result.queue in await producer.fetch_publish_queues(topic)
            assert result.queue_offset == 0

            [got] = await read_queues(reader, [result.queue], 1)
            assert got.body == b"hello"
            assert got.tags == "TagA"
            assert got.keys == "k1 k2"
            assert got.properties["color"] == "blue"
            assert got.msg_id == result.msg_id  # UNIQ_KEY
            assert got.offset_msg_id == result.offset_msg_id
            assert got.commit_log_offset == stored_at.offset
            assert got.queue_offset == 0 and got.reconsume_times == 0

    run(main())


def test_uniq_id_layout() -> None:
    gen = UniqIdGenerator("10.1.2.3")
    a, b = gen.next_id(), gen.next_id()
    assert UNIQ_RE.match(a) and UNIQ_RE.match(b)
    assert a[:8] == "0A010203"  # client IP first, as MessageClientIDSetter
    assert a[:20] == b[:20] and a != b
    assert int(b[-4:], 16) == int(a[-4:], 16) + 1  # the counter


def test_the_sdk_clock_sets_the_message_ids(embedded_cluster: EmbeddedCluster) -> None:
    """A producer's `clock=` is the time in its UNIQ_KEYs: on day 28 of a month the TIME field is
    past 2^31 - 1 (not clamped), and ids sent in the same millisecond differ by the counter."""
    day28 = month_bounds(1_780_000_000_000)[0] + 27 * 86_400_000 + 4321
    topic = unique("ProdClock")

    async def main() -> list[str]:
        async with AsyncProducer(unique("pg"), embedded_cluster.namesrv_addr, clock=ManualClock(day28)) as p:
            return [(await p.send(Message(topic, b"x"))).msg_id for _ in range(3)]

    ids = run(main())
    assert len(set(ids)) == 3
    assert {int(i[20:28], 16) for i in ids} == {day28 - month_bounds(day28)[0]}
    assert int(ids[0][20:28], 16) > 0x7FFF_FFFF
    assert [int(i[28:], 16) for i in ids[1:]] == [(int(ids[0][28:], 16) + n) & 0xFFFF for n in (1, 2)]


def test_send_async_and_oneway(embedded_cluster: EmbeddedCluster) -> None:
    topic = unique("ProdAsync")

    async def main() -> None:
        async with (
            AsyncProducer(unique("pg"), embedded_cluster.namesrv_addr) as producer,
            AsyncPullConsumer(unique("cg"), embedded_cluster.namesrv_addr, heartbeat=False) as reader,
        ):
            seen: list[tuple[SendResult | None, BaseException | None]] = []
            tasks = [
                producer.send_async(Message(topic, f"a{i}".encode()), lambda r, e: seen.append((r, e)))
                for i in range(5)
            ]
            results = await asyncio.gather(*tasks)
            assert all(r.status is SendStatus.SEND_OK for r in results)
            assert len(seen) == 5 and all(e is None and r is not None for r, e in seen)
            await producer.send_oneway(Message(topic, b"oneway"))
            got = await wait_messages(reader, topic, 6)
            assert sorted(m.body for m in got) == [b"a0", b"a1", b"a2", b"a3", b"a4", b"oneway"]

    run(main())


def test_batch_split_by_size(embedded_cluster: EmbeddedCluster) -> None:
    topic = unique("ProdBatch")

    async def main() -> None:
        producer = AsyncProducer(unique("pg"), embedded_cluster.namesrv_addr, max_message_size=2000)
        async with (
            producer,
            AsyncPullConsumer(unique("cg"), embedded_cluster.namesrv_addr, heartbeat=False) as reader,
        ):
            msgs = [Message(topic, bytes([65 + i]) * 500, keys=f"key{i}") for i in range(10)]
            chunks = producer.split_batch(msgs)
            assert [len(c) for c in chunks] == [3, 3, 3, 1]  # ~500 bytes each, 2000 per request
            results = await producer.send_batch(msgs)
            assert len(results) == 4
            assert [len(r.msg_ids) for r in results] == [3, 3, 3, 1]
            assert all(len(r.offset_msg_ids) == len(r.msg_ids) for r in results)
            stored = await read_queues(reader, sorted({r.queue for r in results}), 10)
            by_id = {m.msg_id: m for m in stored}
            for r in results:
                for i, (uniq, offset_id) in enumerate(zip(r.msg_ids, r.offset_msg_ids, strict=True)):
                    m = by_id[uniq]
                    assert m.offset_msg_id == offset_id
                    assert m.queue == r.queue and m.queue_offset == r.queue_offset + i
            assert sorted(m.keys or "" for m in stored) == sorted(f"key{i}" for i in range(10))
            with pytest.raises(MessageIllegalError):
                await producer.send_batch([Message(topic, b"x" * 3000)])
            with pytest.raises(MessageIllegalError):
                await producer.send_batch([Message(topic, b"x", delay_level=1)])

    run(main())


def test_queue_selectors(embedded_cluster: EmbeddedCluster) -> None:
    topic = unique("ProdSelect")

    async def main() -> None:
        async with AsyncProducer(unique("pg"), embedded_cluster.namesrv_addr) as producer:
            await producer.send(Message(topic, b"warm-up"))  # creates the topic
            queues = await producer.fetch_publish_queues(topic)
            assert len(queues) == 4
            by_hash = [
                await producer.send(Message(topic, b"h"), selector=select_by_hash, arg=7) for _ in range(3)
            ]
            assert {r.queue.queue_id for r in by_hash} == {7 % 4}
            by_key = []
            for _ in range(3):
                m = Message(topic, b"s")
                m.sharding_key = "order-42"
                by_key.append(await producer.send(m, selector=select_by_sharding_key))
            assert len({r.queue for r in by_key}) == 1
            custom = await producer.send(Message(topic, b"c"), selector=lambda mqs, msg, arg: mqs[arg], arg=2)
            assert custom.queue.queue_id == 2
            explicit = await producer.send(Message(topic, b"e"), queue=MessageQueue(topic, "broker-a", 1))
            assert explicit.queue.queue_id == 1
            spread = {(await producer.send(Message(topic, b"r"))).queue.queue_id for _ in range(8)}
            assert spread == {0, 1, 2, 3}  # round robin

    run(main())


def test_compression_round_trip(embedded_cluster: EmbeddedCluster) -> None:
    topic = unique("ProdZip")
    big = (b"0123456789abcdef" * 1024)[:10_000]

    async def main() -> None:
        async with (
            AsyncProducer(unique("pg"), embedded_cluster.namesrv_addr) as producer,
            AsyncPullConsumer(unique("cg"), embedded_cluster.namesrv_addr, heartbeat=False) as reader,
        ):
            r_big = await producer.send(Message(topic, big))
            r_small = await producer.send(Message(topic, b"small"))
            stored = {m.msg_id: m for m in await read_queues(reader, await wait_route(reader, topic), 2)}
            assert stored[r_big.msg_id].body == big
            assert stored[r_big.msg_id].sys_flag & MessageSysFlag.COMPRESSED_FLAG
            assert stored[r_big.msg_id].store_size < len(big)  # stored compressed
            assert stored[r_small.msg_id].body == b"small"
            assert not stored[r_small.msg_id].sys_flag & MessageSysFlag.COMPRESSED_FLAG

    run(main())


def test_delay_level_arrives_later(embedded_cluster: EmbeddedCluster) -> None:
    topic = unique("ProdDelay")

    async def main() -> None:
        async with (
            AsyncProducer(unique("pg"), embedded_cluster.namesrv_addr) as producer,
            AsyncPullConsumer(unique("cg"), embedded_cluster.namesrv_addr, heartbeat=False) as reader,
        ):
            await producer.send(Message(topic, b"now"))
            sent = time.time()
            result = await producer.send(Message(topic, b"later", delay_level=2))
            [now, later] = sorted(await wait_messages(reader, topic, 2), key=lambda m: m.store_timestamp)
            assert now.body == b"now" and later.body == b"later"
            assert later.msg_id == result.msg_id
            assert later.store_timestamp - int(sent * 1000) >= 900  # level 2 = 1 s here
            # the delivered copy keeps its parking properties, as RocketMQ's does (messageTimeup)
            assert later.properties[MessageConst.DELAY_TIME_LEVEL] == "2"
            assert later.properties[MessageConst.REAL_TOPIC] == topic

    run(main())


class _Listener:
    """Commits bodies starting with "c", rolls back "r", leaves "u" unknown until the broker checks."""

    def __init__(self) -> None:
        self.checked: list[MessageExt] = []
        self.thread_names: set[str] = set()

    def execute_local_transaction(self, msg: Message, arg: Any) -> LocalTransactionState:
        self.thread_names.add(threading.current_thread().name)
        assert arg == "ctx"
        assert msg.transaction_id is not None
        return {
            b"c": LocalTransactionState.COMMIT_MESSAGE,
            b"r": LocalTransactionState.ROLLBACK_MESSAGE,
        }.get(msg.body[:1], LocalTransactionState.UNKNOW)

    async def check_local_transaction(self, msg: MessageExt) -> LocalTransactionState:
        self.checked.append(msg)
        return LocalTransactionState.COMMIT_MESSAGE


def test_transaction_commit_rollback_and_check_back(embedded_cluster: EmbeddedCluster) -> None:
    topic = unique("ProdTx")
    listener = _Listener()

    async def main() -> None:
        producer = AsyncTransactionProducer(unique("txg"), embedded_cluster.namesrv_addr, listener=listener)
        async with (
            producer,
            AsyncPullConsumer(unique("cg"), embedded_cluster.namesrv_addr, heartbeat=False) as reader,
        ):
            commit = await producer.send_message_in_transaction(Message(topic, b"commit-me"), "ctx")
            rollback = await producer.send_message_in_transaction(Message(topic, b"rollback-me"), "ctx")
            unknown = await producer.send_message_in_transaction(
                Message(topic, b"unknown-then-checked"), "ctx"
            )
            assert commit.local_transaction_state is LocalTransactionState.COMMIT_MESSAGE
            assert rollback.local_transaction_state is LocalTransactionState.ROLLBACK_MESSAGE
            assert unknown.local_transaction_state is LocalTransactionState.UNKNOW
            # The unknown one is committed by the check-back, so two messages become visible.
            got = await wait_messages(reader, topic, 2, timeout=20)
            assert sorted(m.body for m in got) == [b"commit-me", b"unknown-then-checked"]
            assert {m.msg_id for m in got} == {commit.msg_id, unknown.msg_id}
            assert [m.msg_id for m in listener.checked][:1] == [unknown.msg_id]
            assert listener.checked[0].topic == topic
            assert listener.checked[0].transaction_id == unknown.msg_id
            assert not any(name.startswith("asyncio") for name in listener.thread_names)
            assert not await reader.poll(0.3)  # the rollback never shows up

    run(main(), timeout=40)


def test_errors_registry() -> None:
    err = for_code(ResponseCode.TOPIC_NOT_EXIST, "topic[X] not exist")
    assert isinstance(err, TopicNotExistError) and isinstance(err, ClientError)
    assert isinstance(err, RocketliteError)
    assert err.retriable and err.response_code == 17 and err.code == ResponseCode.TOPIC_NOT_EXIST
    assert "topic[X] not exist" in str(err)
    assert isinstance(for_code(2), SystemBusyError) and for_code(2).retriable
    assert isinstance(for_code(16), NoPermissionError) and for_code(16).retriable
    assert isinstance(for_code(1), BrokerSystemError) and for_code(1).retriable
    illegal = for_code(13, "too big")
    assert isinstance(illegal, MessageIllegalError) and not illegal.retriable
    unknown = for_code(999, "new code")
    assert type(unknown) is BrokerError and unknown.response_code == 999 and not unknown.retriable
    assert unknown.code == ResponseCode.SYSTEM_ERROR


def test_errors_from_the_wire(embedded_cluster: EmbeddedCluster) -> None:
    topic = unique("ProdErr")

    async def main() -> None:
        async with AsyncProducer(unique("pg"), embedded_cluster.namesrv_addr, send_timeout=2) as producer:
            with pytest.raises(MessageIllegalError):
                await producer.send(Message("bad topic!", b"x"))
            with pytest.raises(MessageIllegalError):
                await producer.send(Message("SCHEDULE_TOPIC_XXXX", b"x"))
            with pytest.raises(MessageIllegalError):
                await producer.send(Message(topic, b""))
            await producer.send(Message(topic, b"ok"))
            # Queue 99 does not exist: the broker answers SYSTEM_ERROR (retried, then raised).
            with pytest.raises(BrokerSystemError) as info:
                await producer.send(Message(topic, b"x"), queue=MessageQueue(topic, "broker-a", 99))
            assert info.value.response_code == ResponseCode.SYSTEM_ERROR

    run(main())


def test_unreachable_name_server_is_a_connect_error() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed again before use: nothing listens there

    async def main() -> None:
        async with AsyncProducer(unique("pg"), f"127.0.0.1:{port}", send_timeout=2) as producer:
            with pytest.raises(RemotingConnectError) as info:
                await producer.send(Message("AnyTopic", b"x"))
            assert info.value.retriable

    run(main())


def test_sync_producer_facade(embedded_cluster: EmbeddedCluster) -> None:
    topic = unique("ProdSyncFacade")
    done = threading.Event()
    outcome: list[Any] = []

    def callback(result: SendResult | None, error: BaseException | None) -> None:
        outcome.append((result, error, threading.current_thread().name))
        done.set()

    with Producer(unique("pg"), embedded_cluster.namesrv_addr) as producer:
        first = producer.send(Message(topic, b"sync"))
        assert first.status is SendStatus.SEND_OK
        future = producer.send_async(Message(topic, b"async"), callback)
        assert future.result(10).status is SendStatus.SEND_OK
        assert done.wait(10)
        assert outcome[0][1] is None and outcome[0][2].startswith("rocketlite-callback")
        producer.send_oneway(Message(topic, b"oneway"))
        [batch] = producer.send_batch([Message(topic, b"b1"), Message(topic, b"b2")])
        assert len(batch.msg_ids) == 2


def test_request_timeout_from_a_silent_server() -> None:
    async def main() -> None:
        accepted: list[asyncio.StreamWriter] = []

        async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            accepted.append(writer)  # read nothing, answer nothing

        server = await asyncio.start_server(silent, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        config = ClientConfig(f"127.0.0.1:{port}", instance_name=unique("silent"), request_timeout=0.3)
        try:
            async with AsyncProducer(unique("pg"), config=config, send_timeout=2) as producer:
                started = time.monotonic()
                with pytest.raises(RemotingTimeoutError) as info:
                    await producer.send(Message("AnyTopic", b"x"))
                assert info.value.retriable
                assert time.monotonic() - started < 1.9  # one request timeout, not the send timeout
        finally:
            for writer in accepted:
                writer.close()
            server.close()
            await server.wait_closed()

    run(main())


def test_sync_transaction_producer(embedded_cluster: EmbeddedCluster) -> None:
    topic = unique("ProdTxSync")

    class Listener:
        def execute_local_transaction(self, msg: Message, arg: Any) -> LocalTransactionState:
            return LocalTransactionState.COMMIT_MESSAGE if arg else LocalTransactionState.ROLLBACK_MESSAGE

        def check_local_transaction(self, msg: MessageExt) -> LocalTransactionState:
            return LocalTransactionState.ROLLBACK_MESSAGE

    with TransactionProducer(unique("txg"), embedded_cluster.namesrv_addr, listener=Listener()) as producer:
        yes = producer.send_message_in_transaction(Message(topic, b"yes"), True)
        no = producer.send_message_in_transaction(Message(topic, b"no"), False)
    assert yes.local_transaction_state is LocalTransactionState.COMMIT_MESSAGE
    assert no.local_transaction_state is LocalTransactionState.ROLLBACK_MESSAGE

    async def main() -> None:
        async with AsyncPullConsumer(unique("cg"), embedded_cluster.namesrv_addr, heartbeat=False) as reader:
            got = await wait_messages(reader, topic, 1)
            assert [m.body for m in got] == [b"yes"]

    run(main())
