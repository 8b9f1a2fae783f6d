"""Type stubs of the compiled delivery writers (`_delivery.pyx`)."""

from collections.abc import Iterable

from rocketlite.protocol.proto.acks import HandleFields
from rocketlite.protocol.proto.delivery import Delivered, PopStamp

def delivery_response(record: bytes, stamp: PopStamp, now_ms: int) -> Delivered: ...
def ack_response(status: bytes, entries: Iterable[tuple[str, str, bytes]]) -> bytes: ...
def handle_fields(texts: Iterable[str]) -> list[HandleFields | None]: ...
