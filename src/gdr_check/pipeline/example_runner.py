"""Runs each rule's executable example through the stage that reports the rule, and returns the diagnostics.

The examples are data declared with their rules (`Rule.example`): a checkpoint's files for GDR0xx
(`sources.examples`), a config for GDR1xx, a kernel call for GDR2xx, a dry-run child's result for GDR3xx
(or a config the dry-run refuses before any child runs; `checks.examples`), an argument for the runtime guard
(`checks.rules_guard`). Running one needs the stage that reports its rule, and several of these sit above the
rules (the model check, the dry-run's diagnosis), so the runner is here, at the diagnostics layer, and the rules
import nothing above themselves.
tests/test_rule_examples.py runs every example and asserts that it fires exactly its own rule.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..base.registry import Example, RuleSet
from ..base.report import Diagnostic
from ..base.source_error import SourceError
from ..call.packed_call import CallContext
from ..checks.compare import ModelGeometry, compare_call, contract_arguments
from ..checks.contract import _diagnostics
from ..checks.examples import (
    CallExample,
    CompareExample,
    DryRunExample,
    ModelExample,
    RanksExample,
    RefusedDryRunExample,
    base_arguments,
    config_checkpoint,
)
from ..checks.rules_guard import GuardExample, argument_report
from ..deployment.settings import Deployment
from ..sources import TensorInfo, open_checkpoint
from ..sources.examples import CheckpointExample
from .dryrun.child_launch import ChildOutcome
from .dryrun.diagnose import dryrun_diagnostics
from .dryrun.driver import dry_run_check, nothing_to_run
from .dryrun.rank_run import ranks_diagnostics
from .dryrun.ranks import RankOutcome, RanksOutcome
from .model_check import check_checkpoint


def _call(example: CallExample, rules: RuleSet) -> list[Diagnostic]:
    return _diagnostics(CallContext.build(example.call(), example.engine), rules=rules)


def _guard(example: GuardExample, rules: RuleSet) -> list[Diagnostic]:
    report = argument_report({**base_arguments(example.variant), **example.changes}, rules)
    return list(report.diagnostics) if report is not None else []


def _checkpoint(example: CheckpointExample, rules: RuleSet) -> list[Diagnostic]:
    """The files written to a scratch directory and read as `gdr-check TARGET` would."""
    with tempfile.TemporaryDirectory(prefix="gdr-check-example-") as scratch:
        root = Path(scratch)
        example.write(root)
        target = example.target if example.repo_id else str(root / example.target)
        try:
            checkpoint = open_checkpoint(target, cache_dir=str(root / "hub"))
        except SourceError as error:
            return [error.diagnostic()]
    return list(checkpoint.diagnostics)  # the notes of a checkpoint read anyway (GDR013)


def _model(example: ModelExample, rules: RuleSet) -> list[Diagnostic]:
    tensors = {name: TensorInfo(name, dtype, shape, "model.safetensors")
               for name, (dtype, shape) in example.tensor_shapes().items()}
    checkpoint = config_checkpoint(example.config, tensors)
    return list(check_checkpoint(checkpoint, Deployment(**example.deployment)).report)


def _compare(example: CompareExample, rules: RuleSet) -> list[Diagnostic]:
    """The recording checked by the contract, then compared with the model's call, as `gdr-check call` does."""
    check = check_checkpoint(config_checkpoint(example.config), Deployment(tp=example.tp, engine=example.engine))
    if check.call is None or check.model is None:
        raise ValueError(f"the example config gives no call at tp={example.tp}")
    recorded = example.recorded()
    found = _diagnostics(CallContext.build(recorded, example.engine), rules=rules)
    geometry = ModelGeometry.from_model(check.model, "config.json", example.config.get("head_dim"))
    comparison = compare_call(recorded, check.call, geometry, tp=example.tp, engine=example.engine,
                              state_dtype_reason=check.settings.state_dtype_reason if check.settings else None,
                              contract_flagged=contract_arguments(found))
    return [d for d in found if d.code not in comparison.supersedes] + comparison.diagnostics


def _dry_run(example: DryRunExample, rules: RuleSet) -> list[Diagnostic]:
    result = None if example.result is None else dict(example.result)
    return dryrun_diagnostics(ChildOutcome(result, example.returncode, example.stderr), example.backend)


def _refused(example: RefusedDryRunExample, rules: RuleSet) -> list[Diagnostic]:
    """The config checked for the deployment, then dry-run as `gdr-check dry-run config.json` does; refused before
    any child runs (an example that would launch one is a mistake in the example)."""
    check = check_checkpoint(config_checkpoint(example.config), Deployment(**example.deployment))
    if nothing_to_run(check, example.backend) is None and check.report.ok:
        raise ValueError("the example deployment has a packed-decode call: its dry-run would launch a child")
    return dry_run_check(check, backend=example.backend).diagnostics


def _ranks(example: RanksExample, rules: RuleSet) -> list[Diagnostic]:
    if example.result is None:
        failed = RankOutcome(1, 1, [{"event": "failed", **dict(example.failure or {})}], "")
        waiting = RankOutcome(0, -15, [{"event": "gather", "step": 1}], "", killed=True)
        outcome = RanksOutcome(2, [waiting, failed], first_failure=1)
    else:
        outcome = RanksOutcome(2, [RankOutcome(0, 0, [{"event": "result", **dict(example.result)}], ""),
                                   RankOutcome(1, 0, [], "")])
    return ranks_diagnostics(outcome, 2)


_RUNNERS: dict[type, Callable[[Any, RuleSet], list[Diagnostic]]] = {
    CallExample: _call, GuardExample: _guard, CheckpointExample: _checkpoint, ModelExample: _model,
    CompareExample: _compare, DryRunExample: _dry_run, RanksExample: _ranks, RefusedDryRunExample: _refused,
}


def run_example(example: Example, rules: RuleSet) -> list[Diagnostic]:
    """The diagnostics `example` gets from the stage that reports its rule, with the rules of `rules`. An
    example of a kind this module does not know runs itself (`example.diagnostics(rules)`: the pasted log
    lines of GDR4xx, which `checks.explain` matches within the rules layer)."""
    run = _RUNNERS.get(type(example))
    if run is not None:
        return run(example, rules)
    diagnostics = getattr(example, "diagnostics", None)
    if diagnostics is None:
        raise TypeError(f"no runner for the example type {type(example).__name__}")
    result: list[Diagnostic] = diagnostics(rules)
    return result
