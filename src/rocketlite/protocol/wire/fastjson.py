"""JSON the way RocketMQ's Java side writes and reads it (fastjson 1.2.x), for headers and bodies.

Why not plain `json`: fastjson's output is not always JSON, and 4.x clients depend on its quirks.

Writing (`dumps`):

- object keys sorted (fastjson `SortField`), `None` values left out (no `WriteMapNullValue`);
- map keys that are not strings are written raw: ints unquoted (`{0:"127.0.0.1:10911"}`, which the
  Go client's route parser needs), objects as JSON objects (`{{"brokerName":"b","queueId":0,
  "topic":"t"}:{...}}`, TopicStatsTable / ConsumeStats / ResetOffsetBody);
- enums as their names; sets and lists as arrays; bytes are refused (Java would write base64, and no
  RocketMQ body carries raw bytes in JSON);
- control characters escaped (`\\u0001`), other text as-is UTF-8. `standard=True` is the 4.9.4+
  NameServer's `BrowserCompatible | QuoteFieldNames | MapSortField` form: every key quoted and all
  non-ASCII escaped as `\\uXXXX` (UTF-16 units, upper-case hex, as fastjson does).

Reading (`loads`): a tolerant recursive-descent reader over a small tokenizer. It accepts what
fastjson accepts and peers actually send: unquoted numeric and identifier keys, object and array
keys (returned as hashable `ObjectKey` / tuples), single-quoted strings, trailing commas, `\\v` and
`\\xNN` escapes, Java number suffixes (`1L`). Strict JSON takes the C-accelerated stdlib path first.

Fast paths (headers are quoted and parsed on every request): `quote` hands text to the stdlib's C
string encoder whenever that writes exactly what fastjson does, i.e. when the text holds none of
the characters the two spell differently (`_STDLIB_DIFFERS`: controls whose `\\uXXXX` has hex
letters, which fastjson writes upper-case, and 0x7F-0x9F, which only fastjson escapes); strict
parsing calls the C scanner of one prebuilt decoder directly, falling back to `json.loads`'s full
rules (BOM, surrounding whitespace) only when the scan does not cover the whole text.
"""

from __future__ import annotations

import dataclasses
import json
import json.encoder
import json.scanner
import math
import re
from collections.abc import Callable, Hashable, Mapping
from enum import Enum
from typing import Any, Final, Protocol, cast, runtime_checkable

from rocketlite.protocol.errors import ProtocolError

MAX_DEPTH: Final = 256  # nesting guard for hostile bodies; RocketMQ bodies nest 5 deep at most


class JsonDecodeError(ProtocolError):
    """A JSON header or body is malformed even by fastjson's lenient rules; carries the position."""

    def __init__(self, message: str, pos: int) -> None:
        super().__init__(f"{message} at char {pos}")
        self.pos = pos


@runtime_checkable
class JsonObject(Protocol):
    """A value `dumps` writes as an object: body classes and map keys such as MessageQueue."""

    def to_json_obj(self) -> Mapping[str, Any]: ...


@dataclasses.dataclass(frozen=True, slots=True)
class ObjectKey:
    """A JSON object that `loads` met in key position, frozen (items sorted by key) so it can key a dict.

    fastjson writes `Map<MessageQueue, X>` with the MessageQueue as an object; reading it back needs a
    hashable stand-in. `dumps` writes an ObjectKey back as the same object.
    """

    items: tuple[tuple[Hashable, Hashable], ...]

    @classmethod
    def of(cls, mapping: Mapping[Any, Any]) -> ObjectKey:
        return cls(tuple(sorted(((k, _freeze(v)) for k, v in mapping.items()), key=lambda kv: str(kv[0]))))

    def get(self, key: str, default: Any = None) -> Any:
        for k, v in self.items:
            if k == key:
                return v
        return default

    def to_json_obj(self) -> dict[Any, Any]:
        return dict(self.items)


def _freeze(value: Any) -> Hashable:
    if isinstance(value, dict):
        return ObjectKey.of(value)
    if isinstance(value, list):
        return tuple(_freeze(v) for v in value)
    if isinstance(value, Hashable):
        return value
    raise TypeError(f"cannot freeze {type(value).__name__}")


# ---------------------------------------------------------------------------------------------- writing

