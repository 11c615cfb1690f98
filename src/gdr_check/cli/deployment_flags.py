"""The command-line names of a deployment's settings, one table for `check` and `launch`.

`check` declares its deployment options under these names; `launch` reads a deployment from an engine's command
and shows it as the `check` command line that checks the same deployment (`check_command`), built from the same
table, so the two commands cannot drift apart.
"""

from __future__ import annotations

import shlex

from ..deployment.settings import MAMBA_STRATEGIES, Deployment

# Deployment field -> the `check` option that sets it (in the order `check --help` lists them).
FLAGS: dict[str, str] = {
    "tp": "--tp",
    "batch": "--batch",
    "slots": "--slots",
    "state_dtype": "--state-dtype",
    "engine": "--engine",
    "gpu_memory": "--gpu-memory",
    "mamba_strategy": "--mamba-strategy",
    "speculative_tokens": "--speculative-tokens",
    "sm": "--sm",  # the GPU's compute capability x10 (`check` also takes it as `--gpu NAME`)
}
# Deployment field -> the `check` switch that turns it off (sglang's own flag names; on by default).
SWITCHES_OFF: dict[str, str] = {
    "overlap_schedule": "--disable-overlap-schedule",
    "radix_cache": "--disable-radix-cache",
}
# What `check` assumes when an option is left out (None: the engine's choice, or nothing).
DEFAULTS: dict[str, object] = {"mamba_strategy": MAMBA_STRATEGIES[0], "speculative_tokens": 0}


def check_command(target: str, deployment: Deployment) -> str:
    """`gdr-check TARGET --engine ... --tp ...`: the `check` command line for `deployment`."""
    words = ["gdr-check", target]
    for field, flag in FLAGS.items():
        value = getattr(deployment, field)
        if value is None or DEFAULTS.get(field) == value:
            continue
        words += [flag, str(value)]
    words += [flag for field, flag in SWITCHES_OFF.items() if not getattr(deployment, field)]
    return " ".join(shlex.quote(word) for word in words)
