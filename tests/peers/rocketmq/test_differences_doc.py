"""docs/internals/differential.md and tests/peers/rocketmq/differences.py list the same differences."""

from __future__ import annotations

import re
from pathlib import Path

from tests.peers.rocketmq.differences import ACCEPTED, GAPS

DOC = Path(__file__).resolve().parents[3] / "docs" / "internals" / "differential.md"


def listed(section: str) -> list[str]:
    """The keys of the `- `key`: ...` items of one section of the page, in order."""
    text = DOC.read_text()
    start = text.index(f"## {section}\n")
    end = text.find("\n## ", start + 1)
    return re.findall(r"^- `([a-z0-9-]+)`:", text[start : end if end >= 0 else None], re.MULTILINE)


def test_docs_list_every_difference() -> None:
    assert listed("Accepted differences") == list(ACCEPTED)
    assert listed("Known gaps") == list(GAPS)
