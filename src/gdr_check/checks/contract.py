"""The contract engine: run every kernel-call rule on a packed-decode call and collect all problems at once.

Wrapper-enforced rules come first, in the reference wrapper's order for the variant (sglang 0.5.23), so the
first error's message is exactly what the wrapper would raise; the preconditions the kernel only assumes
follow, by code.
"""

from __future__ import annotations

from typing import Any

from ..report import Diagnostic, Report
from ..tensors import TensorSpec
from .call import CallContext, Engine, Origin, PackedDecodeCall, Variant
from .registry import RULE_SET, Finding, Rule, RuleSet


# What describing a foreign object (None, a list, a NumPy array, a nested or sparse tensor) can raise.
_UNDESCRIBABLE = (AttributeError, TypeError, ValueError, RuntimeError, OverflowError, NotImplementedError)


def _argument_report(arguments: dict[str, Any]) -> Report:
    from .rules_guard import argument_report

    report = argument_report(arguments)
    if report is None:  # every argument is a tensor, yet describing one failed: re-raise what it was
        raise
    return report


def run_contract(call: PackedDecodeCall, engine: Engine = "sglang", origin: Origin = "engine") -> Report:
    """Every diagnostic of one call: wrapper-enforced ones first, in the wrapper's order. `origin`: whose call
    it is (see `CallContext.origin`); an engine's by default."""
    return Report(_diagnostics(CallContext.build(call, engine, origin)))  # an unknown engine: UnknownEngineError


def _diagnostics(ctx: CallContext, fast_path: bool = True, rules: RuleSet = RULE_SET) -> list[Diagnostic]:
    """The diagnostics of every call rule of `rules` on `ctx`, in report order. `fast_path=False` runs every
    rule even when the wrapper checks are all clear (the tests compare both)."""
    plan = rules.call_plan(ctx.call.variant)
    ordered = plan.rules
    if fast_path and plan.clear(ctx):
        ordered = plan.after_clear  # every covered rule would find nothing: skip them
    found: list[tuple[Rule, Finding]] = []
    wrapper_stopped = False  # the reference wrapper raises at its first failing check and runs nothing after it
    for rule in ordered:
        result = rule.check(ctx)  # type: ignore[misc]
        if result is None:  # most rules find nothing: skip building an empty list
            continue
        for finding in (result,) if isinstance(result, Finding) else result:  # findings_of, inlined
            raises = (finding.severity or rule.severity) == "error"
            # A wrapper step that does not raise (KDA's CUDA fast-path choice) only happens if reached.
            if rule.wrapper and not raises and wrapper_stopped:
                continue
            wrapper_stopped = wrapper_stopped or (bool(rule.wrapper) and raises)
            found.append((rule, finding))
    if not found:
        return []
    # Messages are formatted and the call's bindings (B, H, HV, ...) merged under each finding's own values
    # in one step per diagnostic.
    bindings = ctx.bindings()
    return [rule.diagnostic_with(finding, finding.values, dict(bindings)) for rule, finding in found]


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
    origin: Origin = "direct",
) -> Report:
    """Check a `fused_recurrent_gated_delta_rule_packed_decode` call (GDN) without running it.

    Accepts torch tensors or TensorSpecs. `read_values=False` is the fast mode: it never reads the slot
    indices, which would synchronise the device, so the index-value rules are skipped. `origin="direct"`
    (the default) is a call on a pool of the caller's own, where the engines' pool conventions (slot 0
    reserved) are only a note; an engine's call (a guard, a capture) passes `origin="engine"`.
    """
    spec = TensorSpec.from_tensor  # direct calls: this is the per-step runtime guard, keep it lean
    try:
        call = PackedDecodeCall.of_specs(
            spec(mixed_qkv), spec(a), spec(b), spec(A_log), spec(dt_bias), scale, spec(initial_state), spec(out),
            spec(ssm_state_indices, read_values=read_values), use_qk_l2norm_in_kernel, None, "gdn",
        )
    except _UNDESCRIBABLE:  # not a dense tensor: GDR228 names the argument (off the hot path)
        return _argument_report(locals())
    return run_contract(call, engine, origin)


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
    origin: Origin = "direct",
) -> Report:
    """Check a `fused_recurrent_kda_packed_decode` call (KDA) without running it."""
    spec = TensorSpec.from_tensor
    try:
        call = PackedDecodeCall.of_specs(
            spec(mixed_qkv), spec(a), spec(b), spec(A_log), spec(dt_bias), scale, spec(initial_state), spec(out),
            spec(ssm_state_indices, read_values=read_values), use_qk_l2norm_in_kernel, lower_bound, "kda",
        )
    except _UNDESCRIBABLE:  # not a dense tensor: GDR228 names the argument (off the hot path)
        return _argument_report(locals())
    return run_contract(call, engine, origin)

