"""The dry-run as a library call: check the deployment, refuse on errors, run the child, collect diagnostics.

Torch-free: torch and triton are imported only by the child process.
"""

from __future__ import annotations

import shlex
from dataclasses import field
from typing import TYPE_CHECKING, Any

from ...base.errors import InputError, printable
from ...base.identity import REPORT_SCHEMA_VERSION
from ...base.limits import checked
from ...base.records import dataclass
from ...base.report import Diagnostic
from ...base.variants import variant_spec
from ...checks import rules_dryrun, rules_model
from ...deployment.decode_path import DecodePath, decode_path
from ...deployment.settings import Deployment
from ...engines.profiles import ENGINE_NAMES, profile_for
from ...models.adapters import identify
from ..model_check import ModelCheck, check_model
from .backends import known_unavailable, missing_backend
from .child_launch import DEFAULT_TIMEOUT_S, ChildOutcome, run_child
from .diagnose import dryrun_diagnostics
from .plan import DryRunPlan, plan_for

if TYPE_CHECKING:
    from ..model_check import ModelCheck



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
    nothing_to_run: Diagnostic | None = None  # GDR314: no packed-decode call to run (kept whatever the selection)

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
        return refused_because(self.check, launched=self.launched, unavailable=self.unavailable,
                               nothing_to_run=self.nothing_to_run)

    def to_dict(self) -> dict[str, Any]:
        """The stable JSON document: fields are only ever added."""
        check = self.check
        document = check.to_dict()
        child = self.child
        plan = self.plan
        document.update({
            "schema_version": REPORT_SCHEMA_VERSION,
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


def refused_because(check: ModelCheck, *, launched: bool, unavailable: str | None,
                    nothing_to_run: Diagnostic | None) -> list[str]:
    """The codes that kept a dry-run (one rank or `--ranks all`) from launching; [] when it launched."""
    if launched:
        return []
    if unavailable is not None:
        return [rules_dryrun.BackendUnavailable.rule.code]
    if nothing_to_run is not None:
        return [nothing_to_run.code]
    return [d.code for d in check.report if d.severity == "error"]


def nothing_to_run(check: ModelCheck, backend: str = "builtin") -> Diagnostic | None:
    """GDR314 when a deployment without errors has no packed-decode call for the dry-run to run: the model has no
    GDN or KDA layers, or the engine's decode step calls another kernel. None when there is a call, or when the
    deployment's errors are the refusal. `backend` is the one asked for: the fixes name the options to change."""
    if not check.report.ok:
        return None
    if check.model is None:
        return _no_linear_layers(check)
    if check.decode is not None and not check.decode.packed:
        return _not_packed(check, check.decode, backend)
    if check.call is None:  # an ok report gives a call; said rather than an exit 1 without a diagnostic
        return rules_dryrun.NothingToDryRun(why="the deployment has no per-rank kernel call").diagnostic(
            notes=["the geometry is incomplete or TP does not split the heads"])
    return None


def _no_linear_layers(check: ModelCheck) -> Diagnostic:
    subject = identify(check.checkpoint.config).subject  # as GDR101 names it
    told = [d for d in check.report if d.code == rules_model.NoLinearLayers.rule.code]
    fixes = [
        f"if {subject} is the model you deploy, it has no packed decode to verify: leave it out of the dry-run "
        "(`gdr-check TARGET` reports it as GDR101, a note, exit 0)",
        f"if the deployed model has GDN or KDA layers, point the dry-run at its checkpoint: this config describes "
        f"{subject}",
    ]
    return rules_dryrun.NothingToDryRun(why=f"{subject} has no GDN or KDA layers").diagnostic(
        notes=[note for d in told for note in d.notes], fixes=fixes,
        location=told[0].location if told else None)


def _not_packed(check: ModelCheck, path: DecodePath, backend: str) -> Diagnostic:
    model = check.model
    assert model is not None, "a decode path is that of a described model"
    profile = check.deployment.profile
    decode = profile.decode_of(model.kind)
    # The switch changes the deployment's path; the dry-run models the engine's default decode kernels.
    fixes = [f"in the deployment: {path.switch} (the dry-run models the default decode kernels, so it does not "
             "follow this switch)"] if path.switch else []
    for name in ENGINE_NAMES:
        other = decode_path(model, name)
        if name == profile.name or not other.packed:
            continue
        layers = f"its {variant_spec(model.kind).label} layers decode with `{other.kernel}`"
        display = profile_for(name).display_name
        if backend == "builtin":
            fixes.append(f"dry-run under {display}: `--engine {name}` ({layers})")
        else:  # `--backend` runs its engine's kernel, with that engine's semantics: both options change
            fixes.append(f"dry-run under {display}: `--engine {name} --backend builtin` ({layers}); "
                         f"`--engine {name} --backend {name}` also runs {display}'s own kernel")
    engine = profile.name if profile_for(profile.name) is profile else profile.spec
    target = shlex.quote(printable(str(getattr(check.checkpoint, "target", None) or "TARGET")))
    fixes.append(f"`gdr-check {target} --engine {engine}` with the same deployment options (`--tp`, `--batch`, "
                 "`--slots`, `--state-dtype`) still checks the TP split, the state pools and the shapes; only the "
                 "kernel contract and the dry-run need the packed call")
    why = (f"under {profile.label} the decode step calls its own `{path.kernel}` (another argument list), not the "
           "contract's packed decode kernel" if decode.kernel == path.kernel and decode.grids else
           f"under {profile.label} the decode step calls `{path.kernel}`, not a packed decode kernel")
    return rules_dryrun.NothingToDryRun(why=why).diagnostic(notes=[path.reason], fixes=fixes)


def _shown(check: ModelCheck) -> list[Diagnostic]:
    # The deployment's own errors and warnings; its infos belong to `gdr-check PATH`.
    return [d for d in check.report if d.severity in ("error", "warning")]


def dry_run_check(check: ModelCheck, *, backend: str = "builtin", device: str = "auto", steps: int = 3, seed: int = 0,
                  timeout: float = DEFAULT_TIMEOUT_S, timing: bool = True) -> DryRunResult:
    """Run the dry-run for a `ModelCheck`, or refuse when it has errors or nothing to run (GDR314, decided before
    the environment is looked at). Raises DryRunEnvironmentError (also for an engine backend that is not
    installed), and LimitError (a ValueError) for steps, seed or timeout outside docs/limits.md."""
    for name, value in (("steps", steps), ("seed", seed), ("timeout", timeout)):
        checked(name, value)
    # The deployment decides before the environment: with nothing to run (GDR314), a missing `--backend` engine
    # would not be used either, so it is not asked for (exit 2).
    nothing = nothing_to_run(check, backend)
    if nothing is not None:
        return DryRunResult(check=check, diagnostics=[nothing] + _shown(check), nothing_to_run=nothing)
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
