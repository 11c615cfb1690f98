"""What several formats share: where a diagnostic points, the concise line, counts and the summary line."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, cast

from ...base.records import dataclass
from ...base.report import Diagnostic
from ...pipeline.results import Run, TargetResult
from ..escape import text as safe
from .options import RenderOptions

if TYPE_CHECKING:  # (a check's report never loads the call or dry-run modules: a subject's `kind` says which)
    from ...pipeline.call_check import CallResult

SEVERITIES = ("error", "warning", "info")


@dataclass(frozen=True)
class Where:
    """A diagnostic's position as a file and 1-based line/column; `path` None when no file exists (a built-in
    model description), in which case `target` names what was checked."""

    target: str
    path: str | None
    line: int | None = None
    column: int | None = None
    end_line: int | None = None
    end_column: int | None = None

    @property
    def start(self) -> tuple[int, int]:
        """Line and column, 1:1 for a diagnostic about the file as a whole."""
        return (self.line or 1, self.column or 1)

    def prefix(self) -> str:
        """`path:line:col` or, without any file, the target."""
        if self.path is None:
            return self.target
        line, column = self.start
        return f"{self.path}:{line}:{column}"


def where(result: TargetResult, diagnostic: Diagnostic) -> Where:
    """Where `diagnostic` points; diagnostics without a file (kernel arguments, TP rules, footprints) point at
    the checkpoint's `config.json`, else its index, else its first file read."""
    location = diagnostic.location
    if location is not None and location.file:
        return Where(result.target, location.file, location.line, location.column, location.end_line,
                     location.end_column)
    return Where(result.target, result.fallback_file())


def entries(run: Run) -> Iterator[tuple[TargetResult, Diagnostic]]:
    """Every (result, diagnostic) pair, an unreadable target's GDR0xx diagnostic included, in report order."""
    for result in run.results:
        if result.error is not None:
            if result.error.diagnostic is not None:
                yield result, result.error.diagnostic
            continue
        for diagnostic in result.diagnostics:
            yield result, diagnostic


def alerts(run: Run, options: RenderOptions) -> Iterator[tuple[TargetResult, Diagnostic]]:
    """The entries that become open alerts (SARIF results, GitHub annotations, GitLab code-quality issues):
    info notes only with `--show-info`, since nothing can be changed to close them."""
    for result, diagnostic in entries(run):
        if options.show_info or diagnostic.severity != "info":
            yield result, diagnostic


def tp_suffix(run: Run, result: TargetResult) -> str:
    """` [tp=4]` in a matrix run, where the same line can come from several TP sizes."""
    if not run.is_matrix or result.deployment_tp is None or result.error is not None:
        return ""  # an unreadable target fails the same way at every TP size
    return f" [tp={result.deployment_tp}]"


def concise_line(run: Run, result: TargetResult, diagnostic: Diagnostic) -> str:
    """`path:line:col: severity[CODE] message`, the severity and code as the `full` format heads them."""
    return (f"{where(result, diagnostic).prefix()}: {diagnostic.severity}[{diagnostic.code}] {diagnostic.message}"
            f"{tp_suffix(run, result)}")


def fatal_line(result: TargetResult) -> str | None:
    """The concise line of a target that could not be read, when no GDR0xx diagnostic describes it."""
    if result.error is None or result.error.diagnostic is not None:
        return None
    return f"{result.error.path or result.target}: error[{result.error.code}] {result.error.message}"


def counts(run: Run) -> dict[str, int]:
    found = dict.fromkeys(SEVERITIES, 0)
    for result in run.results:
        for diagnostic in result.diagnostics:
            found[diagnostic.severity] += 1
    return found


def severity_counts(found: dict[str, int]) -> str:
    return f"{found['error']} error(s), {found['warning']} warning(s), {found['info']} note(s)"


def diagnostics_tally(diagnostics: Iterable[Diagnostic]) -> str:
    """'1 error(s), 2 warning(s), 0 note(s)' of `diagnostics`, as every summary line says it."""
    found = {"error": 0, "warning": 0, "info": 0}
    for diagnostic in diagnostics:
        found[diagnostic.severity] += 1
    return severity_counts(found)


def calls_checked(count: int) -> str:
    """What a `call` run checked, as every format's summary says it: its calls, not its one recording."""
    return f"{count} call(s) checked"


def summary_line(run: Run) -> str:
    found = counts(run)
    unreadable = sum(r.error is not None for r in run.results)
    readable = [r for r in run.results if r.error is None]
    # (a served worker's guard report counts the calls its guard checked there)
    records = [cast("CallResult", r).record for r in readable if r.kind == "call"]
    calls = [len(record.calls) if record.recording.guard is None else record.recording.guard.calls
             for record in records]
    if readable and len(calls) == len(readable):  # a recording's calls, as the full format counts them
        checked = calls_checked(sum(calls))
    else:
        checked = f"{len(readable)} checked"
    text = f"summary: {checked}: " + severity_counts(found)
    if unreadable:
        text += f"; {unreadable} could not be read"
    return text


def plain(text: str) -> str:
    """One line of safe text, whatever a message holds (messages quote values read from files written by
    strangers): see `..escape.text`."""

    return safe(text)


@dataclass(frozen=True)
class MatrixRow:
    """One TP size of one target in a deployment matrix."""

    target: str
    tp: int | None
    passed: bool
    errors: int
    warnings: int
    value_heads_per_rank: int | None
    width: int | None  # `mixed_qkv` width per rank
    state_bytes_per_request: int | None


def matrix_rows(run: Run) -> list[MatrixRow]:
    rows: list[MatrixRow] = []
    for result in run.results:
        check = result.check
        heads = getattr(check, "heads", None)
        memory = getattr(check, "memory", None)
        rows.append(MatrixRow(
            target=result.target, tp=result.deployment_tp, passed=not run.fails(result),
            errors=sum(d.severity == "error" for d in result.diagnostics),
            warnings=sum(d.severity == "warning" for d in result.diagnostics),
            value_heads_per_rank=heads.HV if heads is not None else None,
            width=heads.width if heads is not None else None,
            state_bytes_per_request=memory.bytes_per_request if memory is not None else None,
        ))
    return rows


def mib(n: int | float | None) -> str:
    return "-" if n is None else f"{n / 2**20:.3f}".rstrip("0").rstrip(".") + " MiB"


def passing_tp_sizes(rows: list[MatrixRow], target: str) -> list[int]:
    return [row.tp for row in rows if row.target == target and row.passed and row.tp is not None]
