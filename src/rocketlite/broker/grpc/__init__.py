"""The RocketMQ 5.x gRPC endpoint (`apache.rocketmq.v2.MessagingService`), served from the broker
process as RocketMQ 5's "local proxy" mode: each RPC is a thin adapter over the broker's typed
request cores (send, POP, END_TRANSACTION), in process, as the remoting handlers are.

One module per part of the service, all sharing one `ProtoKit` (grpc, the status builder, the
caller as a `remoting.peer.Peer`):

- `endpoint.py`: the `grpc.aio` server on the broker's loop and the servicer that routes each RPC;
- `route.py`: QueryRoute;
- `telemetry.py`: the Telemetry stream (settings handshake), the clients' settings, and pushes to
  the client (transaction checks);
- `send.py`: SendMessage (and EndTransaction);
- `send_lane.py`: on the nghttp2 door, the common SendMessage calls of one read in one append;
- `consume.py`: QueryAssignment, ReceiveMessage, AckMessage, ChangeInvisibleDuration and
  ForwardMessageToDeadLetterQueue, over the broker's POP cores;
- `convert.py`: every 5.x `Message` built from a stored record (the builder and a delivery's
  compiled bytes writer are sans-IO, in `protocol.proto`);
- `clients.py`: 5.x clients in the broker's client manager, and the renewal of their receipts.

grpcio is an optional extra: without it (or without the generated stubs) the broker runs without
this endpoint and says why (`unavailable_reason`). The modules that serve RPCs import the generated
stubs (`protocol/proto/v2`), so the broker imports `endpoint` only once `unavailable_reason()` is
None; this package, `kit`, `auth`, `names` and `clients` load without them.
"""

from __future__ import annotations

from rocketlite.protocol.proto import available

__all__ = ["unavailable_reason"]


def unavailable_reason() -> str | None:
    """None when the endpoint can be served; else why not (grpcio or the stubs are missing)."""
    return available()
