"""GDR240-GDR256 and GDR258: the preconditions the packed-decode kernels assume without checking.

No wrapper raises for these (docs/kernel-contract.md U1-U18): the kernel runs and gives wrong output or state,
crashes the process's CUDA context, or just runs slowly. The contract engine reports them after the wrapper
checks, by code. Fixes are computed from the numbers in the call (kernel_causes).
"""

from __future__ import annotations

import math
import numbers

from ..base.limits import LIMITS, counted, shorten
from ..base.registry import Finding, rule
from ..base.variants import variant_spec
from ..call.packed_call import GRID_DIM_LIMIT, GRID_X_LIMIT, CallContext, next_power_of_2
from ..engines.profiles import PROFILES
from .examples import CallExample, tensor
from .kernel_causes import live_rows, padding_rows, wrapped_skip

GDN_ENGINES = "sglang 0.5.23 and vLLM (same check, same message)."
KDA_ENGINES = "sglang 0.5.23 (`fused_recurrent_kda_packed_decode`)."
# Rows reported one by one per rule and call: a large batch stays readable; the rest are counted, never dropped.
LISTED_ROWS = 3


def _count_unlisted(findings: list[Finding], total: int, what: str) -> list[Finding]:
    """`findings` (the first rows of `total`), the last one noting how many more rows are `what`, as the runtime
    guard says "(and N more faults ...)": a report that lists 3 of 13 bad rows must not read as 3 in all."""
    if findings and total > len(findings):
        findings[-1].notes.append(f"and {counted(total - len(findings), 'more row')} {what}, not listed "
                                  f"(the first {len(findings)} are)")
    return findings


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
    engines="sglang 0.5.23 and vLLM Triton kernels (sglang's CUDA KDA path checks it).",
    example=CallExample({"initial_state": tensor(8, 4, 8, 8, stride=(256, 8, 32, 1))}, "a [S, V, HV, K] pool permuted"),
)
def state_inner_layout(ctx: CallContext) -> Finding | None:
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
    if all(size == 1 or g == w for size, g, w in zip(spec.shape[1:], got, want, strict=True)):
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


@rule(
    "GDR259", "state-pool-slots-alias",
    summary="the state pool's slots share memory",
    message=("`initial_state` slot stride `stride(0)` is {pitch}, less than the {slot} elements of one slot: "
             "distinct slots share memory"),
    explanation=(
        "Slot s of the pool starts `s*stride(0)` elements in and holds HV*V*K elements. A slot stride of 0 (a pool "
        "made by `expand` from one slot, or `as_strided` with stride 0) or any stride smaller than one slot's "
        "size makes slots overlap: two requests in distinct slots then read and write the same state, the race "
        "that distinct slot indices exist to prevent, and no wrapper check sees it."
    ),
    causes=("a pool `expand`ed from one slot (stride 0 on the slot axis)",
            "an `as_strided` view with a slot stride smaller than HV*V*K"),
    fixes=("allocate the pool with memory of its own per slot (`torch.empty(S, HV, V, K)`, or `pool[layer]` of "
           "a stacked pool); never `expand` its slot axis",),
    engines="sglang 0.5.23 and vLLM Triton kernels.",
    example=CallExample({"initial_state": tensor(8, 4, 8, 8, stride=(0, 64, 8, 1))}, "a pool `expand`ed from one slot"),
)
def state_slots_alias(ctx: CallContext) -> Finding | None:
    spec = ctx.state
    if spec.ndim != 4 or spec.shape[0] < 2 or ctx.K is None:
        return None
    HV, V, K = ctx.HV, ctx.V, ctx.K
    if not (HV and V and K):  # an empty slot: nothing is addressed
        return None
    pitch, slot = spec.stride[0], HV * V * K
    inner_dense = all(size == 1 or got == want for size, got, want in
                      zip(spec.shape[1:], spec.stride[1:], (V * K, K, 1), strict=True))
    # A dense slot block spans `slot` elements from its start: a smaller pitch overlaps the next slot. (A block
    # that is not dense is GDR240; there only a pitch of 0 surely aliases.)
    if pitch == 0 or (inner_dense and abs(pitch) < slot):
        fix = ("the slot axis has stride 0 (an `expand`ed or broadcast pool): allocate one slot of state per "
               "slot" if pitch == 0 else
               f"the slot stride {pitch} is smaller than one slot ({slot} = HV*V*K elements): give each slot "
               f"at least {slot} elements")
        return Finding({"pitch": pitch, "slot": slot}, [fix], argument="initial_state")
    return None


