"""`--output-format json`: one stable, versioned document (a `results` list when several targets or TP sizes
ran). The shape is described by src/gdr_check/schema/report-v1.json; fields are only ever added."""

from __future__ import annotations

from ...base.identity import REPORT_SCHEMA_VERSION, tool_info
from ...pipeline.results import FatalError, Run, fatal_document
from ..escape import dump_json
from .options import RenderOptions


def render(run: Run, options: RenderOptions) -> str:
    results = run.results
    if len(results) == 1:
        document = results[0].document()
    else:
        document = {"schema_version": REPORT_SCHEMA_VERSION, "tool": tool_info(),
                    "results": [r.document() for r in results]}
    return dump_json(document, indent=2, sort_keys=False) + "\n"


def render_fatal(error: FatalError) -> str:
    return dump_json(fatal_document(error.code, error.message, error.path), indent=2) + "\n"
