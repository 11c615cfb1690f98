"""GDR2xx: the packed-decode kernel preconditions.

GDR201-GDR227 mirror the checks of the sglang 0.5.23 wrappers (`fused_recurrent_gated_delta_rule_packed_decode`
and `fused_recurrent_kda_packed_decode`), with their exact messages; `wrapper` gives each one's position in
each wrapper. GDR240 and up are the preconditions the kernels assume without checking (docs/kernel-contract.md U1-U18).
Fixes are computed from the numbers in the call: the likely cause is inferred, not guessed generically.
"""

from __future__ import annotations

import math
from ..tensors import TensorSpec
from .call import GRID_DIM_LIMIT, CallContext, next_power_of_2
from .registry import Finding, rule

GDN_ENGINES = "sglang 0.5.23 and vLLM (same check, same message)."
KDA_ENGINES = "sglang 0.5.23 (`fused_recurrent_kda_packed_decode`)."


# -- helpers that turn numbers into likely causes ---------------------------------------------------------
def _shape(spec: TensorSpec) -> str:
    return str(tuple(spec.shape))


def _last_stride_fix(name: str, spec: TensorSpec) -> str:
    if spec.ndim >= 2 and spec.stride[-2] == 1:
        return (f"`{name}` is a transposed view (strides {tuple(spec.stride)}): produce it row-major, "
                f"or pass `{name}.contiguous()` (a copy)")
    return (f"`{name}` steps {spec.stride[-1]} elements between columns (strides {tuple(spec.stride)}), "
            f"e.g. every other column of a fused output: split the fused tensor into contiguous column "
            f"blocks, or pass `{name}.contiguous()`")


def _flatten_fix(name: str, spec: TensorSpec) -> str:
    if name == "A_log" and spec.ndim == 4 and spec.shape[0] == spec.shape[1] == spec.shape[3] == 1:
        return (f"`A_log` has the Kimi checkpoint layout [1, 1, H, 1] {_shape(spec)}: flatten it, "
                f"`A_log.reshape(-1)` gives shape ({spec.numel()},)")
    return f"flatten it: `{name}.reshape(-1)` gives shape ({spec.numel()},)"


def _tp_split(per_rank: int, total: int) -> int | None:
    """tp such that total == per_rank * tp, for tp > 1."""
    if per_rank > 0 and total > per_rank and total % per_rank == 0:
        return total // per_rank
    return None


