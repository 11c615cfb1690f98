"""Model descriptions: a checkpoint's config read as a `LinearAttentionModel` (architecture adapters, built-in
geometries, quantized weights, the TP sharding of each layer).

The public names are loaded on first use (PEP 562), so importing a submodule, e.g. from the GDR1xx rules,
does not pull in the others.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..base.lazy import lazy_dir, lazy_getattr

_EXPORTS: dict[str, str] = {
    "LinearAttentionModel": "description", "Source": "description", "describe": "description",
    "BuiltinModel": "builtin", "list_builtin": "builtin", "get_builtin": "builtin",
    "select_adapter": "adapters", "ADAPTERS": "adapters",
}

# Written out so that type checkers and linters see the public names; tests/test_exports.py keeps it
# equal to the keys of `_EXPORTS`.
__all__ = [
    "ADAPTERS", "BuiltinModel", "LinearAttentionModel", "Source", "describe", "get_builtin", "list_builtin",
    "select_adapter",
]

if TYPE_CHECKING:
    from .adapters import ADAPTERS, select_adapter
    from .builtin import BuiltinModel, get_builtin, list_builtin
    from .description import LinearAttentionModel, Source, describe


__getattr__ = lazy_getattr(__name__, {name: f".{module}" for name, module in _EXPORTS.items()}, globals())
__dir__ = lazy_dir(_EXPORTS, globals())
