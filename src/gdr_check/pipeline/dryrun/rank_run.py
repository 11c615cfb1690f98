"""`dry-run --ranks all` as a library call: plan, run the rank processes, turn what they said into diagnostics.

Torch-free: torch and triton are imported only by the rank processes.
"""

from __future__ import annotations

import importlib.util
from dataclasses import field
from typing import TYPE_CHECKING, Any

from ...base.records import dataclass
from ...base.report import Diagnostic
from ...checks import rules_dryrun, rules_ranks
from ...models.sharding import model_layout, ranges
from .backends import known_unavailable, missing_backend
from .diagnose import KERNEL_NAMES, fmt, interpreter_diagnostics, number
from .driver import DryRunEnvironmentError, nothing_to_run, refused_because
from .messages import not_importable
from .plan import plan_for
from .ranks import RanksOutcome, run_ranks
from .weights import layer_parameters

if TYPE_CHECKING:
    from ..model_check import ModelCheck


@dataclass
class RanksResult:
    check: ModelCheck
    tp: int
    outcome: RanksOutcome | None = None
    diagnostics: list[Diagnostic] = field(default_factory=list)
    unavailable: str | None = None
    weights: dict[str, Any] | None = None  # where the real `A_log`/`dt_bias` came from (--weights)
    nothing_to_run: Diagnostic | None = None  # GDR314: no packed-decode call to run (kept whatever the selection)

    @property
    def result(self) -> dict[str, Any]:
        return dict(self.outcome.result or {}) if self.outcome is not None else {}

    @property
    def ok(self) -> bool:
        return self.outcome is not None and bool(self.result) and \
            not any(d.severity == "error" for d in self.diagnostics)

    @property
    def refused_because(self) -> list[str]:
        return refused_because(self.check, launched=self.outcome is not None, unavailable=self.unavailable,
                               nothing_to_run=self.nothing_to_run)

    def slowest(self) -> dict[str, Any] | None:
        """The rank with the longest warm kernel time (GPU), else the longest verified calls (interpreter)."""
        ranks = self.result.get("ranks") or []
        if not ranks:
            return None
        if all(r.get("timed_us") for r in ranks):
            return dict(max(ranks, key=lambda r: sum(r["timed_us"].values())))
        return dict(max(ranks, key=lambda r: sum(sum(v) for v in r["seconds"].values())))

    def to_dict(self) -> dict[str, Any]:
        """The stable JSON document: the deployment's check (model, deployment, per-rank call, as the one-rank
        dry-run's), then what the rank processes did."""
        result = self.result
        outcome = self.outcome
        return self.check.to_dict() | {
            "command": "dry-run", "ranks": "all", "tp": self.tp, "passed": self.ok,
            "refused_because": self.refused_because, "backend_unavailable": self.unavailable,
            "transport": result.get("transport"), "environment": result.get("device"),
            "kernels": result.get("kernels", {}), "layer": result.get("layer"), "sharding": result.get("sharding"),
            "geometry": result.get("geometry"), "steps": result.get("steps", []),
            "per_rank": result.get("ranks", []), "slowest_rank": (self.slowest() or {}).get("rank"),
            "misshards": result.get("misshards", []),
            "weights": self.weights,
            "processes": None if outcome is None else {
                "timed_out": outcome.timed_out, "first_failure": outcome.first_failure, "wall_s": outcome.wall_s,
                "returncodes": [r.returncode for r in outcome.ranks]},
            "diagnostics": [d.to_dict() for d in self.diagnostics],
        }


def _matches(per_rank: dict[str, Any]) -> str:
    """Which reference heads the rank's `out` heads match: its own, another rank's, or none."""
    rank, (first, last) = per_rank["rank"], per_rank["heads"]
    own, moved, none = [], [], []
    for local, matched in enumerate(per_rank["out_matches"]):
        head = first + local
        if head in matched:
            own.append(head)
        elif matched:
            moved.append((head, matched[0]))
        else:
            none.append(head)
    parts = []
    if moved:
        parts.append(f"its heads {ranges([h for h, _ in moved])} match reference heads "
                     f"{ranges([m for _, m in moved])} (another block)")
    if none:
        parts.append(f"{len(none)} of its {last - first + 1} heads ({ranges(none)}) match no reference head")
    if own:
        parts.append(f"{len(own)} match{'es' if len(own) == 1 else ''} its own")
    return f"rank {rank}'s `out`: " + ", ".join(parts)


