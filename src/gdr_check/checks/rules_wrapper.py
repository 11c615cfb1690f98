"""GDR201-GDR227: the checks the sglang 0.5.23 packed-decode wrappers make, with their exact messages.

`fused_recurrent_gated_delta_rule_packed_decode` (GDN) and `fused_recurrent_kda_packed_decode` (KDA) check
their arguments in a fixed order and raise at the first failure. That order is declared once per variant
below (`GDN_WRAPPER_ORDER`, `KDA_WRAPPER_ORDER`); each rule's position ("check N") and the contract engine's
report order come from it. Each error-raising rule carries its pass predicate (`clear=`), from which the
engine builds the all-clear fast path (`checks.call_plan`). Fixes are computed from the numbers in
the call (kernel_causes): the likely cause is inferred, not guessed generically.

Adding a wrapper check: declare the rule (its check, its `clear` predicate, its executable example) and put
its code in the order tuples of the wrappers that make it. Nothing else (tests/test_registry.py shows it).
"""

from __future__ import annotations

from ..base.registry import Finding, declare_wrapper_order, rule
from ..base.variants import variant_spec
from ..call.packed_call import CallContext, next_power_of_2
from .examples import CallExample, tensor
from .kernel_causes import (
    flatten_fix,
    flattened_pool_fix,
    gate_heads_fixes,
    last_stride_fix,
    one_cause,
    param_size_fixes,
    q_size_failure,
    shape_text,
    tp_split,
    transposed_pool_fix,
    width_candidates,
)

GDN_ENGINES = "sglang 0.5.23 and vLLM (same check, same message)."
KDA_ENGINES = "sglang 0.5.23 (`fused_recurrent_kda_packed_decode`)."

# The checks 1-13 both wrappers make, in their order.
_SHARED_STEPS = ("GDR201", "GDR202", "GDR203", "GDR204", "GDR205", "GDR206", "GDR207", "GDR208", "GDR209",
                 "GDR210", "GDR211", "GDR212", "GDR213")
# A tuple step is codes sharing one position: with K = 0 the Q-size check's `q_dim % K` raises
# ZeroDivisionError (GDR227) where a nonzero K gives the check's ValueError. (Within a step the pass
# predicates run in tuple order, so the Q-size predicate may assume K > 0.)
GDN_WRAPPER_ORDER = declare_wrapper_order("gdn", (
    *_SHARED_STEPS, "GDR214", "GDR215", "GDR216", "GDR217", ("GDR227", "GDR218"), "GDR219", "GDR220",
))
KDA_WRAPPER_ORDER = declare_wrapper_order("kda", (
    *_SHARED_STEPS, "GDR221", "GDR222", "GDR223", "GDR224", "GDR216", "GDR217", ("GDR227", "GDR225"), "GDR219",
    "GDR226", "GDR220",
))


# -- GDR201..GDR213: checks shared by both wrappers (1-13) -------------------------------------------------
@rule(
    "GDR201", "mixed-qkv-not-2d",
    clear='mixed_qkv.ndim == 2',
    summary="`mixed_qkv` is not a 2-D [B, D] tensor",
    message="`mixed_qkv` must be a 2D tensor (got ndim={ndim}).",
    explanation=(
        "The packed decode kernel reads one token per request: `mixed_qkv` is the conv1d output "
        "[B, 2*H*K + HV*V], one row per decode request. A token axis left in place (the prefill/varlen "
        "layout [1, B, D] or [B, 1, D]) is rejected."
    ),
    causes=("`mixed_qkv` kept a token axis: [B, 1, D] or [1, B, D] (prefill/varlen layout)",),
    fixes=("reshape to [B, D] (`squeeze` the token axis)",),
    engines=GDN_ENGINES,
    example=CallExample({"mixed_qkv": tensor(4, 1, 64)}, "a token axis left in place: [B, 1, D]"),
)
def mixed_qkv_ndim(ctx: CallContext) -> Finding | None:
    spec = ctx.call.mixed_qkv
    if spec.ndim == 2:
        return None
    fixes = []
    if ctx.mixed_qkv is not None:
        axis = next((i for i, s in enumerate(spec.shape) if s == 1), None)
        how = f"`mixed_qkv.squeeze({axis})`" if axis is not None and spec.ndim == 3 else "`mixed_qkv.reshape(B, D)`"
        fixes.append(f"reshape to [B, D]: {how} gives shape {shape_text(ctx.mixed_qkv)}")
    else:
        fixes.append(f"pass the [B, D] conv output (got shape {shape_text(spec)})")
    return Finding({"ndim": spec.ndim}, fixes, argument="mixed_qkv")


@rule(
    "GDR202", "mixed-qkv-strided-columns",
    clear='mixed_qkv.stride[1] == 1',
    summary="`mixed_qkv` columns are not contiguous",
    message="`mixed_qkv` must be contiguous in the last dim.",
    explanation=(
        "The kernel addresses q, k and v as offsets inside one row, so each row must be dense "
        "(`stride(-1) == 1`). Rows may be strided (a view of a wider projection buffer is fine)."
    ),
    causes=("a transposed view", "a column-strided view of a wider buffer"),
    fixes=("produce rows with unit last-dim stride (copy with `.contiguous()` if needed)",),
    engines=GDN_ENGINES,
    example=CallExample({"mixed_qkv": tensor(4, 64, stride=(1, 4))}, "a transposed view: `buf.t()`"),
)
def mixed_qkv_stride(ctx: CallContext) -> Finding | None:
    spec = ctx.call.mixed_qkv
    if spec.ndim and spec.stride[-1] != 1:
        return Finding(fixes=[last_stride_fix("mixed_qkv", spec)], argument="mixed_qkv")
    return None


