"""`SourceError`: a checkpoint that cannot be read, as one line naming the file, tied to a GDR0xx rule."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..report import Diagnostic
    from .checkpoint import KeyLocation

# Values come from files written by strangers: keep each one short and printable so that the message stays
# one readable line whatever a header holds.
_MAX_VALUE_CHARS = 160


def display_path(path: str | os.PathLike[str]) -> str:
    """`path` relative to the working directory when it lies below it, else absolute."""
    absolute = os.path.abspath(os.fspath(path))
    try:
        relative = os.path.relpath(absolute)
    except ValueError:  # another drive on Windows
        return absolute
    return absolute if relative.startswith("..") else relative


def printable(value: Any, limit: int = _MAX_VALUE_CHARS) -> str:
    """`value` as text without control characters or line breaks, shortened to about `limit` characters."""
    text = str(value)
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    if text.isprintable():
        return text
    return "".join(
        ch if ch.isprintable() else ch.encode("unicode_escape").decode("ascii")
        for ch in text
    )


class SourceError(Exception):
    """The checkpoint cannot be read. `str(e)` is one line: the file, the rule's message, and the fix.

    `code` is a GDR0xx rule declared in `gdr_check.checks.rules_source`; the message is that rule's template
    filled with `values`, so the one-line error and the rule's docs never drift apart.
    """

    def __init__(
        self,
        code: str,
        path: str | os.PathLike[str] | None,
        /,
        *,
        fix: str | None = None,
        location: "KeyLocation | None" = None,
        **values: Any,
    ) -> None:
        rule = _rule(code)
        self.code = code
        self.name = rule.name
        self.path = display_path(path) if path is not None else None
        self.values = {key: printable(value) for key, value in values.items()}
        self.message = rule.message.format(**self.values)
        self.fixes: list[str] = [printable(fix, 400)] if fix else list(rule.fixes[:1])
        # Template values that are also parts of the location (`line`, `tensor`, ...) serve both.
        self.line: int | None = location.line if location else values.get("line")
        self.column: int | None = location.column if location else values.get("column")
        self.end_line: int | None = location.end_line if location else None
        self.end_column: int | None = location.end_column if location else None
        self.tensor: str | None = values.get("tensor")
        self.shard: str | None = values.get("shard")
        where = printable(self.path, 400) if self.path else None
        # Prefix the file unless the message already names it (`path ... does not exist`).
        text = f"{where}: {self.message}" if where and f"`{where}`" not in self.message else self.message
        if self.fixes and not self.message.endswith(self.fixes[0]):  # a message may end with its own fix
            text += f"; help: {self.fixes[0]}"
        super().__init__(text)

    def diagnostic(self) -> "Diagnostic":
        """The error as a `Diagnostic` of its rule, located at the file (and line) it names."""
        from ..checks.registry import Finding
        from ..report import Location

        location = Location(
            file=self.path, line=self.line, column=self.column, end_line=self.end_line,
            end_column=self.end_column, tensor=self.tensor, shard=self.shard,
        )
        return _rule(self.code).diagnostic(Finding(values=dict(self.values), fixes=list(self.fixes), location=location))


def _rule(code: str):
    # Imported here, not at module level: `checks/__init__` may import modules that import `sources`, and the
    # rules only need to exist by the time an error is raised.
    from ..checks import rules_source  # noqa: F401  (registers the GDR0xx rules)
    from ..checks.registry import RULES

    rule = RULES.get(code)
    if rule is None:
        raise KeyError(f"{code} is not a declared rule")
    return rule
