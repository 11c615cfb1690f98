"""The runtime guard's hot paths, in one place: this module, and the index below of what lives elsewhere.

Two paths run per kernel launch, each with a budget against the reference wrapper's own Python checks
(docs/performance.md):

1. `gdr_check.guard` around an engine, steady state (a call signature and a pool seen before), at most 0.5x:
   `pipeline/guard.py`, `Guard._wrapper_for`: the reuse test on the site's last plan's `_LastCheck` (the indices object
   by identity, its `_version`, the capture epoch, the CUDA stream), then `_signature`'s terms compared with
   that plan's: the shapes, strides, dtypes and devices of the eight tensors by one call of the plan's
   `tensor_matcher` below (torch's C++ tensor check, Python where it refuses), the scalars one by one with its
   key, no tuple built or hashed (no data pointer, no index value; a full lookup only when the call differs
   from that plan), whether `out` overlaps an input
   (`out_overlaps` below: eight data pointers against the byte extents kept with the plan; GDR246 is the one
   rule that depends on where the tensors lie), the pool's tag by address, one read of the fault flag
   (`FaultBuffer.host_flag`, host memory the kernels set: no CUDA call), and either the step's sanitised
   indices served again (the pool's tag not yet served: a set insert) or, on the first call
   of a step,
   `kernel/device_guard.py`, `CheckLaunch.__call__`: one allocation and the slot check's launch (straight to the
   compiled kernel on CUDA), and stores the new `_Plan.last`. Everything else (the contract, the
   model comparison, the layer's name) runs once per signature or pool in `Guard._plan`; the capture epoch is
   bumped by the guard's wrappers of `torch.cuda.CUDAGraph.capture_begin`/`capture_end`, never per call.
2. `check_packed_decode` / `check_kda_packed_decode` (and the checked kernels' first call of a signature), at
   most 2x: this module. `TensorSpec.from_tensor` (`tensors`) reads each torch attribute once with memoised
   names; `TensorSpec` and `PackedDecodeCall` are slots dataclasses built through their own `__init__` (not
   frozen: a frozen `__init__` sets each field through `object.__setattr__`). `call_diagnostics` runs the
   contract: `call_plan` (`checks/call_plan.py`, cached per variant) compiles the pass predicates of the
   wrapper's checks into one function; when it says all clear (the common case) the rules it covers are
   skipped. Rules that find nothing return None (no empty list built); messages are formatted only for
   findings, with the call's bindings merged in one step per diagnostic (`Rule.diagnostic_with`).

The cyclic garbage collector is paused by the CLI only (`cli/main.py`); the library never touches it.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable, Sequence
from typing import Any

from ..base.registry import RULE_SET, Finding, Rule, RuleSet
from ..base.report import Diagnostic, Report
from ..base.tensor_spec import TensorSpec
from ..call.packed_call import ARGUMENTS, CallContext, Engine, Origin, PackedDecodeCall, Variant
from ..engines.profiles import profile_for
from . import rules_param_dtype, rules_wrapper  # noqa: F401  (importing registers the call-scope rules a plan runs)
from .call_plan import call_plan
from .rules_assumed import OUT_MUST_NOT_OVERLAP
from .rules_guard import argument_report

# Positions in the wrapper's argument order of `out` and of the arguments it must not overlap (GDR246).
OUT_POSITION = ARGUMENTS.index("out")
OVERLAP_POSITIONS = tuple(ARGUMENTS.index(name) for name in OUT_MUST_NOT_OVERLAP)


@functools.cache
def address_rules() -> frozenset[str]:
    """The codes a verdict kept per call signature must judge again on every call (`Rule.by_address`)."""
    return frozenset(code for code, rule in RULE_SET.rules.items() if rule.by_address)


def byte_extents(args: Sequence[Any]) -> tuple[int, ...] | None:
    """For `out` and then each argument it must not overlap: how many bytes from its data pointer the tensor can
    touch (0 when it is empty). Fixed by the call signature (shapes, strides, dtypes), so kept with it; None
    when one of them is not a strided tensor."""
    extents = []
    for position in (OUT_POSITION, *OVERLAP_POSITIONS):
        tensor = args[position]
        if str(getattr(tensor, "layout", "torch.strided")) != "torch.strided":
            return None  # a sparse tensor has strides in torch 2.13 but no storage to take a pointer of
        try:
            shape, stride, itemsize = tensor.shape, tensor.stride(), tensor.element_size()
        except (AttributeError, TypeError, RuntimeError, NotImplementedError):
            return None
        reach = sum((size - 1) * step for size, step in zip(shape, stride, strict=True))
        extents.append(0 if 0 in shape else (reach + 1) * itemsize)
    return tuple(extents)


def out_overlaps(args: Sequence[Any], extents: tuple[int, ...]) -> bool:
    """Whether `out`'s bytes meet those of an argument it must not overlap: GDR246's test for one call, from data
    pointers alone (`extents` from `byte_extents`), since the signature holds no address."""
    start = args[OUT_POSITION].data_ptr()
    end = start + extents[0]
    if start == end:
        return False
    for position, extent in zip(OVERLAP_POSITIONS, extents[1:], strict=True):
        other = args[position].data_ptr()
        if other < end and start < other + extent:
            return True
    return False


def tensor_matcher(tensors: Sequence[Any]) -> Callable[..., bool]:
    """A test that tensors passed in the same order have the shapes, strides, dtypes and devices of `tensors` (what
    `guard._signature` keeps of each), run by the guard's wrapper on every call; it keeps no reference to them.

    Where this torch has it, torch's own C++ tensor check (dynamo's `TensorGuards`, the check compiled graphs run
    on their inputs) answers first: 0.55 µs for eight tensors on the CPU machine against 2.5 µs for the 32
    attribute reads in Python, which allocate a size tuple, a stride tuple and a device per tensor. It is
    stricter than the signature (the exact Python type, requires_grad, the dispatch keys, which hold the device
    type and whether a tensor is an inference tensor, read through the thread's dispatch state: inference mode,
    autocast), so where it refuses, the Python comparison decides: a plan whose layers pass, say, a Parameter
    in one layer and a plain tensor in the next pays both, never a rebuild per call. Python alone where the
    check is missing, cannot be built, does not tell apart what the signature does (`_torch_check_is_exact`),
    or refuses its own example (it refuses one tensor object passed twice: dynamo's aliasing rule).

    One gap is left to the C++ check: the device type is seen through the thread's dispatch key set, so a test
    made under a private `torch._C._IncludeDispatchKeyGuard` for one backend and run under one for another could
    accept a tensor of the other device type. Nothing in torch's public API sets those."""
    expected = tuple((tensor.shape, tensor.stride(), tensor.dtype, tensor.device) for tensor in tensors)

    def same_metadata(*given: Any) -> bool:
        try:
            return all(tensor.shape == shape and tensor.stride() == stride and tensor.dtype == dtype
                       and tensor.device == device
                       for tensor, (shape, stride, dtype, device) in zip(given, expected, strict=True))
        except (AttributeError, TypeError, ValueError):  # not a tensor, or not as many as the plan's
            return False

    if _torch_check_is_exact():
        try:
            check = _torch_check(tensors)
            if check(*tensors):
                def matches(*given: Any) -> bool:
                    try:
                        return bool(check(*given)) or same_metadata(*given)
                    except TypeError:  # not as many tensors as the plan's
                        return False

                return matches
        except Exception:  # noqa: BLE001 - a tensor this torch's check cannot describe: the Python test alone
            pass
    return same_metadata


def _torch_check(tensors: Sequence[Any]) -> Callable[..., bool]:
    """Dynamo's C++ check of `tensors`, every size and stride static (a private torch API: see
    `_torch_check_is_exact`)."""
    guards = sys.modules["torch"]._C._dynamo.guards.TensorGuards(
        *tensors, dynamic_dims_sizes=[list(tensor.shape) for tensor in tensors],
        dynamic_dims_strides=[list(tensor.stride()) for tensor in tensors])
    check: Callable[..., bool] = guards.check
    return check


@functools.cache
def _torch_check_is_exact() -> bool:
    """Whether this torch's check (`_torch_check`) can be built and tells apart every term the signature does,
    asked once per process on small CPU tensors: another shape, other strides, another dtype, another device,
    not a tensor. (Its constructor has taken other arguments across torch releases, and torch 2.0's could leave
    the sizes dynamic.)"""
    torch = sys.modules.get("torch")
    if torch is None:
        return False
    try:
        check = _torch_check([torch.zeros(2, 3)])
        others = (torch.zeros(3, 2), torch.zeros(3, 2).t(), torch.zeros(2, 3, dtype=torch.float64),
                  torch.zeros(2, 3, device="meta"), [[0.0] * 3] * 2)
        return bool(check(torch.ones(2, 3))) and not any(check(other) for other in others)
    except Exception:  # noqa: BLE001 - no dynamo in this torch, or another constructor
        return False


def address_errors(variant: str, args: Sequence[Any], engine: Engine) -> list[Diagnostic]:
    """The errors of the rules judged per call (`address_rules`) for a call `out_overlaps` found overlapping: the
    contract's own diagnostics, with its words (defined below, called only then)."""
    check = CONTRACT_CHECKS[variant]
    per_call = address_rules()
    return [d for d in check(*args, engine=engine, read_values=False).diagnostics
            if d.code in per_call and d.severity == "error"]


# What describing a foreign object (None, a list, a NumPy array, a nested or sparse tensor) can raise.
_UNDESCRIBABLE = (AttributeError, TypeError, ValueError, RuntimeError, OverflowError, NotImplementedError)


def call_of_specs(mixed_qkv: TensorSpec, a: TensorSpec, b: TensorSpec, A_log: TensorSpec, dt_bias: TensorSpec,
                  scale: Any, initial_state: TensorSpec, out: TensorSpec, ssm_state_indices: TensorSpec,
                  use_qk_l2norm_in_kernel: bool, lower_bound: float | None, variant: Variant) -> PackedDecodeCall:
    """`PackedDecodeCall(...)` with every field given positionally, in field order."""
    return PackedDecodeCall(mixed_qkv, a, b, A_log, dt_bias, scale, initial_state, out, ssm_state_indices,
                            use_qk_l2norm_in_kernel, lower_bound, variant)


def run_contract(call: PackedDecodeCall, engine: Engine = "sglang", origin: Origin = "engine") -> Report:
    """Every diagnostic of one call: wrapper-enforced ones first, in the wrapper's order. `origin`: whose call
    it is (see `CallContext.origin`); an engine's by default."""
    return Report(call_diagnostics(CallContext.build(call, engine, origin)))  # an unknown engine: UnknownEngineError


def _argument_report(arguments: dict[str, Any], failure: Exception) -> Report:
    """GDR228 for the arguments that are not dense tensors (only after describing one failed: off the hot path).
    Called outside the handler, so that an unknown engine raises first, as it does for a call whose arguments
    are fine, and not chained to the description's failure."""
    profile_for(arguments["engine"])
    report = argument_report(arguments)
    if report is None:  # every argument is a tensor, yet describing one failed: re-raise what it was
        raise failure
    return report


def call_diagnostics(ctx: CallContext, fast_path: bool = True, rules: RuleSet = RULE_SET) -> list[Diagnostic]:
    """The diagnostics of every call rule of `rules` on `ctx`, in report order. `fast_path=False` runs every
    rule even when the wrapper checks are all clear (the tests compare both)."""
    plan = call_plan(rules, ctx.call.variant)
    ordered = plan.rules
    if fast_path and plan.clear(ctx):
        ordered = plan.after_clear  # every covered rule would find nothing: skip them
    found: list[tuple[Rule, Finding]] = []
    wrapper_stopped = False  # the reference wrapper raises at its first failing check and runs nothing after it
    for rule in ordered:
        result = rule.check(ctx)  # type: ignore[misc]  # `ordered` holds only rules that have a check
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


# The tests and the examples call the engine loop by its former name.
_diagnostics = call_diagnostics


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
    spec = TensorSpec.from_tensor  # a local name: one attribute lookup per call, not eight
    try:
        call = call_of_specs(
            spec(mixed_qkv), spec(a), spec(b), spec(A_log), spec(dt_bias), scale, spec(initial_state), spec(out),
            spec(ssm_state_indices, read_values=read_values), use_qk_l2norm_in_kernel, None, "gdn",
        )
    except _UNDESCRIBABLE as error:  # not a dense tensor: GDR228 names the argument (below, out of the handler)
        failure: Exception = error
    else:
        return run_contract(call, engine, origin)
    return _argument_report(locals(), failure)


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
        call = call_of_specs(
            spec(mixed_qkv), spec(a), spec(b), spec(A_log), spec(dt_bias), scale, spec(initial_state), spec(out),
            spec(ssm_state_indices, read_values=read_values), use_qk_l2norm_in_kernel, lower_bound, "kda",
        )
    except _UNDESCRIBABLE as error:  # not a dense tensor: GDR228 names the argument (below, out of the handler)
        failure: Exception = error
    else:
        return run_contract(call, engine, origin)
    return _argument_report(locals(), failure)



# The contract check of each variant's call, by `VariantSpec.name`.
CONTRACT_CHECKS: dict[str, Callable[..., Report]] = {"gdn": check_packed_decode, "kda": check_kda_packed_decode}