def _width_candidates(ctx: CallContext, width: int) -> list[str]:
    """Explain an invalid `mixed_qkv` width from the pool's HV, V, K."""
    HV, V, K = ctx.HV, ctx.V, ctx.K
    hints: list[str] = []
    if not (HV and V and K):
        return hints
    if width == HV * V:
        hints.append(f"the width {width} equals HV*V = {HV}*{V}: only the v block was passed; "
                     f"pass the conv output of [q | k | v]")
    for tp in (2, 4, 8, 16, 32):
        if HV % tp:
            continue
        local = ctx.infer_heads(width, HV // tp)
        if local:
            hints.append(
                f"`mixed_qkv` fits HV_l = {HV}//{tp} = {HV // tp} value heads (H_l = {local}): the pool, "
                f"gates and `out` look sized with the global HV={HV} while `mixed_qkv` is per-rank for "
                f"tp={tp}; size every per-head input with HV_l = {HV // tp}"
            )
            break
    for tp in (2, 4, 8, 16, 32):
        if width % tp == 0 and ctx.infer_heads(width // tp):
            hints.append(
                f"`mixed_qkv` has {tp}x the width this pool implies ({width} = {tp}*{width // tp}): it looks "
                f"unsharded while the pool is per-rank for tp={tp}; pass this rank's conv output "
                f"[q | k | v] of width {width // tp}"
            )
            break
    with_z = width - HV * V
    if with_z > 0 and ctx.infer_heads(with_z):
        hints.append(
            f"the width {width} includes an extra HV*V = {HV * V} block: it looks like the `qkvz` projection "
            f"(z included); pass only [q | k | v], width {with_z}"
        )
    return hints


def _gate_heads_fixes(ctx: CallContext, name: str, got: int, want: int, per: str = "value head",
                      width: int = 1) -> list[str]:
    """Likely causes of a gate with `got` columns where `want` are needed; `width` columns make one head
    (KDA `a`: K), so the head arithmetic runs on got // width."""
    fixes: list[str] = []
    has, carries, it_was = ("have", "carry", "they were") if "/" in name else ("has", "carries", "it was")
    HV = ctx.HV or 0
    if width > 1 and got % width:
        return [f"produce `{name}` with {want} columns per row"]
    heads, want_heads = got // width, want // width
    cols = "" if width == 1 else f" ({got} columns = {heads}*K)"
    if width == 1 and got == 2 * want:
        fixes.append(f"`{name}` {has} 2*{want} = {got} columns: the fused `ba` projection was passed unsplit; "
                     f"split it into `b` and `a` (Qwen3-Next stores b first in each key-head group)")
    tp = _tp_split(heads, want_heads)
    if tp:
        fixes.append(
            f"`{name}` {has} HV/{tp} = {heads} heads{cols} (sharded for tp_size={tp}) but the pool has "
            f"HV={want_heads} (unsharded): shard the pool by the same HV split: HV // tp_size = {want_heads} "
            f"// {tp} = {heads}, a per-layer pool of shape (S, {heads}, {ctx.V}, {ctx.K}), and size `out` and "
            f"`A_log`/`dt_bias` with {heads} heads too"
        )
    tp = _tp_split(want_heads, heads)
    if tp:
        fixes.append(
            f"`{name}` {carries} {heads} = {tp}*{want_heads} heads{cols}, the unsharded count for tp_size={tp}: "
            f"slice this rank's heads, `{name}[:, rank*{want}:(rank+1)*{want}]`, or shard the projection that "
            f"makes it"
        )
    if ctx.H and ctx.H != HV and heads == ctx.H:
        what = "H, the number of key heads" if width == 1 else f"H*K = {heads}*{width}, H the number of key heads"
        fixes.append(
            f"`{name}` {has} {got} columns = {what} (num_k_heads, inferred from "
            f"`mixed_qkv`): {it_was} computed with num_k_heads; the gate needs one value per {per} (HV={HV})"
        )
    if width == 1 and ctx.K and HV and got == HV * ctx.K and want == HV:
        fixes.append(f"`{name}` {has} HV*K = {got} columns, a KDA per-channel gate: use the KDA kernel "
                     f"(`fused_recurrent_kda_packed_decode`) for KDA models")
    if not fixes:
        fixes.append(f"produce `{name}` with {want} columns per row")
    # When the other per-head inputs agree with the gates, the pool is the odd one out: say that first.
    others = {ctx.call.A_log.numel(), ctx.call.out.shape[2] if ctx.call.out.ndim == 4 else None}
    if heads not in others:
        fixes.sort(key=lambda fix: "shard the pool" in fix)
    return fixes


# -- GDR201..GDR213: checks shared by both wrappers (1-13) -------------------------------------------------
@rule(
    "GDR201", "mixed-qkv-not-2d", wrapper={"gdn": 1, "kda": 1},
    summary="`mixed_qkv` is not a 2-D [B, D] tensor",
    message="`mixed_qkv` must be a 2D tensor (got ndim={ndim}).",
    explanation=(
        "The packed decode kernel reads one token per request: `mixed_qkv` is the conv1d output "
        "[B, 2*H*K + HV*V], one row per decode request. A token axis left in place (the prefill/varlen "
        "layout [1, B, D] or [B, 1, D]) is rejected."
    ),
    causes=("`mixed_qkv` kept a token axis: [B, 1, D] or [1, B, D] (prefill/varlen layout)",),
    fixes=("reshape to [B, D] (`squeeze` the token axis)",),
    example="mixed_qkv = torch.empty(8, 1, 8192)  # [B, 1, D]",
    engines=GDN_ENGINES,
)
def mixed_qkv_ndim(ctx: CallContext):
    spec = ctx.call.mixed_qkv
    if spec.ndim == 2:
        return None
    fixes = []
    if ctx.mixed_qkv is not None:
        axis = next((i for i, s in enumerate(spec.shape) if s == 1), None)
        how = f"`mixed_qkv.squeeze({axis})`" if axis is not None and spec.ndim == 3 else "`mixed_qkv.reshape(B, D)`"
        fixes.append(f"reshape to [B, D]: {how} gives shape {_shape(ctx.mixed_qkv)}")
    else:
        fixes.append(f"pass the [B, D] conv output (got shape {_shape(spec)})")
    return Finding({"ndim": spec.ndim}, fixes, argument="mixed_qkv")


@rule(
    "GDR202", "mixed-qkv-strided-columns", wrapper={"gdn": 2, "kda": 2},
    summary="`mixed_qkv` columns are not contiguous",
    message="`mixed_qkv` must be contiguous in the last dim.",
    explanation=(
        "The kernel addresses q, k and v as offsets inside one row, so each row must be dense "
        "(`stride(-1) == 1`). Rows may be strided (a view of a wider projection buffer is fine)."
    ),
    causes=("a transposed view", "a column-strided view of a wider buffer"),
    fixes=("produce rows with unit last-dim stride (copy with `.contiguous()` if needed)",),
    example="mixed_qkv = buf.t()  # transposed view",
    engines=GDN_ENGINES,
)
def mixed_qkv_stride(ctx: CallContext):
    spec = ctx.call.mixed_qkv
    if spec.ndim and spec.stride[-1] != 1:
        return Finding(fixes=[_last_stride_fix("mixed_qkv", spec)], argument="mixed_qkv")
    return None


@rule(
    "GDR203", "gates-not-2d", wrapper={"gdn": 3, "kda": 3},
    summary="`a` or `b` is not a 2-D tensor",
    message="`a` and `b` must be 2D tensors (got a.ndim={a_ndim}, b.ndim={b_ndim}).",
    explanation=(
        "The gate inputs are per-row matrices: GDN `a` and `b` are [B, HV]; KDA `a` is [B, HV*K] and `b` "
        "is [B, HV]."
    ),
    causes=("`a`/`b` shaped [B, HV, 1], [B, 1, HV] or flat [B*HV]",),
    fixes=("reshape to [B, HV] (KDA `a`: [B, HV*K])",),
    example="a = torch.empty(8, 32, 1)",
    engines=GDN_ENGINES,
)
def gates_ndim(ctx: CallContext):
    a, b = ctx.call.a, ctx.call.b
    if a.ndim == 2 and b.ndim == 2:
        return None
    fixes = []
    for name, spec in (("a", a), ("b", b)):
        if spec.ndim != 2:
            fixes.append(f"reshape `{name}` {_shape(spec)} to [B, {'HV*K' if ctx.variant == 'kda' and name == 'a' else 'HV'}]"
                         + (f": `{name}.reshape({ctx.B}, -1)`" if ctx.B else ""))
    return Finding({"a_ndim": a.ndim, "b_ndim": b.ndim}, fixes, argument="a" if a.ndim != 2 else "b")


@rule(
    "GDR204", "gates-strided-columns", wrapper={"gdn": 4, "kda": 4},
    summary="`a` or `b` columns are not contiguous",
    message="`a`/`b` must be contiguous in the last dim.",
    explanation="Each gate row is read as a dense vector, so `stride(-1)` must be 1; row strides are free.",
    causes=("a transposed view", "every other column of the fused `ba` output (interleaved b/a)"),
    fixes=("split the fused projection into contiguous column blocks, or `.contiguous()`",),
    example="b, a = ba[:, 0::2], ba[:, 1::2]",
    engines=GDN_ENGINES,
)
def gates_stride(ctx: CallContext):
    bad = [(n, s) for n, s in (("a", ctx.call.a), ("b", ctx.call.b)) if s.ndim and s.stride[-1] != 1]
    if not bad:
        return None
    return Finding(fixes=[_last_stride_fix(n, s) for n, s in bad], argument=bad[0][0])


@rule(
    "GDR205", "decay-params-not-1d", wrapper={"gdn": 5, "kda": 5},
    summary="`A_log` or `dt_bias` is not 1-D",
    message="`A_log`/`dt_bias` must be 1D tensors.",
    explanation=(
        "`A_log` and `dt_bias` are flat per-head (GDN) or per-channel (KDA `dt_bias`) vectors. Kimi-Linear "
        "checkpoints store `A_log` as [1, 1, H, 1]; it must be flattened before the call."
    ),
    causes=("Kimi `A_log` passed in its checkpoint shape [1, 1, H, 1]", "`dt_bias` as [HV, 1]"),
    fixes=("flatten to 1-D with `.reshape(-1)`",),
    example="A_log = layer.A_log  # [1, 1, 32, 1]",
    engines=GDN_ENGINES,
)
def decay_params_ndim(ctx: CallContext):
    bad = [(n, s) for n, s in (("A_log", ctx.call.A_log), ("dt_bias", ctx.call.dt_bias)) if s.ndim != 1]
    if not bad:
        return None
    return Finding(fixes=[_flatten_fix(n, s) for n, s in bad], argument=bad[0][0])


@rule(
    "GDR206", "decay-params-strided", wrapper={"gdn": 6, "kda": 6},
    summary="`A_log` or `dt_bias` is a strided view",
    message="`A_log`/`dt_bias` must be contiguous.",
    explanation="The kernel indexes `A_log[j]` and `dt_bias[j]` directly, so `stride(0)` must be 1.",
    causes=("a manual TP shard taken with a step, e.g. `A_log[rank::tp]`",),
    fixes=("take a contiguous shard: `A_log[rank*HV_l:(rank+1)*HV_l]`",),
    example="A_log = A_log_full[0::2]",
    engines=GDN_ENGINES,
)
def decay_params_stride(ctx: CallContext):
    bad = [(n, s) for n, s in (("A_log", ctx.A_log), ("dt_bias", ctx.dt_bias)) if s is not None and s.stride[0] != 1]
    if not bad:
        return None
    fixes = [f"`{n}` steps {s.stride[0]} elements (a strided shard such as `[rank::{s.stride[0]}]`): take a "
             f"contiguous block of {s.numel()} elements, or `.contiguous()`" for n, s in bad]
    return Finding(fixes=fixes, argument=bad[0][0])


@rule(
    "GDR207", "slot-indices-not-1d", wrapper={"gdn": 7, "kda": 7},
    summary="`ssm_state_indices` is not 1-D",
    message="`ssm_state_indices` must be 1D for packed decode (got ndim={ndim}).",
    explanation="Packed decode takes one state slot per row: `ssm_state_indices` is [B].",
    causes=("slot indices gathered as [B, 1]",),
    fixes=("flatten to [B]",),
    example="ssm_state_indices = slots[:, None]",
    engines=GDN_ENGINES,
)
def indices_ndim(ctx: CallContext):
    spec = ctx.call.ssm_state_indices
    if spec.ndim == 1:
        return None
    return Finding({"ndim": spec.ndim}, [_flatten_fix("ssm_state_indices", spec)], argument="ssm_state_indices")


@rule(
    "GDR208", "out-not-contiguous", wrapper={"gdn": 8, "kda": 8},
    summary="`out` is not contiguous",
    message="`out` must be contiguous.",
    explanation=(
        "The kernel writes `out` as a dense [B, 1, HV, V] block. A size-1 axis does not count, so the "
        "[1, B, HV, V] transpose of a contiguous `out` passes this check and fails the shape check."
    ),
    causes=("`out` is a strided view of a larger buffer (a head slice of a wider output, a permuted buffer)",),
    fixes=("allocate a contiguous [B, 1, HV, V] tensor",),
    example="out = big_out[:, :, :16]",
    engines=GDN_ENGINES,
)
def out_contiguous(ctx: CallContext):
    spec = ctx.call.out
    if spec.is_contiguous():
        return None
    fix = (f"allocate a contiguous `out`, `torch.empty({ctx.B}, 1, {ctx.HV}, {ctx.V})`, and copy it into the "
           f"wider buffer afterwards" if ctx.B is not None and ctx.HV else "allocate a contiguous `out`")
    return Finding(fixes=[fix + f" (got strides {tuple(spec.stride)})"], argument="out")


@rule(
    "GDR209", "mixed-devices", wrapper={"gdn": 9, "kda": 9},
    summary="the inputs are not all on one device",
    message="All inputs must be on the same device.",
    explanation="Every tensor argument must be on `mixed_qkv.device`.",
    causes=("the index tensor or the pool left on the CPU", "a tensor on another GPU"),
    fixes=("move every argument to `mixed_qkv.device`",),
    example="ssm_state_indices = torch.tensor(slots)  # CPU",
    engines=GDN_ENGINES,
)
def same_device(ctx: CallContext):
    device = ctx.call.mixed_qkv.device
    tensors = ctx.call.tensors()
    away = [name for name, spec in tensors.items() if spec.device != device]
    if not away:
        return None
    fixes = [f"move {', '.join(f'`{n}` ({tensors[n].device})' for n in away)} to {device}, the device of `mixed_qkv`"]
    return Finding(fixes=fixes, argument=away[0])


@rule(
    "GDR210", "batch-size-mismatches", wrapper={"gdn": 10, "kda": 10},
    summary="`a`/`b` do not have one row per `mixed_qkv` row",
    message="Mismatched batch sizes: mixed_qkv.shape[0]={B}, a.shape[0]={a_batch}, b.shape[0]={b_batch}.",
    explanation="B is `mixed_qkv.shape[0]`; every per-row input must have B rows.",
    causes=("a CUDA-graph padded batch for one input and the real batch for another",
            "per-token (speculative) inputs of length B*draft_tokens"),
    fixes=("use one B for all per-row inputs",),
    example="a = a_padded  # 16 rows while mixed_qkv has 13",
    engines=GDN_ENGINES,
)
def batch_sizes(ctx: CallContext):
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
    "GDR211", "slot-indices-length-mismatches", wrapper={"gdn": 11, "kda": 11},
    summary="`ssm_state_indices` does not have one slot per row",
    message="`ssm_state_indices` must have shape [B] (got {shape}; expected ({B},)).",
    explanation="Each decode row reads and writes the state slot named by `ssm_state_indices[row]`.",
    causes=("CUDA-graph padded indices against an unpadded batch, or the reverse",
            "per-token (speculative) indices of length B*draft_tokens"),
    fixes=("pass exactly B slot indices",),
    example="ssm_state_indices = slots  # 16 entries, B = 13",
    engines=GDN_ENGINES,
)
def indices_length(ctx: CallContext):
    if ctx.indices is None or ctx.B is None or ctx.indices.shape[0] == ctx.B:
        return None
    n, B = ctx.indices.shape[0], ctx.B
    if B and n > B and n % B == 0:
        fix = f"{n} = {n // B}*{B} indices: per-token (speculative) indices; pass one slot per request"
    else:
        fix = f"{n} indices for {B} rows: pad or trim the indices together with the batch (padding rows use -1)"
    return Finding({"shape": tuple(ctx.call.ssm_state_indices.shape), "B": B}, [fix], argument="ssm_state_indices")


@rule(
    "GDR212", "state-pool-not-4d", wrapper={"gdn": 12, "kda": 12},
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
    example="initial_state = temporal_pool  # [36, 9, 32, 128, 128]",
    engines=GDN_ENGINES,
)
def state_ndim(ctx: CallContext):
    spec = ctx.state
    if spec.ndim == 4:
        return None
    if spec.ndim == 5:
        L, S, HV, V, K = spec.shape
        fix = (f"this looks like the stacked pool [layers={L}, slots={S}, HV={HV}, V={V}, K={K}]: "
               f"pass pool[layer_id], shape ({S}, {HV}, {V}, {K})")
    elif spec.ndim == 6:
        fix = (f"this looks like the speculative intermediate-state buffer {_shape(spec)}: packed decode "
               f"takes the per-layer temporal pool [S, HV, V, K]")
    elif spec.ndim == 3:
        HV, V, K = spec.shape
        fix = (f"this looks like one slot's state [HV={HV}, V={V}, K={K}]: pass the whole per-layer pool "
               f"[S, {HV}, {V}, {K}] and select rows with `ssm_state_indices`")
    else:
        fix = f"pass the per-layer [S, HV, V, K] pool (got shape {_shape(spec)})"
    return Finding({"ndim": spec.ndim}, [fix], argument="initial_state")


@rule(
    "GDR213", "state-pool-strided-last-dim", wrapper={"gdn": 13, "kda": 13},
    summary="the state pool's K axis is not contiguous",
    message="`initial_state` must be contiguous in the last dim.",
    explanation=(
        "The kernel stores each slot's state as [HV, V, K] with K fastest. A [HV, K, V] pool (the FLA default "
        "and older vLLM) turned into [HV, V, K] with a transpose view fails here."
    ),
    causes=("a [.., K, V] pool transposed to [.., V, K] by a view",),
    fixes=("store the pool physically as [S, HV, V, K] (FLA `state_v_first=True`)",),
    example="initial_state = pool_kv.transpose(-1, -2)",
    engines=GDN_ENGINES,
)
def state_stride(ctx: CallContext):
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
    "GDR214", "gate-heads-mismatch-value-heads", wrapper={"gdn": 14},
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
    example="a = torch.empty(8, 16)  # pool has HV=32",
    engines=GDN_ENGINES,
)
def gdn_gate_heads(ctx: CallContext):
    if ctx.HV is None or ctx.a is None or ctx.b is None:
        return None
    HV, a_cols, b_cols = ctx.HV, ctx.a.shape[1], ctx.b.shape[1]
    if a_cols == HV and b_cols == HV:
        return None
    if a_cols == b_cols:
        fixes = _gate_heads_fixes(ctx, "a`/`b", a_cols, HV)
    else:
        fixes = [f for name, cols in (("a", a_cols), ("b", b_cols)) if cols != HV
                 for f in _gate_heads_fixes(ctx, name, cols, HV)]
    return Finding({"HV": HV, "a_shape": tuple(ctx.call.a.shape), "b_shape": tuple(ctx.call.b.shape)}, fixes,
                   argument="a" if a_cols != HV else "b")


