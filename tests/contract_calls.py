"""Builders of real torch packed-decode calls for the contract tests (GDN and KDA).

Every builder returns a dict of keyword arguments for `check_packed_decode` / `check_kda_packed_decode`
(and for the reference sglang wrappers, which take the same names). Small dims keep CPU tensors cheap;
the Qwen-like builders use the `meta` device, where no memory is allocated.

The "awkward" clean calls use layouts that are valid but easy to get wrong in a checker:
- `mixed_qkv` is a row-strided view `buf[:, :width]` of a wider projection buffer;
- `a`/`b` are contiguous column blocks of one fused buffer (GDN: `ba[:, :HV]`, `ba[:, HV:]`);
- the pool has a padded slot pitch: `backing[:, :HV]` of a wider per-slot page, or `backing[::2]`;
- int32 or int64 indices, -1 padding rows (and, for int64, a stride-2 index view).
"""

from __future__ import annotations

import functools
from typing import Any

import torch

# Small dims: B=4 rows, H=2 key heads, HV=4 value heads (G=2), K=V=8.
B, H, HV, K, V = 4, 2, 4, 8, 8
S = 8  # slots in the pool; sglang hands out 1..S-1, slot 0 is the dummy slot
SCALE = K**-0.5
ACT = torch.bfloat16
# Live slots for the B rows: distinct, in 1..S-1.
SLOTS = (3, 1, 5, 2)

GDN_ARGS = ("mixed_qkv", "a", "b", "A_log", "dt_bias", "scale", "initial_state", "out", "ssm_state_indices",
            "use_qk_l2norm_in_kernel")
KDA_ARGS = GDN_ARGS + ("lower_bound",)


def width(H: int = H, HV: int = HV, K: int = K, V: int = V) -> int:
    """The packed `mixed_qkv` width 2*H*K + HV*V."""
    return 2 * H * K + HV * V


def indices(slots=SLOTS, dtype: torch.dtype = torch.int32, device: str = "cpu") -> torch.Tensor:
    return torch.tensor(list(slots), dtype=dtype, device=device)


def gdn_call(B: int = B, H: int = H, HV: int = HV, K: int = K, V: int = V, S: int = S, *,
             device: str = "cpu", state_dtype: torch.dtype = torch.float32, act_dtype: torch.dtype = ACT,
             index_dtype: torch.dtype = torch.int32, slots=None) -> dict[str, Any]:
    """A plain, valid GDN call: every tensor freshly allocated and contiguous."""
    kw = dict(device=device)
    if slots is None and (B, S) == (4, 8):
        slots = SLOTS
    # Rows cycle through the live slots 1..S-1; built by torch, so a meta call of a billion rows allocates nothing
    # (a Python list of B ints took 22 GB at B = 1431655766).
    slot_of_row = (torch.tensor(list(slots), dtype=index_dtype, device=device) if slots is not None else
                   (torch.arange(B, dtype=index_dtype, device=device) % max(S - 1, 1) + 1).to(index_dtype))
    return dict(
        mixed_qkv=torch.zeros(B, width(H, HV, K, V), dtype=act_dtype, **kw),
        a=torch.zeros(B, HV, dtype=act_dtype, **kw),
        b=torch.zeros(B, HV, dtype=act_dtype, **kw),
        A_log=torch.zeros(HV, dtype=torch.float32, **kw),
        dt_bias=torch.zeros(HV, dtype=torch.float32, **kw),
        scale=K**-0.5 if K else 1.0,
        initial_state=torch.zeros(S, HV, V, K, dtype=state_dtype, **kw),
        out=torch.empty(B, 1, HV, V, dtype=act_dtype, **kw),
        ssm_state_indices=slot_of_row,
        use_qk_l2norm_in_kernel=True,
    )