@rule(
    "GDR260", "slot-index-values-not-read", severity="info",
    summary="the slot indices' values do not exist: only shapes were checked",
    message="`ssm_state_indices` is {kind}: its values were not read, only shapes, strides and dtypes were checked",
    explanation=(
        "A tensor on the `meta` device, or a fake tensor (`FakeTensorMode`, the tracing that `torch.compile` "
        "does), has a shape, strides and a dtype but no values: reading one raises a data-dependent error. The "
        "call is checked from its metadata, and the rules about index values (slots in range, distinct, not the "
        "reserved slot) are skipped; they run on the real call."
    ),
    fixes=("check a call with real tensors too (a `gdr-check call` recording, or the guard outside tracing) for "
           "the index-value rules",),
    engines="sglang 0.5.23 and vLLM.",
    example=CallExample({"ssm_state_indices": tensor(4)}, "a call of meta tensors: the indices hold no values",
                        device="meta"),
)
def slot_index_values_not_read(ctx: CallContext) -> Finding | None:
    indices = ctx.call.ssm_state_indices
    if indices.values is not None:
        return None
    unread = indices.values_unread or ("meta" if indices.device == "meta" else None)
    if unread is None:
        return None
    kind = "a fake tensor (traced)" if unread == "fake" else "a tensor on the meta device"
    return Finding({"kind": kind}, argument="ssm_state_indices")


@rule(
    "GDR241", "slot-indices-out-of-range",
    summary="a slot index is past the end of the pool",
    message="`ssm_state_indices` holds slot {slot} at row {row}, but the pool has {slots} (0..{last})",
    explanation=(
        "Nothing checks 0 <= index < S. An index just past the end of a view silently overwrites the "
        "neighbouring memory; one far past the end raises `CUDA error: an illegal memory access`, after "
        "which every CUDA call in the process fails (docs/kernel-contract.md U3)."
    ),
    causes=("a slot table sized for a larger pool", "uint8 indices where -1 became 255",
            "a per-layer pool with fewer slots than the allocator hands out"),
    fixes=("size the pool for every slot the allocator can hand out (sglang: size+1 rows)",),
    engines="sglang 0.5.23 and vLLM.",
    example=CallExample({"ssm_state_indices": tensor(4, values=(3, 1, 9, 2))}, "slot 9 in a pool of 8 slots"),
)
def indices_in_range(ctx: CallContext) -> Finding | list[Finding] | None:
    live = live_rows(ctx)
    if live is None or ctx.S is None:
        return None
    bad = [(row, slot) for row, slot in live if slot >= ctx.S]
    findings = []
    for row, slot in bad[:LISTED_ROWS]:
        fix = (f"grow the pool to at least {max(s for _, s in bad) + 1} slots, or fix the slot table "
               f"(largest index {max(s for _, s in bad)})")
        findings.append(Finding({"slot": slot, "row": row, "slots": counted(ctx.S, "slot"), "last": ctx.S - 1}, [fix],
                                argument="ssm_state_indices"))
    return _count_unlisted(findings, len(bad), f"with a slot outside 0..{ctx.S - 1}")


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
    engines="sglang 0.5.23 and vLLM.",
    example=CallExample({"ssm_state_indices": tensor(4, values=(3, 3, 5, 2))}, "two requests given slot 3"),
)
def duplicate_slots(ctx: CallContext) -> Finding | list[Finding] | None:
    spec = ctx.indices
    if spec is not None and spec.shape[0] > 1 and spec.stride[0] == 0:
        live = live_rows(ctx)
        if live is None or live:
            slot = live[0][1] if live else "?"
            return Finding({"slot": slot, "rows": f"0..{spec.shape[0] - 1}"},
                           ["`ssm_state_indices` has stride 0 (an expanded tensor): every row names the same "
                            "slot; build a real [B] tensor of distinct slots"],
                           notes=["stride-0 index tensor: the rows cannot name different slots"],
                           argument="ssm_state_indices")
    live = live_rows(ctx)
    if not live:
        return None
    values = ctx.call.ssm_state_indices.values or ()
    # Trailing padding may repeat the reserved slot 0 only where the engine reserves it for padding.
    padding_start = len(values) - padding_rows(values) if ctx.profile.reserved_slot_zero else len(values)
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
    engines="sglang 0.5.23 and vLLM.",
    example=CallExample({"ssm_state_indices": tensor(4, dtype="float32", values=(3, 1, 5, 2))}, "`slots.float()`"),
)
def index_dtype(ctx: CallContext) -> Finding | None:
    spec = ctx.call.ssm_state_indices
    if spec.dtype in ("int32", "int64"):
        return None
    fixes = [f"convert with `.to(torch.int32)` (got {spec.dtype})"]
    wrapped = [row for row, v in enumerate(spec.values or ()) if wrapped_skip(ctx, v)]
    if wrapped:
        more = f" and {len(wrapped) - 8} more" if len(wrapped) > 8 else ""  # counted, not dropped silently
        rows = (f"rows {', '.join(map(str, wrapped[:8]))}{more} hold" if len(wrapped) > 1
                else f"row {wrapped[0]} holds")
        fixes.insert(0, f"{rows} 255: a -1 padding sentinel that uint8 "
                        f"cannot represent, so the kernel writes slot 255 instead of skipping the row")
    return Finding({"dtype": spec.dtype}, fixes, argument="ssm_state_indices")


