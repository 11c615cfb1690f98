"""`dry_run`: the deployment's per-rank call run on synthetic tensors in a child process (`gdr-check dry-run`), as
one `Run`; `ranks="all"` runs every rank of the TP group."""

from __future__ import annotations

from dataclasses import field
from typing import Any, ClassVar

from ...base.records import dataclass
from ...engines.profiles import DEFAULT_ENGINE
from ...sources import SourceError
from ..library import DeploymentError, deployment_of, selected_diagnostics
from ..model_check import check_model
from ..results import FAILING_DEFAULT, FatalError, Run, TargetResult
from ..selection import Selection
from .driver import DryRunResult, dry_run_check
from .rank_run import RanksResult, ranks_dry_run

# -- dry-run ---------------------------------------------------------------------------------------------------------
RANKS = ("one", "all")


@dataclass
class DryRunTargetResult(TargetResult):
    """A deployment's call run on synthetic tensors: one rank's (`DryRunResult`) or the TP group's
    (`RanksResult`, `ranks="all"`). The subject of `gdr-check dry-run`."""

    kind: ClassVar[str] = "dry-run"
    record: DryRunResult | RanksResult = field(kw_only=True)

    def document(self) -> dict[str, Any]:
        return self.unreadable_document() if self.error is not None else self.record_document(self.record.to_dict())


class DryRunOptionError(DeploymentError, ValueError):
    """A dry-run option the run cannot use (`ranks` not one or all, `weights` without `ranks="all"`): exit 2."""


def ranks_problem(ranks: object) -> str | None:
    """Why `ranks` is no `--ranks` value, or None when it is one (the CLI's and the library's words)."""
    return None if isinstance(ranks, str) and ranks in RANKS else f"expected one or all, got {ranks!r}"


def weights_problem(weights: object, ranks: object) -> str | None:
    """Why `weights` cannot be used with `ranks`, or None when it can (the CLI's and the library's words)."""
    if not isinstance(weights, bool):
        return f"expected True or False, got {weights!r}"
    return "--weights is read by --ranks all" if weights and ranks != "all" else None


def dry_run_options(ranks: object, weights: object) -> None:
    """DryRunOptionError (a ValueError) naming `ranks` or `weights` when the dry-run cannot use them."""
    problem = ranks_problem(ranks)
    if problem is not None:
        raise DryRunOptionError(f"ranks: {problem}")
    problem = weights_problem(weights, ranks)
    if problem is not None:
        raise DryRunOptionError(f"weights: {problem}")


def dry_run(target: str, *, tp: int = 1, batch: int = 8, slots: int | None = None, state_dtype: str | None = None,
            engine: str = DEFAULT_ENGINE, backend: str = "builtin", device: str = "auto", steps: int = 3,
            seed: int = 0, timeout: float = 1800.0, selection: Selection | None = None,
            failing: tuple[str, ...] = FAILING_DEFAULT, exit_zero: bool = False, ranks: str = "one",
            weights: bool = False, engine_reason: str = "default", metadata_cache: bool | None = None) -> Run:
    """Run the deployment's per-rank kernel call on synthetic tensors in a child process (this process never
    imports torch) and verify every step. One result, whose `details` is the `runner.api.DryRunResult`; a
    target that cannot be read is a FatalError result (exit 2), a dry-run that did not launch or failed
    fails the run even when selection hides its diagnostics. `ranks="all"` runs one process per TP rank
    (`runner.ranks_api.ranks_dry_run`, whose `RanksResult` is then the `details`); `weights` reads one layer's
    real `A_log` and `dt_bias` for it (DryRunOptionError, a ValueError, for any other `ranks` or for `weights`
    without `ranks="all"`). `metadata_cache`: as `open_checkpoint` takes it."""

    dry_run_options(ranks, weights)  # refused as `--ranks`/`--weights` are, before the model is read
    deployment = deployment_of(tp=tp, batch=batch, slots=slots, state_dtype=state_dtype, engine=engine,
                               engine_reason=engine_reason)  # `engine_reason`: why `engine` (ENGINE_REASONS)
    try:
        check = check_model(target, deployment, metadata_cache=metadata_cache)
    except SourceError as error:
        fatal = FatalError(error.code, str(error), error.path, diagnostic=error.diagnostic())
        return Run([TargetResult(target, error=fatal, tp=tp)], failing=failing, exit_zero=exit_zero)
    if ranks == "all":
        gathered = ranks_dry_run(check, backend=backend, device=device, steps=steps, seed=seed, timeout=timeout,
                                 weights=weights)
        passed = gathered.ok
        gathered.diagnostics = selected_diagnostics(selection, gathered.diagnostics)
        result = DryRunTargetResult(target, check=check, diagnostics=list(gathered.diagnostics), tp=tp,
                                    incomplete=not passed, record=gathered)
        return Run([result], failing=failing, exit_zero=exit_zero)
    outcome = dry_run_check(check, backend=backend, device=device, steps=steps, seed=seed, timeout=timeout)
    passed = outcome.ok and outcome.launched  # judged before selection: a hidden GDR3xx error is still a failure
    outcome.diagnostics = selected_diagnostics(selection, outcome.diagnostics)
    result = DryRunTargetResult(target, check=check, diagnostics=list(outcome.diagnostics), tp=tp,
                                incomplete=not passed, record=outcome)
    return Run([result], failing=failing, exit_zero=exit_zero)