def kda_call(B: int = B, H: int = HV, HV: int = HV, K: int = K, V: int = V, S: int = S, *,
             device: str = "cpu", state_dtype: torch.dtype = torch.float32, act_dtype: torch.dtype = ACT,
             index_dtype: torch.dtype = torch.int32, slots=None, lower_bound: float | None = None) -> dict[str, Any]:
    """A plain, valid KDA call (Kimi style H = HV): per-channel gate `a` [B, HV*K], `dt_bias` [HV*K]."""
    call = gdn_call(B, H, HV, K, V, S, device=device, state_dtype=state_dtype, act_dtype=act_dtype,
                    index_dtype=index_dtype, slots=slots)
    call["a"] = torch.zeros(B, HV * K, dtype=act_dtype, device=device)
    call["dt_bias"] = torch.zeros(HV * K, dtype=torch.float32, device=device)
    call["lower_bound"] = lower_bound
    return call


def call_for(variant: str, **kwargs: Any) -> dict[str, Any]:
    return gdn_call(**kwargs) if variant == "gdn" else kda_call(**kwargs)


def qwen_gdn_call(B: int = 8, *, device: str = "meta", HV: int = 32, H: int = 16, S: int = 9) -> dict[str, Any]:
    """Qwen3-Next-like shapes at TP 1 (H=16, HV=32, K=V=128), on the meta device by default."""
    return gdn_call(B, H, HV, 128, 128, S, device=device)


def qwen_kda_call(B: int = 8, *, device: str = "meta", HV: int = 32, S: int = 9) -> dict[str, Any]:
    """Kimi-Linear-like shapes (H = HV = 32, K = V = 128), on the meta device by default."""
    return kda_call(B, HV, HV, 128, 128, S, device=device)


# -- awkward but valid layouts -----------------------------------------------------------------------------
def _projection_view(rows: int, cols: int, extra: int, dtype: torch.dtype, device: str) -> torch.Tensor:
    """`buf[:, :cols]` of a [rows, cols + extra] buffer: row stride cols + extra, unit column stride."""
    buf = torch.zeros(rows, cols + extra, dtype=dtype, device=device)
    return buf[:, :cols]


def _padded_pool(S: int, HV: int, V: int, K: int, style: str, dtype: torch.dtype, device: str) -> torch.Tensor:
    if style == "head-page":  # a wider per-slot page, its first HV heads: slot pitch (HV+2)*V*K, inner dense
        return torch.zeros(S, HV + 2, V, K, dtype=dtype, device=device)[:, :HV]
    if style == "every-other":  # backing[::2]: slot pitch 2*HV*V*K
        return torch.zeros(2 * S, HV, V, K, dtype=dtype, device=device)[::2]
    raise ValueError(style)


def awkward_call(variant: str = "gdn", *, index_dtype: torch.dtype = torch.int32, pool: str = "head-page",
                 padding_rows: int = 2, device: str = "cpu", B: int = 6) -> dict[str, Any]:
    """A valid call in awkward layouts: strided projection rows, fused gate buffer split into column blocks,
    page-padded slot pitch, -1 padding rows at the end (and a stride-2 index view for int64)."""
    h = H if variant == "gdn" else HV
    w = width(h, HV, K, V)
    act = ACT
    mixed_qkv = _projection_view(B, w, HV * V, act, device)  # the qkvz buffer, z dropped
    if variant == "gdn":
        ba = torch.zeros(B, 2 * HV, dtype=act, device=device)
        b, a = ba[:, :HV], ba[:, HV:]
        dt_bias = torch.zeros(HV, dtype=torch.float32, device=device)
    else:
        fab = torch.zeros(B, HV * K + HV, dtype=act, device=device)  # [a | b] from one projection
        a, b = fab[:, :HV * K], fab[:, HV * K:]
        dt_bias = torch.zeros(HV * K, dtype=torch.float32, device=device)
    live = [1 + (3 * i) % (S - 1) for i in range(B - padding_rows)]
    slots = live + [-1] * padding_rows
    if index_dtype == torch.int64:  # the upstream test's int64 indices with stride 2
        idx = torch.zeros(2 * B, dtype=torch.int64, device=device)[::2]
        idx.copy_(torch.tensor(slots, dtype=torch.int64))
    else:
        idx = torch.tensor(slots, dtype=index_dtype, device=device)
    call = dict(
        mixed_qkv=mixed_qkv, a=a, b=b,
        A_log=torch.zeros(HV, dtype=torch.float32, device=device),
        dt_bias=dt_bias,
        scale=SCALE,
        initial_state=_padded_pool(S, HV, V, K, pool, torch.float32, device),
        out=torch.empty(B, 1, HV, V, dtype=act, device=device),
        ssm_state_indices=idx,
        use_qk_l2norm_in_kernel=True,
    )
    if variant == "kda":
        call["lower_bound"] = None
    return call