_SHORT_ESCAPES: Final = {
    '"': '\\"',
    "\\": "\\\\",
    "\b": "\\b",
    "\t": "\\t",
    "\n": "\\n",
    "\f": "\\f",
    "\r": "\\r",
}
# fastjson escapes C0 controls and 0x7F-0x9F; `str.translate` with a table keeps this in C.
_ESCAPE_TABLE: Final[dict[int, str]] = {
    **{c: f"\\u{c:04X}" for c in [*range(0x20), *range(0x7F, 0xA0)]},
    **{ord(k): v for k, v in _SHORT_ESCAPES.items()},
}
_BROWSER_SPECIAL: Final = re.compile(r'[^\x20-\x7e]|["\\]')
# Where the stdlib's encoder (`json.dumps(ensure_ascii=False)` of a string) and fastjson disagree:
# the stdlib writes `\u000b`-style lower-case hex and leaves 0x7F-0x9F alone. Everything else
# (`\"`, `\\`, `\b\t\n\f\r`, `\u0000`..`\u0019` without letters, all other text as-is) is identical.
_STDLIB_DIFFERS: Final = re.compile("[\x0b\x0e\x0f\x1a-\x1f\x7f-\x9f]")
_c_quote: Final = json.encoder.encode_basestring  # the C function when _json is there


def _browser_escape(match: re.Match[str]) -> str:
    ch = match.group()
    if ch in '"\\':
        return "\\" + ch
    code = ord(ch)
    if code > 0xFFFF:  # Java strings are UTF-16: an astral character is two escaped surrogates
        code -= 0x10000
        return f"\\u{0xD800 + (code >> 10):04X}\\u{0xDC00 + (code & 0x3FF):04X}"
    return f"\\u{code:04X}"


def quote(text: str, *, standard: bool = False) -> str:
    """A JSON string literal as fastjson writes it (`standard`: BrowserCompatible, all non-ASCII escaped)."""
    if standard:
        return '"' + _BROWSER_SPECIAL.sub(_browser_escape, text) + '"'
    return quote_plain(text)


def quote_plain(text: str) -> str:
    """`quote(text)` (fastjson's default form): the C encoder when it agrees, else the escape table."""
    if type(text) is str and ((text.isascii() and text.isprintable()) or not _STDLIB_DIFFERS.search(text)):
        return _c_quote(text)
    return quote_reference(text)


def quote_reference(text: str) -> str:
    """The definition `quote_plain` is pinned to: every character through fastjson's escape table."""
    return '"' + text.translate(_ESCAPE_TABLE) + '"'


def _number(value: float) -> str:
    if math.isnan(value) or math.isinf(value):
        return "null"  # fastjson writes non-finite doubles as null
    return repr(value)


def _sort_key(key: object) -> tuple[int, Any]:
    if isinstance(key, bool):
        return (1, int(key))
    if isinstance(key, Enum):
        return (2, key.name)
    if isinstance(key, int):
        return (0, key)
    if isinstance(key, float):
        return (0, key)
    if isinstance(key, str):
        return (2, key)
    return (3, dumps(key))


def _write_key(key: object, out: list[str], standard: bool, depth: int) -> None:
    if isinstance(key, str):
        out.append(quote(key, standard=standard))
    elif isinstance(key, Enum):
        out.append(quote(key.name, standard=standard))
    elif isinstance(key, bool):
        out.append('"true"' if key else '"false"')
    elif isinstance(key, int | float):
        text = str(key) if isinstance(key, int) else _number(key)
        out.append(f'"{text}"' if standard else text)
    elif isinstance(key, tuple) and all(isinstance(p, tuple) and len(p) == 2 for p in key):
        _write_map(dict(key), out, standard, depth + 1)
    elif isinstance(key, JsonObject):
        _write_map(key.to_json_obj(), out, standard, depth + 1)
    elif isinstance(key, tuple):  # an array met in key position (`loads` freezes it to a tuple)
        _write(list(key), out, standard, depth + 1)
    else:
        raise TypeError(f"cannot write a {type(key).__name__} as a JSON map key")


def _write_map(mapping: Mapping[Any, Any], out: list[str], standard: bool, depth: int) -> None:
    out.append("{")
    first = True
    for key in sorted(mapping, key=_sort_key):
        value = mapping[key]
        if value is None:
            continue
        if not first:
            out.append(",")
        first = False
        _write_key(key, out, standard, depth)
        out.append(":")
        _write(value, out, standard, depth + 1)
    out.append("}")


