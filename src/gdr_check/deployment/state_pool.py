"""sglang's linear-attention state pool as sglang sizes it: one implementation, read by `check` (GDR135-137) and
by `launch` (`launch_memory.plan_sglang`).

Per release (the profile's `extra_buffer_architectures`, `no_buffer_refuses_overlap`, `pool_cap_warns`); the
formulas below are sglang 0.5.23's, unchanged since 0.5.9 where not said:

- the strategy: `auto` resolves to extra_buffer when the overlap schedule or paging is on, the architecture is one
  the release lists and the linear-attention backend is Triton; otherwise to no_buffer, turning the overlap schedule
  off (`srt/arg_groups/overrides.py:438-487`; 0.5.9-0.5.13: always no_buffer, `server_args.py`
  `mamba_scheduler_strategy == "auto"`). An explicit no_buffer with the overlap schedule on stops start-up from
  0.5.14 (`srt/arg_groups/mamba_hook.py:156-163`); the radix cache off leaves no strategy.
- the slots counted per running request, `_calculate_mamba_ratio` (`srt/mem_cache/kv_cache_configurator.py:3062-3088`
  with the constants at `:227-229`): 1 with the radix cache off, else 3 plus the extra_buffer tracking slots
  (`srt/mem_cache/allocation_sizing.py:11-19`: 2 with the overlap schedule, 1 without it or lazily);
- the pool a state budget gives, `max_mamba_cache_size` K (`kv_cache_configurator.py:3345-3386`): (budget - slot) //
  slot, or with D speculative draft tokens (budget - slot x (1 + D)) // (slot x (1 + D / ratio)); the pool has K + 1
  rows (row 0 padding); K <= 0 stops start-up (`:3392-3403`);
- the cap on running requests, `resolve_max_num_reqs` (`:3119-3160`): at most K // ratio; below the requested
  number a warning from 0.5.17 (silent before), and at 0 start-up stops.
"""

from __future__ import annotations

from ..base.records import dataclass
from ..engines.profiles import EngineProfile

# `_calculate_mamba_ratio`'s base: the slots counted per running request with the radix cache on.
BASE_COUNTED_SLOTS = 3

# sglang's words, with the numbers filled in (kv_cache_configurator.py:3140-3149, :3153-3160, :3393-3403).
CAP_WARNING = ("max_running_requests is capped to {cap} by the mamba state cache (max_mamba_cache_size={pool}, "
               "{ratio} state slots per request).")
NO_REQUEST_ERROR = ("RuntimeError: Hybrid (mamba/linear-attention) state cache is too small to serve any requests. "
                    "max_mamba_cache_size={pool}, mamba_ratio={ratio}, resulting max_num_reqs={cap}.")
NO_POOL_ERROR = ("RuntimeError: Not enough GPU memory for hybrid (mamba/linear-attention) state cache. Computed "
                 "max_mamba_cache_size={pool}")
NO_BUFFER_OVERLAP_ERROR = ("AssertionError: no_buffer do not support overlap schedule. Try to set "
                           "disable_overlap_schedule=True.")


def tracking_slots(strategy: str, *, overlap: bool = True) -> int:
    """sglang's `get_mamba_tracking_slots`: the ping-pong slots a request holds beside its own under extra_buffer,
    2 with the overlap schedule, 1 without it or lazily (`extra_buffer_lazy`)."""
    if not strategy.startswith("extra_buffer"):
        return 0
    if strategy == "extra_buffer_lazy":
        return 1
    return 2 if overlap else 1


def counted_slots(strategy: str, *, overlap: bool = True, radix_cache: bool = True) -> int:
    """sglang's `_calculate_mamba_ratio`: the pool slots counted per running request when it caps them."""
    if not radix_cache:
        return 1
    return BASE_COUNTED_SLOTS + tracking_slots(strategy, overlap=overlap)


@dataclass(frozen=True)
class PoolStrategy:
    """The strategy sglang runs a model's state pool with, after `auto` is resolved, and what it counts."""

    requested: str  # as given: auto, no_buffer, extra_buffer, extra_buffer_lazy
    strategy: str  # resolved; "none" with the radix cache off or an engine whose strategies are not modelled
    overlap: bool  # the overlap schedule after resolution (auto -> no_buffer turns it off)
    radix_cache: bool
    reason: str
    modelled: bool = True  # False: the engine's pool strategies are not modelled (one slot per request)
    refusal: str | None = None  # the engine's words where this combination stops start-up

    @property
    def tracking_slots(self) -> int:
        return tracking_slots(self.strategy, overlap=self.overlap) if self.modelled else 0

    @property
    def held_slots(self) -> int:
        """The slots a running request holds at once: its own and its ping-pong slots."""
        return 1 + self.tracking_slots

    @property
    def counted_slots(self) -> int:
        """The slots counted per running request when the pool caps them (1 where not modelled)."""
        if not self.modelled:
            return 1
        return counted_slots(self.strategy, overlap=self.overlap, radix_cache=self.radix_cache)

    @property
    def counting(self) -> str:
        """Why `counted_slots`, in a few words."""
        if not self.modelled:
            return "one slot per request"
        if not self.radix_cache:
            return "radix cache off: one slot per request"
        text = f"{BASE_COUNTED_SLOTS} for the radix cache"
        if self.tracking_slots:
            text += f" + {self.tracking_slots} ping-pong"
        text += f": {self.strategy}"
        if self.strategy == "extra_buffer":
            text += " with the overlap schedule" if self.overlap else " without the overlap schedule"
        return text


