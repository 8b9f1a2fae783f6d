"""The END_TRANSACTION core and the check push, called directly on a real broker with its store in
a temporary directory: a prepared send parks a half; the check is pushed to a live producer peer
of its group as a typed `TransactionCheck` (the half as its producer sent it, no 4.x command);
COMMIT stores the message in its real topic once, a late second end is acknowledged and ignored,
and UNKNOW is left for the check-back with no answer."""

from __future__ import annotations

import time
from pathlib import Path

from rocketlite.broker.processors.outcome import Outcome
from rocketlite.broker.processors.send import PutOutcome, SendRequest
from rocketlite.protocol.bodies.heartbeat import HeartbeatData, ProducerData
from rocketlite.protocol.codes import ResponseCode
from rocketlite.protocol.message import MessageConst, MessageSysFlag, properties_to_string
from rocketlite.protocol.reserved import TRANS_HALF_TOPIC
from rocketlite.protocol.wire.headers import EndTransactionRequestHeader, SendMessageRequestHeader
from rocketlite.remoting.peer import TransactionCheck
from tests.support.aio import run
from tests.support.broker_harness import broker_under_test
from tests.support.peers import Caller

TOPIC, GROUP = "TxCoreTopic", "tx_core_pg"


def test_a_half_is_checked_by_push_and_committed_once(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with broker_under_test(tmp_path) as b:
            parts = b.controller.parts
            assert parts is not None
            producer = Caller("10.9.8.7:5000", "tx-client")
            parts.clients.heartbeat(producer, HeartbeatData("tx-client", (ProducerData(GROUP),)), "JAVA", 0)
            b.controller.topics.create_in_send_back(TOPIC, 1, 6)
            props = {MessageConst.TRANSACTION_PREPARED: "true", MessageConst.PRODUCER_GROUP: GROUP,
                     MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: "TX1", MessageConst.TAGS: "t"}  # fmt: skip
            header = SendMessageRequestHeader(
                producer_group=GROUP, topic=TOPIC, default_topic="TBW102", default_topic_queue_nums=4,
                queue_id=0, sys_flag=MessageSysFlag.TRANSACTION_PREPARED_TYPE,
                born_timestamp=int(time.time() * 1000) - 60_000, flag=0,
                properties=properties_to_string(props),
            )  # fmt: skip
            sent = parts.send.put(SendRequest(header, b"tx-body"), producer)
            assert isinstance(sent, PutOutcome) and sent.code == ResponseCode.SUCCESS
            assert sent.transaction_id == "TX1"
            half = b.controller.store.look_message_by_offset(sent.commit_log_offset)
            assert half is not None and half.topic == TRANS_HALF_TOPIC
            await b.dispatched()

            assert parts.transactions.check_once() == 1
            [check] = producer.pushed
            assert isinstance(check, TransactionCheck)
            assert (check.header.commit_log_offset, check.header.tran_state_table_offset) == (
                sent.commit_log_offset, sent.queue_offset,
            )  # fmt: skip
            assert check.header.transaction_id == "TX1"
            shown = check.record  # as its producer sent it: real topic and queue
            assert (shown.topic, shown.queue_id, shown.body) == (TOPIC, 0, b"tx-body")
            assert shown.get_property(MessageConst.TRANSACTION_CHECK_TIMES) == "1"

            def end(kind: int, group: str = GROUP) -> EndTransactionRequestHeader:
                return EndTransactionRequestHeader(
                    producer_group=group, tran_state_table_offset=sent.queue_offset,
                    commit_log_offset=sent.commit_log_offset, commit_or_rollback=kind,
                    from_transaction_check=True, msg_id="TX1", transaction_id="TX1",
                )  # fmt: skip

            transactions = parts.transactions
            unknown = end(MessageSysFlag.TRANSACTION_NOT_TYPE)
            assert transactions.end_transaction(unknown, producer, "still open") is None  # no answer
            commit = end(MessageSysFlag.TRANSACTION_COMMIT_TYPE)
            for _ in range(2):  # the second (a late answer to a check) is acknowledged and ignored
                outcome = transactions.end_transaction(commit, producer)
                assert isinstance(outcome, Outcome)  # ASYNC_FLUSH: at once
                assert (outcome.code, outcome.remark) == (ResponseCode.SUCCESS, None)
            await b.dispatched()
            assert b.controller.store.get_max_offset_in_queue(TOPIC, 0) == 1
            wrong = end(MessageSysFlag.TRANSACTION_COMMIT_TYPE, "other_pg")
            refused = transactions.end_transaction(wrong, producer)
            assert isinstance(refused, Outcome)
            assert (refused.code, refused.remark) == (ResponseCode.SYSTEM_ERROR, "The producer group wrong")

    run(scenario())


def test_a_half_is_found_by_its_message_id_after_a_restart(tmp_path: Path) -> None:
    """A 5.x transaction id is the message id: the place of its half is remembered at the send,
    and after a restart found through the half topic's index (RocketMQ's proxy keeps it in
    memory only)."""

    async def scenario() -> tuple[int, int]:
        async with broker_under_test(tmp_path) as b:
            parts = b.controller.parts
            assert parts is not None
            b.controller.topics.create_in_send_back(TOPIC, 1, 6)
            props = {MessageConst.TRANSACTION_PREPARED: "true", MessageConst.PRODUCER_GROUP: TOPIC,
                     MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: "TX-R"}  # fmt: skip
            header = SendMessageRequestHeader(
                producer_group=TOPIC, topic=TOPIC, default_topic="TBW102", default_topic_queue_nums=4,
                queue_id=0, sys_flag=MessageSysFlag.TRANSACTION_PREPARED_TYPE,
                born_timestamp=int(time.time() * 1000), flag=0, properties=properties_to_string(props),
            )  # fmt: skip
            sent = parts.send.put(SendRequest(header, b"after-restart"), Caller())
            assert isinstance(sent, PutOutcome) and sent.code == ResponseCode.SUCCESS
            await b.dispatched()
            return sent.commit_log_offset, sent.queue_offset

    async def after_restart(place: tuple[int, int]) -> None:
        async with broker_under_test(tmp_path) as b:
            parts = b.controller.parts
            assert parts is not None
            transactions = parts.transactions
            assert transactions.find_half("TX-R", TOPIC) == place
            assert transactions.find_half("TX-R", "OtherTopic") is None
            assert transactions.find_half("no-such-id", TOPIC) is None
            commit = EndTransactionRequestHeader(
                producer_group=TOPIC, tran_state_table_offset=place[1], commit_log_offset=place[0],
                commit_or_rollback=MessageSysFlag.TRANSACTION_COMMIT_TYPE, msg_id="TX-R",
            )  # fmt: skip
            outcome = transactions.end_transaction(commit, Caller())
            assert isinstance(outcome, Outcome) and outcome.code == ResponseCode.SUCCESS

    place = run(scenario())
    run(after_restart(place))
