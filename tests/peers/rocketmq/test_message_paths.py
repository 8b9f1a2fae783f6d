"""Heartbeats, delay levels, transactions, consumer send-back and POP, RocketMQ 5.3.3 vs rocketlite.

Where an answer holds an offset into a queue every scenario shares (the half-message topic, the
schedule topic), the scenario records what it means relative to its own earlier answers
(`Side.note`) instead of the absolute value, which depends on what ran before.
"""

from __future__ import annotations

import time

import pytest

from rocketlite.protocol.codes import RequestCode, ResponseCode
from rocketlite.protocol.formats.record import StoredRecord, decode_records
from rocketlite.protocol.message import parse_msg_id
from rocketlite.protocol.requests.heartbeat import build_unregister_client
from rocketlite.protocol.requests.offsets import build_get_max_offset
from rocketlite.protocol.requests.query import build_view_message
from rocketlite.protocol.wire.command import RemotingCommand, make_request
from rocketlite.protocol.wire.headers import ConsumerSendMsgBackRequestHeader, EndTransactionRequestHeader
from rocketlite.protocol.wire.pop import (
    AckMessageRequestHeader,
    ChangeInvisibleTimeRequestHeader,
    PopMessageRequestHeader,
    PopRequestCode,
    ReceiptHandle,
    parse_offset_info,
)
from tests.peers.rocketmq.differential import Scenario, Side, record_view
from tests.peers.rocketmq.runner import Pair
from tests.peers.rocketmq.steps import CLIENT_ID, PG, heartbeat, pull, send, setup_topic
from tests.support.names import unique

pytestmark = pytest.mark.timeout(600)

TRANSACTION_PREPARED, COMMIT, ROLLBACK = 0x4, 0x8, 0xC


def note_record(side: Side, label: str, rec: StoredRecord | None, *drop: str) -> None:
    view = None if rec is None else {k: v for k, v in record_view(side, rec).items() if k not in drop}
    side.note(label, view)


async def viewed(side: Side, msg_id: str) -> StoredRecord | None:
    r = await side.call("view (setup)", build_view_message(parse_msg_id(msg_id).offset), record=False)
    recs = decode_records(r.body or b"") if r.code == ResponseCode.SUCCESS else []
    return recs[0] if recs else None