def _param_size_fixes(ctx: CallContext, name: str, got: int, want: int) -> list[str]:
    fixes: list[str] = []
    tp = _tp_split(want, got)
    if tp:
        fixes.append(f"`{name}` has {got} = {tp}*{want} elements, the global value heads for tp_size={tp}: "
                     f"shard it to this rank, `{name}[rank*{want}:(rank+1)*{want}]`")
    tp = _tp_split(got, want)
    if tp:
        fixes.append(f"`{name}` has HV/{tp} = {got} elements while the pool has HV={want}: shard the pool by "
                     f"the same HV split (HV // tp_size = {want} // {tp} = {got})")
    if ctx.variant == "gdn" and ctx.K and got == want * ctx.K:
        fixes.append(f"`{name}` has HV*K = {got} elements, a KDA per-channel parameter: use the KDA kernel "
                     f"for KDA models")
    if ctx.H and ctx.H != ctx.HV and got == ctx.H:
        fixes.append(f"`{name}` has H = {got} elements, the number of key heads: it must have one element per "
                     f"value head (HV={ctx.HV})")
    if not fixes:
        fixes.append(f"pass `{name}` with {want} elements")
    return fixes


@rule(
    "GDR215", "decay-param-sizes-mismatch-value-heads", wrapper={"gdn": 15},
    summary="`A_log`/`dt_bias` do not have HV elements",
    message="`A_log` and `dt_bias` must have {HV} elements (got A_log.numel()={A_log_numel}, dt_bias.numel()={dt_bias_numel}).",
    explanation="GDN `A_log` and `dt_bias` hold one value per (per-rank) value head.",
    causes=("global `A_log`/`dt_bias` [HV] with TP > 1", "a KDA `dt_bias` [H*K] given to the GDN kernel"),
    fixes=("shard to HV_l", "use the KDA kernel for KDA models"),
    example="A_log = full_A_log  # 32 elements, tp=2 pool has HV=16",
    engines=GDN_ENGINES,
)
def gdn_param_sizes(ctx: CallContext):
    if ctx.HV is None:
        return None
    HV, na, nd = ctx.HV, ctx.call.A_log.numel(), ctx.call.dt_bias.numel()
    if na == HV and nd == HV:
        return None
    fixes: list[str] = []
    for name, got in (("A_log", na), ("dt_bias", nd)):
        if got != HV:
            fixes += _param_size_fixes(ctx, name, got, HV)
    return Finding({"HV": HV, "A_log_numel": na, "dt_bias_numel": nd}, fixes,
                   argument="A_log" if na != HV else "dt_bias")


