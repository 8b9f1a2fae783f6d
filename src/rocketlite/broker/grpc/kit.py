"""What every RPC handler of the gRPC endpoint shares: the generated modules (imported only when the
endpoint is on, since grpcio is optional), the `Status` builder, the caller's metadata, and the
caller as the broker's request cores see it (`GrpcPeer`, a `remoting.peer.Peer`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from rocketlite.protocol.errors import RocketliteError
from rocketlite.protocol.message import HostAddress
from rocketlite.remoting.peer import Push

if TYPE_CHECKING:
    from rocketlite.protocol.proto.v2 import definition_pb2

MAX_PEERS = 4096  # client addresses whose parsed `GrpcPeer` is kept

PushTo = Callable[[str, Push], None]
"""Where a push to a 5.x client goes, by its client id: its Telemetry stream, if it has one."""


def _nowhere(client_id: str, request: Push) -> None:
    del client_id, request


class RefusedError(RocketliteError):
    """A request answered with a non-OK status before (or instead of) the broker's own handling:
    `status` is its `apache.rocketmq.v2.Code` name, the message says why."""

    def __init__(self, status: str, message: str) -> None:
        super().__init__(message)
        self.status = status


class ProtoKit:
    """The `apache.rocketmq.v2` stubs and grpc, loaded once by the endpoint. `push_to` carries a
    core's push to a 5.x client (`GrpcPeer.push`); without it pushes go nowhere."""

    def __init__(self, push_to: PushTo = _nowhere) -> None:
        import grpc  # noqa: PLC0415  (optional extra: imported only when the endpoint is on)
        from google.protobuf import duration_pb2, timestamp_pb2  # noqa: PLC0415

        from rocketlite.protocol.proto.v2 import (  # noqa: PLC0415
            definition_pb2,
            service_pb2,
            service_pb2_grpc,
        )

        self.grpc: Any = grpc  # untyped (no stubs installed)
        self.duration = duration_pb2.Duration
        self.timestamp = timestamp_pb2.Timestamp
        self.pb = definition_pb2
        self.spb = service_pb2
        self.stubs: Any = service_pb2_grpc  # generated without types
        self.push_to = push_to
        self._peers: dict[tuple[str, str], GrpcPeer] = {}

    def status(self, code: str, message: str = "") -> definition_pb2.Status:
        """An `apache.rocketmq.v2.Status` by the `Code` name (`"OK"`, `"TOPIC_NOT_FOUND"`...)."""
        return self.pb.Status(code=self.pb.Code.Value(code), message=message)

    def peer(self, context: Any) -> GrpcPeer:
        """The caller of an RPC as a `GrpcPeer`, kept per address and client id as a connection
        would be (its address is parsed once, not per RPC); forgotten all at once past
        `MAX_PEERS`."""
        key = (context.peer(), client_id(context))
        found = self._peers.get(key)
        if found is None:
            if len(self._peers) >= MAX_PEERS:
                self._peers.clear()
            found = self._peers[key] = GrpcPeer(key[0], key[1], self.push_to)
        return found

    async def not_served(self, context: Any) -> None:
        """An RPC not served yet: gRPC UNIMPLEMENTED, saying so (no traceback in the log)."""
        await context.abort(self.grpc.StatusCode.UNIMPLEMENTED, "not served by rocketlite yet")


def metadata(context: Any) -> dict[str, str]:
    """The call's text metadata (`x-mq-client-id`, `x-mq-namespace`, `authorization`...)."""
    return {key: value for key, value in (context.invocation_metadata() or ()) if isinstance(value, str)}


def client_id(context: Any) -> str:
    """The call's `x-mq-client-id` (the last one, as `metadata` keeps it), without building the dict."""
    for key, value in reversed(context.invocation_metadata() or ()):
        if key == "x-mq-client-id" and isinstance(value, str):
            return value
    return ""


class GrpcPeer:
    """A 5.x client as the broker's request cores see it (`remoting.peer.Peer`): the address of
    the RPC's peer, the client id of its metadata, the born host parsed once, and pushes, which go
    out on the client's Telemetry stream while it has one. An RPC's client is there while its call
    runs, so it is never `closed`."""

    closed = False

    def __init__(self, peer: str, client_id: str = "", push_to: PushTo = _nowhere) -> None:
        self.remote_address = peer_address(peer)
        self.client_id = client_id
        self.attrs: dict[str, Any] = {"born_host": born_host(peer)}
        self._push_to = push_to

    def push(self, request: Push) -> None:
        if self.client_id:
            self._push_to(self.client_id, request)


def peer_address(peer: str) -> str:
    """`host:port` of a grpc peer string ("ipv4:127.0.0.1:5555", "ipv6:[::1]:5555")."""
    kind, sep, rest = peer.partition(":")
    return rest if sep and kind in ("ipv4", "ipv6") else peer


def born_host(peer: str) -> HostAddress:
    """The client's address from a grpc peer string, as a born host."""
    host, _, port = peer_address(peer).rpartition(":")
    try:
        return HostAddress.of(host.strip("[]"), int(port))
    except ValueError:
        return HostAddress(b"\x7f\x00\x00\x01", 0)
