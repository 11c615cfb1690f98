"""One module per output format; each turns a `Run` into text (`render`) and a run that could not complete
into that format's error record (`render_fatal`). Only `full` and `concise` are for people; `json`,
`json-lines` and `sarif` are the stable formats for programs."""

from __future__ import annotations

import importlib
from types import ModuleType

MODULES = {
    "full": "full", "concise": "concise", "json": "json", "json-lines": "json_lines", "github": "github",
    "sarif": "sarif", "junit": "junit", "gitlab": "gitlab",
}


def format_module(fmt: str) -> ModuleType:
    """The module rendering `fmt`, imported on demand so that a run loads only what it prints."""
    return importlib.import_module(f"{__name__}.{MODULES[fmt]}")
