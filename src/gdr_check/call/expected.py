"""Per-rank shapes: the packed-decode call each engine makes for one layer, its state pools, and their bytes.

Everything here is arithmetic on a complete model description and the engine settings; callers check TP
divisibility first (`per_rank_heads` returns None when TP does not split the heads evenly).
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from ..base.records import dataclass
from ..base.tensor_spec import TensorSpec, contiguous_strides
from ..base.variants import variant_spec
from ..deployment.settings import EngineSettings
from ..engines.profiles import EngineProfile
from ..models.description import LinearAttentionModel
from .packed_call import PackedDecodeCall

DEVICE = "cuda:0"


@dataclass(frozen=True)
class RankHeads:
    """Head counts and widths on one rank."""

    H: int  # key heads per rank
    HV: int  # value heads per rank
    K: int
    V: int
    W: int
    width: int  # the `mixed_qkv` width, which is also the per-rank conv channel count


def per_rank_heads(model: LinearAttentionModel, tp: int) -> RankHeads | None:
    """H/tp, HV/tp and the `mixed_qkv` width per rank, or None when tp does not divide H and HV."""
    H, HV, K, V, W = model.num_k_heads, model.num_v_heads, model.head_k_dim, model.head_v_dim, model.conv_kernel
    if not (H and HV and K and V and W) or H % tp or HV % tp:
        return None
    H_l, HV_l = H // tp, HV // tp
    return RankHeads(H=H_l, HV=HV_l, K=K, V=V, W=W, width=2 * H_l * K + HV_l * V)


def expected_call(model: LinearAttentionModel, settings: EngineSettings) -> PackedDecodeCall | None:
    """The call the engine makes for one linear-attention layer on one rank, as TensorSpecs.

    Live requests hold slots 1..B (slot 0 is sglang's dummy slot and vLLM's null block). sglang passes the
    layer's view of its stacked pool, [S, HV_l, V, K], whose inner block is dense; vLLM passes its per-layer
    pool, which has the same strides unless a page is padded.
    """
    heads = per_rank_heads(model, settings.deployment.tp)
    if heads is None:
        return None
    B, S = settings.deployment.batch, settings.num_slots
    act = settings.activation_dtype
    gate_width = dt_bias_numel = variant_spec(model.kind).gate_width(heads.HV, heads.K)
    return PackedDecodeCall(
        mixed_qkv=TensorSpec.of((B, heads.width), act, DEVICE),
        a=TensorSpec.of((B, gate_width), act, DEVICE),
        b=TensorSpec.of((B, heads.HV), act, DEVICE),
        A_log=TensorSpec.of((heads.HV,), settings.A_log_dtype, DEVICE),
        dt_bias=TensorSpec.of((dt_bias_numel,), settings.dt_bias_dtype, DEVICE),
        scale=heads.K ** -0.5,
        initial_state=TensorSpec.of((S, heads.HV, heads.V, heads.K), settings.state_dtype, DEVICE),
        out=TensorSpec.of((B, 1, heads.HV, heads.V), act, DEVICE),
        ssm_state_indices=TensorSpec.of((B,), "int32", DEVICE, values=range(1, B + 1)),
        use_qk_l2norm_in_kernel=True,
        lower_bound=None,
        variant=model.kind,
    )


def _conv_shape(model: LinearAttentionModel, heads: RankHeads, profile: EngineProfile, drafts: int = 0
                ) -> tuple[int, int]:
    # sglang GDN keeps the conv state channel-first (conv_dim/tp, W-1); sglang KDA and vLLM window-first, vLLM's
    # window W-1 plus the speculative draft tokens.
    window = heads.W - 1 + (drafts if profile.conv_window_holds_drafts else 0)
    if profile.decode_of(model.kind).conv_channel_first:
        return (heads.width, window)
    return (window, heads.width)


def engine_pools(model: LinearAttentionModel, settings: EngineSettings) -> dict[str, TensorSpec]:
    """The engine's state tensors on one rank.

    sglang: one stacked tensor per kind over all linear layers, `ssm_pool` [L_lin, S, HV_l, V, K] and
    `conv_pool` [L_lin, S, *conv]; `initial_state` is the first layer's view. vLLM: one `ssm_state` and one
    `conv_state` per linear layer (every layer alike).
    """
    heads = per_rank_heads(model, settings.deployment.tp)
    if heads is None:
        return {}
    L, S = len(model.linear_layers), settings.num_slots
    state = (heads.HV, heads.V, heads.K)
    profile = settings.deployment.profile
    conv = _conv_shape(model, heads, profile, settings.deployment.speculative_tokens)
    if profile.stacked_state_pool:
        pool_shape = (L, S, *state)
        return {
            "ssm_pool": TensorSpec.of(pool_shape, settings.state_dtype, DEVICE),
            "conv_pool": TensorSpec.of((L, S, *conv), settings.conv_dtype, DEVICE),
            "initial_state": TensorSpec.of((S, *state), settings.state_dtype, DEVICE,
                                           stride=contiguous_strides(pool_shape)[1:]),
        }
    return {
        "ssm_state": TensorSpec.of((S, *state), settings.state_dtype, DEVICE),
        "conv_state": TensorSpec.of((S, *conv), settings.conv_dtype, DEVICE),
    }


@dataclass(frozen=True)
class StateMemory:
    """Linear-attention state bytes on one rank."""

    linear_layers: int
    conv_bytes_per_layer: int  # one slot, one layer
    ssm_bytes_per_layer: int
    bytes_per_request: int  # one slot over every linear layer: what each live request holds
    num_slots: int
    pool_bytes: int  # the whole pool: num_slots rows
    budget: int | None = None
    requests_that_fit: int | None = None  # slots the budget holds, minus the reserved row 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def state_memory(model: LinearAttentionModel, settings: EngineSettings) -> StateMemory | None:
    heads = per_rank_heads(model, settings.deployment.tp)
    if heads is None:
        return None
    L = len(model.linear_layers)
    deployment = settings.deployment
    window = _conv_shape(model, heads, deployment.profile, deployment.speculative_tokens)
    conv = window[0] * window[1] * settings.conv_itemsize
    ssm = heads.HV * heads.V * heads.K * settings.state_itemsize
    per_request = (conv + ssm) * L
    budget = deployment.gpu_memory
    fit = max(budget // per_request - 1, 0) if budget is not None and per_request else None
    return StateMemory(
        linear_layers=L, conv_bytes_per_layer=conv, ssm_bytes_per_layer=ssm, bytes_per_request=per_request,
        num_slots=settings.num_slots, pool_bytes=per_request * settings.num_slots, budget=budget,
        requests_that_fit=fit,
    )
