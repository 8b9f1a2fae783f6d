"""Property tests: generated expressions and messages.

- The fast evaluator (closures, `compiled.py`) and the reference (the tree walk, `nodes.py`) give
  the same value, or both raise, for every generated expression and message, and for every
  operand shape the fast evaluator special-cases against every message of a small exhaustive set.
- A compiled tree written back as text (`str`) parses to the same tree.
- AND, OR and NOT follow a brute-force three-valued (Kleene) logic, on expressions whose atoms'
  values are known.
- Any text at all either compiles or raises `FilterSyntaxError`: nothing else escapes.
"""

from __future__ import annotations

import pytest
from hypothesis import find, given, settings
from hypothesis import strategies as st

from rocketlite.filter import FilterSyntaxError, Sql92Filter, compile
from rocketlite.filter.parser import parse
from tests.filter.support import ERROR, EVALUATORS, Outcome, outcome

NAMES = ["a", "b", "TAGS"]
PROPERTY_VALUES = ["5", "10", "-3", "2.5", "1e3", "NaN", "-0.0", "Infinity", "abc", "true", "TRUE", "x",
                   " 7", "+4", "0x1p3", "\u0666", "3000000000", "it's", "5.0f"]  # fmt: skip
LITERALS = ["5", "0", "10L", "3000000000", "2.5", ".5", "1e3", "'abc'", "'5'", "''", "'it''s'", "'x'"]
OPERATORS = ["=", "<>", ">", ">=", "<", "<="]
NUMBERS = ["5", "0", "10L", "3000000000", "2.5", ".5", "1e3", "- 4", "-2.5"]
ODD_LITERALS = ["TRUE", "false", "NULL", "9223372036854775808", "0.0"]  # refused in most places
STRINGS = ["'x'", "'abc'", "''", "'5'", "'it''s'", "'a'"]

messages = st.fixed_dictionaries({}, optional={name: st.sampled_from(PROPERTY_VALUES) for name in NAMES})

# Mostly operands a comparison accepts (repeated branches weigh more), some that it refuses.
leaf = st.sampled_from(NAMES * 4 + LITERALS + ODD_LITERALS)
operand: st.SearchStrategy[str] = st.deferred(
    lambda: st.one_of(
        leaf,
        leaf,
        leaf,
        st.tuples(st.sampled_from(["- ", "+", "NOT "]), operand).map("".join),
        condition.map(lambda c: f"({c})"),
    )
)
comparison: st.SearchStrategy[str] = st.one_of(
    st.tuples(operand, st.sampled_from(OPERATORS), operand).map(" ".join),
    st.tuples(  # the usual shapes: property against number, or against property
        st.sampled_from(NAMES), st.sampled_from(OPERATORS), st.sampled_from(NUMBERS + NAMES)
    ).map(" ".join),
    st.tuples(st.sampled_from(NUMBERS), st.sampled_from(OPERATORS), st.sampled_from(NAMES)).map(" ".join),
    st.builds(
        "{} {} {} AND {}".format,
        operand,
        st.sampled_from(["BETWEEN", "NOT BETWEEN", "between"]),
        operand,
        operand,
    ),
    st.builds(
        "{} {} ({})".format,
        operand,
        st.sampled_from(["IN", "NOT IN", "in"]),
        st.lists(st.sampled_from(STRINGS), min_size=1, max_size=6).map(", ".join),
    ),
    st.tuples(operand, st.sampled_from(["IS NULL", "IS NOT NULL", "is not null"])).map(" ".join),
    st.tuples(
        operand,
        st.sampled_from(
            ["CONTAINS", "NOT CONTAINS", "STARTSWITH", "NOT STARTSWITH", "ENDSWITH", "not endswith"]
        ),
        st.sampled_from(STRINGS),
    ).map(" ".join),
)
condition: st.SearchStrategy[str] = st.deferred(
    lambda: st.one_of(
        comparison,
        comparison,
        st.sampled_from([*NAMES, "TRUE", "FALSE", "NULL"]),
        condition.map(lambda c: f"NOT ({c})"),
        st.tuples(condition, st.sampled_from(["AND", "OR", "and", "Or"]), condition).map(" ".join),
    )
)


def _compiles(text: str) -> Sql92Filter | None:
    try:
        return compile(text)
    except FilterSyntaxError:
        return None


@settings(max_examples=400, deadline=None)
@given(condition, st.lists(messages, min_size=1, max_size=6))
def test_compiled_agrees_with_reference(text: str, props_list: list[dict[str, str]]) -> None:
    f = _compiles(text)
    if f is None:
        return
    for props in props_list:
        fast = outcome(EVALUATORS["compiled"], f, props)
        assert fast == outcome(EVALUATORS["reference"], f, props), (text, str(f.tree), props)
        assert f.matches(props) is (fast is True)


