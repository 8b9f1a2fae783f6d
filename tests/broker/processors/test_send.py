"""The send path over real sockets: codes 10/310/320, checks, auto-create, retry -> DLQ, statuses."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import pytest

from rocketlite.protocol.codes import RequestCode, ResponseCode
from rocketlite.protocol.formats.batch import BatchEntry, encode_batch
from rocketlite.protocol.formats.record import decode_record
from rocketlite.protocol.message import parse_msg_id
from rocketlite.protocol.wire.headers import SendMessageRequestHeader
from tests.support.aio import run
from tests.support.broker_harness import broker_under_test


def test_send_v1_v2_and_auto_create(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with broker_under_test(tmp_path) as b:
            header = SendMessageRequestHeader(
                producer_group="pg", topic="NewTopic", default_topic="TBW102", default_topic_queue_nums=4,
                queue_id=-1, sys_flag=0, born_timestamp=1, flag=7, properties="TAGS\x01a\x02WAIT\x01true",
            )  # fmt: skip
            r1 = await b.call(RequestCode.SEND_MESSAGE, header.to_ext(), b"one")
            r2 = await b.call(RequestCode.SEND_MESSAGE_V2, header.to_ext_v2(), b"two")
            assert (r1.code, r2.code) == (ResponseCode.SUCCESS, ResponseCode.SUCCESS)
            for r in (r1, r2):
                assert set(r.ext_fields) >= {"msgId", "queueId", "queueOffset", "MSG_REGION", "TRACE_ON"}
                assert 0 <= int(r.ext_fields["queueId"]) < 4
            tc = b.controller.topics.select("NewTopic")
            assert tc is not None and (tc.read_queue_nums, tc.perm) == (4, 6)
            assert '"topicName":"NewTopic"' in (tmp_path / "config" / "topics.json").read_text()
            rec_id = parse_msg_id(r2.ext_fields["msgId"])
            assert rec_id.address.port == b.controller.port
            record = b.controller.store.look_message_by_offset(rec_id.offset)
            assert record is not None and record.body == b"two" and record.flag == 7
            assert record.get_property("WAIT") is None and record.get_property("CLUSTER") == "DefaultCluster"

    run(scenario())


def test_an_auto_created_topic_is_a_warning_naming_it_and_its_creator(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A send to a misspelt topic succeeds and creates it (RocketMQ's behaviour while
    autoCreateTopicEnable is on), but not silently: one WARNING names the topic, the producer's
    address and group, and how to turn it off for production."""

    async def scenario() -> None:
        async with broker_under_test(tmp_path) as b:
            for _ in range(2):
                answer = await b.send("QuickStrat")
                assert answer.code == ResponseCode.SUCCESS

    with caplog.at_level(logging.INFO, logger="rocketlite.broker"):
        run(scenario())
    created = [r for r in caplog.records if "QuickStrat" in r.getMessage()]
    assert [r.levelno for r in created] == [logging.WARNING]
    assert re.fullmatch(
        r"auto-created topic QuickStrat from TBW102 \(4 queues\) on a send from 127\.0\.0\.1:\d+ \(producer "
        r"group \S+\): autoCreateTopicEnable creates any topic a producer names, a misspelt one too; in "
        r"production set autoCreateTopicEnable=false and create topics with `rocketlite admin updateTopic`",
        created[0].getMessage(),
    ), created[0].getMessage()


