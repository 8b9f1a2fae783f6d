"""Every code block of README.md runs as written, in document order, against the servers it needs.

A README snippet that no longer works fails CI. The blocks run in a scratch clone
(tests/support/docs/markdown.py) with `rocketlite dev` on the README's own ports (9876 / 10911): the
snippets' addresses are not rewritten, so those ports must be free (a clear failure says so).
Each info string has its runner (tests/support/docs/blocks.py: `sh`, `console`, `python`, `js`
run; `properties`, `yaml`, `sql` are configuration or expressions checked by their loaders;
`text` is output that must not hold commands); any other info string, or none, fails. Blocks
whose output the quick start promises are checked for it (`EXPECTED`). Another test checks that
the README's links resolve, into docs/ too, down to the heading.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator

import pytest

from tests.support.docs.blocks import (
    check_expected,
    logged_errors,
    run_block,
    run_python,
    serving_dev,
    unknown_info_strings,
    written_outside_scratch,
)
from tests.support.docs.markdown import ROOT, VENV_BIN, Block, Clone, code_blocks, heading_anchors

README = ROOT / "README.md"
TEXT = README.read_text(encoding="utf-8")
BLOCKS = code_blocks(TEXT)

# A block whose text contains the key must print a line matching each pattern.
EXPECTED: dict[str, list[str]] = {
    "printed.get(timeout=30)": [
        r"^sent \w+ to queue \d+$",
        r"^received hello 0 from queue \d+$",
        r"^received hello 1 from queue \d+$",
        r"^received hello 2 from queue \d+$",
    ],
    "-p 'hello from the CLI'": [r"SEND_OK", r"hello from the CLI", r"QuickStart\s+broker-a"],
    "consumerGroup: 'ons-consumer'": [r"^sent SEND_OK", r"^received hello 0$", r"^received hello 2$"],
    'appName("quickstart")': [r"\|\s*hello 0\|", r"\|\s*hello 2\|", r"\bk1\b"],
}

README_MAX_LINES = 400  # a front page: the rest is in docs/


@pytest.fixture(scope="module")
def clone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Clone]:
    """A scratch clone with `rocketlite dev` serving on the README's ports, as after `make run`."""
    with serving_dev(tmp_path_factory, "readme") as c:
        yield c


def test_every_block_has_a_known_info_string() -> None:
    bad = unknown_info_strings(BLOCKS)
    assert not bad, f"README code blocks need an info string a runner knows: {bad}"


def test_expected_outputs_name_existing_blocks() -> None:
    """Each EXPECTED key still finds its block, so a rewritten snippet cannot drop its check."""
    for key in EXPECTED:
        found = sum(key in b.code for b in BLOCKS)
        assert found == 1, f"EXPECTED key {key!r} must match exactly one README block, not {found}"


def test_the_readme_is_a_front_page() -> None:
    lines = len(TEXT.splitlines())
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines; move reference material into docs/"


def test_links_resolve() -> None:
    """Links to the README's own headings, to files of the repository, and to the headings of
    other Markdown files (as GitHub names their anchors)."""
    anchors = heading_anchors(TEXT)
    links = set(re.findall(r"\]\(#([^)]+)\)", TEXT))
    assert not links - anchors, f"README links to missing headings: {sorted(links - anchors)}"
    for target, _, anchor in re.findall(r"\]\((?!#|https?://)([^)#]+)(#([^)]+))?\)", TEXT):
        assert (ROOT / target).exists(), f"README links to {target}, which does not exist"
        if anchor:
            there = heading_anchors((ROOT / target).read_text(encoding="utf-8"))
            assert anchor in there, f"README links to {target}#{anchor}: no such heading there"


@pytest.mark.parametrize("block", BLOCKS, ids=[b.name for b in BLOCKS])
def test_block(block: Block, clone: Clone) -> None:
    check_expected(block, run_block(block, clone), EXPECTED)


def test_blocks_write_only_into_scratch(clone: Clone) -> None:
    """Run after the blocks: what the examples saved, logged or stored is under scratch/
    (ignored by git), and the dev server's store is data/; the clone's root is as fresh
    otherwise. Demo stores are removed by the blocks that made them."""
    problems = written_outside_scratch(clone)
    assert not problems, "\n".join(problems)


def test_blocks_log_no_errors(clone: Clone) -> None:
    """Run after the blocks: the servers the examples start beside `make run` (their logs under
    scratch/), `make run`'s own log, and each block's output have no ERROR line and no raw grpc
    line: the examples pick ports of their own."""
    found = logged_errors(clone)
    assert not found, "\n".join(found)


def _admin(clone: Clone, *args: str) -> subprocess.CompletedProcess[str]:
    """`rocketlite admin ARGS -n 127.0.0.1:9876` in the clone; fails the test if it fails."""
    done = subprocess.run(
        [str(VENV_BIN / "rocketlite"), "admin", *args, "-n", "127.0.0.1:9876"],
        cwd=clone.path,
        env=clone.env(venv_on_path=True),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, f"rocketlite admin {' '.join(args)}: {done.stderr}"
    return done


def _committed(clone: Clone, group: str, topic: str) -> int:
    """The sum of `group`'s committed offsets over `topic`'s queues (`consumerProgress --json`)."""
    rows = json.loads(_admin(clone, "consumerProgress", "-g", group, "--json").stdout)["queues"]
    return sum(max(r["consumerOffset"], 0) for r in rows if r["topic"] == topic)


def test_the_quick_start_commits_only_what_it_printed(clone: Clone) -> None:
    """Run after the quick start (its group has offsets): with one more message waiting than the
    three it sends, the quick-start script commits exactly the messages it printed. Its listener
    used to queue every message while the script printed three, and `close()` committed the
    fourth, never printed."""
    block = next(b for b in BLOCKS if "printed.get(timeout=30)" in b.code)
    before = _committed(clone, "quickstart-consumer", "QuickStart")
    _admin(clone, "sendMessage", "-t", "QuickStart", "-p", "stray")
    output = run_python(block, clone)
    printed = re.findall(r"^received (.+) from queue \d+$", output, re.MULTILINE)
    assert len(printed) >= 3, output
    assert _committed(clone, "quickstart-consumer", "QuickStart") - before == len(printed), output
