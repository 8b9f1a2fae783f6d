"""`RemotingCommand`, the one message type of the 4.x remoting protocol, and its two header encodings.

This module holds the command, the ROCKETMQ binary header codec and what the JSON header codecs
share (`ext_value_text`, `command_from_json`); the JSON header codec itself is in
`json_header_ref` (the reference; its compiled twin is chosen by `speedups`), and `header_codec`
picks the codec by serialize type.

A command is `code, language, version, opaque, flag, remark, extFields` plus an opaque body. The
header travels in one of two forms, chosen per frame by the serialize-type byte (see `frame.py`):

JSON (type 0, what every real client sends): fastjson's bean output, keys in alphabetical order,
nulls left out, and `"serializeTypeCurrentRPC":"JSON"` because Java writes every bean property::

    {"code":105,"extFields":{"topic":"TopicTest"},"flag":0,"language":"JAVA","opaque":1,
     "serializeTypeCurrentRPC":"JSON","version":409}

Reading is tolerant, because clients are: the C++ client sends numbers and booleans inside
`extFields` (they become `"0"` / `"true"`, as fastjson does), `"remark":""`, and the Go client its own
key order. Unknown keys are ignored; `code` and `opaque` are required (every client sends both, and a
reply is impossible without the opaque). Writing always puts **strings** in `extFields`: the C++
client ignores anything else.

ROCKETMQ binary (type 1, opt-in on Java; `RocketMQSerializable`), big-endian::

    off  size  field
      0     2  code       (short)
      2     1  language   (LanguageCode byte)
      3     2  version    (short)
      5     4  opaque
      9     4  flag
     13     4  remarkLen  0 = null/empty
     17     r  remark     UTF-8
   17+r     4  extLen     byte length of the entries that follow
   21+r     e  entries    short keyLen, key, int valLen, value (UTF-8)

A zero-length string reads back as null, so an empty remark or ext value does not survive a binary
round trip (the ext entry disappears). Replies use the request's serialize type.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from rocketlite.protocol.codes import CommandFlag, LanguageCode, SerializeType
from rocketlite.protocol.errors import ProtocolError
from rocketlite.protocol.wire import fastjson

DEFAULT_VERSION: Final = 409  # MQVersion.V4_9_8.ordinal(); clients store the broker's reply version
DEFAULT_LANGUAGE: Final = "JAVA"
_RESPONSE_FLAG: Final = int(CommandFlag.RESPONSE)
_ONEWAY_FLAG: Final = int(CommandFlag.ONEWAY)  # ints: an IntFlag operation costs ~0.5 µs

# ROCKETMQ binary header: fixed part up to and including remarkLen.
BINARY_FIXED = struct.Struct(
    ">"
    "h"  # code
    "b"  # language code
    "h"  # version
    "i"  # opaque
    "i"  # flag
    "i"  # remark length
)
EXT_LENGTH = struct.Struct(">i")  # total bytes of the ext entries
EXT_KEY_LENGTH = struct.Struct(">h")
EXT_VALUE_LENGTH = struct.Struct(">i")
BINARY_MIN_HEADER: Final = BINARY_FIXED.size + EXT_LENGTH.size
assert BINARY_FIXED.size == 17 and BINARY_MIN_HEADER == 21


@dataclass(slots=True, repr=False)
class RemotingCommand:
    """One request or response. `flag` bit 0 = response, bit 1 = one-way (see `CommandFlag`)."""

    code: int
    language: str = DEFAULT_LANGUAGE
    version: int = DEFAULT_VERSION
    opaque: int = 0
    flag: int = 0
    remark: str | None = None
    ext_fields: dict[str, str] = field(default_factory=dict)
    body: bytes | None = None
    serialize_type: SerializeType = SerializeType.JSON

    @property
    def is_response(self) -> bool:
        return bool(self.flag & _RESPONSE_FLAG)

    @property
    def is_oneway(self) -> bool:
        return bool(self.flag & _ONEWAY_FLAG)

    def __repr__(self) -> str:
        body = "None" if self.body is None else f"<{len(self.body)} bytes>"
        return (
            f"RemotingCommand(code={self.code}, opaque={self.opaque}, flag={self.flag}, "
            f"language={self.language!r}, version={self.version}, remark={self.remark!r}, "
            f"ext_fields={self.ext_fields!r}, body={body}, serialize_type={self.serialize_type.name})"
        )


def make_request(
    code: int,
    ext: Mapping[str, str] | None = None,
    body: bytes | None = None,
    opaque: int = 0,
    oneway: bool = False,
    *,
    remark: str | None = None,
    version: int = DEFAULT_VERSION,
    language: str = DEFAULT_LANGUAGE,
    serialize_type: SerializeType = SerializeType.JSON,
) -> RemotingCommand:
    """A request (flag 0, or 2 when `oneway`); the caller owns the opaque counter."""
    return RemotingCommand(
        code=int(code),
        language=language,
        version=version,
        opaque=opaque,
        flag=int(CommandFlag.ONEWAY) if oneway else 0,
        remark=remark,
        ext_fields=dict(ext) if ext else {},
        body=body,
        serialize_type=serialize_type,
    )


def make_response(
    request: RemotingCommand,
    code: int,
    remark: str | None = None,
    ext: Mapping[str, str] | None = None,
    body: bytes | None = None,
    *,
    version: int = DEFAULT_VERSION,
    language: str = DEFAULT_LANGUAGE,
) -> RemotingCommand:
    """The answer to `request`: same opaque, response flag, request's serialize type (Java's rule)."""
    return RemotingCommand(
        int(code),
        language,
        version,
        request.opaque,
        _RESPONSE_FLAG,
        remark,
        dict(ext) if ext else {},
        body,
        request.serialize_type,
    )


# ------------------------------------------------------------------------------------------------- JSON


def ext_value_text(value: Any) -> str | None:
    """fastjson's view of a JSON value inside `HashMap<String,String>`: numbers/bools as text, null = None."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    return fastjson.dumps(value)


