"""The registry of checks and the contract engine.

Each rule module registers its rules when imported; a run imports the modules it reports from (see
`all_rules`). `gdr_check.checks.RULES` and `get` load every rule first: GDR0xx (sources), GDR1xx (model), GDR2xx
(kernel call), GDR3xx (dry-run). The names below are loaded on first use (PEP 562), so importing one rule
module does not import the others.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..base.lazy import lazy_dir, lazy_getattr

_EXPORTS = {
    "RULES": ".all_rules",  # every rule, registered first
    "get": ".all_rules",
    "Finding": "..base.registry",
    "Rule": "..base.registry",
    "PackedDecodeCall": "..call.packed_call",
    "check_kda_packed_decode": ".contract",
    "check_packed_decode": ".contract",
    "run_contract": ".contract",
}

__all__ = [
    "RULES", "Finding", "PackedDecodeCall", "Rule", "check_kda_packed_decode", "check_packed_decode", "get",
    "run_contract",
]

if TYPE_CHECKING:
    from ..base.registry import RULES, Finding, Rule, get
    from ..call.packed_call import PackedDecodeCall
    from .contract import check_kda_packed_decode, check_packed_decode, run_contract

__getattr__ = lazy_getattr(__name__, _EXPORTS, globals())
__dir__ = lazy_dir(_EXPORTS, globals())