def _write(value: object, out: list[str], standard: bool, depth: int) -> None:
    if depth > MAX_DEPTH:
        raise ValueError("JSON nesting too deep")
    if value is None:
        out.append("null")
    elif isinstance(value, str):
        out.append(quote(value, standard=standard))
    elif isinstance(value, bool):
        out.append("true" if value else "false")
    elif isinstance(value, Enum):
        out.append(quote(value.name, standard=standard))
    elif isinstance(value, int):
        out.append(str(value))
    elif isinstance(value, float):
        out.append(_number(value))
    elif isinstance(value, bytes | bytearray | memoryview):
        raise TypeError("bytes have no place in a RocketMQ JSON body")
    elif isinstance(value, Mapping):
        _write_map(value, out, standard, depth)
    elif isinstance(value, JsonObject):
        _write_map(value.to_json_obj(), out, standard, depth)
    elif isinstance(value, list | tuple | set | frozenset):
        items = sorted(value, key=_sort_key) if isinstance(value, set | frozenset) else value
        out.append("[")
        for i, item in enumerate(items):
            if i:
                out.append(",")
            _write(item, out, standard, depth + 1)
        out.append("]")
    else:
        raise TypeError(f"cannot write a {type(value).__name__} as JSON")


def dumps(obj: object, *, standard: bool = False) -> str:
    """fastjson-style text of `obj`: sorted keys, no nulls, raw non-string keys unless `standard`."""
    out: list[str] = []
    _write(obj, out, standard, 0)
    return "".join(out)


# ---------------------------------------------------------------------------------------------- reading

_WS: Final = re.compile(r"[ \t\n\r\f\v\ufeff]*")
_NUMBER: Final = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?([LlFfDdSsB]?)")
_IDENT: Final = re.compile(r"[A-Za-z_$][\w$]*")
_DQ_STRING: Final = re.compile(r'"([^"\\]*(?:\\.[^"\\]*)*)"', re.DOTALL)
_SQ_STRING: Final = re.compile(r"'([^'\\]*(?:\\.[^'\\]*)*)'", re.DOTALL)
_ESCAPE: Final = re.compile(r"\\(u[0-9a-fA-F]{4}|x[0-9a-fA-F]{2}|.)", re.DOTALL)
_SIMPLE_ESCAPES: Final = {"b": "\b", "t": "\t", "n": "\n", "f": "\f", "r": "\r", "v": "\v", "0": "\0"}
_SURROGATE: Final = re.compile("[\ud800-\udfff]")
_LITERALS: Final[dict[str, Any]] = {"true": True, "false": False, "null": None}


def _unescape_one(match: re.Match[str]) -> str:
    esc = match.group(1)
    if len(esc) > 1:
        return chr(int(esc[1:], 16))
    return _SIMPLE_ESCAPES.get(esc, esc)  # \" \\ \/ \' and unknown escapes stand for themselves


def _unescape(raw: str) -> str:
    if "\\" not in raw:
        return raw
    text = _ESCAPE.sub(_unescape_one, raw)
    if _SURROGATE.search(text) is None:
        return text
    # Escaped UTF-16 surrogate pairs (BrowserCompatible output) become one character again.
    return text.encode("utf-16-be", "surrogatepass").decode("utf-16-be", "replace")


