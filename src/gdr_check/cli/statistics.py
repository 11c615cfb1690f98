"""`--statistics`: how often each rule fired in the run, most frequent first, as ruff prints it: a text table,
or with `--output-format json` a JSON list of `{code, name, severity, summary, count}`.

Every (target, TP size) result counts, an unreadable target's GDR0xx diagnostic included, info notes too.
"""

from __future__ import annotations

import json
from dataclasses import asdict

from ..base.records import dataclass
from ..pipeline.results import Run
from .formats.common import entries, plain


@dataclass(frozen=True)
class RuleCount:
    code: str
    name: str
    severity: str
    summary: str
    count: int


def rule_counts(run: Run) -> list[RuleCount]:
    """One row per rule that fired, by count (highest first), then code."""
    counted: dict[str, int] = {}
    first: dict[str, tuple[str, str, str]] = {}
    for _, diagnostic in entries(run):
        counted[diagnostic.code] = counted.get(diagnostic.code, 0) + 1
        first.setdefault(diagnostic.code, (diagnostic.name, diagnostic.severity, diagnostic.summary))
    rows = [RuleCount(code, *first[code], count) for code, count in counted.items()]
    return sorted(rows, key=lambda row: (-row.count, row.code))


def render_text(run: Run) -> str:
    rows = rule_counts(run)
    if not rows:
        return ""
    widths = [max(len(str(getattr(row, column))) for row in rows) for column in ("count", "code", "severity", "name")]
    lines = [f"{str(row.count).rjust(widths[0])}  {row.code.ljust(widths[1])}  {row.severity.ljust(widths[2])}  "
             f"{row.name.ljust(widths[3])}  {plain(row.summary)}".rstrip() for row in rows]
    return "\n".join(lines) + "\n"


def render_json(run: Run) -> str:
    return json.dumps([asdict(row) for row in rule_counts(run)], indent=2) + "\n"


def render(run: Run, output_format: str) -> str:
    return render_json(run) if output_format == "json" else render_text(run)
