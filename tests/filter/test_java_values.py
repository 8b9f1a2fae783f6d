"""Java's readings of a property string (Integer/Long/Double/Boolean.valueOf) and its comparisons."""

from __future__ import annotations

import math
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketlite.filter import EvaluationError
from rocketlite.filter.java_values import (
    INT_MAX,
    INT_MIN,
    LONG_MAX,
    LONG_MIN,
    JavaInt,
    JavaLong,
    double_compare,
    java_compare,
    java_equals,
    negate,
    parse_boolean,
    parse_double,
    parse_int,
    parse_long,
)

INTS = [
    ("5", 5),
    ("+5", 5),
    ("-0", 0),
    ("007", 7),
    ("\u0663", 3),  # ARABIC-INDIC DIGIT THREE
    ("\uff11\uff12", 12),  # FULLWIDTH DIGITS
    ("2147483647", INT_MAX),
    ("-2147483648", INT_MIN),
    ("0" * 5000 + "1", 1),
]
NOT_INTS = ["", "+", "-", "+-1", " 5", "5 ", "5.0", "1_0", "1e3", "0x10", "2147483648", "-2147483649",
            "\u00b2", "\U0001d7d3", "1" * 5000, "five"]  # fmt: skip


@pytest.mark.parametrize(("text", "value"), INTS)
def test_parse_int(text: str, value: int) -> None:
    assert parse_int(text) == value
    assert parse_long(text) == value


@pytest.mark.parametrize("text", NOT_INTS)
def test_parse_int_refuses(text: str) -> None:
    with pytest.raises(EvaluationError, match="NumberFormatException"):
        parse_int(text)


def test_parse_long_range() -> None:
    assert parse_long("9223372036854775807") == LONG_MAX
    assert parse_long("-9223372036854775808") == LONG_MIN
    for text in ("9223372036854775808", "-9223372036854775809", "99999999999999999999"):
        with pytest.raises(EvaluationError):
            parse_long(text)


@given(st.integers(min_value=LONG_MIN - 10, max_value=LONG_MAX + 10))
def test_parse_integral_against_range(n: int) -> None:
    for parse, lo, hi in ((parse_int, INT_MIN, INT_MAX), (parse_long, LONG_MIN, LONG_MAX)):
        if lo <= n <= hi:
            assert parse(str(n)) == n
            assert parse(("+" if n >= 0 else "-") + "000" + str(abs(n))) == n
        else:
            with pytest.raises(EvaluationError):
                parse(str(n))


DOUBLES = [
    ("1", 1.0),
    (" 1 ", 1.0),
    ("\t\n1\x00", 1.0),  # String.trim drops every char <= ' '
    ("1f", 1.0),
    ("1D", 1.0),
    ("+.5", 0.5),
    ("-5.", -5.0),
    ("1e3", 1000.0),
    ("1E-3", 0.001),
    ("00.25", 0.25),
    ("-0", -0.0),
    ("+Infinity", math.inf),
    ("-Infinity", -math.inf),
    ("1e99999", math.inf),
    ("1e-99999", 0.0),
    ("0x1p4", 16.0),
    ("0X.8P1", 1.0),
    ("-0x1.8p1f", -3.0),
    ("0x1p99999999", math.inf),
    ("0x1p-99999999", 0.0),
    ("0x0p99999999", 0.0),
    ("0x" + "f" * 400 + "p-1600", float.fromhex("0x" + "f" * 400 + "p-1600")),
]
NOT_DOUBLES = ["", " ", "inf", "nan", "Infinityf", "NaNd", "infinity", "1_0", "1e", "e1", ".", "+", "0x1",
               "0x1.8", "1.5.5", "1ff", "\u00a05", "\u0663", "1,5", "--1", "0x1p", "1e5.5"]  # fmt: skip


@pytest.mark.parametrize(("text", "value"), DOUBLES)
def test_parse_double(text: str, value: float) -> None:
    parsed = parse_double(text)
    assert struct.pack(">d", parsed) == struct.pack(">d", value)


