"""What an expression gives for a message's properties, through both evaluators.

Rows marked (ExpressionTest), (FilterSpiTest) and (SqlFilterIT) are RocketMQ's own expectations
from its filter module and integration tests, with the properties as the broker passes them
(strings). The rest pin RocketMQ's rules for missing properties, type mismatches and the
three-valued logic, each derived from the Java classes named in rocketlite.filter's modules.
"""

from __future__ import annotations

import pytest

from rocketlite.filter import compile
from rocketlite.filter.parser import MAX_NESTING
from tests.filter.support import ERROR, EVALUATORS, Outcome, outcome

T, F, N = True, False, None

ROWS: list[tuple[str, dict[str, str], Outcome]] = [
    # (ExpressionTest) AND / OR
    ("a=3 and b<>4 And c>5 AND d<=4", {"a": "3", "b": "5", "c": "6", "d": "1"}, T),
    ("a=3 and b<>4 And c>5 AND d<=4", {"a": "4", "b": "5", "c": "6", "d": "1"}, F),
    ("a=3 or b<>4 Or c>5 OR d<=4", {"a": "3"}, T),
    ("a=3 or b<>4 Or c>5 OR d<=4", {"a": "4", "b": "5"}, T),
    ("a=3 or b<>4 Or c>5 OR d<=4", {"a": "4", "b": "4", "c": "6"}, T),
    ("a=3 or b<>4 Or c>5 OR d<=4", {"a": "4", "b": "4", "c": "3", "d": "2"}, T),
    ("a=3 or b<>4 Or c>5 OR d<=4", {"a": "4", "b": "4", "c": "3", "d": "10"}, F),
    # (ExpressionTest) IN, BETWEEN, IS NULL
    ("a in ('3', '4', '5')", {"a": "3"}, T),
    ("a in ('3', '4', '5')", {"a": "5"}, T),
    ("a in ('3', '4', '5')", {"a": "8"}, F),
    ("a not in ('3', '4', '5')", {"a": "8"}, T),
    ("a not in ('3', '4', '5')", {"a": "4"}, F),
    ("a between 2 and 10", {"a": "2"}, T),
    ("a between 2 and 10", {"a": "10"}, T),
    ("a between 2 and 10", {"a": "1"}, F),
    ("a between 2 and 10", {"a": "11"}, F),
    ("a not between 2 and 10", {"a": "1"}, T),
    ("a not between 2 and 10", {"a": "11"}, T),
    ("a not between 2 and 10", {"a": "3"}, F),
    ("a is null", {"abc": "2"}, T),
    ("a is null", {"a": "2"}, F),
    ("a is not null", {"a": "2"}, T),
    ("a is not null", {"abc": "2"}, F),
    ("a is not null and a='hello'", {"a": "hello"}, T),
    ("a is not null and a='hello'", {}, F),
    ("a=TRUE OR b=FALSE", {"a": "true", "b": "false"}, T),
    ("a=TRUE OR b=FALSE", {"a": "false", "b": "true"}, F),
    ("a is null OR a='hello'", {}, T),
    ("a is null OR a='hello'", {"a": "hello"}, T),
    ("a is null OR a='hello'", {"a": "abc"}, F),
    ("TAGS is not null and TAGS='''''tag'''''", {"TAGS": "''tag''"}, T),
    # (ExpressionTest) numbers and strings
    ("a > 3.1E10", {"a": "3.1415E10"}, T),
    ("a > 3.14", {"a": "3.1415"}, T),
    ("a > b", {"a": "10", "b": "20"}, F),
    ("a > b", {"a": "20", "b": "10"}, T),
    ("a between up and low", {"a": "3.14"}, N),
    ("a between up and low", {"a": "3.14", "up": "up", "low": "low"}, ERROR),
    ("key is not null and key between 0 and 100", {"key": "con"}, ERROR),
    ("a between 0 and 100", {"a": "abc"}, ERROR),
    ("a=b", {"a": "3.14", "b": "3.14"}, T),
    ("a<>b", {"a": "3.14", "b": "3.14"}, F),
    ("a<>b", {"a": "3.14", "b": "3.141"}, T),
    # (ExpressionTest) CONTAINS, STARTSWITH, ENDSWITH
    ("value contains 'x'", {"value": "axb"}, T),
    ("value startswith 'ax'", {"value": "axb"}, T),
    ("value endswith 'xb'", {"value": "axb"}, T),
    ("value not contains 'x'", {"value": "axb"}, F),
    ("value not startswith 'ax'", {"value": "axb"}, F),
    ("value not endswith 'xb'", {"value": "axb"}, F),
    ("value contains 'x'", {"value": "abb"}, F),
    ("value not startswith 'x'", {"value": "abb"}, T),
    ("value contains ''", {"value": "axb"}, F),
    ("value not endswith ''", {"value": "axb"}, F),
    ("value contains 'x'", {}, F),
    ("value not contains 'x'", {}, F),
    ("value not startswith 'x'", {}, F),
    ("value not endswith 'x'", {}, F),
    ("'axb' contains 'x'", {}, T),
    ("'axb' not startswith 'ax'", {}, F),
    ("'axb' endswith 'u'", {}, F),
    ("'axb' not endswith 'u'", {}, T),
    ("' ' contains ' '", {}, T),
    ("'axb' contains '.'", {}, F),
    ("'s' contains '\\'", {}, F),
    (
        "a not in ('4', '4', '5') and b between 3 and 10 and c not contains 'axbc'",
        {"a": "3", "b": "3", "c": "axbdc"},
        T,
    ),
    (
        "a not in ('4', '4', '5') and b between 3 and 10 and c not startswith 'axbc'",
        {"a": "3", "b": "3", "c": "axbdc"},
        T,
    ),
    # (FilterSpiTest), (SqlFilterIT)
    ("a is not null and a > 0", {}, F),
    ("(TAGS is not null and TAGS in ('TagA', 'TagB'))", {"TAGS": "TagB"}, T),
    ("(TAGS is not null and TAGS in ('TagA', 'TagB'))", {"TAGS": "TagC"}, F),
    ("(TAGS is not null and TAGS in ('TagA', 'TagB'))", {}, F),
    # missing properties: null on the left of = is unknown, on the right false; two are equal
    ("a = 'x'", {}, N),
    ("'x' = a", {}, F),
    ("a <> 'x'", {}, N),
    ("'x' <> a", {}, T),
    ("NOT (a = 'x')", {}, N),
    ("a = b", {}, T),
    ("a = b", {"a": "1"}, F),
    ("a = b", {"b": "1"}, N),
    ("a = 5", {}, N),
    ("5 = a", {}, F),
    ("a = TRUE", {}, N),
    ("TRUE = a", {}, F),
    ("a > 5", {}, N),
    ("5 < a", {}, N),
    ("a > b", {"a": "1"}, N),
    ("a IN ('x')", {}, N),
    ("a NOT IN ('x')", {}, N),
    ("NOT (a IN ('x'))", {}, N),
    ("NOT (a CONTAINS 'x')", {}, T),
    ("a", {}, N),
    ("a", {"a": "true"}, F),
    ("NOT a", {"a": "x"}, T),
    ("NOT a", {}, N),
    ("(a = 1) IS NULL", {}, T),
    ("(a = 1) IS NULL", {"a": "2"}, F),
    ("NOT a IS NULL", {}, T),  # (NOT a) IS NULL
    ("NOT a IS NULL", {"a": "x"}, F),
    ("a = -b", {}, T),  # -b is always null
    ("a = -b", {"a": "1"}, F),
    ("-a > 5", {"a": "9"}, N),
    ("a = -NULL", {"a": "1"}, F),
    ("a > -'x'", {"a": "1"}, N),
    ("-TRUE > 1", {}, N),
    # three-valued logic
    ("TRUE", {}, T),
    ("FALSE", {}, F),
    ("NULL", {}, N),
    ("NOT NULL", {}, N),
    ("TRUE AND NULL", {}, N),
    ("NULL AND FALSE", {}, F),
    ("FALSE OR NULL", {}, N),
    ("NULL OR TRUE", {}, T),
    ("NOT NOT NOT TRUE", {}, F),
    ("a = 1 AND b = 1", {"b": "1"}, N),
    ("a = 1 AND b = 1", {"b": "2"}, F),
    ("a = 1 OR b = 1", {"b": "1"}, T),
    ("a = 1 OR b = 1 OR c = 1", {"c": "2"}, N),
    ("a = 1 AND b = 1 AND c = 1", {"a": "1", "b": "1", "c": "1"}, T),
    # a property read as the literal's class
    ("a > 5", {"a": "5.5"}, ERROR),
    ("a > 5", {"a": " 6"}, ERROR),
    ("a > 5", {"a": "+6"}, T),
    ("a > 5", {"a": "\u0666"}, T),  # ARABIC-INDIC DIGIT SIX: Character.digit reads it
    ("a > 5", {"a": "6L"}, ERROR),
    ("a > 5", {"a": "3000000000"}, ERROR),  # Integer.valueOf overflows
    ("a > 3000000000", {"a": "3000000001"}, T),
    ("a > -2147483648", {"a": "3000000000"}, T),  # 2147483648 is a Long, negated still a Long
    ("a > 5L", {"a": "3000000000"}, ERROR),  # 5L fits an Integer, so it is one
    ("a < 9223372036854775807", {"a": "9223372036854775808"}, ERROR),
    ("a > 5.0", {"a": "5.5"}, T),
    ("a > 5.0", {"a": " 5.5\t"}, T),
    ("a > 5.0", {"a": "5.5f"}, T),
    ("a > 5.0", {"a": "0x1.8p3"}, T),
    ("a > 5.0", {"a": "NaN"}, T),  # Double.compare: NaN above everything
    ("a < 5.0", {"a": "NaN"}, F),
    ("5.0 < a", {"a": "NaN"}, T),
    ("a >= 5.0", {"a": "Infinity"}, T),
    ("a > 5.0", {"a": "inf"}, ERROR),
    ("a > 5.0", {"a": "1_0"}, ERROR),
    ("a > 5.0", {"a": "\u0666"}, ERROR),  # Double.valueOf reads ASCII digits only
    ("a > b", {"a": "10", "b": "9.5"}, T),
    ("a > b", {"a": "-0.0", "b": "0.0"}, F),
    ("a < b", {"a": "-0.0", "b": "0.0"}, T),
    ("a > b", {"a": "NaN", "b": "Infinity"}, T),
    ("a > b", {"a": "x", "b": "1"}, ERROR),
    ("a = b", {"a": "1.0", "b": "1"}, F),
    ("a = 5", {"a": "5"}, T),
    ("a = 5", {"a": "05"}, T),
    ("a = 5", {"a": "abc"}, ERROR),
    ("a <> 5", {"a": "abc"}, ERROR),
    ("5 = a", {"a": "5"}, T),
    ("5 = a", {"a": "x"}, ERROR),
    ("a = 5.0", {"a": "5"}, T),
    ("a = 1.5", {"a": "1.50"}, T),
    ("a = TRUE", {"a": "TRUE"}, T),
    ("a = TRUE", {"a": "yes"}, F),
    ("a = FALSE", {"a": "yes"}, T),
    ("TRUE = a", {"a": "true"}, ERROR),  # ClassCastException in RocketMQ
    ("NOT a = 'x'", {"a": "x"}, ERROR),  # (NOT a) = 'x': a Boolean against a String
    ("NOT a = 'x'", {}, N),
    ("(NOT a) CONTAINS 'x'", {"a": "x"}, F),
    ("(a = 'x') CONTAINS 'x'", {"a": "x"}, F),
    ("(a = 1) = TRUE", {"a": "1"}, T),
    ("(a = 1) = TRUE", {"a": "2"}, F),
    ("(a = 1) = TRUE", {}, N),
    # literals against literals
    ("1 = 1", {}, T),
    ("1 = 1.0", {}, T),
    ("3000000000 = 3000000000", {}, T),
    ("1 = 3000000000", {}, F),
    ("'1' = 1", {}, T),
    ("'a' = 1", {}, ERROR),
    ("1 = TRUE", {}, F),
    ("TRUE = FALSE", {}, F),
    ("NULL IS NULL", {}, T),
    ("'' IS NULL", {}, F),
    ("2 > 1", {}, T),
    ("-1 < -0.5", {}, T),
    ("- -1 = 1", {}, T),
    # an error only counts where evaluation reaches it
    ("a = 'x' OR b > 1", {"a": "x", "b": "oops"}, T),
    ("b > 1 OR a = 'x'", {"a": "x", "b": "oops"}, ERROR),
    ("a = 'y' AND b > 1", {"a": "x", "b": "oops"}, F),
    ("a IS NULL AND b > 1", {"a": "x", "b": "oops"}, F),
    ("a = 'x' AND b > 1", {"a": "x", "b": "oops"}, ERROR),
    ("b > 1 AND a = 'y'", {"a": "x", "b": "oops"}, ERROR),
    # the rest of the text after a complete expression is not read
    ("a = 1 b = 2", {"a": "1"}, T),
    ("a = 1 )", {"a": "1"}, T),
    ("a = 007", {"a": "0"}, T),  # 0, then stray 0 and 7
    ("a = 1 -- no line break, so two minus signs", {"a": "1"}, T),
    ("a = --1", {"a": "1"}, T),
    ("a LIKE 'x%'", {"a": "x"}, F),  # the bare property a, then stray text
    # keywords in any case, names as written
    ("a Is NoT nUlL aNd a BeTwEeN 1 AnD 2", {"a": "1"}, T),
    ("a iN ('x') oR a sTaRtSwItH 'y'", {"a": "yz"}, T),
    ("A = 'x'", {"a": "x"}, N),
    ("$a = 'x' AND _b1 = 'y'", {"$a": "x", "_b1": "y"}, T),
    ("/* lead */ a /* mid */ = -- to the end of the line\n 1", {"a": "1"}, T),
    ("a\t=\r\n1\f", {"a": "1"}, T),
    ("a = 'it''s'", {"a": "it's"}, T),
    ("a = 'ünïcødé ✓'", {"a": "ünïcødé ✓"}, T),
    ("a IN ('p', 'q', 'r', 's', 't', 'u')", {"a": "u"}, T),
]


