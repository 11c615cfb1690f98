"""The child's result (or its crash) as GDR3xx diagnostics (no torch here: this runs in the CLI process).

One diagnostic per (check, kernel): the worst failing step in the message, every failing step in a note.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from ...base.registry import Violation
from ...base.report import Diagnostic
from ...checks import rules_dryrun as rules
from ...engines.profiles import PROFILES
from .child_launch import ChildOutcome

# The kernels a dry-run compares, as people name them: ours and each engine's (by profile name).
KERNEL_NAMES = {"builtin": "gdr-check", **{p.name: p.display_name for p in PROFILES}}


def number(value: Any) -> float:
    """A float from the child's JSON, where non-finite values arrive as strings."""
    return float(value) if value is not None else math.nan


def fmt(value: Any) -> str:
    x = number(value)
    return f"{x:.2g}" if math.isfinite(x) else str(x)


def _rows(rows: list[int], limit: int = 8) -> str:
    text = ", ".join(map(str, rows[:limit]))
    return text + (f" and {len(rows) - limit} more" if len(rows) > limit else "")


def _failing(steps: list[dict[str, Any]], kernel: str, check: str) -> list[tuple[int, dict[str, Any]]]:
    found = []
    for step in steps:
        result = step.get("kernels", {}).get(kernel, {}).get(check)
        if result is not None and not result.get("passed", True):
            found.append((step["step"], result))
    return found


def _ratio(result: dict[str, Any], key: str = "error") -> float:
    ratio = number(result.get(key)) / number(result.get("tolerance"))
    return math.inf if math.isnan(ratio) else ratio


def _steps_note(failing: list[tuple[int, dict[str, Any]]], total: int) -> list[str]:
    if len(failing) <= 1:
        return []
    return [f"fails at steps {', '.join(str(s) for s, _ in failing)} of {total}"]


def _verification(steps: list[dict[str, Any]], kernel: str, out_dtype: str, state_dtype: str) -> list[Diagnostic]:
    name = KERNEL_NAMES.get(kernel, kernel)
    total = len(steps)
    found: list[Diagnostic] = []
    checks: list[tuple[str, Callable[[dict[str, Any]], float], Callable[[int, dict[str, Any]], Violation], str]] = [
        ("written", lambda r: r["nan_elements"],
         lambda s, r: rules.UnwrittenOutput(kernel=name, count=r["nan_elements"], step=s, rows=_rows(r["rows"])),
         "out"),
        ("output", _ratio,
         lambda s, r: rules.OutputMismatch(kernel=name, step=s, error=fmt(r["error"]), tolerance=fmt(r["tolerance"]),
                                           dtype=out_dtype, row=r["row"], head=r["head"]), "out"),
        ("state", _ratio,
         lambda s, r: rules.StateMismatch(kernel=name, step=s, error=fmt(r["error"]), tolerance=fmt(r["tolerance"]),
                                          dtype=state_dtype, slot=r["slot"], head=r["head"]), "initial_state"),
        ("untouched", lambda r: r["modified_elements"],
         lambda s, r: rules.UntouchedModified(kernel=name, count=r["modified_elements"], step=s, where=r["first"]),
         "initial_state"),
        ("skipped_rows", lambda r: r["nonzero_elements"],
         lambda s, r: rules.SkippedNotZero(kernel=name, count=r["nonzero_elements"], step=s, rows=_rows(r["rows"])),
         "out"),
    ]
    for check, severity_of, violation_of, argument in checks:
        failing = _failing(steps, kernel, check)
        if not failing:
            continue
        step, worst = max(failing, key=lambda item: severity_of(item[1]))
        found.append(violation_of(step, worst).diagnostic(argument=argument, notes=_steps_note(failing, total)))
    return found


def _agreement(steps: list[dict[str, Any]], engine: str) -> list[Diagnostic]:
    found = []
    for tensor in ("out", "initial_state"):
        failing = [(s["step"], s["agreement"][tensor]) for s in steps
                   if not s.get("agreement", {}).get(tensor, {}).get("passed", True)]
        if not failing:
            continue
        step, worst = max(failing, key=lambda item: _ratio(item[1], "difference"))
        violation = rules.BackendDisagreement(engine=KERNEL_NAMES.get(engine, engine), tensor=tensor, step=step,
                                              difference=fmt(worst["difference"]), tolerance=fmt(worst["tolerance"]))
        found.append(violation.diagnostic(argument=tensor, notes=_steps_note(failing, len(steps))))
    return found


def _raised(steps: list[dict[str, Any]]) -> list[Diagnostic]:
    found = []
    for step in steps:
        for kernel, result in step.get("kernels", {}).items():
            if "raised" in result:
                raised = result["raised"]
                message = raised["message"].splitlines()[0] if raised["message"] else "(no message)"
                found.append(rules.KernelRaised(
                    kernel=KERNEL_NAMES.get(kernel, kernel), exception=raised["exception"], step=step["step"],
                    error=message,
                ).diagnostic(notes=["the child stopped after this call: a CUDA error can leave its context unusable"]))
    return found


def interpreter_diagnostics(result: dict[str, Any]) -> list[Diagnostic]:
    """GDR321-GDR322 of a run under the Triton interpreter (one child's result, or the ranks' gathered one)."""
    if not result.get("device", {}).get("interpreter"):
        return []
    geometry = result.get("geometry") or {}
    found = []
    substitutions = geometry.get("substitutions") or []
    if substitutions:
        arguments = ", ".join(change["what"] for change in substitutions)
        found.append(rules.Bf16NotVerifiable(arguments=arguments).diagnostic())
    reductions = geometry.get("reductions") or []
    if reductions:
        text = ", ".join(f"{c['what']} {c['before']} -> {c['after']}" for c in reductions)
        found.append(rules.ReducedSizes(reductions=text).diagnostic(notes=list(geometry.get("notes", []))))
    return found


def crash_diagnostic(outcome: ChildOutcome) -> Diagnostic:
    notes = []
    if outcome.timed_out:
        notes.append("raise `--timeout`, or run at smaller sizes")
    return rules.ChildCrashed(how=outcome.how(), last_line=outcome.last_stderr_line).diagnostic(notes=notes)


def dryrun_diagnostics(outcome: ChildOutcome, backend: str) -> list[Diagnostic]:
    """Every GDR3xx diagnostic of one child run, errors first."""
    if outcome.crashed:
        return [crash_diagnostic(outcome)]
    result = outcome.result or {}
    if result.get("status") == "failed":
        return [rules.ChildCrashed(
            how=f"failed with {result.get('exception', 'an exception')}", last_line=result.get("message", ""),
        ).diagnostic(notes=["set GDR_CHECK_DEBUG=1 to see the child's traceback"])]
    missing = result.get("backend_unavailable")
    if missing:
        unavailable = rules.BackendUnavailable(backend=missing.get("backend"), reason=missing.get("reason"))
        return [unavailable.diagnostic()] + interpreter_diagnostics(result)
    steps = result.get("steps", [])
    call = (result.get("geometry") or {}).get("call") or {}
    out_dtype = call.get("out", {}).get("dtype", "?")
    state_dtype = call.get("initial_state", {}).get("dtype", "?")
    found = _raised(steps)
    for kernel in result.get("kernels", {}):
        found.extend(_verification(steps, kernel, out_dtype, state_dtype))
    if backend != "builtin":
        found.extend(_agreement(steps, backend))
    found.extend(interpreter_diagnostics(result))
    order = {"error": 0, "warning": 1, "info": 2}
    return sorted(found, key=lambda d: order[d.severity])