@rule(
    "GDR244", "grid-limit-exceeded",
    summary="the launch grid exceeds a CUDA grid limit",
    message="the launch grid needs {what} = {value} > {limit}, the CUDA grid limit: {outcome}",
    explanation=(
        "sglang's GDN packed decode launches a (NV, B*HV) grid; CUDA caps grid dimension 1 at 65535, so "
        "B*HV > 65535 fails at launch with `Triton Error [CUDA]: invalid argument` (docs/kernel-contract.md U7). "
        "That is B >= 2048 at HV = 32 and B >= 1024 at HV = 64. The Triton KDA kernel launches (NV, B, HV): B "
        "and HV must each be <= 65535. When sglang's CUDA KDA kernel takes the call instead (GDR226: "
        "`use_qk_l2norm_in_kernel=True`, B >= 8, K = V = 128, a float32 state, ...), it launches a 1-D grid of "
        "B*HV blocks, counted in 32 bits: only CUDA's gridDim.x limit, 2**31 - 1, applies (a count of 2**32 or "
        "more wraps and launches too few blocks). Before sglang 0.5.19 the Triton KDA kernel launched "
        "(NV, B*HV), with the GDN limit. vLLM from 0.28.0 splits the GDN grid into (NV, HV, B) when B*HV > 65535, "
        "so B and HV must each stay <= 65535; vLLM before 0.28.0 launches (NV, B*HV) like sglang."
    ),
    causes=("a large decode batch on a rank with many value heads",),
    fixes=("cap the decode batch below 65536 // HV", "raise TP to lower HV per rank"),
    engines="sglang (GDN, and KDA on the Triton or the CUDA kernel); vLLM (GDN; split from 0.28.0).",
    example=CallExample({"mixed_qkv": tensor(16384, 64), "a": tensor(16384, 4), "b": tensor(16384, 4),
                         "out": tensor(16384, 1, 4, 8), "ssm_state_indices": tensor(16384)},
                        "B=16384 rows of HV=4 heads: B*HV = 65536"),
)
def grid_limit(ctx: CallContext) -> Finding | None:
    if ctx.B is None or ctx.HV is None:
        return None
    B, HV = ctx.B, ctx.HV
    fails = "the launch fails"
    decode = ctx.profile.decode_of(ctx.variant)
    # An unsplit (NV, B*HV) grid (sglang's GDN, its Triton KDA before 0.5.19, vLLM's GDN before 0.28); None: B
    # and HV on axes of their own (the split grids)
    limit = decode.grid_limit
    if limit is not None:
        if B * HV <= limit:
            return None
        if decode.fast_path is None or ctx.kda_cuda_misses() != []:
            return Finding({"what": f"B*HV = {B}*{HV}", "value": B * HV, "limit": limit, "outcome": fails},
                           [f"cap the decode batch at {limit // HV} ({limit} // HV={HV}), or raise TP so that each "
                            f"rank has fewer value heads"], argument="mixed_qkv")
    if B <= GRID_DIM_LIMIT and HV <= GRID_DIM_LIMIT and B * HV <= GRID_X_LIMIT:
        return None  # fits either kernel's grid, whichever runs
    fast = decode.fast_path
    if fast is not None and ctx.kda_cuda_misses() == []:  # the CUDA kernel: B*HV blocks on grid x
        blocks = B * HV
        if blocks <= GRID_X_LIMIT:
            return None
        wrapped = blocks % 2**fast.grid_blocks_bits
        outcome = fails
        if 0 < wrapped <= GRID_X_LIMIT:
            # block i decodes value head i % HV of row i // HV: the first `wrapped` blocks cover rows
            # 0..row-1 whole and the first `heads` value heads of row `row`
            row, heads = divmod(wrapped, HV)
            partial = ""
            if heads:
                done = "value head 0" if heads == 1 else f"value heads 0-{heads - 1}"
                left = f"head {HV - 1} is" if heads == HV - 1 else f"heads {heads}-{HV - 1} are"
                partial, row = f"row {row} is decoded only in {done} ({left} not), and ", row + 1
            outcome = (f"the kernel counts blocks in {fast.grid_blocks_bits} bits, so it launches {wrapped}: "
                       f"{partial}requests from row {row} on are not decoded")
        return Finding({"what": f"B*HV = {B}*{HV}", "value": blocks, "limit": GRID_X_LIMIT, "outcome": outcome},
                       [f"cap the decode batch at {GRID_X_LIMIT // HV} ({GRID_X_LIMIT} // HV={HV}), or raise TP "
                        f"so that each rank has fewer value heads"], argument="mixed_qkv")
    return _axes_over_limit(B, HV, fails)


