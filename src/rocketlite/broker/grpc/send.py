"""SendMessage (and EndTransaction): a 5.x send becomes a SEND_MESSAGE_V2 request handed to the
broker's own `SendMessageProcessor`, in process, as Java's proxy does: the same checks, topic
auto-creation and store path as a 4.x send. The body digest is checked first, by type."""

from __future__ import annotations

import hashlib
import inspect
import zlib
from typing import TYPE_CHECKING, Any, cast

from rocketlite.broker.grpc.kit import GrpcPeer, ProtoKit
from rocketlite.broker.processors.send import SendMessageProcessor
from rocketlite.protocol.codes import ResponseCode
from rocketlite.protocol.command import RemotingCommand
from rocketlite.protocol.errors import RocketliteError
from rocketlite.protocol.message import properties_to_string
from rocketlite.protocol.requests.send import build_send

if TYPE_CHECKING:
    from rocketlite.remoting.connection import Connection

# 4.x answers of a send mapped onto apache.rocketmq.v2.Code (Java's ResponseCode -> Code table).
SEND_CODES: dict[int, str] = {
    ResponseCode.TOPIC_NOT_EXIST: "TOPIC_NOT_FOUND",
    ResponseCode.NO_PERMISSION: "FORBIDDEN",
    ResponseCode.MESSAGE_ILLEGAL: "BAD_REQUEST",
    ResponseCode.SYSTEM_BUSY: "TOO_MANY_REQUESTS",
    ResponseCode.SERVICE_NOT_AVAILABLE: "INTERNAL_ERROR",
    ResponseCode.FLUSH_DISK_TIMEOUT: "INTERNAL_ERROR",
    ResponseCode.SLAVE_NOT_AVAILABLE: "INTERNAL_ERROR",
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


class ProducerService:
    def __init__(self, kit: ProtoKit, send: SendMessageProcessor, *, max_body_size: int) -> None:
        self.kit = kit
        self.send = send
        self.max_body_size = max_body_size

    async def send_message(self, request: Any, context: Any) -> Any:
        kit = self.kit
        entries = [await self._send_one(message, context.peer()) for message in request.messages]
        if not entries:
            status = kit.status("BAD_REQUEST", "no messages in the request")
        elif len({e.status.code for e in entries}) == 1:
            status = entries[0].status
        else:
            status = kit.status("MULTIPLE_RESULTS", "the messages were answered differently")
        return kit.spb.SendMessageResponse(status=status, entries=entries)

    async def end_transaction(self, request: Any, context: Any) -> Any:
        del request
        await self.kit.not_served(context)

    async def _send_one(self, message: Any, peer: str) -> Any:
        kit, pb = self.kit, self.kit.pb

        def refused(code: str, why: str) -> Any:
            return kit.spb.SendResultEntry(status=kit.status(code, why))

        system = message.system_properties
        body = bytes(message.body)
        if not system.message_id:
            return refused("ILLEGAL_MESSAGE_ID", "system_properties.message_id is required")
        message_type = pb.MessageType.Name(system.message_type)
        if message_type != "NORMAL":
            return refused("BAD_REQUEST", f"{message_type} messages are not served over gRPC yet")
        if len(body) > self.max_body_size:
            return refused("MESSAGE_BODY_TOO_LARGE", f"body of {len(body)} bytes > {self.max_body_size}")
        problem = digest_problem(
            body, pb.DigestType.Name(system.body_digest.type), system.body_digest.checksum
        )
        if problem is not None:
            return refused("MESSAGE_CORRUPTED", problem)
        properties = dict(message.user_properties)
        if system.HasField("tag"):
            properties["TAGS"] = system.tag
        if system.keys:
            properties["KEYS"] = " ".join(system.keys)
        properties["UNIQ_KEY"] = system.message_id
        topic = message.topic.name
        command = build_send(
            group=topic,  # Java's proxy: the producer group is the topic name
            topic=topic,
            queue_id=-1,  # the broker picks the queue, as Java's proxy does
            body=body,
            properties=properties_to_string(properties),
            born_timestamp=system.born_timestamp.seconds * 1000 + system.born_timestamp.nanos // 1_000_000,
        )
        try:
            answer = self.send.handle(cast("Connection", GrpcPeer(peer)), command)
            if inspect.isawaitable(answer):  # SYNC_FLUSH or a SYNC_MASTER: the put completes later
                answer = await answer
        except RocketliteError as exc:
            return refused(SEND_CODES.get(exc.code, "BAD_REQUEST"), str(exc))
        assert isinstance(answer, RemotingCommand)
        if answer.code != ResponseCode.SUCCESS:
            return refused(SEND_CODES.get(answer.code, "INTERNAL_ERROR"), answer.remark or "")
        ext = answer.ext_fields or {}
        return kit.spb.SendResultEntry(
            status=kit.status("OK"), message_id=system.message_id, offset=int(ext.get("queueOffset", 0))
        )
