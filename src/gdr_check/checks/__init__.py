"""The registry of checks and the contract engine.

Importing this package registers every rule: GDR0xx (sources), GDR1xx (model), GDR2xx (kernel call),
GDR3xx (dry-run).
"""

from ..base.registry import RULES, Finding, Rule, get
from ..call.packed_call import PackedDecodeCall
from ..sources import rules as source_rules  # noqa: F401  (the GDR0xx rules live with the readers that raise them)
from . import (  # noqa: F401  (importing registers the rules)
    compare,
    rules_assumed,
    rules_dryrun,
    rules_guard,
    rules_launch,
    rules_model,
    rules_param_dtype,
    rules_pasted,
    rules_pasted_launch,
    rules_ranks,
    rules_wrapper,
)
from .contract import check_kda_packed_decode, check_packed_decode, run_contract

__all__ = [
    "RULES", "Finding", "PackedDecodeCall", "Rule", "check_kda_packed_decode", "check_packed_decode", "get",
    "run_contract",
]
