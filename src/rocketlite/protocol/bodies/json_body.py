"""`JsonBody`, the base of every JSON body, and the tolerant readers the bodies share.

A body is a frozen dataclass with `to_json_obj` / `from_json_obj` (the fastjson bean mapping,
camelCase keys); `JsonBody` adds `to_json(standard=False)` / `to_bytes` / `from_json(text)`.
Writing goes through `fastjson.dumps`, so keys come out sorted and nulls are left out.

Reading is tolerant in the ways real clients need: numbers may arrive as strings (the C++
client's `subVersion`), enums as names or Java ordinals (the C++ heartbeat sends
`"consumeType":1`), missing optional keys take Java's defaults. Anything structurally wrong raises
`BodyError`, a ProtocolError. The body types themselves live beside it: `route`, `heartbeat` and
`lists` (name server and client membership bodies) and `message_queue` (bodies keyed by or
listing `MessageQueue`s).
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import IntEnum
from typing import Any, Self, TypeVar

from rocketlite.protocol.errors import ProtocolError
from rocketlite.protocol.wire import fastjson


class BodyError(ProtocolError):
    """A JSON body does not have the shape its request code promises."""


# ------------------------------------------------------------------------------------ tolerant access


def expect_obj(value: Any, what: str) -> Mapping[Any, Any]:
    if isinstance(value, Mapping):
        return value
    if isinstance(value, fastjson.ObjectKey):
        return value.to_json_obj()
    raise BodyError(f"{what}: expected a JSON object, got {type(value).__name__}")


def get_list(obj: Mapping[Any, Any], key: str) -> list[Any]:
    value = obj.get(key)
    if value is None:
        return []
    if isinstance(value, list | tuple):
        return list(value)
    raise BodyError(f"{key!r}: expected a JSON array")


def get_str(obj: Mapping[Any, Any], key: str, default: str | None = None) -> str:
    value = obj.get(key)
    if value is None:
        if default is None:
            raise BodyError(f"body has no {key!r}")
        return default
    if isinstance(value, str):
        return value
    if isinstance(value, bool | int | float):
        return fastjson.dumps(value)
    raise BodyError(f"{key!r}: expected a string")


def get_opt_str(obj: Mapping[Any, Any], key: str) -> str | None:
    return None if obj.get(key) is None else get_str(obj, key)


def to_int(value: Any, what: str) -> int:
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            pass
    raise BodyError(f"{what}: expected an integer, got {value!r}")


def get_int(obj: Mapping[Any, Any], key: str, default: int | None = None) -> int:
    value = obj.get(key)
    if value is None:
        if default is None:
            raise BodyError(f"body has no {key!r}")
        return default
    return to_int(value, key)


def get_bool(obj: Mapping[Any, Any], key: str, default: bool = False) -> bool:
    value = obj.get(key)
    if value is None:
        return default
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return value != 0
    if isinstance(value, str):
        return value.strip().lower() in ("true", "1")
    raise BodyError(f"{key!r}: expected a boolean")


_E = TypeVar("_E", bound=IntEnum)


def get_enum(obj: Mapping[Any, Any], key: str, enum: type[_E], default: _E) -> _E:
    """A Java enum by name (fastjson) or by ordinal (the C++ client)."""
    value = obj.get(key)
    if value is None:
        return default
    try:
        if isinstance(value, str) and not value.strip().lstrip("-").isdigit():
            return enum[value.strip()]
        return enum(to_int(value, key))
    except (KeyError, ValueError) as exc:
        raise BodyError(f"{key!r}: {value!r} is not a {enum.__name__}") from exc


class JsonBody:
    """Text conversions shared by every body; subclasses supply the object mapping."""

    __slots__ = ()

    def to_json_obj(self) -> Mapping[str, Any]:
        raise NotImplementedError

    @classmethod
    def from_json_obj(cls, obj: Mapping[Any, Any]) -> Self:
        raise NotImplementedError

    def to_json(self, *, standard: bool = False) -> str:
        return fastjson.dumps(self.to_json_obj(), standard=standard)

    def to_bytes(self, *, standard: bool = False) -> bytes:
        return self.to_json(standard=standard).encode("utf-8")

    @classmethod
    def from_json(cls, text: str | bytes | bytearray | memoryview) -> Self:
        return cls.from_json_obj(expect_obj(fastjson.loads(text), cls.__name__))
