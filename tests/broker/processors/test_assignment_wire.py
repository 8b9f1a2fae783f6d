"""QUERY_ASSIGNMENT (400) and SET_MESSAGE_REQUEST_MODE (401) over real sockets, as a Java consumer
with `setClientRebalance(false)` and `mqadmin setConsumeMode` send them: the group's live clients
(registered by heartbeats on their own connections) split the topic's queues by the strategy the
client names, POP settings hand out queueId -1 or shared queues, modes survive a restart in
messageRequestMode.json, and what has no valid answer gets no assignment set at all."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path

from rocketlite.embedded import embedded
from rocketlite.protocol.bodies.assignment import (
    MessageRequestMode,
    QueryAssignmentRequestBody,
    QueryAssignmentResponseBody,
    SetMessageRequestModeRequestBody,
)
from rocketlite.protocol.bodies.heartbeat import ConsumerData, HeartbeatData, MessageModel
from rocketlite.protocol.bodies.route import TopicConfig
from rocketlite.protocol.codes import RequestCode, ResponseCode
from rocketlite.protocol.requests.heartbeat import build_heartbeat
from rocketlite.protocol.subscription import build_subscription_data
from rocketlite.protocol.wire.command import make_request
from rocketlite.remoting.client import RemotingClient
from tests.support.aio import run
from tests.support.broker_harness import BrokerUnderTest, broker_under_test
from tests.support.topics import create_topic

TOPIC = "AssignTopic"
GROUP = "assign_cg"
CIDS = ("10.0.0.1@a", "10.0.0.2@b")


@contextlib.asynccontextmanager
async def consumers(broker: BrokerUnderTest | str, cids: tuple[str, ...] = CIDS) -> AsyncIterator[None]:
    """Each client id heartbeats as a member of GROUP on a connection of its own, kept open."""
    addr = broker if isinstance(broker, str) else broker.addr
    clients = [RemotingClient() for _ in cids]
    try:
        for client, cid in zip(clients, cids, strict=True):
            sub = build_subscription_data(TOPIC, "*")
            data = HeartbeatData(cid, consumer_data_set=(ConsumerData(GROUP, subscription_data_set=(sub,)),))
            answer = await client.invoke(addr, build_heartbeat(data), 5.0)
            assert answer.code == ResponseCode.SUCCESS, answer.remark
        yield
    finally:
        for client in clients:
            await client.close()


async def query(
    broker: BrokerUnderTest, cid: str, *, topic: str = TOPIC, strategy: str = "AVG",
    model: MessageModel = MessageModel.CLUSTERING,
) -> dict[int, MessageRequestMode] | None:  # fmt: skip
    """The queue ids (and modes) `cid` is assigned; None when the broker sends no set."""
    body = QueryAssignmentRequestBody(topic, GROUP, cid, strategy, model)
    answer = await broker.call(RequestCode.QUERY_ASSIGNMENT, body=body.to_bytes())
    assert answer.code == ResponseCode.SUCCESS, answer.remark
    got = QueryAssignmentResponseBody.from_json(answer.body or b"{}").assignments
    if got is None:
        return None
    assert {a.message_queue.topic for a in got} <= {topic}
    return {a.message_queue.queue_id: a.mode for a in got}


async def set_mode(broker: BrokerUnderTest, mode: MessageRequestMode, share: int, topic: str = TOPIC) -> None:
    body = SetMessageRequestModeRequestBody(topic, GROUP, mode, share)
    answer = await broker.call(RequestCode.SET_MESSAGE_REQUEST_MODE, body=body.to_bytes())
    assert answer.code == ResponseCode.SUCCESS, answer.remark


PULL, POP = MessageRequestMode.PULL, MessageRequestMode.POP


def test_the_group_splits_the_queues_by_the_named_strategy(tmp_path: Path) -> None:
    async def main() -> None:
        async with broker_under_test(tmp_path) as broker:
            broker.controller.topics.update(TopicConfig(TOPIC, 4, 4))
            async with consumers(broker):
                assert await query(broker, CIDS[0]) == {0: PULL, 1: PULL}
                assert await query(broker, CIDS[1]) == {2: PULL, 3: PULL}
                assert await query(broker, CIDS[0], strategy="AVG_BY_CIRCLE") == {0: PULL, 2: PULL}
                everything = dict.fromkeys(range(4), PULL)
                assert await query(broker, CIDS[1], model=MessageModel.BROADCASTING) == everything
                # no valid answer: no set at all, and the client keeps what it has
                assert await query(broker, CIDS[0], strategy="NO_SUCH_STRATEGY") is None
                assert await query(broker, CIDS[0], topic="NoSuchTopic") is None
            assert await query(broker, CIDS[0]) is None  # the group has no live client now

    run(main())


def test_pop_modes_set_by_401_are_handed_out_and_kept(tmp_path: Path) -> None:
    async def main() -> None:
        async with broker_under_test(tmp_path) as broker:
            broker.controller.topics.update(TopicConfig(TOPIC, 4, 4))
            async with consumers(broker):
                await set_mode(broker, POP, 0)  # every client POPs every queue of the broker
                assert await query(broker, CIDS[0]) == {-1: POP}
                assert await query(broker, CIDS[1]) == {-1: POP}
                await set_mode(broker, POP, 1)  # its own queues and those of the next client
                assert await query(broker, CIDS[0]) == dict.fromkeys(range(4), POP)
            saved = json.loads((tmp_path / "config" / "messageRequestMode.json").read_text())
            assert saved["messageRequestModeMap"][TOPIC][GROUP] == {
                "consumerGroup": GROUP, "mode": "POP", "popShareQueueNum": 1, "topic": TOPIC,
            }  # fmt: skip
            refused = await broker.call(
                RequestCode.SET_MESSAGE_REQUEST_MODE,
                body=SetMessageRequestModeRequestBody(f"%RETRY%{GROUP}", GROUP, POP).to_bytes(),
            )
            assert (refused.code, refused.remark) == (
                ResponseCode.NO_PERMISSION, "retry topic is not allowed to set mode",
            )  # fmt: skip
            bad = await broker.call(RequestCode.QUERY_ASSIGNMENT, body=b"{not json")
            assert bad.code == ResponseCode.SYSTEM_ERROR and "QueryAssignmentRequestBody" in (
                bad.remark or ""
            )
        async with broker_under_test(tmp_path) as broker, consumers(broker, CIDS[:1]):  # restarted
            assert await query(broker, CIDS[0]) == dict.fromkeys(range(4), POP)

    run(main())


def test_more_pop_clients_than_queues_each_get_one(tmp_path: Path) -> None:
    cids = tuple(f"10.0.0.{i}@c" for i in range(3))

    async def main() -> None:
        async with broker_under_test(
            tmp_path, default_message_request_mode=POP, default_pop_share_queue_num=1
        ) as broker:
            broker.controller.topics.update(TopicConfig(TOPIC, 2, 2))
            async with consumers(broker, cids):
                got = [await query(broker, cid) for cid in cids]
                assert got == [{0: POP}, {1: POP}, {0: POP}]  # index mod queues, in sorted id order
                retry = f"%RETRY%{GROUP}"
                broker.controller.topics.update(TopicConfig(retry, 1, 1))
                assert await query(broker, cids[0], topic=retry) == {0: PULL}  # retry topics: PULL

    run(main())


def test_the_queues_are_the_routes_over_the_name_server(tmp_path: Path) -> None:
    """With a name server the queues come from the topic's route (every broker that serves it),
    asked for when the query comes."""
    with embedded(tmp_path) as cluster:
        create_topic(cluster, TOPIC, queues=2)

        async def main() -> None:
            async with consumers(cluster.broker_addr, CIDS[:1]):
                body = QueryAssignmentRequestBody(TOPIC, GROUP, CIDS[0]).to_bytes()
                async with contextlib.AsyncExitStack() as stack:
                    client = RemotingClient()
                    stack.push_async_callback(client.close)
                    request = make_request(RequestCode.QUERY_ASSIGNMENT, {}, body)
                    answer = await client.invoke(cluster.broker_addr, request, 5.0)
            got = QueryAssignmentResponseBody.from_json(answer.body or b"{}").assignments
            assert got is not None
            assert sorted((a.message_queue.broker_name, a.message_queue.queue_id) for a in got) == [
                (cluster.broker.broker.broker_name, 0),
                (cluster.broker.broker.broker_name, 1),
            ]

        run(main())
