"""`python -m gdr_check.pipeline.dryrun.rank_worker SPEC`: one rank of `gdr-check dry-run --ranks all`.

Started by `runner.ranks` with RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT set (as torchrun does). Rank 0 makes
the full, unsharded layer (inputs, `A_log`, `dt_bias`, the state pool) from the seed and broadcasts it; every rank
slices it with the engine's sharding plan (`models.sharding`), runs its kernel(s) on its slice, and all_gathers
its `out` and state; rank 0 compares them with the float64 reference of the whole layer.

Transport: NCCL with one GPU per rank when torch sees at least WORLD_SIZE GPUs; otherwise gloo, with every rank
on GPU 0 (NCCL refuses two ranks on one device) or, without a GPU or with `--device cpu`, on the CPU under the
Triton interpreter at reduced sizes. Every rank decides the same way before the process group starts.

stdout carries one JSON object a line: progress events, then {"event": "result"} or {"event": "failed"}.
A rank that fails exits at once without leaving its collective; the parent stops the others.

"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
import traceback
from collections.abc import Callable
from datetime import timedelta
from typing import TYPE_CHECKING, Any, TextIO

from ...base.variants import variant_spec
from ...kernel.ops import REFERENCES
from ...models.sharding import LayerDims, ShardingPlan, find_misshards, sharding_plan
from .child import _claim_stdout, jsonable
from .geometry import launch_geometry
from .lifeline import die_with_parent
from .plan import DryRunPlan
from .tolerances import output_tolerance

if TYPE_CHECKING:
    import torch

    from .plan import DryRunPlan

try:
    import resource

    HAS_RESOURCE = True
except ImportError:  # not on POSIX: no peak-memory figure
    HAS_RESOURCE = False

PARAMETERS = ("A_log", "dt_bias")
GPU_TIMED_CALLS = 20


def transport(requested: str, world: int, cuda_count: int) -> tuple[str, str, str]:
    """(process-group backend, device kind, why) — the same answer on every rank."""
    if requested == "cpu" or cuda_count == 0:
        why = "--device cpu" if requested == "cpu" else "no CUDA device"
        return "gloo", "cpu", f"gloo on the CPU under the Triton interpreter ({why})"
    if cuda_count >= world:
        return "nccl", "cuda", f"NCCL, one GPU per rank ({cuda_count} GPUs)"
    return "gloo", "cuda", (f"gloo, all {world} ranks sharing GPU 0 ({cuda_count} GPU(s) for {world} ranks; NCCL "
                            f"refuses two ranks on one device)")


class Rank:
    def __init__(self, spec: dict[str, Any], rank: int, world: int, emit: Callable[[dict[str, Any]], None]):
        self.spec, self.rank, self.world, self.emit = spec, rank, world, emit

    def run(self) -> dict[str, Any]:
        plan = DryRunPlan.from_dict(self.spec["plan"])
        requested = plan.device
        if requested == "cpu":
            os.environ["TRITON_INTERPRET"] = "1"
        import torch

        count = torch.cuda.device_count() if requested != "cpu" else 0
        backend, kind, why = transport(requested, self.world, count)
        if kind == "cpu":
            os.environ["TRITON_INTERPRET"] = "1"
            device = torch.device("cpu")
        else:
            os.environ.pop("TRITON_INTERPRET", None)
            device = torch.device("cuda", self.rank if backend == "nccl" else 0)
            torch.cuda.set_device(device)
        import torch.distributed as dist

        self.emit({"event": "init", "transport": backend, "device": str(device)})
        dist.init_process_group(backend, rank=self.rank, world_size=self.world,
                                timeout=timedelta(seconds=float(self.spec["timeout"])))
        try:
            result = self._session(plan, device, kind == "cpu", backend)
            result["transport"] = {"backend": backend, "device": kind, "why": why}
            return result
        finally:
            dist.destroy_process_group()

    # -- the session ----------------------------------------------------------------------------------------------
    def _session(self, plan: DryRunPlan, device: torch.device, interpreter: bool, backend: str) -> dict[str, Any]:
        import torch
        import torch.distributed as dist
        import triton

        from .session import _kernels, _set_indices
        from .synthetic_tensors import allocate, build_tensors, live_rows, nonzero_random, step_indices
        from .verify import beta_ties, check_output, check_state

        rank, world = self.rank, self.world
        comm = device if backend == "nccl" else torch.device("cpu")
        geometry = launch_geometry(plan.call, plan.pools, interpreter=interpreter)
        d = geometry.dims
        full = LayerDims(d.H * world, d.HV * world, d.K, d.V)
        correct = sharding_plan(self.spec["layout"], plan.variant, full, world)
        kernels, missing = _kernels(plan)
        if missing is not None:
            return {"backend_unavailable": {"backend": plan.backend, "reason": missing}}
        generator = torch.Generator(device=device).manual_seed(plan.seed + 1000 * rank)
        tensors = build_tensors(geometry, device, generator)
        call = geometry.call
        dtypes = {name: getattr(tensors, name).dtype for name in ("mixed_qkv", "a", "b", "A_log", "dt_bias")}
        state_dtype = tensors.initial_state.dtype

        # The full layer's sources, made on rank 0 (fp32 values already rounded to the argument's dtype).
        host = torch.Generator().manual_seed(plan.seed)
        source_dtype: dict[str, Any] = {}
        source_width: dict[str, int] = {}
        for name, shard in correct.tensors.items():
            if shard.source != "ssm_state":
                source_dtype.setdefault(shard.source, dtypes[name])
                source_width[shard.source] = shard.source_width

        def make(shape: tuple[int, ...], dtype: Any, *, scale: float = 1.0) -> Any:
            return nonzero_random(shape, dtype, torch.device("cpu"), host, scale=scale).float()

        def broadcast(value: Any, shape: tuple[int, ...]) -> Any:
            buffer = value.to(comm) if rank == 0 else torch.empty(shape, dtype=torch.float32, device=comm)
            dist.broadcast(buffer, 0)
            return buffer.to(device)

        params: dict[str, Any] = {}
        for name in PARAMETERS:
            shape = (source_width[name],)
            value = None
            weights = self.spec.get("weights")
            if rank == 0 and weights:
                value = _real_parameter(weights["tensors"][name], shape[0], dtypes[name])
            elif rank == 0:
                if name == "A_log":  # log of 1..16, as real models hold it
                    value = torch.empty(shape).uniform_(0.05, 2.77, generator=host).to(dtypes[name]).float()
                else:
                    value = make(shape, dtypes[name], scale=0.5)
            params[name] = broadcast(value, shape)
        pool_shape = (d.S, full.HV, d.V, d.K)
        full_state = broadcast(make(pool_shape, state_dtype, scale=0.5) if rank == 0 else None, pool_shape)

        def columns(name: str) -> Any:
            return torch.tensor(correct.tensors[name].columns[rank], dtype=torch.long, device=device)

        def place(target: Any, value: Any) -> None:
            # A slice longer than the argument (an unsliced tensor): the kernel reads its first entries.
            target.copy_(value[..., :target.shape[-1]].to(target.dtype))

        tensors.initial_state.copy_(full_state.index_select(1, columns("initial_state")).to(state_dtype))
        place(tensors.A_log, params["A_log"].index_select(0, columns("A_log")))
        place(tensors.dt_bias, params["dt_bias"].index_select(0, columns("dt_bias")))
        reference_pool = full_state.double()
        unsharded = correct.unsharded()

        def canonical(name: str, value: Any) -> Any:
            index = torch.tensor(unsharded.tensors[name].columns[0], dtype=torch.long, device=device)
            return value.index_select(value.dim() - 1, index).to(dtypes[name])

        seconds: dict[str, list[float]] = {k.name: [] for k in kernels}
        steps: list[dict[str, Any]] = []
        B = d.B
        for step in range(plan.steps):
            indices = torch.tensor(step_indices(B, d.S, plan.engine, step, host), dtype=torch.float32)
            indices = broadcast(indices if rank == 0 else None, (B,)).long().tolist()
            sources = {name: broadcast(make((B, width), source_dtype[name]) if rank == 0 else None, (B, width))
                       for name, width in source_width.items() if name not in PARAMETERS}
            _set_indices(tensors, indices)
            for name in ("mixed_qkv", "a", "b"):
                place(getattr(tensors, name), sources[correct.tensors[name].source].index_select(1, columns(name)))
            before = tensors.pool_storage.clone()
            runs = []
            number = step + 1  # steps are numbered from 1, as the one-rank dry-run numbers them
            self.emit({"event": "step", "step": number})
            for position, kernel in enumerate(kernels):
                run = tensors if position == 0 else tensors.with_pool(before.clone(), allocate(call.out, device))
                run.out.fill_(float("nan"))
                if device.type == "cuda":
                    torch.cuda.synchronize(device)
                start = time.perf_counter()
                kernel.checked(*run.args())
                if device.type == "cuda":
                    torch.cuda.synchronize(device)
                seconds[kernel.name].append(time.perf_counter() - start)
                runs.append(run)
            record: dict[str, Any] = {"step": number, "kernels": {}}
            rows_list = live_rows(indices, plan.engine)
            for kernel, run in zip(kernels, runs, strict=True):  # one run per kernel, appended above
                out = run.out.float().contiguous().to(comm)
                state = run.initial_state.float().contiguous().to(comm)
                outs = [torch.empty_like(out) for _ in range(world)]
                states = [torch.empty_like(state) for _ in range(world)]
                self.emit({"event": "gather", "step": number, "kernel": kernel.name})
                dist.all_gather(outs, out)
                dist.all_gather(states, state)
                if rank != 0:
                    continue
                full_args = [canonical(n, sources[correct.tensors[n].source]) for n in ("mixed_qkv", "a", "b")]
                naive = REFERENCES[plan.variant]
                extra = variant_spec(plan.variant).call_extras(call.lower_bound)
                idx = torch.tensor(indices, dtype=torch.long, device=device)
                ref_out, ref_state = naive(full_args[0], full_args[1], full_args[2],
                                           canonical("A_log", params["A_log"]), canonical("dt_bias", params["dt_bias"]),
                                           float(call.scale), reference_pool.to(state_dtype), None, idx,
                                           call.use_qk_l2norm_in_kernel, *extra, engine=plan.engine)
                rows = torch.tensor(rows_list, dtype=torch.long, device=device)
                slots = torch.tensor([indices[r] for r in rows_list], dtype=torch.long, device=device)
                ties = beta_ties(full_args[2], plan.variant, plan.engine)
                got_out = torch.cat([o.to(device) for o in outs], dim=2)
                got_state = torch.cat([s.to(device) for s in states], dim=1)
                record["kernels"][kernel.name] = {
                    "output": check_output(got_out.to(dtypes["mixed_qkv"]), ref_out, rows, ties),
                    "state": check_state(got_state.to(state_dtype), ref_state, rows, slots, ties),
                    "per_rank": self._per_rank(got_out, got_state, ref_out, ref_state, rows, slots, d.HV),
                }
                if kernel is kernels[0]:
                    next_pool = got_state.double()
            if rank == 0:
                reference_pool = next_pool
                steps.append(record)

        timing = self._gpu_timing(kernels, tensors, device) if not interpreter else {}
        memory = (torch.cuda.max_memory_allocated(device) if device.type == "cuda" else _max_rss())
        mine = {"rank": rank, "device": str(device), "seconds": seconds, "timed_us": timing, "memory_bytes": memory,
                "columns": {name: list(shard.columns[rank]) for name, shard in correct.tensors.items()}}
        everyone: list[Any] = [None] * world
        dist.all_gather_object(everyone, mine)
        if rank != 0:
            return {"status": "ok"}
        received = {name: tuple(tuple(r["columns"][name]) for r in everyone) for name in correct.tensors}
        as_received = ShardingPlan(correct.layout, correct.variant, full, world,
                                   {n: s.__class__(s.tensor, s.source, s.source_width, received[n], s.how)
                                    for n, s in correct.tensors.items()})
        for entry in everyone:
            del entry["columns"]
        device_name = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU (Triton interpreter)"
        return {
            "status": "ok",
            "device": {"type": device.type, "interpreter": interpreter, "device_name": device_name,
                       "torch": torch.__version__, "triton": triton.__version__},
            "kernels": {k.name: k.label for k in kernels},
            "geometry": geometry.to_dict(),
            "layer": {"layout": correct.layout, "variant": correct.variant, "H": full.H, "HV": full.HV,
                      "K": full.K, "V": full.V, "tp": world},
            "sharding": {name: {"source": s.source, "how": s.how} for name, s in correct.tensors.items()},
            "misshards": [m.to_dict() for m in find_misshards(correct, as_received)],
            "steps": steps,
            "ranks": everyone,
        }

    def _per_rank(self, got_out: Any, got_state: Any, ref_out: Any, ref_state: Any, rows: Any, slots: Any,
                  HV_l: int) -> list[dict[str, Any]]:
        """Each rank's block against the reference; for a failing block, which reference heads its heads match."""
        import torch

        result: list[dict[str, Any]] = []
        if rows.numel() == 0:
            return result
        want = ref_out[rows, 0]  # [R, HV, V]
        scale = want.abs().max().clamp_min(1e-30)
        tolerance = output_tolerance("float32") * 10
        state_want = ref_state[slots]
        state_scale = state_want.abs().max().clamp_min(1e-30)
        for rank in range(self.world):
            heads = slice(rank * HV_l, (rank + 1) * HV_l)
            mine = got_out[rows, 0, heads].double()  # [R, HV_l, V]
            nan_out = int(torch.isnan(mine).sum())
            nan_state = int(torch.isnan(got_state[slots][:, heads]).sum())
            error = float(torch.nan_to_num((mine - want[:, heads]).abs(), nan=float("inf")).max() / scale)
            state_error = float(torch.nan_to_num((got_state[slots][:, heads].double() - state_want[:, heads]).abs(),
                                                 nan=float("inf")).max() / state_scale)
            # [HV_l, HV]: local head j against every reference head h.
            grid = (mine[:, :, None, :] - want[:, None, :, :]).abs().amax(dim=(0, 3)) / scale
            grid = torch.nan_to_num(grid, nan=float("inf"))
            matches = [[int(h) for h in torch.nonzero(grid[j] <= max(tolerance, 2e-2)).flatten().tolist()]
                       for j in range(grid.shape[0])]
            result.append({"rank": rank, "heads": [rank * HV_l, (rank + 1) * HV_l - 1], "out_error": error,
                           "state_error": state_error, "nan_out": nan_out, "nan_state": nan_state,
                           "out_matches": matches})
        return result

    def _gpu_timing(self, kernels: list[Any], tensors: Any, device: Any) -> dict[str, float]:
        import torch

        timed = {}
        for kernel in kernels:
            samples = []
            for _ in range(GPU_TIMED_CALLS):
                torch.cuda.synchronize(device)
                start = time.perf_counter()
                kernel.fast(*tensors.args())
                torch.cuda.synchronize(device)
                samples.append(time.perf_counter() - start)
            timed[kernel.name] = statistics.median(samples) * 1e6
        return timed


