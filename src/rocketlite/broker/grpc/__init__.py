"""The RocketMQ 5.x gRPC endpoint (`apache.rocketmq.v2.MessagingService`), served from the broker
process as RocketMQ 5's "local proxy" mode: each RPC becomes the broker's own request, in process.

One module per part of the service, all sharing one `ProtoKit` (the generated modules and the
status builder):

- `endpoint.py`: the `grpc.aio` server on the broker's loop and the servicer that routes each RPC;
- `route.py`: QueryRoute;
- `telemetry.py`: the Telemetry stream (settings handshake) and the clients' settings;
- `send.py`: SendMessage (and EndTransaction);
- `consume.py`: QueryAssignment, ReceiveMessage, AckMessage, ChangeInvisibleDuration and
  ForwardMessageToDeadLetterQueue, over the broker's POP service.

grpcio is an optional extra: without it (or without the generated stubs) the broker runs without
this endpoint and says why (`unavailable_reason`).
"""

from rocketlite.broker.grpc.endpoint import GrpcEndpoint, unavailable_reason

__all__ = ["GrpcEndpoint", "unavailable_reason"]
