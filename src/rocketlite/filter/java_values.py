"""Java's values as RocketMQ's SQL92 filter sees them, and how it compares them.

A filter computes with java.lang objects: `String` (every property value, and string literals),
`Integer` and `Long` (decimal literals: `Integer` when they fit), `Double` (floating literals),
`Boolean` and null. Python has one int, so `JavaInt` and `JavaLong` keep the two apart: the type of
the literal decides how a property string is read when the two meet (`Integer.valueOf` for
`a > 5`, `Long.valueOf` for `a > 5000000000`, `Double.valueOf` for `a > 5.0`), and
`Integer.valueOf("5.5")` fails where `Double.valueOf` does not.

`java_compare` is `ComparisonExpression.__compare` with string conversion on (SelectorParser
always sets it): operands of different classes are brought to one class (a string is read as the
number or boolean on the other side, an Integer widens to Long or Double), and any other pair
compares as -1; a string that does not spell the number raises `EvaluationError` (Java's
NumberFormatException). Doubles compare as `Double.compareTo` does: NaN above everything, -0.0
below 0.0.
"""

from __future__ import annotations

import math
import re
import unicodedata
from typing import Final

from rocketlite.filter.errors import EvaluationError


class JavaInt(int):
    """A java.lang.Integer (32-bit)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"JavaInt({int(self)})"


class JavaLong(int):
    """A java.lang.Long (64-bit)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"JavaLong({int(self)})"


# What an expression evaluates to: a property string, a literal, a boolean result or null. An int
# here is always a JavaInt or a JavaLong.
Value = str | bool | int | float | None

INT_MIN: Final = -(1 << 31)
INT_MAX: Final = (1 << 31) - 1
LONG_MIN: Final = -(1 << 63)
LONG_MAX: Final = (1 << 63) - 1
_LONG_DIGITS: Final = 19  # no Long has more (without leading zeros)


def _number_format(text: str) -> EvaluationError:
    shown = text if len(text) <= 64 else text[:64] + "..."
    return EvaluationError(f'NumberFormatException: for input string: "{shown}"')


def _parse_integral(text: str, lo: int, hi: int) -> int:
    """`Integer.parseInt` / `Long.parseLong`: an optional sign, then decimal digits (any Unicode
    decimal digit of the BMP, as `Character.digit` takes them); no blanks, no '_'."""
    body, negative = text, False
    if text[:1] in ("+", "-"):
        body, negative = text[1:], text[0] == "-"
    if body.isascii():
        if not body.isdigit():  # also refuses "" (a lone sign)
            raise _number_format(text)
    elif all(c.isdecimal() and c <= "\uffff" for c in body):
        body = "".join(str(unicodedata.decimal(c)) for c in body)
    else:
        raise _number_format(text)
    body = body.lstrip("0") or "0"
    if len(body) > _LONG_DIGITS:
        raise _number_format(text)
    value = -int(body) if negative else int(body)
    if not lo <= value <= hi:
        raise _number_format(text)
    return value


def parse_int(text: str) -> int:
    """`Integer.valueOf(String)`."""
    if len(text) < 10 and text.isdigit() and text.isascii():  # the usual case, at once
        return int(text)
    return _parse_integral(text, INT_MIN, INT_MAX)


def parse_long(text: str) -> int:
    """`Long.valueOf(String)`."""
    if len(text) < 19 and text.isdigit() and text.isascii():
        return int(text)
    return _parse_integral(text, LONG_MIN, LONG_MAX)


# Over these characters Python's float() and Java's Double.valueOf accept the same strings
# ([sign] digits [. digits] [e [sign] digits], at least one digit) and round the same way.
_PLAIN_FLOAT_CHARS: Final = "0123456789.+-eE"
_JAVA_BLANKS: Final = "".join(chr(c) for c in range(0x21))  # String.trim: every char <= ' '
_DECIMAL_FORM: Final = re.compile(
    r"([+-]?)(?:(NaN)|(Infinity)|((?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)[fFdD]?)"
)
_HEX_FORM: Final = re.compile(
    r"([+-]?)0[xX]([0-9a-fA-F]+\.?|[0-9a-fA-F]*\.[0-9a-fA-F]+)[pP]([+-]?[0-9]+)[fFdD]?"
)
_HEX_EXPONENT_LIMIT: Final = 1 << 20  # far past where any double over- or underflows


