"""Diagnostics and reports: what every check produces and every renderer consumes."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import asdict, field
from typing import Any, Literal

from .identity import VERSION
from .records import dataclass

Severity = Literal["error", "warning", "info"]
SEVERITY_RANK: dict[str, int] = {"info": 0, "warning": 1, "error": 2}
# The project's home, as named in the README and pyproject's [project.urls] (a test keeps the three equal).
PROJECT_URL = "https://github.com/gdr-check/gdr-check"
# The rule pages of this very release: absolute (SARIF's helpUri must be) and versioned, so that a report links
# to the text of the rules that produced it. Each rule has a page; docs/rules.md indexes them.
RULE_DOCS_URL = f"{PROJECT_URL}/blob/v{VERSION}/docs/rules"
LIMITS_DOCS_URL = f"{PROJECT_URL}/blob/v{VERSION}/docs/limits.md"  # (the wheel holds no docs/)


def rule_url(code: str) -> str:
    """Where a rule is documented: its page `docs/rules/<CODE>.md`."""
    return f"{RULE_DOCS_URL}/{code}.md"


@dataclass(frozen=True)
class KeyLocation:
    """A span in a JSON file, 1-based; `end_column` is the column after the last character.

    For an object key it runs from the key's opening quote to the end of its value.
    """

    line: int
    column: int
    end_line: int
    end_column: int


@dataclass(slots=True)
class Location:
    """Where a diagnostic points: a config key or index line, a tensor, or a kernel argument."""

    file: str | None = None
    json_key: str | None = None
    line: int | None = None
    column: int | None = None
    end_line: int | None = None
    end_column: int | None = None
    tensor: str | None = None
    shard: str | None = None
    argument: str | None = None

    def __str__(self) -> str:
        if self.file is None:
            return f"argument `{self.argument}`" if self.argument else "<call>"
        text = self.file
        if self.line is not None:
            text += f":{self.line}:{self.column or 1}"
        return text


@dataclass(slots=True)
class Diagnostic:
    code: str
    name: str
    severity: Severity
    message: str
    fixes: list[str] = field(default_factory=list)
    wrapper: bool = False
    notes: list[str] = field(default_factory=list)
    location: Location | None = None
    bindings: dict[str, Any] = field(default_factory=dict)
    summary: str = ""

    @property
    def url(self) -> str:
        return rule_url(self.code)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["url"] = self.url
        return data


@dataclass
class Report:
    """The outcome of checking one target: every diagnostic, wrapper-enforced ones first in wrapper order."""

    diagnostics: list[Diagnostic] = field(default_factory=list)

    def __iter__(self) -> Iterator[Diagnostic]:
        return iter(self.diagnostics)

    def __len__(self) -> int:
        return len(self.diagnostics)

    @property
    def errors(self) -> list[Diagnostic]:
        return [d for d in self.diagnostics if d.severity == "error"]

    @property
    def warnings(self) -> list[Diagnostic]:
        return [d for d in self.diagnostics if d.severity == "warning"]

    @property
    def ok(self) -> bool:
        return not self.errors

    def codes(self) -> list[str]:
        return [d.code for d in self.diagnostics]

    def raise_for_errors(self) -> None:
        """Raise ValueError with the first error's message, as the reference wrapper would."""
        for diagnostic in self.diagnostics:
            if diagnostic.severity == "error":
                raise ValueError(diagnostic.message)

    def __repr__(self) -> str:
        return f"Report(ok={self.ok}, codes={self.codes()})"
