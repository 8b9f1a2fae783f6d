"""Request-reply (RocketMQ's RIP-16) on the wire: codes 324, 325 and 326, and the reply message.

The flow, as RocketMQ 4.6+ serves it:

1. The requester (`DefaultMQProducer.request`) sends an ordinary message carrying three
   properties: CORRELATION_ID (a random UUID), REPLY_TO_CLIENT (its own clientID) and TTL (the
   timeout in ms). The broker stores it with CLUSTER = its cluster name, as every send.
2. A consumer of that message builds the reply (`MessageUtil.createReplyMessage`, here
   `reply_fields`): topic `<CLUSTER>_REPLY_TOPIC`, MSG_TYPE = "reply", and CORRELATION_ID,
   REPLY_TO_CLIENT and TTL copied from the request; and sends it with SEND_REPLY_MESSAGE_V2 (325,
   the one-letter `SendMessageRequestHeaderV2`) or SEND_REPLY_MESSAGE (324, long names): any
   producer sends MSG_TYPE=reply messages under these codes.
3. The broker finds the connection of the client named by REPLY_TO_CLIENT and sends it
   PUSH_REPLY_MESSAGE_TO_CLIENT (326), then (with `storeReplyMessageEnable`, the default) stores
   the reply in the reply topic too. The sender's answer is a SendMessageResponseHeader: SUCCESS
   with msgId "0", queueOffset 0 when the push worked (the stored message's ids when stored), and
   SYSTEM_ERROR with a remark naming the client when it did not.
4. The requester's client matches the pushed reply to its waiting request by CORRELATION_ID.

PUSH_REPLY_MESSAGE_TO_CLIENT's `extFields` (`ReplyMessageRequestHeader`, long names)::

    producerGroup defaultTopic defaultTopicQueueNums queueId sysFlag bornTimestamp flag
    properties reconsumeTimes unitMode   -- the reply's SEND_REPLY_MESSAGE header, as sent
    topic                                -- the reply topic
    bornHost  storeHost                  -- "ip:port" of the replier's connection, of the broker
    storeTimestamp                       -- the broker's clock when it pushed (ms)

`properties` is the reply's property string plus PUSH_REPLY_TIME (ms); the body is the reply's
body as sent (compressed when `sysFlag` has bit 0x1). The client answers SUCCESS, or SYSTEM_ERROR
"process reply message fail".
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Final

from rocketlite.protocol.codes import RequestCode
from rocketlite.protocol.errors import RocketliteError
from rocketlite.protocol.message import MessageConst
from rocketlite.protocol.requests.send import DEFAULT_TOPIC_QUEUE_NUMS, build_send
from rocketlite.protocol.reserved import DEFAULT_TOPIC, reply_topic
from rocketlite.protocol.wire.command import RemotingCommand, make_request
from rocketlite.protocol.wire.custom_header import CustomHeader, Long
from rocketlite.protocol.wire.custom_header import header_dataclass as _header
from rocketlite.protocol.wire.headers import SendMessageRequestHeader

REPLY_MESSAGE_FLAG: Final = "reply"  # MixAll.REPLY_MESSAGE_FLAG, the MSG_TYPE of a reply
REPLY_CODES: Final = frozenset({RequestCode.SEND_REPLY_MESSAGE, RequestCode.SEND_REPLY_MESSAGE_V2})
# What the reply copies from its request (`createReplyMessage`), besides MSG_TYPE.
COPIED: Final = (MessageConst.CORRELATION_ID, MessageConst.MESSAGE_REPLY_TO_CLIENT, MessageConst.MESSAGE_TTL)


class ReplyMessageError(RocketliteError):
    """A reply cannot be made: the request message lacks what the reply needs (CLUSTER)."""


@_header
class ReplyMessageRequestHeader(CustomHeader):
    """PUSH_REPLY_MESSAGE_TO_CLIENT (326), broker to requester: see the module docstring."""

    producer_group: str
    topic: str
    default_topic: str
    default_topic_queue_nums: int
    queue_id: int
    sys_flag: int
    born_timestamp: Long
    flag: int
    properties: str | None = None
    reconsume_times: int | None = None
    unit_mode: bool = False
    born_host: str
    store_host: str
    store_timestamp: Long


def is_reply(properties: Mapping[str, str]) -> bool:
    """Whether a message is a reply (MSG_TYPE "reply"), which producers send with 324/325."""
    return properties.get(MessageConst.MESSAGE_TYPE) == REPLY_MESSAGE_FLAG


def reply_fields(request_properties: Mapping[str, str]) -> tuple[str, dict[str, str]]:
    """`MessageUtil.createReplyMessage`: the reply's topic and properties for a request message
    with `request_properties` (as a consumer received it). Raises `ReplyMessageError` when the
    request has no CLUSTER (it was not stored by a broker, so nobody knows the reply topic)."""
    cluster = request_properties.get(MessageConst.CLUSTER)
    if not cluster:
        raise ReplyMessageError(
            f"create reply message fail, requestMessage error, property[{MessageConst.CLUSTER}] is null."
        )
    props = {MessageConst.MESSAGE_TYPE: REPLY_MESSAGE_FLAG}
    for name in COPIED:
        value = request_properties.get(name)
        if value is not None:
            props[name] = value
    return reply_topic(cluster), props


def build_send_reply(
    *,
    group: str,
    topic: str,
    queue_id: int,
    body: bytes,
    properties: str,
    born_timestamp: int,
    sys_flag: int = 0,
    flag: int = 0,
    default_topic: str = DEFAULT_TOPIC,
    default_topic_queue_nums: int = DEFAULT_TOPIC_QUEUE_NUMS,
    broker_name: str | None = None,
    v2: bool = True,
) -> RemotingCommand:
    """SEND_REPLY_MESSAGE_V2 (325): a SEND_MESSAGE_V2 under the reply code, as Java's
    `sendKernelImpl` builds it; with `v2` False SEND_REPLY_MESSAGE (324), the same header in
    long names."""
    cmd = build_send(
        group=group, topic=topic, queue_id=queue_id, body=body, properties=properties,
        born_timestamp=born_timestamp, sys_flag=sys_flag, flag=flag, default_topic=default_topic,
        default_topic_queue_nums=default_topic_queue_nums, broker_name=broker_name,
    )  # fmt: skip
    if v2:
        return replace(cmd, code=RequestCode.SEND_REPLY_MESSAGE_V2)
    long_names = SendMessageRequestHeader.v2_to_v1(cmd.ext_fields)
    return replace(cmd, code=RequestCode.SEND_REPLY_MESSAGE, ext_fields=long_names)


def build_push_reply(
    send: SendMessageRequestHeader,
    properties: str,
    body: bytes,
    *,
    born_host: str,
    store_host: str,
    store_timestamp: int,
) -> RemotingCommand:
    """The broker's PUSH_REPLY_MESSAGE_TO_CLIENT for a reply sent with header `send`;
    `properties`: the reply's, with PUSH_REPLY_TIME added."""
    header = ReplyMessageRequestHeader(
        producer_group=send.producer_group,
        topic=send.topic,
        default_topic=send.default_topic,
        default_topic_queue_nums=send.default_topic_queue_nums,
        queue_id=send.queue_id,
        sys_flag=send.sys_flag,
        born_timestamp=send.born_timestamp,
        flag=send.flag,
        properties=properties,
        reconsume_times=send.reconsume_times,
        unit_mode=send.unit_mode,
        born_host=born_host,
        store_host=store_host,
        store_timestamp=store_timestamp,
    )
    return make_request(RequestCode.PUSH_REPLY_MESSAGE_TO_CLIENT, header.to_ext(), body)


def parse_push_reply(request: RemotingCommand) -> ReplyMessageRequestHeader:
    """The header of a PUSH_REPLY_MESSAGE_TO_CLIENT (a `HeaderFieldError` names a missing field)."""
    return ReplyMessageRequestHeader.from_ext(request.ext_fields)


PUSH_FAILED_REMARK: Final = "process reply message fail"  # the Java client's answer when it fails
