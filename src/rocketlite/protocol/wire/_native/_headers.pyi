"""Stub of the compiled request-header decoders (`_headers.pyx`); the references are the
classes' generated decoders (`custom_header.decoder_for`)."""

from collections.abc import Mapping

from rocketlite.protocol.wire.headers import PullMessageRequestHeader, SendMessageRequestHeader

def decode_send_header_v2(ext: Mapping[str, str] | None) -> SendMessageRequestHeader: ...
def decode_pull_header(ext: Mapping[str, str] | None) -> PullMessageRequestHeader: ...
