"""Every code block of the docs site (docs/*.md) runs or is checked, page by page in the order of
mkdocs.yml's nav, as README.md's blocks are (tests/test_readme.py).

The pages share one scratch clone with `rocketlite dev` on the quick start's ports, which is the
state the pages say their examples expect (`make run` serving, the venv activated). Each info
string has its runner (tests/support/docs/blocks.py); a block with an info string no runner knows
fails, so no block goes unexecuted silently. A page may include a file of the root with
pymdownx.snippets (`--8<-- "ARCHITECTURE.md"`): the included blocks are checked here as the
page's, except those of README.md, which tests/test_readme.py runs. docs/sql92.md's tables are
checked row by row by tests/filter/test_docs.py; its blocks run here too.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from rocketlite.broker.config import broker_config_keys
from rocketlite.namesrv.config import namesrv_config_keys
from rocketlite.remoting.tls import tls_config_keys
from rocketlite.store.config import store_config_keys
from tests.support.docs.blocks import (
    check_expected,
    logged_errors,
    run_block,
    serving_dev,
    unknown_info_strings,
    written_outside_scratch,
)
from tests.support.docs.markdown import ROOT, Block, Clone, code_blocks, included_text, includes

DOCS = ROOT / "docs"
MKDOCS = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))


def _nav_pages(entries: Any) -> list[str]:
    """The pages of a mkdocs nav (a list of `title: page` or `title: [entries]`), in order."""
    pages: list[str] = []
    for entry in entries:
        for value in entry.values() if isinstance(entry, dict) else [entry]:
            pages += _nav_pages(value) if isinstance(value, list) else [value]
    return pages


NAV = _nav_pages(MKDOCS["nav"])
ON_DISK = sorted(str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md"))
PAGES = [p for p in NAV if p in ON_DISK] + [p for p in ON_DISK if p not in NAV]


def page_blocks(page: str) -> list[Block]:
    """The page's blocks, then those of the files it includes (README.md's aside)."""
    text = (DOCS / page).read_text(encoding="utf-8")
    blocks = code_blocks(text, f"docs/{page}")
    for include in includes(text):
        included = included_text(include)  # also checks that the file and section exist
        if include.file != "README.md":
            blocks += code_blocks(included, include.file)
    return blocks


BLOCKS = [(page, block) for page in PAGES for block in page_blocks(page)]

# A block whose text contains the key must print a line matching each pattern.
EXPECTED: dict[str, list[str]] = {
    '.load("data")': [r"\|\s*SparkDemo\|\s*3\|", r"\|\s*SparkOut\|\s*3\|"],
    'instance_name="wrong-keys"': [
        r"^SEND_OK$",
        r"^refused: .*Check signature failed for accessKey=RocketMQ",
    ],
    "haConnections": [r"SEND_OK", r"commitLogMaxOffset\s+[1-9]"],
    "--access-key rocketmq2": [r"create topic to 127\.0\.0\.1:10931 success"],
    "metricsExporterType=PROM": [r"^rocketmq_storage_flush_behind_bytes\{", r"^rocketmq_topic_number\{"],
    "tls.server.mode=enforcing": [r"^SEND_OK$"],
}


def _block_id(page: str, block: Block) -> str:
    """`spark.md:L26-python`; an included block: `internals/architecture.md:ARCHITECTURE.md:L12-text`."""
    return f"{page}:{block.name}" if block.source == f"docs/{page}" else f"{page}:{block.source}:{block.name}"


@pytest.fixture(scope="module")
def clone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Clone]:
    """One scratch clone with `rocketlite dev` serving, as after `make run`, for every page."""
    with serving_dev(tmp_path_factory, "docs") as c:
        yield c


def test_every_page_is_in_the_nav() -> None:
    """A page outside the nav is not reachable on the site (mkdocs --strict refuses it too), and
    a nav entry needs its page."""
    assert not set(ON_DISK) - set(NAV), (
        f"pages missing from mkdocs.yml's nav: {sorted(set(ON_DISK) - set(NAV))}"
    )
    assert not set(NAV) - set(ON_DISK), f"nav entries without a page: {sorted(set(NAV) - set(ON_DISK))}"


def test_every_block_has_a_known_info_string() -> None:
    bad = unknown_info_strings([block for _, block in BLOCKS])
    assert not bad, f"docs code blocks need an info string a runner knows: {bad}"


def test_includes_of_the_readme_are_its_sections() -> None:
    """The quick start and the compatibility table are written once, in README.md, and shown on
    the site through a section include; the pages name sections that exist (a missing section
    would render as nothing)."""
    sections = {
        (page, include.section)
        for page in PAGES
        for include in includes((DOCS / page).read_text(encoding="utf-8"))
        if include.file == "README.md"
    }
    assert ("quickstart.md", "quickstart") in sections
    assert ("clients/index.md", "compatibility") in sections


def test_expected_outputs_name_existing_blocks() -> None:
    """Each EXPECTED key still finds its block, so a rewritten snippet cannot drop its check."""
    for key in EXPECTED:
        found = [b for _, b in BLOCKS if key in b.code]
        assert len(found) == 1, f"EXPECTED key {key!r} must match exactly one docs block: {found}"


def test_every_config_key_is_documented() -> None:
    text = (DOCS / "configuration.md").read_text(encoding="utf-8")
    keys = broker_config_keys() | store_config_keys() | namesrv_config_keys() | tls_config_keys()
    missing = sorted(k for k in keys if f"`{k}`" not in text)
    assert not missing, f"config keys the servers accept but docs/configuration.md does not name: {missing}"


@pytest.mark.parametrize(("page", "block"), BLOCKS, ids=[_block_id(p, b) for p, b in BLOCKS])
def test_block(page: str, block: Block, clone: Clone) -> None:
    check_expected(block, run_block(block, clone), EXPECTED)


def test_blocks_write_only_into_scratch(clone: Clone) -> None:
    """Run after the blocks: what the examples saved, logged or stored is under scratch/, and
    the dev server's store is data/; demo stores are removed by the blocks that made them."""
    problems = written_outside_scratch(clone)
    assert not problems, "\n".join(problems)


def test_blocks_log_no_errors(clone: Clone) -> None:
    """Run after the blocks: the servers the examples start beside `make run`, `make run`'s own
    log and each block's output have no ERROR line and no raw grpc line."""
    found = logged_errors(clone)
    assert not found, "\n".join(found)
