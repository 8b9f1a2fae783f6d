"""Message-level facts shared by the store, the protocol and the client.

Property names (`MessageConst`), system-flag bits (`MessageSysFlag`), the properties string
(`name \\x01 value \\x02 ...`), Java's `String.hashCode` (tags codes, index keys) and message ids
(`storeHost(4|16) + port(4) + commitLogOffset(8)` in upper-case hex) are all RocketMQ 4.x facts;
they live here once.
"""

from __future__ import annotations

import functools
import ipaddress
import socket
import struct
from dataclasses import dataclass

NAME_VALUE_SEPARATOR = "\x01"
PROPERTY_SEPARATOR = "\x02"
KEY_SEPARATOR = " "


class MessageConst:
    """Well-known property names (`org.apache.rocketmq.common.message.MessageConst`)."""

    KEYS = "KEYS"
    TAGS = "TAGS"
    WAIT_STORE_MSG_OK = "WAIT"
    DELAY_TIME_LEVEL = "DELAY"
    RETRY_TOPIC = "RETRY_TOPIC"
    REAL_TOPIC = "REAL_TOPIC"
    REAL_QUEUE_ID = "REAL_QID"
    TRANSACTION_PREPARED = "TRAN_MSG"
    PRODUCER_GROUP = "PGROUP"
    MIN_OFFSET = "MIN_OFFSET"
    MAX_OFFSET = "MAX_OFFSET"
    ORIGIN_MESSAGE_ID = "ORIGIN_MESSAGE_ID"
    RECONSUME_TIME = "RECONSUME_TIME"
    MSG_REGION = "MSG_REGION"
    TRACE_SWITCH = "TRACE_ON"
    UNIQ_CLIENT_MESSAGE_ID_KEYIDX = "UNIQ_KEY"
    MAX_RECONSUME_TIMES = "MAX_RECONSUME_TIMES"
    CONSUME_START_TIME = "CONSUME_START_TIME"
    TRAN_PREPARED_QUEUE_OFFSET = "TRAN_PREPARED_QUEUE_OFFSET"
    TRANSACTION_CHECK_TIMES = "TRANSACTION_CHECK_TIMES"
    CHECK_IMMUNITY_TIME_IN_SECONDS = "CHECK_IMMUNITY_TIME_IN_SECONDS"
    CLUSTER = "CLUSTER"
    # request-reply (RIP-16): set on a request by `DefaultMQProducer.request`, copied to its reply
    CORRELATION_ID = "CORRELATION_ID"
    MESSAGE_REPLY_TO_CLIENT = "REPLY_TO_CLIENT"
    MESSAGE_TTL = "TTL"
    MESSAGE_TYPE = "MSG_TYPE"  # "reply" on a reply (`MixAll.REPLY_MESSAGE_FLAG`)
    PUSH_REPLY_TIME = "PUSH_REPLY_TIME"  # added by the broker when it pushes a reply
    REPLY_MESSAGE_ARRIVE_TIME = "ARRIVE_TIME"  # added by the requester's client on arrival
    TRANSACTION_ID = "__transactionId__"
    SHARDING_KEY = "__SHARDINGKEY"  # a FIFO message's group (5.x `message_group`)
    # 5.x timer messages: the delivery time a producer asks for (absolute ms, or relative), and
    # what the broker adds when it parks (TIMER_OUT_MS) and delivers (ENQUEUE / DEQUEUE times).
    TIMER_DELIVER_MS = "TIMER_DELIVER_MS"
    TIMER_DELAY_SEC = "TIMER_DELAY_SEC"
    TIMER_DELAY_MS = "TIMER_DELAY_MS"
    TIMER_OUT_MS = "TIMER_OUT_MS"
    TIMER_ENQUEUE_MS = "TIMER_ENQUEUE_MS"
    TIMER_DEQUEUE_MS = "TIMER_DEQUEUE_MS"
    TIMER_ROLL_TIMES = "TIMER_ROLL_TIMES"


class MessageSysFlag:
    """`MessageSysFlag` bits stored in the record's SYSFLAG field."""

    COMPRESSED_FLAG = 0x1
    MULTI_TAGS_FLAG = 0x2
    TRANSACTION_NOT_TYPE = 0x0
    TRANSACTION_PREPARED_TYPE = 0x4
    TRANSACTION_COMMIT_TYPE = 0x8
    TRANSACTION_ROLLBACK_TYPE = 0xC
    TRANSACTION_MASK = 0xC
    BORNHOST_V6_FLAG = 0x10
    STOREHOSTADDRESS_V6_FLAG = 0x20

    @staticmethod
    def transaction_value(sys_flag: int) -> int:
        return sys_flag & MessageSysFlag.TRANSACTION_MASK


def properties_to_string(props: dict[str, str]) -> str:
    """Encode like 4.9.x `messageProperties2String` (no trailing separator; None values skipped)."""
    return PROPERTY_SEPARATOR.join(f"{k}{NAME_VALUE_SEPARATOR}{v}" for k, v in props.items() if v is not None)


def string_to_properties(text: str) -> dict[str, str]:
    """Decode like `string2messageProperties`: skip empty segments and ones without a key or value."""
    props: dict[str, str] = {}
    if not text:
        return props
    for item in text.split(PROPERTY_SEPARATOR):
        key, sep, value = item.partition(NAME_VALUE_SEPARATOR)
        if sep and key and value:
            props[key] = value
    return props