def _axes_over_limit(B: int, HV: int, fails: str) -> Finding | None:
    """A grid with B and HV on gridDim.y and gridDim.z (sglang's Triton KDA (NV, B, HV), vLLM's split GDN grid
    (NV, HV, B)): each must stay <= 65535."""
    for what, value in (("B", B), ("HV", HV)):
        if value > GRID_DIM_LIMIT:
            return Finding({"what": what, "value": value, "limit": GRID_DIM_LIMIT, "outcome": fails},
                           [f"keep {what} <= {GRID_DIM_LIMIT}"], argument="mixed_qkv")
    return None


@rule(
    "GDR245", "invalid-scales",
    summary="`scale` is missing, not a number, not positive, or out of range",
    message="`scale` is {value!r}; {problem} (typically K**-0.5 = {expected})",
    explanation=(
        "The wrapper does not validate `scale`: None fails inside Triton's compiler, 0.0 gives an all-zero "
        "`out`, and negative or non-finite values are accepted and give wrong output (docs/kernel-contract.md "
        "U11). The neighbouring wrappers assert `scale > 0`. gdr-check takes a scale in "
        f"{LIMITS['scale'].range_text} (docs/limits.md): above that, it is reported here too."
    ),
    fixes=("pass `scale = head_k_dim ** -0.5`",),
    engines="sglang 0.5.23 and vLLM.",
    example=CallExample({"scale": None}),
)
def scale_valid(ctx: CallContext) -> Finding | None:
    scale = ctx.call.scale
    expected = ctx.K ** -0.5 if ctx.K else "K**-0.5"
    # LIMITS: a number, finite, at most 1e30 (10**400 and 1e308 are not scales; no float() of a huge int).
    limit = LIMITS["scale"]
    if not limit.allows(scale) or scale <= 0:
        shown = shorten(scale) if isinstance(scale, int) and scale.bit_length() > 128 else scale
        if isinstance(scale, numbers.Real) and not isinstance(scale, (bool, int, float)) \
                and not math.isnan(scale):
            # (a NumPy float32 or int64: a number, but Triton binds only Python numbers as scalar arguments)
            kind = f"{type(scale).__module__}.{type(scale).__name__}"
            problem = f"a {kind}, not a Python float: the kernel needs a positive float"
        elif isinstance(scale, bool) or not isinstance(scale, (int, float)) or (isinstance(scale, float)
                                                                                  and math.isnan(scale)):
            problem = "not a number: the kernel needs a positive float"
        elif scale <= 0:
            problem = "not positive: the kernel needs a positive float"
        else:  # inf, 1e300, 10**400
            problem = f"above {limit.maximum_text}, the largest scale docs/limits.md allows"
        return Finding({"value": shown, "problem": problem, "expected": expected},
                       [f"pass `scale={expected}` (head_k_dim ** -0.5)" if ctx.K else "pass head_k_dim ** -0.5"],
                       argument="scale")
    return None


