"""Retry / DLQ (send-back), delayed delivery, transactions and message queries, over real sockets.

Waiting is event-driven: `Arrivals` hears the store's dispatcher put units into a consume queue
(the same hook long polling uses), and `dispatched` awaits the store catching up. Delays use a
short `messageDelayLevel` table ("1s ..."), so the timing checks compare store timestamps, which
the broker writes, with the due time the schedule queue recorded.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from pathlib import Path

import pytest

from rocketlite.broker.client_manager import ClientManager
from rocketlite.broker.config import BrokerRole
from rocketlite.broker.delay.levels import ScheduleMessageService
from rocketlite.broker.transaction import TransactionalMessageService
from rocketlite.protocol.bodies.heartbeat import HeartbeatData, ProducerData
from rocketlite.protocol.codes import RequestCode, ResponseCode
from rocketlite.protocol.formats.record import StoredRecord, decode_record, decode_records
from rocketlite.protocol.message import parse_msg_id, string_to_properties
from rocketlite.protocol.wire.command import RemotingCommand, make_request
from rocketlite.protocol.wire.headers import (
    EndTransactionRequestHeader,
    QueryMessageRequestHeader,
    SendMessageRequestHeader,
)
from rocketlite.remoting.client import RemotingClient
from rocketlite.remoting.connection import Connection, RequestTable
from rocketlite.store.config import FlushDiskType
from rocketlite.store.message_store import MessageStore
from tests.support.aio import run
from tests.support.broker_harness import BrokerUnderTest, broker_under_test

SCHEDULE = "SCHEDULE_TOPIC_XXXX"
HALF = "RMQ_SYS_TRANS_HALF_TOPIC"
OP = "RMQ_SYS_TRANS_OP_HALF_TOPIC"
# Delivery may lag its due time by the loop's latency; CI machines get this much slack.
LATE_SLACK_MS = 400


class Arrivals:
    """Wakes the test when the dispatcher adds units to a consume queue (no polling)."""

    def __init__(self, store: MessageStore) -> None:
        self.store = store
        self.loop = asyncio.get_running_loop()
        self.changed = asyncio.Event()
        self.arrived_ms: dict[tuple[str, int, int], int] = {}  # (topic, queue, max offset) -> wall ms
        store.add_arrival_listener(self._on_arrival)

    def _on_arrival(self, topic: str, queue_id: int, max_offset: int, tags: int, store_ts: int) -> None:
        del tags, store_ts
        now = time.time_ns() // 1_000_000
        with contextlib.suppress(RuntimeError):
            self.loop.call_soon_threadsafe(self._record, (topic, queue_id, max_offset), now)

    def _record(self, key: tuple[str, int, int], now: int) -> None:
        self.arrived_ms.setdefault(key, now)
        self.changed.set()

    async def wait(self, topic: str, queue_id: int, count: int = 1, timeout: float = 10.0) -> None:
        """Until the queue holds at least `count` units."""
        deadline = self.loop.time() + timeout
        while self.store.get_max_offset_in_queue(topic, queue_id) < count:
            self.changed.clear()
            remaining = deadline - self.loop.time()
            if remaining <= 0:
                raise AssertionError(f"{topic}:{queue_id} never reached {count} message(s)")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.changed.wait(), remaining)


async def dispatched(store: MessageStore) -> None:
    assert await asyncio.to_thread(store.wait_dispatched, 10.0)


def read_queue(store: MessageStore, topic: str, queue_id: int, offset: int = 0) -> list[StoredRecord]:
    result = store.get_message("test", topic, queue_id, offset, 32)
    records = [decode_record(v) for v in result.messages]
    result.release()
    return records


def read_all(store: MessageStore, topic: str, queue_id: int, count: int) -> list[StoredRecord]:
    records: list[StoredRecord] = []
    while len(records) < count:
        batch = read_queue(store, topic, queue_id, len(records))
        assert batch, f"{topic}:{queue_id} holds fewer than {count} messages"
        records += batch
    return records


def record_at(store: MessageStore, msg_id: str) -> StoredRecord:
    rec = store.look_message_by_offset(parse_msg_id(msg_id).offset)
    assert rec is not None
    return rec


def props_of(rec: StoredRecord) -> dict[str, str]:
    return string_to_properties(rec.properties_string)


def send_back_ext(offset: int, group: str, delay_level: int, **extra: str) -> dict[str, str]:
    return {"offset": str(offset), "group": group, "delayLevel": str(delay_level), **extra}


# ------------------------------------------------------------------------------------------- send-back


def test_send_back_goes_to_retry_topic_after_the_delay(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with broker_under_test(tmp_path, store_message_delay_level="1s 1s 1s 1s") as b:
            store = b.controller.store
            arrivals = Arrivals(store)
            sent = await b.send("SB", b"payload", tags="TagA", keys="k1", props={"UNIQ_KEY": "U1"})
            original = record_at(store, sent.ext_fields["msgId"])
            # The C++ 1.x client sends only these three fields.
            r = await b.call(
                RequestCode.CONSUMER_SEND_MSG_BACK, send_back_ext(original.physical_offset, "G1", 0)
            )
            assert r.code == ResponseCode.SUCCESS, r.remark
            assert b.controller.topics.select("%RETRY%G1") is not None
            await arrivals.wait(SCHEDULE, 2)  # level 3 + reconsumeTimes 0 -> queue 2
            parked = read_queue(store, SCHEDULE, 2)[0]
            assert props_of(parked)["DELAY"] == "3" and props_of(parked)["REAL_TOPIC"] == "%RETRY%G1"

            await arrivals.wait("%RETRY%G1", 0)
            retry = read_queue(store, "%RETRY%G1", 0)[0]
            props = props_of(retry)
            assert retry.body == b"payload" and retry.reconsume_times == 1
            assert props["RETRY_TOPIC"] == "SB" and props["ORIGIN_MESSAGE_ID"] == "U1"
            assert props["TAGS"] == "TagA" and props["UNIQ_KEY"] == "U1"
            # RocketMQ's copy keeps what the parked message had (messageTimeup writes the
            # properties string before it clears DELAY / REAL_* from the map), WAIT=false too.
            assert (props["DELAY"], props["REAL_TOPIC"], props["REAL_QID"], props["WAIT"]) == (
                "3", "%RETRY%G1", "0", "false",
            )  # fmt: skip
            assert store.get_max_offset_in_queue(SCHEDULE, 2) == 1  # delivered, not parked again
            assert retry.born_timestamp == original.born_timestamp and retry.sys_flag == original.sys_flag
            assert retry.store_timestamp >= parked.store_timestamp + 1000  # never early
            assert retry.store_timestamp <= parked.store_timestamp + 1000 + LATE_SLACK_MS
            assert parse_msg_id(retry.msg_id).address.port == b.controller.port

    run(scenario())


def test_send_back_dead_letters_and_refusals(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with broker_under_test(tmp_path / "a") as b:
            store = b.controller.store
            tired = record_at(store, (await b.send("SB", b"x", reconsume_times=2)).ext_fields["msgId"])
            ext = send_back_ext(tired.physical_offset, "G2", 0, maxReconsumeTimes="2", originMsgId="O1")
            r = await b.call(RequestCode.CONSUMER_SEND_MSG_BACK, ext)
            assert r.code == ResponseCode.SUCCESS, r.remark
            await dispatched(store)
            dead = read_queue(store, "%DLQ%G2", 0)
            assert len(dead) == 1 and dead[0].reconsume_times == 3 and dead[0].body == b"x"
            dead_props = props_of(dead[0])
            assert (dead_props["ORIGIN_MESSAGE_ID"], dead_props["DELAY"]) == ("O1", "0")
            assert dead_props["WAIT"] == "false"
            dlq = b.controller.topics.select("%DLQ%G2")
            assert dlq is not None and (dlq.read_queue_nums, dlq.perm) == (1, 6)

            # Before V3_4_9 the header's maxReconsumeTimes is ignored: the group allows 16.
            old = make_request(RequestCode.CONSUMER_SEND_MSG_BACK, ext, version=100)
            r = await b.client.invoke(b.addr, old)
            assert r.code == ResponseCode.SUCCESS
            await dispatched(store)
            parked = read_queue(store, SCHEDULE, 4)  # level 3 + 2
            assert len(parked) == 1 and props_of(parked[0])["REAL_TOPIC"] == "%RETRY%G2"

            fresh = record_at(store, (await b.send("SB", b"y")).ext_fields["msgId"])
            r = await b.call(
                RequestCode.CONSUMER_SEND_MSG_BACK, send_back_ext(fresh.physical_offset, "G2", -1)
            )
            assert r.code == ResponseCode.SUCCESS
            await dispatched(store)
            assert [m.body for m in read_queue(store, "%DLQ%G2", 0)] == [b"x", b"y"]

            r = await b.call(
                RequestCode.CONSUMER_SEND_MSG_BACK, send_back_ext(fresh.physical_offset + 1, "G2", 0)
            )
            assert r.code == ResponseCode.SYSTEM_ERROR
            assert r.remark == f"look message by offset failed, {fresh.physical_offset + 1}"

        async with broker_under_test(tmp_path / "b", auto_create_subscription_group=False) as b:
            r = await b.call(RequestCode.CONSUMER_SEND_MSG_BACK, send_back_ext(0, "Nobody", 0))
            assert r.code == ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST
            assert "Nobody" in (r.remark or "")

    run(scenario())


# ----------------------------------------------------------------------------------------- delayed


def test_delayed_messages_arrive_on_time_and_offsets_survive_restart(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with broker_under_test(tmp_path, store_message_delay_level="1s 2s") as b:
            store = b.controller.store
            arrivals = Arrivals(store)
            late = await b.send("DelayT", b"two", queue_id=1, props={"DELAY": "2", "UNIQ_KEY": "D2"})
            soon = await b.send(
                "DelayT", b"one", queue_id=1, tags="T", props={"DELAY": "1", "UNIQ_KEY": "D1"}
            )
            parked = {m.body: m for m in (record_at(store, r.ext_fields["msgId"]) for r in (late, soon))}
            assert {m.topic for m in parked.values()} == {SCHEDULE}
            assert store.get_max_offset_in_queue("DelayT", 1) == 0

            await arrivals.wait("DelayT", 1, 2)
            first, second = read_queue(store, "DelayT", 1)
            assert (first.body, second.body) == (b"one", b"two")  # the shorter delay first
            for delivered, delay in ((first, 1000), (second, 2000)):
                due = parked[delivered.body].store_timestamp + delay
                assert due <= delivered.store_timestamp <= due + LATE_SLACK_MS
                props = props_of(delivered)
                assert (props["DELAY"], props["REAL_TOPIC"], props["REAL_QID"]) == (
                    str(delay // 1000), "DelayT", "1",
                )  # fmt: skip
            assert props_of(first)["TAGS"] == "T" and props_of(first)["UNIQ_KEY"] == "D1"
            r = await b.call(RequestCode.GET_ALL_DELAY_OFFSET)
            assert r.code == ResponseCode.SUCCESS and (r.body or b"").decode() == '{"offsetTable":{1:1,2:1}}'

        saved = (tmp_path / "config" / "delayOffset.json").read_text()
        assert saved == '{"offsetTable":{1:1,2:1}}'
        async with broker_under_test(tmp_path, store_message_delay_level="1s 2s") as b:
            service = next(s for s in b.controller.services.values() if isinstance(s, ScheduleMessageService))
            assert (service.offset_of(1), service.offset_of(2)) == (1, 1)
            assert service.deliver_due() is None  # nothing left to deliver
            assert b.controller.store.get_max_offset_in_queue("DelayT", 1) == 2

    run(scenario())


def test_a_delivered_copy_keeps_its_delay_level_and_is_delivered_once(tmp_path: Path) -> None:
    """The delivered copy of a level-2 message still says DELAY=2 (as RocketMQ's does), yet the
    store puts it in its real queue instead of parking it again: one unit in the level's queue,
    one message in the real queue, nothing left for the schedule service to deliver."""

    async def scenario() -> None:
        async with broker_under_test(tmp_path, store_message_delay_level="1s 1s") as b:
            store = b.controller.store
            arrivals = Arrivals(store)
            await b.send("Once", b"once", props={"DELAY": "2", "UNIQ_KEY": "O2"})
            await arrivals.wait("Once", 0)
            await dispatched(store)
            (copy,) = read_queue(store, "Once", 0)
            props = props_of(copy)
            assert (props["DELAY"], props["REAL_TOPIC"], copy.body) == ("2", "Once", b"once")
            assert store.get_max_offset_in_queue(SCHEDULE, 1) == 1  # the original only
            service = next(s for s in b.controller.services.values() if isinstance(s, ScheduleMessageService))
            assert service.deliver_due() is None and service.offset_of(2) == 1
            await dispatched(store)
            assert store.get_max_offset_in_queue("Once", 0) == 1
            assert store.get_max_offset_in_queue(SCHEDULE, 1) == 1

    run(scenario())


def test_many_delayed_messages_are_delivered_in_order(tmp_path: Path) -> None:
    """More than one delivery batch (256) falls due at once: all arrive, in order, none early."""

    async def scenario() -> None:
        async with broker_under_test(tmp_path, store_message_delay_level="1s") as b:
            store = b.controller.store
            arrivals = Arrivals(store)
            count = 600
            for i in range(count):
                r = await b.send("Many", str(i).encode(), props={"DELAY": "1"})
                assert r.code == ResponseCode.SUCCESS
            await arrivals.wait("Many", 0, count)
            parked = {m.body: m.store_timestamp for m in read_all(store, SCHEDULE, 0, count)}
            delivered = read_all(store, "Many", 0, count)
            assert [m.body for m in delivered] == [str(i).encode() for i in range(count)]
            assert all(m.store_timestamp >= parked[m.body] + 1000 for m in delivered)

    run(scenario())


# ------------------------------------------------------------------------------------ transactions


async def send_half(
    client: RemotingClient, addr: str, topic: str, uniq: str, *, group: str = "pg", queue_id: int = 0
) -> RemotingCommand:
    props = f"TRAN_MSG\x01true\x02PGROUP\x01{group}\x02UNIQ_KEY\x01{uniq}\x02KEYS\x01{uniq}-key"
    header = SendMessageRequestHeader(
        producer_group=group, topic=topic, default_topic="TBW102", default_topic_queue_nums=4,
        queue_id=queue_id, sys_flag=4, born_timestamp=time.time_ns() // 1_000_000, flag=0, properties=props,
    )  # fmt: skip
    r = await client.invoke(
        addr, make_request(RequestCode.SEND_MESSAGE_V2, header.to_ext_v2(), uniq.encode())
    )
    assert r.code == ResponseCode.SUCCESS, r.remark
    return r


def end_ext(
    half: RemotingCommand, kind: int, *, group: str = "pg", from_check: bool = False
) -> dict[str, str]:
    return EndTransactionRequestHeader(
        producer_group=group,
        tran_state_table_offset=int(half.ext_fields["queueOffset"]),
        commit_log_offset=parse_msg_id(half.ext_fields["msgId"]).offset,
        commit_or_rollback=kind,
        from_transaction_check=from_check,
        msg_id=half.ext_fields.get("transactionId", ""),
        transaction_id=half.ext_fields.get("transactionId"),
    ).to_ext()


def test_transaction_commit_rollback_and_checks(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with broker_under_test(tmp_path) as b:
            store = b.controller.store
            arrivals = Arrivals(store)
            plain = parse_msg_id((await b.send("Plain", b"not a half")).ext_fields["msgId"]).offset
            half = await send_half(b.client, b.addr, "TxT", "TX1", queue_id=1)
            assert half.ext_fields["transactionId"] == "TX1" and half.ext_fields["queueId"] == "1"
            parked = record_at(store, half.ext_fields["msgId"])
            props = props_of(parked)
            assert (parked.topic, parked.queue_id, parked.sys_flag & 0xC) == (HALF, 0, 0)
            assert parked.queue_offset == int(half.ext_fields["queueOffset"])
            assert (props["REAL_TOPIC"], props["REAL_QID"], props["TRAN_MSG"], props["PGROUP"]) == (
                "TxT", "1", "true", "pg",
            )  # fmt: skip
            await dispatched(store)
            assert store.get_max_offset_in_queue("TxT", 1) == 0  # invisible until committed

            for ext, remark in (
                (end_ext(half, 8, group="other"), "The producer group wrong"),
                (
                    {**end_ext(half, 8), "tranStateTableOffset": "99"},
                    "The transaction state table offset wrong",
                ),
                (
                    {**end_ext(half, 8), "commitLogOffset": str(plain)},
                    "Find prepared transaction message failed",
                ),
            ):
                r = await b.call(RequestCode.END_TRANSACTION, ext)
                assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, remark)

            r = await b.call(RequestCode.END_TRANSACTION, end_ext(half, 8))
            assert r.code == ResponseCode.SUCCESS, r.remark
            await arrivals.wait("TxT", 1)
            (committed,) = read_queue(store, "TxT", 1)
            cprops = props_of(committed)
            assert (
                committed.sys_flag & 0xC == 8
                and committed.prepared_transaction_offset == parked.physical_offset
            )
            assert committed.body == b"TX1" and cprops["UNIQ_KEY"] == "TX1" and cprops["PGROUP"] == "pg"
            # endMessageTransaction writes the properties string before it clears REAL_*.
            assert (cprops["REAL_TOPIC"], cprops["REAL_QID"], cprops["TRAN_MSG"]) == ("TxT", "1", "true")
            await arrivals.wait(OP, 0)
            (op,) = read_queue(store, OP, 0)
            assert op.tags == "d" and op.body == half.ext_fields["queueOffset"].encode()

            # A second commit (a late check answer) is acknowledged but delivers nothing.
            again = await b.call(RequestCode.END_TRANSACTION, end_ext(half, 8, from_check=True))
            assert again.code == ResponseCode.SUCCESS

            rolled = await send_half(b.client, b.addr, "TxT", "TX2", queue_id=1)
            conn = await b.client.connection(b.addr)
            conn.oneway(make_request(RequestCode.END_TRANSACTION, end_ext(rolled, 0)))  # UNKNOW: ignored
            r = await b.call(RequestCode.END_TRANSACTION, end_ext(rolled, 12))
            assert r.code == ResponseCode.SUCCESS
            committed_oneway = await send_half(b.client, b.addr, "TxT", "TX3", queue_id=1)
            conn.oneway(make_request(RequestCode.END_TRANSACTION, end_ext(committed_oneway, 8)))
            await arrivals.wait("TxT", 1, 2)
            await dispatched(store)
            assert [m.body for m in read_queue(store, "TxT", 1)] == [b"TX1", b"TX3"]
            assert store.get_max_offset_in_queue(OP, 0) == 3
            service = next(
                s for s in b.controller.services.values() if isinstance(s, TransactionalMessageService)
            )
            assert service.check_once() == 0  # everything ended: nothing to check

        async with broker_under_test(tmp_path / "slave", broker_id=1, broker_role=BrokerRole.SLAVE) as s:
            r = await s.call(RequestCode.END_TRANSACTION, end_ext(half, 8))
            assert r.code == ResponseCode.SLAVE_NOT_AVAILABLE

    run(scenario())


def test_sync_flush_broker_answers_once_durable(tmp_path: Path) -> None:
    """With SYNC_FLUSH, send-back and commit answer after the group commit (awaited, not blocked)."""

    async def scenario() -> None:
        async with broker_under_test(tmp_path, store_flush_disk_type=FlushDiskType.SYNC_FLUSH) as b:
            store = b.controller.store
            sent = record_at(store, (await b.send("SyncT", b"s")).ext_fields["msgId"])
            r = await b.call(
                RequestCode.CONSUMER_SEND_MSG_BACK, send_back_ext(sent.physical_offset, "SG", -1)
            )
            assert r.code == ResponseCode.SUCCESS, r.remark
            half = await send_half(b.client, b.addr, "SyncT", "TXSYNC")
            r = await b.call(RequestCode.END_TRANSACTION, end_ext(half, 8))
            assert r.code == ResponseCode.SUCCESS, r.remark
            durable = store.commit_log.flushed_where
            await dispatched(store)
            assert [m.body for m in read_queue(store, "SyncT", 0)] == [b"s", b"TXSYNC"]
            assert [m.body for m in read_queue(store, "%DLQ%SG", 0)] == [b"s"]
            assert durable >= parse_msg_id(half.ext_fields["msgId"]).offset

    run(scenario())


class CheckRecorder:
    """A producer's side of CHECK_TRANSACTION_STATE: records every check it receives."""

    def __init__(self) -> None:
        self.table = RequestTable()
        self.table.register(RequestCode.CHECK_TRANSACTION_STATE, self._on_check)
        self.checks: list[tuple[float, RemotingCommand]] = []
        self.arrived = asyncio.Event()

    def _on_check(self, conn: Connection, request: RemotingCommand) -> None:
        del conn
        self.checks.append((time.time(), request))
        self.arrived.set()

    async def next_check(self, timeout: float = 10.0) -> RemotingCommand:
        seen = len(self.checks)
        while len(self.checks) == seen:
            self.arrived.clear()
            await asyncio.wait_for(self.arrived.wait(), timeout)
        return self.checks[-1][1]


async def connect_producer(b: BrokerUnderTest, recorder: CheckRecorder, group: str) -> RemotingClient:
    producer = RemotingClient(recorder.table)
    beat = HeartbeatData(client_id="127.0.0.1@tx-test", producer_data_set=(ProducerData(group),))
    r = await producer.invoke(b.addr, make_request(RequestCode.HEART_BEAT, None, beat.to_bytes()))
    assert r.code == ResponseCode.SUCCESS
    return producer


needs_client_manager = pytest.mark.xfail(
    not hasattr(ClientManager, "producer_channels"),
    reason="the check-back needs ClientManager.producer_channels",
    strict=False,
)


@needs_client_manager
def test_check_back_reaches_the_producer_and_its_answer_commits(tmp_path: Path) -> None:
    async def scenario() -> None:
        timeout_ms = 300
        async with broker_under_test(
            tmp_path, transaction_check_interval=50, transaction_timeout=timeout_ms
        ) as b:
            arrivals = Arrivals(b.controller.store)
            recorder = CheckRecorder()
            producer = await connect_producer(b, recorder, "txpg")
            try:
                sent_at = time.time()
                half = await send_half(producer, b.addr, "TxCheck", "TXC", group="txpg", queue_id=2)
                check = await recorder.next_check()
                assert recorder.checks[0][0] - sent_at >= timeout_ms / 1000  # not before the timeout
                ext = check.ext_fields
                assert ext["commitLogOffset"] == str(parse_msg_id(half.ext_fields["msgId"]).offset)
                assert ext["tranStateTableOffset"] == half.ext_fields["queueOffset"]
                assert ext["msgId"] == ext["transactionId"] == "TXC"
                assert ext["offsetMsgId"] == half.ext_fields["msgId"]
                body = decode_record(check.body or b"")
                assert (body.topic, body.queue_id, body.body) == ("TxCheck", 2, b"TXC")
                assert props_of(body)["PGROUP"] == "txpg" and props_of(body)["TRANSACTION_CHECK_TIMES"] == "1"

                answer = {**end_ext(half, 8, group="txpg", from_check=True), "transactionId": "TXC"}
                conn = await producer.connection(b.addr)
                conn.oneway(make_request(RequestCode.END_TRANSACTION, answer))
                await arrivals.wait("TxCheck", 2)
                service = next(
                    s for s in b.controller.services.values() if isinstance(s, TransactionalMessageService)
                )
                await dispatched(b.controller.store)
                assert service.check_once() == 0
            finally:
                await producer.close()

    run(scenario())


@needs_client_manager
def test_unanswered_half_is_discarded_after_check_max(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with broker_under_test(
            tmp_path, transaction_check_interval=50, transaction_timeout=0, transaction_check_max=2
        ) as b:
            arrivals = Arrivals(b.controller.store)
            recorder = CheckRecorder()
            producer = await connect_producer(b, recorder, "silent")
            try:
                half = await send_half(producer, b.addr, "TxSilent", "TXS", group="silent")
                await arrivals.wait("TRANS_CHECK_MAX_TIME_TOPIC", 0)
                assert len(recorder.checks) == 2
                (kept,) = read_queue(b.controller.store, "TRANS_CHECK_MAX_TIME_TOPIC", 0)
                assert kept.body == b"TXS" and props_of(kept)["REAL_TOPIC"] == "TxSilent"
                service = next(
                    s for s in b.controller.services.values() if isinstance(s, TransactionalMessageService)
                )
                await dispatched(b.controller.store)
                assert service.check_once() == 0 and len(recorder.checks) == 2
                assert b.controller.store.get_max_offset_in_queue("TxSilent", 0) == 0
                late = await b.call(RequestCode.END_TRANSACTION, end_ext(half, 8, group="silent"))
                assert late.code == ResponseCode.SUCCESS  # acknowledged, but the half is over
                await dispatched(b.controller.store)
                assert b.controller.store.get_max_offset_in_queue("TxSilent", 0) == 0
            finally:
                await producer.close()

    run(scenario())


# ------------------------------------------------------------------------------------------- queries


def test_query_by_key_and_view_by_id(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with broker_under_test(tmp_path) as b:
            store = b.controller.store
            before = time.time_ns() // 1_000_000
            sent = await b.send("QT", b"findme", keys="k1 k2", props={"UNIQ_KEY": "UQ1"})
            await b.send("QT", b"other", keys="k3")
            await dispatched(store)
            now = time.time_ns() // 1_000_000

            def query(
                key: str, begin: int = before - 1000, end: int = now + 1000, **extra: str
            ) -> dict[str, str]:
                header = QueryMessageRequestHeader(
                    topic="QT", key=key, max_num=32, begin_timestamp=begin, end_timestamp=end
                )
                return {**header.to_ext(), **extra}

            for ext in (query("k2"), query("UQ1", _UNIQUE_KEY_QUERY="true")):
                r = await b.call(RequestCode.QUERY_MESSAGE, ext)
                assert r.code == ResponseCode.SUCCESS, r.remark
                found = decode_records(r.body or b"")
                assert [m.body for m in found] == [b"findme"]
                assert int(r.ext_fields["indexLastUpdatePhyoffset"]) > 0
                assert int(r.ext_fields["indexLastUpdateTimestamp"]) >= before
            for ext in (query("nope"), query("k1", begin=now + 60_000, end=now + 120_000)):
                r = await b.call(RequestCode.QUERY_MESSAGE, ext)
                assert r.code == ResponseCode.QUERY_NOT_FOUND
                assert r.remark == "can not find message, maybe time range not correct"
                # as RocketMQ: the index's last update goes with hits only
                last_update = (
                    r.ext_fields["indexLastUpdatePhyoffset"],
                    r.ext_fields["indexLastUpdateTimestamp"],
                )
                assert last_update == ("0", "0")

            offset = parse_msg_id(sent.ext_fields["msgId"]).offset
            r = await b.call(RequestCode.VIEW_MESSAGE_BY_ID, {"offset": str(offset)})
            assert r.code == ResponseCode.SUCCESS
            view = store.select_one_message_by_offset(offset)
            assert view is not None and r.body == bytes(view)
            assert decode_record(r.body or b"").body == b"findme"
            for bad in (offset + 1, store.max_phy_offset + 100):
                r = await b.call(RequestCode.VIEW_MESSAGE_BY_ID, {"offset": str(bad)})
                assert (r.code, r.remark) == (
                    ResponseCode.SYSTEM_ERROR,
                    f"can not find message by the offset, {bad}",
                )

    run(scenario())