def test_heartbeat_and_the_subscription_it_registers(pair: Pair) -> None:
    topic, group = unique("DiffHb"), unique("diff_cg")

    async def scenario(s: Side) -> None:
        await setup_topic(s, topic, 1)
        for i, tag in enumerate(["TagA", "TagB", "TagA"]):
            s.expect(await s.call(f"send {i}", send(topic, f"m{i}".encode(), tags=tag, uniq=f"H{i}")))
        await s.wait_messages(topic, 0, 3)
        await s.call("pull by heartbeat, before one", pull(group, topic, 0, sys_flag=0))
        await s.call("heartbeat", heartbeat(group, topic, "TagB"))
        await s.call(
            "consumer list", make_request(RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": group})
        )
        await s.call("pull by heartbeat", pull(group, topic, 0, sys_flag=0))
        await s.call("pull newer subVersion", pull(group, topic, 0, sys_flag=0, sub_version=2 << 40))
        await s.call("heartbeat, new expression", heartbeat(group, topic, "TagA", sub_version=2))
        await s.call("pull by new heartbeat", pull(group, topic, 0, sys_flag=0))
        await s.call(
            "unregister", build_unregister_client(CLIENT_ID, producer_group=PG, consumer_group=group)
        )
        await s.call(
            "consumer list after",
            make_request(RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": group}),
        )

    pair.check("heartbeat", scenario)


def test_delay_level(pair: Pair) -> None:
    topic, group = unique("DiffDelay"), unique("diff_cg")

    async def scenario(s: Side) -> None:
        await setup_topic(s, topic, 2)
        r = await s.call(
            "send DELAY=1",
            send(topic, b"later", queue_id=1, tags="d", keys="dk", uniq="D1", extra={"DELAY": "1"}),
            record=False,
        )
        s.note("send DELAY=1: code, queueId", (r.code, r.ext_fields.get("queueId")))
        note_record(s, "parked record", await viewed(s, r.ext_fields["msgId"]), "queueOffset")
        await s.call("max offset before delivery", build_get_max_offset(topic, 1))
        await s.wait_messages(topic, 1, 1)
        await s.call("pull delivered", pull(group, topic, 0, queue_id=1))
        await s.call(
            "send DELAY=99 (beyond the table)",
            send(topic, b"max", queue_id=0, uniq="D2", extra={"DELAY": "99"}),
            record=False,
        )
        await s.wait_messages(topic, 0, 1)
        await s.call("pull DELAY=99", pull(group, topic, 0, queue_id=0))
        await s.call("send DELAY=0 (none)", send(topic, b"now", queue_id=0, uniq="D3", extra={"DELAY": "0"}))
        await s.call("send DELAY=-1", send(topic, b"neg", queue_id=0, uniq="D4", extra={"DELAY": "-1"}))
        await s.wait_messages(topic, 0, 3)
        await s.call("pull the undelayed", pull(group, topic, 1, queue_id=0))

    pair.check("delay level", scenario)


def end(group: str, half: RemotingCommand, kind: int, **over: object) -> RemotingCommand:
    fields: dict[str, object] = {
        "producer_group": group,
        "tran_state_table_offset": int(half.ext_fields["queueOffset"]),
        "commit_log_offset": parse_msg_id(half.ext_fields["msgId"]).offset,
        "commit_or_rollback": kind,
        "msg_id": half.ext_fields.get("transactionId", ""),
        "transaction_id": half.ext_fields.get("transactionId"),
        **over,
    }
    return make_request(RequestCode.END_TRANSACTION, EndTransactionRequestHeader(**fields).to_ext())  # type: ignore[arg-type]


def test_transaction_half_and_end(pair: Pair) -> None:
    topic, group, tx_group = unique("DiffTx"), unique("diff_cg"), unique("diff_txpg")

    async def scenario(s: Side) -> None:
        await setup_topic(s, topic, 2)

        async def half(uniq: str) -> RemotingCommand:
            r = await s.call(
                f"half {uniq}",
                send(
                    topic,
                    uniq.encode(),
                    queue_id=1,
                    uniq=uniq,
                    keys=f"{uniq}-key",
                    sys_flag=TRANSACTION_PREPARED,
                    group=tx_group,
                    extra={"TRAN_MSG": "true", "PGROUP": tx_group},
                ),
                record=False,
            )
            s.note(
                f"half {uniq}: code, queueId, transactionId",
                (r.code, r.ext_fields.get("queueId"), r.ext_fields.get("transactionId")),
            )
            return r

        plain = s.expect(await s.call("plain send", send(topic, b"plain", queue_id=0, uniq="P1")))
        h1 = await half("TX1")
        note_record(s, "half record", await viewed(s, h1.ext_fields["msgId"]), "queueOffset")
        await s.call("max offset before commit", build_get_max_offset(topic, 1))
        await s.call("end: wrong group", end("other_group", h1, COMMIT))
        await s.call(
            "end: wrong tranStateTableOffset", end(tx_group, h1, COMMIT, tran_state_table_offset=999_999)
        )
        await s.call(
            "end: a plain message's offset",
            end(tx_group, h1, COMMIT, commit_log_offset=parse_msg_id(plain.ext_fields["msgId"]).offset),
        )
        await s.call("end: offset of nothing", end(tx_group, h1, COMMIT, commit_log_offset=1 << 40))
        await s.call("commit", end(tx_group, h1, COMMIT))
        await s.wait_messages(topic, 1, 1)
        await s.call("pull committed", pull(group, topic, 0, queue_id=1))
        await s.call(
            "commit again (a late check answer)", end(tx_group, h1, COMMIT, from_transaction_check=True)
        )
        h2 = await half("TX2")
        await s.call("rollback", end(tx_group, h2, ROLLBACK))
        h3 = await half("TX3")
        await s.call("unknown (state 0)", end(tx_group, h3, 0), timeout=3)
        await s.call("commit after unknown", end(tx_group, h3, COMMIT))
        await s.wait_messages(topic, 1, 2)
        await s.call("pull both committed", pull(group, topic, 0, queue_id=1))

    pair.check("transaction half + end", scenario, known={"pull both committed": "double-commit"})


def send_back(offset: int, group: str, delay_level: int, **over: object) -> RemotingCommand:
    header = ConsumerSendMsgBackRequestHeader(offset=offset, group=group, delay_level=delay_level, **over)  # type: ignore[arg-type]
    return make_request(RequestCode.CONSUMER_SEND_MSG_BACK, header.to_ext())


def test_consumer_send_back_retry_and_dlq(pair: Pair) -> None:
    topic, group = unique("DiffSendBack"), unique("diff_cg")
    retry, dlq = f"%RETRY%{group}", f"%DLQ%{group}"

    async def scenario(s: Side) -> None:
        await setup_topic(s, topic, 1)
        await s.call("heartbeat", heartbeat(group, topic))
        first = s.expect(await s.call("send", send(topic, b"payload", tags="TagA", keys="k1", uniq="SB1")))
        offset = parse_msg_id(first.ext_fields["msgId"]).offset
        await s.call(
            "send back, level 0",
            send_back(offset, group, 0, origin_msg_id="SB1", origin_topic=topic, max_reconsume_times=16),
        )
        await s.wait_messages(retry, 0, 1)
        await s.call("pull retry topic", pull(group, retry, 0))
        tired = s.expect(await s.call("send tired", send(topic, b"tired", uniq="SB2", reconsume_times=2)))
        await s.call(
            "send back beyond max",
            send_back(
                parse_msg_id(tired.ext_fields["msgId"]).offset,
                group,
                0,
                origin_msg_id="SB2",
                origin_topic=topic,
                max_reconsume_times=2,
            ),
        )
        await s.call(
            "send back, level -1", send_back(offset, group, -1, origin_msg_id="SB1", origin_topic=topic)
        )
        await s.wait_messages(dlq, 0, 2)
        await s.call("pull DLQ", pull(group, dlq, 0))
        await s.call("send back, bad offset", send_back(offset + 1, group, 0, origin_topic=topic))
        await s.call("send back, offset of nothing", send_back(1 << 40, group, 0, origin_topic=topic))
        await s.call("send back to the DLQ without originTopic", send_back(offset, group, -1))

    pair.check(
        "consumer send-back",
        scenario,
        known={"send back to the DLQ without originTopic": "send-back-without-origin-topic"},
    )


def pop(
    group: str,
    topic: str,
    *,
    max_nums: int = 2,
    invisible_ms: int = 60_000,
    queue_id: int = -1,
    poll_ms: int = 0,
    born_ms: int | None = None,
    exp: str = "*",
    exp_type: str = "TAG",
) -> RemotingCommand:
    """POP_MESSAGE; born now unless `born_ms` (RocketMQ refuses a request born long before it arrives)."""
    born = int(time.time() * 1000) if born_ms is None else born_ms
    header = PopMessageRequestHeader(
        consumer_group=group,
        topic=topic,
        queue_id=queue_id,
        max_msg_nums=max_nums,
        invisible_time=invisible_ms,
        poll_time=poll_ms,
        born_time=born,
        init_mode=1,
        exp_type=exp_type,
        exp=exp,
        order=False,
    )
    return make_request(PopRequestCode.POP_MESSAGE, header.to_ext())


def receipt_handles(response: RemotingCommand, broker_name: str) -> list[tuple[StoredRecord, str]]:
    ext = response.ext_fields
    starts = parse_offset_info(ext["startOffsetInfo"])
    out = []
    for rec in decode_records(response.body or b""):
        handle = ReceiptHandle(
            starts[("0", rec.queue_id)][0],
            int(ext["popTime"]),
            int(ext["invisibleTime"]),
            int(ext["reviveQid"]),
            "0",
            broker_name,
            rec.queue_id,
            rec.queue_offset,
        )
        out.append((rec, handle.build()))
    return out


def ack(group: str, rec: StoredRecord, handle: str) -> RemotingCommand:
    header = AckMessageRequestHeader(
        consumer_group=group,
        topic=rec.topic,
        queue_id=rec.queue_id,
        extra_info=handle,
        offset=rec.queue_offset,
    )
    return make_request(PopRequestCode.ACK_MESSAGE, header.to_ext())


def change_invisible(group: str, rec: StoredRecord, handle: str, invisible_ms: int) -> RemotingCommand:
    header = ChangeInvisibleTimeRequestHeader(
        consumer_group=group,
        topic=rec.topic,
        queue_id=rec.queue_id,
        extra_info=handle,
        offset=rec.queue_offset,
        invisible_time=invisible_ms,
    )
    return make_request(PopRequestCode.CHANGE_MESSAGE_INVISIBLETIME, header.to_ext())


def test_pop_ack_and_change_invisible_time(pair: Pair) -> None:
    topic, group = unique("DiffPop"), unique("diff_cg")

    async def scenario(s: Side) -> None:
        await setup_topic(s, topic, 1)
        await s.call("pop, empty topic", pop(group, topic))
        for i in range(3):
            s.expect(await s.call(f"send {i}", send(topic, f"p{i}".encode(), tags="t", uniq=f"PP{i}")))
        await s.wait_messages(topic, 0, 3)
        first = await s.call("pop 2", pop(group, topic))
        got = receipt_handles(first, s.broker_name)
        (r0, h0), (r1, h1) = got
        await s.call("ack first", ack(group, r0, h0))
        await s.call("ack first again", ack(group, r0, h0))
        await s.call("change invisible time of second", change_invisible(group, r1, h1, 30_000))
        await s.call("pop the rest", pop(group, topic))
        await s.call("pop, all in flight", pop(group, topic))
        await s.call("ack with a malformed handle", ack(group, r1, "not a handle"))

    pair.check(
        "POP, ACK, CHANGE_INVISIBLE_TIME",
        scenario,
        known={
            "pop, empty topic": "pop-answer-header",
            "ack first again": "pop-double-ack",
            "pop, all in flight": "pop-answer-header",
        },
    )


# -- the properties of a delivered copy ------------------------------------------------------------
# RocketMQ writes the properties string of the copy it delivers (messageTimeup, endMessageTransaction,
# a send-back's retry) before it clears DELAY / REAL_TOPIC / REAL_QID from the copy's map, so the
# copy keeps them (and TRAN_MSG after a commit, WAIT=false after a send-back).


def test_repost_properties(pair: Pair) -> None:
    topic, group = unique("DiffRepost"), unique("diff_cg")

    async def scenario(s: Side) -> None:
        await setup_topic(s, topic, 1)
        await s.call("send DELAY=1", send(topic, b"later", uniq="G2", extra={"DELAY": "1"}), record=False)
        await s.wait_messages(topic, 0, 1)
        await s.call("pull the delivered message", pull(group, topic, 0))

    pair.check("properties of a delivered delayed message", scenario)


def test_retry_properties(pair: Pair) -> None:
    topic, group = unique("DiffRetryProps"), unique("diff_cg")
    retry = f"%RETRY%{group}"

    async def scenario(s: Side) -> None:
        await setup_topic(s, topic, 1)
        sent = s.expect(await s.call("send", send(topic, b"again", uniq="G3"), record=False))
        offset = parse_msg_id(sent.ext_fields["msgId"]).offset
        await s.call("heartbeat", heartbeat(group, topic), record=False)
        await s.call("send back", send_back(offset, group, 0, origin_topic=topic), record=False)
        await s.wait_messages(retry, 0, 1)
        await s.call("pull the retry", pull(group, retry, 0))

    pair.check("properties of a delivered retry", scenario)


def commit_scenario(topic: str, group: str, tx_group: str) -> Scenario:
    async def scenario(s: Side) -> None:
        await setup_topic(s, topic, 1)
        half = await s.call(
            "half",
            send(
                topic,
                b"tx",
                uniq="G4",
                sys_flag=TRANSACTION_PREPARED,
                group=tx_group,
                extra={"TRAN_MSG": "true", "PGROUP": tx_group},
            ),
            record=False,
        )
        await s.call("commit", end(tx_group, half, COMMIT))
        await s.wait_messages(topic, 0, 1)
        await s.call("pull the committed message", pull(group, topic, 0))

    return scenario


def test_committed_transaction_properties(pair: Pair) -> None:
    scenario = commit_scenario(unique("DiffTxProps"), unique("diff_cg"), unique("diff_txpg"))
    pair.check("properties of a committed transaction message", scenario)
