"""README.md and docs/*.md as tests: their fenced code blocks, and a scratch clone to run them in.

tests/test_readme.py and tests/test_docs.py run every block in document order (the runners are
in tests/support/docs/blocks.py). This module knows the Markdown and the processes: `code_blocks`
splits a page into `Block`s (each must carry an info string), `expand_snippets` resolves the docs'
`--8<--` includes of files at the root, and
`Clone` is the directory they run in, a fresh-clone look-alike whose `.venv`, `.clients`, sources
and Makefile are links to this checkout, so what a block creates (`data/`, config files, demo
stores) lands in a temporary directory and never in the checkout. Its `scratch/` (where the
README's examples keep their files, ignored by git) starts as in a fresh clone: only its
`.gitignore`. The block scripts the test writes go there too, where a user saves them.

Shell blocks run like a terminal's commands: with the venv's `bin` first on the PATH (as after
`source .venv/bin/activate`), under `bash -e`. Background servers a block starts may outlive it
(a later block uses them), so every block runs in a process group of its own and `Clone.close`
ends the groups still alive. Output goes to a file, not a pipe, so a server left in the
background cannot hold the block's end open.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
VENV_BIN = ROOT / ".venv" / "bin"

_FENCE = re.compile(r"^(\s*)(`{3,})(.*)$")  # a block may be indented, inside a list item


@dataclass(frozen=True)
class Block:
    """One fenced code block: its info string (first word), its text, the line it starts on and
    the file it is written in (relative to the root)."""

    lang: str
    code: str
    line: int
    source: str = "README.md"

    @property
    def name(self) -> str:
        return f"L{self.line}-{self.lang or 'none'}"

    @property
    def slug(self) -> str:
        """A file-name part that tells blocks of different files apart (`docs-spark-L12`)."""
        return f"{re.sub(r'[^A-Za-z0-9]+', '-', self.source.removesuffix('.md'))}-L{self.line}"


def code_blocks(text: str, source: str = "README.md") -> list[Block]:
    """Every fenced block of a Markdown text, in order; an unterminated fence is an error."""
    blocks: list[Block] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if m is None:
            i += 1
            continue
        indent, fence, info, start = m.group(1), m.group(2), m.group(3).strip(), i + 1
        body: list[str] = []
        i += 1
        while i < len(lines) and not lines[i].strip().startswith(fence):
            line = lines[i]
            body.append(line[len(indent) :] if line.startswith(indent) else line.lstrip())
            i += 1
        if i == len(lines):
            raise ValueError(f"{source} line {start}: code fence never closed")
        blocks.append(Block(info.split()[0] if info else "", "\n".join(body) + "\n", start, source))
        i += 1
    return blocks


# pymdownx.snippets, as mkdocs.yml sets it up: a line `--8<-- "FILE"` or `--8<-- "FILE:NAME"` in a
# docs page is replaced by FILE (a path from the root), or by the lines of FILE between the markers
# `--8<-- [start:NAME]` and `--8<-- [end:NAME]` (which README.md hides in HTML comments).
_SNIPPET = re.compile(r'^-{1,}8<-{1,}[ \t]+"(?P<file>[^":]+)(?::(?P<section>[\w-]+))?"[ \t]*$')


@dataclass(frozen=True)
class Include:
    line: int  # where the include stands in the page
    file: str
    section: str | None


def includes(text: str) -> list[Include]:
    """The snippet includes of a docs page, in order."""
    found = []
    for n, line in enumerate(text.splitlines(), 1):
        m = _SNIPPET.match(line)
        if m is not None:
            found.append(Include(n, m["file"], m["section"]))
    return found


def included_text(include: Include) -> str:
    """What `include` brings in, with every other line of its file blanked, so that line numbers
    are the file's own. A missing file or section is an error, as in the build (check_paths)."""
    lines = (ROOT / include.file).read_text(encoding="utf-8").splitlines()
    if include.section is None:
        return "\n".join(lines) + "\n"
    name = re.escape(include.section)
    marker = re.compile(rf"-{{1,}}8<-{{1,}}[ \t]+\[[ \t]*(start|end)[ \t]*:[ \t]*{name}[ \t]*\]")
    marks = [(n, m[1]) for n, line in enumerate(lines) if (m := marker.search(line)) is not None]
    if [kind for _, kind in marks] != ["start", "end"]:
        raise ValueError(f"{include.file}: section {include.section!r} needs one start and one end marker")
    (start, _), (end, _) = marks
    return "\n".join(line if start < n < end else "" for n, line in enumerate(lines)) + "\n"


