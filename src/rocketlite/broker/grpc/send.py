"""SendMessage and EndTransaction: a 5.x send becomes a SEND_MESSAGE_V2 request handed to the
broker's own `SendMessageProcessor`, in process, as Java's proxy does: the same checks, topic
auto-creation and store path as a 4.x send. The body digest is checked first, by type.

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
  the transaction service parks as a half message. The answer's
  `transaction_id` names the half (its commit-log and queue offsets), so EndTransaction needs no
  table that a restart would lose; the check-back sends the same id (telemetry.py).

Any other type's answer has `transaction_id` = the message id, as Java's proxy answers: it passes
on the broker's SendMessageResponseHeader.transactionId, which is the UNIQ_KEY (the Node client's
own tests check it).

Topics carry no declared message type here, so every type is accepted on every topic (the route
says so).
"""

from __future__ import annotations

import hashlib
import inspect
import struct
import time
import zlib
from typing import TYPE_CHECKING, Any, cast

from rocketlite.broker.grpc.kit import GrpcPeer, ProtoKit, RefusedError
from rocketlite.broker.processors.send import SendMessageProcessor
from rocketlite.broker.transaction import TransactionalMessageService
from rocketlite.protocol import reserved
from rocketlite.protocol.codes import RequestCode, ResponseCode
from rocketlite.protocol.errors import RocketliteError
from rocketlite.protocol.message import MessageConst, MessageSysFlag, parse_msg_id, properties_to_string
from rocketlite.protocol.requests.send import build_send
from rocketlite.protocol.wire.command import RemotingCommand, make_request
from rocketlite.protocol.wire.headers import EndTransactionRequestHeader, SendMessageRequestHeader

if TYPE_CHECKING:
    from rocketlite.remoting.connection import Connection

MAX_MESSAGE_GROUP_BYTES = 64  # Java proxy's maxMessageGroupSize
_MS_IN_SECONDS_FIELD = 100_000_000_000  # seconds past year 5138: a millisecond value
MAX_TOPIC_TEMPLATES = 1024  # topics whose SEND_MESSAGE_V2 header fields are kept prebuilt
# The V2 header letters filled per message (the rest comes from the topic's template).
_V2 = SendMessageRequestHeader.V2_NAMES
_QUEUE_ID, _SYS_FLAG, _BORN, _PROPERTIES = (
    _V2[name] for name in ("queue_id", "sys_flag", "born_timestamp", "properties")
)

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
    """Check a body against the client's `Digest`, by type: the Python client writes CRC32 as hex,
    Node as a decimal string, Java MD5 in uppercase hex (cases compared insensitively).
    None when it matches; else what is wrong."""
    if digest_type == "CRC32":
        crc = zlib.crc32(body) & 0xFFFFFFFF
        if checksum.isdigit() and int(checksum) == crc:
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
    """The id a 5.x producer gets for a half message (and is sent with its check-back): where the
    half lies, so that EndTransaction finds it after a restart too."""
    return f"{commit_log_offset:X}-{queue_offset:X}"


def parse_transaction_id(text: str) -> tuple[int, int] | None:
    """(commit-log offset, half queue offset) of a `transaction_id`; None if it is not one."""
    first, sep, second = text.partition("-")
    try:
        return (int(first, 16), int(second, 16)) if sep and first and second else None
    except ValueError:
        return None


def fifo_queue(group: str, queues: int) -> int:
    """The queue of a message group: stable across restarts and brokers of the same topic size."""
    return zlib.crc32(group.encode("utf-8")) % max(queues, 1)


def delivery_ms(timestamp: Any) -> int:
    """`delivery_timestamp` in epoch ms (see the module docstring for the Python client's ms)."""
    if timestamp.seconds >= _MS_IN_SECONDS_FIELD:
        return int(timestamp.seconds)
    return int(timestamp.seconds) * 1000 + int(timestamp.nanos) // 1_000_000


