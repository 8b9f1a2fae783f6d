"""Telemetry: the bidirectional stream every 5.x client opens first. Each `settings` it sends must
get a `settings` reply with status OK on the same stream: without it the Node clients hang in
startup and the Python push consumer fails. The server's part of the settings (Java proxy's
defaults) is filled in here, and the last settings of each client are kept."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from rocketlite.broker.grpc.kit import ProtoKit, client_id

PRODUCER_MAX_ATTEMPTS = 3  # Java proxy's producer settings: 3 attempts, 10 ms -> 1 s, x2
CONSUMER_RECEIVE_BATCH = 32
LONG_POLLING_S = 20


class TelemetryService:
    def __init__(self, kit: ProtoKit, *, max_body_size: int) -> None:
        self.kit = kit
        self.max_body_size = max_body_size
        self.settings: dict[str, Any] = {}  # client id -> its last Settings

    def forget(self, client: str) -> None:
        """A client that said it terminates (NotifyClientTermination)."""
        self.settings.pop(client, None)

    async def telemetry(self, requests: AsyncIterator[Any], context: Any) -> AsyncIterator[Any]:
        client = client_id(context)
        async for command in requests:
            if command.WhichOneof("command") != "settings":
                continue  # thread stack traces and verify results: nothing asked for them yet
            settings = self.reply_settings(command.settings)
            self.settings[client] = settings
            yield self.kit.spb.TelemetryCommand(status=self.kit.status("OK"), settings=settings)

    def reply_settings(self, client: Any) -> Any:
        """The client's settings completed with the server's part (Java proxy's defaults)."""
        pb, duration = self.kit.pb, self.kit.duration
        settings = pb.Settings()
        settings.CopyFrom(client)
        settings.metric.on = False
        if client.WhichOneof("pub_sub") == "subscription":
            settings.subscription.receive_batch_size = CONSUMER_RECEIVE_BATCH
            settings.subscription.long_polling_timeout.CopyFrom(duration(seconds=LONG_POLLING_S))
            settings.subscription.fifo = False
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
