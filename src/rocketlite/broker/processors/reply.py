"""SEND_REPLY_MESSAGE (324) and SEND_REPLY_MESSAGE_V2 (325): a reply pushed to its requester.

RocketMQ's `ReplyMessageProcessor`. A reply (`protocol/requests/reply.py` has the whole flow) is
sent like a message, to `<cluster>_REPLY_TOPIC`, with a send header (long names for 324, letters
a..n for 325). The broker:

1. checks it as a send (`msg_check`, the send processor's: topic name, permissions, queue id);
2. pushes it with PUSH_REPLY_MESSAGE_TO_CLIENT (326) to the connection of the client named by
   its REPLY_TO_CLIENT property (a producer's, as RocketMQ looks it up, else a consumer's: see
   `ClientManager.find_channel`), and waits for the client's answer (10 s, as `Broker2Client.callClient`);
3. stores it in the reply topic when `storeReplyMessageEnable` is set (the default), with its
   properties as sent (no CLUSTER added, WAIT kept: RocketMQ stores the header's string as is);
4. answers SUCCESS when the push worked, with msgId "0" and queueOffset 0 (the stored message's
   ids when it was stored), and SYSTEM_ERROR when it did not, with a remark saying why: no
   REPLY_TO_CLIENT, no connection for that client (it is named), or the push failed. The reply is
   stored in every case (as RocketMQ), so a requester that reconnects could still find it.

Both outcomes carry MSG_REGION and TRACE_ON, as every send answer. A store failure after a
successful push is logged, not answered (the requester has its reply; RocketMQ does the same).
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import random
from collections.abc import Callable
from typing import Final, Protocol

from rocketlite.broker.config import BrokerConfig
from rocketlite.broker.processors.send import born_host_of
from rocketlite.broker.stats import BrokerStats
from rocketlite.clock import Clock
from rocketlite.protocol.bodies.route import TopicConfig
from rocketlite.protocol.codes import ResponseCode
from rocketlite.protocol.formats.record import MessageInner
from rocketlite.protocol.message import HostAddress, MessageConst, properties_to_string, string_to_properties
from rocketlite.protocol.requests.reply import build_push_reply
from rocketlite.protocol.wire.command import RemotingCommand, make_response
from rocketlite.protocol.wire.headers import SendMessageRequestHeader
from rocketlite.remoting.connection import Connection, HandlerResult
from rocketlite.runtime import result_within
from rocketlite.store.api import StoreAPI
from rocketlite.store.results import PutMessageResult, PutMessageStatus

log = logging.getLogger("rocketlite.broker.reply")

PUSH_TIMEOUT_S: Final = 10.0  # Broker2Client.callClient's invokeSync timeout

# The send processor's `msg_check`: the topic's config, or a RocketliteError carrying the answer.
MsgCheck = Callable[[SendMessageRequestHeader, str], TopicConfig]


class ReplyChannel(Protocol):
    """What a reply is pushed over: a remoting `Connection` (a 5.x gRPC client has none)."""

    @property
    def closed(self) -> bool: ...


# clientID -> the channel the client last heartbeated on, or None (`ClientManager.find_channel`).
FindClient = Callable[[str], ReplyChannel | None]


def java_host_port(host: HostAddress) -> str:
    """`getHostAddress() + ":" + port`: how RocketMQ 5.x writes bornHost / storeHost in 326
    (no brackets around an IPv6 address: the client splits at the last colon)."""
    return f"{ipaddress.ip_address(host.ip)}:{host.port}"


class ReplyMessageProcessor:
    """Serves 324 and 325; its collaborators are passed in (see the module docstring)."""

    def __init__(
        self,
        broker: BrokerConfig,
        store: StoreAPI,
        stats: BrokerStats,
        clock: Clock,
        store_host: HostAddress,
        *,
        msg_check: MsgCheck,
        find_client: FindClient,
        push_timeout_s: float = PUSH_TIMEOUT_S,
    ) -> None:
        self.broker = broker
        self.store = store
        self.stats = stats
        self.clock = clock
        self.store_host = store_host
        self.msg_check = msg_check
        self.find_client = find_client
        self.push_timeout_s = push_timeout_s
        self.rng = random.Random()

    def handle(self, conn: Connection, request: RemotingCommand) -> HandlerResult:
        """Check the reply at once (a bad header or topic is answered without waiting), then
        push and store it."""
        header = SendMessageRequestHeader.from_ext(request.ext_fields, request.code)
        tc = self.msg_check(header, conn.remote_address)
        queue_id = header.queue_id
        if queue_id < 0:
            queue_id = self.rng.randrange(max(tc.write_queue_nums, 1))
        msg = MessageInner(
            header.topic,
            request.body or b"",
            born_host_of(conn),
            self.store_host,
            queue_id,
            header.flag,
            header.sys_flag,
            header.born_timestamp,
            header.reconsume_times or 0,
            0,
            header.properties or "",
        )
        return self._serve(conn, request, header, msg)

    async def _serve(
        self, conn: Connection, request: RemotingCommand, header: SendMessageRequestHeader, msg: MessageInner
    ) -> RemotingCommand:
        failure = await self._push(header, msg)
        ext: dict[str, str] = {}
        if failure is None:
            ext = {"msgId": "0", "queueId": str(msg.queue_id), "queueOffset": "0"}
        if self.broker.store_reply_message_enable:
            result = await self._store(msg)
            append = result.append
            if result.ok and append is not None:
                self.stats.record_put(msg.topic, 1, len(msg.body))
                ext = {
                    "msgId": append.msg_id,
                    "queueId": str(msg.queue_id),
                    "queueOffset": str(append.logics_offset),
                }
            else:
                log.warning(
                    "storing a reply in %s failed: %s %s", msg.topic, result.status.name, result.remark
                )
        ext["MSG_REGION"] = self.broker.region_id
        ext["TRACE_ON"] = "true" if self.broker.trace_on else "false"
        if failure is not None:
            log.warning("reply from %s not delivered: %s", conn.remote_address, failure)
            return make_response(request, ResponseCode.SYSTEM_ERROR, failure, ext)
        return make_response(request, ResponseCode.SUCCESS, None, ext)

    async def _push(self, header: SendMessageRequestHeader, msg: MessageInner) -> str | None:
        """Push the reply to its requester; None when it took it, else the remark to answer."""
        props = string_to_properties(msg.properties_string)
        sender = props.get(MessageConst.MESSAGE_REPLY_TO_CLIENT)
        if sender is None:
            return f"reply message properties[{MessageConst.MESSAGE_REPLY_TO_CLIENT}] is null"
        channel = self.find_client(sender)
        if channel is None or channel.closed:
            return f"push reply message fail, channel of <{sender}> not found."
        if not isinstance(channel, Connection):
            return (
                f"push reply message fail, <{sender}> is a 5.x (gRPC) client, which takes no pushed replies."
            )
        props[MessageConst.PUSH_REPLY_TIME] = str(self.clock.now_ms())
        push = build_push_reply(
            header,
            properties_to_string(props),
            msg.body,
            born_host=java_host_port(msg.born_host),
            store_host=java_host_port(self.store_host),
            store_timestamp=self.clock.now_ms(),
        )
        try:
            answer = await channel.request(push, self.push_timeout_s)
        except TimeoutError:
            return f"push reply message to {sender} fail: no answer within {self.push_timeout_s:g} s."
        except OSError as exc:  # ConnectionError included: the requester went away meanwhile
            return f"push reply message to {sender} fail: {exc}."
        if answer.code != ResponseCode.SUCCESS:
            return f"push reply message to {sender} fail: {answer.code} {answer.remark or ''}".rstrip() + "."
        return None

    async def _store(self, msg: MessageInner) -> PutMessageResult:
        """Append the reply; with SYNC_FLUSH wait (bounded) for the disk, as a send does."""
        pending = self.store.put_message_nowait(msg)
        fut = pending.flush_future
        if fut is not None:
            try:
                flushed = await result_within(
                    asyncio.wrap_future(fut), self.store.config.sync_flush_timeout / 1000
                )
            except TimeoutError:
                flushed = False
            if not flushed:
                pending.result.status = PutMessageStatus.FLUSH_DISK_TIMEOUT
        return pending.result
