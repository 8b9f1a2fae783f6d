"""`RemotingCommand`, the one message type of the 4.x remoting protocol, and its two header encodings.

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

import re
import struct
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from rocketlite.protocol import fastjson
from rocketlite.protocol.codes import CommandFlag, LanguageCode, SerializeType
from rocketlite.protocol.errors import ProtocolError

DEFAULT_VERSION: Final = 409  # MQVersion.V4_9_8.ordinal(); clients store the broker's reply version
DEFAULT_LANGUAGE: Final = "JAVA"
_RESPONSE_FLAG: Final = int(CommandFlag.RESPONSE)

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
        return bool(self.flag & CommandFlag.RESPONSE)

    @property
    def is_oneway(self) -> bool:
        return bool(self.flag & CommandFlag.ONEWAY)

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


_KEY_MEMBERS: dict[str, str] = {}  # ext key -> its quoted form and colon, for the keys we keep writing
_KEY_MEMBERS_MAX: Final = 4096
_REMARKS: dict[str, str] = {}  # remark -> `,"remark":"..."`: responses repeat a few remarks ("FOUND")
_REMARKS_MAX: Final = 256
_LANGUAGES: Final = {name: fastjson.quote(name) for name in LanguageCode.__members__}
_STR_ONLY: Final = frozenset({str})
_scan_strict: Final = fastjson._scan_strict
_EXT_TEMPLATES: dict[tuple[str, ...], str] = {}  # ext key order -> %-template of the sorted members
_EXT_TEMPLATES_MAX: Final = 1024
_TEMPLATE_KEY: Final = re.compile(r"[!#$&'*-\[\]-~]+")  # printable ASCII but for space " % ( ) \\


def _remark_member(remark: str) -> str:
    text = ',"remark":' + fastjson.quote_plain(remark)
    if len(_REMARKS) < _REMARKS_MAX and type(remark) is str:
        _REMARKS[remark] = text
    return text


def _key_member(key: str) -> str:
    text = fastjson.quote_plain(key) + ":"
    if len(_KEY_MEMBERS) < _KEY_MEMBERS_MAX:
        _KEY_MEMBERS[key] = text
    return text


def encode_json_header(cmd: RemotingCommand) -> bytes:
    """Keys in fastjson's bean order: code, extFields, flag, language, opaque, remark,
    serializeTypeCurrentRPC, version; extFields sorted, every value a string.

    Byte for byte `encode_json_header_reference` (the tests pin it), built with one f-string, a
    cached %-template per ext key order (when keys and values need no escaping) and memoised
    quoted forms; a command the fast path cannot take (a number field holding text, ...) is left
    to the reference, errors included.
    """
    try:
        ext = cmd.ext_fields
        ext_text = _encode_ext(ext) if ext else ""
        language = _LANGUAGES.get(cmd.language) or fastjson.quote_plain(cmd.language)
        remark = cmd.remark
        remark_text = "" if remark is None else _REMARKS.get(remark) or _remark_member(remark)
        text = (
            f'{{"code":{cmd.code:d}{ext_text},"flag":{cmd.flag:d},"language":{language},'
            f'"opaque":{cmd.opaque:d}{remark_text},"serializeTypeCurrentRPC":"JSON","version":{cmd.version:d}}}'
        )
    except (TypeError, ValueError, AttributeError):  # whatever the reference does with such a command
        return encode_json_header_reference(cmd)
    return text.encode("utf-8")


def _ext_template(keys: tuple[str, ...]) -> str | None:
    """`,"extFields":{"k1":"%(k1)s",...}` for these keys (sorted), or None when a key does not fit
    a %-template (or is not plain text); cached per key order, the cache bounded."""
    template = _EXT_TEMPLATES.get(keys)
    if template is not None:
        return template
    if not all(type(k) is str and _TEMPLATE_KEY.fullmatch(k) for k in keys) or len(set(keys)) != len(keys):
        return None
    template = ',"extFields":{' + ",".join(f'"{k}":"%({k})s"' for k in sorted(keys)) + "}"
    if len(_EXT_TEMPLATES) < _EXT_TEMPLATES_MAX:
        _EXT_TEMPLATES[keys] = template
    return template


def _encode_ext(ext: Mapping[str, str]) -> str:
    """`,"extFields":{...}` of a non-empty ext, members sorted by key."""
    template = _EXT_TEMPLATES.get(tuple(ext)) or _ext_template(tuple(ext))
    if template is not None and set(map(type, ext.values())) <= _STR_ONLY:
        text = "".join(ext.values())
        # One scan over all values: printable ASCII without quote or backslash needs no escaping.
        if text.isascii() and text.isprintable() and '"' not in text and "\\" not in text:
            return template % ext
    keys = sorted(ext)
    quote = fastjson.quote_plain
    members = []
    for key in keys:
        value: str | None = ext[key]
        if type(value) is not str:
            value = ext_value_text(value)
            if value is None:
                continue
        member = _KEY_MEMBERS.get(key)
        members.append((member or _key_member(key)) + quote(value))
    return ',"extFields":{' + ",".join(members) + "}"


def encode_json_header_reference(cmd: RemotingCommand) -> bytes:
    """The definition of the JSON header encoding, part by part (`encode_json_header` is pinned to it)."""
    quote = fastjson.quote
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


def decode_json_header(data: bytes | bytearray | memoryview) -> RemotingCommand:
    """Parse a JSON header leniently (see module docstring); ProtocolError when it cannot be a command.

    What every client sends (strict JSON, string ext values, int numbers, a language name) is
    taken as parsed; anything else goes through `decode_json_header_reference`, the definition.
    """
    try:
        text = str(data, "utf-8")
    except UnicodeDecodeError as exc:
        raise ProtocolError("remoting JSON header is not UTF-8") from exc
    try:
        obj, end = _scan_strict(text, 0)  # fastjson.loads_strict's common case, inlined
    except (StopIteration, ValueError, RecursionError):
        end = -1
    if end != len(text):
        try:
            obj = fastjson.loads_strict(text)
        except (ValueError, RecursionError):
            try:
                return _decode_json_object(fastjson.loads_lenient(text))
            except (TypeError, ValueError, RecursionError) as exc:  # ProtocolError is not among them
                raise ProtocolError(f"remoting JSON header cannot be read: {exc}") from exc
    if type(obj) is not dict:
        return _decode_json_object(obj)
    raw_ext = obj.get("extFields")
    code = obj.get("code")
    opaque = obj.get("opaque")
    version = obj.get("version", 0)
    flag = obj.get("flag", 0)
    language = obj.get("language", DEFAULT_LANGUAGE)
    remark = obj.get("remark")
    if (
        type(code) is int
        and type(opaque) is int
        and type(version) is int
        and type(flag) is int
        and type(language) is str
        and (remark is None or type(remark) is str)
    ):
        if raw_ext is None:
            return RemotingCommand(code, language, version, opaque, flag, remark, {})
        if type(raw_ext) is dict:
            # Strict JSON: the keys are text already, and the parser makes no str subclasses, so
            # the values are all text exactly when they join.
            try:
                "".join(raw_ext.values())
            except TypeError:
                pass
            else:
                return RemotingCommand(code, language, version, opaque, flag, remark, raw_ext)
    return _decode_json_object(obj)


def decode_json_header_reference(data: bytes | bytearray | memoryview) -> RemotingCommand:
    """The definition of the JSON header decoding (`decode_json_header` is pinned to it)."""
    try:
        text = bytes(data).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ProtocolError("remoting JSON header is not UTF-8") from exc
    # stdlib parser, then fastjson leniency; ProtocolError if neither takes it
    return _decode_json_object(fastjson.loads(text))


def _decode_json_object(obj: Any) -> RemotingCommand:
    """A command from a parsed JSON header, every field checked and normalised."""
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
