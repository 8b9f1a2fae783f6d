"""Header bytes in a command's own serialize type: JSON or ROCKETMQ binary, each through the codec
`speedups` chose (the formats are described in `command.py`). The frame layer's one-frame decoder
and the tests call these; the stream decoder and `encode_command` pick per frame themselves."""

from __future__ import annotations

from rocketlite.protocol.codes import SerializeType
from rocketlite.protocol.errors import ProtocolError
from rocketlite.protocol.wire.command import RemotingCommand
from rocketlite.protocol.wire.speedups import (
    decode_json_header,
    decode_rocketmq_header,
    encode_json_header,
    encode_rocketmq_header,
)

__all__ = ["decode_header", "encode_header"]


def encode_header(cmd: RemotingCommand) -> bytes:
    """Header bytes in the command's own serialize type."""
    if cmd.serialize_type == SerializeType.ROCKETMQ:
        return encode_rocketmq_header(cmd)
    return encode_json_header(cmd)


def decode_header(data: bytes | memoryview, serialize_type: int) -> RemotingCommand:
    """A command (body None) from header bytes of the given serialize type."""
    if serialize_type == SerializeType.JSON:
        return decode_json_header(data)
    if serialize_type == SerializeType.ROCKETMQ:
        return decode_rocketmq_header(data)
    raise ProtocolError(f"unknown serialize type {serialize_type}")
