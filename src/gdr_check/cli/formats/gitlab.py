"""`--output-format gitlab`: the Code Climate JSON array that GitLab's code-quality report reads
(`artifacts: reports: codequality:`), with the fields ruff writes: `check_name`, `description`, `severity`,
`fingerprint` and `location` (`path` relative to `$CI_PROJECT_DIR`, else to the working directory, and
`positions.begin/end` as line and column).

Fingerprints are the SARIF ones (code, path, config key / tensor / kernel argument, TP size; never line numbers
or absolute paths), re-hashed where two findings would share one: GitLab tells new findings from fixed ones by
fingerprint, so each must be stable across runs and unique within a report. Info notes are left out unless
`--show-info`, as in SARIF: nothing can be changed to close them.
"""

from __future__ import annotations

import hashlib
import os
from typing import Any

from ...base.report import Diagnostic
from ...pipeline.results import FatalError, Run, TargetResult
from ..escape import dump_json
from .common import alerts, tp_suffix, where
from .options import RenderOptions
from .sarif import fingerprint, stable_path

PROJECT_DIR_ENV = "CI_PROJECT_DIR"
# Code Climate severities: info, minor, major, critical, blocker.
SEVERITY = {"error": "major", "warning": "minor", "info": "info"}
UNREADABLE = "critical"  # a checkpoint that could not be read at all


def relative_path(path: str) -> str:
    """`path` relative to `$CI_PROJECT_DIR` (else the working directory) when it lies below it, as GitLab
    resolves code-quality paths against the repository root; otherwise unchanged (a repo id of a built-in
    model is no file)."""
    if not os.path.isabs(path) and not os.path.exists(path):
        return path
    base = os.path.abspath(os.environ.get(PROJECT_DIR_ENV) or os.getcwd())
    absolute = os.path.abspath(path)
    try:
        inside = os.path.commonpath([base, absolute]) == base
    except ValueError:  # another drive
        inside = False
    return os.path.relpath(absolute, base).replace(os.sep, "/") if inside else path.replace(os.sep, "/")


def _location(path: str, line: int = 1, column: int = 1, end_line: int | None = None,
              end_column: int | None = None) -> dict[str, Any]:
    return {"path": relative_path(path), "positions": {
        "begin": {"line": line, "column": column},
        "end": {"line": end_line or line, "column": end_column or column},
    }}


def _issue(check_name: str, description: str, severity: str, hashed: str, location: dict[str, Any]) -> dict[str, Any]:
    # GitLab does not show `check_name`, so the description starts with the code too (as ruff's does).
    return {"check_name": check_name, "description": f"{check_name}: {description}", "severity": severity,
            "fingerprint": hashed, "location": location}


def _diagnostic_issue(run: Run, result: TargetResult, diagnostic: Diagnostic, hashed: str) -> dict[str, Any]:
    place = where(result, diagnostic)
    line, column = place.start
    severity = UNREADABLE if result.error is not None else SEVERITY[diagnostic.severity]
    return _issue(diagnostic.code, diagnostic.message + tp_suffix(run, result), severity, hashed,
                  _location(place.path or place.target, line, column, place.end_line, place.end_column))


def _unique(hashed: str, used: set[str]) -> str:
    """`hashed`, or, where an earlier finding holds it, a hash of it and the repeat's number (repeats come in
    report order, so the same report gives the same fingerprints)."""
    candidate, repeat = hashed, 1
    while candidate in used:
        repeat += 1
        candidate = hashlib.sha256(f"{hashed}:{repeat}".encode()).hexdigest()[:32]
    used.add(candidate)
    return candidate


def _error_fingerprint(error: FatalError, target: str) -> str:
    parts = [error.code, stable_path(target) if target else "", stable_path(error.path) if error.path else ""]
    return hashlib.sha256("\0".join(parts).encode("utf-8", "surrogateescape")).hexdigest()[:32]


def issues(run: Run, options: RenderOptions) -> list[dict[str, Any]]:
    used: set[str] = set()
    found = [_diagnostic_issue(run, result, diagnostic, _unique(fingerprint(result, diagnostic), used))
             for result, diagnostic in alerts(run, options)]
    for result in run.results:
        error = result.error
        if error is not None and error.diagnostic is None:
            found.append(_issue(error.code, error.message, UNREADABLE,
                                _unique(_error_fingerprint(error, result.target), used),
                                _location(error.path or result.target)))
    return found


def render(run: Run, options: RenderOptions) -> str:
    return dump_json(issues(run, options), indent=2) + "\n"


def render_fatal(error: FatalError) -> str:
    """A run that could not start (a bad option or config) is one critical issue, so that the MR shows it."""
    issue = _issue(error.code, error.message, UNREADABLE, _error_fingerprint(error, ""),
                   _location(error.path or "."))
    return dump_json([issue], indent=2) + "\n"