_SLUG_DROP = re.compile(r"[^\w\- ]")


def heading_anchors(text: str) -> set[str]:
    """The anchors GitHub gives the headings (lower case, punctuation dropped, spaces to '-')."""
    anchors: set[str] = set()
    in_fence = False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            in_fence = not in_fence
        if in_fence or not line.startswith("#"):
            continue
        title = line.lstrip("#").strip().lower()
        slug = _SLUG_DROP.sub("", title).replace(" ", "-")
        n, candidate = 0, slug
        while candidate in anchors:
            n += 1
            candidate = f"{slug}-{n}"
        anchors.add(candidate)
    return anchors


@dataclass
class Result:
    returncode: int
    output: str


class Clone:
    """A scratch directory that looks like a fresh clone of this checkout (see the module doc)."""

    COPIED = frozenset({"conf"})  # blocks write into conf/ (tools.yml): a copy, not a link
    SKIPPED = frozenset({"data", ".git", "scratch"})

    def __init__(self, path: Path, shared: Path) -> None:
        self.path = path
        self.groups: list[int] = []
        path.mkdir(parents=True)
        for entry in ROOT.iterdir():
            if entry.name in self.SKIPPED:
                continue
            if entry.name in self.COPIED and entry.is_dir():
                subprocess.run(["cp", "-r", str(entry), str(path / entry.name)], check=True)
            else:
                (path / entry.name).symlink_to(entry)
        self.scratch = path / "scratch"
        self.scratch.mkdir()
        shutil.copy(ROOT / "scratch" / ".gitignore", self.scratch / ".gitignore")
        self.fresh = sorted(p.name for p in path.iterdir())  # what a fresh clone holds
        # README paths such as ../shared/testdata are relative to the clone, as in the workplace.
        sibling = path.parent / "shared"
        if shared.is_dir() and not sibling.exists():
            sibling.symlink_to(shared)
        self._n = 0

    def env(self, *, venv_on_path: bool) -> dict[str, str]:
        """This environment without the test's venv: a user's shell, activated or not."""
        env = {
            k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYSPARK_PYTHON", "PYTHONPATH")
        }
        env.pop("NAMESRV_ADDR", None)
        env.pop("ROCKETMQ_HOME", None)
        path = [p for p in env.get("PATH", "").split(os.pathsep) if p and Path(p) != VENV_BIN]
        if venv_on_path:
            path.insert(0, str(VENV_BIN))
        env["PATH"] = os.pathsep.join(path)
        return env

    def run(self, argv: list[str], *, env: dict[str, str], timeout: float) -> Result:
        """`argv` in the clone, in its own process group, output (stdout + stderr) to a file."""
        self._n += 1
        out_path = self.path.parent / f"block-{self._n}.out"
        with out_path.open("wb") as out:
            proc = subprocess.Popen(
                argv, cwd=self.path, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )
            self.groups.append(proc.pid)
            try:
                code = proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self._kill_group(proc.pid)
                proc.wait(10)
                code = -1
        output = out_path.read_text(errors="replace")
        if code == -1:
            output += f"\n[killed after {timeout:.0f} s]"
        return Result(code, output)

    def write(self, name: str, text: str) -> Path:
        """A block saved as a file in scratch/, as the README tells users to save examples."""
        path = self.scratch / name
        path.write_text(text)
        return path

    @staticmethod
    def _kill_group(pgid: int, sig: int = signal.SIGKILL) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, sig)

    def close(self) -> None:
        """SIGTERM the groups still alive (servers a block left running), then SIGKILL them."""
        for pgid in self.groups:
            self._kill_group(pgid, signal.SIGTERM)
        deadline = time.monotonic() + 10
        for pgid in self.groups:
            while time.monotonic() < deadline and _group_alive(pgid):
                time.sleep(0.1)
            self._kill_group(pgid)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    return True