class _Reader:
    """Recursive descent over one text; `pos` is the next unread character."""

    __slots__ = ("pos", "text")

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def fail(self, message: str) -> JsonDecodeError:
        return JsonDecodeError(message, self.pos)

    def skip_ws(self) -> str:
        """Skip whitespace and return the next character ('' at the end)."""
        end = _WS.match(self.text, self.pos)
        assert end is not None  # the pattern matches the empty string
        self.pos = end.end()
        return self.text[self.pos : self.pos + 1]

    def value(self, depth: int) -> Any:
        if depth > MAX_DEPTH:
            raise self.fail("JSON nesting too deep")
        ch = self.skip_ws()
        if ch == "{":
            return self.obj(depth)
        if ch == "[":
            return self.array(depth)
        if ch in ('"', "'"):
            return self.string(ch)
        if ch and (ch.isdigit() or ch in "-+."):
            return self.number()
        ident = _IDENT.match(self.text, self.pos)
        if ident and ident.group() in _LITERALS:
            self.pos = ident.end()
            return _LITERALS[ident.group()]
        raise self.fail("unexpected character" if ch else "unexpected end of input")

    def string(self, quote_char: str) -> str:
        pattern = _DQ_STRING if quote_char == '"' else _SQ_STRING
        match = pattern.match(self.text, self.pos)
        if match is None:
            raise self.fail("unterminated string")
        self.pos = match.end()
        return _unescape(match.group(1))

    def number(self) -> int | float:
        match = _NUMBER.match(self.text, self.pos)
        if match is None:
            raise self.fail("bad number")
        self.pos = match.end()
        text = match.group()[: len(match.group()) - len(match.group(1))]
        try:
            if any(c in text for c in ".eE") or match.group(1) in ("F", "f", "D", "d"):
                return float(text)
            return int(text)
        except ValueError as exc:
            raise self.fail(f"bad number {text[:40]!r}") from exc

    def key(self, depth: int) -> Hashable:
        # Objects and arrays in key position nest through here, not through `value`: guard too.
        if depth > MAX_DEPTH:
            raise self.fail("JSON nesting too deep")
        ch = self.text[self.pos : self.pos + 1]
        if ch in ('"', "'"):
            return self.string(ch)
        if ch == "{":
            return ObjectKey.of(self.obj(depth + 1))
        if ch == "[":
            return _freeze(self.array(depth + 1))
        if ch and (ch.isdigit() or ch in "-+."):
            return self.number()
        ident = _IDENT.match(self.text, self.pos)
        if ident is None:
            raise self.fail("expected an object key")
        self.pos = ident.end()
        return ident.group()  # fastjson AllowUnQuotedFieldNames

    def obj(self, depth: int) -> dict[Hashable, Any]:
        self.pos += 1  # '{'
        result: dict[Hashable, Any] = {}
        while True:
            ch = self.skip_ws()
            if ch == "}":
                self.pos += 1
                return result
            if ch == ",":  # fastjson tolerates empty members and trailing commas
                self.pos += 1
                continue
            key = self.key(depth)
            if self.skip_ws() != ":":
                raise self.fail("expected ':'")
            self.pos += 1
            result[key] = self.value(depth + 1)
            ch = self.skip_ws()
            if ch not in (",", "}"):
                raise self.fail("expected ',' or '}'")

    def array(self, depth: int) -> list[Any]:
        self.pos += 1  # '['
        result: list[Any] = []
        while True:
            ch = self.skip_ws()
            if ch == "]":
                self.pos += 1
                return result
            if ch == ",":
                self.pos += 1
                continue
            result.append(self.value(depth + 1))
            ch = self.skip_ws()
            if ch not in (",", "]"):
                raise self.fail("expected ',' or ']'")


def _reject_constant(name: str) -> Any:
    raise ValueError(name)


_STRICT: Final = json.JSONDecoder(parse_constant=_reject_constant)  # NaN / Infinity are not strict JSON
# The C scanner when available; typeshed types make_scanner as a class, hence the cast.
_scan_strict: Final[Callable[[str, int], tuple[Any, int]]] = cast(Any, json.scanner.make_scanner)(_STRICT)


def loads_strict(text: str) -> Any:
    """`json.loads(text)` without NaN/Infinity; ValueError or RecursionError when not strict JSON.

    The common case (no whitespace around the value) is one call of the C scanner; anything else
    takes `json.loads`'s own path, so the outcome is the same either way.
    """
    try:
        value, end = _scan_strict(text, 0)
    except StopIteration:  # leading whitespace, BOM, or not JSON at all
        pass
    else:
        if end == len(text):
            return value
    if text.startswith("\ufeff"):  # json.loads refuses a BOM in a str; the lenient reader skips it
        raise json.JSONDecodeError("Unexpected UTF-8 BOM (decode using utf-8-sig)", text, 0)
    return _STRICT.decode(text)


def loads(text: str | bytes | bytearray | memoryview) -> Any:
    """Parse fastjson output (or plain JSON). Raises `JsonDecodeError` (a ProtocolError) when malformed."""
    if not isinstance(text, str):
        try:
            text = bytes(text).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise JsonDecodeError("JSON text is not UTF-8", exc.start) from exc
    try:
        return loads_strict(text)
    except (ValueError, RecursionError):
        pass  # not strict JSON: fall back to the lenient reader
    return loads_lenient(text)


def loads_lenient(text: str) -> Any:
    """The lenient reader alone (what `loads` falls back to)."""
    reader = _Reader(text)
    try:
        result = reader.value(0)
    except RecursionError:  # MAX_DEPTH keeps well below the limit; a deep caller stack may not
        raise reader.fail("JSON nesting too deep") from None
    if reader.skip_ws():
        raise reader.fail("trailing characters after JSON value")
    return result
