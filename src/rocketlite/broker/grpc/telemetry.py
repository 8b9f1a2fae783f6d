"""Telemetry: the bidirectional stream every 5.x client opens first. Each `settings` it sends must
get a `settings` reply with status OK on the same stream: without it the Node clients hang in
startup and the Python push consumer fails. The server's part of the settings (Java proxy's
defaults) is filled in here, and the last settings of each client are kept.

The stream is also the server's way to the client (`push`): while it is open, a producer's stream
is where the transaction service's checks go for the producer groups its settings name (each
publishing topic, the group Java's proxy gives 5.x producers). A `TransactionCheck` goes out as a
`RecoverOrphanedTransactionCommand` whose message is built by `convert.message_of`, as every
message sent to a 5.x client; the client's checker answers with EndTransaction (source
SOURCE_SERVER_CHECK). Pushes with no 5.x form (a consumer group's change) are dropped. The
registry is the broker's client manager, as for 4.x producers: each settings registers the client
there (`clients.GrpcClients`), and the stream's end unregisters it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Any

from rocketlite.broker.grpc.clients import GrpcClients
from rocketlite.broker.grpc.convert import message_of
from rocketlite.broker.grpc.kit import ProtoKit, client_id, metadata
from rocketlite.broker.grpc.send import transaction_id
from rocketlite.broker.subscription_group import SubscriptionGroupManager
from rocketlite.protocol.proto.v2 import definition_pb2 as pb
from rocketlite.protocol.proto.v2 import service_pb2 as spb
from rocketlite.remoting.peer import Push, TransactionCheck

log = logging.getLogger("rocketlite.broker.grpc")

PRODUCER_MAX_ATTEMPTS = 3  # Java proxy's producer settings: 3 attempts, 10 ms -> 1 s, x2
CONSUMER_RECEIVE_BATCH = 32
LONG_POLLING_S = 20


class TelemetryStream:
    """One open Telemetry stream: what the server writes to it goes through `outbox`. A producer's
    stream is where the transaction service's checks of its groups go (`push`)."""

    def __init__(self, kit: ProtoKit, client: str, peer: str) -> None:
        self.kit = kit
        self.client = client
        self.remote_address = peer
        self.closed = False
        self.outbox: asyncio.Queue[spb.TelemetryCommand | None] = asyncio.Queue()

    def push(self, request: Push) -> None:
        """A transaction check for this producer, sent on as a RecoverOrphanedTransactionCommand
        whose transaction id is the send answer's (the message id; the half's place for a half
        without one)."""
        if self.closed or not isinstance(request, TransactionCheck):
            return
        header = request.header
        tx_id = header.transaction_id or transaction_id(
            header.commit_log_offset, header.tran_state_table_offset
        )
        recover = spb.RecoverOrphanedTransactionCommand(
            message=message_of(self.kit, request.record), transaction_id=tx_id
        )
        self.outbox.put_nowait(spb.TelemetryCommand(recover_orphaned_transaction_command=recover))


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
        self.settings: dict[str, pb.Settings] = {}  # client id -> its last Settings
        self._streams: dict[str, TelemetryStream] = {}  # client id -> the stream of those settings

    def forget(self, client: str) -> None:
        """A client that said it terminates (NotifyClientTermination)."""
        self.settings.pop(client, None)
        self._streams.pop(client, None)

    async def telemetry(
        self, requests: AsyncIterator[spb.TelemetryCommand], context: Any
    ) -> AsyncIterator[spb.TelemetryCommand]:
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
        self, requests: AsyncIterator[spb.TelemetryCommand], stream: TelemetryStream, meta: dict[str, str]
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
                    spb.TelemetryCommand(status=self.kit.status("OK"), settings=settings)
                )
        except Exception as exc:  # the client went away mid-read: the stream ends
            log.debug("telemetry stream of %s ended: %s", stream.client, exc)
        finally:
            stream.outbox.put_nowait(None)

    def reply_settings(self, client: pb.Settings) -> pb.Settings:
        """The client's settings completed with the server's part (Java proxy's defaults)."""
        duration = self.kit.duration
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
