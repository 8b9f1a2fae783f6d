"""What compiles, into which tree, and how a refusal names its cause and position.

Rows marked (ParserTest) and (ExpressionTest) are the parses RocketMQ's own filter tests expect
to succeed or fail.
"""

from __future__ import annotations

import pytest

from rocketlite.filter import FilterSyntaxError, compile
from rocketlite.filter.java_values import JavaInt, JavaLong
from rocketlite.filter.lexer import tokenize
from rocketlite.filter.nodes import (
    And,
    BooleanCast,
    BooleanConstant,
    Compare,
    Constant,
    Equal,
    In,
    IsNull,
    Negate,
    Not,
    Or,
    Property,
    StringTest,
)
from rocketlite.filter.parser import MAX_NESTING, parse
from rocketlite.protocol.codes import ResponseCode
from rocketlite.protocol.errors import RocketliteError

a, b = Property("a"), Property("b")

TREES = [
    # precedence: OR below AND below = below > below unary; loops are left-associative
    (
        "a = 1 OR b = 2 AND a = 3",
        Or(
            Equal(a, Constant(JavaInt(1))),
            And(Equal(b, Constant(JavaInt(2))), Equal(a, Constant(JavaInt(3)))),
        ),
    ),
    ("a OR b OR TRUE", Or(Or(BooleanCast(a), BooleanCast(b)), BooleanConstant(True))),
    ("NOT a = 'x'", Equal(Not(BooleanCast(a)), Constant("x"))),
    ("a > 1 = TRUE", Equal(Compare(">", a, Constant(JavaInt(1))), BooleanConstant(True))),
    ("a <> b", Not(Equal(a, b))),
    ("a IS NOT NULL", Not(IsNull(a))),
    (
        "a BETWEEN 1 AND 2",
        And(Compare(">=", a, Constant(JavaInt(1))), Compare("<=", a, Constant(JavaInt(2)))),
    ),
    (
        "a NOT BETWEEN 1 AND 2",
        Or(Compare("<", a, Constant(JavaInt(1))), Compare(">", a, Constant(JavaInt(2)))),
    ),
    ("a NOT IN ('x', 'y''z')", In(a, ("x", "y'z"), True)),
    ("a NOT ENDSWITH 'q'", StringTest("ENDSWITH", a, "q", True)),
    ("a = -(+5)", Equal(a, Negate(Constant(JavaInt(5))))),
    ("(a)", BooleanCast(a)),
    ("NULL", BooleanConstant(None)),
    # literal classes: Integer when it fits, else Long; floats are Doubles
    ("a = 2147483647", Equal(a, Constant(JavaInt(2147483647)))),
    ("a = 2147483648", Equal(a, Constant(JavaLong(2147483648)))),
    ("a = 10L", Equal(a, Constant(JavaInt(10)))),
    ("a = 9223372036854775807l", Equal(a, Constant(JavaLong(9223372036854775807)))),
    ("a = 1.", Equal(a, Constant(1.0))),
    ("a = .5e1", Equal(a, Constant(5.0))),
    ("a = 00.25", Equal(a, Constant(0.25))),
]


@pytest.mark.parametrize(("text", "tree"), TREES, ids=[t for t, _ in TREES])
def test_tree(text: str, tree: object) -> None:
    parsed = parse(text)
    assert parsed == tree
    assert repr(parsed) == repr(tree)  # JavaInt and JavaLong differ in repr, not in ==


@pytest.mark.parametrize(("text", "_"), TREES)
def test_text_round_trip(text: str, _: object) -> None:
    tree = parse(text)
    assert repr(parse(str(tree))) == repr(tree)


VALID = [
    # (ParserTest)
    "a=3 and b<>4 And c>5 AND d<=4",
    "a=3 or b<>4 Or c>5 OR d<=4",
    "a in ('3', '4', '5')",
    "(a not in ('6', '4', '5')) or (b in ('3', '4', '5'))",
    "(a between 2 and 10) AND (b not between 6 and 9)",
    "a is null",
    "a is not null",
    "a <= now",
    "a=3 and b contains 'xxx' and c not contains 'xxx'",
    # checks RocketMQ does not make
    "a BETWEEN -1 AND -2",  # negated bounds are no literals: not checked
    "a NOT BETWEEN 2 AND 1",
    "a BETWEEN 1 AND 1",
    "a BETWEEN 1 AND 1.5",
    "(a) IN ('x')",
    "1 = TRUE",
    "FALSE = TRUE",
    "a = -NULL",
    "a > -'x'",
    "-TRUE > 1",
    "'x' CONTAINS 'x'",
    "a = 0",
    "a > 4.9E-324",
    "a < 1.7976931348623157E308",
    "a = 1 )",
    "a = 1 b",
    "a LIKE 'x'",
    "a = 1 -- trailing comment\n",
    "a = 1 --\n",
    "a = 1 -- no line break",
    "a = 1 /* closed */",
    "(" * MAX_NESTING + "a" + ")" * MAX_NESTING,
    "-" * MAX_NESTING + "1 = a",
]


