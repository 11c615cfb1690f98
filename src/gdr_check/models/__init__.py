"""Model descriptions: architecture adapters, built-in geometries, deployments and per-rank kernel shapes.

The public names are loaded on first use (PEP 562), so importing a submodule, e.g. from the GDR1xx rules,
does not pull in the whole pipeline.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_dir, lazy_getattr

_EXPORTS: dict[str, str] = {
    "check_model": "check", "check_checkpoint": "check", "check_builtin": "check", "ModelCheck": "check",
    "open_target": "check", "SCHEMA_VERSION": "check",
    "Deployment": "deployment", "EngineSettings": "deployment", "resolve": "deployment",
    "LinearAttentionModel": "description", "Source": "description", "describe": "description",
    "expected_call": "expected", "engine_pools": "expected", "state_memory": "expected",
    "per_rank_heads": "expected", "StateMemory": "expected", "RankHeads": "expected",
    "BuiltinModel": "builtin", "list_builtin": "builtin", "get_builtin": "builtin",
    "select_adapter": "adapters", "ADAPTERS": "adapters",
}

# Written out so that type checkers and linters see the public names; tests/test_exports.py keeps it
# equal to the keys of `_EXPORTS`.
__all__ = [
    "ADAPTERS", "BuiltinModel", "Deployment", "EngineSettings", "LinearAttentionModel", "ModelCheck", "RankHeads",
    "SCHEMA_VERSION", "Source", "StateMemory", "check_builtin", "check_checkpoint", "check_model", "describe",
    "engine_pools", "expected_call", "get_builtin", "list_builtin", "open_target", "per_rank_heads", "resolve",
    "select_adapter", "state_memory",
]

if TYPE_CHECKING:
    from .adapters import ADAPTERS, select_adapter
    from .builtin import BuiltinModel, get_builtin, list_builtin
    from .check import SCHEMA_VERSION, ModelCheck, check_builtin, check_checkpoint, check_model, open_target
    from .deployment import Deployment, EngineSettings, resolve
    from .description import LinearAttentionModel, Source, describe
    from .expected import RankHeads, StateMemory, engine_pools, expected_call, per_rank_heads, state_memory


__getattr__ = lazy_getattr(__name__, {name: f".{module}" for name, module in _EXPORTS.items()}, globals())
__dir__ = lazy_dir(_EXPORTS, globals())
