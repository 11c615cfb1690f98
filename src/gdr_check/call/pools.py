"""State slots and memory per request under the engine's pool strategy and speculative decoding.

sglang 0.5.23 (`mem_cache/allocation_sizing.py`, `mem_cache/memory_pool.py`):
- every running request holds one slot of the linear-attention state pool (conv window + SSM state in every
  linear layer); `--mamba-radix-cache-strategy extra_buffer` adds ping-pong tracking slots for the prefix
  cache: 2 per request with the overlap scheduler (the default), 1 without it or in lazy mode;
  `get_mamba_tracking_slots`. A request that cannot get them fails the assertion "Not enough space for mamba
  ping pong idx, try to increase --mamba-full-memory-ratio."
- speculative decoding adds, per running request, the verify step's intermediate states: an SSM state per
  draft token ([L, reqs+1, T, HV, V, K]) and the conv windows of the draft tokens, stored deduplicated on CUDA
  (one window of T + W - 2 columns per layer).
vLLM's pool strategies are not modelled here.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from ..deployment.settings import EngineSettings, tracking_slots
from ..models.description import LinearAttentionModel
from .expected import per_rank_heads


@dataclass(frozen=True)
class PoolPlan:
    """Slots and bytes per request on one rank, and how many requests a budget holds."""

    strategy: str
    speculative_tokens: int
    tracking_slots: int  # ping-pong slots per request (extra_buffer)
    slots_per_request: int  # 1 + tracking_slots
    slot_bytes: int  # one slot over every linear layer
    speculative_bytes_per_request: int
    bytes_per_request: int
    batch: int
    bytes_for_batch: int  # the batch, and row 0 of the pool and of the speculative buffers
    reserved_bytes: int  # row 0: one slot, and one request's verify state
    budget: int | None = None
    requests_that_fit: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def plan_pool(model: LinearAttentionModel, settings: EngineSettings) -> PoolPlan | None:
    """The pool under the deployment's strategy and draft tokens; None when the heads do not split by TP."""
    deployment = settings.deployment
    heads = per_rank_heads(model, deployment.tp)
    if heads is None:
        return None
    L = len(model.linear_layers)
    conv_slot = (heads.W - 1) * heads.width * settings.conv_itemsize
    ssm_slot = heads.HV * heads.V * heads.K * settings.state_itemsize
    slot_bytes = L * (conv_slot + ssm_slot)
    tracking = tracking_slots(deployment.mamba_strategy)
    T = deployment.speculative_tokens
    speculative = 0
    if T:
        speculative = L * (T * ssm_slot + heads.width * (T + heads.W - 2) * settings.conv_itemsize)
    per_request = (1 + tracking) * slot_bytes + speculative
    batch = deployment.batch
    # Row 0 of the pool (one slot) and of the speculative buffers (one request's verify state) is reserved.
    reserved = slot_bytes + speculative
    for_batch = per_request * batch + reserved
    budget = deployment.gpu_memory
    fit = max((budget - reserved) // per_request, 0) if budget is not None and per_request else None
    return PoolPlan(
        strategy=deployment.mamba_strategy, speculative_tokens=T, tracking_slots=tracking,
        slots_per_request=1 + tracking, slot_bytes=slot_bytes, speculative_bytes_per_request=speculative,
        bytes_per_request=per_request, batch=batch, bytes_for_batch=for_batch, reserved_bytes=reserved, budget=budget,
        requests_that_fit=fit,
    )