@pytest.mark.parametrize("text", VALID)
def test_valid(text: str) -> None:
    compile(text)


INVALID = [
    # (ParserTest, ExpressionTest)
    ("a and between 2 and 10", "unexpected 'between'", 7),
    ("a > 100000000000000000000000", "out of the range of a Long", 5),
    (" a between 10 and 0", "lower bound is above the upper", 4),
    ("value contains x", "expected a string literal", 16),
    ("value not contains 123", "expected a string literal", 20),
    ("'axb' contains ", "unexpected end of expression", 16),
    # build-time checks
    ("a = NULL", "NULL cannot be compared by =", 3),
    ("NULL <> a", "NULL cannot be compared by <>", 6),
    ("TRUE = 1", "TRUE cannot be compared with 1", 6),
    ("FALSE = 'x'", "FALSE cannot be compared with 'x'", 7),
    ("a > 'x'", "'x' cannot be compared by >", 3),
    ("TRUE <= a", "TRUE cannot be compared by <=", 6),
    ("a >= NULL", "NULL cannot be compared by >=", 3),
    ("a < (b = 1)", "the boolean (b = 1) cannot be compared by <", 3),
    ("NOT a > 1", "the boolean (NOT a) cannot be compared by >", 7),
    ("a BETWEEN 'a' AND 'b'", "'a' cannot be compared by >=", 3),
    ("a BETWEEN NULL AND 1", "bounds of BETWEEN cannot be NULL", 3),
    ("a BETWEEN 2 AND 1.5", "lower bound is above the upper", 3),
    ("a BETWEEN 'x' AND TRUE", "bounds of BETWEEN cannot be compared", 3),  # Boolean cast to String
    ("a BETWEEN TRUE AND 'x'", "lower bound is above the upper", 3),  # 'x' read as false
    ("'x' IN ('x')", "IN needs a property on its left, not 'x'", 5),
    ("NOT a NOT IN ('x')", "NOT IN needs a property", 7),
    ("5", "5 does not give a boolean value", 1),
    ("'x'", "'x' does not give a boolean value", 1),
    ("-a", "(-a) does not give a boolean value", 1),
    ("a AND 5", "5 does not give a boolean value", 7),
    ("5 OR a", "5 does not give a boolean value", 1),
    ("NOT 'x'", "does not give a boolean value", 5),
    ("a > 0.0", "0.0 is less than the smallest positive Double", 5),
    ("a > 1e-400", "less than the smallest positive Double", 5),
    ("a > 1e400", "greater than the largest Double", 5),
    ("a > " + "1" * 20000 + ".5", "greater than the largest Double", 5),
    ("a = 9223372036854775808", "out of the range of a Long", 5),
    # grammar
    ("", "unexpected end of expression", 1),
    ("  \n ", "unexpected end of expression", 2),
    ("a =", "unexpected end of expression", 4),
    ("(a = 1", "expected ')'", 7),
    ("a IS 5", "expected NULL or NOT NULL after IS", 6),
    ("a IS NOT 5", "expected NULL after IS NOT", 10),
    ("a NOT b", "expected CONTAINS, STARTSWITH, ENDSWITH, BETWEEN or IN after NOT", 7),
    ("a = 1 NOT", "after NOT", 10),
    ("a IN ()", "expected a string literal", 7),
    ("a IN ('x',)", "expected a string literal", 11),
    ("a IN ('x' 'y')", "expected ',' or ')' in the IN list", 11),
    ("a IN 'x'", "expected '(' after IN", 6),
    ("a BETWEEN 1 OR 2", "expected AND between the bounds of BETWEEN", 13),
    ("a == 1", "unexpected '='", 4),
    ("= 1", "unexpected '='", 1),
    ("a = 1 AND", "unexpected end of expression", 10),
    ("a = --1\n", "unexpected end of expression", 1),  # a comment to the line break
    # lexical errors, raised only where the parser reads
    ("a != 1", "unexpected character '!'", 3),
    ("a = 1 # 2", "unexpected character '#'", 7),
    ("a = 'x", "string literal is not closed", 5),
    ("a = 1 /* open", "comment is not closed", 7),
    ("a.b = 1", "a '.' must be followed by a digit", 2),
    ("a = \u00e9", "unexpected character 'é'", 5),
    ("\u00e9 = 1", "unexpected character 'é'", 1),
    ("a = 1 AND\n  b = \u00a0", "unexpected character '\\xa0'", 7),
    # depth
    ("(" * (MAX_NESTING + 1) + "a" + ")" * (MAX_NESTING + 1), "nested parentheses", MAX_NESTING + 1),
    ("NOT " * (MAX_NESTING + 1) + "a", "nested parentheses and unary operators", 4 * MAX_NESTING + 1),
]


