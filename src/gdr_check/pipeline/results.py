"""What one run produced: a result per subject (a target and deployment, a recording, a dry-run), each with its
diagnostics, read by every output format. `check`, `call` and `dry-run` all build one `Run` of these."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..base.identity import REPORT_SCHEMA_VERSION, tool_info
from ..base.report import Diagnostic, Report

if TYPE_CHECKING:
    from .model_check import ModelCheck

# What a result is about: a checkpoint at a deployment, a recording of kernel calls, or a dry-run.
SUBJECT_KINDS = ("check", "call", "dry-run")

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
    target: str
    check: ModelCheck | None = None  # when the target was read
    error: FatalError | None = None
    diagnostics: list[Diagnostic] = field(default_factory=list)  # after selection
    tp: int | None = None  # the requested TP size (also set when the target could not be read)
    kind: str = "check"  # one of SUBJECT_KINDS
    details: Any = None  # the call or dry-run record (`to_dict()`, its renderers' data) for those kinds
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
        if self.kind == "call" or self.check is None:  # a recording's diagnostics are about the recording
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
            doc = fatal_document(self.error.code, self.error.message, self.error.path)
            doc["source"] = {"target": self.target, "path": self.error.path}
            if self.error.diagnostic is not None:
                doc["diagnostics"] = [self.error.diagnostic.to_dict()]
            return doc
        doc = {"schema_version": REPORT_SCHEMA_VERSION, "tool": tool_info()}
        if self.kind != "check":  # the call or dry-run record (its `command` says which), then the diagnostics
            doc.update(self.details.to_dict())
            doc.setdefault("source", self.path)
            doc["command"] = self.kind
            doc["tool"] = tool_info()
            doc["schema_version"] = REPORT_SCHEMA_VERSION
            doc["diagnostics"] = [d.to_dict() for d in self.diagnostics]
            return doc
        assert self.check is not None, "a check result without an error holds its model check"
        doc.update(self.check.to_dict())
        doc["schema_version"] = REPORT_SCHEMA_VERSION
        doc["diagnostics"] = [d.to_dict() for d in self.diagnostics]
        return doc


@dataclass
class Run:
    """Every result of one invocation, with what the renderers need to know about the run as a whole."""

    results: list[TargetResult]
    failing: tuple[str, ...] = FAILING_DEFAULT
    exit_zero: bool = False
    color: bool = False
    ascii_only: bool = False  # tables in ASCII boxes: stdout's encoding lacks box drawing
    show_info: bool = False  # info notes as alerts too (SARIF results, annotations, code-quality issues)
    quiet: bool = False  # the diagnostics only: no headers, tables or summary
    # The human report names the targets that could not be read, as their stderr lines do: a report file,
    # which those lines do not reach (on stdout they would say it twice).
    errors_in_report: bool = False

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