# The arguments `out` must not share memory with (GDR246; `hotpath.out_overlaps` tests the same per call).
OUT_MUST_NOT_OVERLAP = ("mixed_qkv", "a", "b", "A_log", "dt_bias", "initial_state", "ssm_state_indices")


@rule(
    "GDR246", "out-aliases-inputs",
    summary="`out` shares memory with an input",
    message="`out` overlaps `{other}` in memory",
    explanation=(
        "Programs read `mixed_qkv`, `a`, `b` and the pool while other programs write `out`, so overlapping "
        "memory gives order-dependent results (docs/kernel-contract.md U17)."
    ),
    fixes=("allocate `out` separately",),
    engines="sglang 0.5.23 and vLLM.",
    example=CallExample({"out": tensor(4, 1, 4, 8, storage="mixed_qkv")}, "`out` inside the `mixed_qkv` buffer"),
    by_address=True,
)
def out_aliasing(ctx: CallContext) -> Finding | list[Finding] | None:
    out = ctx.call.out
    findings = []
    for name in OUT_MUST_NOT_OVERLAP:
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
    engines="sglang 0.5.23 (padding convention).",
    example=CallExample({"ssm_state_indices": tensor(4, values=(0, 1, 5, 2))}, "a live request in slot 0"),
)
def slot_zero(ctx: CallContext) -> Finding | list[Finding] | None:
    spec = ctx.call.ssm_state_indices
    if not ctx.profile.reserved_slot_zero or spec.values is None or spec.ndim != 1:
        return None
    live_end = len(spec.values) - padding_rows(spec.values)
    rows = [row for row, v in enumerate(spec.values[:live_end]) if int(v) == 0]
    if ctx.origin == "direct":
        # The kernel and the wrapper accept slot 0; only the engine's allocator reserves it. A pool of the
        # caller's own (the upstream kernel tests index from 0) gets one note, not an error per row.
        return Finding({"row": rows[0]}, [], [
            "a note only: slot 0 is reserved by sglang's pool allocator, not by the kernel; a call on a pool of "
            "your own may use it, while an engine's call (`origin=\"engine\"`) must not"],
            argument="ssm_state_indices", severity="info") if rows else None
    fix = "give this request a slot from 1..size, or mark a padding row with -1"
    return _count_unlisted([Finding({"row": row}, [fix], argument="ssm_state_indices") for row in rows[:LISTED_ROWS]],
                           len(rows), "in slot 0")


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
    example=CallExample({"mixed_qkv": tensor(4, 1056), "initial_state": tensor(8, 4, 8, 256), "scale": 256 ** -0.5},
                        "K=256"),
)
def register_spills(ctx: CallContext) -> Finding | None:
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
        "against 0.945 with bf16 on Qwen3-Next (docs/kernel-contract.md U8). A warning for an engine's call "
        "(deployment checks, recordings, captures, the guard); a direct call on a pool of the caller's own, as the "
        "engines' kernel tests make, gets it as a note."
    ),
    fixes=("keep the SSM state in float32 (sglang `--mamba-ssm-dtype float32`, vLLM `--mamba-ssm-cache-dtype "
           "float32`)",),
    engines="sglang 0.5.23 and vLLM.",
    example=CallExample({"initial_state": tensor(8, 4, 8, 8, dtype="bfloat16")}, "a bf16 state pool"),
)
def state_precision(ctx: CallContext) -> Finding | None:
    dtype = ctx.state.dtype
    if dtype not in ("bfloat16", "float16"):
        return None
    fix = f"keep the SSM state in float32 (`{ctx.profile.state_dtype_fix()}`) if memory allows (2x the state bytes)"
    if ctx.origin == "direct":  # a pool of the caller's own: its dtype is a choice the kernel supports
        return Finding({"dtype": dtype}, [fix], [
            "a note only: the kernel takes a 16-bit state; in an engine's call (`origin=\"engine\"`) it is the "
            "deployment's state dtype, a warning"], argument="initial_state", severity="info")
    return Finding({"dtype": dtype}, [fix], argument="initial_state")