@rule(
    "GDR203", "gates-not-2d",
    clear='a.ndim == 2 and b.ndim == 2',
    summary="`a` or `b` is not a 2-D tensor",
    message="`a` and `b` must be 2D tensors (got a.ndim={a_ndim}, b.ndim={b_ndim}).",
    explanation=(
        "The gate inputs are per-row matrices: GDN `a` and `b` are [B, HV]; KDA `a` is [B, HV*K] and `b` "
        "is [B, HV]."
    ),
    causes=("`a`/`b` shaped [B, HV, 1], [B, 1, HV] or flat [B*HV]",),
    fixes=("reshape to [B, HV] (KDA `a`: [B, HV*K])",),
    engines=GDN_ENGINES,
    example=CallExample({"a": tensor(4, 4, 1)}, "`a` as [B, HV, 1]"),
)
def gates_ndim(ctx: CallContext) -> Finding | None:
    a, b = ctx.call.a, ctx.call.b
    if a.ndim == 2 and b.ndim == 2:
        return None
    fixes = []
    for name, spec in (("a", a), ("b", b)):
        if spec.ndim != 2:
            width = variant_spec(ctx.variant).gate_width_text() if name == "a" else "HV"
            fixes.append(f"reshape `{name}` {shape_text(spec)} to [B, {width}]"
                         + (f": `{name}.reshape({ctx.B}, -1)`" if ctx.B else ""))
    return Finding({"a_ndim": a.ndim, "b_ndim": b.ndim}, fixes, argument="a" if a.ndim != 2 else "b")


@rule(
    "GDR204", "gates-strided-columns",
    clear='a.stride[1] == 1 and b.stride[1] == 1',
    summary="`a` or `b` columns are not contiguous",
    message="`a`/`b` must be contiguous in the last dim.",
    explanation="Each gate row is read as a dense vector, so `stride(-1)` must be 1; row strides are free.",
    causes=("a transposed view", "every other column of the fused `ba` output (interleaved b/a)"),
    fixes=("split the fused projection into contiguous column blocks, or `.contiguous()`",),
    engines=GDN_ENGINES,
    example=CallExample({"b": tensor(4, 4, stride=(8, 2))}, "every other column of a fused `ba`: `ba[:, 0::2]`"),
)
def gates_stride(ctx: CallContext) -> Finding | None:
    bad = [(n, s) for n, s in (("a", ctx.call.a), ("b", ctx.call.b)) if s.ndim and s.stride[-1] != 1]
    if not bad:
        return None
    return Finding(fixes=[last_stride_fix(n, s) for n, s in bad], argument=bad[0][0])


@rule(
    "GDR205", "decay-params-not-1d",
    clear='A_log.ndim == 1 and dt_bias.ndim == 1',
    summary="`A_log` or `dt_bias` is not 1-D",
    message="`A_log`/`dt_bias` must be 1D tensors.",
    explanation=(
        "`A_log` and `dt_bias` are flat per-head (GDN) or per-channel (KDA `dt_bias`) vectors. Kimi-Linear "
        "checkpoints store `A_log` as [1, 1, H, 1]; it must be flattened before the call."
    ),
    causes=("Kimi `A_log` passed in its checkpoint shape [1, 1, H, 1]", "`dt_bias` as [HV, 1]"),
    fixes=("flatten to 1-D with `.reshape(-1)`",),
    engines=GDN_ENGINES,
    example=CallExample({"A_log": tensor(1, 1, 4, 1)}, "the Kimi checkpoint layout [1, 1, H, 1]"),
)
def decay_params_ndim(ctx: CallContext) -> Finding | None:
    bad = [(n, s) for n, s in (("A_log", ctx.call.A_log), ("dt_bias", ctx.call.dt_bias)) if s.ndim != 1]
    if not bad:
        return None
    return Finding(fixes=[flatten_fix(n, s) for n, s in bad], argument=bad[0][0])


@rule(
    "GDR206", "decay-params-strided",
    clear='A_log.stride[0] == 1 and dt_bias.stride[0] == 1',
    summary="`A_log` or `dt_bias` is a strided view",
    message="`A_log`/`dt_bias` must be contiguous.",
    explanation="The kernel indexes `A_log[j]` and `dt_bias[j]` directly, so `stride(0)` must be 1.",
    causes=("a manual TP shard taken with a step, e.g. `A_log[rank::tp]`",),
    fixes=("take a contiguous shard: `A_log[rank*HV_l:(rank+1)*HV_l]`",),
    engines=GDN_ENGINES,
    example=CallExample({"A_log": tensor(4, stride=(2,))}, "a strided shard: `A_log_full[0::2]`"),
)
def decay_params_stride(ctx: CallContext) -> Finding | None:
    bad = [(n, s) for n, s in (("A_log", ctx.A_log), ("dt_bias", ctx.dt_bias)) if s is not None and s.stride[0] != 1]
    if not bad:
        return None
    fixes = [f"`{n}` steps {s.stride[0]} elements (a strided shard such as `[rank::{s.stride[0]}]`): take a "
             f"contiguous block of {s.numel()} elements, or `.contiguous()`" for n, s in bad]
    return Finding(fixes=fixes, argument=bad[0][0])


