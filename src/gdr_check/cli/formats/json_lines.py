"""`--output-format json-lines`: one JSON object per line, each a diagnostic with `schema_version`, `target`
and `tp` added; a target that could not be read adds `error` to its GDR0xx diagnostic (or is an `error`
object alone when no diagnostic describes it)."""

from __future__ import annotations

from typing import Any

from ...base.identity import REPORT_SCHEMA_VERSION
from ...pipeline.results import FatalError, Run, TargetResult
from ..escape import dump_json
from .options import RenderOptions


def _head(result: TargetResult | None) -> dict[str, Any]:
    return {"schema_version": REPORT_SCHEMA_VERSION, "target": result.target if result else None,
            "tp": result.deployment_tp if result else None}


def _error(error: FatalError) -> dict[str, Any]:
    return {"code": error.code, "message": error.message, "path": error.path}


def records(run: Run) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    for result in run.results:
        if result.error is not None:
            record = _head(result)
            if result.error.diagnostic is not None:
                record.update(result.error.diagnostic.to_dict())
            record["error"] = _error(result.error)
            found.append(record)
            continue
        found.extend({**_head(result), **diagnostic.to_dict()} for diagnostic in result.diagnostics)
    return found


def _line(record: dict[str, Any]) -> str:
    # ensure_ascii keeps each record on one line whatever a message holds (U+2028 included).
    return dump_json(record, ensure_ascii=True, separators=(", ", ": ")) + "\n"


def render(run: Run, options: RenderOptions) -> str:
    return "".join(_line(record) for record in records(run))


def render_fatal(error: FatalError) -> str:
    record = _head(None)
    record["error"] = _error(error)
    return _line(record)
