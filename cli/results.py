"""What one run of `gdr-check check` produced: a result per (target, deployment), read by every renderer."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..report import Diagnostic, Report


@dataclass
class FatalError:
    """The target could not be read (exit 2)."""

    code: str
    message: str
    path: str | None = None


@dataclass
class TargetResult:
    target: str
    check: Any = None  # gdr_check.models.ModelCheck when the target was read
    error: FatalError | None = None
    diagnostics: list[Diagnostic] = field(default_factory=list)  # after selection

    @property
    def report(self) -> Report:
        return Report(self.diagnostics)

    @property
    def label(self) -> str:
        if self.check is not None and self.check.deployment.tp != 1:
            return f"{self.target} (tp={self.check.deployment.tp})"
        return self.target

    def document(self) -> dict[str, Any]:
        """The stable JSON document of this result (also for a target that could not be read)."""
        from .output import SCHEMA_VERSION, fatal_document, tool_info

        if self.error is not None:
            doc = fatal_document(self.error.code, self.error.message, self.error.path)
            doc["source"] = {"target": self.target, "path": self.error.path}
            return doc
        doc = {"schema_version": SCHEMA_VERSION, "tool": tool_info()}
        doc.update(self.check.to_dict())
        doc["schema_version"] = SCHEMA_VERSION
        doc["diagnostics"] = [d.to_dict() for d in self.diagnostics]
        return doc


def exit_code(results: list[TargetResult], *, error_on_warning: bool = False, exit_zero: bool = False) -> int:
    if any(r.error is not None for r in results):
        return 2
    if exit_zero:
        return 0
    failing = ("error", "warning") if error_on_warning else ("error",)
    return 1 if any(d.severity in failing for r in results for d in r.diagnostics) else 0
