"""What turns a kernel call's numbers into likely causes: the fixes the GDR2xx rules offer.

A wrong width, head count or stride usually has one of a few causes (a tensor sharded for another TP size,
the fused `ba`/`qkvz` projection passed unsplit, a transposed or strided view); these helpers recognise them
from the numbers in the call, so that a rule's fix names the cause instead of restating the check.
"""

from __future__ import annotations

from ..base.tensor_spec import TensorSpec
from ..base.variants import variant_spec
from ..call.packed_call import CallContext


def shape_text(spec: TensorSpec) -> str:
    return str(tuple(spec.shape))


def last_stride_fix(name: str, spec: TensorSpec) -> str:
    if spec.ndim >= 2 and spec.stride[-2] == 1:
        return (f"`{name}` is a transposed view (strides {tuple(spec.stride)}): produce it row-major, "
                f"or pass `{name}.contiguous()` (a copy)")
    return (f"`{name}` steps {spec.stride[-1]} elements between columns (strides {tuple(spec.stride)}), "
            f"e.g. every other column of a fused output: split the fused tensor into contiguous column "
            f"blocks, or pass `{name}.contiguous()`")


def flatten_fix(name: str, spec: TensorSpec) -> str:
    if name == "A_log" and spec.ndim == 4 and spec.shape[0] == spec.shape[1] == spec.shape[3] == 1:
        return (f"`A_log` has the Kimi checkpoint layout [1, 1, H, 1] {shape_text(spec)}: flatten it, "
                f"`A_log.reshape(-1)` gives shape ({spec.numel()},)")
    return f"flatten it: `{name}.reshape(-1)` gives shape ({spec.numel()},)"


def tp_split(per_rank: int, total: int) -> int | None:
    """tp such that total == per_rank * tp, for tp > 1."""
    if per_rank > 0 and total > per_rank and total % per_rank == 0:
        return total // per_rank
    return None


def width_candidates(ctx: CallContext, width: int) -> list[str]:
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