@pytest.mark.parametrize("evaluator", EVALUATORS)
@pytest.mark.parametrize(("expression", "props", "expected"), ROWS)
def test_value(evaluator: str, expression: str, props: dict[str, str], expected: Outcome) -> None:
    f = compile(expression)
    assert outcome(EVALUATORS[evaluator], f, props) == expected
    assert f.matches(props) is (expected is True)


@pytest.mark.parametrize("evaluator", EVALUATORS)
@pytest.mark.parametrize(
    ("a", "b", "and_", "or_"),
    [
        (T, T, T, T),
        (T, F, F, T),
        (T, N, N, T),
        (F, T, F, T),
        (F, F, F, F),
        (F, N, F, N),
        (N, T, N, T),
        (N, F, F, N),
        (N, N, N, N),
    ],
)
def test_kleene_tables(
    evaluator: str, a: bool | None, b: bool | None, and_: bool | None, or_: bool | None
) -> None:
    """AND, OR and NOT over TRUE, FALSE and unknown, the unknowns made by a missing property."""
    spelled = {T: "x = 'x'", F: "x = 'y'", N: "missing = 'x'"}
    props = {"x": "x"}
    evaluate = EVALUATORS[evaluator]
    assert outcome(evaluate, compile(f"{spelled[a]} AND {spelled[b]}"), props) == and_
    assert outcome(evaluate, compile(f"{spelled[a]} OR {spelled[b]}"), props) == or_
    assert outcome(evaluate, compile(f"NOT ({spelled[a]})"), props) == (None if a is None else not a)


