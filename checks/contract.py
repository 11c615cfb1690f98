"""The contract engine: run every kernel-call rule on a packed-decode call and collect all problems at once.

Wrapper-enforced rules come first, in the reference wrapper's order for the variant (sglang 0.5.23), so the
first error's message is exactly what the wrapper would raise; the preconditions the kernel only assumes
follow, by code.
"""

from __future__ import annotations

import functools
from typing import Any

from ..report import Diagnostic, Report
from ..tensors import TensorSpec
from .call import ENGINES, CallContext, Engine, PackedDecodeCall, Variant
from .registry import RULES, Rule, findings_of, rules_in_scope


def _ordered_rules(variant: Variant) -> tuple[Rule, ...]:
    # Sorting the registry on every call was a fifth of the runtime guard's cost; rules are only ever added,
    # so the registry's size tells when the cached order is stale.
    return _rule_order(variant, len(RULES))


@functools.lru_cache(maxsize=8)
def _rule_order(variant: Variant, registered: int) -> tuple[Rule, ...]:
    rules = rules_in_scope("call")
    wrapper = sorted((r for r in rules if variant in r.wrapper), key=lambda r: (r.wrapper[variant], r.code))
    unchecked = [r for r in rules if not r.wrapper]
    return tuple(wrapper + unchecked)


def run_contract(call: PackedDecodeCall, engine: Engine = "sglang") -> Report:
    """Every diagnostic of one call: wrapper-enforced ones first, in the wrapper's order."""
    if engine not in ENGINES:
        raise ValueError(f"unknown engine {engine!r}; expected one of: {', '.join(ENGINES)}")
    ctx = CallContext.build(call, engine)
    diagnostics: list[Diagnostic] = []
    wrapper_stopped = False  # the reference wrapper raises at its first failing check and runs nothing after it
    for rule in _ordered_rules(call.variant):
        result = rule.check(ctx)  # type: ignore[misc]
        if result is not None:  # most rules find nothing: skip building an empty list
            for finding in findings_of(result):
                diagnostic = rule.diagnostic(finding)
                # A wrapper step that does not raise (KDA's CUDA fast-path choice) only happens if reached.
                if rule.wrapper and diagnostic.severity != "error" and wrapper_stopped:
                    continue
                wrapper_stopped = wrapper_stopped or (bool(rule.wrapper) and diagnostic.severity == "error")
                diagnostics.append(diagnostic)
    bindings = ctx.bindings()
    for diagnostic in diagnostics:
        diagnostic.bindings = {**bindings, **diagnostic.bindings}
    return Report(diagnostics)


def describe_call(
    variant: Variant,
    tensors: dict[str, Any],
    scale: Any,
    use_qk_l2norm_in_kernel: bool,
    lower_bound: float | None = None,
    *,
    read_values: bool = True,
) -> PackedDecodeCall:
    """Build a PackedDecodeCall from live tensors (duck-typed) or TensorSpecs."""
    specs = {
        name: TensorSpec.from_tensor(value, read_values=read_values and name == "ssm_state_indices")
        for name, value in tensors.items()
    }
    return PackedDecodeCall(
        scale=scale,
        use_qk_l2norm_in_kernel=use_qk_l2norm_in_kernel,
        lower_bound=lower_bound,
        variant=variant,
        **specs,
    )


def check_packed_decode(
    mixed_qkv: Any,
    a: Any,
    b: Any,
    A_log: Any,
    dt_bias: Any,
    scale: Any,
    initial_state: Any,
    out: Any,
    ssm_state_indices: Any,
    use_qk_l2norm_in_kernel: bool = False,
    *,
    engine: Engine = "sglang",
    read_values: bool = True,
) -> Report:
    """Check a `fused_recurrent_gated_delta_rule_packed_decode` call (GDN) without running it.

    Accepts torch tensors or TensorSpecs. `read_values=False` is the fast mode: it never reads the slot
    indices, which would synchronise the device, so the index-value rules are skipped.
    """
    spec = TensorSpec.from_tensor  # direct calls: this is the per-step runtime guard, keep it lean
    call = PackedDecodeCall.of_specs(
        mixed_qkv=spec(mixed_qkv), a=spec(a), b=spec(b), A_log=spec(A_log), dt_bias=spec(dt_bias), scale=scale,
        initial_state=spec(initial_state), out=spec(out),
        ssm_state_indices=spec(ssm_state_indices, read_values=read_values),
        use_qk_l2norm_in_kernel=use_qk_l2norm_in_kernel, lower_bound=None, variant="gdn",
    )
    return run_contract(call, engine)


def check_kda_packed_decode(
    mixed_qkv: Any,
    a: Any,
    b: Any,
    A_log: Any,
    dt_bias: Any,
    scale: Any,
    initial_state: Any,
    out: Any,
    ssm_state_indices: Any,
    use_qk_l2norm_in_kernel: bool = False,
    lower_bound: float | None = None,
    *,
    engine: Engine = "sglang",
    read_values: bool = True,
) -> Report:
    """Check a `fused_recurrent_kda_packed_decode` call (KDA) without running it."""
    spec = TensorSpec.from_tensor
    call = PackedDecodeCall.of_specs(
        mixed_qkv=spec(mixed_qkv), a=spec(a), b=spec(b), A_log=spec(A_log), dt_bias=spec(dt_bias), scale=scale,
        initial_state=spec(initial_state), out=spec(out),
        ssm_state_indices=spec(ssm_state_indices, read_values=read_values),
        use_qk_l2norm_in_kernel=use_qk_l2norm_in_kernel, lower_bound=lower_bound, variant="kda",
    )
    return run_contract(call, engine)

