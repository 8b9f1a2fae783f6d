"""The gRPC server: the compiled HTTP/2 core of `h2door` on the broker's own event loop
(`grpcServerImpl=nghttp2`, the default), or grpc's `grpc.aio` server on that loop with its poller
thread (`grpcServerImpl=grpcio`: the reference, the fallback where the core is not built, and
the door under ROCKETLITE_NATIVE=0), started and stopped by the controller, and the servicer that
hands each RPC of `apache.rocketmq.v2.MessagingService` to the module serving it (route, telemetry, send,
consume). An RPC no module serves answers UNIMPLEMENTED.
Every RPC passes `auth.GrpcGuard` first (namespaces; the signature and permissions with aclEnable);
with `tlsCertPath` and `tlsKeyPath` the port serves TLS only.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from rocketlite import native
from rocketlite.broker.acl import AclValidator
from rocketlite.broker.auth.checks import AuthChecks
from rocketlite.broker.client_manager import ClientManager
from rocketlite.broker.config import BrokerConfig, GrpcServerImpl
from rocketlite.broker.grpc import h2door
from rocketlite.broker.grpc.auth import GrpcGuard
from rocketlite.broker.grpc.clients import GrpcClients
from rocketlite.broker.grpc.consume import ConsumerService
from rocketlite.broker.grpc.kit import ProtoKit, client_id
from rocketlite.broker.grpc.route import RouteService
from rocketlite.broker.grpc.send import ProducerService
from rocketlite.broker.grpc.send_lane import SendMessageLane
from rocketlite.broker.grpc.telemetry import TelemetryService
from rocketlite.broker.pop.processor import PopMessageProcessor
from rocketlite.broker.processors.send import SendMessageProcessor
from rocketlite.broker.subscription_group import SubscriptionGroupManager
from rocketlite.broker.topic_config import TopicConfigManager
from rocketlite.broker.transaction import TransactionalMessageService
from rocketlite.protocol.errors import ConfigError
from rocketlite.protocol.proto.v2 import service_pb2 as spb
from rocketlite.remoting.server import check_ports_free

log = logging.getLogger("rocketlite.broker.grpc")
MAX_MESSAGE = 4 * 1024 * 1024  # a request's protobuf bytes at most: grpc's default receive limit
# Calls the grpcio door lets wait for the loop (grpc's core refuses the ones beyond): the queue
# RocketMQ's proxy keeps in front of its producer threads (grpcProducerThreadQueueCapacity).
PENDING_CALLS = 10_000


class GrpcEndpoint:
    """`start()` binds `host:port` (0: a free port, see `port`), `close()` stops the server and ends
    open streams."""

    def __init__(
        self,
        broker: BrokerConfig,
        topics: TopicConfigManager,
        groups: SubscriptionGroupManager,
        send: SendMessageProcessor,
        pop: PopMessageProcessor,
        *,
        host: str,
        port: int,
        max_body_size: int,
        acl: AclValidator | None = None,
        auth: AuthChecks | None = None,
        transactions: TransactionalMessageService | None = None,
        clients: ClientManager | None = None,
    ) -> None:
        self.clients = GrpcClients(clients, pop.service.clock)  # 5.x clients in the client manager
        self.kit = kit = ProtoKit(push_to=self.clients.push)
        self.guard = GrpcGuard(kit, acl, auth)
        self.broker = broker
        self.credentials: Any = None  # TLS server credentials, read by start()
        self.host = host
        self.requested_port = port
        self.port = 0
        self.route = RouteService(kit, broker, topics, lambda: self.port)
        self.telemetry = TelemetryService(
            kit, max_body_size=max_body_size, groups=groups, clients=self.clients
        )
        self.producer = ProducerService(
            kit, send, topics, max_body_size=max_body_size, transactions=transactions
        )
        self.consumer = ConsumerService(kit, broker, topics, groups, pop, self.route, self.clients)
        self.impl = broker.grpc_server_impl
        if self.impl is GrpcServerImpl.NGHTTP2 and native.REFERENCE_ONLY:
            log.info("ROCKETLITE_NATIVE=0: the 5.x endpoint is served by grpcio, the reference")
            self.impl = GrpcServerImpl.GRPCIO
        if self.impl is GrpcServerImpl.NGHTTP2 and (reason := h2door.unavailable_reason()):
            if native.REQUIRED:  # ROCKETLITE_NATIVE=1 (CI): a missing build must not pass as grpc.aio
                raise ImportError(f"grpcServerImpl=nghttp2 with ROCKETLITE_NATIVE=1: {reason}")
            log.warning("grpcServerImpl=nghttp2 is not available, serving 5.x on grpcio: %s", reason)
            self.impl = GrpcServerImpl.GRPCIO
        self.server: Any = None
        self.h2: Any = None
        self.send_lane: SendMessageLane | None = None  # SendMessage's group lane on the h2 door
        idle_ms = broker.grpc_client_idle_time_mills
        if self.impl is GrpcServerImpl.NGHTTP2:
            idle = idle_ms / 1000
            self.send_lane = SendMessageLane(self.producer, self.guard)
            lanes = {"SendMessage": self.send_lane}
            self.h2 = h2door.h2_server(
                self._servicer(), kit.spb, max_message=MAX_MESSAGE, idle=idle, groups=lanes
            )
        else:
            # No SO_REUSEPORT: a second broker on the same port must fail to bind, not share it.
            # grpc.aio takes one call at a time from grpc's core, so behind a busy loop the calls
            # wait in the core's pending queue, which past its default 1000 refuses arrivals at
            # random (CANCELLED, never stored): the queue holds PENDING_CALLS instead.
            options = [
                ("grpc.so_reuseport", 0),
                ("grpc.max_connection_idle_ms", idle_ms),
                ("grpc.server.max_pending_requests", PENDING_CALLS),
                ("grpc.server.max_pending_requests_hard_limit", PENDING_CALLS),
            ]
            self.server = kit.grpc.aio.server(options=options)
            self.server.add_generic_rpc_handlers((_aio_handler(kit, self._servicer()),))

    async def start(self) -> None:
        """Bind and serve. A port already taken leaves the endpoint off with an error logged, and
        the broker serves its remoting clients anyway (`port` stays 0). Unreadable TLS files stop
        the broker (ConfigError)."""
        pem = _tls_pem(self.broker)
        self.credentials = pem and self.kit.grpc.ssl_server_credentials([(pem[1], pem[0])])
        try:
            # Checked here first: grpc's C core would print its own error line for a taken port,
            # straight to stderr, outside our logging (see docs/operations/logging.md).
            check_ports_free([(self.host, self.requested_port)])
        except OSError as exc:
            log.error(
                "5.x gRPC endpoint off: grpcServerPort %s is in use (%s); set grpcServerPort to a free "
                "port, or 0 to turn the endpoint off",
                self.requested_port, exc.strerror,
            )  # fmt: skip
            return
        if self.h2 is not None:
            await self._start_h2(pem is not None)
            return
        try:
            address = f"{self.host}:{self.requested_port}"
            if self.credentials is None:
                self.port = self.server.add_insecure_port(address)
            else:
                self.port = self.server.add_secure_port(address, self.credentials)
        except RuntimeError as exc:
            log.error(
                "5.x gRPC endpoint off: grpcServerPort %s on %s: %s", self.requested_port, self.host, exc
            )
            return
        await self.server.start()
        log.info("5.x gRPC endpoint on %s:%d%s", self.host, self.port, " (TLS)" if self.credentials else "")

    async def _start_h2(self, tls: bool) -> None:
        context = None
        if tls:
            assert self.broker.tls_cert_path and self.broker.tls_key_path
            context = h2door.tls_context(self.broker.tls_cert_path, self.broker.tls_key_path)
        try:
            self.port = await self.h2.start(self.host, self.requested_port, context)
        except OSError as exc:
            log.error(
                "5.x gRPC endpoint off: grpcServerPort %s on %s: %s", self.requested_port, self.host, exc
            )
            return
        log.info("5.x gRPC endpoint on %s:%d%s (nghttp2)", self.host, self.port, " (TLS)" if tls else "")

    async def close(self) -> None:
        self.consumer.renewals.close()
        if self.h2 is not None:
            await self.h2.close()
        else:
            await self.server.stop(grace=1.0)

    async def heartbeat(self, request: spb.HeartbeatRequest, context: Any) -> spb.HeartbeatResponse:
        """The client's liveness: registered again from its settings (none yet: nothing to do)."""
        del request
        self.clients.heartbeat(client_id(context))
        return spb.HeartbeatResponse(status=self.kit.status("OK"))

    async def notify_client_termination(
        self, request: spb.NotifyClientTerminationRequest, context: Any
    ) -> spb.NotifyClientTerminationResponse:
        """A client shutting down: forget its settings (Node's producer fails its shutdown on an
        error answer)."""
        del request
        self.telemetry.forget(client_id(context))
        self.clients.terminate(client_id(context))
        return spb.NotifyClientTerminationResponse(status=self.kit.status("OK"))

    async def not_served(self, request: Any, context: Any) -> None:
        del request
        await self.kit.not_served(context)

    def _servicer(self) -> object:
        """A `MessagingServiceServicer` whose RPCs call the serving modules; an RPC of the service
        named nowhere here answers UNIMPLEMENTED through `not_served`."""
        served = {
            "QueryRoute": self.route.query_route,
            "Heartbeat": self.heartbeat,
            "Telemetry": self.telemetry.telemetry,
            "SendMessage": self.producer.send_message,
            "EndTransaction": self.producer.end_transaction,
            "QueryAssignment": self.consumer.query_assignment,
            "ReceiveMessage": self.consumer.receive_message,
            "AckMessage": self.consumer.ack_message,
            "ChangeInvisibleDuration": self.consumer.change_invisible_duration,
            "ForwardMessageToDeadLetterQueue": self.consumer.forward_message_to_dead_letter_queue,
            "NotifyClientTermination": self.notify_client_termination,
        }
        base = self.kit.stubs.MessagingServiceServicer
        rpcs = [name for name in vars(base) if name[:1].isupper()]
        guard = self.guard.wrap
        methods = {name: staticmethod(guard(name, served.get(name, self.not_served))) for name in rpcs}
        return type("Servicer", (base,), methods)()