class ProducerService:
    """`transactions`: the broker's transaction service, which EndTransaction goes to (None: not
    served)."""

    def __init__(
        self,
        kit: ProtoKit,
        send: SendMessageProcessor,
        *,
        max_body_size: int,
        transactions: TransactionalMessageService | None = None,
    ) -> None:
        self.kit = kit
        self.send = send
        self.transactions = transactions
        self.max_body_size = max_body_size
        self._ok = kit.status("OK")
        pb = kit.pb
        self._types = {pb.MessageType.Value(n): n for n in ("NORMAL", "FIFO", "DELAY", "TRANSACTION")}
        self._digests: dict[int, str] = {number: name for name, number in pb.DigestType.items()}
        self._templates: dict[str, dict[str, str]] = {}

    async def send_message(self, request: Any, context: Any) -> Any:
        kit = self.kit
        peer = kit.peer(context.peer())
        entries = [await self._send_one(message, peer) for message in request.messages]
        if not entries:
            status = kit.status("BAD_REQUEST", "no messages in the request")
        elif len(entries) == 1 or len({e.status.code for e in entries}) == 1:
            status = entries[0].status
        else:
            status = kit.status("MULTIPLE_RESULTS", "the messages were answered differently")
        return kit.spb.SendMessageResponse(status=status, entries=entries)

    async def _send_one(self, message: Any, peer: GrpcPeer) -> Any:
        kit = self.kit
        try:
            command, message_type = self._build(message)
            # paced: this message's dispatch round may be shared with the next RPCs'
            answer = self.send.handle(cast("Connection", peer), command, paced=True)
            if type(answer) is not RemotingCommand and inspect.isawaitable(answer):
                answer = await answer  # SYNC_FLUSH or a SYNC_MASTER: the put completes later
        except RefusedError as exc:
            return kit.spb.SendResultEntry(status=kit.status(exc.status, str(exc)))
        except RocketliteError as exc:
            return kit.spb.SendResultEntry(
                status=kit.status(SEND_CODES.get(exc.code, "BAD_REQUEST"), str(exc))
            )
        assert isinstance(answer, RemotingCommand)
        if answer.code != ResponseCode.SUCCESS:
            code = SEND_CODES.get(answer.code, "INTERNAL_ERROR")
            return kit.spb.SendResultEntry(status=kit.status(code, answer.remark or ""))
        ext = answer.ext_fields or {}
        offset = int(ext.get("queueOffset", 0))
        if message_type == "TRANSACTION":  # the half's place: its offset msg id and queue offset
            tx_id = transaction_id(parse_msg_id(ext["msgId"]).offset, offset)
            return kit.spb.SendResultEntry(
                status=self._ok, message_id=message.system_properties.message_id, offset=offset,
                transaction_id=tx_id,
            )  # fmt: skip
        message_id = message.system_properties.message_id  # also the transaction id, as in Java (below)
        return kit.spb.SendResultEntry(
            status=self._ok, message_id=message_id, offset=offset, transaction_id=message_id
        )

    def _build(self, message: Any) -> tuple[RemotingCommand, str]:
        """The SEND_MESSAGE_V2 request of one 5.x message and its type; `RefusedError` for bad input."""
        system = message.system_properties
        body = message.body
        if not system.message_id:
            raise RefusedError("ILLEGAL_MESSAGE_ID", "system_properties.message_id is required")
        message_type = self._types.get(system.message_type)
        if message_type is None:
            number = system.message_type
            known = self.kit.pb.MessageType.values()
            name = self.kit.pb.MessageType.Name(number) if number in known else f"message type {number}"
            raise RefusedError(
                "BAD_REQUEST", f"{name} messages are not served (NORMAL, FIFO, DELAY, TRANSACTION are)"
            )
        if len(body) > self.max_body_size:
            raise RefusedError("MESSAGE_BODY_TOO_LARGE", f"body of {len(body)} bytes > {self.max_body_size}")
        digest = system.body_digest
        problem = digest_problem(body, self._digests.get(digest.type, ""), digest.checksum)
        if problem is not None:
            raise RefusedError("MESSAGE_CORRUPTED", problem)
        topic = message.topic.name
        properties = dict(message.user_properties) if message.user_properties else {}
        if system.HasField("tag"):
            properties[MessageConst.TAGS] = system.tag
        if system.keys:
            properties[MessageConst.KEYS] = " ".join(system.keys)
        properties[MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX] = system.message_id
        properties[MessageConst.PRODUCER_GROUP] = topic  # Java's proxy: the producer group is the topic
        queue_id = -1  # the broker picks the queue, as Java's proxy does (FIFO: by group, below)
        sys_flag = 0
        if (
            message_type != "NORMAL"
            or system.HasField("message_group")
            or system.HasField("delivery_timestamp")
        ):  # (a NORMAL message with either is refused there)
            queue_id, sys_flag = self._by_type(system, message_type, topic, properties)
        born = system.born_timestamp
        command = make_request(RequestCode.SEND_MESSAGE_V2, self._template(topic), body)
        ext = command.ext_fields
        ext[_QUEUE_ID] = str(queue_id)
        ext[_SYS_FLAG] = str(sys_flag)
        ext[_BORN] = str(born.seconds * 1000 + born.nanos // 1_000_000)
        ext[_PROPERTIES] = properties_to_string(properties)
        return command, message_type

    def _template(self, topic: str) -> dict[str, str]:
        """A topic's SEND_MESSAGE_V2 header fields (`build_send`'s), built once per topic; `_build`
        fills in the ones that vary per message."""
        template = self._templates.get(topic)
        if template is None:
            if len(self._templates) >= MAX_TOPIC_TEMPLATES:
                self._templates.clear()
            template = build_send(
                group=topic, topic=topic, queue_id=-1, body=b"", properties="", born_timestamp=0
            ).ext_fields
            self._templates[topic] = template
        return template

    def _by_type(
        self, system: Any, type_name: str, topic: str, properties: dict[str, str]
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
        tc = self.send.topics.select(topic)
        return -1 if tc is None else fifo_queue(group, tc.write_queue_nums)

    def _delivery(self, timestamp: Any) -> int:
        at = delivery_ms(timestamp)
        furthest = self.send.store.config.timer_max_delay_sec * 1000
        if at - int(time.time() * 1000) > furthest:
            raise RefusedError(
                "ILLEGAL_DELIVERY_TIME",
                f"delivery_timestamp {at} ms is more than timerMaxDelaySec ({furthest // 1000} s) ahead",
            )
        return at

    # -- EndTransaction -----------------------------------------------------------------------
    async def end_transaction(self, request: Any, context: Any) -> Any:
        """COMMIT or ROLLBACK of a half message by its transaction id: the broker's END_TRANSACTION
        path (the half must be this topic's, with this message id). Unspecified: left for the
        check-back, as a 4.x UNKNOW."""
        kit, pb = self.kit, self.kit.pb
        if self.transactions is None:
            await kit.not_served(context)
        topic = request.topic.name
        resolution = pb.TransactionResolution.Name(request.resolution)
        found = parse_transaction_id(request.transaction_id)
        if not request.transaction_id:
            return self._ended("INVALID_TRANSACTION_ID", "transaction_id is empty")
        if found is None:
            return self._ended(
                "INVALID_TRANSACTION_ID",
                f"transaction_id {request.transaction_id!r} is not one this broker gave (its send answer's)",
            )
        commit_log_offset, queue_offset = found
        problem = self._half_problem(commit_log_offset, queue_offset, topic, request.message_id)
        if problem is not None:
            return self._ended(
                "INVALID_TRANSACTION_ID", f"transaction_id {request.transaction_id!r}: {problem}"
            )
        kind = {
            "COMMIT": MessageSysFlag.TRANSACTION_COMMIT_TYPE,
            "ROLLBACK": MessageSysFlag.TRANSACTION_ROLLBACK_TYPE,
        }.get(resolution, MessageSysFlag.TRANSACTION_NOT_TYPE)
        header = EndTransactionRequestHeader(
            producer_group=topic,
            tran_state_table_offset=queue_offset,
            commit_log_offset=commit_log_offset,
            commit_or_rollback=kind,
            from_transaction_check=request.source == pb.TransactionSource.SOURCE_SERVER_CHECK,
            msg_id=request.message_id,
            transaction_id=request.transaction_id,
        )
        command = make_request(RequestCode.END_TRANSACTION, header.to_ext())
        assert self.transactions is not None
        answer = self.transactions.handle_end_transaction(
            cast("Connection", GrpcPeer(context.peer())), command
        )
        if inspect.isawaitable(answer):
            answer = await answer
        if answer is None or answer.code == ResponseCode.SUCCESS:  # None: UNKNOWN, left to the check
            return kit.spb.EndTransactionResponse(status=kit.status("OK"))
        return self._ended("INTERNAL_ERROR", answer.remark or f"END_TRANSACTION answered {answer.code}")

    def _ended(self, code: str, why: str) -> Any:
        return self.kit.spb.EndTransactionResponse(status=self.kit.status(code, why))

    def _half_problem(
        self, commit_log_offset: int, queue_offset: int, topic: str, message_id: str
    ) -> str | None:
        """Why the record at `commit_log_offset` is not this message's half in `topic`, or None."""
        try:
            half = self.send.store.look_message_by_offset(commit_log_offset)
        except (ValueError, IndexError, struct.error):  # a forged offset inside a record
            half = None
        if half is None or half.topic != reserved.TRANS_HALF_TOPIC:
            return "no half message there"
        if half.queue_offset != queue_offset:
            return "no half message there"
        if half.get_property(MessageConst.REAL_TOPIC) != topic:
            return f"the half message is not in topic {topic!r}"
        if message_id and half.get_property(MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX) != message_id:
            return f"the half message is not message {message_id!r}"
        return None
