"""Type stubs of the compiled delivery writer (`_delivery.pyx`)."""

from rocketlite.protocol.proto.delivery import Delivered, PopStamp

def delivery_response(record: bytes, stamp: PopStamp, now_ms: int) -> Delivered: ...
