"""The send core called directly (`SendMessageProcessor.put`), on a real broker with its store in a
temporary directory: what it stores and where the outcome says it lies, refusals raised or
answered, a batch, a paced put, and a SYNC_FLUSH put that completes later. The remoting adapter
over it is tested over sockets in test_send.py; the gRPC one in tests/broker/grpc/."""

from __future__ import annotations

import inspect
import time
from dataclasses import replace
from pathlib import Path
from typing import cast

import pytest

from rocketlite.broker.processors.send import PutOutcome, SendMessageProcessor, SendRequest
from rocketlite.protocol.codes import RequestCode, ResponseCode
from rocketlite.protocol.errors import RocketliteError
from rocketlite.protocol.formats.batch import BatchEntry, encode_batch
from rocketlite.protocol.message import HostAddress, MessageSysFlag, properties_to_string
from rocketlite.protocol.wire.command import RemotingCommand, make_request
from rocketlite.protocol.wire.frame import encode_command
from rocketlite.protocol.wire.headers import SendMessageRequestHeader
from rocketlite.protocol.wire.speedups import decode_frames
from rocketlite.remoting.connection import Connection
from rocketlite.store.config import FlushDiskType
from tests.support.aio import run
from tests.support.broker_harness import BrokerUnderTest, broker_under_test
from tests.support.peers import Caller


def header(topic: str, *, queue_id: int = 0, sys_flag: int = 0, **props: str) -> SendMessageRequestHeader:
    return SendMessageRequestHeader(
        producer_group="core_pg", topic=topic, default_topic="TBW102", default_topic_queue_nums=4,
        queue_id=queue_id, sys_flag=sys_flag, born_timestamp=int(time.time() * 1000) - 10_000, flag=3,
        properties=properties_to_string({"TAGS": "t", "WAIT": "true", **props}),
    )  # fmt: skip


def processor(b: BrokerUnderTest) -> SendMessageProcessor:
    """The broker's own send processor (its store, tables and hooks as the controller wired them)."""
    assert b.controller.parts is not None
    return b.controller.parts.send


