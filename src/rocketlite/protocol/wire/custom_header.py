"""The custom-header codec: `extFields` <-> frozen dataclasses, generated from annotations.

Java builds these by reflection (`makeCustomHeaderToNet` / `decodeCommandCustomHeader`). Here each
header is a `kw_only` frozen dataclass whose annotations are the schema:

- the wire name is the field name in camelCase (`queue_id` -> `queueId`), or `WIRE_NAMES[field]`
  for the few Java spells differently (`clientID`, `_UNIQUE_KEY_QUERY`);
- the type says how the text is read: `str`, `int` (Java int/Integer, 32-bit), `Long` (Java
  long/Long, 64-bit), `bool`; `X | None` marks a nullable field;
- a field without a default is required (`@CFNotNull`); its absence raises
  `MissingHeaderFieldError` with Java's remark `the custom field <x> is null`.

`to_ext` writes numbers in decimal, booleans as `"true"`/`"false"`, and leaves None out: exactly
Java's `value.toString()`. `from_ext` is as tolerant as the clients need: booleans read `"true"`
and `"1"` as true (the C++ client sends `"0"`), anything else as false (`Boolean.parseBoolean`);
an empty value of an optional number reads as absent (Java's NumberFormatException leaves the field
null); any other bad number raises `BadHeaderFieldError`. Both errors are ProtocolErrors, answered
with SYSTEM_ERROR and the message as remark.

Speed: `from_ext` / `to_ext` run on every request, so each class (and each alternate spelling)
gets a specialised decoder and encoder, generated from its schema on first use: straight-line
`ext.get` calls, `int()` behind a cheap all-ASCII-digits test (anything else, signs included, goes
through the generic `_parse`), and the instance filled slot by slot. The generic loops
(`_decode_generic`, `_encode_generic`) stay the reference: the tests pin the generated code to
them, errors included, and a decoder meeting a value that is not a `str` defers to them.
"""

from __future__ import annotations

import dataclasses
import re
import types
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import (
    Annotated,
    Any,
    ClassVar,
    Final,
    Self,
    TypeVar,
    Union,
    cast,
    dataclass_transform,
    get_args,
    get_origin,
    get_type_hints,
)

from rocketlite.protocol.errors import ProtocolError

_LONG_MARK: Final = "java.lang.Long"
Long = Annotated[int, _LONG_MARK]  # a Java long: 64-bit; plain `int` fields are Java ints (32-bit)

_INT_TEXT: Final = re.compile(r"[+-]?[0-9]+")
_RANGES: Final = {"int": (-(2**31), 2**31 - 1), "long": (-(2**63), 2**63 - 1)}


class HeaderFieldError(ProtocolError):
    """A custom-header field is missing or unreadable; `field` is the wire name."""

    def __init__(self, message: str, field: str) -> None:
        super().__init__(message)
        self.field = field


class MissingHeaderFieldError(HeaderFieldError):
    """A required (`@CFNotNull`) field is absent. The remark is Java's, word for word."""

    def __init__(self, field: str) -> None:
        super().__init__(f"the custom field <{field}> is null", field)


class BadHeaderFieldError(HeaderFieldError):
    """A numeric field holds something Java's `parseInt` / `parseLong` would reject."""

    def __init__(self, field: str, value: str, kind: str) -> None:
        super().__init__(f"the custom field <{field}> is not a valid {kind}: {value[:64]!r}", field)
        self.value = value


class _Kind(Enum):
    STR = "string"
    INT = "int"
    LONG = "long"
    BOOL = "boolean"


@dataclass(frozen=True, slots=True)
class FieldSpec:
    """How one dataclass field maps to one ext entry."""

    attr: str
    wire: str
    kind: _Kind
    required: bool


