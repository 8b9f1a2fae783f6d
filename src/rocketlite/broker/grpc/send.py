"""SendMessage and EndTransaction: the gRPC adapters over the broker's typed cores. A 5.x message
becomes the `SendRequest` a 4.x SEND_MESSAGE_V2 would give (`SendMessageProcessor.put`, paced), an
EndTransaction the END_TRANSACTION header (`TransactionalMessageService.end_transaction`), in
process, as Java's proxy does: the same checks, topic auto-creation and store path as a 4.x send,
with no 4.x command in between. The body digest is checked first, by type.

By message type (`system_properties.message_type`), as Java's proxy maps them:

- NORMAL: the broker picks a queue.
- FIFO: `message_group` becomes property `__SHARDINGKEY`, and the queue is chosen from the group
  (a stable hash over the topic's write queues), so one group's messages land in one queue in the
  order they were sent. The clients' own queue choice is not used (Python sends none).
- DELAY: `delivery_timestamp` becomes property TIMER_DELIVER_MS (epoch ms), which the broker's
  timer parks until then. The Python client 5.1.2 writes its millisecond value into the seconds
  field, so a "seconds" value past year 5000 is read as milliseconds.
- TRANSACTION: a prepared message (TRAN_MSG, PGROUP = the topic name, as Java's proxy names the
  producer group, and `__transactionId__` = the message id, as Java's broker adds to a half) that
  the transaction service parks as a half message.

Every answer has `transaction_id` = the message id, as Java's proxy answers: it passes on the
broker's SendMessageResponseHeader.transactionId, which is the UNIQ_KEY (the Node client's own
tests check it; a received transaction message's `__transactionId__` equals it). EndTransaction
finds the half by it (`TransactionalMessageService.find_half`: remembered at the send and at each
check, as the proxy's TransactionDataManager; after a restart, through the half topic's index),
and the check-back sends the same id (telemetry.py). A transaction id of the form an earlier
version answered (the half's commit-log and queue offsets, `transaction_id()`) is still taken.

Topics carry no declared message type here, so every type is accepted on every topic (the route
says so).
"""

from __future__ import annotations

import hashlib
import inspect
import time
import zlib
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from rocketlite.broker.grpc.kit import GrpcPeer, ProtoKit, RefusedError
from rocketlite.broker.processors.send import PutOutcome, SendMessageProcessor, SendRequest
from rocketlite.broker.topic_config import TopicConfigManager
from rocketlite.broker.transaction import TransactionalMessageService
from rocketlite.protocol.codes import ResponseCode
from rocketlite.protocol.errors import RocketliteError
from rocketlite.protocol.message import (
    NAME_VALUE_SEPARATOR,
    PROPERTY_SEPARATOR,
    MessageConst,
    MessageSysFlag,
    properties_to_string,
)
from rocketlite.protocol.proto.v2 import definition_pb2 as pb
from rocketlite.protocol.proto.v2 import service_pb2 as spb
from rocketlite.protocol.reserved import DEFAULT_TOPIC
from rocketlite.protocol.wire.headers import EndTransactionRequestHeader, SendMessageRequestHeader

if TYPE_CHECKING:
    from google.protobuf.timestamp_pb2 import Timestamp

SEP = PROPERTY_SEPARATOR
TAGS = MessageConst.TAGS + NAME_VALUE_SEPARATOR
KEYS = MessageConst.KEYS + NAME_VALUE_SEPARATOR
UNIQ_KEY = MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX + NAME_VALUE_SEPARATOR
PGROUP = SEP + MessageConst.PRODUCER_GROUP + NAME_VALUE_SEPARATOR

MAX_MESSAGE_GROUP_BYTES = 64  # Java proxy's maxMessageGroupSize
_MS_IN_SECONDS_FIELD = 100_000_000_000  # seconds past year 5138: a millisecond value
# What a send from Java's proxy names as the topic to create a missing one from, and its queue
# count (the Java client's defaultTopicQueueNums).
DEFAULT_TOPIC_QUEUE_NUMS = 4