@rule(
    "GDR250", "qk-l2norm-disabled", severity="warning",
    summary="`use_qk_l2norm_in_kernel` is False",
    message="`use_qk_l2norm_in_kernel` is False, while sglang and vLLM decode these models with True",
    explanation=(
        "The flag defaults to False but the engines pass True for Qwen3-Next/3.5 and Kimi-Linear. The wrong "
        "value gives silently wrong output: magnitude about 7.6 instead of 0.05 in one test "
        "(docs/kernel-contract.md U15). A warning for an engine's call; a direct call, which has no model behind "
        "it, gets it as a note."
    ),
    fixes=("pass `use_qk_l2norm_in_kernel=True` unless the model normalises q and k itself",),
    engines="sglang 0.5.23 and vLLM.",
    example=CallExample({"use_qk_l2norm_in_kernel": False}),
)
def l2norm_flag(ctx: CallContext) -> Finding | None:
    if ctx.call.use_qk_l2norm_in_kernel:
        return None
    if ctx.origin == "direct":  # no model behind the call: the flag's default is the caller's to choose
        return Finding(notes=["a note only: a direct call may normalise q and k itself; an engine's call "
                              "(`origin=\"engine\"`) of these models must pass True"],
                       argument="mixed_qkv", severity="info")
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
    example=CallExample({}, device="cpu"),
)
def cpu_tensors(ctx: CallContext) -> Finding | None:
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
    example=CallExample({"mixed_qkv": tensor(0, 64), "a": tensor(0, 4), "b": tensor(0, 4), "out": tensor(0, 1, 4, 8),
                         "ssm_state_indices": tensor(0, values=())}, "B=0"),
)
def empty_batch(ctx: CallContext) -> Finding | None:
    return Finding(argument="mixed_qkv") if ctx.B == 0 else None


# Per engine, its first profile that keeps beta in fp32 (what a GDR253 fix names).
_FP32_BETA = {p.name: p for p in reversed(PROFILES) if p.gdn_beta_rounding is None}


@rule(
    "GDR253", "beta-rounded-to-gate-dtype", severity="warning",
    summary="the engine rounds beta to `b`'s dtype: the state drifts more the longer the context",
    message="{engine} rounds beta = sigmoid(b) to {dtype} before the update: the state drifts from fp32 beta, "
            "more with longer contexts",
    explanation=(
        "The sglang 0.5.23 GDN packed decode casts sigmoid(b) to `b.dtype` and back to fp32, so a bf16 `b` "
        "perturbs beta by up to 2^-8 relative (bf16's unit roundoff) on every token. Beta scales the update of "
        "the persistent state, which is read and written back each step, so the rounding enters the state once "
        "per token. "
        "The drift from an fp32-beta reference is not bounded by one step's error: the engines' own threads "
        "found it growing with context length (sglang issue #38975; vllm-project/vllm#53877 and "
        "flagos-ai/vllm-plugin-FL#385 on long contexts), and vLLM moved beta to fp32 in PR #53877 (first "
        "released in 0.29). A short random test can look flat (docs/kernel-contract.md §6.3: about 1.5e-3 "
        "over 256 steps with quickly decaying gates); a long context with slowly decaying heads can "
        "accumulate more. vLLM 0.28 rounds the same way as sglang 0.5.23 (§6.1, §8). A warning where the "
        "selected engine profile (`--engine`) rounds beta; nothing where it keeps beta in fp32 (vLLM 0.29) or "
        "`b` is already fp32."
    ),
    fixes=("vLLM: use 0.29 or later (`--engine vllm@0.29`), which keeps beta in fp32",
           "sglang 0.5.23: no setting changes it (sgl-project/sglang#38977, open, drops the rounding); a direct "
           "caller of the kernel can pass `b` in float32: the wrapper rounds beta to `b`'s dtype",
           "compare against a reference with the same beta semantics, and test quality at the context "
           "lengths you serve"),
    engines="sglang 0.5.23 and vLLM 0.28, GDN only.",
    example=CallExample({"b": tensor(4, 4, dtype="bfloat16")}, "a bf16 `b`, rounded by sglang 0.5.23"),
)
def beta_rounding(ctx: CallContext) -> Finding | None:
    dtype = ctx.call.b.dtype
    profile = ctx.profile
    if profile.decode_of(ctx.variant).beta_rounding is None or dtype in ("float32", "float64"):
        return None
    fixes = [f"no {profile.label} setting changes it (the layer passes `b` in the model dtype); a direct caller "
             f"can pass `b` in float32, which keeps beta exact"]
    fp32 = _FP32_BETA.get(profile.name)
    if fp32 is not None:
        fixes.insert(0, f"{fp32.label} and later keep beta in fp32 (`--engine {fp32.spec}`)")
    return Finding({"engine": profile.label, "dtype": dtype}, fixes=fixes, argument="b")


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
    example=CallExample({"lower_bound": 1.0}, variant="kda"),
)
def lower_bound_sign(ctx: CallContext) -> Finding | None:
    bound = ctx.call.lower_bound
    if not variant_spec(ctx.variant).has_lower_bound or bound is None:
        return None
    if not LIMITS["lower_bound"].allows(bound) or bound < 0:  # not a finite number: GDR257 (rules_guard)
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
    example=CallExample({"scale": 0.5}, "K**-0.5 is 0.354 for K=8"),
)
def scale_convention(ctx: CallContext) -> Finding | None:
    scale = ctx.call.scale
    if not ctx.K or not LIMITS["scale"].allows(scale) \
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
    example=CallExample({"mixed_qkv": tensor(4, 32), "initial_state": tensor(8, 4, 0, 8), "out": tensor(4, 1, 4, 0)},
                        "a pool with V=0"),
)
def value_head_dim_zero(ctx: CallContext) -> Finding | None:
    if ctx.V != 0 or not ctx.K:
        return None
    return Finding({"shape": tuple(ctx.state.shape)},
                   [f"the pool's V axis (dim -2) is 0: allocate [S, {ctx.HV}, head_v_dim, {ctx.K}]"],
                   argument="initial_state")