def camel_case(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def _kind_of(annotation: Any, where: str) -> _Kind:
    if get_origin(annotation) in (Union, types.UnionType):
        args = [a for a in get_args(annotation) if a is not type(None)]
        if len(args) != 1:
            raise TypeError(f"{where}: only `X | None` unions are supported")
        annotation = args[0]
    if get_origin(annotation) is Annotated:
        base, *marks = get_args(annotation)
        if base is int and _LONG_MARK in marks:
            return _Kind.LONG
        annotation = base
    kinds = {str: _Kind.STR, int: _Kind.INT, bool: _Kind.BOOL}
    if annotation not in kinds:
        raise TypeError(f"{where}: unsupported header field type {annotation!r}")
    return kinds[annotation]


_SPECS: dict[type, tuple[FieldSpec, ...]] = {}


def _parse(spec: FieldSpec, wire: str, text: str) -> object:
    if spec.kind is _Kind.STR:
        return text
    if spec.kind is _Kind.BOOL:
        return text.strip().lower() in ("true", "1")
    low, high = _RANGES[spec.kind.value]
    if _INT_TEXT.fullmatch(text) is None or not low <= int(text) <= high:
        raise BadHeaderFieldError(wire, text, spec.kind.value)
    return int(text)


def _format(spec: FieldSpec, value: object) -> str:
    if spec.kind is _Kind.BOOL:
        return "true" if value else "false"
    return str(value)


# -------------------------------------------------------------------------- generated fast paths

_Decoder = Callable[[Mapping[str, str] | None], Any]
_Encoder = Callable[[Any], dict[str, str]]
_DECODERS: dict[type, _Decoder] = {}  # class -> decoder for its own wire names
_NAMED_DECODERS: dict[tuple[type, int], tuple[Mapping[str, str], _Decoder]] = {}  # (class, id(names))
_ENCODERS: dict[tuple[type, int], tuple[Mapping[str, str] | None, _Encoder]] = {}  # id(None) for own names
_OWN_ENCODERS: dict[type, _Encoder] = {}  # class -> encoder for its own wire names
_EMPTY_EXT: Final[Mapping[str, str]] = types.MappingProxyType({})
# Up to this many ASCII digits a number always fits (2**31 - 1 has 10 digits, 2**63 - 1 has 19).
_SAFE_DIGITS: Final = {_Kind.INT: 9, _Kind.LONG: 18}
_BOOL_WORDS: Final = {"true": True, "false": False, "1": True, "0": False}
# The numbers most fields carry (queue ids, flags, counts), in their canonical spelling: one lookup.
_SMALL_INTS: Final = {str(n): n for n in range(-1, 1025)}


def _parse_number(spec: FieldSpec, wire: str, text: str) -> int:
    """The generic number rule, for text the generated fast test did not accept."""
    return cast(int, _parse(spec, wire, text))


def _parse_bool(text: str) -> bool:
    return text.strip().lower() in ("true", "1")


def _builds_by_slots(cls: type) -> bool:
    """True when an instance may be made by `object.__new__` and filled through the slot
    descriptors: a slotted dataclass whose `__init__` is the generated one, with no
    `__post_init__` and a slot per field (what `cls(**values)` would do, minus the call)."""
    init = getattr(cls, "__init__", None)
    code = getattr(init, "__code__", None)
    return (
        cast(Any, cls).__new__ is object.__new__
        and not hasattr(cls, "__post_init__")
        and code is not None
        and code.co_filename == "<string>"  # dataclasses' generated __init__
        and all(
            f.init and isinstance(cls.__dict__.get(f.name), types.MemberDescriptorType)
            for f in dataclasses.fields(cls)
        )
    )


def _compile_decoder(cls: type[CustomHeader], names: Mapping[str, str] | None) -> _Decoder:
    """Generate `decode(ext)`, equivalent to `cls._decode_generic(ext, names)`."""
    specs = cls.field_specs()
    fields = {f.name: f for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    if not all(f.init for f in fields.values()):  # the generated call passes every field
        return lambda ext: cls._decode_generic(ext, names)
    by_slots = _builds_by_slots(cls)
    ns: dict[str, Any] = {
        "cls": cls,
        "names": names,
        "new": object.__new__,
        "EMPTY": _EMPTY_EXT,
        "Missing": MissingHeaderFieldError,
        "number": _parse_number,
        "bool_words": _BOOL_WORDS,
        "small_ints": _SMALL_INTS,
        "parse_bool": _parse_bool,
        "generic": cls._decode_generic,
    }
    body: list[str] = []
    for i, spec in enumerate(specs):
        wire = names[spec.attr] if names is not None else spec.wire
        ns[f"spec{i}"] = spec
        var = f"x{i}"
        f = fields[spec.attr]
        if spec.required:
            default = ""
        elif f.default is not dataclasses.MISSING:
            ns[f"default{i}"] = f.default
            default = f"default{i}"
        else:
            ns[f"factory{i}"] = f.default_factory
            default = f"factory{i}()"
        body.append(f"    {var} = get({wire!r})")
        parse: list[str] = []  # statements turning the text in `var` into the value
        if spec.kind is _Kind.BOOL:
            parse = [f"b = bool_words.get({var})", f"{var} = parse_bool({var}) if b is None else b"]
        elif spec.kind is not _Kind.STR:
            parse = [
                f"n = small_ints.get({var})",
                "if n is not None:",
                f"    {var} = n",
                f"elif type({var}) is str and {var}.isdigit() and {var}.isascii()"
                f" and len({var}) <= {_SAFE_DIGITS[spec.kind]}:",
                f"    {var} = int({var})",
                "else:",
                f"    {var} = number(spec{i}, {wire!r}, {var})",
            ]
        if spec.required:
            body += [f"    if {var} is None:", f"        raise Missing({wire!r})"]
            body += [f"    {line}" for line in parse]
        else:
            # An empty optional number or boolean reads as absent; an empty string is a value.
            absent = f"{var} is None" if spec.kind is _Kind.STR else f"{var} is None or {var} == ''"
            body += [f"    if {absent}:", f"        {var} = {default}"]
            if parse:
                body += ["    else:", *(f"        {line}" for line in parse)]
    if by_slots:
        for i, spec in enumerate(specs):
            ns[f"set{i}"] = cls.__dict__[spec.attr].__set__
        sets = [f"    set{i}(obj, x{i})" for i in range(len(specs))]
        build = ["    obj = new(cls)", *sets, "    return obj"]
    else:
        build = [f"    return cls({', '.join(f'{s.attr}=x{i}' for i, s in enumerate(specs))})"]
    src = "\n".join(
        [
            "def decode(ext):",
            "    if not ext:",
            "        ext = EMPTY",
            "    try:",
            "        get = ext.get",
            *(f"    {line}" for line in body),
            "    except (AttributeError, TypeError):",  # a value that is not text: the generic rules
            "        return generic(ext, names)",
            *build,
        ]
    )
    exec(compile(src, f"<{cls.__name__} decoder>", "exec"), ns)  # source built from the schema
    return cast(_Decoder, ns["decode"])


def _compile_encoder(cls: type[CustomHeader], names: Mapping[str, str] | None) -> _Encoder:
    """Generate `encode(header)`, equivalent to `header._encode_generic(names)`."""
    lines = ["def encode(self):", "    ext = {}"]
    for spec in cls.field_specs():
        wire = names[spec.attr] if names is not None else spec.wire
        text = '"true" if v else "false"' if spec.kind is _Kind.BOOL else "str(v)"
        lines += [f"    v = self.{spec.attr}", f"    if v is not None:\n        ext[{wire!r}] = {text}"]
    lines.append("    return ext")
    ns: dict[str, Any] = {}
    exec(compile("\n".join(lines), f"<{cls.__name__} encoder>", "exec"), ns)
    return cast(_Encoder, ns["encode"])


def decoder_for(cls: type[CustomHeader], names: Mapping[str, str] | None) -> _Decoder:
    if names is None:
        fn = _DECODERS.get(cls)
        if fn is None:
            fn = _DECODERS[cls] = _compile_decoder(cls, None)
        return fn
    # Keyed by identity (mappings do not hash); the entry keeps `names` alive, so no other mapping
    # can get its id. Alternate spellings are class constants (V2_NAMES): a handful of entries.
    entry = _NAMED_DECODERS.get((cls, id(names)))
    if entry is None:
        entry = _NAMED_DECODERS[(cls, id(names))] = (names, _compile_decoder(cls, names))
    return entry[1]


def _encoder(cls: type[CustomHeader], names: Mapping[str, str] | None) -> _Encoder:
    entry = _ENCODERS.get((cls, id(names)))  # keyed like `_decoder`'s named entries
    if entry is None:
        entry = _ENCODERS[(cls, id(names))] = (names, _compile_encoder(cls, names))
    return entry[1]


class CustomHeader:
    """Base of every header dataclass: the generic ext <-> dataclass mapping."""

    __slots__ = ()
    WIRE_NAMES: ClassVar[Mapping[str, str]] = {}

    @classmethod
    def field_specs(cls) -> tuple[FieldSpec, ...]:
        """The schema derived from the annotations, computed once per class (and checked at import)."""
        specs = _SPECS.get(cls)
        if specs is None:
            hints = get_type_hints(cls, include_extras=True)
            specs = tuple(
                FieldSpec(
                    attr=f.name,
                    wire=cls.WIRE_NAMES.get(f.name, camel_case(f.name)),
                    kind=_kind_of(hints[f.name], f"{cls.__name__}.{f.name}"),
                    required=f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING,
                )
                for f in dataclasses.fields(cls)  # type: ignore[arg-type]
            )
            _SPECS[cls] = specs
        return specs

    @classmethod
    def _decode(cls, ext: Mapping[str, str] | None, names: Mapping[str, str] | None = None) -> Self:
        """Build the header from `ext`; `names` overrides wire names (attr -> key) for alternate spellings."""
        fn = _DECODERS.get(cls) if names is None else None
        if fn is None:
            fn = decoder_for(cls, names)
        header: Self = fn(ext)  # an annotation, not typing.cast: no call per request
        return header

    @classmethod
    def _decode_generic(cls, ext: Mapping[str, str] | None, names: Mapping[str, str] | None = None) -> Self:
        """The reference decoder: the schema interpreted field by field (the generated one's model)."""
        ext = ext or {}
        values: dict[str, Any] = {}
        for spec in cls.field_specs():
            wire = names[spec.attr] if names is not None else spec.wire
            text = ext.get(wire)
            if text is None or (text == "" and not spec.required and spec.kind is not _Kind.STR):
                if spec.required:
                    raise MissingHeaderFieldError(wire)
                continue
            values[spec.attr] = _parse(spec, wire, text)
        return cls(**values)

    @classmethod
    def from_ext(cls, ext: Mapping[str, str] | None) -> Self:
        """Decode from a command's ext fields; unknown keys are ignored."""
        fn = _DECODERS.get(cls)
        if fn is None:
            fn = decoder_for(cls, None)
        header: Self = fn(ext)
        return header

    def _encode(self, names: Mapping[str, str] | None = None) -> dict[str, str]:
        if names is None:
            fn = _OWN_ENCODERS.get(type(self))
            if fn is None:
                fn = _OWN_ENCODERS[type(self)] = _encoder(type(self), None)
            return fn(self)
        return _encoder(type(self), names)(self)

    def _encode_generic(self, names: Mapping[str, str] | None = None) -> dict[str, str]:
        """The reference encoder (the generated one's model)."""
        ext: dict[str, str] = {}
        for spec in self.field_specs():
            value = getattr(self, spec.attr)
            if value is not None:
                ext[names[spec.attr] if names is not None else spec.wire] = _format(spec, value)
        return ext

    def to_ext(self) -> dict[str, str]:
        """The ext fields Java would send for this header."""
        fn = _OWN_ENCODERS.get(type(self))
        if fn is None:
            fn = _OWN_ENCODERS[type(self)] = _encoder(type(self), None)
        return fn(self)


_H = TypeVar("_H", bound=CustomHeader)


@dataclass_transform(frozen_default=True, kw_only_default=True)
def header_dataclass(cls: type[_H]) -> type[_H]:
    """Every header is a frozen, slotted, keyword-only dataclass (so required fields may follow optional)."""
    return dataclass(frozen=True, slots=True, kw_only=True)(cls)
