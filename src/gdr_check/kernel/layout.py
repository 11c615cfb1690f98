"""Facts about the packed-decode call that the kernels, references and benchmark share (no torch/triton)."""

from __future__ import annotations

from typing import TYPE_CHECKING, overload

from ..call.packed_call import Engine
from ..engines.profiles import EngineProfile, profile_for

if TYPE_CHECKING:  # neither runs here: the module stays importable without torch
    import torch

    from ..base.report import Report

# What the kernels and references take as `engine` is `Engine` (call/packed_call.py): a name ("vllm"),
# `name@version`, or a profile.
__all__ = ["Engine", "check_engine", "infer_heads", "next_power_of_2", "raise_contract_errors", "row_is_live"]


def check_engine(engine: Engine) -> EngineProfile:
    """The profile `engine` selects; raises `UnknownEngineError` (a ValueError) for an unknown one."""
    return profile_for(engine)


# Contract rules about the reference kernel's own launch that this package's kernels do not share:
# GDR244 is sglang's (NV, B*HV) grid hitting CUDA's 65535 limit; ours is 1-D and takes any B.
NOT_APPLICABLE_TO_OUR_KERNELS = frozenset({"GDR244"})


def raise_contract_errors(report: Report) -> None:
    """Raise ValueError with the first error of a contract Report, as ``Report.raise_for_errors`` does, but
    skipping the rules in NOT_APPLICABLE_TO_OUR_KERNELS."""
    for diagnostic in report.diagnostics:
        if diagnostic.severity == "error" and diagnostic.code not in NOT_APPLICABLE_TO_OUR_KERNELS:
            raise ValueError(diagnostic.message)


def infer_heads(qkv_width: int, HV: int, V: int, K: int) -> int:
    """H as the reference wrapper infers it: the width is [q (H*K) | k (H*K) | v (HV*V)]."""
    return (qkv_width - HV * V) // 2 // K


@overload
def row_is_live(slot: int, engine: Engine) -> bool: ...
@overload
def row_is_live(slot: torch.Tensor, engine: Engine) -> torch.Tensor: ...
def row_is_live(slot: int | torch.Tensor, engine: Engine) -> bool | torch.Tensor:
    """Whether a row with this slot index is computed: above the engine's skip sentinel (sglang skips
    idx < 0; vLLM also skips its null slot 0). Works elementwise on tensors as well as on ints.
    """
    return slot > profile_for(engine).skip_at_or_below


def next_power_of_2(n: int) -> int:
    return 1 if n <= 1 else 1 << (n - 1).bit_length()
