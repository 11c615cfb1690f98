"""Turn the paths on the command line into checkpoints, each checked once.

pre-commit passes the changed files one by one (`ckpt/config.json ckpt/model-00001-of-00002.safetensors`),
but a shard says nothing about a model alone: a `config.json`, a `.safetensors` file or a safetensors index
stands for the directory that holds it. Directories and repo ids are kept as given.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from ..base.files import is_checkpoint_file_name


def checkpoint_target(argument: str) -> str:
    """The checkpoint `argument` belongs to: its directory for a config, shard or index file."""
    name = os.path.basename(argument.rstrip("/"))
    if os.path.isfile(argument) and is_checkpoint_file_name(name):
        return os.path.dirname(argument.rstrip("/")) or "."
    return argument


def group_targets(arguments: Iterable[str]) -> list[str]:
    """Checkpoints in first-seen order, without repeats (`a/`, `./a` and `a/config.json` are one)."""
    seen: set[str] = set()
    targets: list[str] = []
    for argument in arguments:
        target = checkpoint_target(argument)
        key = os.path.realpath(target) if os.path.lexists(target) else target
        if key not in seen:
            seen.add(key)
            targets.append(target.rstrip("/") or target)
    return targets
