"""The RocketMQ 5.x gRPC endpoint (`apache.rocketmq.v2.MessagingService`, RocketMQ's "local proxy"
mode): a `grpc.aio` server on the broker's own event loop, started and stopped by the controller.

Served so far: QueryRoute, Heartbeat, Telemetry (the settings handshake) and SendMessage of NORMAL
messages. A send becomes a SEND_MESSAGE_V2 request handed to the broker's own
`SendMessageProcessor`, in process, as Java's proxy does: the same checks, topic auto-creation and
store path as a 4.x send. Every other RPC answers gRPC UNIMPLEMENTED (POP over gRPC comes next).

The stubs come from `rocketlite.protocol.proto` (generated at build time); without grpcio the
broker runs without this endpoint and says why (`unavailable_reason`).
"""

from __future__ import annotations

import hashlib
import inspect
import logging
import zlib
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any, cast

from rocketlite.broker.config import BrokerConfig
from rocketlite.broker.processors.send import SendMessageProcessor
from rocketlite.broker.topic_config import TopicConfigManager
from rocketlite.protocol import perm
from rocketlite.protocol.codes import ResponseCode
from rocketlite.protocol.command import RemotingCommand
from rocketlite.protocol.errors import RocketliteError
from rocketlite.protocol.message import HostAddress, properties_to_string
from rocketlite.protocol.proto import available
from rocketlite.protocol.requests.send import build_send

if TYPE_CHECKING:
    from rocketlite.remoting.connection import Connection

log = logging.getLogger("rocketlite.broker.grpc")

PRODUCER_MAX_ATTEMPTS = 3  # Java proxy's producer settings: 3 attempts, 10 ms -> 1 s, x2
CONSUMER_RECEIVE_BATCH = 32
LONG_POLLING_S = 20
# 4.x answers of a send mapped onto apache.rocketmq.v2.Code (Java's ResponseCode -> Code table).
_SEND_CODES: dict[int, str] = {
    ResponseCode.TOPIC_NOT_EXIST: "TOPIC_NOT_FOUND",
    ResponseCode.NO_PERMISSION: "FORBIDDEN",
    ResponseCode.MESSAGE_ILLEGAL: "BAD_REQUEST",
    ResponseCode.SYSTEM_BUSY: "TOO_MANY_REQUESTS",
    ResponseCode.SERVICE_NOT_AVAILABLE: "INTERNAL_ERROR",
    ResponseCode.FLUSH_DISK_TIMEOUT: "INTERNAL_ERROR",
    ResponseCode.SLAVE_NOT_AVAILABLE: "INTERNAL_ERROR",
}


def unavailable_reason() -> str | None:
    """None when the endpoint can be served; else why not (grpcio or the stubs are missing)."""
    return available()


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


class _GrpcPeer:
    """What `SendMessageProcessor.handle` reads of a remoting connection (its address and the born
    host), for a send that came over gRPC."""

    def __init__(self, peer: str) -> None:
        self.remote_address = peer
        self.attrs: dict[str, object] = {"born_host": _born_host(peer)}


def _born_host(peer: str) -> HostAddress:
    # grpc peers read "ipv4:127.0.0.1:5555" / "ipv6:[::1]:5555"
    _, _, address = peer.partition(":")
    host, _, port = address.rpartition(":")
    try:
        return HostAddress.of(host.strip("[]"), int(port))
    except ValueError:
        return HostAddress(b"\x7f\x00\x00\x01", 0)