@pytest.mark.parametrize("text", ["NaN", "-NaN", "+NaN", " NaN "])
def test_parse_double_nan(text: str) -> None:
    assert math.isnan(parse_double(text))


@pytest.mark.parametrize("text", NOT_DOUBLES)
def test_parse_double_refuses(text: str) -> None:
    with pytest.raises(EvaluationError, match="NumberFormatException"):
        parse_double(text)


@given(st.floats(allow_nan=False))
def test_parse_double_reads_back_what_python_and_java_print(x: float) -> None:
    text = repr(x).replace("inf", "Infinity")
    assert struct.pack(">d", parse_double(text)) == struct.pack(">d", x)
    assert struct.pack(">d", parse_double(x.hex().replace("inf", "Infinity"))) == struct.pack(">d", x)


@pytest.mark.parametrize(
    ("text", "value"),
    [("true", True), ("TRUE", True), ("tRuE", True), ("yes", False), ("", False), (" true", False)],
)
def test_parse_boolean(text: str, value: bool) -> None:
    assert parse_boolean(text) is value


DOUBLE_ORDER = [-math.inf, -1.0, -0.0, 0.0, 5e-324, 1.0, math.inf, math.nan]


@pytest.mark.parametrize("i", range(len(DOUBLE_ORDER)))
@pytest.mark.parametrize("j", range(len(DOUBLE_ORDER)))
def test_double_compare_is_a_total_order(i: int, j: int) -> None:
    """Double.compare: -0.0 below 0.0, NaN above +Infinity and equal to itself."""
    assert double_compare(DOUBLE_ORDER[i], DOUBLE_ORDER[j]) == (i > j) - (i < j)


COMPARES = [
    (JavaInt(1), JavaLong(2), -1),
    (JavaLong(3), JavaInt(2), 1),
    (JavaInt(1), 1.0, 0),
    (JavaLong(9007199254740993), 9007199254740992.0, 0),  # the Long is widened to a double
    (1.5, JavaInt(1), 1),
    ("5", JavaInt(5), 0),
    (JavaInt(5), "6", -1),
    ("5", 5.0, 0),
    ("true", True, 0),
    ("x", False, 0),  # Boolean.valueOf("x") is false
    (True, JavaInt(1), -1),  # no conversion between Boolean and a number
    (JavaInt(1), True, -1),
    (1.0, False, -1),
    ("a", "b", -1),
    ("\uffff", "\U00010000", 1),  # String.compareTo on UTF-16 units: U+FFFF > the high surrogate
    (False, True, -1),
    (True, True, 0),
]


@pytest.mark.parametrize(("lv", "rv", "sign"), COMPARES)
def test_java_compare(lv: object, rv: object, sign: int) -> None:
    c = java_compare(lv, rv)  # type: ignore[arg-type]
    assert (c > 0) - (c < 0) == sign


@pytest.mark.parametrize(("lv", "rv"), [(True, "true"), ("x", JavaInt(1)), (JavaLong(1), "1.5"), (1.0, "x")])
def test_java_compare_raises_where_java_throws(lv: object, rv: object) -> None:
    with pytest.raises(EvaluationError):
        java_compare(lv, rv)  # type: ignore[arg-type]


def test_java_equals() -> None:
    assert java_equals(math.nan, math.nan)  # Double.equals compares the bits
    assert not java_equals(0.0, -0.0)
    assert not java_equals(JavaInt(1), JavaLong(1))  # Integer.equals(Long) is false
    assert java_equals("x", "x")


def test_negate() -> None:
    assert repr(negate(JavaInt(5))) == "JavaInt(-5)"
    assert repr(negate(JavaLong(2147483648))) == "JavaLong(-2147483648)"
    assert negate(JavaInt(INT_MIN)) == INT_MIN  # wraps as Java's int does
    assert negate(JavaLong(LONG_MIN)) == LONG_MIN
    assert negate(1.5) == -1.5
    assert negate("5") is None
    assert negate(True) is None
    assert negate(None) is None