@rule(
    "GDR216", "out-shape-mismatch", wrapper={"gdn": 16, "kda": 18},
    summary="`out` is not [B, 1, HV, V]",
    message="`out` must have shape {expected} (got out.shape={shape}).",
    explanation="The kernel writes one [HV, V] block per row into `out` [B, 1, HV, V].",
    causes=("`out` allocated [B, HV, V] or [1, B, HV, V]", "`out` sized with the global HV"),
    fixes=("allocate `out` as [B, 1, HV_l, V]",),
    example="out = torch.empty(8, 32, 128)",
    engines=GDN_ENGINES + " KDA: check 18.",
)
def out_shape(ctx: CallContext):
    if ctx.B is None or ctx.HV is None:
        return None
    expected = (ctx.B, 1, ctx.HV, ctx.V)
    got = tuple(ctx.call.out.shape)
    if got == expected:
        return None
    B, HV, V = ctx.B, ctx.HV, ctx.V
    if got == (1, B, HV, V):
        fix = ("this is the [1, B, HV, V] layout the engine returns after `out.transpose(0, 1)`: pass the "
               f"[B, 1, HV, V] buffer before transposing")
    elif got == (B, HV, V):
        fix = f"`out` lacks the token axis: allocate `torch.empty({B}, 1, {HV}, {V})` (or `out.unsqueeze(1)`)"
    elif len(got) == 4 and got[0] == B and got[3] == V and _tp_split(HV, got[2]):
        fix = f"`out` has the global {got[2]} heads: size it with the per-rank HV={HV}"
    else:
        fix = f"allocate `out` as `torch.empty({B}, 1, {HV}, {V})`"
    return Finding({"expected": expected, "shape": got}, [fix], argument="out")


@rule(
    "GDR217", "packed-width-invalid", wrapper={"gdn": 17, "kda": 19},
    summary="`mixed_qkv` is too narrow for the pool's HV*V",
    message="Invalid packed `mixed_qkv` last dim={qkv_dim} for HV={HV}, V={V}.",
    explanation=(
        "`mixed_qkv` rows are [q (H*K) | k (H*K) | v (HV*V)]. The wrapper subtracts HV*V (from the pool) and "
        "needs a positive, even remainder for q and k."
    ),
    causes=("only the v (or z) slice passed",
            "a per-rank `mixed_qkv` against a pool, gates and `out` sized with the global HV "
            "(Qwen3-Next TP 2: width 4096 = 32*128, so qk_dim = 0)"),
    fixes=("pass [q | k | v]; size every per-head input with HV_l",),
    example="mixed_qkv width 4096 with a pool of HV=32, V=128",
    engines=GDN_ENGINES + " KDA: check 19.",
)
def packed_width(ctx: CallContext):
    if ctx.qkv_dim is None or ctx.HV is None:
        return None
    qk_dim = ctx.qkv_dim - ctx.HV * ctx.V
    if qk_dim > 0 and qk_dim % 2 == 0:
        return None
    fixes = _width_candidates(ctx, ctx.qkv_dim) or ["pass [q (H*K) | k (H*K) | v (HV*V)] with the pool's HV and V"]
    return Finding({"qkv_dim": ctx.qkv_dim, "HV": ctx.HV, "V": ctx.V}, fixes, argument="mixed_qkv")


def _q_size_failure(ctx: CallContext) -> int | None:
    """q_dim when the Q-size check fails, else None."""
    if ctx.qkv_dim is None or ctx.HV is None or not ctx.K:
        return None
    qk_dim = ctx.qkv_dim - ctx.HV * ctx.V
    if qk_dim <= 0 or qk_dim % 2:
        return None
    q_dim = qk_dim // 2
    return q_dim if q_dim % ctx.K else None


@rule(
    "GDR218", "q-size-not-multiple-of-head-dim", wrapper={"gdn": 18},
    summary="the inferred Q size is not a multiple of K",
    message="Invalid packed Q size {q_dim}: must be divisible by K={K}.",
    explanation=(
        "The wrapper infers q_dim = (width - HV*V) / 2 and needs it to be a whole number of K-wide heads. "
        "Extra channels in the row (padding, an un-split gate) or a wrong K in the pool break it."
    ),
    causes=("the width carries extra channels (padding, an un-split gate)", "a wrong K in the pool"),
    fixes=("pass exactly [q | k | v]",),
    example="mixed_qkv width 8200 with HV=32, V=K=128",
    engines=GDN_ENGINES,
)
def gdn_q_size(ctx: CallContext):
    q_dim = _q_size_failure(ctx)
    if q_dim is None:
        return None
    fixes = _width_candidates(ctx, ctx.qkv_dim) or [
        f"the q block is {q_dim} channels, not a multiple of K={ctx.K}: pass exactly [q | k | v], or check K "
        f"in the pool"]
    return Finding({"q_dim": q_dim, "K": ctx.K}, fixes, argument="mixed_qkv")


@rule(
    "GDR219", "value-heads-not-multiple-of-key-heads", wrapper={"gdn": 19, "kda": 21},
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
    example="mixed_qkv width 10240 with a pool of HV=16, V=K=128",
    engines=GDN_ENGINES + " KDA: check 21.",
)
def head_config(ctx: CallContext):
    if ctx.qkv_dim is None or ctx.HV is None or not ctx.K or _q_size_failure(ctx) is not None:
        return None
    qk_dim = ctx.qkv_dim - ctx.HV * ctx.V
    if qk_dim <= 0 or qk_dim % 2:
        return None
    H = qk_dim // 2 // ctx.K
    if H > 0 and ctx.HV % H == 0:
        return None
    fixes = _width_candidates(ctx, ctx.qkv_dim) or [
        f"H={H} key heads cannot share HV={ctx.HV} value heads evenly: check that the model's "
        f"linear_num_value_heads is a multiple of linear_num_key_heads"]
    return Finding({"H": H, "HV": ctx.HV}, fixes, argument="mixed_qkv")


