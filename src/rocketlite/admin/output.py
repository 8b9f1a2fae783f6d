"""Terminal output for the admin verbs: tables, key/value blocks, progress bars.

Tables are drawn with rich when it is installed (the `cli` extra) and as aligned plain text
otherwise, so the admin CLI works on a bare install. Output to a pipe or file is never colored or
folded to 80 columns (rich's default for non-terminals): ids and offsets must survive `grep`.
Cells are rich `Text`, never markup, because message bodies and keys may contain `[...]`.

Progress bars go to stderr, only when stderr is a terminal and the output is not `--json`, and
disappear when done; stdout stays exactly the table or the JSON.
"""

from __future__ import annotations

import contextlib
import importlib.util
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, TextIO

# rich is imported only when a table or bar is drawn: every `rocketlite` command builds the admin
# parser, and the servers should not pay rich's import time.
HAVE_RICH = importlib.util.find_spec("rich") is not None

PIPE_WIDTH = 1000  # wide enough that no table folds when written to a pipe


def cell_text(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:.2f}"
    return str(value)


class Output:
    """Where a verb's table output goes (stdout unless given); rich or plain by availability."""

    def __init__(self, file: TextIO | None = None, *, use_rich: bool | None = None) -> None:
        self.file = file if file is not None else sys.stdout
        self.use_rich = HAVE_RICH if use_rich is None else use_rich and HAVE_RICH
        self._console: Any = None
        if self.use_rich:
            from rich.console import Console  # noqa: PLC0415

            terminal = self.file.isatty()
            self._console = Console(
                file=self.file,
                width=None if terminal else PIPE_WIDTH,
                markup=False,
                emoji=False,
                highlight=False,
                soft_wrap=not terminal,
            )

    def line(self, text: str = "") -> None:
        if self._console is not None:
            from rich.text import Text  # noqa: PLC0415

            self._console.print(Text(text))
        else:
            print(text, file=self.file)

    def table(
        self,
        columns: Sequence[str],
        rows: Iterable[Sequence[object]],
        *,
        title: str | None = None,
        numeric: Sequence[str] = (),
    ) -> None:
        """A table; columns named in `numeric` are right-aligned."""
        body = [[cell_text(v) for v in row] for row in rows]
        if self._console is not None:
            from rich import box  # noqa: PLC0415
            from rich.table import Table  # noqa: PLC0415
            from rich.text import Text  # noqa: PLC0415

            table = Table(title=title, box=box.SIMPLE_HEAD, show_edge=False, title_justify="left")
            for name in columns:
                table.add_column(name, justify="right" if name in numeric else "left", overflow="fold")
            for row in body:
                table.add_row(*(Text(v) for v in row))
            self._console.print(table)
            return
        self._plain_table(columns, body, title, numeric)

    def _plain_table(
        self, columns: Sequence[str], body: list[list[str]], title: str | None, numeric: Sequence[str]
    ) -> None:
        widths = [max([len(c)] + [len(r[i]) for r in body]) for i, c in enumerate(columns)]

        def fmt(values: Sequence[str]) -> str:
            parts = [
                v.rjust(w) if name in numeric else v.ljust(w)
                for v, w, name in zip(values, widths, columns, strict=True)
            ]
            return "  ".join(parts).rstrip()

        if title:
            print(title, file=self.file)
        print(fmt(list(columns)), file=self.file)
        print("  ".join("-" * w for w in widths), file=self.file)
        for row in body:
            print(fmt(row), file=self.file)
        print(file=self.file)

    def pairs(self, items: Iterable[tuple[str, object]], *, title: str | None = None) -> None:
        """A two-column key/value block (a topic config, a message, a runtime table)."""
        self.table(("Key", "Value"), ([k, v] for k, v in items), title=title)


def _ignore(steps: int) -> None:
    del steps


class ProgressReporter:
    """`Reporter` drawing rich progress bars on stderr; silent when disabled or without rich."""

    def __init__(
        self, enabled: bool, *, file: TextIO | None = None, force_terminal: bool | None = None
    ) -> None:
        self.enabled = enabled and HAVE_RICH
        self.file = file
        self.force_terminal = force_terminal

    @contextlib.contextmanager
    def task(self, description: str, total: int) -> Iterator[Callable[[int], None]]:
        if not self.enabled or total <= 0:
            yield _ignore
            return
        from rich.console import Console  # noqa: PLC0415
        from rich.progress import (  # noqa: PLC0415
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
        )

        console = Console(
            file=self.file if self.file is not None else sys.stderr, force_terminal=self.force_terminal
        )
        columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
        with Progress(*columns, console=console, transient=True) as progress:
            task_id = progress.add_task(description, total=total)

            def advance(steps: int) -> None:
                progress.advance(task_id, steps)

            yield advance
