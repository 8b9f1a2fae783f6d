"""Request-reply over real sockets, as raw requests: SEND_REPLY_MESSAGE_V2 (325) and
SEND_REPLY_MESSAGE (324) pushed to the requester with PUSH_REPLY_MESSAGE_TO_CLIENT (326), its
header fields as RocketMQ 5.3 writes them, the reply stored in <cluster>_REPLY_TOPIC (or not,
with storeReplyMessageEnable=false), and every way a reply cannot be delivered answered
SYSTEM_ERROR with a remark that says why."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path

from rocketlite.protocol.bodies.heartbeat import ConsumerData, HeartbeatData, ProducerData
from rocketlite.protocol.codes import RequestCode, ResponseCode
from rocketlite.protocol.message import MessageConst, properties_to_string, string_to_properties
from rocketlite.protocol.requests.heartbeat import build_heartbeat
from rocketlite.protocol.requests.reply import build_send_reply
from rocketlite.protocol.wire.command import RemotingCommand, make_response
from rocketlite.remoting.client import RemotingClient
from rocketlite.remoting.connection import Connection, HandlerResult, RequestTable
from tests.support.aio import run
from tests.support.broker_harness import BrokerUnderTest, broker_under_test
from tests.support.wire import pull_until_end

REPLY_TOPIC = "DefaultCluster_REPLY_TOPIC"
REQUESTER = "127.0.0.1@requester"


@dataclass
class Requester:
    """A client that heartbeats under `REQUESTER` and takes pushed replies with `answer`."""

    client: RemotingClient
    pushed: list[RemotingCommand] = field(default_factory=list)
    arrived: asyncio.Event = field(default_factory=asyncio.Event)


def answer_ok(request: RemotingCommand) -> HandlerResult:
    return make_response(request, ResponseCode.SUCCESS)


@contextlib.asynccontextmanager
async def requester(
    b: BrokerUnderTest,
    answer: Callable[[RemotingCommand], HandlerResult] = answer_ok,
    *,
    as_consumer: bool = False,
) -> AsyncIterator[Requester]:
    table = RequestTable()
    req = Requester(RemotingClient(table))

    def on_push(conn: Connection, request: RemotingCommand) -> HandlerResult:
        del conn
        req.pushed.append(request)
        req.arrived.set()
        return answer(request)

    table.register(RequestCode.PUSH_REPLY_MESSAGE_TO_CLIENT, on_push)
    data = (
        HeartbeatData(REQUESTER, consumer_data_set=(ConsumerData("req_cg"),))
        if as_consumer
        else HeartbeatData(REQUESTER, producer_data_set=(ProducerData("req_pg"),))
    )
    beat = await req.client.invoke(b.addr, build_heartbeat(data), 5.0)
    assert beat.code == ResponseCode.SUCCESS, beat.remark
    try:
        yield req
    finally:
        await req.client.close()


def reply_props(**extra: str) -> dict[str, str]:
    props = {
        MessageConst.MESSAGE_TYPE: "reply",
        MessageConst.CORRELATION_ID: "corr-1",
        MessageConst.MESSAGE_REPLY_TO_CLIENT: REQUESTER,
        MessageConst.MESSAGE_TTL: "3000",
        MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: "UNIQ-1",
    }
    props.update(extra)
    return {k: v for k, v in props.items() if v}


async def send_reply(
    b: BrokerUnderTest,
    props: dict[str, str],
    *,
    v2: bool = True,
    topic: str = REPLY_TOPIC,
    body: bytes = b"answer",
) -> RemotingCommand:
    cmd = build_send_reply(
        group="replier_pg", topic=topic, queue_id=0, body=body, properties=properties_to_string(props),
        born_timestamp=1234, flag=7, v2=v2,
    )  # fmt: skip
    return await b.client.invoke(b.addr, cmd, 15.0)


async def stored_replies(b: BrokerUnderTest) -> list[tuple[bytes, dict[str, str]]]:
    await b.dispatched()
    records, _ = await pull_until_end(b.client, b.addr, REPLY_TOPIC, 0, group="g")
    return [(r.body, string_to_properties(r.properties_string)) for r in records]


def test_v2_reply_is_pushed_with_rocketmqs_header_and_stored(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with broker_under_test(tmp_path / "s") as b, requester(b) as req:
            before = int(time.time() * 1000)
            response = await send_reply(b, reply_props())
            assert response.code == ResponseCode.SUCCESS, response.remark
            assert response.ext_fields["MSG_REGION"] == "DefaultRegion"
            assert response.ext_fields["TRACE_ON"] == "true"
            assert response.ext_fields["queueId"] == "0" and response.ext_fields["queueOffset"] == "0"
            assert len(response.ext_fields["msgId"]) == 32  # the stored message's offsetMsgId
            [push] = req.pushed
            ext = push.ext_fields
            assert push.code == RequestCode.PUSH_REPLY_MESSAGE_TO_CLIENT and push.body == b"answer"
            expected = {
                "producerGroup": "replier_pg", "topic": REPLY_TOPIC, "defaultTopic": "TBW102",
                "defaultTopicQueueNums": "4", "queueId": "0", "sysFlag": "0", "bornTimestamp": "1234",
                "flag": "7", "reconsumeTimes": "0", "unitMode": "false",
            }  # fmt: skip
            assert {k: ext[k] for k in expected} == expected
            replier_port = (await b.client.connection(b.addr)).local_port
            assert ext["bornHost"] == f"127.0.0.1:{replier_port}"
            assert ext["storeHost"] == f"127.0.0.1:{b.controller.port}"
            assert before <= int(ext["storeTimestamp"]) <= int(time.time() * 1000)
            pushed_props = string_to_properties(ext["properties"])
            assert pushed_props.pop(MessageConst.PUSH_REPLY_TIME).isdigit()
            assert pushed_props == reply_props()
            # stored as sent: no CLUSTER added, no PUSH_REPLY_TIME
            assert await stored_replies(b) == [(b"answer", reply_props())]

    run(scenario())


def test_v1_reply_without_storing(tmp_path: Path) -> None:
    """SEND_REPLY_MESSAGE (long header names); storeReplyMessageEnable=false (set at run time):
    pushed, not stored, answered with msgId "0" as RocketMQ does."""

    async def scenario() -> None:
        async with broker_under_test(tmp_path / "s") as b, requester(b) as req:
            updated = await b.call(RequestCode.UPDATE_BROKER_CONFIG, body=b"storeReplyMessageEnable=false\n")
            assert updated.code == ResponseCode.SUCCESS, updated.remark
            response = await send_reply(b, reply_props(), v2=False)
            assert response.code == ResponseCode.SUCCESS, response.remark
            assert (response.ext_fields["msgId"], response.ext_fields["queueOffset"]) == ("0", "0")
            assert [p.body for p in req.pushed] == [b"answer"]
            assert req.pushed[0].ext_fields["producerGroup"] == "replier_pg"
            assert await stored_replies(b) == []

    run(scenario())


def test_a_client_known_only_as_consumer_gets_its_reply(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with broker_under_test(tmp_path / "s") as b, requester(b, as_consumer=True) as req:
            response = await send_reply(b, reply_props())
            assert response.code == ResponseCode.SUCCESS, response.remark
            assert len(req.pushed) == 1

    run(scenario())


def test_undeliverable_replies_are_refused_naming_why(tmp_path: Path) -> None:
    """No REPLY_TO_CLIENT, an unknown client, a client whose connection closed: SYSTEM_ERROR with
    RocketMQ's remarks; the reply is stored all the same (as RocketMQ stores it)."""

    async def scenario() -> None:
        async with broker_under_test(tmp_path / "s") as b:
            r = await send_reply(b, reply_props(**{MessageConst.MESSAGE_REPLY_TO_CLIENT: ""}))
            assert (r.code, r.remark) == (
                ResponseCode.SYSTEM_ERROR,
                "reply message properties[REPLY_TO_CLIENT] is null",
            )
            assert r.ext_fields["MSG_REGION"] == "DefaultRegion" and r.ext_fields["queueOffset"] == "0"
            r = await send_reply(b, reply_props(**{MessageConst.MESSAGE_REPLY_TO_CLIENT: "10.0.0.9@gone"}))
            assert (r.code, r.remark) == (
                ResponseCode.SYSTEM_ERROR, "push reply message fail, channel of <10.0.0.9@gone> not found."
            )  # fmt: skip
            async with requester(b) as req:
                assert b.controller.parts is not None
                assert b.controller.parts.clients.find_channel(REQUESTER) is not None
            await wait_for(lambda: b.controller.parts is not None and
                           b.controller.parts.clients.find_channel(REQUESTER) is None)  # fmt: skip
            r = await send_reply(b, reply_props())
            assert (r.code, r.remark) == (
                ResponseCode.SYSTEM_ERROR, f"push reply message fail, channel of <{REQUESTER}> not found."
            )  # fmt: skip
            assert req.pushed == []
            assert [p[MessageConst.CORRELATION_ID] for _, p in await stored_replies(b)] == ["corr-1"] * 3

    run(scenario())