def test_put_stores_the_message_where_its_outcome_says(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with broker_under_test(tmp_path) as b:
            send, caller = processor(b), Caller("10.1.2.3:40000")
            first = send.put(SendRequest(header("CoreT", UNIQ_KEY="U1"), b"one"), caller)
            second = send.put(SendRequest(header("CoreT", UNIQ_KEY="U2"), b"two"), caller)
            assert isinstance(first, PutOutcome) and isinstance(second, PutOutcome)  # ASYNC_FLUSH: at once
            assert (first.code, first.remark, second.code) == (
                ResponseCode.SUCCESS,
                None,
                ResponseCode.SUCCESS,
            )
            assert (first.queue_id, second.queue_id, second.queue_offset) == (0, 0, first.queue_offset + 1)
            assert first.transaction_id == "U1"  # the UNIQ_KEY, for every single send (RocketMQ 5)
            for outcome, body in ((first, b"one"), (second, b"two")):
                record = b.controller.store.look_message_by_offset(outcome.commit_log_offset)
                assert record is not None
                assert (record.body, record.msg_id, record.queue_offset) == (
                    body, outcome.msg_id, outcome.queue_offset,
                )  # fmt: skip
                assert record.born_host == HostAddress.parse("10.1.2.3:40000")  # the caller's address
                assert record.flag == 3
                assert (
                    record.get_property("WAIT") is None and record.get_property("CLUSTER") == "DefaultCluster"
                )
            assert caller.attrs["born_host"] == HostAddress.parse("10.1.2.3:40000")  # parsed once, kept

    run(scenario())


def test_refusals_are_raised_by_the_checks_and_answered_after_them(tmp_path: Path) -> None:
    """What `msg_check` refuses raises with its response code (either port turns it into its own
    answer); what is refused after the checks is an outcome with no place (nothing stored)."""

    async def scenario() -> None:
        async with broker_under_test(
            tmp_path, auto_create_topic_enable=False, reject_transaction_message=True
        ) as b:
            send, caller = processor(b), Caller()
            with pytest.raises(RocketliteError) as missing:
                send.put(SendRequest(header("NoSuchTopic"), b"x"), caller)
            assert missing.value.code == ResponseCode.TOPIC_NOT_EXIST
            b.controller.topics.create_in_send_back("CoreRefusedT", 1, 6)
            with pytest.raises(RocketliteError) as bad_queue:
                send.put(SendRequest(header("CoreRefusedT", queue_id=99), b"x"), caller)
            assert bad_queue.value.code == ResponseCode.SYSTEM_ERROR
            assert "queueId[99] is illegal" in str(bad_queue.value)
            prepared = header(
                "CoreRefusedT", sys_flag=MessageSysFlag.TRANSACTION_PREPARED_TYPE, TRAN_MSG="true"
            )
            refused = send.put(SendRequest(prepared, b"x"), caller)
            assert isinstance(refused, PutOutcome)
            assert (refused.code, refused.msg_id) == (ResponseCode.NO_PERMISSION, "")
            assert "transaction message is forbidden" in (refused.remark or "")
            retry_batch = send.put(SendRequest(header("%RETRY%g"), encode_batch([]), batch=True), caller)
            assert isinstance(retry_batch, PutOutcome) and retry_batch.code == ResponseCode.MESSAGE_ILLEGAL
            assert b.controller.store.get_max_offset_in_queue("CoreRefusedT", 0) == 0

    run(scenario())


def test_a_batch_is_stored_back_to_back_and_answered_once(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with broker_under_test(tmp_path) as b:
            send = processor(b)
            body = encode_batch(
                [
                    BatchEntry(0, f"m{i}".encode(), properties_to_string({"UNIQ_KEY": f"B{i}"}))
                    for i in range(3)
                ]
            )
            outcome = send.put(SendRequest(header("CoreBatchT"), body, batch=True), Caller())
            assert isinstance(outcome, PutOutcome) and outcome.code == ResponseCode.SUCCESS
            ids = outcome.msg_id.split(",")
            assert len(ids) == 3 and outcome.queue_offset == 0
            records = [b.controller.store.look_message_by_offset(outcome.commit_log_offset)]
            assert records[0] is not None and records[0].body == b"m0" and records[0].msg_id == ids[0]
            await b.dispatched()
            assert b.controller.store.get_max_offset_in_queue("CoreBatchT", 0) == 3

    run(scenario())


def test_a_paced_put_is_stored_and_dispatched_as_any_other(tmp_path: Path) -> None:
    """`paced` only lets the dispatch round wait for the next requests: the message is stored
    with the same outcome and reaches its consume queue."""

    async def scenario() -> None:
        async with broker_under_test(tmp_path) as b:
            send = processor(b)
            outcome = send.put(SendRequest(header("CorePacedT", UNIQ_KEY="P1"), b"p"), Caller(), paced=True)
            assert isinstance(outcome, PutOutcome) and outcome.code == ResponseCode.SUCCESS
            again = send.put(SendRequest(header("CorePacedT", UNIQ_KEY="P2"), b"q"), Caller())
            assert isinstance(again, PutOutcome) and again.queue_offset == outcome.queue_offset + 1
            await b.dispatched()
            assert b.controller.store.get_max_offset_in_queue("CorePacedT", 0) == 2

    run(scenario())


def test_a_sync_flush_put_completes_once_durable(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with broker_under_test(tmp_path, store_flush_disk_type=FlushDiskType.SYNC_FLUSH) as b:
            pending = processor(b).put(SendRequest(header("CoreSyncT"), b"durable"), Caller())
            assert inspect.isawaitable(pending)  # answered once the group commit has it
            outcome = await pending
            assert outcome.code == ResponseCode.SUCCESS and outcome.msg_id
            record = b.controller.store.look_message_by_offset(outcome.commit_log_offset)
            assert record is not None and record.body == b"durable"

    run(scenario())


def test_the_remoting_answer_is_the_reference_answer_of_what_the_core_stored(tmp_path: Path) -> None:
    """`handle_wire` answers a single message stored at once with the frame `_put` encodes itself
    (`speedups.encode_send_ok`, no `PutOutcome` between); it must be the reference answer, the
    `_command` of the outcome of what was stored, byte for byte, and the record it stored must be
    the one the typed core (`put`) stores for the same header and body (but for where it lies and
    when). Answers off that path (a bad DELAY, a retry to the DLQ, a refusal by the checks) come
    from the same `_command` as before."""

    async def scenario() -> None:
        async with broker_under_test(tmp_path, auto_create_topic_enable=False) as b:
            send, caller = processor(b), Caller("10.1.2.3:40000")
            store = b.controller.store
            peer = cast(Connection, caller)  # `handle_wire` uses its connection only as the Peer
            b.controller.topics.create_in_send_back("DiffT", 4, 6)
            cases: list[tuple[SendMessageRequestHeader, bytes]] = [
                (header("DiffT", queue_id=1, UNIQ_KEY="D1", KEYS="k1"), b"one"),
                (header("DiffT", queue_id=2, UNIQ_KEY="D2"), bytes(range(256)) * 8),
                (header("DiffT", queue_id=-1), b"no uniq key, any queue"),
            ]
            for opaque, (h, body) in enumerate(cases, 1):
                request = make_request(RequestCode.SEND_MESSAGE_V2, h.to_ext_v2(), body, opaque)
                answer = send.handle_wire(peer, request)
                assert type(answer) is bytes
                (decoded,), _ = decode_frames(answer, 1 << 20)
                ext = decoded.ext_fields
                offset = int(ext["msgId"][-16:], 16)
                stored = store.look_message_by_offset(offset)
                assert stored is not None and stored.msg_id == ext["msgId"]
                uniq = stored.get_property("UNIQ_KEY")
                outcome = PutOutcome(
                    ResponseCode.SUCCESS,
                    None,
                    stored.msg_id,
                    stored.queue_id,
                    stored.queue_offset,
                    offset,
                    uniq,
                )
                assert answer == encode_command(send._command(request, outcome))  # the reference answer
                reference = send.put(SendRequest(h, body), caller)
                assert isinstance(reference, PutOutcome) and reference.code == ResponseCode.SUCCESS
                again = store.look_message_by_offset(reference.commit_log_offset)
                assert again is not None and again.body == body
                if h.queue_id < 0:  # a random queue each: the same record but for it
                    again.queue_id = stored.queue_id
                assert replace(again, queue_offset=0, physical_offset=0, store_timestamp=0) == replace(
                    stored, queue_offset=0, physical_offset=0, store_timestamp=0
                )
            off_path: list[tuple[SendMessageRequestHeader, bytes]] = [
                (header("DiffT", DELAY="soon"), b"bad delay"),  # MESSAGE_ILLEGAL after the checks
                (header("NoSuchDiffT"), b"refused by msg_check"),
            ]
            for h, body in off_path:
                request = make_request(RequestCode.SEND_MESSAGE_V2, h.to_ext_v2(), body, 99)
                try:
                    answer = send.handle_wire(peer, request)
                except RocketliteError as exc:  # the connection answers a raised refusal
                    assert exc.code == ResponseCode.TOPIC_NOT_EXIST
                    continue
                assert isinstance(answer, RemotingCommand)
                reference = send.put(SendRequest(h, body), caller)
                assert isinstance(reference, PutOutcome) and reference.code == ResponseCode.MESSAGE_ILLEGAL
                assert encode_command(answer) == encode_command(send._command(request, reference))

    run(scenario())
