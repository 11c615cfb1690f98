"""The console script and `python -m gdr_check`: the CLI with its imports inside the reach of Ctrl-C.

`main()` turns an interrupt during a run into one line and exit 130; an interrupt while Python is still
importing the CLI (typer, click and this package take a moment) would escape it as a traceback. The import is
caught here, where nothing of the CLI has run yet.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable

INTERRUPTED = 130  # as `main.INTERRUPTED`: 128 + SIGINT

_main: Callable[[], int] | None
try:
    from .main import before_exit as _before_exit
    from .main import main as _main
except KeyboardInterrupt:  # Ctrl-C during the imports: `run` says so
    _main = None


def _interrupted() -> int:
    try:
        os.write(2, b"error: interrupted\n")
    except OSError:  # no stderr: the exit code says it
        pass
    return INTERRUPTED


def run() -> None:
    if _main is None:
        sys.exit(_interrupted())
    try:
        code = _main()
    except KeyboardInterrupt:
        code = _interrupted()
    _before_exit()
    sys.exit(code)
