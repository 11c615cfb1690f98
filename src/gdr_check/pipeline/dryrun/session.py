"""One dry-run inside the child: allocate, run the steps, verify each, time (child process only).

Each step: new random inputs and slot indices (distinct live slots, padding rows), a pool snapshot and the
float64 reference from the pre-step tensors, `out` poisoned with NaN, the kernel under test, the checks. With
an engine backend, gdr-check's kernel also runs on copies of the same inputs and pre-step pool, and the two are
compared. The engine's pool then carries on to the next step.
"""

from __future__ import annotations

import statistics
import time

import torch

from .geometry import Geometry, launch_geometry
from .kernels import KernelUnderTest, builtin_kernel, engine_kernel
from .messages import KernelTiming, SessionResult, StepRecord, Timing
from .plan import DryRunPlan
from .synthetic_tensors import (
    CallTensors,
    allocate,
    build_tensors,
    live_rows,
    pool_allocation,
    refresh_inputs,
    step_indices,
    timing_indices,
)
from .timing import METHOD, bytes_per_call, cold_time_us, copy_bandwidth
from .verify import beta_ties, check_run, compare_runs, reference

MAX_LISTED_INDICES = 64


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _launch(kernel: KernelUnderTest, tensors: CallTensors, device: torch.device) -> float:
    """Run one verified call; wall-clock seconds including the wrapper's checks."""
    tensors.out.fill_(float("nan"))
    _synchronize(device)
    start = time.perf_counter()
    kernel.checked(*tensors.args())
    _synchronize(device)
    return time.perf_counter() - start


def _set_indices(tensors: CallTensors, values: list[int]) -> None:
    host = torch.tensor(values, dtype=tensors.ssm_state_indices.dtype)
    tensors.ssm_state_indices.copy_(host)


def _kernels(plan: DryRunPlan) -> tuple[list[KernelUnderTest], str | None]:
    """[kernel under test, gdr-check's kernel for comparison (engine backends)], or why the backend is missing."""
    ours = builtin_kernel(plan.variant, plan.engine)
    if plan.backend == "builtin":
        return [ours], None
    engine = engine_kernel(plan.backend, plan.variant)
    if isinstance(engine, str):
        return [], engine
    return [engine, ours], None


def _run_steps(plan: DryRunPlan, geometry: Geometry, kernels: list[KernelUnderTest], tensors: CallTensors,
               device: torch.device, host: torch.Generator, inputs: torch.Generator) -> list[StepRecord]:
    dims = geometry.dims
    pool = pool_allocation(geometry)
    stacked = geometry.pool is not None
    records = []
    for step in range(plan.steps):
        indices = step_indices(dims.B, dims.S, plan.engine, step, host)
        _set_indices(tensors, indices)
        refresh_inputs(tensors, inputs)
        rows_list = live_rows(indices, plan.engine)
        rows = torch.tensor(rows_list, dtype=torch.long, device=device)
        skipped = torch.tensor([r for r in range(dims.B) if r not in set(rows_list)], dtype=torch.long, device=device)
        slots = torch.tensor([indices[r] for r in rows_list], dtype=torch.long, device=device)
        before = tensors.pool_storage.clone()
        ref_out, ref_state = reference(tensors, plan.engine)
        ties = beta_ties(tensors.b, plan.variant, plan.engine)
        record: StepRecord = {
            "step": step + 1, "live_rows": len(rows_list), "skipped_rows": dims.B - len(rows_list),
            "indices": indices if dims.B <= MAX_LISTED_INDICES else None, "beta_ties": int(ties.sum()),
            "kernels": {},
        }
        runs: list[CallTensors] = []
        for position, kernel in enumerate(kernels):
            run = tensors if position == 0 else tensors.with_pool(before.clone(), allocate(tensors.call.out, device))
            try:
                seconds = _launch(kernel, run, device)
            except Exception as error:  # noqa: BLE001 - reported as GDR312; the child stops after it
                record["kernels"][kernel.name] = {"raised": {"exception": type(error).__name__,
                                                             "message": str(error).strip()}}
                continue
            checks = check_run(run, before, ref_out, ref_state, rows, skipped, slots, ties, pool, stacked)
            record["kernels"][kernel.name] = {"seconds": seconds, **checks}
            runs.append(run)
        if len(runs) == 2:
            record["agreement"] = compare_runs(runs[0], runs[1], ref_out, ref_state, rows, slots, ties)
        records.append(record)
        if any("raised" in result for result in record["kernels"].values()):
            break  # after a CUDA error the context may be unusable (docs/kernel-contract.md U3)
    return records


def _row_bytes(tensors: CallTensors) -> tuple[int, int, int]:
    state = tensors.initial_state
    per_slot = state[0].numel() * state.element_size()
    qkv = tensors.mixed_qkv.shape[1] * tensors.mixed_qkv.element_size()
    out = tensors.out[0].numel() * tensors.out.element_size()
    return per_slot, qkv, out


def _timing(plan: DryRunPlan, geometry: Geometry, kernels: list[KernelUnderTest], tensors: CallTensors,
            device: torch.device, steps: list[StepRecord], interpreter: bool) -> Timing:
    per_kernel: dict[str, KernelTiming] = {}
    if interpreter:
        for kernel in kernels:
            seconds = [run["seconds"] for s in steps
                       if "seconds" in (run := s["kernels"].get(kernel.name, {}))]
            if seconds:
                per_kernel[kernel.name] = {"median_us": statistics.median(seconds) * 1e6}
        return {"meaningful": False, "method": "interpreter wall clock, not a kernel time",
                "kernels": per_kernel}
    B, S = geometry.dims.B, geometry.dims.S
    indices = timing_indices(B, S)
    _set_indices(tensors, indices)
    live = len(live_rows(indices, plan.engine))
    moved = bytes_per_call(B, live, *_row_bytes(tensors))
    copy = copy_bandwidth(device)
    for kernel in kernels:
        def launch(kernel: KernelUnderTest = kernel) -> object:
            return kernel.fast(*tensors.args())

        us = cold_time_us(launch)
        gbps = moved / us / 1e3
        per_kernel[kernel.name] = {"median_us": us, "bandwidth_gbps": gbps,
                                   "fraction_of_copy": gbps / copy["bandwidth_gbps"]}
    return {"meaningful": True, "method": METHOD, "bytes_per_call": moved, "rows": B, "live_rows": live,
            "kernels": per_kernel, "copy": copy}


def run_session(plan: DryRunPlan, device: torch.device, interpreter: bool) -> SessionResult:
    geometry = launch_geometry(plan.call, plan.pools, interpreter=interpreter)
    result: SessionResult = {"geometry": geometry.to_dict(), "kernels": {}, "steps": [], "timing": None}
    kernels, missing = _kernels(plan)
    if missing is not None:
        result["backend_unavailable"] = {"backend": plan.backend, "reason": missing}
        return result
    result["kernels"] = {k.name: k.label for k in kernels}
    host = torch.Generator().manual_seed(plan.seed)
    inputs = torch.Generator(device=device).manual_seed(plan.seed)
    tensors = build_tensors(geometry, device, inputs)
    steps = _run_steps(plan, geometry, kernels, tensors, device, host, inputs)
    result["steps"] = steps
    raised = any("raised" in r for s in steps for r in s["kernels"].values())
    if plan.timing and not raised:
        result["timing"] = _timing(plan, geometry, kernels, tensors, device, steps, interpreter)
    return result
