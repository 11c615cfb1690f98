"""GDR331-GDR333: what `gdr-check dry-run --ranks all` finds when every TP rank runs its slice of one layer.

Each rank slices the full layer with the engine's sharding plan (`gdr_check.models.sharding`), runs its kernel,
and rank 0 compares the gathered `out` and state with the float64 reference of the unsharded layer.
"""

from __future__ import annotations

from .registry import declare

RANKS = "dryrun"

SHARDED_MISMATCH = declare(
    "GDR331", "sharded-layer-mismatches", scope=RANKS,
    summary="the ranks' gathered result differs from the unsharded layer",
    message="the {kernel} kernel on {tp} ranks differs from the unsharded float64 reference at step {step}: "
            "`{tensor}` error {error} (tolerance {tolerance}), worst at value head {head}, computed by rank {rank}; "
            "{matches}",
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
    example="gdr-check dry-run ./Qwen3-Next-80B-A3B --tp 4 --ranks all",
)

MISSHARDED_TENSOR = declare(
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
    example="gdr-check dry-run ./Kimi-Linear-48B-A3B --tp 2 --ranks all",
)

FAILED_RANK = declare(
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
    example="gdr-check dry-run ./Qwen3-Next-80B-A3B --tp 2 --ranks all --timeout 600",
)
