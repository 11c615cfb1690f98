"""The dry-run as a library call: check the deployment, refuse on errors, run the child, collect diagnostics.

Torch-free: torch and triton are imported only by the child process.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..checks import rules_dryrun
from ..errors import InputError
from ..limits import checked
from ..models.check import ModelCheck, check_model
from ..models.deployment import Deployment
from ..report import Diagnostic
from .backends import known_unavailable, missing_backend
from .diagnose import dryrun_diagnostics
from .launch import DEFAULT_TIMEOUT_S, ChildOutcome, run_child
from .plan import DryRunPlan, plan_for

if TYPE_CHECKING:
    from ..models.check import ModelCheck

SCHEMA_VERSION = 1


class DryRunEnvironmentError(InputError, RuntimeError):
    """The child cannot run at all (torch or triton missing, no CUDA device for `--device cuda`, the engine that
    `--backend` names not installed): exit 2."""

    code = "environment"


@dataclass
class DryRunResult:
    check: ModelCheck
    plan: DryRunPlan | None = None
    outcome: ChildOutcome | None = None
    diagnostics: list[Diagnostic] = field(default_factory=list)
    unavailable: str | None = None  # why the backend was refused before a child ran

    @property
    def launched(self) -> bool:
        return self.outcome is not None

    @property
    def child(self) -> dict[str, Any]:
        return (self.outcome.result or {}) if self.outcome is not None else {}

    @property
    def ok(self) -> bool:
        return not any(d.severity == "error" for d in self.diagnostics)

    @property
    def refused_because(self) -> list[str]:
        if self.launched:
            return []
        if self.unavailable is not None:
            return [rules_dryrun.BackendUnavailable.rule.code]
        return [d.code for d in self.check.report if d.severity == "error"]

    def to_dict(self) -> dict[str, Any]:
        """The stable JSON document: fields are only ever added."""
        check = self.check
        document = check.to_dict()
        child = self.child
        plan = self.plan
        document.update({
            "schema_version": SCHEMA_VERSION,
            "command": "dry-run",
            "launched": self.launched,
            "refused_because": self.refused_because,
            "backend_unavailable": self.unavailable,
            "passed": self.ok and self.launched and not (self.outcome and self.outcome.crashed),
            "dry_run": None if plan is None else {
                "backend": plan.backend, "engine": plan.engine, "device_requested": plan.device,
                "steps_requested": plan.steps, "seed": plan.seed,
            },
            "environment": child.get("device"),
            "kernels": child.get("kernels", {}),
            "geometry": child.get("geometry"),
            "steps": child.get("steps", []),
            "timing": child.get("timing"),
            "child": None if self.outcome is None else {
                "returncode": self.outcome.returncode, "timed_out": self.outcome.timed_out,
                "status": child.get("status"), "last_stderr_line": self.outcome.last_stderr_line
                if self.outcome.crashed else None,
            },
            "diagnostics": [d.to_dict() for d in self.diagnostics],
        })
        return document


def _shown(check: ModelCheck) -> list[Diagnostic]:
    # The deployment's own errors and warnings; its infos belong to `gdr-check PATH`.
    return [d for d in check.report if d.severity in ("error", "warning")]


def dry_run_check(check: ModelCheck, *, backend: str = "builtin", device: str = "auto", steps: int = 3, seed: int = 0,
                  timeout: float = DEFAULT_TIMEOUT_S, timing: bool = True) -> DryRunResult:
    """Run the dry-run for a `ModelCheck`, or refuse when it has errors. Raises DryRunEnvironmentError (also for an
    engine backend that is not installed), and LimitError (a ValueError) for steps, seed or timeout outside
    docs/limits.md."""
    for name, value in (("steps", steps), ("seed", seed), ("timeout", timeout)):
        checked(name, value)
    if not check.report.ok or check.call is None:
        return DryRunResult(check=check, diagnostics=_shown(check))
    plan = plan_for(check, backend=backend, device=device, steps=steps, seed=seed, timing=timing)
    absent = missing_backend(backend, plan.variant)
    if absent is not None:  # an engine that is not here: an unusable environment, as a missing torch
        raise DryRunEnvironmentError(absent)
    reason = known_unavailable(backend, plan.variant)
    if reason is not None:
        missing = rules_dryrun.BackendUnavailable(backend=backend, reason=reason).diagnostic()
        return DryRunResult(check=check, plan=plan, diagnostics=[missing] + _shown(check), unavailable=reason)
    outcome = run_child(plan, timeout=timeout)
    if outcome.result is not None and outcome.result.get("status") == "environment":
        raise DryRunEnvironmentError(outcome.result.get("message", "the dry-run environment is broken"))
    return DryRunResult(check=check, plan=plan, outcome=outcome,
                        diagnostics=dryrun_diagnostics(outcome, backend) + _shown(check))


def dry_run(target: str, deployment: Deployment, **options: Any) -> DryRunResult:
    """`check_model(target, deployment)`, then `dry_run_check`. Raises SourceError for unreadable input."""
    return dry_run_check(check_model(target, deployment), **options)