def with_(call: dict[str, Any], **changes: Any) -> dict[str, Any]:
    """A copy of `call` with some arguments replaced."""
    return {**call, **changes}


def check(variant: str, call: dict[str, Any], **options: Any):
    """Run the matching public check on a call dict."""
    from gdr_check import check_kda_packed_decode, check_packed_decode

    if variant == "gdn":
        call = {k: v for k, v in call.items() if k != "lower_bound"}
        return check_packed_decode(**call, **options)
    return check_kda_packed_decode(**call, **options)


# -- bad calls: one mutation per wrapper check (and a few per check), combinable -----------------------------
def _mutations(variant: str) -> dict[str, Any]:
    """name -> function(call) -> {argument: new value}. Each mutation breaks exactly one wrapper check of the
    base call `call_for(variant)` (B=4, HV=4, K=V=8; GDN H=2, KDA H=HV=4)."""
    bf = ACT
    gate = HV if variant == "gdn" else HV * K  # columns of `a`
    dt = HV if variant == "gdn" else HV * K  # elements of `dt_bias`

    def w(c):
        return c["mixed_qkv"].shape[1]

    m: dict[str, Any] = {
        # 1: mixed_qkv rank
        "mixed_qkv-token-axis": lambda c: {"mixed_qkv": c["mixed_qkv"][:, None]},
        "mixed_qkv-1BD": lambda c: {"mixed_qkv": c["mixed_qkv"][None]},
        # 2: mixed_qkv last-dim stride
        "mixed_qkv-transposed": lambda c: {"mixed_qkv": torch.zeros(w(c), B, dtype=bf).t()},
        "mixed_qkv-every-other-column": lambda c: {"mixed_qkv": torch.zeros(B, 2 * w(c), dtype=bf)[:, ::2]},
        # 3: a/b rank
        "a-3d": lambda c: {"a": c["a"][:, :, None]},
        "ab-flat": lambda c: {"a": c["a"].reshape(-1), "b": c["b"].reshape(-1)},
        # 4: a/b last-dim stride
        "b-interleaved": lambda c: {"b": torch.zeros(B, 2 * HV, dtype=bf)[:, 0::2]},
        "a-transposed": lambda c: {"a": torch.zeros(gate, B, dtype=bf).t()},
        # 5: A_log/dt_bias rank
        "A_log-kimi-4d": lambda c: {"A_log": c["A_log"].reshape(1, 1, HV, 1)},
        "dt_bias-column": lambda c: {"dt_bias": c["dt_bias"][:, None]},
        # 6: A_log/dt_bias stride
        "A_log-strided-shard": lambda c: {"A_log": torch.zeros(2 * HV)[1::2]},
        "dt_bias-strided-shard": lambda c: {"dt_bias": torch.zeros(2 * dt)[::2]},
        # 7: indices rank
        "indices-2d": lambda c: {"ssm_state_indices": c["ssm_state_indices"][:, None]},
        # 8: out contiguity
        "out-head-slice": lambda c: {"out": torch.empty(B, 1, 2 * HV, V, dtype=bf)[:, :, :HV]},
        "out-permuted": lambda c: {"out": torch.empty(B, 1, V, HV, dtype=bf).transpose(2, 3)},
        # 9: devices
        "indices-on-meta": lambda c: {"ssm_state_indices": c["ssm_state_indices"].to("meta")},
        "mixed_qkv-on-meta": lambda c: {"mixed_qkv": c["mixed_qkv"].to("meta")},
        # 10: a/b rows
        "a-padded-rows": lambda c: {"a": torch.zeros(B + 2, gate, dtype=bf)},
        "ab-per-token": lambda c: {"a": torch.zeros(2 * B, gate, dtype=bf), "b": torch.zeros(2 * B, HV, dtype=bf)},
        # 11: indices length
        "indices-per-token": lambda c: {"ssm_state_indices": indices((1, 2, 3, 4, 5, 6, 7, -1))},
        "indices-short": lambda c: {"ssm_state_indices": indices((1, 2, 3))},
        # 12: pool rank
        "stacked-pool": lambda c: {"initial_state": torch.zeros(3, S, HV, V, K)},
        "single-slot-state": lambda c: {"initial_state": torch.zeros(HV, V, K)},
        # 13: pool last-dim stride
        "pool-kv-transposed": lambda c: {"initial_state": torch.zeros(S, HV, K, V).transpose(-1, -2)},
        # out shape (GDN 16 / KDA 18)
        "out-no-token-axis": lambda c: {"out": torch.empty(B, HV, V, dtype=bf)},
        "out-transposed-back": lambda c: {"out": torch.empty(1, B, HV, V, dtype=bf)},
        "out-global-heads": lambda c: {"out": torch.empty(B, 1, 2 * HV, V, dtype=bf)},
        # packed width (GDN 17 / KDA 19)
        "mixed_qkv-v-only": lambda c: {"mixed_qkv": torch.zeros(B, HV * V, dtype=bf)},
        "mixed_qkv-odd-width": lambda c: {"mixed_qkv": torch.zeros(B, HV * V + 3, dtype=bf)},
        # Q size (GDN 18 / KDA 20)
        "mixed_qkv-q-not-multiple-of-K": lambda c: {"mixed_qkv": torch.zeros(B, HV * V + 2 * 12, dtype=bf)},
        # head config (GDN 19 / KDA 21)
        "mixed_qkv-H-above-HV": lambda c: {"mixed_qkv": torch.zeros(B, HV * V + 2 * 8 * K, dtype=bf)},
        "mixed_qkv-H-not-dividing-HV": lambda c: {"mixed_qkv": torch.zeros(B, HV * V + 2 * 3 * K, dtype=bf)},
        # K = 0: the wrapper's `q_dim % K` raises ZeroDivisionError
        "pool-K0": lambda c: {"initial_state": torch.zeros(S, HV, V, 0),
                              "mixed_qkv": torch.zeros(B, HV * V + 2 * 8, dtype=bf),
                              **({} if variant == "gdn" else {"a": torch.zeros(B, 0, dtype=bf),
                                                             "dt_bias": torch.zeros(0)})},
    }
    if variant == "gdn":
        m.update({
            # 14: a/b heads
            "gates-tp-sharded": lambda c: {"a": torch.zeros(B, HV // 2, dtype=bf),
                                           "b": torch.zeros(B, HV // 2, dtype=bf)},
            "ba-unsplit": lambda c: {"b": torch.zeros(B, 2 * HV, dtype=bf)},
            # 15: A_log/dt_bias numel
            "A_log-global": lambda c: {"A_log": torch.zeros(2 * HV)},
            "dt_bias-kda-per-channel": lambda c: {"dt_bias": torch.zeros(HV * K)},
        })
    else:
        m.update({
            # 14: a width
            "a-gdn-per-head": lambda c: {"a": torch.zeros(B, HV, dtype=bf)},
            "a-tp-sharded": lambda c: {"a": torch.zeros(B, HV * K // 2, dtype=bf)},
            # 15: b heads
            "b-global": lambda c: {"b": torch.zeros(B, 2 * HV, dtype=bf)},
            # 16: A_log numel
            "A_log-global": lambda c: {"A_log": torch.zeros(2 * HV)},
            # 17: dt_bias numel
            "dt_bias-gdn-per-head": lambda c: {"dt_bias": torch.zeros(HV)},
        })
    return m


def mutation_names(variant: str) -> list[str]:
    return list(_mutations(variant))


def mutated(variant: str, *names: str, base: dict[str, Any] | None = None) -> dict[str, Any]:
    """`call_for(variant)` (or `base`) with the named mutations applied, in order."""
    call = dict(base) if base is not None else call_for(variant)
    table = _mutations(variant)
    for name in names:
        call.update(table[name](call))
    return call


@functools.cache
def touched(variant: str, name: str) -> frozenset[str]:
    """The arguments a mutation replaces."""
    return frozenset(_mutations(variant)[name](call_for(variant)))


# Checks 1-13 are the same in both wrappers (same conditions, order and messages):
# (mutation, code, wrapper position, exact message), shared by the GDN and KDA test tables.
SHARED_WRAPPER_CASES = [
    ("mixed_qkv-token-axis", "GDR201", 1, "`mixed_qkv` must be a 2D tensor (got ndim=3)."),
    ("mixed_qkv-1BD", "GDR201", 1, "`mixed_qkv` must be a 2D tensor (got ndim=3)."),
    ("mixed_qkv-transposed", "GDR202", 2, "`mixed_qkv` must be contiguous in the last dim."),
    ("mixed_qkv-every-other-column", "GDR202", 2, "`mixed_qkv` must be contiguous in the last dim."),
    ("a-3d", "GDR203", 3, "`a` and `b` must be 2D tensors (got a.ndim=3, b.ndim=2)."),
    ("ab-flat", "GDR203", 3, "`a` and `b` must be 2D tensors (got a.ndim=1, b.ndim=1)."),
    ("b-interleaved", "GDR204", 4, "`a`/`b` must be contiguous in the last dim."),
    ("a-transposed", "GDR204", 4, "`a`/`b` must be contiguous in the last dim."),
    ("A_log-kimi-4d", "GDR205", 5, "`A_log`/`dt_bias` must be 1D tensors."),
    ("dt_bias-column", "GDR205", 5, "`A_log`/`dt_bias` must be 1D tensors."),
    ("A_log-strided-shard", "GDR206", 6, "`A_log`/`dt_bias` must be contiguous."),
    ("dt_bias-strided-shard", "GDR206", 6, "`A_log`/`dt_bias` must be contiguous."),
    ("indices-2d", "GDR207", 7, "`ssm_state_indices` must be 1D for packed decode (got ndim=2)."),
    ("out-head-slice", "GDR208", 8, "`out` must be contiguous."),
    ("out-permuted", "GDR208", 8, "`out` must be contiguous."),
    ("indices-on-meta", "GDR209", 9, "All inputs must be on the same device."),
    ("mixed_qkv-on-meta", "GDR209", 9, "All inputs must be on the same device."),
    ("a-padded-rows", "GDR210", 10, "Mismatched batch sizes: mixed_qkv.shape[0]=4, a.shape[0]=6, b.shape[0]=4."),
    ("ab-per-token", "GDR210", 10, "Mismatched batch sizes: mixed_qkv.shape[0]=4, a.shape[0]=8, b.shape[0]=8."),
    ("indices-per-token", "GDR211", 11, "`ssm_state_indices` must have shape [B] (got (8,); expected (4,))."),
    ("indices-short", "GDR211", 11, "`ssm_state_indices` must have shape [B] (got (3,); expected (4,))."),
    ("stacked-pool", "GDR212", 12, "`initial_state` must be a 4D tensor (got ndim=5)."),
    ("single-slot-state", "GDR212", 12, "`initial_state` must be a 4D tensor (got ndim=3)."),
    ("pool-kv-transposed", "GDR213", 13, "`initial_state` must be contiguous in the last dim."),
]