class GrpcEndpoint:
    """The gRPC server: `start()` binds `host:port` (0: a free port, see `port`), `close()` stops it
    and ends open Telemetry streams."""

    def __init__(
        self,
        broker: BrokerConfig,
        topics: TopicConfigManager,
        send: SendMessageProcessor,
        *,
        host: str,
        port: int,
        max_body_size: int,
    ) -> None:
        import grpc  # noqa: PLC0415  (optional extra: imported only when the endpoint is on)
        from google.protobuf import duration_pb2  # noqa: PLC0415

        from rocketlite.protocol.proto.v2 import (  # noqa: PLC0415
            definition_pb2,
            service_pb2,
            service_pb2_grpc,
        )

        self.grpc: Any = grpc
        self.duration: Any = duration_pb2.Duration
        self.pb: Any = definition_pb2
        self.spb: Any = service_pb2
        self.broker = broker
        self.topics = topics
        self.send = send
        self.host = host
        self.requested_port = port
        self.max_body_size = max_body_size
        self.port = 0
        self.settings: dict[str, Any] = {}  # client id -> its last Settings
        # No SO_REUSEPORT: a second broker on the same port must fail to bind, not share it.
        self.server: Any = grpc.aio.server(options=[("grpc.so_reuseport", 0)])
        servicer = _build_servicer(self, service_pb2_grpc.MessagingServiceServicer)
        stubs: Any = service_pb2_grpc  # generated without types
        stubs.add_MessagingServiceServicer_to_server(servicer, self.server)

    async def start(self) -> None:
        """Bind and serve. A port already taken leaves the endpoint off with an error logged, and
        the broker serves its remoting clients anyway (`port` stays 0)."""
        try:
            self.port = self.server.add_insecure_port(f"{self.host}:{self.requested_port}")
        except RuntimeError as exc:
            log.error(
                "5.x gRPC endpoint off: grpcServerPort %s on %s: %s", self.requested_port, self.host, exc
            )
            return
        await self.server.start()
        log.info("5.x gRPC endpoint on %s:%d", self.host, self.port)

    async def close(self) -> None:
        await self.server.stop(grace=1.0)

    # -- helpers ----------------------------------------------------------------------------
    def status(self, code: str, message: str = "") -> Any:
        return self.pb.Status(code=self.pb.Code.Value(code), message=message)

    def endpoints(self, context: Any) -> Any:
        """This listener as clients reach it: the broker's advertised IP and the bound port."""
        del context
        return self.pb.Endpoints(
            scheme=self.pb.AddressScheme.Value("IPv4"),
            addresses=[self.pb.Address(host=self.broker.broker_ip1, port=self.port)],
        )

    # -- RPCs -------------------------------------------------------------------------------
    async def query_route(self, request: Any, context: Any) -> Any:
        topic = request.topic.name
        tc = self.topics.select(topic)
        if tc is None:
            return self.spb.QueryRouteResponse(
                status=self.status("TOPIC_NOT_FOUND", f"topic {topic!r} does not exist on this broker")
            )
        broker = self.pb.Broker(name=self.broker.broker_name, id=0, endpoints=self.endpoints(context))
        topic_perm = tc.perm & self.broker.broker_permission
        types = [self.pb.MessageType.Value("NORMAL")]  # the only type sent so far
        queues = []
        for queue_id in range(max(tc.read_queue_nums, tc.write_queue_nums)):
            readable = perm.is_readable(topic_perm) and queue_id < tc.read_queue_nums
            writeable = perm.is_writeable(topic_perm) and queue_id < tc.write_queue_nums
            name = {(True, True): "READ_WRITE", (True, False): "READ", (False, True): "WRITE"}.get(
                (readable, writeable), "NONE"
            )
            queues.append(
                self.pb.MessageQueue(
                    topic=request.topic,
                    id=queue_id,
                    permission=self.pb.Permission.Value(name),
                    broker=broker,
                    accept_message_types=types,
                )
            )
        return self.spb.QueryRouteResponse(status=self.status("OK"), message_queues=queues)

    async def heartbeat(self, request: Any, context: Any) -> Any:
        del request, context
        return self.spb.HeartbeatResponse(status=self.status("OK"))

    async def notify_client_termination(self, request: Any, context: Any) -> Any:
        """A client shutting down: forget its settings (Node's producer fails its shutdown on an
        error answer)."""
        del request
        self.settings.pop(_metadata(context).get("x-mq-client-id", ""), None)
        return self.spb.NotifyClientTerminationResponse(status=self.status("OK"))

    async def not_served(self, request: Any, context: Any) -> None:
        """Every RPC not served yet: gRPC UNIMPLEMENTED, saying so (no traceback in the log)."""
        del request
        await context.abort(self.grpc.StatusCode.UNIMPLEMENTED, "not served by rocketlite yet")

    async def telemetry(self, requests: AsyncIterator[Any], context: Any) -> AsyncIterator[Any]:
        """Every `settings` gets a `settings` reply with status OK on the same stream: without it
        the Node clients hang in startup and the Python push consumer fails."""
        client_id = _metadata(context).get("x-mq-client-id", "")
        async for command in requests:
            if command.WhichOneof("command") != "settings":
                continue  # thread stack traces and verify results: nothing asked for them yet
            settings = self.reply_settings(command.settings)
            self.settings[client_id] = settings
            yield self.spb.TelemetryCommand(status=self.status("OK"), settings=settings)

    def reply_settings(self, client: Any) -> Any:
        """The client's settings completed with the server's part (Java proxy's defaults)."""
        duration = self.duration
        settings = self.pb.Settings()
        settings.CopyFrom(client)
        settings.metric.on = False
        if client.WhichOneof("pub_sub") == "subscription":
            settings.subscription.receive_batch_size = CONSUMER_RECEIVE_BATCH
            settings.subscription.long_polling_timeout.CopyFrom(duration(seconds=LONG_POLLING_S))
            settings.subscription.fifo = False
            settings.backoff_policy.CopyFrom(
                self.pb.RetryPolicy(
                    max_attempts=17,
                    customized_backoff=self.pb.CustomizedBackoff(
                        next=[duration(seconds=s) for s in (1, 5, 10, 30, 60, 120, 180, 240, 300)]
                    ),
                )
            )
        else:  # a producer (or a client that has not said yet)
            settings.publishing.max_body_size = self.max_body_size
            settings.publishing.validate_message_type = True
            settings.backoff_policy.CopyFrom(
                self.pb.RetryPolicy(
                    max_attempts=PRODUCER_MAX_ATTEMPTS,
                    exponential_backoff=self.pb.ExponentialBackoff(
                        initial=duration(nanos=10_000_000), max=duration(seconds=1), multiplier=2.0
                    ),
                )
            )
        return settings

    async def send_message(self, request: Any, context: Any) -> Any:
        entries = [await self._send_one(message, context.peer()) for message in request.messages]
        if not entries:
            status = self.status("BAD_REQUEST", "no messages in the request")
        elif len({e.status.code for e in entries}) == 1:
            status = entries[0].status
        else:
            status = self.status("MULTIPLE_RESULTS", "the messages were answered differently")
        return self.spb.SendMessageResponse(status=status, entries=entries)

    async def _send_one(self, message: Any, peer: str) -> Any:
        def refused(code: str, why: str) -> Any:
            return self.spb.SendResultEntry(status=self.status(code, why))

        system = message.system_properties
        body = bytes(message.body)
        if not system.message_id:
            return refused("ILLEGAL_MESSAGE_ID", "system_properties.message_id is required")
        message_type = self.pb.MessageType.Name(system.message_type)
        if message_type != "NORMAL":
            return refused("BAD_REQUEST", f"{message_type} messages are not served over gRPC yet")
        if len(body) > self.max_body_size:
            return refused("MESSAGE_BODY_TOO_LARGE", f"body of {len(body)} bytes > {self.max_body_size}")
        problem = digest_problem(
            body, self.pb.DigestType.Name(system.body_digest.type), system.body_digest.checksum
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
            answer = self.send.handle(cast("Connection", _GrpcPeer(peer)), command)
            if inspect.isawaitable(answer):  # SYNC_FLUSH or a SYNC_MASTER: the put completes later
                answer = await answer
        except RocketliteError as exc:
            return refused(_SEND_CODES.get(exc.code, "BAD_REQUEST"), str(exc))
        assert isinstance(answer, RemotingCommand)
        if answer.code != ResponseCode.SUCCESS:
            return refused(_SEND_CODES.get(answer.code, "INTERNAL_ERROR"), answer.remark or "")
        ext = answer.ext_fields or {}
        return self.spb.SendResultEntry(
            status=self.status("OK"), message_id=system.message_id, offset=int(ext.get("queueOffset", 0))
        )


def _metadata(context: Any) -> dict[str, str]:
    return {key: value for key, value in (context.invocation_metadata() or ()) if isinstance(value, str)}


def _build_servicer(endpoint: GrpcEndpoint, base: type) -> object:
    """A `MessagingServiceServicer` whose served RPCs call the endpoint; every other RPC of the
    service answers UNIMPLEMENTED through `not_served`."""
    served = {
        "QueryRoute": endpoint.query_route,
        "Heartbeat": endpoint.heartbeat,
        "Telemetry": endpoint.telemetry,
        "SendMessage": endpoint.send_message,
        "NotifyClientTermination": endpoint.notify_client_termination,
    }
    rpcs = [name for name in vars(base) if name[:1].isupper()]
    methods = {name: staticmethod(served.get(name, endpoint.not_served)) for name in rpcs}
    return type("Servicer", (base,), methods)()
