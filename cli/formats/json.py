"""`--output-format json`: one stable, versioned document (a `results` list when several targets ran)."""

from __future__ import annotations

import json

from ..output import SCHEMA_VERSION, tool_info
from ..results import TargetResult


def render(results: list[TargetResult]) -> str:
    if len(results) == 1:
        document = results[0].document()
    else:
        document = {"schema_version": SCHEMA_VERSION, "tool": tool_info(),
                    "results": [r.document() for r in results]}
    return json.dumps(document, indent=2, sort_keys=False) + "\n"