def _real_parameter(where: dict[str, Any], width: int, dtype: Any) -> Any:
    """The checkpoint's tensor from its byte span (`torch.frombuffer`, no unpickling), flattened to the kernel's
    layout, on the CPU for the broadcast; its first `width` entries when the interpreter runs fewer heads."""
    import torch

    with open(where["path"], "rb") as handle:
        handle.seek(where["offset"])
        data = bytearray(handle.read(where["nbytes"]))
    if len(data) != where["nbytes"]:
        raise ValueError(f"{where['path']} ended inside `{where['name']}`")
    values = torch.frombuffer(data, dtype=getattr(torch, where["dtype"])).float()
    if values.numel() < width:
        raise ValueError(f"`{where['name']}` holds {values.numel()} values; the layer needs {width}")
    return values[:width].to(dtype).float()


def _max_rss() -> int:
    if not HAS_RESOURCE:  # not on POSIX
        return 0
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024


def main() -> int:
    die_with_parent()
    output: TextIO = _claim_stdout()
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])

    def emit(event: dict[str, Any]) -> None:
        output.write(json.dumps(jsonable({"rank": rank, **event})) + "\n")
        output.flush()

    try:
        with open(sys.argv[1], encoding="utf-8") as handle:
            spec = json.load(handle)
        result = Rank(spec, rank, world, emit).run()
    except BaseException as error:  # noqa: BLE001 - reported with the rank; the parent stops the other ranks
        traceback.print_exc()
        emit({"event": "failed", "exception": type(error).__name__, "message": str(error).strip()})
        sys.stderr.flush()
        os._exit(1)  # leave without the collective the other ranks wait in
    emit({"event": "result", **result})
    return 0


if __name__ == "__main__":
    sys.exit(main())
