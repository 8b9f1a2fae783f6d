"""docs/sql92.md as a test: every code block runs or is checked, and so is every table row.

Blocks are found as README.md's are (tests/support/readme.py) and each info string has its runner:
- `python`: `.venv/bin/python` on the block saved as a script, as a user runs it;
- `properties`: the broker's loader takes it (broker keys, values that convert);
- `sql`: the block is one expression, and it compiles;
- `text`: the grammar, checked to hold no command or code.
Any other info string fails. The semantics table's rows (expression, properties, value) are
evaluated, and every expression in the table of refused ones must fail to compile. The package
docstring's example runs as a doctest.
"""

from __future__ import annotations

import doctest
import json
import re
import subprocess
from pathlib import Path

import pytest

import rocketlite.filter
from rocketlite.broker.config import BrokerConfig, broker_config_keys
from rocketlite.config import build_config, parse_properties
from rocketlite.filter import EvaluationError, FilterSyntaxError, compile
from rocketlite.store.config import StoreConfig, store_config_keys
from tests.support.readme import ROOT, VENV_BIN, Block, code_blocks

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


@pytest.mark.parametrize("block", BLOCKS, ids=[b.name for b in BLOCKS])
def test_block(block: Block, tmp_path: Path) -> None:
    if block.lang == "python":
        script = tmp_path / f"block-{block.line}.py"
        script.write_text(block.code, encoding="utf-8")
        proc = subprocess.run(
            [str(VENV_BIN / "python"), str(script)], capture_output=True, text=True, timeout=60, check=False
        )
        assert proc.returncode == 0, f"docs/sql92.md line {block.line}:\n{proc.stdout}{proc.stderr}"
    elif block.lang == "properties":
        props = parse_properties(block.code)
        assert set(props) <= broker_config_keys() | store_config_keys(), sorted(props)
        assert build_config(BrokerConfig, props).enable_property_filter
        build_config(StoreConfig, props)
    elif block.lang == "sql":
        compile(block.code)
    elif block.lang == "text":
        runnable = [line for line in block.code.splitlines() if _RUNNABLE.match(line)]
        assert not runnable, f"docs/sql92.md line {block.line}: a text block holds code: {runnable}"
    else:
        pytest.fail(f"docs/sql92.md line {block.line}: no runner for info string {block.lang!r}")


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
