"""The JSON remoting header codec, optimized in pure Python: the fast implementation.

`encode_json_header` and `decode_json_header` give byte for byte and field for field what their
namesakes in `json_header_py` (the definitions) give, pinned by `tests/protocol/test_fastpath.py`;
`protocol.speedups` chooses between them. The format itself is described in `command.py`.
Encoding builds the header with one f-string, a cached %-template per ext key order (when keys and
values need no escaping) and memoised quoted forms; decoding takes what every client sends (strict
JSON, string ext values, int numbers) as parsed. Anything else is left to the general path
(`json_header_py` for encoding, `command.command_from_json` for decoding), errors included.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Final

from rocketlite.protocol import fastjson, json_header_py
from rocketlite.protocol.codes import LanguageCode
from rocketlite.protocol.command import (
    DEFAULT_LANGUAGE,
    RemotingCommand,
    command_from_json,
    ext_value_text,
)
from rocketlite.protocol.errors import ProtocolError

__all__ = ["decode_json_header", "encode_json_header"]

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

    Byte for byte `json_header_py.encode_json_header` (the tests pin it), built with one f-string, a
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
        return json_header_py.encode_json_header(cmd)
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


def decode_json_header(data: bytes | bytearray | memoryview) -> RemotingCommand:
    """Parse a JSON header leniently (see `command.py`); ProtocolError when it cannot be a command.

    What every client sends (strict JSON, string ext values, int numbers, a language name) is
    taken as parsed; anything else goes through `command_from_json`, as in the definition
    (`json_header_py.decode_json_header`).
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
                return command_from_json(fastjson.loads_lenient(text))
            except (TypeError, ValueError, RecursionError) as exc:  # ProtocolError is not among them
                raise ProtocolError(f"remoting JSON header cannot be read: {exc}") from exc
    if type(obj) is not dict:
        return command_from_json(obj)
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
    return command_from_json(obj)
