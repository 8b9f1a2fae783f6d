"""docs/sql92.md's tables as a test: the semantics table's rows (expression, properties, value)
are evaluated, and every expression in the table of refused ones must fail to compile. The package
docstring's example runs as a doctest. The page's code blocks run with every other page's, beside
`rocketlite dev`, in tests/test_docs.py.
"""

from __future__ import annotations

import doctest
import json
import re

import pytest

import rocketlite.filter
from rocketlite.filter import EvaluationError, FilterSyntaxError, compile
from tests.support.docs.markdown import ROOT, code_blocks

DOC = ROOT / "docs" / "sql92.md"
TEXT = DOC.read_text(encoding="utf-8")
BLOCKS = code_blocks(TEXT)

_ROW = re.compile(r"^\| `(?P<expr>[^`]+)` \| (?P<rest>.*) \|$")
_VALUE_ROW = re.compile(r"^`(?P<props>\{[^`]*\})` \| (?P<value>TRUE|FALSE|UNKNOWN|ERROR)$")
_RUNNABLE = re.compile(r"^\s*(\$ |>>> |import |from \S+ import |python|rocketlite )")


def _table_rows(header: str) -> list[tuple[str, str]]:
    """(expression, rest of the row) for each row of the table whose header line is `header`."""
    lines = TEXT.splitlines()
    start = lines.index(header) + 2  # the header, then the --- line
    rows = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        m = _ROW.match(line)
        assert m is not None, f"docs/sql92.md: table row not understood: {line}"
        rows.append((m["expr"], m["rest"]))
    return rows


VALUE_ROWS = _table_rows("| Expression | Properties | Value |")
REFUSED_ROWS = _table_rows("| Expression | Why |")


def test_tables_are_found() -> None:
    assert len(VALUE_ROWS) >= 30
    assert len(REFUSED_ROWS) >= 10


@pytest.mark.parametrize(("expression", "rest"), VALUE_ROWS)
def test_semantics_row(expression: str, rest: str) -> None:
    m = _VALUE_ROW.match(rest)
    assert m is not None, f"row not understood: {rest}"
    props = json.loads(m["props"])
    f = compile(expression)
    try:
        value = {True: "TRUE", False: "FALSE", None: "UNKNOWN"}[f.evaluate(props)]
    except EvaluationError:
        value = "ERROR"
    assert value == m["value"], f"{expression} with {props}"
    assert f.matches(props) is (value == "TRUE")


@pytest.mark.parametrize(("expression", "why"), REFUSED_ROWS)
def test_refused_row(expression: str, why: str) -> None:
    with pytest.raises(FilterSyntaxError):
        compile(expression)


def test_package_docstring_example() -> None:
    result = doctest.testmod(rocketlite.filter, raise_on_error=False)
    assert result.attempted >= 3
    assert result.failed == 0
