"""Dry-run tolerances: errors relative to the largest reference value of the compared tensor (no torch here).

From docs/kernel-contract.md §10: a float32 state matches a float64 reference with the same beta semantics
to ~2e-7, so 1e-5 passes it and still separates the ~1e-3 of other beta semantics; 16-bit tensors are bounded
by their rounding (half an ulp: 2^-9 bf16, 2^-12 fp16, relative to the element).
"""

from __future__ import annotations

OUTPUT_RTOL: dict[str, float] = {"float32": 1e-4, "float64": 1e-6, "float16": 2e-3, "bfloat16": 1e-2}
STATE_RTOL: dict[str, float] = {"float32": 1e-5, "float64": 1e-6, "float16": 2e-3, "bfloat16": 1e-2}
# Rows whose sigmoid(b) sits on a rounding midpoint of `b`'s dtype: the kernel and the reference may round
# beta to neighbouring values (both exact to their fp32 sigmoid), a relative change of one 16-bit ulp.
BETA_TIE_RTOL = 2e-2
# Two kernels that each pass the reference tolerance differ by at most twice it.
AGREEMENT_FACTOR = 2.0


def output_tolerance(dtype: str) -> float:
    return OUTPUT_RTOL.get(dtype, 1e-2)


def state_tolerance(dtype: str) -> float:
    return STATE_RTOL.get(dtype, 1e-2)