def parse_double(text: str) -> float:
    """`Double.valueOf(String)`: Java's grammar (surrounding chars <= ' ' trimmed, NaN,
    Infinity, a trailing f/F/d/D, hexadecimal 0x1.8p3), not Python's (no "inf", no '_')."""
    if text.isascii() and text and not text.strip(_PLAIN_FLOAT_CHARS):
        try:
            return float(text)
        except ValueError:
            raise _number_format(text) from None
    trimmed = text.strip(_JAVA_BLANKS)
    m = _DECIMAL_FORM.fullmatch(trimmed)
    if m is not None:
        sign, nan, inf, number = m.groups()
        if nan:
            return math.nan
        if inf:
            return -math.inf if sign == "-" else math.inf
        return float(sign + number)
    m = _HEX_FORM.fullmatch(trimmed)
    if m is None:
        raise _number_format(text)
    sign, mantissa, exponent = m.groups()
    exp = int(exponent)
    if not mantissa.strip("0."):
        return -0.0 if sign == "-" else 0.0
    if abs(exp) > _HEX_EXPONENT_LIMIT:
        magnitude = math.inf if exp > 0 else 0.0
    else:
        try:
            magnitude = float.fromhex(f"0x{mantissa}p{exp}")
        except OverflowError:
            magnitude = math.inf
    return -magnitude if sign == "-" else magnitude


def parse_boolean(text: str) -> bool:
    """`Boolean.valueOf(String)`: "true" in any case is true, anything else false."""
    return len(text) == 4 and text.lower() == "true"


def double_compare(a: float, b: float) -> int:
    """`Double.compare`: a total order, NaN above +Infinity and -0.0 below 0.0."""
    if a < b:
        return -1
    if a > b:
        return 1
    a_nan, b_nan = math.isnan(a), math.isnan(b)
    if a_nan or b_nan:
        return 0 if a_nan and b_nan else (1 if a_nan else -1)
    if a == 0.0:  # both zeros: compare the signs
        return int(math.copysign(1.0, a) - math.copysign(1.0, b)) // 2
    return 0


def _string_compare(a: str, b: str) -> int:
    """`String.compareTo`: UTF-16 code units, which big-endian UTF-16 bytes order the same way."""
    if a == b:
        return 0
    ua = a.encode("utf-16-be", "surrogatepass")
    ub = b.encode("utf-16-be", "surrogatepass")
    return -1 if ua < ub else 1


def java_equals(lv: Value, rv: Value) -> bool:
    """`lv.equals(rv)` for two non-null values: same class and same value (Double by its bits)."""
    if type(lv) is not type(rv):
        return False
    if type(lv) is float:
        assert isinstance(rv, float)
        if math.isnan(lv):
            return math.isnan(rv)
        return lv == rv and math.copysign(1.0, lv) == math.copysign(1.0, rv)
    return lv == rv


def java_compare(lv: Value, rv: Value) -> int:
    """`ComparisonExpression.__compare(lv, rv, true)` for two non-null values (see the module doc)."""
    lt, rt = type(lv), type(rv)
    if lt is not rt:
        if lt is bool:
            if rt is str:  # Java casts the Boolean to String
                raise EvaluationError("ClassCastException: a Boolean cannot be compared with a String")
            return -1
        if lt is JavaInt or lt is JavaLong:
            if rt is JavaInt or rt is JavaLong:
                pass
            elif rt is float:
                lv = float(lv)  # type: ignore[arg-type]
            elif rt is str:
                rv = (parse_int if lt is JavaInt else parse_long)(rv)  # type: ignore[arg-type]
            else:
                return -1
        elif lt is float:
            if rt is JavaInt or rt is JavaLong:
                rv = float(rv)  # type: ignore[arg-type]
            elif rt is str:
                rv = parse_double(rv)  # type: ignore[arg-type]
            else:
                return -1
        elif lt is str:
            assert isinstance(lv, str)
            if rt is bool:
                lv = parse_boolean(lv)
            elif rt is JavaInt:
                lv = parse_int(lv)
            elif rt is JavaLong:
                lv = parse_long(lv)
            elif rt is float:
                lv = parse_double(lv)
            else:
                return -1
        else:
            return -1
    if type(lv) is float:
        return double_compare(lv, rv)  # type: ignore[arg-type]
    if type(lv) is str:
        return _string_compare(lv, rv)  # type: ignore[arg-type]
    if type(lv) is bool:
        return 0 if lv is rv else (1 if lv else -1)
    return (lv > rv) - (lv < rv)  # type: ignore[operator]


def is_number(value: Value) -> bool:
    return type(value) is JavaInt or type(value) is JavaLong or type(value) is float


def negate(value: Value) -> Value:
    """`UnaryExpression.createNegate`: a number negated in its own class (wrapping as Java
    does); anything else, null."""
    if type(value) is JavaInt:
        return JavaInt((-value + (1 << 31)) % (1 << 32) - (1 << 31))
    if type(value) is JavaLong:
        return JavaLong((-value + (1 << 63)) % (1 << 64) - (1 << 63))
    if type(value) is float:
        return -value
    return None