def test_a_push_the_requester_refuses_or_ignores_fails_the_reply(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with broker_under_test(tmp_path / "s") as b:

            def refuse(request: RemotingCommand) -> HandlerResult:
                return make_response(request, ResponseCode.SYSTEM_ERROR, "process reply message fail")

            async with requester(b, refuse):
                r = await send_reply(b, reply_props())
                assert r.code == ResponseCode.SYSTEM_ERROR
                assert r.remark == f"push reply message to {REQUESTER} fail: 1 process reply message fail."

            never: asyncio.Future[RemotingCommand] = asyncio.get_running_loop().create_future()
            assert b.controller.parts is not None and b.controller.parts.reply is not None
            b.controller.parts.reply.push_timeout_s = 0.3
            async with requester(b, lambda request: never) as req:
                r = await send_reply(b, reply_props())
                assert (r.code, r.remark) == (
                    ResponseCode.SYSTEM_ERROR,
                    f"push reply message to {REQUESTER} fail: no answer within 0.3 s.",
                )
                assert len(req.pushed) == 1

    run(scenario())


def test_bad_reply_requests_are_refused_as_sends_are(tmp_path: Path) -> None:
    """A header without a required field names it; a topic no one may send to, or a queue the
    topic does not have, is refused by the send checks; nothing is pushed."""

    async def scenario() -> None:
        async with broker_under_test(tmp_path / "s") as b, requester(b) as req:
            props = properties_to_string(reply_props())
            cmd = build_send_reply(group="pg", topic=REPLY_TOPIC, queue_id=0, body=b"x", properties=props,
                                   born_timestamp=1)  # fmt: skip
            del cmd.ext_fields["b"]  # the topic
            r = await b.client.invoke(b.addr, cmd, 5.0)
            assert r.code == ResponseCode.SYSTEM_ERROR and "b" in (r.remark or ""), r.remark
            r = await send_reply(b, reply_props(), topic="SCHEDULE_TOPIC_XXXX")
            assert r.code == ResponseCode.NO_PERMISSION, r.remark
            cmd = build_send_reply(group="pg", topic=REPLY_TOPIC, queue_id=5, body=b"x", properties=props,
                                   born_timestamp=1)  # fmt: skip
            r = await b.client.invoke(b.addr, cmd, 5.0)
            assert r.code == ResponseCode.SYSTEM_ERROR and "queueId[5] is illegal" in (r.remark or ""), (
                r.remark
            )
            assert req.pushed == []

    run(scenario())


async def wait_for(cond: Callable[[], bool], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.01)
