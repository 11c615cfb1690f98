"""Classic mis-shardings, the way a buggy loader slices (tests only): `inject(plan, kind)` is `plan` with one of
them. tests/test_ranks.py names each directly and injects them into real rank processes (child_faults.py)."""

from __future__ import annotations

from dataclasses import replace

from gdr_check.models.sharding import QKV_TENSOR, ShardingPlan

MISSHARDINGS: tuple[str, ...] = ("a-head-block", "unsliced-A_log", "kda-gate-by-hv", "unsplit-qkv")


def _with_columns(plan: ShardingPlan, tensor: str, columns: list[tuple[int, ...]]) -> ShardingPlan:
    tensors = dict(plan.tensors)
    tensors[tensor] = replace(plan.tensors[tensor], columns=tuple(columns))
    return replace(plan, tensors=tensors)


def inject(plan: ShardingPlan, kind: str) -> ShardingPlan:
    """`plan` with one classic mis-sharding."""
    d, tp = plan.dims, plan.tp
    if kind == "a-head-block":  # the last rank takes rank 0's block of `a`
        columns = list(plan.tensors["a"].columns)
        columns[-1] = columns[0]
        return _with_columns(plan, "a", columns)
    if kind == "unsliced-A_log":
        return _with_columns(plan, "A_log", [tuple(range(d.HV))] * tp)
    if kind == "kda-gate-by-hv":  # the block offset counted in heads, not in heads*K columns
        HV_l = d.HV // tp
        columns = [tuple(range(r * HV_l, r * HV_l + HV_l * d.K)) for r in range(tp)]
        return _with_columns(_with_columns(plan, "a", columns), "dt_bias", columns)
    if kind == "unsplit-qkv":  # contiguous blocks of the whole [q|k|v] instead of per part
        canonical = plan.unsharded().tensors[QKV_TENSOR].columns[0]
        width = len(canonical) // tp
        return _with_columns(plan, QKV_TENSOR, [canonical[r * width:(r + 1) * width] for r in range(tp)])
    raise ValueError(f"unknown mis-sharding {kind!r} (one of {', '.join(MISSHARDINGS)})")