def test_long_chains_evaluate_without_deep_recursion() -> None:
    """AND/OR chains are loops, and NOT NOT x is x: thousands of terms cost no recursion."""
    terms = [f"p{i} = '{i}'" for i in range(3000)]
    props = {f"p{i}": str(i) for i in range(3000)}
    assert compile(" AND ".join(terms)).matches(props)
    assert not compile(" AND ".join(terms)).matches({**props, "p2999": "x"})
    assert compile(" OR ".join(terms)).matches({"p2999": "2999"})
    assert compile("NOT " * MAX_NESTING + "TRUE").evaluate({}) is (MAX_NESTING % 2 == 0)


def test_matches_is_false_where_java_throws() -> None:
    f = compile("a > 5")
    assert f.matches({"a": "6"})
    assert not f.matches({"a": "6.5"})  # Integer.valueOf fails: logged and skipped by RocketMQ


def test_compiled_filters_are_cached_by_text() -> None:
    assert compile("a = 'cached'") is compile("a = 'cached'")


def test_names_are_the_properties_read() -> None:
    assert compile("TAGS IN ('a') AND (x > 5 OR NOT y) AND -z = 1 AND 'k' = 'k'").names == {
        "TAGS",
        "x",
        "y",
        "z",
    }
    assert compile("TRUE").names == frozenset()
    chain = " OR ".join(f"p{i} = '{i}'" for i in range(3000))
    assert len(compile(chain).names) == 3000
