"""docs/operations/mqadmin.md says what the suite does: its table has one row per sub-command of
mqadmin 5.3.3, "runs" with the test of `commands.RUN_BY` or "left out" with the reason of
`commands.LEFT_OUT`, and its headline counts both (as README.md and docs/admin.md do). Needs no
Java: it reads the pages and the lists."""

from __future__ import annotations

import re
from pathlib import Path

from tests.peers.mqadmin.commands import LEFT_OUT, RUN_BY

ROOT = Path(__file__).resolve().parents[3]
PAGE = ROOT / "docs" / "operations" / "mqadmin.md"
ROW = re.compile(r"^\| `(\w+)` \| (runs \(`(\w+)`\)|left out) \|[^|]*\| (.*) \|$")


def test_the_table_is_the_suite() -> None:
    text = PAGE.read_text(encoding="utf-8")
    run: dict[str, str] = {}
    left: dict[str, str] = {}
    for line in text.splitlines():
        match = ROW.match(line)
        if match is None:
            continue
        verb, _, test, note = match.groups()
        assert verb not in run and verb not in left, f"{verb} has two rows"
        if test is not None:
            run[verb] = test
        else:
            left[verb] = note.strip()
    assert run == RUN_BY
    assert left == LEFT_OUT
    assert len(run) + len(left) == 89
    counts = (
        f"**{len(run)} of mqadmin 5.3.3's 89 sub-commands work and are tested; {len(left)} are left out**"
    )
    assert counts in " ".join(text.split())
    for other in (ROOT / "README.md", ROOT / "docs" / "admin.md"):  # the pages that count them too
        assert f"{len(run)} of its 89 sub-commands" in " ".join(other.read_text(encoding="utf-8").split()), (
            other
        )