@rule(
    "GDR220", "head-dim-needs-multiple-k-tiles", wrapper={"gdn": 20, "kda": 23},
    summary="K would need more than one K tile",
    message="Packed decode kernel only supports NK=1 (got K={K}, BK={BK}).",
    explanation=(
        "The kernel holds a whole K row in one tile, BK = next_power_of_2(K). Since BK >= K this check "
        "cannot fire for K >= 1; it is mirrored for completeness."
    ),
    fixes=("use K <= the largest tile Triton allows",),
    engines=GDN_ENGINES + " KDA: check 23.",
)
def single_k_tile(ctx: CallContext):
    if not ctx.K:
        return None
    BK = next_power_of_2(ctx.K)
    if -(-ctx.K // BK) != 1:
        return Finding({"K": ctx.K, "BK": BK}, argument="initial_state")
    return None


# -- KDA 14-17, 20, 22 -----------------------------------------------------------------------------------
@rule(
    "GDR221", "kda-gate-width-mismatch", wrapper={"kda": 14},
    summary="KDA `a` is not [B, HV*K]",
    message="`a` must have shape [B, HV*K] with HV={HV}, K={K} (got a.shape={a_shape}).",
    explanation="KDA decays each key channel separately: `a` holds HV*K gate inputs per row.",
    causes=("a GDN-style per-head gate [B, HV] given to the KDA kernel", "global heads with a per-rank pool"),
    fixes=("pass the `f_b_proj` output [B, HV*K]",),
    example="a = torch.empty(8, 32)  # KDA with HV=32, K=128",
    engines=KDA_ENGINES,
)
def kda_gate_width(ctx: CallContext):
    if ctx.HV is None or ctx.K is None or ctx.a is None:
        return None
    want, got = ctx.HV * ctx.K, ctx.a.shape[1]
    if got == want:
        return None
    if got == ctx.HV:
        fixes = [f"`a` has HV = {got} columns, a GDN-style per-head gate: KDA needs one value per key channel, "
                 f"[B, HV*K] = [B, {want}] (the `f_b_proj` output)"]
    else:
        fixes = _gate_heads_fixes(ctx, "a", got, want, per="key channel of each value head", width=ctx.K or 1)
    return Finding({"HV": ctx.HV, "K": ctx.K, "a_shape": tuple(ctx.call.a.shape)}, fixes, argument="a")


@rule(
    "GDR222", "kda-beta-heads-mismatch", wrapper={"kda": 15},
    summary="KDA `b` is not [B, HV]",
    message="`b` must have shape [B, HV] with HV={HV} (got b.shape={b_shape}).",
    explanation="`b` holds one beta logit per value head (the `b_proj` output, before the sigmoid).",
    causes=("`b` with global heads while the pool is per-rank",),
    fixes=("pass the per-rank `b_proj` output [B, HV_l]",),
    example="b = torch.empty(8, 32)  # tp=2 pool has HV=16",
    engines=KDA_ENGINES,
)
def kda_beta_heads(ctx: CallContext):
    if ctx.HV is None or ctx.b is None or ctx.b.shape[1] == ctx.HV:
        return None
    return Finding({"HV": ctx.HV, "b_shape": tuple(ctx.call.b.shape)},
                   _gate_heads_fixes(ctx, "b", ctx.b.shape[1], ctx.HV), argument="b")


@rule(
    "GDR223", "kda-a-log-size-mismatch", wrapper={"kda": 16},
    summary="KDA `A_log` does not have HV elements",
    message="`A_log` must have {HV} elements (got {numel}).",
    explanation="KDA `A_log` holds one value per (per-rank) head; Kimi stores it as [1, 1, H, 1].",
    causes=("Kimi `A_log` flattened but not sharded (32 instead of H_l)",),
    fixes=("shard on the head axis",),
    example="A_log = layer.A_log.reshape(-1)  # 32, tp=4 pool has 8 heads",
    engines=KDA_ENGINES,
)
def kda_a_log_size(ctx: CallContext):
    if ctx.HV is None or ctx.call.A_log.numel() == ctx.HV:
        return None
    got = ctx.call.A_log.numel()
    return Finding({"HV": ctx.HV, "numel": got}, _param_size_fixes(ctx, "A_log", got, ctx.HV), argument="A_log")


@rule(
    "GDR224", "kda-dt-bias-size-mismatch", wrapper={"kda": 17},
    summary="KDA `dt_bias` does not have HV*K elements",
    message="`dt_bias` must have {HVK} elements (got {numel}).",
    explanation="KDA `dt_bias` holds one bias per key channel of each head: HV*K elements.",
    causes=("a GDN-style per-head `dt_bias` [HV]", "global heads with a per-rank pool"),
    fixes=("pass the per-rank [HV_l*K] `dt_bias`",),
    example="dt_bias = torch.empty(32)  # KDA with HV=32, K=128",
    engines=KDA_ENGINES,
)
def kda_dt_bias_size(ctx: CallContext):
    if ctx.HV is None or ctx.K is None:
        return None
    want, got = ctx.HV * ctx.K, ctx.call.dt_bias.numel()
    if got == want:
        return None
    if got == ctx.HV:
        fixes = [f"`dt_bias` has HV = {got} elements, a GDN-style per-head bias: KDA needs HV*K = {want}"]
    else:
        fixes = _param_size_fixes(ctx, "dt_bias", got, want)
    return Finding({"HVK": want, "numel": got}, fixes, argument="dt_bias")


@rule(
    "GDR225", "kda-q-size-not-multiple-of-head-dim", wrapper={"kda": 20},
    summary="the inferred Q size is not a multiple of K (KDA)",
    message=("Invalid packed Q size {q_dim}: must be divisible by K={K}. KDA packed decode requires "
             "num_q_heads == num_k_heads and head_q_dim == head_k_dim."),
    explanation="As GDR218, for the KDA wrapper, whose message adds the head-layout requirement.",
    causes=("q and k heads of different sizes", "extra channels in the row"),
    fixes=("pass exactly [q | k | v] with head_q_dim == head_k_dim",),
    engines=KDA_ENGINES,
)
def kda_q_size(ctx: CallContext):
    q_dim = _q_size_failure(ctx)
    if q_dim is None:
        return None
    fixes = _width_candidates(ctx, ctx.qkv_dim) or [
        f"the q block is {q_dim} channels, not a multiple of K={ctx.K}: KDA needs num_q_heads == num_k_heads and "
        f"head_q_dim == head_k_dim; pass exactly [q | k | v]"]
    return Finding({"q_dim": q_dim, "K": ctx.K}, fixes, argument="mixed_qkv")


@rule(
    "GDR226", "kda-cuda-fast-path", wrapper={"kda": 22}, severity="info",
    summary="whether sglang's CUDA KDA decode kernel takes this call",
    message="with `use_qk_l2norm_in_kernel=True`, sglang {verdict} its CUDA KDA decode kernel{reason}",
    explanation=(
        "With `use_qk_l2norm_in_kernel=True` the sglang 0.5.23 KDA wrapper imports "
        "`sglang.kernels.ops.attention.kda_packed_decode` (ImportError when it or `sglang.kernels.jit` is "
        "missing) and runs a CUDA kernel instead of Triton when the call is covered: B >= 8, K = V = 128, "
        "bf16 activations, fp32 A_log/dt_bias/state, int32 indices, dense inner state. That kernel checks the "
        "inner state layout the Triton path only assumes."
    ),
    engines=KDA_ENGINES,
)
def kda_cuda_fast_path(ctx: CallContext):
    if ctx.variant != "kda" or ctx.engine != "sglang" or not ctx.call.use_qk_l2norm_in_kernel or ctx.HV is None:
        return None
    c = ctx.call
    misses = []
    if (ctx.B or 0) < 8:
        misses.append(f"B={ctx.B} < 8")
    if (ctx.K, ctx.V) != (128, 128):
        misses.append(f"K, V = {ctx.K}, {ctx.V} (needs 128, 128)")
    for name in ("mixed_qkv", "a", "b", "out"):
        if getattr(c, name).dtype != "bfloat16":
            misses.append(f"`{name}` is {getattr(c, name).dtype}")
    for name in ("A_log", "dt_bias", "initial_state"):
        if getattr(c, name).dtype != "float32":
            misses.append(f"`{name}` is {getattr(c, name).dtype}")
    if c.ssm_state_indices.dtype != "int32":
        misses.append(f"`ssm_state_indices` is {c.ssm_state_indices.dtype}")
    if not c.ssm_state_indices.is_contiguous():
        misses.append("`ssm_state_indices` is not contiguous")
    if c.initial_state.ndim == 4 and c.initial_state.stride[1:] != (ctx.V * ctx.K, ctx.K, 1):
        misses.append("the inner state is not dense")
    if misses:
        return Finding({"verdict": "skips", "reason": ": " + "; ".join(misses)})
    return Finding({"verdict": "runs", "reason": " (Triton is skipped)"})


@rule(
    "GDR227", "head-dim-zero", wrapper={"gdn": 18, "kda": 20},
    summary="the pool has K = 0",
    message=("`initial_state` has K=0 (shape {shape}): the wrapper raises ZeroDivisionError "
             "(integer modulo by zero) at its Q-size check"),
    explanation="With K = 0 the wrapper's `q_dim % K` raises ZeroDivisionError instead of a ValueError.",
    fixes=("allocate the pool as [S, HV, V, K] with K = head_k_dim",),
    engines=GDN_ENGINES,
)
def head_dim_zero(ctx: CallContext):
    if ctx.K != 0 or ctx.qkv_dim is None or ctx.HV is None:
        return None
    qk_dim = ctx.qkv_dim - ctx.HV * ctx.V
    if qk_dim <= 0 or qk_dim % 2:
        return None
    S = ctx.S if ctx.S is not None else "S"
    return Finding({"shape": tuple(ctx.state.shape)},
                   [f"the pool's K axis is empty: allocate it as [{S}, {ctx.HV}, {ctx.V}, head_k_dim]"],
                   argument="initial_state")


# -- GDR240+: what the kernels assume without checking ---------------------------------------------------
@rule(
    "GDR240", "state-pool-inner-layout-not-dense",
    summary="the state pool's inner [HV, V, K] block is not dense",
    message="`initial_state` inner strides are {inner}, the kernel assumes ({VK}, {K}, 1)",
    explanation=(
        "The kernel addresses slot s, head j, row v, column k at `s*stride(0) + j*V*K + v*K + k`: only the "
        "slot pitch `stride(0)` is taken from the tensor, the inner [HV, V, K] block is assumed dense. A "
        "permuted pool ([S, V, HV, K] viewed as [S, HV, V, K]) or a K-padded pool passes every wrapper check "
        "and silently produces wrong output and state (docs/kernel-contract.md U1). Page-padded slot pitches are "
        "fine."
    ),
    causes=("a pool stored [S, V, HV, K] and permuted", "a pool padded in K (row stride > K)",
            "a head slice of a wider pool"),
    fixes=("store the pool with a dense [HV, V, K] block per slot; any slot pitch is fine",),
    example="pool = torch.empty(9, 128, 32, 128).permute(0, 2, 1, 3)",
    engines="sglang 0.5.23 and vLLM Triton kernels (sglang's CUDA KDA path checks it).",
)
def state_inner_layout(ctx: CallContext):
    spec = ctx.state
    if spec.ndim != 4 or ctx.K is None or spec.stride[-1] != 1:
        return None
    HV, V, K = ctx.HV, ctx.V, ctx.K
    if not (HV and V and K):  # an empty [HV, V, K] block: nothing is addressed
        return None
    want = (V * K, K, 1)
    got = spec.stride[1:]
    if got == want:  # the usual dense pool, decided without the per-axis loop below
        return None
    # Size-1 axes are never stepped over, so their stride is irrelevant.
    if all(size == 1 or g == w for size, g, w in zip(spec.shape[1:], got, want)):
        return None
    if HV > 1 and V > 1 and got[0] < got[1]:
        fix = (f"the pool is a permuted view (head stride {got[0]} < row stride {got[1]}, e.g. stored "
               f"[S, V, HV, K]): store it physically as [S, HV, V, K]")
    elif got[1] > K:
        fix = (f"the pool is padded in K (row stride {got[1]} > K={K}): allocate it with V rows of exactly "
               f"K={K} elements")
    else:
        fix = (f"the [HV, V, K] block is not dense (strides {got}): take a per-layer view whose slot block is "
               f"contiguous, e.g. `pool[layer]` of a stacked pool, not a head slice")
    return Finding({"inner": tuple(got), "VK": V * K, "K": K}, [fix], argument="initial_state")


def _live_rows(ctx: CallContext) -> list[tuple[int, int]] | None:
    """(row, slot) of the rows the kernel reads and writes; None when the values are unknown."""
    spec = ctx.call.ssm_state_indices
    if spec.values is None or spec.ndim != 1:
        return None
    skip_at_or_below = 0 if ctx.engine == "vllm" else -1
    return [(row, int(v)) for row, v in enumerate(spec.values)
            if int(v) > skip_at_or_below and not _wrapped_skip(ctx, v)]


def _wrapped_skip(ctx: CallContext, value: int | float) -> bool:
    """A uint8 255 in a pool of at most 255 slots is a -1 that wrapped: GDR243 reports that cause."""
    return ctx.call.ssm_state_indices.dtype == "uint8" and int(value) == 255 and (ctx.S or 0) <= 255


def _padding_rows(values: tuple) -> int:
    """Trailing rows at slot 0: sglang's CUDA-graph padding writes the reserved dummy slot 0."""
    count = 0
    for v in reversed(values):
        if int(v) != 0:
            break
        count += 1
    return count


@rule(
    "GDR241", "slot-indices-out-of-range",
    summary="a slot index is past the end of the pool",
    message="`ssm_state_indices` holds slot {slot} at row {row}, but the pool has {S} slots (0..{last})",
    explanation=(
        "Nothing checks 0 <= index < S. An index just past the end of a view silently overwrites the "
        "neighbouring memory; one far past the end raises `CUDA error: an illegal memory access`, after "
        "which every CUDA call in the process fails (docs/kernel-contract.md U3)."
    ),
    causes=("a slot table sized for a larger pool", "uint8 indices where -1 became 255",
            "a per-layer pool with fewer slots than the allocator hands out"),
    fixes=("size the pool for every slot the allocator can hand out (sglang: size+1 rows)",),
    example="pool has 9 slots, ssm_state_indices = [1, 2, 9]",
    engines="sglang 0.5.23 and vLLM.",
)
def indices_in_range(ctx: CallContext):
    live = _live_rows(ctx)
    if live is None or ctx.S is None:
        return None
    bad = [(row, slot) for row, slot in live if slot >= ctx.S]
    findings = []
    for row, slot in bad[:3]:
        fix = (f"grow the pool to at least {max(s for _, s in bad) + 1} slots, or fix the slot table "
               f"(largest index {max(s for _, s in bad)})")
        findings.append(Finding({"slot": slot, "row": row, "S": ctx.S, "last": ctx.S - 1}, [fix],
                                argument="ssm_state_indices"))
    return findings


@rule(
    "GDR242", "duplicate-slot-indices",
    summary="two rows of one batch update the same slot",
    message="slot {slot} is used by rows {rows} of one batch",
    explanation=(
        "Programs of different rows read and write their slot concurrently. Two rows on one slot race: "
        "the slot ends up with one row's update, the other's, or an element-wise mixture, and both outputs "
        "come from the pre-step state (docs/kernel-contract.md U5). An index tensor expanded with stride 0 "
        "guarantees this."
    ),
    causes=("an index tensor made with `.expand(B)` (stride 0)", "two requests given the same slot"),
    fixes=("give every live request its own slot; padding rows use -1",),
    example="ssm_state_indices = torch.tensor([3]).expand(8)",
    engines="sglang 0.5.23 and vLLM.",
)
def duplicate_slots(ctx: CallContext):
    spec = ctx.indices
    if spec is not None and spec.shape[0] > 1 and spec.stride[0] == 0:
        live = _live_rows(ctx)
        if live is None or live:
            slot = live[0][1] if live else "?"
            return Finding({"slot": slot, "rows": f"0..{spec.shape[0] - 1}"},
                           ["`ssm_state_indices` has stride 0 (an expanded tensor): every row names the same "
                            "slot; build a real [B] tensor of distinct slots"],
                           notes=["stride-0 index tensor: the rows cannot name different slots"],
                           argument="ssm_state_indices")
    live = _live_rows(ctx)
    if not live:
        return None
    values = ctx.call.ssm_state_indices.values or ()
    padding_start = len(values) - _padding_rows(values) if ctx.engine == "sglang" else len(values)
    rows_by_slot: dict[int, list[int]] = {}
    for row, slot in live:
        if row < padding_start:
            rows_by_slot.setdefault(slot, []).append(row)
    findings = []
    for slot, rows in rows_by_slot.items():
        if len(rows) > 1:
            findings.append(Finding({"slot": slot, "rows": ", ".join(map(str, rows))},
                                    [f"give row {rows[1]} its own slot" if len(rows) == 2 else
                                     f"give rows {', '.join(map(str, rows[1:]))} their own slots"],
                                    argument="ssm_state_indices"))
    return findings


@rule(
    "GDR243", "slot-index-dtypes",
    summary="`ssm_state_indices` is not int32 or int64",
    message="`ssm_state_indices` has dtype {dtype}; the kernel expects int32 or int64",
    explanation=(
        "Any dtype is accepted and converted after the load: floats are truncated (1.7 -> slot 1), bool reads "
        "as 0/1, and uint8 cannot hold the -1 skip sentinel (it becomes 255, out of range) "
        "(docs/kernel-contract.md U6)."
    ),
    fixes=("use int32 indices (what sglang passes) or int64",),
    example="ssm_state_indices = slots.float()",
    engines="sglang 0.5.23 and vLLM.",
)
def index_dtype(ctx: CallContext):
    spec = ctx.call.ssm_state_indices
    if spec.dtype in ("int32", "int64"):
        return None
    fixes = [f"convert with `.to(torch.int32)` (got {spec.dtype})"]
    wrapped = [row for row, v in enumerate(spec.values or ()) if _wrapped_skip(ctx, v)]
    if wrapped:
        rows = f"rows {', '.join(map(str, wrapped[:8]))} hold" if len(wrapped) > 1 else f"row {wrapped[0]} holds"
        fixes.insert(0, f"{rows} 255: a -1 padding sentinel that uint8 "
                        f"cannot represent, so the kernel writes slot 255 instead of skipping the row")
    return Finding({"dtype": spec.dtype}, fixes, argument="ssm_state_indices")


@rule(
    "GDR244", "grid-limit-exceeded",
    summary="the launch grid exceeds CUDA's 65535 limit",
    message="the launch grid needs {what} = {value} > 65535, the CUDA grid limit: the launch fails",
    explanation=(
        "sglang's GDN packed decode launches a (NV, B*HV) grid; CUDA caps grid dimension 1 at 65535, so "
        "B*HV > 65535 fails at launch with `Triton Error [CUDA]: invalid argument` (docs/kernel-contract.md U7). "
        "That is B >= 2048 at HV = 32 and B >= 1024 at HV = 64. The KDA kernel launches (NV, B, HV): B and HV "
        "must each be <= 65535. vLLM splits the GDN grid when needed."
    ),
    causes=("a large decode batch on a rank with many value heads",),
    fixes=("cap the decode batch below 65536 // HV", "raise TP to lower HV per rank"),
    example="B = 2048 with HV = 32 (Qwen3-Next at TP 1)",
    engines="sglang 0.5.23 (GDN and KDA); vLLM splits the GDN grid.",
)
def grid_limit(ctx: CallContext):
    if ctx.B is None or ctx.HV is None:
        return None
    B, HV = ctx.B, ctx.HV
    if ctx.variant == "gdn":
        if ctx.engine == "vllm" or B * HV <= GRID_DIM_LIMIT:
            return None
        return Finding({"what": f"B*HV = {B}*{HV}", "value": B * HV},
                       [f"cap the decode batch at {GRID_DIM_LIMIT // HV} (65535 // HV={HV}), or raise TP so "
                        f"that each rank has fewer value heads"], argument="mixed_qkv")
    for what, value in (("B", B), ("HV", HV)):
        if value > GRID_DIM_LIMIT:
            return Finding({"what": what, "value": value}, [f"keep {what} <= 65535"], argument="mixed_qkv")
    return None


@rule(
    "GDR245", "invalid-scales",
    summary="`scale` is missing, not a number, or not positive",
    message="`scale` is {value!r}; the kernel needs a positive float (typically K**-0.5 = {expected})",
    explanation=(
        "The wrapper does not validate `scale`: None fails inside Triton's compiler, 0.0 gives an all-zero "
        "`out`, and negative or non-finite values are accepted and give wrong output (docs/kernel-contract.md "
        "U11). The neighbouring wrappers assert `scale > 0`."
    ),
    fixes=("pass `scale = head_k_dim ** -0.5`",),
    example="scale = None",
    engines="sglang 0.5.23 and vLLM.",
)
def scale_valid(ctx: CallContext):
    scale = ctx.call.scale
    expected = ctx.K ** -0.5 if ctx.K else "K**-0.5"
    if isinstance(scale, bool) or not isinstance(scale, (int, float)) or not math.isfinite(scale) or scale <= 0:
        return Finding({"value": scale, "expected": expected},
                       [f"pass `scale={expected}` (head_k_dim ** -0.5)" if ctx.K else "pass head_k_dim ** -0.5"],
                       argument="scale")
    return None


@rule(
    "GDR246", "out-aliases-inputs",
    summary="`out` shares memory with an input",
    message="`out` overlaps `{other}` in memory",
    explanation=(
        "Programs read `mixed_qkv`, `a`, `b` and the pool while other programs write `out`, so overlapping "
        "memory gives order-dependent results (docs/kernel-contract.md U17)."
    ),
    fixes=("allocate `out` separately",),
    example="out = mixed_qkv[:, :4096].view(B, 1, HV, V)",
    engines="sglang 0.5.23 and vLLM.",
)
def out_aliasing(ctx: CallContext):
    out = ctx.call.out
    findings = []
    for name in ("mixed_qkv", "a", "b", "A_log", "dt_bias", "initial_state", "ssm_state_indices"):
        other = getattr(ctx.call, name)
        # Separate allocations have different storages: compare those before the byte spans.
        if other.storage == out.storage and out.overlaps(other):
            findings.append(Finding({"other": name}, [f"allocate `out` in its own buffer, not inside `{name}`"],
                                    argument="out"))
    return findings


@rule(
    "GDR247", "live-requests-in-slot-zero",
    summary="a live request uses slot 0, which sglang reserves for padding",
    message="row {row} uses slot 0, which sglang reserves as the dummy slot that padding rows write",
    explanation=(
        "sglang's allocator hands out slots 1..size; slot 0 is a dummy write target for CUDA-graph padding "
        "rows (the zero-initialised request-to-slot table). A live request in slot 0 shares it with every "
        "padding row, which overwrite its state. Trailing rows at slot 0 are taken as padding. vLLM skips "
        "index 0 (NULL_BLOCK_ID) instead."
    ),
    fixes=("hand out slots from 1; padding rows use -1 or trail the batch",),
    example="ssm_state_indices = [0, 1, 2] under sglang",
    engines="sglang 0.5.23 (padding convention).",
)
def slot_zero(ctx: CallContext):
    spec = ctx.call.ssm_state_indices
    if ctx.engine != "sglang" or spec.values is None or spec.ndim != 1:
        return None
    live_end = len(spec.values) - _padding_rows(spec.values)
    rows = [row for row, v in enumerate(spec.values[:live_end]) if int(v) == 0]
    return [Finding({"row": row}, ["give this request a slot from 1..size, or mark a padding row with -1"],
                    argument="ssm_state_indices") for row in rows[:3]]


@rule(
    "GDR248", "head-dims-spill-registers", severity="warning",
    summary="K is large enough to spill registers",
    message="head dim K={K} needs a [{BV}, {BK}] fp32 state tile per warp: registers spill past K = 128",
    explanation=(
        "The kernel holds a [BV, BK] fp32 tile in one warp. Past K = 128 it spills (K = 256: 190 spills; "
        "K = 512: 1214 spills and about 5x slower; K = 1024: 2678 spills, 10x slower and a 6.6 s compile). "
        "Results stay correct (docs/kernel-contract.md U13)."
    ),
    fixes=("expect slower decode; keep head_k_dim <= 128 where the model allows",),
    engines="sglang 0.5.23 and vLLM Triton kernels.",
)
def register_spills(ctx: CallContext):
    if not ctx.K or ctx.K <= 128:
        return None
    return Finding({"K": ctx.K, "BK": next_power_of_2(ctx.K), "BV": min(next_power_of_2(ctx.V or 1), 32)},
                   argument="initial_state")


@rule(
    "GDR249", "low-precision-states", severity="warning",
    summary="the recurrent state is kept in 16-bit precision",
    message="`initial_state` is {dtype}: the state is rounded to {dtype} at every step",
    explanation=(
        "The kernel computes in fp32 and stores the state back in the pool's dtype. A bf16 state rounds every "
        "step (rms relative error about 2.6e-3, steady over 256 steps); sglang reported GSM8K 0.955 with fp32 "
        "against 0.945 with bf16 on Qwen3-Next (docs/kernel-contract.md U8)."
    ),
    fixes=("keep the SSM state in float32 (`--mamba-ssm-dtype float32`)",),
    engines="sglang 0.5.23 and vLLM.",
)
def state_precision(ctx: CallContext):
    dtype = ctx.state.dtype
    if dtype not in ("bfloat16", "float16"):
        return None
    return Finding({"dtype": dtype}, ["allocate the pool in float32 if memory allows (2x the state bytes)"],
                   argument="initial_state")


@rule(
    "GDR250", "qk-l2norm-disabled", severity="warning",
    summary="`use_qk_l2norm_in_kernel` is False",
    message="`use_qk_l2norm_in_kernel` is False, while sglang and vLLM decode these models with True",
    explanation=(
        "The flag defaults to False but the engines pass True for Qwen3-Next/3.5 and Kimi-Linear. The wrong "
        "value gives silently wrong output: magnitude about 7.6 instead of 0.05 in one test "
        "(docs/kernel-contract.md U15)."
    ),
    fixes=("pass `use_qk_l2norm_in_kernel=True` unless the model normalises q and k itself",),
    engines="sglang 0.5.23 and vLLM.",
)
def l2norm_flag(ctx: CallContext):
    if ctx.call.use_qk_l2norm_in_kernel:
        return None
    return Finding(argument="mixed_qkv")


@rule(
    "GDR251", "cpu-tensors", severity="warning",
    summary="the tensors are on the CPU",
    message="all tensors are on {device}: the Triton kernel cannot run there outside the interpreter",
    explanation=(
        "The device check only compares devices, so all-CPU tensors pass it and then fail inside Triton with "
        "`Pointer argument (at 0) cannot be accessed from Triton (cpu tensor?)` (docs/kernel-contract.md U16). "
        "They run only under `TRITON_INTERPRET=1`."
    ),
    fixes=("move the tensors to the GPU",),
    engines="sglang 0.5.23 and vLLM.",
)
def cpu_tensors(ctx: CallContext):
    c = ctx.call  # every tensor argument (TENSOR_ARGUMENTS), spelt out: this rule runs on every guarded call
    if (c.mixed_qkv.device == c.a.device == c.b.device == c.A_log.device == c.dt_bias.device == c.initial_state.device
            == c.out.device == c.ssm_state_indices.device == "cpu"):
        return Finding({"device": "cpu"}, argument="mixed_qkv")
    return None


@rule(
    "GDR252", "empty-batches", severity="info",
    summary="the batch is empty",
    message="the batch is empty (B=0): the call is a no-op",
    explanation="With no rows the kernel launches an empty grid and returns (docs/kernel-contract.md U18).",
    engines="sglang 0.5.23 and vLLM.",
)
def empty_batch(ctx: CallContext):
    return Finding(argument="mixed_qkv") if ctx.B == 0 else None


@rule(
    "GDR253", "beta-rounded-to-gate-dtype", severity="info",
    summary="sglang rounds beta to `b`'s dtype",
    message="sglang 0.5.23 rounds beta = sigmoid(b) to {dtype} before the update",
    explanation=(
        "The sglang 0.5.23 GDN packed decode casts sigmoid(b) to `b.dtype` and back to fp32, so a bf16 `b` "
        "perturbs beta by up to 2^-9 relative. Against an fp32-beta reference the state differs by about 1e-3 "
        "relative, bounded over steps. vLLM (since PR #53877) keeps beta in fp32 (docs/kernel-contract.md §6.1, §8)."
    ),
    fixes=("compare against references with the same beta semantics",),
    engines="sglang 0.5.23 GDN only.",
)
def beta_rounding(ctx: CallContext):
    dtype = ctx.call.b.dtype
    if ctx.variant != "gdn" or ctx.engine != "sglang" or dtype in ("float32", "float64"):
        return None
    return Finding({"dtype": dtype}, argument="b")


@rule(
    "GDR254", "positive-lower-bounds", severity="warning",
    summary="KDA `lower_bound` is not negative",
    message="`lower_bound` is {value}: the safe gate g = lower_bound * sigmoid(...) must be negative to decay",
    explanation=(
        "With `lower_bound` set, the KDA gate is g = lower_bound * sigmoid(exp(A_log) * z) and the state is "
        "multiplied by exp(g). A positive bound makes exp(g) > 1: the state grows at every step."
    ),
    fixes=("pass a negative bound (the safe gate's lower limit for g)",),
    engines=KDA_ENGINES,
)
def lower_bound_sign(ctx: CallContext):
    bound = ctx.call.lower_bound
    if ctx.variant != "kda" or bound is None:
        return None
    if isinstance(bound, (int, float)) and not isinstance(bound, bool) and bound < 0:
        return None
    return Finding({"value": bound}, argument="lower_bound")


@rule(
    "GDR255", "scales-not-inverse-sqrt-head-dim", severity="info",
    summary="`scale` is not K**-0.5",
    message="`scale` is {value!r}, not K**-0.5 = {expected} for K={K}",
    explanation="sglang and vLLM pass `head_k_dim ** -0.5`. Another value is legal but usually a mistake "
                "(an int, or the full-attention head_dim's scale).",
    fixes=("pass `scale = head_k_dim ** -0.5`",),
    engines="sglang 0.5.23 and vLLM.",
)
def scale_convention(ctx: CallContext):
    scale = ctx.call.scale
    if not ctx.K or isinstance(scale, bool) or not isinstance(scale, (int, float)) or not math.isfinite(scale) \
            or scale <= 0:
        return None
    expected = ctx.K ** -0.5
    if isinstance(scale, float) and math.isclose(scale, expected, rel_tol=1e-3):
        return None
    return Finding({"value": scale, "expected": expected, "K": ctx.K}, argument="scale")


@rule(
    "GDR256", "zero-value-head-dims",
    summary="the pool has V = 0",
    message=("`initial_state` has V=0 (shape {shape}): the wrapper raises ZeroDivisionError when it sizes "
             "the value tiles"),
    explanation=(
        "After its last check the wrapper computes BV = min(next_power_of_2(V), 32) and NV = cdiv(V, BV); "
        "with V = 0, BV is 0 and the division raises ZeroDivisionError before any launch."
    ),
    fixes=("allocate the pool as [S, HV, V, K] with V = head_v_dim",),
    engines=GDN_ENGINES,
)
def value_head_dim_zero(ctx: CallContext):
    if ctx.V != 0 or not ctx.K:
        return None
    return Finding({"shape": tuple(ctx.state.shape)},
                   [f"the pool's V axis (dim -2) is 0: allocate [S, {ctx.HV}, head_v_dim, {ctx.K}]"],
                   argument="initial_state")


# -- the all-clear fast path for the wrapper checks ------------------------------------------------------
# The runtime guard runs on every decode step, and a healthy call passes every wrapper check. Running the ~20
# wrapper rules one by one costs several times what the wrapper itself spends on them, so the contract engine
# first asks `wrapper_checks_clear`, which evaluates all their pass conditions at once; only when it says no
# do the rules themselves run (they also build the fixes and messages). The rules stay the single source of
# truth: this function may only answer True where every covered rule finds nothing (it may answer False
# spuriously: some valid calls take the slow path), and tests/test_contract_fast_path.py checks that on
# random calls, and that the covered codes are exactly the registry's error-raising wrapper rules.
WRAPPER_CLEAR_COVERS = frozenset({
    "GDR201", "GDR202", "GDR203", "GDR204", "GDR205", "GDR206", "GDR207", "GDR208", "GDR209", "GDR210", "GDR211",
    "GDR212", "GDR213", "GDR214", "GDR215", "GDR216", "GDR217", "GDR218", "GDR219", "GDR220", "GDR221", "GDR222",
    "GDR223", "GDR224", "GDR225", "GDR227",
})  # every wrapper rule but GDR226, which reports on every covered KDA call (it says which kernel runs)


def wrapper_checks_clear(ctx: CallContext) -> bool:
    """True only if none of the WRAPPER_CLEAR_COVERS rules of `ctx.variant`'s wrapper has a finding."""
    c = ctx.call
    mixed_qkv, a, b, A_log, dt_bias = c.mixed_qkv, c.a, c.b, c.A_log, c.dt_bias
    state, out, indices = c.initial_state, c.out, c.ssm_state_indices
    # GDR201, 203, 205, 207, 212: ranks. With these, the squeezed views in `ctx` are the tensors themselves.
    if (mixed_qkv.ndim != 2 or a.ndim != 2 or b.ndim != 2 or A_log.ndim != 1 or dt_bias.ndim != 1
            or indices.ndim != 1 or state.ndim != 4):
        return False
    # GDR202, 204, 206, 213: unit stride along the last axis.
    if (mixed_qkv.stride[1] != 1 or a.stride[1] != 1 or b.stride[1] != 1 or A_log.stride[0] != 1
            or dt_bias.stride[0] != 1 or state.stride[3] != 1):
        return False
    # GDR209: one device.
    device = mixed_qkv.device
    if not (a.device == b.device == A_log.device == dt_bias.device == state.device == out.device
            == indices.device == device):
        return False
    B, HV, V, K = ctx.B, ctx.HV, ctx.V, ctx.K
    if HV < 1 or V < 1 or K < 1:  # empty or negative head dims: leave them to the rules (GDR227, GDR256)
        return False
    # GDR210, 211: one row per request.
    if a.shape[0] != B or b.shape[0] != B or indices.shape[0] != B:
        return False
    # GDR216: `out` is [B, 1, HV, V]; GDR208: its strides are the contiguous ones (the rule also accepts
    # other strides on size-1 axes: those calls take the slow path).
    if out.shape != (B, 1, HV, V) or out.stride != (HV * V, HV * V, V, 1):
        return False
    # GDR217, 218/225, 219: the width splits into q and k of H heads of K each, and H divides HV (so H > 0;
    # GDR227 needs K = 0, excluded above).
    qk_dim = ctx.qkv_dim - HV * V
    if qk_dim <= 0 or qk_dim % 2 or (qk_dim // 2) % K or HV % (qk_dim // 2 // K):
        return False
    # GDR220: one K tile (always true, BK >= K; evaluated as the rule does, so that it stays wired).
    if -(-K // next_power_of_2(K)) != 1:
        return False
    if ctx.variant == "gdn":  # GDR214, 215: per-value-head gates and decay parameters
        return a.shape[1] == HV and b.shape[1] == HV and A_log.shape[0] == HV and dt_bias.shape[0] == HV
    # KDA GDR221-224: `a` and `dt_bias` per key channel of each value head, `b` and `A_log` per value head.
    return a.shape[1] == HV * K and b.shape[1] == HV and A_log.shape[0] == HV and dt_bias.shape[0] == HV * K
