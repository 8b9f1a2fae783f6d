"""Request-reply with rocketlite's SDK end to end: `Producer.request` answered by a push
consumer's `reply`, through the embedded name server + broker (SEND_REPLY_MESSAGE_V2 in,
PUSH_REPLY_MESSAGE_TO_CLIENT out); the async and blocking forms, concurrent requests, compressed
replies, and the errors: a timeout naming the topic and correlation id, a reply to a request
that was never stored, a reply to a requester that is gone."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from rocketlite.client import (
    AsyncProducer,
    AsyncPushConsumer,
    BrokerSystemError,
    ClientStateError,
    ConsumeFromWhere,
    ConsumeStatus,
    Message,
    MessageExt,
    Producer,
    PushConsumer,
    RequestTimeoutError,
    create_reply_message,
)
from rocketlite.embedded import EmbeddedCluster
from rocketlite.protocol.message import MessageConst
from tests.support.aio import run
from tests.support.names import unique
from tests.support.topics import create_topic

REPLY_TOPIC = "DefaultCluster_REPLY_TOPIC"
# A request may be stored before the responder's group has an offset in its queue; from the last
# offset the responder could start just past it (a consume-queue not yet dispatched reads empty).
FIRST = ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET


def answering(responder: AsyncProducer, seen: list[MessageExt], prefix: bytes = b"re: ") -> Any:
    async def listener(msgs: list[MessageExt], ctx: Any) -> ConsumeStatus:
        for m in msgs:
            seen.append(m)
            await responder.reply(m, prefix + m.body)
        return ConsumeStatus.CONSUME_SUCCESS

    return listener


def test_async_request_gets_the_consumers_reply(embedded_cluster: EmbeddedCluster) -> None:
    topic = unique("Req")
    create_topic(embedded_cluster, topic)
    addr = embedded_cluster.namesrv_addr

    async def main() -> None:
        seen: list[MessageExt] = []
        async with AsyncProducer(unique("rp"), addr, instance_name="responder") as responder:
            consumer = AsyncPushConsumer(
                unique("rc"), addr, instance_name="responder", consume_from_where=FIRST
            )
            consumer.subscribe(topic)
            consumer.register_message_listener(answering(responder, seen))
            async with consumer, AsyncProducer(unique("qp"), addr, instance_name="requester") as requester:
                question = Message(topic, b"question 0", tags="Q")
                started = int(time.time() * 1000)
                reply = await requester.request(question, timeout=10.0)
                assert reply.body == b"re: question 0" and reply.topic == REPLY_TOPIC
                correlation = question.properties[MessageConst.CORRELATION_ID]
                assert question.properties[MessageConst.MESSAGE_REPLY_TO_CLIENT] == requester.client_id
                assert question.properties[MessageConst.MESSAGE_TTL] == "10000"
                # what the consumer received: the request as stored, CLUSTER added by the broker
                assert seen[0].properties[MessageConst.CORRELATION_ID] == correlation
                assert seen[0].properties[MessageConst.CLUSTER] == "DefaultCluster"
                props = reply.properties
                assert props[MessageConst.CORRELATION_ID] == correlation
                assert props[MessageConst.MESSAGE_TYPE] == "reply"
                assert props[MessageConst.MESSAGE_REPLY_TO_CLIENT] == requester.client_id
                assert int(props[MessageConst.PUSH_REPLY_TIME]) >= started
                assert int(props[MessageConst.REPLY_MESSAGE_ARRIVE_TIME]) >= int(
                    props[MessageConst.PUSH_REPLY_TIME]
                )
                assert reply.store_host.endswith(f":{embedded_cluster.broker.port}")
                # several requests at once: each gets its own reply
                questions = [Message(topic, f"q{i}".encode()) for i in range(4)]
                replies = await asyncio.gather(*(requester.request(q, timeout=10.0) for q in questions))
                assert [r.body for r in replies] == [f"re: q{i}".encode() for i in range(4)]
                assert not requester.instance.replies.waiting

    run(main(), timeout=60)


def test_blocking_request_and_a_compressed_reply(embedded_cluster: EmbeddedCluster) -> None:
    """The blocking twins: a plain-function listener replies with the blocking `Producer.reply`;
    a reply body over 4 KiB travels compressed and arrives inflated."""
    topic = unique("ReqSync")
    create_topic(embedded_cluster, topic)
    addr = embedded_cluster.namesrv_addr
    big = bytes(range(256)) * 40  # 10 KiB

    with Producer(unique("rp"), addr, instance_name="sync-responder") as responder:

        def listener(msgs: list[MessageExt], ctx: Any) -> ConsumeStatus:
            for m in msgs:
                responder.reply(m, big if m.body == b"big" else m.body.upper())
            return ConsumeStatus.CONSUME_SUCCESS

        consumer = PushConsumer(unique("rc"), addr, instance_name="sync-responder", consume_from_where=FIRST)
        consumer.subscribe(topic)
        consumer.register_message_listener(listener)
        with consumer, Producer(unique("qp"), addr, instance_name="sync-requester") as requester:
            assert requester.request(Message(topic, b"hello"), 10.0).body == b"HELLO"
            assert requester.request(Message(topic, b"big"), 10.0).body == big


def test_a_request_nobody_answers_times_out_naming_topic_and_correlation_id(
    embedded_cluster: EmbeddedCluster,
) -> None:
    topic = unique("ReqNobody")
    create_topic(embedded_cluster, topic)

    async def main() -> None:
        async with AsyncProducer(unique("qp"), embedded_cluster.namesrv_addr) as requester:
            question = Message(topic, b"anyone?")
            with pytest.raises(RequestTimeoutError) as err:
                await requester.request(question, timeout=0.5)
            correlation = question.properties[MessageConst.CORRELATION_ID]
            assert (err.value.topic, err.value.correlation_id) == (topic, correlation)
            assert (
                f"<{topic}>" in str(err.value)
                and correlation in str(err.value)
                and "500 ms" in str(err.value)
            )
            assert not requester.instance.replies.waiting
            with pytest.raises(ClientStateError, match="timeout must be positive"):
                await requester.request(Message(topic, b"x"), timeout=0)

    run(main(), timeout=30)


def test_replies_that_cannot_be_made_or_delivered(embedded_cluster: EmbeddedCluster) -> None:
    """A message that was never stored has no CLUSTER, so no reply topic; a reply to a client the
    broker does not know is refused with SYSTEM_ERROR naming the client, in one attempt."""

    async def main() -> None:
        with pytest.raises(ClientStateError, match=r"property\[CLUSTER\] is null"):
            create_reply_message(Message("T", b"not received"), b"answer")
        request = Message("T", b"q", properties={
            MessageConst.CLUSTER: "DefaultCluster", MessageConst.CORRELATION_ID: "c-1",
            MessageConst.MESSAGE_REPLY_TO_CLIENT: "10.9.9.9@gone", MessageConst.MESSAGE_TTL: "3000",
        })  # fmt: skip
        reply = create_reply_message(request, b"answer")
        assert (reply.topic, reply.properties) == (REPLY_TOPIC, {
            MessageConst.MESSAGE_TYPE: "reply", MessageConst.CORRELATION_ID: "c-1",
            MessageConst.MESSAGE_REPLY_TO_CLIENT: "10.9.9.9@gone", MessageConst.MESSAGE_TTL: "3000",
        })  # fmt: skip
        async with AsyncProducer(unique("rp"), embedded_cluster.namesrv_addr) as responder:
            before = embedded_cluster.broker.store.get_max_offset_in_queue(REPLY_TOPIC, 0)
            with pytest.raises(BrokerSystemError, match=r"channel of <10\.9\.9\.9@gone> not found"):
                await responder.reply(request, b"answer")
            # stored once, as RocketMQ stores a reply it could not push; not retried
            await asyncio.to_thread(embedded_cluster.broker.store.wait_dispatched, 10.0)
            assert embedded_cluster.broker.store.get_max_offset_in_queue(REPLY_TOPIC, 0) == before + 1

    run(main(), timeout=30)
