"""What one run produced: a result per subject, each with its diagnostics, read by every output format. `check`,
`call` and `dry-run` all build one `Run` of these: a `TargetResult` is a checkpoint at a deployment; the
subjects of the other commands are its subclasses where they are built (`call_check.CallResult`,
`dryrun.entry.DryRunTargetResult`), each holding its typed record and writing its own document."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import field
from typing import TYPE_CHECKING, Any, ClassVar

from ..base.identity import REPORT_SCHEMA_VERSION, tool_info
from ..base.records import dataclass
from ..base.report import Diagnostic, Report

if TYPE_CHECKING:
    from .model_check import ModelCheck

FAILING_DEFAULT = ("error",)
FAILING_WITH_WARNINGS = ("error", "warning")


@dataclass
class FatalError:
    """The target (or the whole run) could not be completed: exit 2."""

    code: str
    message: str
    path: str | None = None
    diagnostic: Diagnostic | None = None  # the GDR0xx diagnostic, when a reader raised it


@dataclass
class TargetResult:
    """A checkpoint checked at one deployment (or a target that could not be read)."""

    kind: ClassVar[str] = "check"  # the command whose subject this is: "check", "call" or "dry-run"
    target: str
    check: ModelCheck | None = None  # when the target was read
    error: FatalError | None = None
    diagnostics: list[Diagnostic] = field(default_factory=list)  # after selection
    tp: int | None = None  # the requested TP size (also set when the target could not be read)
    path: str | None = None  # the file that stands for a subject without a checkpoint (a recording)
    incomplete: bool = False  # the subject failed beyond its diagnostics (a dry-run that could not launch)

    @property
    def report(self) -> Report:
        return Report(self.diagnostics)

    @property
    def deployment_tp(self) -> int | None:
        if self.check is not None:
            return self.check.deployment.tp
        return self.tp

    @property
    def label(self) -> str:
        if self.check is not None and self.check.deployment.tp != 1:
            return f"{self.target} (tp={self.check.deployment.tp})"
        return self.target

    def fallback_file(self) -> str | None:
        """The file that stands for the checkpoint when a diagnostic has none (a kernel argument, a TP
        rule): its `config.json`, else its index. None for a built-in description (no file at all)."""
        if self.check is None:
            return self.error.path if self.error is not None else self.path
        source = self.check.source_dict()
        candidates: list[str | None] = [source.get("config_file"), source.get("index_file"),
                                        *source.get("files_read", ())]
        for candidate in candidates:
            if candidate:
                return candidate
        return None

    def document(self) -> dict[str, Any]:
        """The stable JSON document of this result (also for a target that could not be read)."""
        if self.error is not None:
            return self.unreadable_document()
        assert self.check is not None, "a check result without an error holds its model check"
        doc: dict[str, Any] = {"schema_version": REPORT_SCHEMA_VERSION, "tool": tool_info()}
        doc.update(self.check.to_dict())
        doc["schema_version"] = REPORT_SCHEMA_VERSION
        doc["diagnostics"] = [d.to_dict() for d in self.diagnostics]
        return doc

    def unreadable_document(self) -> dict[str, Any]:
        """The document of a subject that could not be read: the error, where, and its GDR0xx diagnostic."""
        assert self.error is not None
        doc = fatal_document(self.error.code, self.error.message, self.error.path)
        doc["source"] = {"target": self.target, "path": self.error.path}
        if self.error.diagnostic is not None:
            doc["diagnostics"] = [self.error.diagnostic.to_dict()]
        return doc

    def record_document(self, record: Mapping[str, Any]) -> dict[str, Any]:
        """The document of a `call` or `dry-run` subject: its record (`record`), where it came from, the
        command, then the diagnostics."""
        doc: dict[str, Any] = {"schema_version": REPORT_SCHEMA_VERSION, "tool": tool_info()}
        doc.update(record)
        doc.setdefault("source", self.path)
        doc["command"] = self.kind
        doc["tool"] = tool_info()
        doc["schema_version"] = REPORT_SCHEMA_VERSION
        doc["diagnostics"] = [d.to_dict() for d in self.diagnostics]
        return doc


@dataclass
class Run:
    """Every result of one invocation, and what fails it (how a report looks is the renderers' own
    `cli.formats.options.RenderOptions`)."""

    results: list[TargetResult]
    failing: tuple[str, ...] = FAILING_DEFAULT
    exit_zero: bool = False

    @property
    def exit_code(self) -> int:
        return exit_code(self.results, error_on_warning="warning" in self.failing, exit_zero=self.exit_zero)

    @property
    def is_matrix(self) -> bool:
        """Several TP sizes for one target: labels and lines then name the TP size.

        Renderers ask once per diagnostic: the answer is kept for as long as `results` is the same list of
        the same length, so rendering stays linear in the results."""
        key = (id(self.results), len(self.results))
        cached = self.__dict__.get("_matrix")
        if cached is not None and cached[0] == key:
            return bool(cached[1])
        sizes: dict[str, set[int | None]] = {}
        matrix = False
        for result in self.results:
            tps = sizes.setdefault(result.target, set())
            tps.add(result.deployment_tp)
            matrix = matrix or len(tps) > 1
        self.__dict__["_matrix"] = (key, matrix)
        return matrix

    def fails(self, result: TargetResult) -> bool:
        return (result.error is not None or result.incomplete
                or any(d.severity in self.failing for d in result.diagnostics))


def exit_code(results: list[TargetResult], *, error_on_warning: bool = False, exit_zero: bool = False) -> int:
    """2 if any target could not be read; else 0 with --exit-zero; else 1 if any diagnostic fails the run (or a
    subject could not complete, a dry-run that did not launch)."""
    if any(r.error is not None for r in results):
        return 2
    if exit_zero:
        return 0
    failing = FAILING_WITH_WARNINGS if error_on_warning else FAILING_DEFAULT
    failed = any(r.incomplete or any(d.severity in failing for d in r.diagnostics) for r in results)
    return 1 if failed else 0


def fatal_document(code: str, message: str, path: str | None) -> dict[str, Any]:
    """The JSON document of a run (or target) that could not complete."""
    return {
        "schema_version": REPORT_SCHEMA_VERSION,
        "tool": tool_info(),
        "source": path,
        "error": {"code": code, "message": message, "path": path},
        "diagnostics": [],
    }
