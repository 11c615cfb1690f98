"""`--engine` (an engine profile name, optionally with a version), `--state-dtype` (the state pool's dtype
that engine is run with) and `--mamba-strategy` (sglang's state pool strategy): each refused with one line naming
the option and the choices."""

from __future__ import annotations

import typer

from ..base.errors import printable
from ..deployment.settings import GPU_SM, gpu_sm, mamba_strategy_problem, sm_problem
from ..engines.profiles import (
    ENGINE_NAMES,
    NEWEST_VERIFIED,
    PROFILES,
    EngineProfile,
    UnknownEngineError,
    profile_for,
    state_dtype_problem,
)


def engine_help(default: str) -> str:
    """The `--engine` help text, ending with what happens when the option is left out."""
    first = ", ".join(f"{p.display_name} {p.version}" for p in (_first_profile(name) for name in ENGINE_NAMES))
    newest = ", ".join(f"{name} {release}" for name, release in NEWEST_VERIFIED.items())
    return (f"Engine release: {' or '.join(ENGINE_NAMES)}, optionally @version (e.g. sglang@0.5.21, vllm@0.27.1): "
            f"any release from {first} on is checked as the profile of its release epoch (verified up to {newest}); "
            f"a name alone is its newest profile. Default: {default}.")


def _first_profile(name: str) -> EngineProfile:
    return next(p for p in PROFILES if p.name == name)


def engine_option(value: str) -> str:
    """`value` if it selects an engine profile; a usage error (exit 2, one line naming the choices) if not."""
    try:
        profile_for(value)
    except UnknownEngineError as error:
        raise typer.BadParameter(str(error), param_hint="--engine") from None
    return value


def gpu_option(gpu: str | None, sm: int | None) -> int | None:
    """The compute capability x10 that `--gpu NAME` or `--sm N` gives (None: neither); a usage error (exit 2, one
    line) for an unknown GPU, a value out of range, or both options at once."""
    if gpu is not None and sm is not None:
        raise typer.BadParameter("give --gpu or --sm, not both", param_hint="--gpu")
    if sm is not None:
        problem = sm_problem(sm)
        if problem is not None:
            raise typer.BadParameter(problem, param_hint="--sm")
        return sm
    if gpu is None:
        return None
    found = gpu_sm(gpu)
    if found is None:
        raise typer.BadParameter(f"unknown GPU '{printable(gpu)}'; expected one of: {', '.join(GPU_SM)} (or --sm N)",
                                 param_hint="--gpu")
    return found


def state_dtype_option(value: str) -> str:
    """`value` if it names a state dtype the engines support; a usage error (exit 2, one line) if not."""
    problem = state_dtype_problem(value)
    if problem is not None:
        raise typer.BadParameter(problem, param_hint="--state-dtype")
    return value


def mamba_strategy_option(value: str) -> str:
    """`value` if it is one of sglang's mamba radix cache strategies; a usage error (exit 2, one line) if not."""
    problem = mamba_strategy_problem(value)
    if problem is not None:
        raise typer.BadParameter(problem, param_hint="--mamba-strategy")
    return value
