"""RocketMQ-style properties files, parsed once at the edge into frozen, typed config objects.

Each component declares a frozen dataclass whose field names are RocketMQ's camelCase keys turned
into snake_case (`mapedFileSizeCommitLog` -> `maped_file_size_commit_log`), or that names its key
explicitly with ``field(metadata={"key": "..."})``. `build_config` converts and validates values and
reports which keys it consumed, so the CLI can warn about keys no component knows.
"""

from __future__ import annotations

import dataclasses
import enum
import logging
import re
import types
import typing
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from rocketlite.protocol.errors import ConfigError

log = logging.getLogger("rocketlite.config")

T = TypeVar("T")

_CAMEL_RE = re.compile(r"_([a-z0-9])")


def parse_properties(text: str) -> dict[str, str]:
    """Parse Java `.properties` text: `k=v`, `k: v`, `k v`, `#`/`!` comments, `\\` continuations."""
    result: dict[str, str] = {}
    logical: list[str] = []
    for raw in text.splitlines():
        line = raw.lstrip()
        if not logical and (not line or line[0] in "#!"):
            continue
        if line.endswith("\\") and not line.endswith("\\\\"):
            logical.append(line[:-1])
            continue
        logical.append(line)
        entry = "".join(logical)
        logical = []
        match = re.match(r"((?:\\.|[^=:\s])+)\s*[=:\s]\s*(.*)$", entry)
        if match is None:
            result[entry.strip()] = ""
            continue
        key, value = match.group(1), match.group(2).rstrip()
        result[key.replace("\\", "")] = value
    return result


def load_properties(path: Path) -> dict[str, str]:
    """Read a properties file; a missing or unreadable file is a `ConfigError` naming it."""
    try:
        return parse_properties(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror or exc}") from exc


def key_of(f: dataclasses.Field[Any]) -> str:
    """The RocketMQ key name of a config field."""
    explicit = f.metadata.get("key")
    if isinstance(explicit, str):
        return explicit
    return _CAMEL_RE.sub(lambda m: m.group(1).upper(), f.name)


def config_keys(cls: type[Any]) -> set[str]:
    """All RocketMQ key names a config class understands (including aliases)."""
    keys: set[str] = set()
    for f in dataclasses.fields(cls):
        keys.add(key_of(f))
        keys.update(f.metadata.get("aliases", ()))
    return keys


def _convert(key: str, raw: str, tp: Any) -> Any:
    value = raw.strip()
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if value == "" or value.lower() == "null":
            return None
        return _convert(key, raw, args[0])
    if tp is bool:
        lowered = value.lower()
        if lowered in ("true", "false"):
            return lowered == "true"
        raise ConfigError(f"config key {key}: expected true or false, got {raw!r}")
    if tp is int:
        try:
            return int(value)
        except ValueError:
            raise ConfigError(f"config key {key}: expected an integer, got {raw!r}") from None
    if tp is float:
        try:
            return float(value)
        except ValueError:
            raise ConfigError(f"config key {key}: expected a number, got {raw!r}") from None
    if tp is Path:
        return Path(value).expanduser()
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        try:
            return tp[value.upper()]
        except KeyError:
            names = ", ".join(m.name for m in tp)
            raise ConfigError(f"config key {key}: expected one of {names}, got {raw!r}") from None
    if tp is str:
        return value
    raise ConfigError(f"config key {key}: unsupported type {tp!r}")


def build_config(cls: type[T], props: Mapping[str, str], **overrides: Any) -> T:
    """Build `cls` from properties: convert each known key, keep defaults for the rest.

    Validation beyond types happens in the class's ``__post_init__``, which raises `ConfigError`.
    """
    hints = typing.get_type_hints(cls)
    kwargs: dict[str, Any] = {}
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        names = [key_of(f), *f.metadata.get("aliases", ())]
        for name in names:
            if name in props:
                kwargs[f.name] = _convert(name, props[name], hints[f.name])
                break
    kwargs.update(overrides)
    return cls(**kwargs)


def warn_unknown_keys(props: Mapping[str, str], known: Iterable[str], source: str) -> list[str]:
    """Log a warning for every key no component understands; returns them for tests."""
    known_set = set(known)
    unknown = sorted(k for k in props if k not in known_set)
    for key in unknown:
        log.warning("%s: unknown config key %r ignored", source, key)
    return unknown


def require(condition: bool, message: str) -> None:
    """Raise `ConfigError(message)` unless `condition`; used by config classes' validation."""
    if not condition:
        raise ConfigError(message)
