"""Stubs of the compiled send path (`_send.pyx`); the reference is
`protocol.message.send_properties`."""

from rocketlite.protocol.message import SendProperties

def send_properties(text: str, cluster: str) -> SendProperties: ...