def _int_member(obj: Mapping[str, Any], key: str, default: int | None) -> int:
    value = obj.get(key)
    if value is None:
        if default is None:
            raise ProtocolError(f"remoting header has no {key!r}")
        return default
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str):  # fastjson coerces "105" to an int field
        try:
            return int(value.strip())
        except ValueError:
            pass
    raise ProtocolError(f"remoting header {key!r} is not an integer: {value!r}")


def command_from_json(obj: Any) -> RemotingCommand:
    """A command from a parsed JSON header, every field checked and normalised (the JSON header
    codec, `json_header_ref`, and through it its compiled twin, end here for anything unusual)."""
    if not isinstance(obj, dict):
        raise ProtocolError("remoting JSON header is not an object")
    language = obj.get("language", DEFAULT_LANGUAGE)
    if isinstance(language, int) and not isinstance(language, bool):
        language = LanguageCode(language).name if language in LanguageCode._value2member_map_ else "OTHER"
    elif not isinstance(language, str):
        raise ProtocolError(f"remoting header 'language' is not a string: {language!r}")
    remark = obj.get("remark")
    if remark is not None and not isinstance(remark, str):
        remark = ext_value_text(remark)
    raw_ext = obj.get("extFields")
    ext: dict[str, str] = {}
    if isinstance(raw_ext, dict):
        for key, value in raw_ext.items():
            text_value = ext_value_text(value)
            if text_value is not None:
                ext[str(key)] = text_value
    elif raw_ext is not None:
        raise ProtocolError("remoting header 'extFields' is not an object")
    return RemotingCommand(
        code=_int_member(obj, "code", None),
        language=language,
        version=_int_member(obj, "version", 0),
        opaque=_int_member(obj, "opaque", None),
        flag=_int_member(obj, "flag", 0),
        remark=remark,
        ext_fields=ext,
        serialize_type=SerializeType.JSON,
    )


# ------------------------------------------------------------------------------------- ROCKETMQ binary


