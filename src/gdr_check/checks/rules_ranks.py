"""GDR331-GDR333: what `gdr-check dry-run --ranks all` finds when every TP rank runs its slice of one layer.

Each rank slices the full layer with the engine's sharding plan (`gdr_check.models.sharding`), runs its kernel,
and rank 0 compares the gathered `out` and state with the float64 reference of the unsharded layer.
"""

from __future__ import annotations

from typing import Any

from ..base.registry import Violation, declare
from .examples import RanksExample

RANKS = "dryrun"


def _per_rank(rank: int, error: float) -> dict[str, Any]:
    return {"rank": rank, "heads": [2 * rank, 2 * rank + 1], "out_error": error, "state_error": 0.0,
            "nan_out": 0, "nan_state": 0, "out_matches": [[2 * rank], [2 * rank + 1]] if error == 0 else [[], []]}


def _passing_run() -> dict[str, Any]:
    """Rank 0's result at tp=2 (HV=4) where both ranks agree with the unsharded layer."""
    check = {"passed": True, "error": 0.0, "tolerance": 1e-05, "head": 0}
    return {"layer": {"HV": 4}, "kernels": {"builtin": {}}, "misshards": [],
            "steps": [{"step": 1, "kernels": {"builtin": {"output": check, "state": check,
                                                          "per_rank": [_per_rank(0, 0.0), _per_rank(1, 0.0)]}}}]}


def _failing_step() -> dict[str, Any]:
    """Rank 1 computes value heads 2-3 from another rank's inputs: `out` misses by 0.8 at head 3."""
    result = _passing_run()
    result["steps"][0]["kernels"]["builtin"]["output"] = {"passed": False, "error": 0.8, "tolerance": 0.01, "head": 3}
    result["steps"][0]["kernels"]["builtin"]["per_rank"][1] = _per_rank(1, 0.8)
    return result

class ShardedMismatch(Violation):
    rule = declare(
        "GDR331", "sharded-layer-mismatches", scope=RANKS,
        summary="the ranks' gathered result differs from the unsharded layer",
        message="the {kernel} kernel on {tp} ranks differs from the unsharded float64 reference at step {step}: "
                "`{tensor}` error {error} (tolerance {tolerance}), worst at value head {head}, computed by rank "
                "{rank}; {matches}",
        explanation=(
            "Every rank runs its slice of the layer; the outputs and states are gathered in rank order along the "
            "value-head axis and compared with the float64 decode step of the whole layer. A rank whose heads match "
            "no reference head computed with inputs from more than one head (a gate, `A_log` or q/k/v columns that "
            "belong to other heads than its pool); a rank whose heads match other reference heads received another "
            "rank's block of every input."
        ),
        causes=("a tensor sliced with another head block than the state pool", "an unsliced `A_log` or `dt_bias`",
                "KDA's per-key-channel gate sliced by HV instead of HV*K",
                "q/k/v columns cut from the unsplit projection instead of per part"),
        fixes=("see the GDR332 diagnostics for the tensor and rank",
               "compare the loader's weight slicing with the sharding plan in the dry-run report"),
        example=RanksExample(_failing_step(), note="rank 1's `out` heads match no reference head"),
    )

    kernel: object
    tp: object
    step: object
    tensor: object
    error: object
    tolerance: object
    head: object
    rank: object
    matches: object

class MisshardedTensor(Violation):
    rule = declare(
        "GDR332", "missharded-tensors", scope=RANKS,
        summary="a rank received another part of a tensor than the engine's sharding gives it",
        message="mis-sharded `{tensor}` on rank {rank}: {detail}",
        explanation=(
            "The engine shards each tensor of a linear-attention layer in value-head blocks that line up with the "
            "rank's block of the state pool: q/k/v per part (Qwen3-Next: per key-head group of the interleaved "
            "projection), `a`, `b`, `A_log` and `dt_bias` per value head, KDA's gate and `dt_bias` per value head "
            "with all K channels. This names what the rank received, in heads of the unsharded tensor."
        ),
        causes=("a weight loader that slices with the wrong rank or stride", "a parameter left unsliced"),
        fixes=("slice the tensor with the same value-head block as the rank's state pool",),
        example=RanksExample({**_passing_run(), "misshards": [
            {"tensor": "a", "rank": 1,
             "detail": "received value heads 0-1 of `a` but holds value heads 2-3 of the pool"}]}),
    )

    tensor: object
    rank: object
    detail: object

class FailedRank(Violation):
    rule = declare(
        "GDR333", "failed-ranks", scope=RANKS,
        summary="a rank failed: it raised, crashed, timed out or returned NaN",
        message="rank {rank} of {tp} {how}",
        explanation=(
            "Each rank is its own process. When one ends without a result the others are blocked in a collective: "
            "they are stopped after a short grace period, so no process group is left behind. A NaN in a rank's "
            "`out` or state is reported with the rank that produced it."
        ),
        causes=("a kernel launch error or device fault on that rank", "a rank that never reaches the collective"),
        fixes=("re-run with GDR_CHECK_DEBUG=1 to see the rank's stderr",),
        example=RanksExample(None, failure={"exception": "RuntimeError",
                                            "message": "CUDA error: an illegal memory access was encountered"}),
    )

    rank: object
    tp: object
    how: object
