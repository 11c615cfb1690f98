"""Per-step checks of one kernel run against the float64 reference and the pre-step pool (child process only).

Errors are relative to the largest reference value of the compared tensor, taken per (row, value head) so a
failure names where it is. Every check returns plain numbers for the JSON result.
"""

from __future__ import annotations

from typing import Any

import torch

from ...base.tensor_spec import TensorSpec
from ...engines.profiles import profile_for
from .synthetic_tensors import CallTensors, strided_view
from .tolerances import AGREEMENT_FACTOR, BETA_TIE_RTOL, output_tolerance, state_tolerance

_BITS = {8: torch.int64, 4: torch.int32, 2: torch.int16, 1: torch.int8}
_MANTISSA_BITS = {torch.float16: 10, torch.bfloat16: 7}
# sigmoid(b) closer than this (relative) to a rounding midpoint of b's dtype may round either way.
_TIE_WINDOW = 2.0**-19


def reference(tensors: CallTensors, engine: str) -> tuple[torch.Tensor, torch.Tensor]:
    """The float64 step from the current (pre-step) tensors: (out [B, 1, HV, V], state [S, HV, V, K])."""
    from ...kernel.ops import REFERENCES

    return REFERENCES[tensors.call.variant](*tensors.args(), engine=engine)


def beta_ties(b: torch.Tensor, variant: str, engine: str) -> torch.Tensor:
    """[B, HV] mask of gates whose rounded beta is ambiguous: where the engine profile's GDN kernel rounds
    sigmoid(b) to b's dtype (`EngineProfile.gdn_beta_rounding`: sglang 0.5.23, vLLM before 0.29).

    Two correct fp32 sigmoids can differ by an ulp, and on a midpoint of the 16-bit grid that flips the
    rounding: beta then differs by one 16-bit ulp (docs/kernel-contract.md §6.1 step 8).
    """
    mantissa = _MANTISSA_BITS.get(b.dtype)
    if profile_for(engine).decode_of(variant).beta_rounding is None or mantissa is None:
        return torch.zeros(b.shape, dtype=torch.bool, device=b.device)
    beta = torch.sigmoid(b.double())
    ulp = torch.exp2(torch.floor(torch.log2(beta)) - mantissa).clamp_min(2.0**-24)
    from_midpoint = (torch.remainder(beta / ulp, 1.0) - 0.5).abs() * ulp
    return from_midpoint <= _TIE_WINDOW * beta


def _worst(errors: torch.Tensor, tolerances: torch.Tensor) -> tuple[float, float, int, int, bool]:
    """(error, tolerance, i, j) at the worst error/tolerance ratio of a [R, HV] grid, and whether all pass."""
    ratio = errors / tolerances
    flat = int(torch.argmax(torch.nan_to_num(ratio, nan=float("inf"))))
    i, j = divmod(flat, errors.shape[1])
    passed = bool((errors <= tolerances).all())
    return float(errors[i, j]), float(tolerances[i, j]), i, j, passed


def _tolerance_grid(ties: torch.Tensor, tolerance: float, factor: float = 1.0) -> torch.Tensor:
    grid = torch.full(ties.shape, tolerance * factor, dtype=torch.float64, device=ties.device)
    return grid.masked_fill_(ties, BETA_TIE_RTOL * factor)


def _per_head_error(got: torch.Tensor, want: torch.Tensor, scale: torch.Tensor, *, skip_nan: bool) -> torch.Tensor:
    """max |got - want| / scale over each (row, head) block of [R, HV, ...] tensors; NaN counts as infinite
    unless `skip_nan` (the unwritten-output check reports those)."""
    diff = (got.double() - want).abs()
    diff = torch.where(torch.isnan(got), 0.0 if skip_nan else float("inf"), diff)
    return diff.flatten(2).amax(dim=2) / scale


def _empty_check(tolerance: float) -> dict[str, Any]:
    return {"error": 0.0, "tolerance": tolerance, "row": None, "head": None, "passed": True}


def check_output(out: torch.Tensor, ref_out: torch.Tensor, rows: torch.Tensor, ties: torch.Tensor) -> dict[str, Any]:
    tolerance = output_tolerance(str(out.dtype).removeprefix("torch."))
    if rows.numel() == 0:
        return _empty_check(tolerance)
    want = ref_out[rows, 0]
    scale = want.abs().max().clamp_min(1e-30)
    errors = _per_head_error(out[rows, 0], want, scale, skip_nan=True)
    error, tol, i, j, passed = _worst(errors, _tolerance_grid(ties[rows], tolerance))
    return {"error": error, "tolerance": tol, "row": int(rows[i]), "head": j, "passed": passed}