@rule(
    "GDR207", "slot-indices-not-1d",
    clear='indices.ndim == 1',
    summary="`ssm_state_indices` is not 1-D",
    message="`ssm_state_indices` must be 1D for packed decode (got ndim={ndim}).",
    explanation="Packed decode takes one state slot per row: `ssm_state_indices` is [B].",
    causes=("slot indices gathered as [B, 1]",),
    fixes=("flatten to [B]",),
    engines=GDN_ENGINES,
    example=CallExample({"ssm_state_indices": tensor(4, 1)}, "slots gathered as [B, 1]"),
)
def indices_ndim(ctx: CallContext) -> Finding | None:
    spec = ctx.call.ssm_state_indices
    if spec.ndim == 1:
        return None
    return Finding({"ndim": spec.ndim}, [flatten_fix("ssm_state_indices", spec)], argument="ssm_state_indices")


@rule(
    "GDR208", "out-not-contiguous",
    # The strides of a contiguous `out` of its own shape, innermost first (other strides on size-1 axes, which
    # the rule accepts, take the slow path).
    clear=("out.ndim == 4 and (t := out.stride)[3] == 1 and t[2] == (s := out.shape)[3] and t[1] == t[2] * s[2]"
           " and t[0] == t[1] * s[1]"),
    summary="`out` is not contiguous",
    message="`out` must be contiguous.",
    explanation=(
        "The kernel writes `out` as a dense [B, 1, HV, V] block. A size-1 axis does not count, so the "
        "[1, B, HV, V] transpose of a contiguous `out` passes this check and fails the shape check."
    ),
    causes=("`out` is a strided view of a larger buffer (a head slice of a wider output, a permuted buffer)",),
    fixes=("allocate a contiguous [B, 1, HV, V] tensor",),
    engines=GDN_ENGINES,
    example=CallExample({"out": tensor(4, 1, 4, 8, stride=(64, 64, 8, 1))}, "a head slice of a wider `out`"),
)
def out_contiguous(ctx: CallContext) -> Finding | None:
    spec = ctx.call.out
    if spec.is_contiguous():
        return None
    fix = (f"allocate a contiguous `out`, `torch.empty({ctx.B}, 1, {ctx.HV}, {ctx.V})`, and copy it into the "
           f"wider buffer afterwards" if ctx.B is not None and ctx.HV else "allocate a contiguous `out`")
    return Finding(fixes=[fix + f" (got strides {tuple(spec.stride)})"], argument="out")


@rule(
    "GDR209", "mixed-devices",
    clear=('a.device == b.device == A_log.device == dt_bias.device == state.device == out.device '
           '== indices.device == mixed_qkv.device'),
    summary="the inputs are not all on one device",
    message="All inputs must be on the same device.",
    explanation="Every tensor argument must be on `mixed_qkv.device`.",
    causes=("the index tensor or the pool left on the CPU", "a tensor on another GPU"),
    fixes=("move every argument to `mixed_qkv.device`",),
    engines=GDN_ENGINES,
    example=CallExample({"ssm_state_indices": tensor(4, device="cpu", values=(3, 1, 5, 2))},
                        "the slot table left on the CPU"),
)
def same_device(ctx: CallContext) -> Finding | None:
    device = ctx.call.mixed_qkv.device
    tensors = ctx.call.tensors()
    away = [name for name, spec in tensors.items() if spec.device != device]
    if not away:
        return None
    fixes = [f"move {', '.join(f'`{n}` ({tensors[n].device})' for n in away)} to {device}, the device of `mixed_qkv`"]
    return Finding(fixes=fixes, argument=away[0])


@rule(
    "GDR210", "batch-size-mismatches",
    clear='a.shape[0] == B and b.shape[0] == B',
    summary="`a`/`b` do not have one row per `mixed_qkv` row",
    message="Mismatched batch sizes: mixed_qkv.shape[0]={B}, a.shape[0]={a_batch}, b.shape[0]={b_batch}.",
    explanation="B is `mixed_qkv.shape[0]`; every per-row input must have B rows.",
    causes=("a CUDA-graph padded batch for one input and the real batch for another",
            "per-token (speculative) inputs of length B*draft_tokens"),
    fixes=("use one B for all per-row inputs",),
    engines=GDN_ENGINES,
    example=CallExample({"a": tensor(6, 4)}, "`a` padded to 6 rows while `mixed_qkv` has 4"),
)
def batch_sizes(ctx: CallContext) -> Finding | None:
    if ctx.mixed_qkv is None or ctx.a is None or ctx.b is None:
        return None
    B, a_rows, b_rows = ctx.B, ctx.a.shape[0], ctx.b.shape[0]
    if a_rows == B and b_rows == B:
        return None
    fixes = []
    for name, rows in (("a", a_rows), ("b", b_rows)):
        if rows != B:
            if B and rows > B and rows % B == 0:
                fixes.append(f"`{name}` has {rows} = {rows // B}*{B} rows: per-token (speculative) rows; "
                             f"packed decode takes one row per request")
            else:
                fixes.append(f"`{name}` has {rows} rows, `mixed_qkv` {B}: pad or trim every per-row input to "
                             f"the same B (CUDA-graph padding must apply to all of them)")
    return Finding({"B": ctx.call.mixed_qkv.shape[0], "a_batch": ctx.call.a.shape[0] if ctx.call.a.ndim else 0,
                    "b_batch": ctx.call.b.shape[0] if ctx.call.b.ndim else 0}, fixes, argument="a")


