"""`--engine` (an engine profile name, optionally with a version), `--state-dtype` (the state pool's dtype
that engine is run with) and `--mamba-strategy` (sglang's state pool strategy): each refused with one line naming
the option and the choices."""

from __future__ import annotations

import typer

from ..deployment.settings import mamba_strategy_problem
from ..engines.profiles import ENGINE_NAMES, PROFILES, UnknownEngineError, profile_for, state_dtype_problem


def engine_help(default: str) -> str:
    """The `--engine` help text, ending with what happens when the option is left out."""
    return (f"Engine profile: {' or '.join(ENGINE_NAMES)}, optionally @version "
            f"({', '.join(p.spec for p in PROFILES)}); a name alone is its newest profile. Default: {default}.")


def engine_option(value: str) -> str:
    """`value` if it selects an engine profile; a usage error (exit 2, one line naming the choices) if not."""
    try:
        profile_for(value)
    except UnknownEngineError as error:
        raise typer.BadParameter(str(error), param_hint="--engine") from None
    return value


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