# The arguments the kernels compute with (not the slot indices), and what the kernel does with each.
FLOAT_ARGUMENTS = {"mixed_qkv": "reads", "a": "reads", "b": "reads", "A_log": "reads", "dt_bias": "reads",
                   "initial_state": "reads and writes", "out": "writes"}
# What the kernels compute with: fp8 is a float too, but carries no scale, as int8 does not.
COMPUTE_DTYPES = frozenset({"float64", "float32", "float16", "bfloat16"})


def _float_fix(name: str, activation: str, state_fix: str) -> str:
    if name in ("A_log", "dt_bias"):
        return f"keep `{name}` a floating-point parameter (`{name}.float()`)"
    if name == "initial_state":
        return f"allocate the state pool in float32 (`{state_fix}`)"
    if name == "out":
        return f"allocate `out` as {activation}, the dtype of the activations"
    return f"pass `{name}` as {activation}, the dtype of the activations (dequantize it before the call)"


@rule(
    "GDR258", "non-float-tensors",
    summary="a tensor the kernel computes with is not fp64, fp32, fp16 or bf16",
    message="`{argument}` has dtype {dtype}; the kernel {use} it as a plain floating-point number",
    explanation=(
        "Neither wrapper checks a dtype. The kernel widens every value it loads to fp32 and casts every result "
        "to the destination's dtype when it stores it: an integer, bool or fp8 input is read as its raw values "
        "(an int8 or fp8 `mixed_qkv` without its quantization scale, bool as 0/1), and a result stored into an "
        "integer `out` or state pool is truncated (a bool one holds only 0/1; an fp8 one keeps 2-3 bits of "
        "mantissa), so the state is corrupted from the first step. A complex tensor has no Triton type: the "
        "launch fails while compiling (docs/kernel-contract.md U8, U9)."
    ),
    fixes=("pass bf16 (or fp16/fp32) activations, floating-point `A_log` and `dt_bias`, and a float32 state pool",),
    engines="sglang 0.5.23 and vLLM (no dtype check in either wrapper).",
    example=CallExample({"out": tensor(4, 1, 4, 8, dtype="int32")}, "an int32 `out`"),
)
def non_float_tensors(ctx: CallContext) -> list[Finding] | None:
    c = ctx.call
    activation = c.mixed_qkv.dtype if c.mixed_qkv.dtype in COMPUTE_DTYPES else "bfloat16"
    findings = [Finding({"argument": name, "dtype": dtype, "use": use},
                        [_float_fix(name, activation, ctx.profile.state_dtype_fix())], argument=name)
                for name, use in FLOAT_ARGUMENTS.items()
                if (dtype := getattr(c, name).dtype) not in COMPUTE_DTYPES]
    return findings or None
