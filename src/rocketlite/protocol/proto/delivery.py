"""Stored records as 5.x `apache.rocketmq.v2.Message`s, sans-IO: the one builder of every message
the gRPC endpoint sends a client, a delivery (ReceiveMessage) and a transaction check
(RecoverOrphanedTransactionCommand), as RocketMQ 5's proxy builds both with
`GrpcConverter.buildMessage`:

- user properties: every property but RocketMQ's system ones (`MessageConst.STRING_HASH_SET`,
  `SYSTEM_PROPERTIES` here), so `__SHARDINGKEY`, `__transactionId__`, TRACE_CONTEXT and
  CHECK_IMMUNITY_TIME_IN_SECONDS show there too;
- `message_id`: UNIQ_KEY, else the offset msg id; `tag`, `keys` (split on spaces);
- `body_digest`: MD5 in uppercase hex (the one spelling both the Python and the Node client compare
  as they compute it); `body_encoding` GZIP when the record's body is compressed;
- `message_type`: TRANSACTION for a prepared message (TRAN_MSG=true), DELAY when it names a delay
  level or a timer delivery time, FIFO when it has a `__SHARDINGKEY` (also its `message_group`),
  NORMAL otherwise; `delivery_timestamp` from TIMER_DELIVER_MS (or now + TIMER_DELAY_SEC);
- `born_host`: `__BORNHOST` if the producer set it, else the born address without its port
  (`MessageExt.getBornHostString`); `store_host` with its port;
- `queue_id`, `queue_offset`, `delivery_attempt` (reconsume times + 1), `trace_context`, and a
  `dead_letter_queue` for a DLQ copy that names its origin.

The record's topic is the message's topic: a transaction check shows the half as its producer
sent it, in its real topic and queue (the transaction service rewrites them, as Java's broker does
before it sends the check). The one difference by use is a delivery's `Receipt` (its receipt
handle and invisible time), which a check has none of.

`delivery_response` is a delivery as the bytes of the stream's `ReceiveMessageResponse{message}`,
straight from the record's commit-log bytes and the POP batch's `PopStamp` (the receipt handle is
built here too). This module's is the reference: the record decoded, the message built with the
protobuf classes, serialized by upb with `deterministic=True`. upb writes a map's entries in its
hash table's order, which depends on insertion history; deterministic output sorts them (by the
key's bytes, a key before its own prefixes), and that order is the one the compiled twin
(`_native/_delivery.pyx`, chosen in `speedups.py`) writes, pinned byte for byte by
`tests/protocol/test_native_delivery.py`. Every other field is in field-number order either way.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final, NamedTuple

from rocketlite.protocol.formats.record import StoredRecord, decode_record
from rocketlite.protocol.message import HostAddress, MessageConst, MessageSysFlag, string_to_properties
from rocketlite.protocol.proto.v2 import definition_pb2 as pb
from rocketlite.protocol.proto.v2 import service_pb2 as spb
from rocketlite.protocol.proto.varint import encode_varint
from rocketlite.protocol.wire.pop import ReceiptHandle, topic_type

# RocketMQ's MessageConst.STRING_HASH_SET: the properties a 5.x message never shows as its own.
SYSTEM_PROPERTIES: Final = frozenset(
    {
        MessageConst.TRACE_SWITCH, MessageConst.MSG_REGION, MessageConst.KEYS, MessageConst.TAGS,
        MessageConst.WAIT_STORE_MSG_OK, MessageConst.DELAY_TIME_LEVEL, MessageConst.RETRY_TOPIC,
        MessageConst.REAL_TOPIC, MessageConst.REAL_QUEUE_ID, MessageConst.TRANSACTION_PREPARED,
        MessageConst.PRODUCER_GROUP, MessageConst.MIN_OFFSET, MessageConst.MAX_OFFSET, "BUYER_ID",
        MessageConst.ORIGIN_MESSAGE_ID, "TRANSFER_FLAG", "CORRECTION_FLAG", "MQ2_FLAG",
        MessageConst.RECONSUME_TIME, MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
        MessageConst.MAX_RECONSUME_TIMES, MessageConst.CONSUME_START_TIME, "POP_CK", "POP_CK_OFFSET",
        "1ST_POP_TIME", MessageConst.TRAN_PREPARED_QUEUE_OFFSET, "DUP_INFO", "EXTEND_UNIQ_INFO",
        "INSTANCE_ID", "CORRELATION_ID", "REPLY_TO_CLIENT", "TTL", "ARRIVE_TIME", "PUSH_REPLY_TIME",
        MessageConst.CLUSTER, "MSG_TYPE", "INNER_MULTI_QUEUE_OFFSET", MessageConst.TIMER_DELAY_SEC,
        MessageConst.TIMER_DELIVER_MS, MessageConst.TIMER_ENQUEUE_MS, MessageConst.TIMER_DEQUEUE_MS,
        MessageConst.TIMER_ROLL_TIMES, MessageConst.TIMER_OUT_MS, "TIMER_DEL_UNIQKEY",
        "TIMER_DELAY_LEVEL", "__BORNHOST", "BORN_TIMESTAMP",
    }
)  # fmt: skip
TRACE_CONTEXT: Final = "TRACE_CONTEXT"
BORN_HOST: Final = "__BORNHOST"
DLQ_ORIGIN_TOPIC: Final = "DLQ_ORIGIN_TOPIC"
DLQ_ORIGIN_MESSAGE_ID: Final = "DLQ_ORIGIN_MESSAGE_ID"
_DELAY_PROPERTIES: Final = (
    MessageConst.DELAY_TIME_LEVEL,
    MessageConst.TIMER_DELIVER_MS,
    MessageConst.TIMER_DELAY_SEC,
)


@dataclass(frozen=True, slots=True)
class Receipt:
    """What a delivered message carries beyond the record: its receipt handle (POP's `extraInfo`,
    with the queue offset) and how long it stays invisible."""

    handle: str
    invisible_ms: int


def born_host_text(record: StoredRecord, props: dict[str, str]) -> str:
    """`__BORNHOST`, else the born address without its port (Java's `getBornHostString`)."""
    given = props.get(BORN_HOST, "")
    if given.strip():
        return given
    return _host_text(record.born_host).rpartition(":")[0].strip("[]")


def message_type(props: dict[str, str]) -> str:
    """The `MessageType` name a stored message shows (GrpcConverter's order of tests)."""
    if props.get(MessageConst.TRANSACTION_PREPARED) == "true":
        return "TRANSACTION"
    if any(name in props for name in _DELAY_PROPERTIES):
        return "DELAY"
    if MessageConst.SHARDING_KEY in props:
        return "FIFO"
    return "NORMAL"


# the enum numbers message_of uses (the compiled twin writes the same numbers)
_TYPES: Final = {name: pb.MessageType.Value(name) for name in ("NORMAL", "FIFO", "DELAY", "TRANSACTION")}
_HOSTS: dict[HostAddress, str] = {}  # store hosts as text (one per broker, in practice)


def _host_text(host: HostAddress) -> str:
    text = _HOSTS.get(host)
    if text is None:
        if len(_HOSTS) >= 1024:
            _HOSTS.clear()
        text = _HOSTS[host] = str(host)
    return text


def message_of(record: StoredRecord, receipt: Receipt | None = None, now_ms: int | None = None) -> pb.Message:
    """`record` as a 5.x `Message` (see the module doc); `receipt`: a delivery's; `now_ms`: the
    time a TIMER_DELAY_SEC is counted from (None: the clock's)."""
    props = string_to_properties(record.properties_string)
    system = pb.SystemProperties(
        message_id=props.get(MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX) or record.msg_id,
        body_digest=pb.Digest(type=pb.DigestType.MD5, checksum=hashlib.md5(record.body).hexdigest().upper()),
        body_encoding=pb.Encoding.GZIP
        if record.sys_flag & MessageSysFlag.COMPRESSED_FLAG
        else pb.Encoding.IDENTITY,
        message_type=_TYPES[message_type(props)],
        born_host=born_host_text(record, props),
        store_host=_host_text(record.store_host),
        queue_id=record.queue_id,
        queue_offset=record.queue_offset,
        delivery_attempt=record.reconsume_times + 1,
    )
    system.born_timestamp.FromMilliseconds(record.born_timestamp)
    system.store_timestamp.FromMilliseconds(record.store_timestamp)
    if MessageConst.TAGS in props:
        system.tag = props[MessageConst.TAGS]
    if props.get(MessageConst.KEYS):
        system.keys.extend(props[MessageConst.KEYS].split(" "))
    delivery = _delivery_ms(props, now_ms)
    if delivery is not None:
        system.delivery_timestamp.FromMilliseconds(delivery)
    if MessageConst.SHARDING_KEY in props:
        system.message_group = props[MessageConst.SHARDING_KEY]
    if TRACE_CONTEXT in props:
        system.trace_context = props[TRACE_CONTEXT]
    if DLQ_ORIGIN_TOPIC in props and DLQ_ORIGIN_MESSAGE_ID in props:
        system.dead_letter_queue.topic = props[DLQ_ORIGIN_TOPIC]
        system.dead_letter_queue.message_id = props[DLQ_ORIGIN_MESSAGE_ID]
    if receipt is not None:
        system.receipt_handle = receipt.handle
        system.invisible_duration.FromMilliseconds(receipt.invisible_ms)
    user = {k: v for k, v in props.items() if k not in SYSTEM_PROPERTIES}
    message: pb.Message = pb.Message(
        topic=pb.Resource(name=record.topic), user_properties=user, system_properties=system, body=record.body
    )
    return message


def _delivery_ms(props: dict[str, str], now_ms: int | None) -> int | None:
    """When a timer message is (was) due: now + TIMER_DELAY_SEC, else TIMER_DELIVER_MS."""
    seconds = props.get(MessageConst.TIMER_DELAY_SEC, "")
    if seconds.isdigit():
        now = int(time.time() * 1000) if now_ms is None else now_ms
        return now + int(seconds) * 1000
    at = props.get(MessageConst.TIMER_DELIVER_MS, "")
    return int(at) if at.isdigit() else None


@dataclass(frozen=True, slots=True)
class PopStamp:
    """What the receipt handles of one POP batch share (`ReceiptHandle`): its pop time and
    invisible time, the revive queue, the broker's name, and per queue id the first offset the
    batch handed out (a queue not named: the message's own offset)."""

    pop_time: int
    invisible_time: int
    revive_qid: int
    broker_name: str
    start_offsets: Mapping[int, int]


class Delivered(NamedTuple):
    """One delivery: the `ReceiveMessageResponse{message}` bytes, and what the endpoint keeps of
    it (the topic, the receipt handle and the message id, for renewals and nacks)."""

    response: bytes
    topic: str
    handle: str
    message_id: str


def delivery_responses(data: bytes, sizes: Iterable[int], stamp: PopStamp, now_ms: int) -> list[Delivered]:
    """The records of one run, back to back in `data` (`sizes` in order; a size of -1 is the
    rest of `data`), each as `delivery_response` writes it."""
    out: list[Delivered] = []
    pos = 0
    for size in sizes:
        out.append(delivery_response(data, stamp, now_ms, pos, size))
        pos += size
    return out


def delivery_response(record: bytes, stamp: PopStamp, now_ms: int, pos: int = 0, size: int = -1) -> Delivered:
    """The reference: `record[pos:pos + size]` (one commit-log record; the whole of `record` by
    default, as a batch's records may share one `bytes`) decoded, its receipt handle built, its
    `Message` built by `message_of` and serialized with upb's deterministic map order."""
    total = len(record)
    if size < 0:
        size = total - pos
    if pos < 0 or pos > total or size > total - pos:
        raise ValueError(f"record span {pos}+{size} is outside its {total} bytes")
    if pos or size != total:
        record = bytes(record[pos : pos + size])
    stored = decode_record(record)
    handle = ReceiptHandle(
        ck_queue_offset=stamp.start_offsets.get(stored.queue_id, stored.queue_offset),
        pop_time=stamp.pop_time,
        invisible_time=stamp.invisible_time,
        revive_qid=stamp.revive_qid,
        topic_type=topic_type(stored.topic),
        broker_name=stamp.broker_name,
        queue_id=stored.queue_id,
        queue_offset=stored.queue_offset,
    ).build()
    message = message_of(stored, Receipt(handle, stamp.invisible_time), now_ms)
    data = spb.ReceiveMessageResponse(message=message).SerializeToString(deterministic=True)
    return Delivered(data, stored.topic, handle, message.system_properties.message_id)


def timestamp_answer(time_ns: int) -> bytes:
    """The stream's last answer, `ReceiveMessageResponse{delivery_timestamp}` at `time_ns` (ns
    since the epoch, not before it), as the bytes `SerializeToString` writes: no message object
    per call (`tests/protocol/test_native_delivery.py` pins the two)."""
    seconds, nanos = divmod(time_ns, 1_000_000_000)
    inner = bytearray()
    if seconds:
        inner += b"\x08" + encode_varint(seconds)
    if nanos:
        inner += b"\x10" + encode_varint(nanos)
    return b"\x1a" + encode_varint(len(inner)) + bytes(inner)