# What the broker takes out of a producer's properties string (`send_properties`): the string to
# store, then the TAGS code, UNIQ_KEY, KEYS and DELAY (None when absent).
SendProperties = tuple[str, int, str | None, str | None, str | None]


def send_properties(text: str, cluster: str) -> SendProperties:
    """The send processor's rewrite of a producer's properties, and the fields it looks at.

    RocketMQ's broker parses the string into a map (`string_to_properties`: empty segments and
    ones without key or value dropped; a repeated key keeps its first place and takes the last
    value), drops WAIT (a producer-side flag), sets CLUSTER to the broker's cluster (in place when
    present, else last) and writes it back (`properties_to_string`). This is the reference for
    the compiled twin (`protocol/formats/_native/_send.pyx`), which must give the same tuple.
    """
    props = string_to_properties(text)
    props.pop(MessageConst.WAIT_STORE_MSG_OK, None)
    props[MessageConst.CLUSTER] = cluster
    return (
        properties_to_string(props),
        tags_code(props.get(MessageConst.TAGS)),
        props.get(MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX),
        props.get(MessageConst.KEYS),
        props.get(MessageConst.DELAY_TIME_LEVEL),
    )


def find_property(text: str, name: str) -> str | None:
    """One property from a properties string without building a dict (dispatch hot path)."""
    needle = name + NAME_VALUE_SEPARATOR
    start = 0
    while True:
        idx = text.find(needle, start)
        if idx < 0:
            return None
        if idx == 0 or text[idx - 1] == PROPERTY_SEPARATOR:
            begin = idx + len(needle)
            end = text.find(PROPERTY_SEPARATOR, begin)
            return text[begin:] if end < 0 else text[begin:end]
        start = idx + 1


def _to_int32(h: int) -> int:
    return h - 0x1_0000_0000 if h & 0x8000_0000 else h


def java_string_hash(s: str) -> int:
    """Java `String.hashCode()`: 31-polynomial over UTF-16 code units, as a signed 32-bit int."""
    h = 0
    if s.isascii():
        for b in s.encode("ascii"):
            h = (31 * h + b) & 0xFFFF_FFFF
    else:
        data = s.encode("utf-16-be", "surrogatepass")
        for (unit,) in struct.iter_unpack(">H", data):
            h = (31 * h + unit) & 0xFFFF_FFFF
    return _to_int32(h)


@functools.lru_cache(maxsize=4096)
def tags_code(tags: str | None) -> int:
    """CQ tagsCode of a TAGS value: its Java hashCode, 0 for no tag."""
    if not tags:
        return 0
    return java_string_hash(tags)


def index_key_hash(key: str) -> int:
    """`IndexFile.indexKeyHashMethod`: abs(hashCode), and 0 when that is still negative."""
    h = abs(java_string_hash(key))
    return 0 if h < 0 or h > 0x7FFF_FFFF else h


@dataclass(frozen=True, slots=True)
class HostAddress:
    """An IPv4 or IPv6 address and port, stored raw as RocketMQ does (4|16 bytes + int port)."""

    ip: bytes
    port: int

    @classmethod
    def parse(cls, text: str) -> HostAddress:
        """`"127.0.0.1:10911"` or `"[::1]:10911"`."""
        host, _, port = text.rpartition(":")
        host = host.strip("[]")
        return cls(ipaddress.ip_address(host).packed, int(port))

    @classmethod
    def of(cls, host: str, port: int) -> HostAddress:
        try:
            return cls(ipaddress.ip_address(host).packed, port)
        except ValueError:
            return cls(socket.inet_aton(socket.gethostbyname(host)), port)

    @property
    def is_v6(self) -> bool:
        return len(self.ip) == 16

    def __str__(self) -> str:
        addr = ipaddress.ip_address(self.ip)
        return f"[{addr}]:{self.port}" if self.is_v6 else f"{addr}:{self.port}"

    def msg_id_prefix(self) -> str:
        """Hex of `ip + port`: an offsetMsgId is this plus the 16-hex-digit commit-log offset."""
        return (self.ip + self.port.to_bytes(4, "big", signed=True)).hex().upper()


def make_msg_id(store_host: HostAddress, commit_log_offset: int) -> str:
    """offsetMsgId: `hex_upper(storeIP + storePort(int) + commitLogOffset(long))`."""
    return store_host.msg_id_prefix() + format(commit_log_offset, "016X")


@dataclass(frozen=True, slots=True)
class MessageId:
    address: HostAddress
    offset: int


def parse_msg_id(msg_id: str) -> MessageId:
    """Decode an offsetMsgId (32 hex chars for IPv4, 56 for IPv6); ValueError if malformed."""
    raw = bytes.fromhex(msg_id)
    if len(raw) == 16:
        ip_len = 4
    elif len(raw) == 28:
        ip_len = 16
    else:
        raise ValueError(f"not a RocketMQ message id: {msg_id!r}")
    port = int.from_bytes(raw[ip_len : ip_len + 4], "big", signed=True)
    offset = int.from_bytes(raw[ip_len + 4 :], "big", signed=True)
    return MessageId(HostAddress(raw[:ip_len], port), offset)