def _aio_handler(kit: ProtoKit, servicer: object) -> Any:
    """The service's RPCs for grpc.aio, as the generated `add_MessagingServiceServicer_to_server`
    registers them but for the answers' serializer: `h2door.serialize`, which writes the bytes a
    handler made itself (ReceiveMessage's messages) as they are."""
    grpc, spb = kit.grpc, kit.spb
    handlers = {}
    for rpc in spb.DESCRIPTOR.services_by_name["MessagingService"].methods:
        if rpc.client_streaming:
            make = grpc.stream_stream_rpc_method_handler
        elif rpc.server_streaming:
            make = grpc.unary_stream_rpc_method_handler
        else:
            make = grpc.unary_unary_rpc_method_handler
        handler = getattr(servicer, rpc.name)
        if rpc.server_streaming and not rpc.client_streaming:
            handler = _answer_by_answer(handler)
        handlers[rpc.name] = make(
            handler,
            request_deserializer=getattr(spb, rpc.input_type.name).FromString,
            response_serializer=h2door.serialize,
        )
    return grpc.method_handlers_generic_handler(h2door.SERVICE, handlers)


def _answer_by_answer(handler: Any) -> Any:
    """A server-streaming handler for grpc.aio, which writes one answer per step: a batch the
    handler yields (a list) is handed out answer after answer, each taken out of the list once
    grpc asks for the next (it was written), so what is left in it when the stream breaks is not
    known written (see `ConsumerService.receive_message`)."""

    async def streamed(request: Any, context: Any) -> AsyncIterator[Any]:
        answers = handler(request, context)
        try:
            async for answer in answers:
                if not isinstance(answer, list):
                    yield answer
                    continue
                while answer:
                    yield answer[0]
                    del answer[0]
        finally:
            await answers.aclose()

    return streamed


def _tls_pem(broker: BrokerConfig) -> tuple[bytes, bytes] | None:
    """The certificate chain and key of `tlsCertPath` and `tlsKeyPath` (PEM), or None for
    plaintext. A file that cannot be read, or is not PEM, stops the broker with the key and the
    path named."""
    if not broker.tls_cert_path or not broker.tls_key_path:
        return None
    pem: dict[str, bytes] = {}
    for key, path, marker, what in (
        ("tlsCertPath", broker.tls_cert_path, b"-----BEGIN CERTIFICATE-----", "certificate"),
        ("tlsKeyPath", broker.tls_key_path, b"PRIVATE KEY-----", "private key"),
    ):
        try:
            pem[key] = Path(path).expanduser().read_bytes()
        except OSError as exc:
            raise ConfigError(f"{key} {path}: cannot read: {exc.strerror or exc}") from exc
        if marker not in pem[key]:
            raise ConfigError(f"{key} {path}: not a PEM {what}")
    return pem["tlsCertPath"], pem["tlsKeyPath"]
