"""A progress bar on stderr while many targets are checked (`gdr-check models/*`).

Only on an interactive terminal: never on stdout (the report's), never when stderr is a pipe or a file (CI logs,
pre-commit, tests), never with `--quiet`/`--silent`. It is transient: once the run ends, the terminal holds the
report and the error lines only.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TextIO

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

# One target is too quick to be worth a bar.
MIN_TARGETS = 2

Step = Callable[[int, str], None]  # (index of the target now being checked, the target)


def wanted(targets: int, stream: TextIO, *, quiet: bool = False) -> bool:
    """Whether to draw a bar for `targets` targets on `stream`."""
    if quiet or targets < MIN_TARGETS or os.environ.get("TERM") == "dumb":
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


def _ignore(index: int, target: str) -> None:
    return None


@contextmanager
def target_progress(targets: int, *, quiet: bool = False, stream: TextIO | None = None) -> Iterator[Step]:
    """A `step(index, target)` callable to call before checking each target; a bar when `wanted`."""
    stream = stream if stream is not None else sys.stderr
    if not wanted(targets, stream, quiet=quiet):
        yield _ignore
        return

    console = Console(file=stream, highlight=False, emoji=False)
    columns = (TextColumn("checking"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
               TextColumn("{task.description}"))
    with Progress(*columns, console=console, transient=True) as bar:
        task = bar.add_task("", total=targets)

        def step(index: int, target: str) -> None:
            shown = "".join(char if char.isprintable() else "?" for char in target)  # no control characters
            bar.update(task, completed=index, description=escape(shown))

        yield step
        bar.update(task, completed=targets)