@rule(
    "GDR211", "slot-indices-length-mismatches",
    clear='indices.shape[0] == B',
    summary="`ssm_state_indices` does not have one slot per row",
    message="`ssm_state_indices` must have shape [B] (got {shape}; expected ({B},)).",
    explanation="Each decode row reads and writes the state slot named by `ssm_state_indices[row]`.",
    causes=("CUDA-graph padded indices against an unpadded batch, or the reverse",
            "per-token (speculative) indices of length B*draft_tokens"),
    fixes=("pass exactly B slot indices",),
    engines=GDN_ENGINES,
    example=CallExample({"ssm_state_indices": tensor(6, values=(3, 1, 5, 2, -1, -1))}, "6 slot indices for 4 rows"),
)
def indices_length(ctx: CallContext) -> Finding | None:
    if ctx.indices is None or ctx.B is None or ctx.indices.shape[0] == ctx.B:
        return None
    n, B = ctx.indices.shape[0], ctx.B
    if B and n > B and n % B == 0:
        fix = f"{n} = {n // B}*{B} indices: per-token (speculative) indices; pass one slot per request"
    else:
        fix = f"{n} indices for {B} rows: pad or trim the indices together with the batch (padding rows use -1)"
    return Finding({"shape": tuple(ctx.call.ssm_state_indices.shape), "B": B}, [fix], argument="ssm_state_indices")


@rule(
    "GDR212", "state-pool-not-4d",
    clear='state.ndim == 4',
    summary="`initial_state` is not the per-layer [S, HV, V, K] pool",
    message="`initial_state` must be a 4D tensor (got ndim={ndim}).",
    explanation=(
        "`initial_state` is one layer's whole state pool, [slots, HV, V, K]; the kernel selects rows with "
        "`ssm_state_indices`. sglang keeps one stacked pool [linear_layers, slots, HV, V, K] for all layers: "
        "each layer passes its own view."
    ),
    causes=("the stacked 5-D pool [L, slots, HV, V, K] passed instead of the layer's view",
            "a single slot's 3-D state [HV, V, K]"),
    fixes=("pass the per-layer [S, HV, V, K] view: `pool[layer_id]`",),
    engines=GDN_ENGINES,
    example=CallExample({"initial_state": tensor(2, 8, 4, 8, 8)}, "the stacked pool [layers, S, HV, V, K]"),
)
def state_ndim(ctx: CallContext) -> Finding | None:
    spec = ctx.state
    if spec.ndim == 4:
        return None
    if spec.ndim == 5:
        L, S, HV, V, K = spec.shape
        fix = (f"this looks like the stacked pool [layers={L}, slots={S}, HV={HV}, V={V}, K={K}]: "
               f"pass pool[layer_id], shape ({S}, {HV}, {V}, {K})")
    elif spec.ndim == 6:
        fix = (f"this looks like the speculative intermediate-state buffer {shape_text(spec)}: packed decode "
               f"takes the per-layer temporal pool [S, HV, V, K]")
    elif spec.ndim == 3:
        HV, V, K = spec.shape
        fix = (f"this looks like one slot's state [HV={HV}, V={V}, K={K}]: pass the whole per-layer pool "
               f"[S, {HV}, {V}, {K}] and select rows with `ssm_state_indices`")
    else:
        fix = flattened_pool_fix(ctx) or f"pass the per-layer [S, HV, V, K] pool (got shape {shape_text(spec)})"
    return Finding({"ndim": spec.ndim}, [fix], argument="initial_state")


@rule(
    "GDR213", "state-pool-strided-last-dim",
    clear='state.stride[3] == 1',
    summary="the state pool's K axis is not contiguous",
    message="`initial_state` must be contiguous in the last dim.",
    explanation=(
        "The kernel stores each slot's state as [HV, V, K] with K fastest. A [HV, K, V] pool (the FLA default "
        "and older vLLM) turned into [HV, V, K] with a transpose view fails here."
    ),
    causes=("a [.., K, V] pool transposed to [.., V, K] by a view",),
    fixes=("store the pool physically as [S, HV, V, K] (FLA `state_v_first=True`)",),
    engines=GDN_ENGINES,
    example=CallExample({"initial_state": tensor(8, 4, 8, 8, stride=(256, 64, 1, 8))},
                        "a [S, HV, K, V] pool transposed to [S, HV, V, K] by a view"),
)
def state_stride(ctx: CallContext) -> Finding | None:
    spec = ctx.state
    if not spec.ndim or spec.stride[-1] == 1:
        return None
    if spec.ndim >= 2 and spec.stride[-2] == 1:
        fix = (f"the pool is a transposed view of a [.., K, V] buffer (strides {tuple(spec.stride)}): store it "
               f"physically as [S, HV, V, K] (FLA `state_v_first=True`); a `.contiguous()` copy would leave "
               f"the engine's pool un-updated")
    else:
        fix = f"the K axis steps {spec.stride[-1]} elements: allocate the pool with K as the fastest axis"
    return Finding(fixes=[fix], argument="initial_state")