def check_state(state: torch.Tensor, ref_state: torch.Tensor, rows: torch.Tensor, slots: torch.Tensor,
                ties: torch.Tensor) -> dict[str, Any]:
    tolerance = state_tolerance(str(state.dtype).removeprefix("torch."))
    if slots.numel() == 0:
        return _empty_check(tolerance) | {"slot": None}
    want = ref_state[slots]
    scale = want.abs().max().clamp_min(1e-30)
    errors = _per_head_error(state[slots], want, scale, skip_nan=False)
    error, tol, i, j, passed = _worst(errors, _tolerance_grid(ties[rows], tolerance))
    return {"error": error, "tolerance": tol, "row": int(rows[i]), "slot": int(slots[i]), "head": j,
            "passed": passed}


def locate(flat_index: int, pool: TensorSpec, stacked: bool) -> str:
    """Where an element of the pool allocation is: "layer 0, slot 3" (stacked) or "slot 3"."""
    coords = []
    rest = flat_index
    for step in pool.stride:
        coords.append(rest // step)
        rest %= step
    if stacked:
        return f"layer {coords[0]}, slot {coords[1]}, value head {coords[2]}"
    return f"slot {coords[0]}, value head {coords[1]}"


def check_untouched(storage: torch.Tensor, before: torch.Tensor, state_spec: TensorSpec, slots: torch.Tensor,
                    pool: TensorSpec, stacked: bool) -> dict[str, Any]:
    """Bitwise: nothing in the pool allocation changed except the live rows' slots of the state view."""
    bits = _BITS[storage.element_size()]
    changed = storage.view(bits) != before.view(bits)
    allowed = torch.zeros(storage.shape, dtype=torch.bool, device=storage.device)
    if slots.numel():
        strided_view(allowed, state_spec)[slots] = True
    outside = changed & ~allowed
    count = int(outside.sum())
    where = locate(int(torch.nonzero(outside)[0, 0]), pool, stacked) if count else None
    return {"modified_elements": count, "first": where, "passed": count == 0}


def check_skipped(out: torch.Tensor, skipped: torch.Tensor) -> dict[str, Any]:
    """Rows the kernel must skip come back as exact zeros (NaN there is reported as unwritten)."""
    if skipped.numel() == 0:
        return {"nonzero_elements": 0, "rows": [], "passed": True}
    values = out[skipped]
    nonzero = (values != 0) & ~torch.isnan(values)
    per_row = nonzero.flatten(1).any(dim=1)
    count = int(nonzero.sum())
    return {"nonzero_elements": count, "rows": skipped[per_row].tolist(), "passed": count == 0}


def check_written(out: torch.Tensor) -> dict[str, Any]:
    """The NaN poison is gone from every element of `out`."""
    nan = torch.isnan(out)
    count = int(nan.sum())
    rows = torch.nonzero(nan.flatten(1).any(dim=1)).flatten().tolist()
    return {"nan_elements": count, "rows": rows, "passed": count == 0}


def check_run(tensors: CallTensors, before: torch.Tensor, ref_out: torch.Tensor, ref_state: torch.Tensor,
              rows: torch.Tensor, skipped: torch.Tensor, slots: torch.Tensor, ties: torch.Tensor,
              pool: TensorSpec, stacked: bool) -> dict[str, Any]:
    """All checks of one kernel run."""
    return {
        "output": check_output(tensors.out, ref_out, rows, ties),
        "state": check_state(tensors.initial_state, ref_state, rows, slots, ties),
        "untouched": check_untouched(tensors.pool_storage, before, tensors.call.initial_state, slots, pool, stacked),
        "skipped_rows": check_skipped(tensors.out, skipped),
        "written": check_written(tensors.out),
    }


def _picked(tensor: torch.Tensor, name: str, index: torch.Tensor) -> torch.Tensor:
    """The rows of `out` ([B, 1, HV, V]: its one token) or the slots of the state at `index`."""
    return tensor[index, 0] if name == "out" else tensor[index]


def compare_runs(first: CallTensors, second: CallTensors, ref_out: torch.Tensor, ref_state: torch.Tensor,
                 rows: torch.Tensor, slots: torch.Tensor, ties: torch.Tensor) -> dict[str, Any]:
    """Two kernels on copies of the same inputs and pre-step state: `out` and touched state, directly."""
    result: dict[str, Any] = {}
    tensor_pairs = (("out", first.out, second.out, ref_out, rows, output_tolerance),
                    ("initial_state", first.initial_state, second.initial_state, ref_state, slots, state_tolerance))
    for name, one, two, ref, index, tolerance_of in tensor_pairs:
        tolerance = tolerance_of(str(one.dtype).removeprefix("torch.")) * AGREEMENT_FACTOR
        if index.numel() == 0:
            result[name] = {"difference": 0.0, "tolerance": tolerance, "row": None, "head": None, "passed": True}
            continue
        scale = _picked(ref, name, index).abs().max().clamp_min(1e-30)
        errors = _per_head_error(_picked(one, name, index), _picked(two, name, index).double(), scale, skip_nan=False)
        error, tol, i, j, passed = _worst(errors, _tolerance_grid(ties[rows], tolerance / AGREEMENT_FACTOR,
                                                                 AGREEMENT_FACTOR))
        result[name] = {"difference": error, "tolerance": tol, "row": int(rows[i]), "head": j, "passed": passed}
    return result
