"""A progress bar on stderr while many targets are checked (`gdr-check models/*`).

Only on an interactive terminal: never on stdout (the report's), never when stderr is a pipe or a file (CI logs,
pre-commit, tests), never with `--quiet`/`--silent`. It is transient: once the run ends, the terminal holds the
report and the error lines only.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import TextIO, cast

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
    """A `step(index, target)` callable to call before checking each target; a bar when `wanted`. The bar is
    drawn by `progress_bar`, imported only then (as `formats.format_module` imports a format): rich's progress
    machinery is not loaded by a run that draws no bar."""
    stream = stream if stream is not None else sys.stderr
    if not wanted(targets, stream, quiet=quiet):
        yield _ignore
        return
    bar = importlib.import_module(f"{__package__}.progress_bar").bar
    with cast("AbstractContextManager[Step]", bar(targets, stream)) as step:
        yield step