# -- GDN 14-20 -----------------------------------------------------------------------------------------
@rule(
    "GDR214", "gate-heads-mismatch-value-heads",
    clear='a.shape[1] == HV and b.shape[1] == HV',
    summary="`a`/`b` do not have HV columns",
    message="`a`/`b` must have shape [B, HV] with HV={HV} (got a.shape={a_shape}, b.shape={b_shape}).",
    explanation=(
        "HV is read from the pool, `initial_state.shape[-3]`. The gates carry one value per value head, so "
        "`a` and `b` must be [B, HV] with the same (per-rank) HV as the pool."
    ),
    causes=("`a`/`b` with global HV while the pool has HV/tp (an unsliced replicated ba projection)",
            "gates sharded for TP while the pool is not", "the fused `ba` [B, 2*HV] passed unsplit",
            "gates computed with num_k_heads instead of num_v_heads"),
    fixes=("split `ba`, then shard to HV_l", "shard the pool by the same HV split as the gates"),
    engines=GDN_ENGINES,
    example=CallExample({"a": tensor(4, 2), "b": tensor(4, 2)}, "gates sharded for tp=2, the pool not"),
)
def gdn_gate_heads(ctx: CallContext) -> Finding | None:
    if ctx.HV is None or ctx.a is None or ctx.b is None:
        return None
    HV, a_cols, b_cols = ctx.HV, ctx.a.shape[1], ctx.b.shape[1]
    if a_cols == HV and b_cols == HV:
        return None
    if a_cols == b_cols:
        fixes = gate_heads_fixes(ctx, "a`/`b", a_cols, HV)
    else:
        fixes = [f for name, cols in (("a", a_cols), ("b", b_cols)) if cols != HV
                 for f in gate_heads_fixes(ctx, name, cols, HV)]
    return Finding({"HV": HV, "a_shape": tuple(ctx.call.a.shape), "b_shape": tuple(ctx.call.b.shape)}, fixes,
                   argument="a" if a_cols != HV else "b")


@rule(
    "GDR215", "decay-param-sizes-mismatch-value-heads",
    clear='A_log.shape[0] == HV and dt_bias.shape[0] == HV',
    summary="`A_log`/`dt_bias` do not have HV elements",
    message=("`A_log` and `dt_bias` must have {HV} elements (got A_log.numel()={A_log_numel}, "
             "dt_bias.numel()={dt_bias_numel})."),
    explanation="GDN `A_log` and `dt_bias` hold one value per (per-rank) value head.",
    causes=("global `A_log`/`dt_bias` [HV] with TP > 1", "a KDA `dt_bias` [H*K] given to the GDN kernel"),
    fixes=("shard to HV_l", "use the KDA kernel for KDA models"),
    engines=GDN_ENGINES,
    example=CallExample({"A_log": tensor(8)}, "the global `A_log` of 8 heads with the tp=2 pool"),
)
def gdn_param_sizes(ctx: CallContext) -> Finding | None:
    if ctx.HV is None:
        return None
    HV, na, nd = ctx.HV, ctx.call.A_log.numel(), ctx.call.dt_bias.numel()
    if na == HV and nd == HV:
        return None
    fixes: list[str] = []
    for name, got in (("A_log", na), ("dt_bias", nd)):
        if got != HV:
            fixes += param_size_fixes(ctx, name, got, HV)
    return Finding({"HV": HV, "A_log_numel": na, "dt_bias_numel": nd}, fixes,
                   argument="A_log" if na != HV else "dt_bias")


@rule(
    "GDR216", "out-shape-mismatch",
    clear='out.shape == (B, 1, HV, V)',
    summary="`out` is not [B, 1, HV, V]",
    message="`out` must have shape {expected} (got out.shape={shape}).",
    explanation="The kernel writes one [HV, V] block per row into `out` [B, 1, HV, V].",
    causes=("`out` allocated [B, HV, V] or [1, B, HV, V]", "`out` sized with the global HV"),
    fixes=("allocate `out` as [B, 1, HV_l, V]",),
    engines=GDN_ENGINES,
    example=CallExample({"out": tensor(4, 4, 8)}, "`out` without its token axis"),
)
def out_shape(ctx: CallContext) -> Finding | None:
    if ctx.B is None or ctx.HV is None:
        return None
    expected = (ctx.B, 1, ctx.HV, ctx.V)
    got = tuple(ctx.call.out.shape)
    if got == expected:
        return None
    B, HV, V = ctx.B, ctx.HV, ctx.V
    transposed = transposed_pool_fix(ctx)
    if transposed is not None:  # `out` is right; resizing it would hide the swapped V and K
        return Finding({"expected": expected, "shape": got}, [transposed], argument="initial_state")
    if got == (1, B, HV, V):
        fix = ("this is the [1, B, HV, V] layout the engine returns after `out.transpose(0, 1)`: pass the "
               "[B, 1, HV, V] buffer before transposing")
    elif got == (B, HV, V):
        fix = f"`out` lacks the token axis: allocate `torch.empty({B}, 1, {HV}, {V})` (or `out.unsqueeze(1)`)"
    elif len(got) == 4 and got[0] == B and got[3] == V and tp_split(HV, got[2]):
        fix = f"`out` has the global {got[2]} heads: size it with the per-rank HV={HV}"
    else:
        fix = f"allocate `out` as `torch.empty({B}, 1, {HV}, {V})`"
    return Finding({"expected": expected, "shape": got}, [fix], argument="out")


