"""gdr-check: shape diagnostics for the GDN/KDA packed recurrent decode kernels.

The metadata path (this module, shape descriptions, checkpoint headers) never imports torch or triton:
the public names below are loaded lazily (PEP 562), so `import gdr_check` stays cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_EXPORTS = {
    "check_packed_decode": "gdr_check.checks.contract",
    "check_kda_packed_decode": "gdr_check.checks.contract",
    "run_contract": "gdr_check.checks.contract",
    "PackedDecodeCall": "gdr_check.checks.call",
    "Report": "gdr_check.report",
    "Diagnostic": "gdr_check.report",
    "Location": "gdr_check.report",
    "TensorSpec": "gdr_check.tensors",
    "RULES": "gdr_check.checks.registry",
    "capture": "gdr_check.capture",
}

__all__ = sorted(_EXPORTS) + ["__version__"]

if TYPE_CHECKING:
    from .checks.call import PackedDecodeCall
    from .checks.contract import check_kda_packed_decode, check_packed_decode, run_contract
    from .capture import capture
    from .checks.registry import RULES
    from .report import Diagnostic, Location, Report
    from .tensors import TensorSpec


def __getattr__(name: str) -> Any:
    module_name = _EXPORTS.get(name)
    if module_name is None:
        raise AttributeError(f"module 'gdr_check' has no attribute {name!r}")
    import importlib

    if name == "RULES":
        importlib.import_module("gdr_check.checks")  # registers every rule
    value = getattr(importlib.import_module(module_name), name)
    globals()[name] = value
    return value
