"""Telemetry: the bidirectional stream every 5.x client opens first. Each `settings` it sends must
get a `settings` reply with status OK on the same stream: without it the Node clients hang in
startup and the Python push consumer fails. The server's part of the settings (Java proxy's
defaults) is filled in here, and the last settings of each client are kept.

The stream is also the server's way to the client: while it is open, a producer's stream is a
check channel of the transaction service for the producer groups its settings name (each
publishing topic, the group Java's proxy gives 5.x producers). A CHECK_TRANSACTION_STATE the
service writes to it goes out as a `RecoverOrphanedTransactionCommand`; the client's checker
answers with EndTransaction (source SOURCE_SERVER_CHECK). The registry is the broker's client
manager, as for 4.x producers: each settings registers the client there (`clients.GrpcClients`),
and the stream's end unregisters it.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
from collections.abc import AsyncIterator
from typing import Any

from rocketlite.broker.grpc.clients import GrpcClients
from rocketlite.broker.grpc.kit import ProtoKit, client_id, metadata
from rocketlite.broker.grpc.send import transaction_id
from rocketlite.broker.subscription_group import SubscriptionGroupManager
from rocketlite.protocol.codes import RequestCode
from rocketlite.protocol.formats.record import RecordFormatError, StoredRecord, decode_record
from rocketlite.protocol.message import MessageConst, string_to_properties
from rocketlite.protocol.wire.command import RemotingCommand
from rocketlite.protocol.wire.headers import CheckTransactionStateRequestHeader

log = logging.getLogger("rocketlite.broker.grpc")

PRODUCER_MAX_ATTEMPTS = 3  # Java proxy's producer settings: 3 attempts, 10 ms -> 1 s, x2
CONSUMER_RECEIVE_BATCH = 32
LONG_POLLING_S = 20
# Properties a 5.x message carries in system_properties, not among its user properties.
_SYSTEM_KEYS = frozenset(
    {
        MessageConst.TAGS, MessageConst.KEYS, MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
        MessageConst.PRODUCER_GROUP, MessageConst.TRANSACTION_PREPARED, MessageConst.REAL_TOPIC,
        MessageConst.REAL_QUEUE_ID, MessageConst.TRANSACTION_CHECK_TIMES, MessageConst.CLUSTER,
        MessageConst.CHECK_IMMUNITY_TIME_IN_SECONDS, MessageConst.SHARDING_KEY,
    }
)  # fmt: skip


class TelemetryStream:
    """One open Telemetry stream: what the server writes to it goes through `outbox`. A producer's
    stream is a `CheckChannel` of the transaction service (`closed`, `remote_address`, `oneway`)."""

    def __init__(self, kit: ProtoKit, client: str, peer: str) -> None:
        self.kit = kit
        self.client = client
        self.remote_address = peer
        self.closed = False
        self.outbox: asyncio.Queue[Any] = asyncio.Queue()

    def oneway(self, cmd: RemotingCommand) -> None:
        """A transaction check for this producer, sent on as a RecoverOrphanedTransactionCommand."""
        if self.closed:
            return
        if cmd.code != RequestCode.CHECK_TRANSACTION_STATE:
            log.warning("request %d has no 5.x form; not sent to client %s", cmd.code, self.client)
            return
        header = CheckTransactionStateRequestHeader.from_ext(cmd.ext_fields)
        try:
            record = decode_record(cmd.body or b"")
        except (RecordFormatError, ValueError) as exc:
            log.error("transaction check for %s not sent: %s", self.client, exc)
            return
        recover = self.kit.spb.RecoverOrphanedTransactionCommand(
            message=message_of(self.kit, record),
            transaction_id=transaction_id(header.commit_log_offset, header.tran_state_table_offset),
        )
        self.outbox.put_nowait(self.kit.spb.TelemetryCommand(recover_orphaned_transaction_command=recover))


def message_of(kit: ProtoKit, record: StoredRecord) -> Any:
    """A stored message as a 5.x `Message` (what a transaction check shows the producer's checker).
    The digest is MD5 in uppercase hex, the one spelling both clients compare as they compute it."""
    pb = kit.pb
    props = string_to_properties(record.properties_string)
    system = pb.SystemProperties(
        message_id=props.get(MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX, record.msg_id),
        body_digest=pb.Digest(type=pb.DigestType.MD5, checksum=hashlib.md5(record.body).hexdigest().upper()),
        body_encoding=pb.Encoding.IDENTITY,
        message_type=pb.MessageType.TRANSACTION,
        born_host=str(record.born_host).rpartition(":")[0].strip("[]"),
        store_host=str(record.store_host),
        queue_id=record.queue_id,
        queue_offset=record.queue_offset,
    )
    system.born_timestamp.FromMilliseconds(record.born_timestamp)
    system.store_timestamp.FromMilliseconds(record.store_timestamp)
    if MessageConst.TAGS in props:
        system.tag = props[MessageConst.TAGS]
    if props.get(MessageConst.KEYS):
        system.keys.extend(props[MessageConst.KEYS].split(" "))
    topic = props.get(MessageConst.REAL_TOPIC, record.topic)
    user = {k: v for k, v in props.items() if k not in _SYSTEM_KEYS}
    return pb.Message(
        topic=pb.Resource(name=topic), user_properties=user, system_properties=system, body=record.body
    )


class TelemetryService:
    """`groups`: the subscription groups (None: no group consumes FIFO); `clients`: where settings
    register their client, and so where transaction checks find producer streams (None: nowhere)."""

    def __init__(
        self,
        kit: ProtoKit,
        *,
        max_body_size: int,
        groups: SubscriptionGroupManager | None = None,
        clients: GrpcClients | None = None,
    ) -> None:
        self.kit = kit
        self.clients = clients  # where settings register their client (None: nowhere)
        self.groups = groups
        self.max_body_size = max_body_size
        self.settings: dict[str, Any] = {}  # client id -> its last Settings
        self._streams: dict[str, TelemetryStream] = {}  # client id -> the stream of those settings

    def forget(self, client: str) -> None:
        """A client that said it terminates (NotifyClientTermination)."""
        self.settings.pop(client, None)
        self._streams.pop(client, None)

    async def telemetry(self, requests: AsyncIterator[Any], context: Any) -> AsyncIterator[Any]:
        """Replies to the client's commands and whatever the server sends it, until either side
        ends the stream; the stream stays a check channel for exactly that long."""
        stream = TelemetryStream(self.kit, client_id(context), context.peer())
        meta = metadata(context)
        reader = asyncio.create_task(self._read(requests, stream, meta), name="grpc-telemetry-read")
        try:
            while (command := await stream.outbox.get()) is not None:
                yield command
        finally:
            stream.closed = True
            if self._streams.get(stream.client) is stream:  # the client's last stream: it left
                del self._streams[stream.client]
                self.settings.pop(stream.client, None)
            if self.clients is not None:
                self.clients.stream_ended(stream)
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reader

    async def _read(
        self, requests: AsyncIterator[Any], stream: TelemetryStream, meta: dict[str, str]
    ) -> None:
        try:
            async for command in requests:
                if command.WhichOneof("command") != "settings":
                    continue  # thread stack traces and verify results: nothing asked for them yet
                settings = self.reply_settings(command.settings)
                self.settings[stream.client] = settings
                self._streams[stream.client] = stream
                if self.clients is not None:
                    self.clients.settings(stream, stream.remote_address, command.settings, meta)
                stream.outbox.put_nowait(
                    self.kit.spb.TelemetryCommand(status=self.kit.status("OK"), settings=settings)
                )
        except Exception as exc:  # the client went away mid-read: the stream ends
            log.debug("telemetry stream of %s ended: %s", stream.client, exc)
        finally:
            stream.outbox.put_nowait(None)

    def reply_settings(self, client: Any) -> Any:
        """The client's settings completed with the server's part (Java proxy's defaults)."""
        pb, duration = self.kit.pb, self.kit.duration
        settings = pb.Settings()
        settings.CopyFrom(client)
        settings.metric.on = False
        if client.WhichOneof("pub_sub") == "subscription":
            settings.subscription.receive_batch_size = CONSUMER_RECEIVE_BATCH
            settings.subscription.long_polling_timeout.CopyFrom(duration(seconds=LONG_POLLING_S))
            settings.subscription.fifo = self._orderly(client.subscription.group.name)
            settings.backoff_policy.CopyFrom(
                pb.RetryPolicy(
                    max_attempts=17,
                    customized_backoff=pb.CustomizedBackoff(
                        next=[duration(seconds=s) for s in (1, 5, 10, 30, 60, 120, 180, 240, 300)]
                    ),
                )
            )
        else:  # a producer (or a client that has not said yet)
            settings.publishing.max_body_size = self.max_body_size
            settings.publishing.validate_message_type = True
            settings.backoff_policy.CopyFrom(
                pb.RetryPolicy(
                    max_attempts=PRODUCER_MAX_ATTEMPTS,
                    exponential_backoff=pb.ExponentialBackoff(
                        initial=duration(nanos=10_000_000), max=duration(seconds=1), multiplier=2.0
                    ),
                )
            )
        return settings

    def _orderly(self, group: str) -> bool:
        """A group that consumes orderly (consumeMessageOrderly) gets FIFO consumption."""
        if self.groups is None or not group:
            return False
        cfg = self.groups.table.get(group)  # settings never create a group
        return bool(cfg is not None and cfg.consume_message_orderly)