# 4.x answers of a send mapped onto apache.rocketmq.v2.Code (Java's ResponseCode -> Code table).
SEND_CODES: dict[int, str] = {
    ResponseCode.TOPIC_NOT_EXIST: "TOPIC_NOT_FOUND",
    ResponseCode.NO_PERMISSION: "FORBIDDEN",
    ResponseCode.MESSAGE_ILLEGAL: "BAD_REQUEST",
    ResponseCode.SYSTEM_BUSY: "TOO_MANY_REQUESTS",
    ResponseCode.SERVICE_NOT_AVAILABLE: "INTERNAL_ERROR",
    ResponseCode.FLUSH_DISK_TIMEOUT: "MASTER_PERSISTENCE_TIMEOUT",
    ResponseCode.FLUSH_SLAVE_TIMEOUT: "SLAVE_PERSISTENCE_TIMEOUT",
    ResponseCode.SLAVE_NOT_AVAILABLE: "HA_NOT_AVAILABLE",
}


def digest_problem(body: bytes, digest_type: str, checksum: str) -> str | None:
    """Check a body against the client's `Digest`, by type: CRC32 as a decimal number (ASCII digits,
    leading zeros allowed) or in hex, 8 digits or unpadded; MD5 and SHA1 in hex (cases compared
    insensitively). The official 5.x clients (Python 5.1, Java 5.2, Node 1.0.8) send no digest
    with SendMessage; they check, in these spellings, the digest a received message carries.
    None when it matches; else what is wrong."""
    if digest_type == "CRC32":
        crc = zlib.crc32(body) & 0xFFFFFFFF
        digits = checksum.lstrip("0")  # (`int` refuses more than 4300 digits, and "²" is a digit)
        if checksum.isascii() and checksum.isdigit() and len(digits) <= 10 and int(digits or "0") == crc:
            return None
        if checksum.lower() == f"{crc:08x}" or checksum.lower() == f"{crc:x}":
            return None
        return f"body CRC32 is {crc:08X} (decimal {crc}), the message says {checksum!r}"
    if digest_type in ("MD5", "SHA1"):
        actual = (hashlib.md5 if digest_type == "MD5" else hashlib.sha1)(body).hexdigest()
        if checksum.lower() == actual:
            return None
        return f"body {digest_type} is {actual.upper()}, the message says {checksum!r}"
    return None  # DIGEST_TYPE_UNSPECIFIED: nothing to check


def transaction_id(commit_log_offset: int, queue_offset: int) -> str:
    """The transaction id an earlier version gave a 5.x producer for a half message: where the
    half lies (still taken by EndTransaction; sent with a check-back of a half with no UNIQ_KEY)."""
    return f"{commit_log_offset:X}-{queue_offset:X}"


def parse_transaction_id(text: str) -> tuple[int, int] | None:
    """(commit-log offset, half queue offset) of a `transaction_id`; None if it is not one."""
    first, sep, second = text.partition("-")
    try:
        return (int(first, 16), int(second, 16)) if sep and first and second else None
    except ValueError:
        return None


def common_properties(system: pb.SystemProperties, topic: str) -> str:
    """The properties string of a NORMAL message with no user properties, as
    `properties_to_string` writes the same map (tag, keys, UNIQ_KEY, the producer group = the
    topic), built straight."""
    return properties_text(
        system.message_id, system.tag if system.HasField("tag") else None, system.keys, topic
    )


def properties_text(message_id: str, tag: str | None, keys: Sequence[str], topic: str) -> str:
    """`common_properties` from the fields themselves (tag None: not set)."""
    text = f"{UNIQ_KEY}{message_id}{PGROUP}{topic}"
    if keys:
        text = f"{KEYS}{' '.join(keys)}{SEP}{text}"
    if tag is not None:
        text = f"{TAGS}{tag}{SEP}{text}"
    return text


def fifo_queue(group: str, queues: int) -> int:
    """The queue of a message group: stable across restarts and brokers of the same topic size."""
    return zlib.crc32(group.encode("utf-8")) % max(queues, 1)


def delivery_ms(timestamp: Timestamp) -> int:
    """`delivery_timestamp` in epoch ms (see the module docstring for the Python client's ms)."""
    if timestamp.seconds >= _MS_IN_SECONDS_FIELD:
        return int(timestamp.seconds)
    return int(timestamp.seconds) * 1000 + int(timestamp.nanos) // 1_000_000