@settings(max_examples=300, deadline=None)
@given(condition)
def test_text_round_trip(text: str) -> None:
    f = _compiles(text)
    if f is None:
        return
    again = parse(str(f.tree))
    assert repr(again) == repr(f.tree), (text, str(f.tree))


# Every pairing of operand kinds the fast evaluator special-cases (property, Integer, Long, Double,
# string, boolean, null, negated property, boolean expression), with every operator, against every
# message over two properties drawn from values that take each conversion path.
SHAPE_OPERANDS = [
    "a",
    "b",
    "5",
    "3000000000",
    "2.5",
    "- 2.5",
    "'x'",
    "'5'",
    "TRUE",
    "NULL",
    "- a",
    "(a = 'x')",
]
SHAPE_VALUES = [None, "5", "2.5", "NaN", "-0.0", "x", "true", "3000000000", "\u0666"]
SHAPE_MESSAGES = [
    {k: v for k, v in (("a", va), ("b", vb)) if v is not None} for va in SHAPE_VALUES for vb in SHAPE_VALUES
]


@pytest.mark.parametrize("op", [*OPERATORS, "BETWEEN"])
def test_every_shape_agrees_with_reference(op: str) -> None:
    compiled = 0
    for left in SHAPE_OPERANDS:
        for right in SHAPE_OPERANDS:
            f = _compiles(f"{left} BETWEEN {right} AND {left}" if op == "BETWEEN" else f"{left} {op} {right}")
            if f is None:
                continue
            compiled += 1
            for props in SHAPE_MESSAGES:
                fast = outcome(EVALUATORS["compiled"], f, props)
                assert fast == outcome(EVALUATORS["reference"], f, props), (f.expression, props)
    assert compiled >= 40


def _kleene_and(x: Outcome, y: Outcome) -> Outcome:
    return False if False in (x, y) else None if None in (x, y) else True


def _kleene_or(x: Outcome, y: Outcome) -> Outcome:
    return True if True in (x, y) else None if None in (x, y) else False


# Atoms whose value for KLEENE_MESSAGE is known: (text, value).
ATOMS = [
    ("TRUE", True),
    ("FALSE", False),
    ("NULL", None),
    ("x = 'x'", True),
    ("x <> 'x'", False),
    ("missing = 'x'", None),
    ("x IS NULL", False),
    ("missing IS NULL", True),
    ("missing", None),
    ("x", False),
    ("n > 4", True),
    ("n < 4.5", False),
    ("missing > 4", None),
    ("x IN ('x', 'y')", True),
    ("missing NOT IN ('x')", None),
    ("missing CONTAINS 'x'", False),
    ("x STARTSWITH 'x'", True),
]
KLEENE_MESSAGE = {"x": "x", "n": "5"}

formulas: st.SearchStrategy[tuple[str, Outcome]] = st.recursive(
    st.sampled_from(ATOMS),
    lambda kids: st.one_of(
        st.tuples(kids, kids).map(lambda t: (f"({t[0][0]} AND {t[1][0]})", _kleene_and(t[0][1], t[1][1]))),
        st.tuples(kids, kids).map(lambda t: (f"({t[0][0]} OR {t[1][0]})", _kleene_or(t[0][1], t[1][1]))),
        kids.map(lambda k: (f"NOT ({k[0]})", None if k[1] is None else not k[1])),
    ),
    max_leaves=40,
)


@settings(max_examples=300, deadline=None)
@given(formulas)
def test_logic_is_kleene(formula: tuple[str, Outcome]) -> None:
    text, expected = formula
    f = compile(text)
    for name, evaluate in EVALUATORS.items():
        assert outcome(evaluate, f, KLEENE_MESSAGE) == expected, (name, text)
    assert f.matches(KLEENE_MESSAGE) is (expected is True)


@settings(max_examples=500, deadline=None)
@given(st.text(alphabet="ab()'=<>!, .-+0159eEL\n\t*/#TRUEFALSNOTIDBWCHK$_\u00e9", max_size=60), messages)
def test_any_text_compiles_or_is_refused(text: str, props: dict[str, str]) -> None:
    f = _compiles(text)  # anything but FilterSyntaxError propagates and fails the test
    if f is not None:
        fast = outcome(EVALUATORS["compiled"], f, props)
        assert fast == outcome(EVALUATORS["reference"], f, props), (text, props)


@pytest.mark.parametrize("wanted", [True, False, None, ERROR])
def test_generators_reach_every_outcome(wanted: Outcome) -> None:
    """The agreement tests prove little unless generated pairs give every outcome."""

    def gives(pair: tuple[str, dict[str, str]]) -> bool:
        f = _compiles(pair[0])
        return f is not None and outcome(EVALUATORS["compiled"], f, pair[1]) == wanted

    find(
        st.tuples(condition, messages),
        gives,
        settings=settings(max_examples=5000, database=None, deadline=None),
    )
