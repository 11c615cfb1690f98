"""The tool's identity in every document it writes: its name, its version, and the report schema's version."""

from __future__ import annotations

TOOL_NAME = "gdr-check"
VERSION = "0.1.0"  # pyproject.toml's version (tests/test_cli_details.py keeps them equal)
# The version of the JSON report (`--output-format json`, `docs/ci.md`); a recording has its own
# (`call/recording.py`).
REPORT_SCHEMA_VERSION = 1


def tool_info() -> dict[str, str]:
    """The `tool` object of every document: which tool, which release."""
    return {"name": TOOL_NAME, "version": VERSION}
