"""`--output-format concise`: one `path:line:col: CODE message` line per diagnostic (the summary goes to stderr)."""

from __future__ import annotations

from ...pipeline.results import FatalError, Run
from ..escape import neutralise_log
from .common import concise_line, entries, fatal_line, plain
from .options import RenderOptions


def lines(run: Run) -> list[str]:
    found = [plain(concise_line(run, result, diagnostic)) for result, diagnostic in entries(run)]
    found += [plain(line) for result in run.results if (line := fatal_line(result))]
    return found


def render(run: Run, options: RenderOptions) -> str:
    return neutralise_log("".join(line + "\n" for line in lines(run)))


def render_fatal(error: FatalError) -> str:
    return ""  # the one-line error on stderr says it all; stdout stays empty
