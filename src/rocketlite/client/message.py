"""What users send and receive: `Message`, `MessageExt`, `SendResult`, `PullResult` and friends.

`Message` keeps everything in one properties dict, as Java's `Message` does, so tags, keys, delay
level and user properties all travel in the same `name\\x01value\\x02...` string; the accessors
are views onto it. `MessageExt` adds what the broker stored (queue, offsets, hosts, times,
reconsume count) and is built from a stored record (`protocol.record.decode_records`, the
broker's own decoder, so the two sides can never disagree on the layout).

Message ids: `msg_id` is the client-made `UNIQ_KEY` when present (what Java's
`MessageClientExt.getMsgId()` returns), else the broker-made offsetMsgId; `offset_msg_id` is always
the latter (store host + commit-log offset), the one VIEW_MESSAGE_BY_ID and END_TRANSACTION need.
`UniqIdGenerator` (`rocketlite.protocol.uniq_key`) makes UNIQ_KEYs with `MessageClientIDSetter`'s
layout, bit for bit (32 hex chars for IPv4).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import NamedTuple

from rocketlite.protocol.bodies.message_queue import MessageQueue
from rocketlite.protocol.formats.record import COMPRESSION_TYPE_MASK, StoredRecord, inflate_body
from rocketlite.protocol.message import (
    KEY_SEPARATOR,
    MessageConst,
    MessageSysFlag,
    properties_to_string,
    string_to_properties,
)
from rocketlite.protocol.requests.pull import PullStatus
from rocketlite.protocol.requests.send import SendStatus
from rocketlite.protocol.uniq_key import UniqIdGenerator

log = logging.getLogger("rocketlite.client.message")

__all__ = [
    "Message",
    "MessageExt",
    "MessageQueue",
    "PullResult",
    "PullStatus",
    "SendResult",
    "SendStatus",
    "UniqIdGenerator",
    "message_from_record",
]

SHARDING_KEY = "__SHARDING_KEY"  # the property ali-ons uses for its sharding key


class Message:
    """A message to send. `properties` holds system and user properties alike (Java's model)."""

    __slots__ = ("body", "flag", "properties", "topic")

    def __init__(
        self,
        topic: str,
        body: bytes | str = b"",
        *,
        tags: str | None = None,
        keys: str | Iterable[str] | None = None,
        properties: Mapping[str, str] | None = None,
        flag: int = 0,
        delay_level: int = 0,
        wait_store_msg_ok: bool = True,
    ) -> None:
        self.topic = topic
        self.body = body.encode("utf-8") if isinstance(body, str) else bytes(body)
        self.flag = flag
        self.properties: dict[str, str] = dict(properties or {})
        if tags:
            self.tags = tags
        if keys:
            self.keys = keys
        if delay_level > 0:
            self.delay_level = delay_level
        if not wait_store_msg_ok:
            self.properties[MessageConst.WAIT_STORE_MSG_OK] = "false"

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(topic={self.topic!r}, body=<{len(self.body)} bytes>, "
            f"properties={self.properties!r})"
        )

    # -- property views ----------------------------------------------------------------------
    @property
    def tags(self) -> str | None:
        return self.properties.get(MessageConst.TAGS)

    @tags.setter
    def tags(self, value: str | None) -> None:
        self._set(MessageConst.TAGS, value)

    @property
    def keys(self) -> str | None:
        """Space-separated keys (indexed by the broker; QUERY_MESSAGE finds them)."""
        return self.properties.get(MessageConst.KEYS)

    @keys.setter
    def keys(self, value: str | Iterable[str] | None) -> None:
        if value is not None and not isinstance(value, str):
            value = KEY_SEPARATOR.join(value)
        self._set(MessageConst.KEYS, value or None)

    @property
    def delay_level(self) -> int:
        """Delay level 1..18 (broker's messageDelayLevel); 0 = deliver at once."""
        return int(self.properties.get(MessageConst.DELAY_TIME_LEVEL, "0") or 0)

    @delay_level.setter
    def delay_level(self, level: int) -> None:
        self._set(MessageConst.DELAY_TIME_LEVEL, str(level) if level > 0 else None)

    @property
    def sharding_key(self) -> str | None:
        return self.properties.get(SHARDING_KEY)

    @sharding_key.setter
    def sharding_key(self, value: str | None) -> None:
        self._set(SHARDING_KEY, value)

    @property
    def transaction_id(self) -> str | None:
        return self.properties.get(MessageConst.TRANSACTION_ID)

    def get_property(self, name: str, default: str | None = None) -> str | None:
        return self.properties.get(name, default)

    def put_property(self, name: str, value: str) -> None:
        self.properties[name] = value

    def _set(self, name: str, value: str | None) -> None:
        if value is None:
            self.properties.pop(name, None)
        else:
            self.properties[name] = value

    def properties_string(self) -> str:
        return properties_to_string(self.properties)


class MessageExt(Message):
    """A stored message as a consumer (or a transaction check) sees it."""

    __slots__ = (
        "body_crc",
        "born_host",
        "born_timestamp",
        "broker_name",
        "commit_log_offset",
        "offset_msg_id",
        "prepared_transaction_offset",
        "queue_id",
        "queue_offset",
        "reconsume_times",
        "store_host",
        "store_size",
        "store_timestamp",
        "sys_flag",
    )

    def __init__(self, topic: str, body: bytes, properties: Mapping[str, str], flag: int = 0) -> None:
        super().__init__(topic, body, properties=properties, flag=flag)
        self.broker_name = ""
        self.queue_id = 0
        self.queue_offset = 0
        self.commit_log_offset = 0
        self.sys_flag = 0
        self.born_timestamp = 0
        self.born_host = ""
        self.store_timestamp = 0
        self.store_host = ""
        self.reconsume_times = 0
        self.prepared_transaction_offset = 0
        self.body_crc = 0
        self.store_size = 0
        self.offset_msg_id = ""

    @property
    def msg_id(self) -> str:
        """UNIQ_KEY when the producer set one (Java's `MessageClientExt.getMsgId`), else offsetMsgId."""
        return self.properties.get(MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX) or self.offset_msg_id

    @property
    def queue(self) -> MessageQueue:
        return MessageQueue(self.topic, self.broker_name, self.queue_id)

    def __repr__(self) -> str:
        return (
            f"MessageExt(topic={self.topic!r}, queue_id={self.queue_id}, queue_offset={self.queue_offset}, "
            f"msg_id={self.msg_id!r}, reconsume_times={self.reconsume_times}, "
            f"body=<{len(self.body)} bytes>, properties={self.properties!r})"
        )


def decompress_body(body: bytes, sys_flag: int) -> bytes:
    """Inflate a body stored with COMPRESSED_FLAG (`protocol.record.inflate_body`), and say in the
    log when it stays as stored (LZ4/ZSTD need libraries we do not ship, or not a zlib stream)."""
    inflated = inflate_body(body, sys_flag)
    if inflated is body and sys_flag & MessageSysFlag.COMPRESSED_FLAG:
        log.warning(
            "body flagged compressed (type %#x) could not be inflated; left as is",
            sys_flag & COMPRESSION_TYPE_MASK,
        )
    return inflated


def message_from_record(rec: StoredRecord, broker_name: str = "", *, decompress: bool = True) -> MessageExt:
    """`MessageDecoder.decode` on the client: body inflated, offsetMsgId from store host + offset."""
    body = decompress_body(rec.body, rec.sys_flag) if decompress else rec.body
    msg = MessageExt(rec.topic, body, string_to_properties(rec.properties_string), rec.flag)
    msg.broker_name = broker_name
    msg.queue_id = rec.queue_id
    msg.queue_offset = rec.queue_offset
    msg.commit_log_offset = rec.physical_offset
    msg.sys_flag = rec.sys_flag
    msg.born_timestamp = rec.born_timestamp
    msg.born_host = str(rec.born_host)
    msg.store_timestamp = rec.store_timestamp
    msg.store_host = str(rec.store_host)
    msg.reconsume_times = rec.reconsume_times
    msg.prepared_transaction_offset = rec.prepared_transaction_offset
    msg.body_crc = rec.body_crc
    msg.store_size = rec.total_size
    msg.offset_msg_id = rec.msg_id
    return msg


# ------------------------------------------------------------------------------------------ results


@dataclass(frozen=True, slots=True)
class SendResult:
    """msg_id = UNIQ_KEY (comma-joined for a batch), offset_msg_id = broker id(s), queue_offset = first."""

    status: SendStatus
    msg_id: str
    offset_msg_id: str
    queue: MessageQueue
    queue_offset: int
    transaction_id: str | None = None
    region_id: str | None = None
    trace_on: bool = True

    @property
    def msg_ids(self) -> tuple[str, ...]:
        return tuple(self.msg_id.split(",")) if self.msg_id else ()

    @property
    def offset_msg_ids(self) -> tuple[str, ...]:
        return tuple(self.offset_msg_id.split(",")) if self.offset_msg_id else ()


class PullResult(NamedTuple):
    """One pull: unpacks as `status, next_begin_offset, min_offset, max_offset, messages`."""

    status: PullStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    messages: list[MessageExt]
