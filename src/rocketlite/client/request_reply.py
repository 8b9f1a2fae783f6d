"""Request-reply in the SDK: `AsyncProducer.request`, the reply table, and making a reply.

The requester's side (`DefaultMQProducerImpl.request`): the request message gets
CORRELATION_ID (a random UUID), REPLY_TO_CLIENT (the client instance's clientID) and TTL (the
timeout in ms); a future is entered in the instance's `ReplyTable` under the correlation id
*before* the send, since the reply may be pushed before the send's own answer arrives; then the
message is sent as any other and the future awaited. The broker pushes the reply over a
connection the instance opened (PUSH_REPLY_MESSAGE_TO_CLIENT, 326), and `ReplyTable.on_push`
completes the future with the reply as a `MessageExt` (body inflated, ARRIVE_TIME added).

The broker finds the requester by its clientID among the clients that sent it a heartbeat, so
before the first request to a topic the route is fetched and a heartbeat sent to every broker
of it, as Java's `prepareSendRequest` does.

The replier's side (`MessageUtil.createReplyMessage`): `create_reply_message(request, body)`
makes the reply of a received request message, and any producer's `send` sends a message whose
MSG_TYPE is "reply" with SEND_REPLY_MESSAGE_V2 (325), as the Java producer does.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from typing import TYPE_CHECKING

from rocketlite.client.errors import ClientError, ClientStateError
from rocketlite.client.message import Message, MessageExt, decompress_body
from rocketlite.protocol.codes import ResponseCode
from rocketlite.protocol.errors import ProtocolError
from rocketlite.protocol.message import MessageConst, string_to_properties
from rocketlite.protocol.requests.reply import (
    PUSH_FAILED_REMARK,
    ReplyMessageError,
    parse_push_reply,
    reply_fields,
)
from rocketlite.protocol.wire.command import RemotingCommand, make_response
from rocketlite.remoting.connection import Connection

if TYPE_CHECKING:  # the producer builds on this module
    from rocketlite.client.producer import AsyncProducer

__all__ = ["ReplyTable", "RequestTimeoutError", "create_reply_message", "send_request"]

log = logging.getLogger("rocketlite.client.reply")


class RequestTimeoutError(ClientError):
    """The request was sent, but no reply came within the timeout (Java's `RequestTimeoutException`).

    `topic`, `correlation_id` and `timeout` (seconds) name the request that waited."""

    retriable = False

    def __init__(self, topic: str, correlation_id: str, timeout: float) -> None:
        super().__init__(
            f"send request message to <{topic}> OK, but wait reply message timeout, "
            f"{round(timeout * 1000)} ms (CORRELATION_ID {correlation_id})"
        )
        self.topic = topic
        self.correlation_id = correlation_id
        self.timeout = timeout


def create_reply_message(request: Message, body: bytes | str) -> Message:
    """The reply to a received request message (`MessageUtil.createReplyMessage`): topic
    `<cluster>_REPLY_TOPIC` from the request's CLUSTER property, MSG_TYPE "reply", and its
    CORRELATION_ID, REPLY_TO_CLIENT and TTL. Raises `ClientStateError` naming the missing
    property when `request` was not a message received from a broker."""
    try:
        topic, props = reply_fields(request.properties)
    except ReplyMessageError as exc:
        raise ClientStateError(str(exc)) from None
    return Message(topic, body, properties=props)


def reply_message(request: RemotingCommand, received_ms: int) -> MessageExt:
    """The `MessageExt` of a PUSH_REPLY_MESSAGE_TO_CLIENT (`ClientRemotingProcessor.receiveReplyMessage`)."""
    header = parse_push_reply(request)
    props = string_to_properties(header.properties or "")
    props[MessageConst.REPLY_MESSAGE_ARRIVE_TIME] = str(received_ms)
    body = decompress_body(request.body or b"", header.sys_flag)
    msg = MessageExt(header.topic, body, props, header.flag)
    msg.queue_id = header.queue_id
    msg.sys_flag = header.sys_flag
    msg.born_timestamp = header.born_timestamp
    msg.born_host = header.born_host
    msg.store_host = header.store_host
    msg.store_timestamp = header.store_timestamp
    msg.reconsume_times = header.reconsume_times or 0
    return msg


class ReplyTable:
    """Waiting requests of one client instance by correlation id (Java's `RequestFutureHolder`)."""

    def __init__(self) -> None:
        self.waiting: dict[str, asyncio.Future[MessageExt]] = {}
        self.unmatched = 0  # replies that found no waiting request (late, or not ours)

    def expect(self, correlation_id: str) -> asyncio.Future[MessageExt]:
        fut: asyncio.Future[MessageExt] = asyncio.get_running_loop().create_future()
        self.waiting[correlation_id] = fut
        return fut

    def discard(self, correlation_id: str) -> None:
        self.waiting.pop(correlation_id, None)

    def on_push(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        """PUSH_REPLY_MESSAGE_TO_CLIENT: complete the matching request; answer SUCCESS (also for
        a reply nobody waits for any more, as Java), SYSTEM_ERROR when the push is malformed."""
        try:
            reply = reply_message(request, int(time.time() * 1000))
        except ProtocolError as exc:
            log.warning("malformed reply from %s: %s", conn.remote_address, exc)
            return make_response(request, ResponseCode.SYSTEM_ERROR, f"{PUSH_FAILED_REMARK}: {exc}")
        correlation_id = reply.properties.get(MessageConst.CORRELATION_ID, "")
        fut = self.waiting.pop(correlation_id, None)
        if fut is None or fut.done():
            self.unmatched += 1
            log.warning(
                "reply %s from %s matches no waiting request", correlation_id or "<none>", reply.born_host
            )
        else:
            fut.set_result(reply)
        return make_response(request, ResponseCode.SUCCESS)


async def send_request(producer: AsyncProducer, msg: Message, timeout: float) -> MessageExt:
    """`AsyncProducer.request`: send `msg` as a request and wait for its reply (see the module
    docstring); `RequestTimeoutError` when none comes within `timeout` seconds, the send's own
    `ClientError` when the request could not be sent."""
    if timeout <= 0:
        raise ClientStateError(f"request timeout must be positive, got {timeout}")
    instance = producer.instance
    deadline = time.monotonic() + timeout
    correlation_id = str(uuid.uuid4())
    msg.properties[MessageConst.CORRELATION_ID] = correlation_id
    msg.properties[MessageConst.MESSAGE_REPLY_TO_CLIENT] = instance.client_id
    msg.properties[MessageConst.MESSAGE_TTL] = str(round(timeout * 1000))
    if instance.publish_info(msg.topic) is None:
        await producer.publish_info(msg.topic)  # the brokers of the topic must know us first
        await instance.send_heartbeat_to_all()
    fut = instance.replies.expect(correlation_id)
    try:
        await producer.send(msg, timeout=max(deadline - time.monotonic(), 0.001))
        try:
            async with asyncio.timeout(max(deadline - time.monotonic(), 0.0)):
                return await fut
        except TimeoutError:
            raise RequestTimeoutError(msg.topic, correlation_id, timeout) from None
    finally:
        instance.replies.discard(correlation_id)
