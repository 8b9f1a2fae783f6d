"""What every RPC handler of the gRPC endpoint shares: the generated modules (imported only when the
endpoint is on, since grpcio is optional), the `Status` builder, and the caller's metadata."""

from __future__ import annotations

from typing import Any

from rocketlite.protocol.errors import RocketliteError
from rocketlite.protocol.message import HostAddress

MAX_PEERS = 4096  # client addresses whose parsed `GrpcPeer` is kept


class RefusedError(RocketliteError):
    """A request answered with a non-OK status before (or instead of) the broker's own handling:
    `status` is its `apache.rocketmq.v2.Code` name, the message says why."""

    def __init__(self, status: str, message: str) -> None:
        super().__init__(message)
        self.status = status


class ProtoKit:
    """The `apache.rocketmq.v2` stubs and grpc, loaded once by the endpoint."""

    def __init__(self) -> None:
        import grpc  # noqa: PLC0415  (optional extra: imported only when the endpoint is on)
        from google.protobuf import duration_pb2, timestamp_pb2  # noqa: PLC0415

        from rocketlite.protocol.proto.v2 import (  # noqa: PLC0415
            definition_pb2,
            service_pb2,
            service_pb2_grpc,
        )

        self.grpc: Any = grpc
        self.duration: Any = duration_pb2.Duration
        self.timestamp: Any = timestamp_pb2.Timestamp
        self.pb: Any = definition_pb2
        self.spb: Any = service_pb2
        self.stubs: Any = service_pb2_grpc  # generated without types
        self.codes: dict[str, int] = dict(definition_pb2.Code.items())
        self._peers: dict[str, GrpcPeer] = {}

    def status(self, code: str, message: str = "") -> Any:
        """An `apache.rocketmq.v2.Status` by the `Code` name (`"OK"`, `"TOPIC_NOT_FOUND"`...)."""
        return self.pb.Status(code=self.codes[code], message=message)

    def peer(self, peer: str) -> GrpcPeer:
        """The `GrpcPeer` of a grpc peer string, kept per peer as a connection would be (its
        address is parsed once, not per RPC); forgotten all at once past `MAX_PEERS`."""
        found = self._peers.get(peer)
        if found is None:
            if len(self._peers) >= MAX_PEERS:
                self._peers.clear()
            found = self._peers[peer] = GrpcPeer(peer)
        return found

    async def not_served(self, context: Any) -> None:
        """An RPC not served yet: gRPC UNIMPLEMENTED, saying so (no traceback in the log)."""
        await context.abort(self.grpc.StatusCode.UNIMPLEMENTED, "not served by rocketlite yet")


def metadata(context: Any) -> dict[str, str]:
    """The call's text metadata (`x-mq-client-id`, `x-mq-namespace`, `authorization`...)."""
    return {key: value for key, value in (context.invocation_metadata() or ()) if isinstance(value, str)}


def client_id(context: Any) -> str:
    return metadata(context).get("x-mq-client-id", "")


class GrpcPeer:
    """What the broker's remoting processors read of a connection (its address and the born host),
    for a request that came over gRPC."""

    def __init__(self, peer: str) -> None:
        self.remote_address = peer
        self.attrs: dict[str, object] = {"born_host": born_host(peer)}


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
