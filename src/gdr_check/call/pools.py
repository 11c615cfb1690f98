"""The linear-attention state pool of a deployment as sglang sizes it: the slots it counts per running request, the
pool a `--gpu-memory` budget gives, and the running requests that pool serves.

The arithmetic is `deployment.state_pool` (sglang's own formulas, cited there), the same that `gdr-check launch`
runs; this module applies it to a model's per-rank state. A slot is one request's state in every linear-attention
layer (conv window + SSM state). vLLM's pool strategies are not modelled here: one slot per request.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from ..base.records import dataclass
from ..deployment.settings import EngineSettings
from ..deployment.state_pool import RunningCap, budget_for, pool_from_budget
from ..models.description import LinearAttentionModel
from .expected import per_rank_heads


@dataclass(frozen=True)
class PoolPlan:
    """The pool on one rank under the resolved strategy: slots per request, bytes, and what a budget serves."""

    strategy: str  # resolved (sglang's `auto` -> extra_buffer or no_buffer); "none" with the radix cache off
    strategy_reason: str
    counting: str  # why `slots_per_request`, in a few words
    speculative_tokens: int
    tracking_slots: int  # ping-pong slots a request holds beside its own (extra_buffer)
    held_slots: int  # 1 + tracking_slots: what a request holds at once
    slots_per_request: int  # counted per running request when the pool caps them (sglang's mamba ratio)
    slot_bytes: int  # one slot over every linear layer
    speculative_bytes_per_request: int  # the verify state sizing charges per running request: draft tokens x slot
    bytes_per_request: int  # what sizing charges per running request: (counted slots + draft tokens) x slot
    batch: int
    pool_for_batch: int  # the pool (K) that serves the batch: batch x counted slots
    bytes_for_batch: int  # the smallest budget that gives that pool
    reserved_bytes: int  # the padding row of the pool and of the verify state: (1 + draft tokens) x slot
    budget: int | None = None
    pool_size: int | None = None  # K the budget gives (rows K + 1)
    requests_that_fit: int | None = None  # the running requests that pool serves (K // counted slots)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def cap(self) -> RunningCap | None:
        if self.pool_size is None:
            return None
        return RunningCap(self.pool_size, self.slots_per_request, self.batch)


def plan_pool(model: LinearAttentionModel, settings: EngineSettings) -> PoolPlan | None:
    """The pool under the deployment's resolved strategy and draft tokens; None when the heads do not split by TP
    or the engine's strategies are not modelled."""
    deployment, pool = settings.deployment, settings.pool
    heads = per_rank_heads(model, deployment.tp)
    if heads is None or pool is None or not pool.modelled:
        return None
    L = len(model.linear_layers)
    conv_slot = (heads.W - 1) * heads.width * settings.conv_itemsize
    ssm_slot = heads.HV * heads.V * heads.K * settings.state_itemsize
    slot_bytes = L * (conv_slot + ssm_slot)
    ratio, draft = pool.counted_slots, deployment.speculative_tokens
    wanted = deployment.batch * ratio
    budget = deployment.gpu_memory
    size = pool_from_budget(budget, slot_bytes, ratio=ratio, draft_tokens=draft) if budget is not None else None
    return PoolPlan(
        strategy=pool.strategy, strategy_reason=pool.reason, counting=pool.counting, speculative_tokens=draft,
        tracking_slots=pool.tracking_slots, held_slots=pool.held_slots, slots_per_request=ratio,
        slot_bytes=slot_bytes, speculative_bytes_per_request=draft * slot_bytes,
        bytes_per_request=(ratio + draft) * slot_bytes, batch=deployment.batch, pool_for_batch=wanted,
        bytes_for_batch=budget_for(wanted, slot_bytes, ratio=ratio, draft_tokens=draft),
        reserved_bytes=(1 + draft) * slot_bytes,
        budget=budget, pool_size=size,
        requests_that_fit=None if size is None else max(size, 0) // ratio,
    )
