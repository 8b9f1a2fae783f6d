"""Type stub of the compiled SendMessageRequest field reader (`_send_fields.pyx`)."""

from rocketlite.protocol.proto.send_fields import SendFields

def send_fields(data: bytes) -> SendFields | None: ...