def encode_rocketmq_header(cmd: RemotingCommand) -> bytes:
    """`RocketMQSerializable.rocketMQProtocolEncode`; empty remark/values are written with length 0."""
    try:
        language = LanguageCode[cmd.language]
    except KeyError:
        language = LanguageCode.OTHER
    remark = cmd.remark.encode("utf-8") if cmd.remark else b""
    entries: list[bytes] = []
    for key, value in cmd.ext_fields.items():
        text = ext_value_text(value)
        if text is None:
            continue
        key_bytes, value_bytes = key.encode("utf-8"), text.encode("utf-8")
        if len(key_bytes) > 0x7FFF:
            raise ProtocolError(f"ext key too long for a ROCKETMQ header: {len(key_bytes)} bytes")
        entries += [EXT_KEY_LENGTH.pack(len(key_bytes)), key_bytes]
        entries += [EXT_VALUE_LENGTH.pack(len(value_bytes)), value_bytes]
    ext = b"".join(entries)
    try:
        fixed = BINARY_FIXED.pack(cmd.code, language, cmd.version, cmd.opaque, cmd.flag, len(remark))
    except struct.error as exc:
        raise ProtocolError(f"command does not fit a ROCKETMQ header: {exc}") from exc
    return b"".join((fixed, remark, EXT_LENGTH.pack(len(ext)), ext))


def _take(data: memoryview, pos: int, length: int, what: str) -> tuple[str | None, int]:
    """UTF-8 string of `length` bytes at `pos`; zero length reads as None (Java's rule)."""
    end = pos + length
    if length < 0 or end > len(data):
        raise ProtocolError(f"ROCKETMQ header {what} length {length} overruns the header")
    if length == 0:
        return None, end
    try:
        return str(data[pos:end], "utf-8"), end
    except UnicodeDecodeError as exc:
        raise ProtocolError(f"ROCKETMQ header {what} is not UTF-8") from exc


def decode_rocketmq_header(data: bytes | memoryview) -> RemotingCommand:
    """`rocketMQProtocolDecode`, bounds-checked; every overrun or trailing byte is a ProtocolError."""
    view = memoryview(data)
    if len(view) < BINARY_MIN_HEADER:
        raise ProtocolError(f"ROCKETMQ header too short: {len(view)} bytes")
    code, language_code, version, opaque, flag, remark_len = BINARY_FIXED.unpack_from(view, 0)
    remark, pos = _take(view, BINARY_FIXED.size, remark_len, "remark")
    if pos + EXT_LENGTH.size > len(view):
        raise ProtocolError("ROCKETMQ header ends before its ext length")
    (ext_len,) = EXT_LENGTH.unpack_from(view, pos)
    pos += EXT_LENGTH.size
    end = pos + ext_len
    if ext_len < 0 or end != len(view):
        raise ProtocolError(f"ROCKETMQ header ext length {ext_len} does not match the header size")
    ext: dict[str, str] = {}
    while pos < end:
        if pos + EXT_KEY_LENGTH.size > end:
            raise ProtocolError("ROCKETMQ header ext entry torn")
        (key_len,) = EXT_KEY_LENGTH.unpack_from(view, pos)
        key, pos = _take(view[:end], pos + EXT_KEY_LENGTH.size, key_len, "ext key")
        if pos + EXT_VALUE_LENGTH.size > end:
            raise ProtocolError("ROCKETMQ header ext entry torn")
        (value_len,) = EXT_VALUE_LENGTH.unpack_from(view, pos)
        value, pos = _take(view[:end], pos + EXT_VALUE_LENGTH.size, value_len, "ext value")
        if key is not None and value is not None:
            ext[key] = value
    try:
        language = LanguageCode(language_code).name
    except ValueError:
        language = LanguageCode.OTHER.name
    return RemotingCommand(
        code=code,
        language=language,
        version=version,
        opaque=opaque,
        flag=flag,
        remark=remark,
        ext_fields=ext,
        serialize_type=SerializeType.ROCKETMQ,
    )
