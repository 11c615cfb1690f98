"""The contract engine's plan for one variant: its call rules in report order and the all-clear fast path.

`call_plan(rules, variant)` compiles the pass predicates of the reference wrapper's checks (declared with the
rules, in the order `RuleSet.declare_wrapper_order` gives) into one function over a `CallContext`; when it says
all clear (the common case) the contract skips the rules it covers. It lives with the rules, not in the
registry, because it reads the call's context.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..base.records import dataclass
from ..base.registry import Rule, RuleSet
from ..call.packed_call import CallContext

_CLEAR_PREAMBLE = (
    "    c = ctx.call\n"
    "    mixed_qkv, a, b, A_log, dt_bias = c.mixed_qkv, c.a, c.b, c.A_log, c.dt_bias\n"
    "    state, out, indices = c.initial_state, c.out, c.ssm_state_indices\n"
    "    B, HV, V, K, qkv_dim = ctx.B, ctx.HV, ctx.V, ctx.K, ctx.qkv_dim\n"
    # The q and k channels of a row (0 when the width or the pool is unknown), which several checks split.
    "    qk_dim = qkv_dim - HV * V if qkv_dim is not None and HV is not None else 0\n"
)


@dataclass(frozen=True)
class CallPlan:
    """The call rules of one variant in report order (the wrapper's checks in its order, then the rest by
    code), the wrapper rules the all-clear fast path covers (those with a pass predicate), the rules left to
    run when it answers yes, and the fast path itself: `clear(ctx)` is the conjunction of the covered rules'
    predicates, in the wrapper's order, compiled into one function."""

    rules: tuple[Rule, ...]
    covered: frozenset[str]
    after_clear: tuple[Rule, ...]
    clear: Callable[[CallContext], bool]


# (rule set, variant, number of rules) -> plan. Rules are only ever added, so the number of rules tells when an entry
# is stale; the rule set is kept in the entry so that its id is never reused while the entry lives.
_PLANS: dict[tuple[int, str, int], tuple[RuleSet, CallPlan]] = {}


def call_plan(rules: RuleSet, variant: str) -> CallPlan:
    """The rules to run on a call of `variant`, their order and the all-clear fast path (cached)."""
    key = (id(rules), variant, len(rules.rules))
    entry = _PLANS.get(key)
    if entry is None:
        entry = _PLANS[key] = (rules, _build_plan(rules, variant))
    return entry[1]


def _build_plan(rules: RuleSet, variant: str) -> CallPlan:
    steps = rules.wrapper_steps(variant) if variant in rules.wrapper_orders else []
    # Report order: by position, codes sharing a position by code.
    wrapper = [r for step in steps for r in sorted(step, key=lambda r: r.code) if r.scope == "call"]
    in_wrapper = {r.code for r in wrapper}
    rest = [r for r in rules.in_scope("call") if r.code not in in_wrapper and not r.wrapper]
    ordered = tuple(wrapper + rest)
    # The predicates in the wrapper's order (each may assume the ones before it).
    predicates = [r for step in steps for r in step if r.clear]
    covered = frozenset(r.code for r in predicates)
    return CallPlan(ordered, covered, tuple(r for r in ordered if r.code not in covered),
                    _compile_clear(variant, predicates))


def _compile_clear(variant: str, predicates: list[Rule]) -> Callable[[CallContext], bool]:
    """One function returning the conjunction of the predicates. When every predicate's rule is defined in
    one module, the function is compiled with that module's globals (a name such as `next_power_of_2` is
    looked up when the function runs, as in the rule); otherwise each module's predicates are compiled
    apart and called in turn."""
    groups: list[tuple[dict[str, Any], list[Rule]]] = []
    for rule in predicates:
        namespace = getattr(rule.check, "__globals__", None) or {}
        if groups and groups[-1][0] is namespace:
            groups[-1][1].append(rule)
        else:
            groups.append((namespace, [rule]))
    functions = [_compile_group(f"{variant}_wrapper_checks_clear", namespace, rules) for namespace, rules in groups]
    if len(functions) == 1:
        return functions[0]
    return lambda ctx: all(function(ctx) for function in functions)


def _compile_group(name: str, namespace: dict[str, Any], rules: list[Rule]) -> Callable[[CallContext], bool]:
    body = " and ".join(f"({r.clear})" for r in rules) or "True"
    # Each predicate is a comparison or a conjunction of them, so `and` gives a bool without wrapping it.
    source = f"def {name}(ctx):\n{_CLEAR_PREAMBLE}    return {body}\n"
    scope: dict[str, Any] = {}
    # The source is built from the rules' own predicates (declared in this package), never from input.
    exec(compile(source, f"<{name}: {', '.join(r.code for r in rules)}>", "exec"), namespace, scope)
    function: Callable[[CallContext], bool] = scope[name]
    function.__doc__ = "True only if none of " + ", ".join(r.code for r in rules) + " has a finding."
    return function