class ProducerService:
    """`topics`: the topic table (a FIFO message's queue is chosen from its write queues);
    `transactions`: the broker's transaction service, which EndTransaction goes to (None: not
    served)."""

    def __init__(
        self,
        kit: ProtoKit,
        send: SendMessageProcessor,
        topics: TopicConfigManager,
        *,
        max_body_size: int,
        transactions: TransactionalMessageService | None = None,
    ) -> None:
        self.kit = kit
        self.send = send
        self.topics = topics
        self.transactions = transactions
        self.max_body_size = max_body_size
        self._ok = kit.status("OK")
        self._types = {pb.MessageType.Value(n): n for n in ("NORMAL", "FIFO", "DELAY", "TRANSACTION")}
        self._digests: dict[int, str] = {number: name for name, number in pb.DigestType.items()}

    def digest_name(self, digest_type: int) -> str:
        """The name `digest_problem` takes for a message's `Digest.type` number ("" when unknown):
        the send lane (`send_lane.py`) checks a body's digest the way `_send_one` does."""
        return self._digests.get(digest_type, "")

    async def send_message(self, request: spb.SendMessageRequest, context: Any) -> spb.SendMessageResponse:
        kit = self.kit
        peer = kit.peer(context)
        messages = request.messages
        if len(messages) == 1:  # what the 5.x clients send: one message a call
            entry = await self._send_one(messages[0], peer)
            return spb.SendMessageResponse(status=entry.status, entries=[entry])
        entries = [await self._send_one(message, peer) for message in messages]
        if not entries:
            status = kit.status("BAD_REQUEST", "no messages in the request")
        elif len(entries) == 1 or len({e.status.code for e in entries}) == 1:
            status = entries[0].status
        else:
            status = kit.status("MULTIPLE_RESULTS", "the messages were answered differently")
        return spb.SendMessageResponse(status=status, entries=entries)

    async def _send_one(self, message: pb.Message, peer: GrpcPeer) -> spb.SendResultEntry:
        """One message through the send core; paced, since 5.x sends arrive one RPC at a time and
        this message's dispatch round may be shared with the next RPCs'."""
        try:
            request, message_type = self.request_of(message)
            outcome = self.send.put(request, peer, paced=True)
            if not isinstance(outcome, PutOutcome):
                outcome = await outcome  # SYNC_FLUSH or a SYNC_MASTER: the put completes later
        except RefusedError as exc:
            return spb.SendResultEntry(status=self.kit.status(exc.status, str(exc)))
        except RocketliteError as exc:
            code = SEND_CODES.get(exc.code, "BAD_REQUEST")
            return spb.SendResultEntry(status=self.kit.status(code, str(exc)))
        return self._entry(message, message_type, outcome)

    def _entry(self, message: pb.Message, message_type: str, outcome: PutOutcome) -> spb.SendResultEntry:
        message_id = message.system_properties.message_id
        if outcome.code != ResponseCode.SUCCESS:
            code = SEND_CODES.get(outcome.code, "INTERNAL_ERROR")
            return spb.SendResultEntry(status=self.kit.status(code, outcome.remark or ""))
        offset = outcome.queue_offset
        if message_type == "TRANSACTION" and self.transactions is not None:  # where its half lies
            self.transactions.remember_half(message_id, outcome.commit_log_offset, offset)
        # the message id is the transaction id, as Java's proxy answers (the broker's
        # SendMessageResponseHeader.transactionId, the UNIQ_KEY)
        return spb.SendResultEntry(
            status=self._ok, message_id=message_id, offset=offset, transaction_id=message_id
        )

    def request_of(self, message: pb.Message) -> tuple[SendRequest, str]:
        """The `SendRequest` of one 5.x message (what a SEND_MESSAGE_V2 of Java's proxy carries)
        and its type name; `RefusedError` for bad input."""
        system = message.system_properties
        body = message.body
        if not system.message_id:
            raise RefusedError("ILLEGAL_MESSAGE_ID", "system_properties.message_id is required")
        message_type = self._types.get(system.message_type)
        if message_type is None:
            number = system.message_type
            known = pb.MessageType.values()
            name = pb.MessageType.Name(number) if number in known else f"message type {number}"
            raise RefusedError(
                "BAD_REQUEST", f"{name} messages are not served (NORMAL, FIFO, DELAY, TRANSACTION are)"
            )
        if len(body) > self.max_body_size:
            raise RefusedError("MESSAGE_BODY_TOO_LARGE", f"body of {len(body)} bytes > {self.max_body_size}")
        digest = system.body_digest
        problem = digest_problem(body, self.digest_name(digest.type), digest.checksum)
        if problem is not None:
            raise RefusedError("MESSAGE_CORRUPTED", problem)
        topic = message.topic.name
        queue_id = -1  # the broker picks the queue, as Java's proxy does (FIFO: by group, below)
        sys_flag = 0
        if (
            message_type != "NORMAL"
            or message.user_properties
            or system.HasField("message_group")
            or system.HasField("delivery_timestamp")
        ):  # (a NORMAL message with a group or a delivery time is refused there)
            properties = dict(message.user_properties) if message.user_properties else {}
            if system.HasField("tag"):
                properties[MessageConst.TAGS] = system.tag
            if system.keys:
                properties[MessageConst.KEYS] = " ".join(system.keys)
            properties[MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX] = system.message_id
            properties[MessageConst.PRODUCER_GROUP] = topic  # Java's proxy: the group is the topic
            if (
                message_type != "NORMAL"
                or system.HasField("message_group")
                or system.HasField("delivery_timestamp")
            ):
                queue_id, sys_flag = self._by_type(system, message_type, topic, properties)
            text = properties_to_string(properties)
        else:  # the common message: its property string straight, in the same order
            text = common_properties(system, topic)
        born = system.born_timestamp
        header = SendMessageRequestHeader(
            producer_group=topic,
            topic=topic,
            default_topic=DEFAULT_TOPIC,
            default_topic_queue_nums=DEFAULT_TOPIC_QUEUE_NUMS,
            queue_id=queue_id,
            sys_flag=sys_flag,
            born_timestamp=born.seconds * 1000 + born.nanos // 1_000_000,
            flag=0,
            properties=text,
            reconsume_times=0,
        )
        return SendRequest(header, body), message_type

    def _by_type(
        self,
        system: pb.SystemProperties,
        type_name: str,
        topic: str,
        properties: dict[str, str],
    ) -> tuple[int, int]:
        """The queue and sys flag of a FIFO, DELAY or TRANSACTION message, its properties added;
        `RefusedError` for a group or delivery time its type has no room for."""
        queue_id = -1
        sys_flag = 0
        group = system.message_group if system.HasField("message_group") else ""
        if type_name == "FIFO":
            queue_id = self._fifo_queue(topic, group)
        elif group:
            raise RefusedError(
                "MESSAGE_PROPERTY_CONFLICT_WITH_TYPE", f"a {type_name} message has no message_group"
            )
        if group:
            properties[MessageConst.SHARDING_KEY] = group
        has_delivery = system.HasField("delivery_timestamp")
        if type_name == "DELAY":
            if not has_delivery:
                raise RefusedError(
                    "ILLEGAL_DELIVERY_TIME", "a DELAY message needs system_properties.delivery_timestamp"
                )
            properties[MessageConst.TIMER_DELIVER_MS] = str(self._delivery(system.delivery_timestamp))
        elif has_delivery:
            raise RefusedError(
                "MESSAGE_PROPERTY_CONFLICT_WITH_TYPE", f"a {type_name} message has no delivery_timestamp"
            )
        if type_name == "TRANSACTION":
            sys_flag = MessageSysFlag.TRANSACTION_PREPARED_TYPE
            properties[MessageConst.TRANSACTION_PREPARED] = "true"
            # As Java's broker parks a half (TransactionalMessageBridge): the committed message
            # keeps it, and consumers see it (the Node client's own tests check it).
            properties[MessageConst.TRANSACTION_ID] = system.message_id
            if system.HasField("orphaned_transaction_recovery_duration"):
                seconds = system.orphaned_transaction_recovery_duration.seconds
                properties[MessageConst.CHECK_IMMUNITY_TIME_IN_SECONDS] = str(max(int(seconds), 0))
        return queue_id, sys_flag

    def _fifo_queue(self, topic: str, group: str) -> int:
        if not group:
            raise RefusedError(
                "ILLEGAL_MESSAGE_GROUP", "a FIFO message needs system_properties.message_group"
            )
        if not group.strip():
            raise RefusedError("ILLEGAL_MESSAGE_GROUP", "message_group cannot be only whitespace")
        if len(group.encode("utf-8")) >= MAX_MESSAGE_GROUP_BYTES:
            raise RefusedError(
                "ILLEGAL_MESSAGE_GROUP",
                f"message_group is {len(group.encode())} bytes, max {MAX_MESSAGE_GROUP_BYTES - 1}",
            )
        if any(ord(c) < 32 for c in group):
            raise RefusedError("ILLEGAL_MESSAGE_GROUP", "message_group cannot contain control characters")
        tc = self.topics.select(topic)
        return -1 if tc is None else fifo_queue(group, tc.write_queue_nums)

    def _delivery(self, timestamp: Timestamp) -> int:
        at = delivery_ms(timestamp)
        furthest = self.send.store.config.timer_max_delay_sec * 1000
        if at - int(time.time() * 1000) > furthest:
            raise RefusedError(
                "ILLEGAL_DELIVERY_TIME",
                f"delivery_timestamp {at} ms is more than timerMaxDelaySec ({furthest // 1000} s) ahead",
            )
        return at

    # -- EndTransaction -----------------------------------------------------------------------
    async def end_transaction(
        self, request: spb.EndTransactionRequest, context: Any
    ) -> spb.EndTransactionResponse:
        """COMMIT or ROLLBACK of a half message by its transaction id: the END_TRANSACTION core
        (the half must be this topic's, with this message id). Unspecified: left for the
        check-back, as a 4.x UNKNOW."""
        kit = self.kit
        transactions = self.transactions
        if transactions is None:
            await kit.not_served(context)
            raise AssertionError("not_served aborts the call")
        topic = request.topic.name
        if not request.transaction_id:
            return self._ended("INVALID_TRANSACTION_ID", "transaction_id is empty")
        found = parse_transaction_id(request.transaction_id) or transactions.find_half(
            request.transaction_id, topic
        )
        if found is None:
            return self._ended(
                "INVALID_TRANSACTION_ID",
                f"transaction_id {request.transaction_id!r} names no half message of topic {topic!r} "
                "(it is the send answer's)",
            )
        commit_log_offset, queue_offset = found
        problem = transactions.half_problem(commit_log_offset, queue_offset, topic, request.message_id)
        if problem is not None:
            return self._ended(
                "INVALID_TRANSACTION_ID", f"transaction_id {request.transaction_id!r}: {problem}"
            )
        kind = {
            pb.TransactionResolution.COMMIT: MessageSysFlag.TRANSACTION_COMMIT_TYPE,
            pb.TransactionResolution.ROLLBACK: MessageSysFlag.TRANSACTION_ROLLBACK_TYPE,
        }.get(request.resolution, MessageSysFlag.TRANSACTION_NOT_TYPE)
        header = EndTransactionRequestHeader(
            producer_group=topic,
            tran_state_table_offset=queue_offset,
            commit_log_offset=commit_log_offset,
            commit_or_rollback=kind,
            from_transaction_check=request.source == pb.TransactionSource.SOURCE_SERVER_CHECK,
            msg_id=request.message_id,
            transaction_id=request.transaction_id,
        )
        outcome = transactions.end_transaction(header, kit.peer(context))
        if inspect.isawaitable(outcome):
            outcome = await outcome
        if outcome is None or outcome.ok:  # None: UNKNOWN, left to the check
            return self._ended("OK", "")
        return self._ended("INTERNAL_ERROR", outcome.remark or f"END_TRANSACTION answered {outcome.code}")

    def _ended(self, code: str, why: str) -> spb.EndTransactionResponse:
        return spb.EndTransactionResponse(status=self.kit.status(code, why))
