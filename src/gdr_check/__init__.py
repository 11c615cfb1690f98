"""gdr-check: shape diagnostics for the GDN/KDA packed recurrent decode kernels.

The metadata path (this module, shape descriptions, checkpoint headers) never imports torch or triton:
the public names below are loaded lazily (PEP 562), so `import gdr_check` stays cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .base.identity import VERSION
from .base.lazy import lazy_dir, lazy_getattr

__version__ = VERSION

_EXPORTS = {
    "check_packed_decode": ".checks.contract",
    "check_kda_packed_decode": ".checks.contract",
    "run_contract": ".checks.contract",
    "PackedDecodeCall": ".call.packed_call",
    "Report": ".base.report",
    "Diagnostic": ".base.report",
    "Location": ".base.report",
    "TensorSpec": ".base.tensor_spec",
    "RULES": ".checks",  # the package, which registers every rule first
    "capture": ".pipeline.capture",
    "guard": ".pipeline.guard",
    "Guard": ".pipeline.guard",
    "GuardError": ".pipeline.guard",
    "EngineProfile": ".engines.profiles",
    "PROFILES": ".engines.profiles",
    "UnknownEngineError": ".engines.profiles",
    "profile_for": ".engines.profiles",
    # The library's whole runs, one `Run` each (what the commands render).
    "check_targets": ".pipeline.library", "TargetSettings": ".pipeline.library",
    "check_recording": ".pipeline.call_check", "dry_run": ".pipeline.dryrun.entry", "Run": ".pipeline.results",
}

# Written out so that type checkers and linters see the public names; tests/test_exports.py keeps it
# equal to the keys of `_EXPORTS`.
__all__ = [
    "Diagnostic", "EngineProfile", "Guard", "GuardError", "Location", "PROFILES", "PackedDecodeCall", "RULES",
    "Report", "Run", "TargetSettings", "TensorSpec", "UnknownEngineError", "__version__", "capture",
    "check_kda_packed_decode", "check_packed_decode", "check_recording", "check_targets", "dry_run", "guard",
    "profile_for", "run_contract",
]

if TYPE_CHECKING:
    from .base.registry import RULES
    from .base.report import Diagnostic, Location, Report
    from .base.tensor_spec import TensorSpec
    from .call.packed_call import PackedDecodeCall
    from .checks.contract import check_kda_packed_decode, check_packed_decode, run_contract
    from .engines.profiles import PROFILES, EngineProfile, UnknownEngineError, profile_for
    from .pipeline.call_check import check_recording
    from .pipeline.capture import capture
    from .pipeline.dryrun.entry import dry_run
    from .pipeline.guard import Guard, GuardError, guard
    from .pipeline.library import TargetSettings, check_targets
    from .pipeline.results import Run


__getattr__ = lazy_getattr(__name__, _EXPORTS, globals())
__dir__ = lazy_dir(_EXPORTS, globals())
