"""The progress bar `progress.target_progress` draws on an interactive stderr (rich's `Progress`): imported only
when a bar is drawn."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TextIO

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from .progress import Step


@contextmanager
def bar(targets: int, stream: TextIO) -> Iterator[Step]:
    """A transient bar of `targets` steps on `stream`, and the `step(index, target)` that moves it."""
    console = Console(file=stream, highlight=False, emoji=False)
    columns = (TextColumn("checking"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
               TextColumn("{task.description}"))
    with Progress(*columns, console=console, transient=True) as progress:
        task = progress.add_task("", total=targets)

        def step(index: int, target: str) -> None:
            shown = "".join(char if char.isprintable() else "?" for char in target)  # no control characters
            progress.update(task, completed=index, description=escape(shown))

        yield step
        progress.update(task, completed=targets)
