"""The 5.x endpoint's second front door: `apache.rocketmq.v2.MessagingService` served by the
compiled HTTP/2 core (`remoting.h2`, libnghttp2) on the broker's own event loop, chosen with
`grpcServerImpl=nghttp2`. The servicer is the one grpc.aio serves (the same guarded handlers, the
same `(request, context)` calls); this module only maps each RPC to its path, its shape and its
protobuf classes (the upb-backed `protobuf` runtime parses and serializes), and builds the TLS
context (asyncio's ssl, ALPN h2) from `tlsCertPath`/`tlsKeyPath`.

`unavailable_reason()` says why the core cannot serve (the extension was not built: no libnghttp2
headers at install time); the endpoint then serves grpc.aio and logs that reason once.
"""

from __future__ import annotations

import ssl
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rocketlite.remoting.h2.server import H2GrpcServer

SERVICE = "apache.rocketmq.v2.MessagingService"


def unavailable_reason() -> str | None:
    try:
        import rocketlite.remoting.h2.server  # noqa: F401, PLC0415  (needs the compiled core)
    except ImportError as exc:
        return f"the compiled HTTP/2 core is not built ({exc}; run `make nghttp2 install`)"
    return None


def h2_server(
    servicer: object,
    spb: Any,
    *,
    max_message: int,
    idle: float | None = None,
    groups: dict[str, Any] | None = None,
) -> H2GrpcServer:
    """An `H2GrpcServer` serving every RPC of the service from `servicer`'s methods; a connection
    with no call for `idle` seconds is ended. `groups`: by RPC name, a unary RPC's group handler
    (`Method.group`: the calls of one read served together, `send_lane.py`)."""
    from rocketlite.remoting.h2.server import H2GrpcServer, Method, Shape  # noqa: PLC0415

    service = spb.DESCRIPTOR.services_by_name["MessagingService"]
    methods: dict[str, Method] = {}
    for rpc in service.methods:
        request = getattr(spb, rpc.input_type.name)
        shape: Shape
        if rpc.client_streaming:
            shape = "bidi"
        elif rpc.server_streaming:
            shape = "server_stream"
        else:
            shape = "unary"
        group = (groups or {}).get(rpc.name) if shape == "unary" else None
        methods[f"/{SERVICE}/{rpc.name}"] = Method(
            shape, request.FromString, serialize, getattr(servicer, rpc.name), group
        )
    return H2GrpcServer(methods, max_message=max_message, idle=idle)


def serialize(message: Any) -> bytes:
    """An answer's bytes: a protobuf message serialized, or bytes a handler wrote itself (a
    ReceiveMessage `message` answer, `convert.delivery_response`) as they are."""
    if isinstance(message, bytes):
        return message
    return bytes(message.SerializeToString())


def tls_context(cert_path: str, key_path: str) -> ssl.SSLContext:
    """A server context for the endpoint's certificate and key (checked by the endpoint already)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2  # HTTP/2 requires TLS 1.2 at least
    context.load_cert_chain(cert_path, key_path)
    context.set_alpn_protocols(["h2"])
    return context
