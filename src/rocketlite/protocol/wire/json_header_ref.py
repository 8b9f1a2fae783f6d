"""The JSON remoting header codec, written for clarity: the reference implementation.

The definitions that the compiled twin (`_native/_wire.pyx`) is pinned to by
`tests/protocol/test_native_wire.py`; `protocol.wire.speedups` picks these when `ROCKETLITE_NATIVE=0`
or the twin is not built.
The format itself is described in `command.py`.
"""

from __future__ import annotations

from rocketlite.protocol.errors import ProtocolError
from rocketlite.protocol.wire import fastjson
from rocketlite.protocol.wire.command import RemotingCommand, command_from_json, ext_value_text

__all__ = ["decode_json_header", "encode_json_header"]


def encode_json_header(cmd: RemotingCommand) -> bytes:
    """Keys in fastjson's bean order: code, extFields, flag, language, opaque, remark,
    serializeTypeCurrentRPC, version; extFields sorted, every value a string; part by part."""
    quote = fastjson.quote_reference
    parts = ['{"code":', str(int(cmd.code))]
    if cmd.ext_fields:
        members = []
        for key in sorted(cmd.ext_fields):
            text = ext_value_text(cmd.ext_fields[key])
            if text is not None:
                members.append(f"{quote(key)}:{quote(text)}")
        parts += [',"extFields":{', ",".join(members), "}"]
    parts += [',"flag":', str(int(cmd.flag)), ',"language":', quote(cmd.language)]
    parts += [',"opaque":', str(int(cmd.opaque))]
    if cmd.remark is not None:
        parts += [',"remark":', quote(cmd.remark)]
    parts += [',"serializeTypeCurrentRPC":"JSON","version":', str(int(cmd.version)), "}"]
    return "".join(parts).encode("utf-8")


def decode_json_header(data: bytes | bytearray | memoryview) -> RemotingCommand:
    """Parse a JSON header leniently (see `command.py`); ProtocolError when it cannot be a command."""
    try:
        text = bytes(data).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ProtocolError("remoting JSON header is not UTF-8") from exc
    # stdlib parser, then fastjson leniency; ProtocolError if neither takes it
    return command_from_json(fastjson.loads(text))
