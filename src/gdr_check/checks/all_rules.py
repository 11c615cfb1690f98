"""Every rule of the package, registered: importing this module imports each rule module.

A run imports only the rule modules it reports from (a checkpoint's check: the readers' GDR0xx, the model's GDR1xx
and the kernel call's GDR2xx, through `rules_model` and `contract`), so `gdr-check <checkpoint>` does not load the
pasted-log, launch and dry-run rules. What needs every rule (selectors, `explain`, SARIF's rule list, the docs)
reads `RULES` from here, or `gdr_check.checks.RULES`, which loads this module on first use.
"""

from ..base.registry import RULES, get
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

__all__ = ["RULES", "get"]