def test_send_refusals(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with broker_under_test(tmp_path, auto_create_topic_enable=False) as b:
            missing = await b.send("Unknown")
            assert missing.code == ResponseCode.TOPIC_NOT_EXIST and "not exist" in (missing.remark or "")
            bad = await b.send("bad topic!")
            assert bad.code == ResponseCode.SYSTEM_ERROR and "illegal" in (bad.remark or "")
            reserved = await b.send("SCHEDULE_TOPIC_XXXX")
            assert reserved.code == ResponseCode.NO_PERMISSION
            no_header = await b.call(RequestCode.SEND_MESSAGE_V2, {"b": "T"}, b"x")
            assert no_header.code == ResponseCode.SYSTEM_ERROR and "<a>" in (no_header.remark or "")
            b.controller.topics.create_in_send_back("Small", 2, 6)
            bad_queue = await b.send("Small", queue_id=5)
            assert bad_queue.code == ResponseCode.SYSTEM_ERROR and "queueId[5]" in (bad_queue.remark or "")
            big = await b.send("Small", body=bytes(5 * 1024 * 1024))
            assert big.code == ResponseCode.MESSAGE_ILLEGAL
            for level in ("x", "1.5", "99999999999"):  # RocketMQ: Integer.parseInt fails the send
                bad_delay = await b.send("Small", props={"DELAY": level})
                assert bad_delay.code == ResponseCode.MESSAGE_ILLEGAL
                assert f"DELAY={level!r} is not a delay level" in (bad_delay.remark or "")
            assert b.controller.store.get_max_offset_in_queue("Small", 0) == 0  # nothing stored

    run(scenario())


def test_batch_send(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with broker_under_test(tmp_path) as b:
            entries = [BatchEntry(0, f"m{i}".encode(), f"KEYS\x01k{i}\x02UNIQ_KEY\x01U{i}") for i in range(5)]
            header = SendMessageRequestHeader(
                producer_group="pg", topic="Batch", default_topic="TBW102", default_topic_queue_nums=4,
                queue_id=1, sys_flag=0, born_timestamp=1, flag=0, properties="TAGS\x01bt", batch=True,
            )  # fmt: skip
            r = await b.call(RequestCode.SEND_BATCH_MESSAGE, header.to_ext_v2(), encode_batch(entries))
            assert r.code == ResponseCode.SUCCESS, r.remark
            ids = r.ext_fields["msgId"].split(",")
            assert len(ids) == 5 and r.ext_fields["queueOffset"] == "0"
            recs = [b.controller.store.look_message_by_offset(parse_msg_id(i).offset) for i in ids]
            assert [x.body for x in recs if x] == [f"m{i}".encode() for i in range(5)]
            assert all(x is not None and x.tags == "bt" and x.queue_id == 1 for x in recs)

    run(scenario())


def test_batch_refusals(tmp_path: Path) -> None:
    """Each refusal of a batch keeps its code and remark (the body is encoded straight into
    records now, without a message object per entry)."""

    async def scenario() -> None:
        async with broker_under_test(tmp_path) as b:

            async def send(body: bytes, props: str = "TAGS\x01bt") -> tuple[int, str]:
                header = SendMessageRequestHeader(
                    producer_group="pg", topic="Batch", default_topic="TBW102", default_topic_queue_nums=4,
                    queue_id=1, sys_flag=0, born_timestamp=1, flag=0, properties=props, batch=True,
                )  # fmt: skip
                r = await b.call(RequestCode.SEND_BATCH_MESSAGE, header.to_ext_v2(), body)
                return r.code, r.remark or ""

            one = encode_batch([BatchEntry(0, b"m", "KEYS\x01k")])
            assert (await send(one))[0] == ResponseCode.SUCCESS
            delayed = encode_batch([BatchEntry(0, b"m", "DELAY\x012")])
            assert await send(delayed) == (ResponseCode.MESSAGE_ILLEGAL, "batch messages cannot be delayed")
            assert await send(b"") == (ResponseCode.MESSAGE_ILLEGAL, "the batch is empty")
            code, remark = await send(one, "DELAY\x013")
            assert code == ResponseCode.MESSAGE_ILLEGAL and "delayed batches are not supported" in remark
            code, remark = await send(one, "K\x01" + "v" * 32760)
            assert code == ResponseCode.MESSAGE_ILLEGAL and "properties" in remark
            code, _ = await send(one[:-1])
            assert code == ResponseCode.SYSTEM_ERROR  # torn
            # the reviewer's shape: empty entries up to maxMessageSize and a long header property
            # string copied into every record; refused as any record over the limit, at once
            max_size = b.controller.store.commit_log.max_message_size
            empties = encode_batch([BatchEntry(0, b"", "")]) * (max_size // 22)
            long_header = "\x02".join(f"k{i}\x01" + "v" * 500 for i in range(60))
            code, remark = await send(empties, long_header)
            assert code == ResponseCode.MESSAGE_ILLEGAL and f"exceeds maxMessageSize {max_size}" in remark
            # each record fits, all of them together do not (RocketMQ's "message size exceeded")
            half = encode_batch([BatchEntry(0, bytes(max_size // 2), "")])
            code, remark = await send(half * 2)
            assert code == ResponseCode.MESSAGE_ILLEGAL and f"exceeds maxMessageSize {max_size}" in remark
            assert (await send(one))[0] == ResponseCode.SUCCESS

    run(scenario())


def test_retry_beyond_max_goes_to_dlq(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with broker_under_test(tmp_path) as b:
            ok = await b.send("%RETRY%grp", reconsume_times=3)
            assert ok.code == ResponseCode.SUCCESS
            dead = await b.send("%RETRY%grp", reconsume_times=17)
            assert dead.code == ResponseCode.SUCCESS
            raw = b.controller.store.select_one_message_by_offset(
                parse_msg_id(dead.ext_fields["msgId"]).offset
            )
            assert raw is not None and decode_record(raw).topic == "%DLQ%grp"
            assert b.controller.topics.select("%DLQ%grp") is not None

    run(scenario())


def test_unknown_code_and_bad_frames_do_not_hurt(tmp_path: Path) -> None:
    async def scenario() -> None:
        import asyncio  # noqa: PLC0415

        async with broker_under_test(tmp_path) as b:
            r = await b.call(9999)
            assert r.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
            reader, writer = await asyncio.open_connection("127.0.0.1", b.controller.port)
            writer.write((64 * 1024 * 1024).to_bytes(4, "big") + b"\x00" * 8)  # oversized frame
            await writer.drain()
            assert await reader.read() == b""  # the broker closed that connection
            writer.close()
            ok = await b.send("StillFine")
            assert ok.code == ResponseCode.SUCCESS

    run(scenario())
