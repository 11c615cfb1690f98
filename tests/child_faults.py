"""Faults for the dry-run's child processes, installed by monkeypatching inside the child (the package has no
test hooks of its own).

A test sets one of the variables below and calls `enable(monkeypatch)`, which puts HOOKS, a folder holding only
a `sitecustomize.py`, first on PYTHONPATH. Python imports that module at start-up in every process started with
it; it calls `install()`, which patches only a dry-run child (`python -m gdr_check.pipeline.dryrun.child`) or a
rank worker (`... .rank_worker`) whose variable is set, and nothing in any other process.

- DRYRUN_FAULT=abort|hang: the one-rank child writes a line to stderr and aborts (SIGABRT), standing in for a
  process killed by a device fault, or sleeps (the timeout path), as it reads its plan, before it imports torch.
- RANKS_FAULT="RANK:raise|abort|hang|nan": that rank raises `RankFault`, aborts or sleeps as its kernel is called,
  or fills its `out` with NaN after each kernel call.
- RANKS_MISSHARD=KIND[,KIND...]: every rank slices with classic mis-shardings (`misshardings.py`) where the
  engine's plan says otherwise; the rank comparing what was received still holds the engine's plan.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

DRYRUN_FAULT = "GDR_CHECK_DRYRUN_TEST_FAULT"
RANKS_FAULT = "GDR_CHECK_RANKS_TEST_FAULT"
RANKS_MISSHARD = "GDR_CHECK_RANKS_TEST_MISSHARD"
HOOKS = Path(__file__).resolve().parent / "child_hooks"
CHILD = "gdr_check.pipeline.dryrun.child"
RANK_WORKER = "gdr_check.pipeline.dryrun.rank_worker"


def enable(monkeypatch: Any) -> None:
    """The processes this test starts load HOOKS' `sitecustomize.py` (the variables choose the fault)."""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(HOOKS), os.environ.get("PYTHONPATH")])))


def environment(base: dict[str, str]) -> dict[str, str]:
    """`base` with HOOKS first on PYTHONPATH, for a process started with an environment of its own."""
    return {**base, "PYTHONPATH": os.pathsep.join(filter(None, [str(HOOKS), base.get("PYTHONPATH")]))}


class RankFault(RuntimeError):
    """The exception a rank raises under RANKS_FAULT=RANK:raise."""


def _module() -> str | None:
    """The module this process runs with `python -m`, if any."""
    argv = getattr(sys, "orig_argv", [])
    return argv[argv.index("-m") + 1] if "-m" in argv[:-1] else None


def install() -> None:
    module = _module()
    if module == CHILD and os.environ.get(DRYRUN_FAULT):
        _install_child_fault(os.environ[DRYRUN_FAULT])
    if module == RANK_WORKER and ":" in os.environ.get(RANKS_FAULT, ""):
        rank, kind = os.environ[RANKS_FAULT].split(":", 1)
        if rank == os.environ.get("RANK"):
            _install_rank_fault(int(rank), kind)
    if module == RANK_WORKER and os.environ.get(RANKS_MISSHARD):
        _install_misshards([kind for kind in os.environ[RANKS_MISSHARD].split(",") if kind])


def _crash_or_hang(kind: str, crash: str) -> None:
    """`abort`: say `crash` on stderr and abort the process, as a device fault does; `hang`: never return."""
    if kind == "abort":
        sys.stderr.write(crash + "\n")
        sys.stderr.flush()
        os.abort()
    if kind == "hang":
        time.sleep(3600)


def _install_child_fault(kind: str) -> None:
    from gdr_check.pipeline.dryrun.plan import DryRunPlan

    real = DryRunPlan.from_dict.__func__  # type: ignore[attr-defined]

    def from_dict(cls: type[DryRunPlan], data: dict[str, Any]) -> DryRunPlan:
        _crash_or_hang(kind, f"simulated device fault ({DRYRUN_FAULT}=abort)")
        return real(cls, data)

    DryRunPlan.from_dict = classmethod(from_dict)  # type: ignore[method-assign, assignment]


def _install_rank_fault(rank: int, kind: str) -> None:
    """Wrap the kernels the rank worker gets (`kernels.builtin_kernel`, `kernels.engine_kernel`); the session
    module that imports them is loaded later, inside the run."""
    import dataclasses

    from gdr_check.pipeline.dryrun import kernels

    def faulty(kernel: Any) -> Any:
        if isinstance(kernel, str):  # why the engine's kernel is missing
            return kernel
        real = kernel.checked

        def checked(*args: Any) -> Any:
            if kind == "raise":
                raise RankFault(f"simulated failure on rank {rank} ({RANKS_FAULT})")
            _crash_or_hang(kind, f"simulated crash on rank {rank}")
            result = real(*args)
            if kind == "nan":
                args[7].fill_(float("nan"))  # `out`, in the wrappers' argument order
            return result

        return dataclasses.replace(kernel, checked=checked)

    builtin, engine = kernels.builtin_kernel, kernels.engine_kernel
    kernels.builtin_kernel = lambda *args: faulty(builtin(*args))  # type: ignore[assignment]
    kernels.engine_kernel = lambda *args: faulty(engine(*args))  # type: ignore[assignment]


def _install_misshards(kinds: list[str]) -> None:
    """The rank worker's plan (`sharding_plan` at tp > 1) comes with the mis-shardings; the unsharded plan (tp = 1)
    and the plan `find_misshards` compares what the ranks received with stay the engine's."""
    from gdr_check.models import sharding
    from misshardings import inject

    real_plan, real_find = sharding.sharding_plan, sharding.find_misshards

    def sharding_plan(layout: str, variant: str, dims: Any, tp: int) -> Any:
        plan = real_plan(layout, variant, dims, tp)
        if tp > 1:
            for kind in kinds:
                plan = inject(plan, kind)
        return plan

    def find_misshards(expected: Any, received: Any) -> Any:
        return real_find(real_plan(expected.layout, expected.variant, expected.dims, expected.tp), received)

    sharding.sharding_plan = sharding_plan  # type: ignore[assignment]
    sharding.find_misshards = find_misshards  # type: ignore[assignment]