@rule(
    "GDR217", "packed-width-invalid",
    clear='qk_dim > 0 and qk_dim % 2 == 0',
    summary="`mixed_qkv`'s last dim minus the pool's HV*V is not a positive, even q+k width",
    message="Invalid packed `mixed_qkv` last dim={qkv_dim} for HV={HV}, V={V}.",
    explanation=(
        "`mixed_qkv` rows are [q (H*K) | k (H*K) | v (HV*V)]. The wrapper subtracts HV*V (from the pool) and "
        "needs a positive, even remainder for q and k."
    ),
    causes=("only the v (or z) slice passed",
            "a per-rank `mixed_qkv` against a pool, gates and `out` sized with the global HV "
            "(Qwen3-Next TP 2: width 4096 = 32*128, so qk_dim = 0)"),
    fixes=("pass [q | k | v]; size every per-head input with HV_l",),
    engines=GDN_ENGINES,
    example=CallExample({"mixed_qkv": tensor(4, 32)}, "only the v block: width HV*V"),
)
def packed_width(ctx: CallContext) -> Finding | None:
    if ctx.qkv_dim is None or ctx.HV is None or ctx.V is None:
        return None
    qk_dim = ctx.qkv_dim - ctx.HV * ctx.V
    if qk_dim > 0 and qk_dim % 2 == 0:
        return None
    fixes = width_candidates(ctx, ctx.qkv_dim) or ["pass [q (H*K) | k (H*K) | v (HV*V)] with the pool's HV and V"]
    return Finding({"qkv_dim": ctx.qkv_dim, "HV": ctx.HV, "V": ctx.V}, one_cause(ctx, fixes), argument="mixed_qkv")


@rule(
    "GDR218", "q-size-not-multiple-of-head-dim",
    clear='qk_dim // 2 % K == 0',
    summary="the inferred Q size is not a multiple of K",
    message="Invalid packed Q size {q_dim}: must be divisible by K={K}.",
    explanation=(
        "The wrapper infers q_dim = (width - HV*V) / 2 and needs it to be a whole number of K-wide heads. "
        "Extra channels in the row (padding, an un-split gate) or a wrong K in the pool break it."
    ),
    causes=("the width carries extra channels (padding, an un-split gate)", "a wrong K in the pool"),
    fixes=("pass exactly [q | k | v]",),
    engines=GDN_ENGINES,
    example=CallExample({"mixed_qkv": tensor(4, 56)}, "q and k blocks of 12 channels each, K=8"),
)
def gdn_q_size(ctx: CallContext) -> Finding | None:
    q_dim = q_size_failure(ctx)
    if q_dim is None or ctx.qkv_dim is None:  # a failure implies a known width
        return None
    fixes = width_candidates(ctx, ctx.qkv_dim) or [
        f"the q block is {q_dim} channels, not a multiple of K={ctx.K}: pass exactly [q | k | v], or check K "
        f"in the pool"]
    return Finding({"q_dim": q_dim, "K": ctx.K}, one_cause(ctx, fixes), argument="mixed_qkv")


@rule(
    "GDR219", "value-heads-not-multiple-of-key-heads",
    clear='HV % (qk_dim // 2 // K) == 0',
    summary="the inferred key heads do not divide the value heads",
    message="Invalid head config inferred from mixed_qkv: H={H}, HV={HV}.",
    explanation=(
        "H is never passed: the wrapper infers it from the width of `mixed_qkv` and the pool's HV, V, K. "
        "Value head j uses key head j // (HV/H), so HV must be a multiple of H."
    ),
    causes=("a global-width `mixed_qkv` with a per-rank pool (Qwen3-Next TP 2 reports H=24, HV=16)",
            "`qkvz` instead of `qkv` on a G != 2 model (Qwen3.5-0.8B reports H=24, HV=16)",
            "a config whose HV is not a multiple of H"),
    fixes=("pass the per-rank conv output of [q | k | v] only",),
    engines=GDN_ENGINES,
    example=CallExample({"mixed_qkv": tensor(4, 80)}, "a width that implies H=3 key heads for HV=4"),
)
def head_config(ctx: CallContext) -> Finding | None:
    if ctx.qkv_dim is None or ctx.HV is None or ctx.V is None or not ctx.K or q_size_failure(ctx) is not None:
        return None
    qk_dim = ctx.qkv_dim - ctx.HV * ctx.V
    if qk_dim <= 0 or qk_dim % 2:
        return None
    H = qk_dim // 2 // ctx.K
    if H > 0 and ctx.HV % H == 0:
        return None
    fixes = width_candidates(ctx, ctx.qkv_dim) or [
        f"H={H} key heads cannot share HV={ctx.HV} value heads evenly: check that the model's "
        f"linear_num_value_heads is a multiple of linear_num_key_heads"]
    return Finding({"H": H, "HV": ctx.HV}, one_cause(ctx, fixes), argument="mixed_qkv")


