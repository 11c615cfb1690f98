"""The contract engine: run every kernel-call rule on a packed-decode call and collect all problems at once.

Wrapper-enforced rules come first, in the reference wrapper's order for the variant (sglang 0.5.23), so the
first error's message is exactly what the wrapper would raise; the preconditions the kernel only assumes
follow, by code.

The guard's entry points and the engine loop live with the other speed-ups in `checks.hotpath` (its
docstring says what each buys); they stay the public names of this module.
"""

from __future__ import annotations

from typing import Any

from ..base.tensor_spec import TensorSpec
from ..call.packed_call import PackedDecodeCall, Variant
from .hotpath import _diagnostics, check_kda_packed_decode, check_packed_decode, run_contract

__all__ = ["_diagnostics", "check_kda_packed_decode", "check_packed_decode", "describe_call", "run_contract"]


def describe_call(
    variant: Variant,
    tensors: dict[str, Any],
    scale: Any,
    use_qk_l2norm_in_kernel: bool,
    lower_bound: float | None = None,
    *,
    read_values: bool = True,
) -> PackedDecodeCall:
    """Build a PackedDecodeCall from live tensors (duck-typed) or TensorSpecs."""
    specs = {
        name: TensorSpec.from_tensor(value, read_values=read_values and name == "ssm_state_indices")
        for name, value in tensors.items()
    }
    return PackedDecodeCall(
        scale=scale,
        use_qk_l2norm_in_kernel=use_qk_l2norm_in_kernel,
        lower_bound=lower_bound,
        variant=variant,
        **specs,
    )
