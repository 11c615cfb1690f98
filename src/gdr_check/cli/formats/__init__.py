"""One module per output format; each turns a `Run` into text (`render`) and a run that could not complete
into that format's error record (`render_fatal`). Only `full` and `concise` are for people; `json`,
`json-lines` and `sarif` are the stable formats for programs."""

from __future__ import annotations

import importlib
from types import ModuleType

# Format name -> module of this folder. Adding a format is a module here and its line below
# (docs/how-to/add-an-output-format.md).
MODULES = {
    "full": "full", "concise": "concise", "json": "json", "json-lines": "json_lines", "sarif": "sarif",
    "github": "github", "junit": "junit", "gitlab": "gitlab",
}
FORMATS = tuple(MODULES)  # the choices of --output-format, GDR_CHECK_OUTPUT_FORMAT and `output-format`


def format_module(fmt: str) -> ModuleType:
    """The module rendering `fmt`, imported on demand so that a run loads only what it prints."""
    return importlib.import_module(f"{__name__}.{MODULES[fmt]}")