@rule(
    "GDR220", "head-dim-needs-multiple-k-tiles",
    clear='-(-K // next_power_of_2(K)) == 1',
    summary="K would need more than one K tile",
    message="Packed decode kernel only supports NK=1 (got K={K}, BK={BK}).",
    explanation=(
        "The kernel holds a whole K row in one tile, BK = next_power_of_2(K). Since BK >= K this check "
        "cannot fire for K >= 1; it is mirrored for completeness."
    ),
    fixes=("use K <= the largest tile Triton allows",),
    engines=GDN_ENGINES,
    example=CallExample({}, "no call triggers it: BK = next_power_of_2(K) >= K always", reachable=False),
)
def single_k_tile(ctx: CallContext) -> Finding | None:
    if not ctx.K:
        return None
    BK = next_power_of_2(ctx.K)
    if -(-ctx.K // BK) != 1:
        return Finding({"K": ctx.K, "BK": BK}, argument="initial_state")
    return None


# -- KDA 14-17, 20, 22 -----------------------------------------------------------------------------------
@rule(
    "GDR221", "kda-gate-width-mismatch",
    clear='a.shape[1] == HV * K',
    summary="KDA `a` is not [B, HV*K]",
    message="`a` must have shape [B, HV*K] with HV={HV}, K={K} (got a.shape={a_shape}).",
    explanation="KDA decays each key channel separately: `a` holds HV*K gate inputs per row.",
    causes=("a GDN-style per-head gate [B, HV] given to the KDA kernel", "global heads with a per-rank pool"),
    fixes=("pass the `f_b_proj` output [B, HV*K]",),
    engines=KDA_ENGINES,
    example=CallExample({"a": tensor(4, 4)}, "a GDN-style per-head gate [B, HV]", variant="kda"),
)
def kda_gate_width(ctx: CallContext) -> Finding | None:
    if ctx.HV is None or ctx.K is None or ctx.a is None:
        return None
    want, got = ctx.HV * ctx.K, ctx.a.shape[1]
    if got == want:
        return None
    if got == ctx.HV:
        fixes = [f"`a` has HV = {got} columns, a GDN-style per-head gate: KDA needs one value per key channel, "
                 f"[B, HV*K] = [B, {want}] (the `f_b_proj` output)"]
    else:
        fixes = gate_heads_fixes(ctx, "a", got, want, per="key channel of each value head", width=ctx.K or 1)
    return Finding({"HV": ctx.HV, "K": ctx.K, "a_shape": tuple(ctx.call.a.shape)}, fixes, argument="a")


@rule(
    "GDR222", "kda-beta-heads-mismatch",
    clear='b.shape[1] == HV',
    summary="KDA `b` is not [B, HV]",
    message="`b` must have shape [B, HV] with HV={HV} (got b.shape={b_shape}).",
    explanation="`b` holds one beta logit per value head (the `b_proj` output, before the sigmoid).",
    causes=("`b` with global heads while the pool is per-rank",),
    fixes=("pass the per-rank `b_proj` output [B, HV_l]",),
    engines=KDA_ENGINES,
    example=CallExample({"b": tensor(4, 8)}, "`b` with the global heads of tp=2", variant="kda"),
)
def kda_beta_heads(ctx: CallContext) -> Finding | None:
    if ctx.HV is None or ctx.b is None or ctx.b.shape[1] == ctx.HV:
        return None
    return Finding({"HV": ctx.HV, "b_shape": tuple(ctx.call.b.shape)},
                   gate_heads_fixes(ctx, "b", ctx.b.shape[1], ctx.HV), argument="b")


@rule(
    "GDR223", "kda-a-log-size-mismatch",
    clear='A_log.shape[0] == HV',
    summary="KDA `A_log` does not have HV elements",
    message="`A_log` must have {HV} elements (got {numel}).",
    explanation="KDA `A_log` holds one value per (per-rank) head; Kimi stores it as [1, 1, H, 1].",
    causes=("Kimi `A_log` flattened but not sharded (32 instead of H_l)",),
    fixes=("shard on the head axis",),
    engines=KDA_ENGINES,
    example=CallExample({"A_log": tensor(8)}, "Kimi `A_log` flattened but not sharded", variant="kda"),
)
def kda_a_log_size(ctx: CallContext) -> Finding | None:
    if ctx.HV is None or ctx.call.A_log.numel() == ctx.HV:
        return None
    got = ctx.call.A_log.numel()
    return Finding({"HV": ctx.HV, "numel": got}, param_size_fixes(ctx, "A_log", got, ctx.HV), argument="A_log")


@rule(
    "GDR224", "kda-dt-bias-size-mismatch",
    clear='dt_bias.shape[0] == HV * K',
    summary="KDA `dt_bias` does not have HV*K elements",
    message="`dt_bias` must have {HVK} elements (got {numel}).",
    explanation="KDA `dt_bias` holds one bias per key channel of each head: HV*K elements.",
    causes=("a GDN-style per-head `dt_bias` [HV]", "global heads with a per-rank pool"),
    fixes=("pass the per-rank [HV_l*K] `dt_bias`",),
    engines=KDA_ENGINES,
    example=CallExample({"dt_bias": tensor(4)}, "a GDN-style per-head `dt_bias` [HV]", variant="kda"),
)
def kda_dt_bias_size(ctx: CallContext) -> Finding | None:
    if ctx.HV is None or ctx.K is None:
        return None
    want, got = ctx.HV * ctx.K, ctx.call.dt_bias.numel()
    if got == want:
        return None
    if got == ctx.HV:
        fixes = [f"`dt_bias` has HV = {got} elements, a GDN-style per-head bias: KDA needs HV*K = {want}"]
    else:
        fixes = param_size_fixes(ctx, "dt_bias", got, want)
    return Finding({"HVK": want, "numel": got}, fixes, argument="dt_bias")


@rule(
    "GDR225", "kda-q-size-not-multiple-of-head-dim",
    clear='qk_dim // 2 % K == 0',
    summary="the inferred Q size is not a multiple of K (KDA)",
    message=("Invalid packed Q size {q_dim}: must be divisible by K={K}. KDA packed decode requires "
             "num_q_heads == num_k_heads and head_q_dim == head_k_dim."),
    explanation="As GDR218, for the KDA wrapper, whose message adds the head-layout requirement.",
    causes=("q and k heads of different sizes", "extra channels in the row"),
    fixes=("pass exactly [q | k | v] with head_q_dim == head_k_dim",),
    engines=KDA_ENGINES,
    example=CallExample({"mixed_qkv": tensor(4, 56)}, "q and k blocks of 12 channels each, K=8", variant="kda"),
)
def kda_q_size(ctx: CallContext) -> Finding | None:
    q_dim = q_size_failure(ctx)
    if q_dim is None or ctx.qkv_dim is None:  # a failure implies a known width
        return None
    fixes = width_candidates(ctx, ctx.qkv_dim) or [
        f"the q block is {q_dim} channels, not a multiple of K={ctx.K}: KDA needs num_q_heads == num_k_heads and "
        f"head_q_dim == head_k_dim; pass exactly [q | k | v]"]
    return Finding({"q_dim": q_dim, "K": ctx.K}, one_cause(ctx, fixes), argument="mixed_qkv")


@rule(
    "GDR226", "kda-cuda-fast-path", severity="info",
    summary="whether sglang's CUDA KDA decode kernel takes this call",
    message="with `use_qk_l2norm_in_kernel=True`, {engine} {verdict} its CUDA KDA decode kernel{reason}",
    explanation=(
        "With `use_qk_l2norm_in_kernel=True` the sglang 0.5.23 KDA wrapper imports "
        "`sglang.kernels.ops.attention.kda_packed_decode` (ImportError when it or `sglang.kernels.jit` is "
        "missing) and runs a CUDA kernel instead of Triton when the call is covered: B >= 8, K = V = 128, "
        "bf16 activations, fp32 A_log/dt_bias/state, int32 indices, dense inner state. That kernel checks the "
        "inner state layout the Triton path only assumes."
    ),
    engines=KDA_ENGINES,
    example=CallExample({}, "B=4 < 8: sglang skips its CUDA kernel", variant="kda"),
)
def kda_cuda_fast_path(ctx: CallContext) -> Finding | None:
    misses = ctx.kda_cuda_misses()
    if misses is None:
        return None
    engine = ctx.profile.display_name
    if misses:
        return Finding({"engine": engine, "verdict": "skips", "reason": ": " + "; ".join(misses)})
    return Finding({"engine": engine, "verdict": "runs", "reason": " (Triton is skipped)"})


@rule(
    "GDR227", "head-dim-zero",
    clear='K > 0',
    summary="the pool has K = 0",
    message=("`initial_state` has K=0 (shape {shape}): the wrapper raises ZeroDivisionError "
             "(integer modulo by zero) at its Q-size check"),
    explanation="With K = 0 the wrapper's `q_dim % K` raises ZeroDivisionError instead of a ValueError.",
    fixes=("allocate the pool as [S, HV, V, K] with K = head_k_dim",),
    engines=GDN_ENGINES,
    example=CallExample({"initial_state": tensor(8, 4, 8, 0)}, "a pool with K=0"),
)
def head_dim_zero(ctx: CallContext) -> Finding | None:
    if ctx.K != 0 or ctx.qkv_dim is None or ctx.HV is None or ctx.V is None:
        return None
    qk_dim = ctx.qkv_dim - ctx.HV * ctx.V
    if qk_dim <= 0 or qk_dim % 2:
        return None
    S = ctx.S if ctx.S is not None else "S"
    return Finding({"shape": tuple(ctx.state.shape)},
                   [f"the pool's K axis is empty: allocate it as [{S}, {ctx.HV}, {ctx.V}, head_k_dim]"],
                   argument="initial_state")