def resolve_strategy(profile: EngineProfile, architecture: str | None, requested: str = "auto", *,
                     overlap: bool = True, radix_cache: bool = True, page_size: int = 1,
                     backend: str = "triton") -> PoolStrategy:
    """The strategy `profile`'s release runs `architecture` with."""
    if not profile.models_pool_strategies:
        return PoolStrategy(requested, "none", overlap, radix_cache, f"{profile.label}'s pool strategies are not "
                            "modelled", modelled=False)
    if not radix_cache:
        return PoolStrategy(requested, "none", overlap, False, "radix cache off (--disable-radix-cache)")
    if requested == "auto":
        supported = architecture in profile.extra_buffer_architectures and backend == "triton"
        if (overlap or page_size > 1) and supported:
            return PoolStrategy(requested, "extra_buffer", overlap, True,
                                f"auto -> extra_buffer ({profile.label}: {architecture}, Triton backend)")
        why = (f"{profile.label} resolves auto to no_buffer" if not profile.extra_buffer_architectures else
               f"{architecture} has no extra_buffer in {profile.label}" if not supported and backend == "triton" else
               f"the {backend} backend has no extra_buffer" if not supported else "no overlap schedule or paging")
        return PoolStrategy(requested, "no_buffer", False, True, f"auto -> no_buffer ({why}), overlap schedule off")
    if requested == "no_buffer" and overlap:
        if profile.no_buffer_refuses_overlap:
            return PoolStrategy(requested, "no_buffer", overlap, True, "set", refusal=NO_BUFFER_OVERLAP_ERROR)
        return PoolStrategy(requested, "no_buffer", False, True, "set; sglang turns the overlap schedule off")
    return PoolStrategy(requested, requested, overlap, True, "set")


def pool_from_budget(budget: float, slot_bytes: int, *, ratio: int, draft_tokens: int = 0) -> int:
    """sglang's `max_mamba_cache_size` K from a state budget in bytes (`kv_cache_configurator.py:3352-3386`), in
    its floating-point arithmetic; may be <= 0."""
    if slot_bytes <= 0:
        return 0
    if draft_tokens:
        D = draft_tokens
        return int((float(budget) - slot_bytes * (1 + D)) // (slot_bytes * (1 + D / ratio)))
    return int((float(budget) - slot_bytes) // slot_bytes)


def budget_for(pool: int, slot_bytes: int, *, ratio: int, draft_tokens: int = 0) -> int:
    """The smallest state budget in bytes that gives a pool of at least `pool` (K)."""
    D = draft_tokens
    # K = (b - s(1+D)) / (s(1 + D/r)): b = K s (1 + D/r) + s (1 + D) = s (K (r + D) / r + 1 + D)
    need = -(-(slot_bytes * (pool * (ratio + D) + ratio * (1 + D))) // ratio)
    while pool_from_budget(need, slot_bytes, ratio=ratio, draft_tokens=D) < pool:
        need += 1
    return need


@dataclass(frozen=True)
class RunningCap:
    """The running requests a pool of `pool` (K) serves at `ratio` counted slots each, against those asked."""

    pool: int  # max_mamba_cache_size K (the pool has K + 1 rows)
    ratio: int
    requested: int

    @property
    def cap(self) -> int:
        return max(self.pool, 0) // self.ratio

    @property
    def served(self) -> int:
        return min(self.cap, self.requested)

    @property
    def capped(self) -> bool:
        return self.cap < self.requested

    @property
    def refusal(self) -> str | None:
        """sglang's words where it stops at start-up: no pool, or a pool that serves no request."""
        if self.pool <= 0:
            return NO_POOL_ERROR.format(pool=self.pool)
        if self.cap <= 0:
            return NO_REQUEST_ERROR.format(pool=self.pool, ratio=self.ratio, cap=self.cap)
        return None

    def warning(self, profile: EngineProfile) -> str:
        """What sglang says when it caps the requests (its own warning from 0.5.17; nothing before)."""
        if profile.pool_cap_warns:
            return "sglang logs: " + CAP_WARNING.format(cap=self.cap, pool=self.pool, ratio=self.ratio)
        return f"{profile.label} caps the running requests at {self.cap} without a warning"

    @property
    def pool_for_request(self) -> int:
        """The smallest pool (K) that serves every request asked."""
        return self.requested * self.ratio