def ranks_diagnostics(outcome: RanksOutcome, tp: int) -> list[Diagnostic]:
    diagnostics: list[Diagnostic] = []
    if outcome.result is None:
        if outcome.timed_out:
            behind = min(outcome.ranks, key=lambda r: len(r.events))
            diagnostics.append(rules_ranks.FailedRank(
                rank=behind.rank, tp=tp,
                how=f"did not finish within {outcome.timeout:g} s ({behind.last_event}); every rank was stopped",
            ).diagnostic())
            return diagnostics
        failed = outcome.ranks[outcome.first_failure or 0]
        others = [r.rank for r in outcome.ranks if r.killed]
        stopped = f"; rank(s) {ranges(others)} were stopped" if others else ""
        diagnostics.append(rules_ranks.FailedRank(rank=failed.rank, tp=tp, how=failed.how() + stopped).diagnostic(
            notes=[failed.last_stderr_line]))
        return diagnostics
    result = outcome.result
    for miss in result.get("misshards", []):
        diagnostics.append(rules_ranks.MisshardedTensor(
            tensor=miss["tensor"], rank=miss["rank"], detail=miss["detail"]).diagnostic())
    HV = (result.get("layer") or {}).get("HV", 0)
    reported_nan: set[int] = set()
    for step in result.get("steps", []):
        for name, run in step["kernels"].items():
            for entry in run["per_rank"]:
                nan = entry["nan_out"] + entry["nan_state"]
                if nan and entry["rank"] not in reported_nan:
                    reported_nan.add(entry["rank"])
                    diagnostics.append(rules_ranks.FailedRank(
                        rank=entry["rank"], tp=tp,
                        how=f"returned NaN at step {step['step']} ({entry['nan_out']} in `out`, "
                            f"{entry['nan_state']} in the state of touched slots, "
                            f"{KERNEL_NAMES.get(name, name)} kernel)").diagnostic())
    for name in (result.get("kernels") or {}):
        failing = [(s, s["kernels"][name]) for s in result.get("steps", []) if name in s["kernels"]
                   and not (s["kernels"][name]["output"]["passed"] and s["kernels"][name]["state"]["passed"])]
        if not failing:
            continue
        step, run = failing[0]
        tensor = "out" if not run["output"]["passed"] else "state"
        check = run["output" if tensor == "out" else "state"]
        HV_l = HV // tp if tp else HV
        head = check["head"] or 0
        rank = head // HV_l if HV_l else 0
        tolerance = number(check["tolerance"])
        bad = [r for r in run["per_rank"]
               if not number(r["out_error"]) <= tolerance or not number(r["state_error"]) <= tolerance]
        matches = "; ".join(_matches(r) for r in bad) or "no single rank stands out"
        diagnostics.append(rules_ranks.ShardedMismatch(
            kernel=KERNEL_NAMES.get(name, name), tp=tp, step=step["step"], tensor=tensor,
            error=fmt(check["error"]), tolerance=fmt(check["tolerance"]), head=head, rank=rank,
            matches=matches).diagnostic())
    return diagnostics + interpreter_diagnostics(result)


def ranks_dry_run(check: ModelCheck, *, backend: str = "builtin", device: str = "auto", steps: int = 3, seed: int = 0,
                  timeout: float = 1800.0, weights: bool = False) -> RanksResult:
    """Run every rank of the deployment's TP group; refuses (no launch) when the check has errors or nothing to
    run (GDR314).

    `weights`: use one layer's real `A_log` and `dt_bias` from the checkpoint (raises WeightsError)."""
    tp = check.deployment.tp
    shown = [d for d in check.report if d.severity in ("error", "warning")]
    nothing = nothing_to_run(check, backend)  # before the environment, as the one-rank dry-run
    if nothing is not None:
        return RanksResult(check=check, tp=tp, diagnostics=[nothing] + shown, nothing_to_run=nothing)
    if not check.report.ok or check.call is None or check.model is None:
        return RanksResult(check=check, tp=tp, diagnostics=shown)
    plan = plan_for(check, backend=backend, device=device, steps=steps, seed=seed, timing=False)
    absent = missing_backend(backend, plan.variant)
    if absent is not None:  # an engine that is not here: exit 2, as the one-rank dry-run and a missing torch
        raise DryRunEnvironmentError(absent)
    reason = known_unavailable(backend, plan.variant)
    if reason is not None:
        missing = rules_dryrun.BackendUnavailable(backend=backend, reason=reason).diagnostic()
        return RanksResult(check=check, tp=tp, diagnostics=[missing] + shown, unavailable=reason)
    layout = model_layout(check.model)
    located = layer_parameters(check) if weights else None
    # Each rank would fail alone on a missing package (reported as that rank's failure): said once, as the one-rank
    # dry-run says it, after what can be refused without the packages.
    absent = next((package for package in ("torch", "triton") if importlib.util.find_spec(package) is None), None)
    if absent is not None:
        raise DryRunEnvironmentError(not_importable(absent, f"No module named {absent!r}"))
    outcome = run_ranks(plan, layout=layout, tp=tp, timeout=timeout, weights=located)
    diagnostics = ranks_diagnostics(outcome, tp)
    unavailable = (outcome.result or {}).get("backend_unavailable")
    if unavailable:
        diagnostics.insert(0, rules_dryrun.BackendUnavailable(
            backend=unavailable.get("backend"), reason=unavailable.get("reason")).diagnostic())
    return RanksResult(check=check, tp=tp, outcome=outcome, diagnostics=diagnostics + shown, weights=located)