@pytest.mark.parametrize(("text", "reason", "column"), INVALID, ids=[t[:40] for t, _, _ in INVALID])
def test_invalid(text: str, reason: str, column: int) -> None:
    with pytest.raises(FilterSyntaxError) as caught:
        compile(text)
    err = caught.value
    assert reason in err.reason
    assert err.column == column, str(err)
    assert isinstance(err, RocketliteError)
    assert err.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED
    assert int(err.code) == 23
    assert str(err) == f"invalid SQL92 expression: {err.reason} at line {err.line}, column {err.column}"
    assert err.remark == str(err)


def test_position_counts_lines_as_javacc_does() -> None:
    with pytest.raises(FilterSyntaxError) as caught:
        compile("a = 1 AND\r\n  b = 2 AND\r  c > 'x'")
    assert (caught.value.line, caught.value.column, caught.value.offset) == (3, 5, 27)


def test_a_cached_error_is_raised_afresh() -> None:
    """Errors are cached with the filters, but each caller gets its own exception."""
    with pytest.raises(FilterSyntaxError) as first:
        compile("a = NULL")
    with pytest.raises(FilterSyntaxError) as second:
        compile("a = NULL")
    assert first.value is not second.value
    assert str(first.value) == str(second.value)


def test_deep_parentheses_in_a_deep_stack() -> None:
    """A caller already deep in its stack gets a FilterSyntaxError, not a RecursionError."""

    def nested(depth: int) -> FilterSyntaxError | None:
        if depth:
            return nested(depth - 1)
        try:
            compile("(" * MAX_NESTING + "a" + ")" * MAX_NESTING + " ")  # not in the cache yet
        except FilterSyntaxError as exc:
            return exc
        return None

    err = nested(850)
    assert err is not None and "nested too deeply" in err.reason
    compile("(" * MAX_NESTING + "a" + ")" * MAX_NESTING + " ")  # the error was not cached


TOKENS = [
    ("NOTE", ["ID"]),
    ("NOT", ["NOT"]),
    ("not(", ["NOT", "("]),
    ("InX in", ["ID", "IN"]),
    ("<><=>=<>", ["<>", "<=", ">=", "<>"]),
    ("0L", ["DECIMAL", "ID"]),
    ("10L", ["DECIMAL"]),
    ("007", ["DECIMAL", "DECIMAL", "DECIMAL"]),
    ("007.5", ["FLOAT"]),
    ("1.5.5", ["FLOAT", "FLOAT"]),
    ("1e", ["DECIMAL", "ID"]),
    ("1e+5", ["FLOAT"]),
    ("1.5f", ["FLOAT", "ID"]),
    ("'a''b' 'c'", ["STRING", "STRING"]),
    ("'a'' b'", ["STRING"]),
    ("---", ["-", "-", "-"]),
    ("--x\r\ny", ["ID"]),
    ("/* a */ /**/ /***/ b", ["ID"]),
    ("$_9", ["ID"]),
]


@pytest.mark.parametrize(("text", "kinds"), TOKENS)
def test_tokens(text: str, kinds: list[str]) -> None:
    assert [t.kind for t in tokenize(text)] == [*kinds, "EOF"]


def test_lexing_stops_at_the_first_error() -> None:
    """The longest string literal at "'a'' b" is 'a'; what follows opens a string never closed."""
    assert [t.kind for t in tokenize("'a'' b")] == ["STRING", "ERROR"]
    assert [t.kind for t in tokenize("a # b")] == ["ID", "ERROR"]


def test_string_literal_value() -> None:
    tok = tokenize("'it''s ''quoted'''")[0]
    assert tok.value == "it's 'quoted'"