def gate_heads_fixes(ctx: CallContext, name: str, got: int, want: int, per: str = "value head",
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
    tp = tp_split(heads, want_heads)
    if tp:
        fixes.append(
            f"`{name}` {has} HV/{tp} = {heads} heads{cols} (sharded for tp_size={tp}) but the pool has "
            f"HV={want_heads} (unsharded): shard the pool by the same HV split: HV // tp_size = {want_heads} "
            f"// {tp} = {heads}, a per-layer pool of shape (S, {heads}, {ctx.V}, {ctx.K}), and size `out` and "
            f"`A_log`/`dt_bias` with {heads} heads too"
        )
    tp = tp_split(want_heads, heads)
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


def param_size_fixes(ctx: CallContext, name: str, got: int, want: int) -> list[str]:
    fixes: list[str] = []
    tp = tp_split(want, got)
    if tp:
        fixes.append(f"`{name}` has {got} = {tp}*{want} elements, the global value heads for tp_size={tp}: "
                     f"shard it to this rank, `{name}[rank*{want}:(rank+1)*{want}]`")
    tp = tp_split(got, want)
    if tp:
        fixes.append(f"`{name}` has HV/{tp} = {got} elements while the pool has HV={want}: shard the pool by "
                     f"the same HV split (HV // tp_size = {want} // {tp} = {got})")
    if not variant_spec(ctx.variant).gate_per_key and ctx.K and got == want * ctx.K:
        fixes.append(f"`{name}` has HV*K = {got} elements, a KDA per-channel parameter: use the KDA kernel "
                     f"for KDA models")
    if ctx.H and ctx.H != ctx.HV and got == ctx.H:
        fixes.append(f"`{name}` has H = {got} elements, the number of key heads: it must have one element per "
                     f"value head (HV={ctx.HV})")
    if not fixes:
        fixes.append(f"pass `{name}` with {want} elements")
    return fixes


def q_size_failure(ctx: CallContext) -> int | None:
    """q_dim when the Q-size check fails, else None."""
    if ctx.qkv_dim is None or ctx.HV is None or ctx.V is None or not ctx.K:
        return None
    qk_dim = ctx.qkv_dim - ctx.HV * ctx.V
    if qk_dim <= 0 or qk_dim % 2:
        return None
    q_dim = qk_dim // 2
    return q_dim if q_dim % ctx.K else None


def live_rows(ctx: CallContext) -> list[tuple[int, int]] | None:
    """(row, slot) of the rows the kernel reads and writes; None when the values are unknown."""
    spec = ctx.call.ssm_state_indices
    if spec.values is None or spec.ndim != 1:
        return None
    skip_at_or_below = ctx.profile.skip_at_or_below  # -1: sglang skips idx < 0; 0: vLLM's null block too
    return [(row, int(v)) for row, v in enumerate(spec.values)
            if int(v) > skip_at_or_below and not wrapped_skip(ctx, v)]


def wrapped_skip(ctx: CallContext, value: float) -> bool:
    """A uint8 255 in a pool of at most 255 slots is a -1 that wrapped: GDR243 reports that cause."""
    return ctx.call.ssm_state_indices.dtype == "uint8" and int(value) == 255 and (ctx.S or 0) <= 255


def padding_rows(values: tuple[int | float, ...]) -> int:
    """Trailing rows at slot 0: an engine that reserves slot 0 (`EngineProfile.reserved_slot_zero`, sglang)
    pads its CUDA-graph batches with rows that write that dummy slot."""
    count = 0
    for v in reversed(values):
        if int(v) != 0:
            break
        count += 1
    return count


def transposed_pool_fix(ctx: CallContext) -> str | None:
    """The pool allocated [S, HV, K, V] (K != V) where the kernel wants [S, HV, V, K]: the wrapper reads V and K
    swapped, so a correct `out` [B, 1, HV, V] fails its check. Every argument must agree with that reading:
    `out`'s head dim is the pool's last dim, and the `mixed_qkv` width splits with the swapped dims."""
    state, out = ctx.state, ctx.call.out
    if state.ndim != 4 or ctx.B is None or ctx.HV is None or ctx.V is None or ctx.K is None or ctx.V == ctx.K:
        return None
    S, HV, K_true, V_true = state.shape  # as allocated: [S, HV, K, V]
    if min(state.shape) <= 0:  # an empty pool has no layout to read
        return None
    if tuple(out.shape) != (ctx.B, 1, HV, V_true):
        return None
    if ctx.qkv_dim is not None:
        qk = ctx.qkv_dim - HV * V_true
        if qk <= 0 or qk % (2 * K_true):
            return None
    return (f"the pool is transposed: it was allocated [S, HV, K, V] = ({S}, {HV}, {K_true}, {V_true}) while the "
            f"kernel reads [S, HV, V, K], so the wrapper takes V={K_true}, K={V_true} and `out` (HV={HV}, "
            f"V={V_true}) is right: allocate the pool as ({S}, {HV}, {V_true}, {K_true}), or convert it once with "
            f"`initial_state.transpose(-1, -2).contiguous()` (a copy: keep it as the pool, the kernel updates it "
            f"in place)")


def flattened_pool_fix(ctx: CallContext) -> str | None:
    """A pool flattened to (S, HV*V*K): HV from the gates, V from `out`, K from the rest of the row."""
    state, out = ctx.state, ctx.call.out
    if state.ndim != 2:
        return None
    S, row = state.shape
    HV = ctx.b.shape[1] if ctx.b is not None and ctx.b.ndim == 2 else None
    if HV is None and ctx.A_log is not None:
        HV = ctx.A_log.numel()
    V = out.shape[-1] if out.ndim == 4 else None
    if not HV or not V or row % (HV * V):
        return None
    K = row // (HV * V)
    return (f"the pool is flattened to ({S}, {row}) = (S, HV*V*K) with HV={HV} (the gates), V={V} (`out`), "
            f"K={K}: pass `initial_state.view({S}, {HV}, {V}, {K})` (a view of the same memory)")


def one_cause(ctx: CallContext, fixes: list[str]) -> list[str]:
    """A transposed pool explains the width, Q-size and head errors it causes as well: say only that."""
    transposed = transposed_pool_fix(ctx)
    return [transposed] if transposed is not None else fixes
