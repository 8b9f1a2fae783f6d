"""The POP cores called directly (`PopMessageProcessor.pop`, `ack`, `change_invisible`), on a real
broker with its store in a temporary directory: a batch and where its messages lie, an ack that
cannot happen twice, a delivery made visible again and redelivered with its attempt counted, an
empty pop, and the refusals (raised with their response code). The remoting adapters over them
are tested over sockets in test_wire.py; the gRPC ones in tests/broker/grpc/."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from rocketlite.broker.pop.processor import (
    AckRequest,
    ChangeInvisibleRequest,
    PopMessageProcessor,
    PopRequest,
)
from rocketlite.broker.pop.state import PopBatch
from rocketlite.protocol.codes import ResponseCode
from rocketlite.protocol.errors import RocketliteError
from rocketlite.protocol.formats.record import decode_record
from rocketlite.protocol.wire.pop import NORMAL_TOPIC, ReceiptHandle
from rocketlite.store.config import FlushDiskType
from tests.support.aio import run
from tests.support.broker_harness import BrokerUnderTest, broker_under_test

TOPIC, GROUP = "PopCoreTopic", "pop_core_cg"


def processor(b: BrokerUnderTest) -> PopMessageProcessor:
    assert b.controller.parts is not None
    return b.controller.parts.pop


def receipt(b: BrokerUnderTest, batch: PopBatch, i: int) -> str:
    """The receipt handle of the batch's i-th message, as either port gives it to its client."""
    m = batch.messages[i]
    return ReceiptHandle(
        ck_queue_offset=batch.start_offsets[m.queue_id], pop_time=batch.pop_time,
        invisible_time=batch.invisible_time, revive_qid=0, topic_type=NORMAL_TOPIC,
        broker_name=b.controller.broker.broker_name, queue_id=m.queue_id, queue_offset=m.queue_offset,
    ).build()  # fmt: skip


@pytest.mark.parametrize("flush", ["SYNC_FLUSH", "ASYNC_FLUSH"])
def test_answers_wait_for_the_pop_logs_fdatasync_only_under_sync_flush(tmp_path: Path, flush: str) -> None:
    """The POP log follows flushDiskType: under SYNC_FLUSH a pop and an ack are answered after
    their records' fdatasync; under ASYNC_FLUSH once they are written (the fdatasync follows)."""

    async def scenario() -> None:
        async with broker_under_test(tmp_path, store_flush_disk_type=FlushDiskType(flush)) as b:
            assert (await b.send(TOPIC, b"m", queue_id=0)).code == ResponseCode.SUCCESS
            pop = processor(b)
            log = pop.service.table.log
            before = (log.flushes, log.writes)
            batch = await pop.pop(PopRequest(GROUP, TOPIC, -1, 1, 60_000))
            await pop.ack(AckRequest(GROUP, TOPIC, 0, 0, receipt(b, batch, 0)))
            synced, written = log.flushes - before[0], log.writes - before[1]
            assert written == 2  # the pop's record, then the ack's
            assert synced == (2 if flush == "SYNC_FLUSH" else 0)

    run(scenario(), timeout=30)


def test_pop_ack_and_change_invisible(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with broker_under_test(tmp_path) as b:
            for i in range(3):
                assert (await b.send(TOPIC, f"m{i}".encode(), queue_id=0)).code == ResponseCode.SUCCESS
            pop = processor(b)
            batch = await pop.pop(PopRequest(GROUP, TOPIC, -1, 2, 60_000))
            assert [(m.queue_id, m.queue_offset, m.attempts) for m in batch.messages] == [
                (0, 0, 0),
                (0, 1, 0),
            ]
            assert [decode_record(m.record).body for m in batch.messages] == [b"m0", b"m1"]
            assert (batch.start_offsets, batch.rest_num, batch.invisible_time) == ({0: 0}, 1, 60_000)

            await pop.ack(AckRequest(GROUP, TOPIC, 0, 0, receipt(b, batch, 0)))
            with pytest.raises(RocketliteError) as twice:  # never acked twice
                await pop.ack(AckRequest(GROUP, TOPIC, 0, 0, receipt(b, batch, 0)))
            assert twice.value.code == ResponseCode.NO_MESSAGE

            change = ChangeInvisibleRequest(GROUP, TOPIC, 0, 1, receipt(b, batch, 1), 1)
            pop_time = await pop.change_invisible(change)
            assert pop_time > batch.pop_time  # the new handle's popTime: the old handle is stale
            await asyncio.sleep(0.01)  # its 1 ms is over: due again, before the new message
            again = await pop.pop(PopRequest(GROUP, TOPIC, 0, 32, 60_000))
            assert [(m.queue_offset, m.attempts) for m in again.messages] == [(1, 1), (2, 0)]
            assert decode_record(again.messages[0].record).reconsume_times == 1

            empty = await pop.pop(PopRequest(GROUP, TOPIC, -1, 32, 60_000, poll_ms=0))
            assert empty.messages == []  # nothing visible: answered at once (the remoting answer is 210)

    run(scenario())


def test_pop_refusals_carry_their_response_codes(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with broker_under_test(tmp_path, auto_create_subscription_group=False) as b:
            pop = processor(b)
            with pytest.raises(RocketliteError) as no_group:
                await pop.pop(PopRequest("unknown_group", TOPIC, -1, 1, 60_000))
            assert no_group.value.code == ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST
        async with broker_under_test(tmp_path / "second") as b:
            pop = processor(b)
            with pytest.raises(RocketliteError) as no_topic:
                await pop.pop(PopRequest(GROUP, "NoSuchPopTopic", -1, 1, 60_000))
            assert no_topic.value.code == ResponseCode.TOPIC_NOT_EXIST
            assert (await b.send(TOPIC, b"x", queue_id=0)).code == ResponseCode.SUCCESS
            with pytest.raises(RocketliteError) as sql:  # SQL92 is served; a malformed one is refused
                await pop.pop(
                    PopRequest(GROUP, TOPIC, -1, 1, 60_000, expression_type="SQL92", expression="a >")
                )
            assert sql.value.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED
            assert "parse the consumer's subscription failed" in str(sql.value)
            with pytest.raises(RocketliteError) as too_many:
                await pop.pop(PopRequest(GROUP, TOPIC, -1, 33, 60_000))
            assert "maxMsgNums 33" in str(too_many.value)
            with pytest.raises(RocketliteError) as forged:
                await pop.ack(AckRequest(GROUP, TOPIC, 0, 0, "0 1 60000 0 0 nobody 0 0"))
            assert forged.value.code == ResponseCode.NO_MESSAGE

    run(scenario())
