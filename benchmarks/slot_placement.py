"""Why the slot-indexed copy is slower than a plain copy at some points: the slot's dependent load, or where the
slots lie in the pool?

The decode benchmark (`decode_vs_sglang.py`) compares the kernels with a plain copy of the same bytes and with a
*slot copy*: the state rows read and written back in place at the launch's slots, each program loading its
row's slot first. With B >= 32 the slot copy takes up to 1.16x the plain copy at HV = 8 with a bf16 state, and
1.00-1.13x elsewhere (H200, 2026-12-01). This script separates the two things the slot copy adds, timing four
in-place read-modify-write kernels over the same state rows under CUDA-graph replay (one launch per slot set,
sets holding >= 256 MB of state, as in the decode benchmark):

- ``load/contiguous``: each program loads its row's slot; the sets' slots are consecutive (set s holds slots
  s*B+1 .. s*B+B, in row order);
- ``load/scattered``: the same kernel, the slots scattered over the whole pool as the decode benchmark's random
  slot sets are: row r of set s at 1 + h(s*B + r), h a bijective integer hash of [0, N) (N a power of two:
  multiply by an odd constant and fold the high half of the bits onto the low half, twice), so the sets stay
  disjoint;
- ``computed/contiguous`` and ``computed/scattered``: the same placements with the slot computed from the row
  and the set's number, no load;
- ``load/scattered/rows-fastest``: load/scattered with the programs in another launch order, the same block of
  every row in turn (consecutive programs on different slots), instead of a row's blocks one after the other.

load/scattered against load/contiguous is what the placement costs (computed/scattered also pays the hash's
64-bit arithmetic in the kernel, so it is not the measure of placement); load/contiguous against
computed/contiguous what the dependent load costs. ``copy``: the plain copy of the same bytes (as the decode
benchmark's).

    PYTHONPATH=src python benchmarks/slot_placement.py [--points qwen3-next@4:512:bf16 ...] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
from typing import Any

import decode_vs_sglang as bench
import torch
import triton
import triton.language as tl
from decode_bandwidth import capture, replay_us
from guard_variants import parse_point

# Odd multipliers: multiplying by one is a bijection modulo any power of two, and so is x ^ (x >> shift).
MIX = (0x9E3779B1, 0x85EBCA6B)


@triton.jit
def _scatter(linear, pool_rows, half_bits):
    linear = (linear * 0x9E3779B1) % pool_rows
    linear ^= linear >> half_bits
    linear = (linear * 0x85EBCA6B) % pool_rows
    return linear ^ (linear >> half_bits)


@triton.jit
def _rmw_kernel(pool, slots, one, stride_slot, row_elems, set_base, pool_rows, half_bits, batch, BLOCK: tl.constexpr,
                LOAD: tl.constexpr, SCATTERED: tl.constexpr, ROWS_FASTEST: tl.constexpr = False):
    """One block of one row's state read and written back in place (times a run-time 1.0) at the row's slot:
    loaded from `slots` (LOAD), else computed from the set's first row `set_base`. Programs in launch order
    take a row's blocks one after the other, or with ROWS_FASTEST the same block of every row in turn."""
    chunks = tl.cdiv(row_elems, BLOCK)
    pid = tl.program_id(0)
    if ROWS_FASTEST:
        row = pid % batch
        chunk = pid // batch
    else:
        row = pid // chunks
        chunk = pid % chunks
    offsets = chunk.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    if LOAD:
        slot = tl.load(slots + row).to(tl.int64)
    else:
        linear = (row + set_base).to(tl.int64)
        if SCATTERED:
            linear = _scatter(linear, pool_rows, half_bits)
        slot = 1 + linear
    base = pool + slot * stride_slot
    mask = offsets < row_elems
    state = tl.load(base + offsets, mask=mask, eviction_policy="evict_first")
    tl.store(base + offsets, (state.to(tl.float32) * one).to(state.dtype), mask=mask, eviction_policy="evict_first")


def scatter(linear: torch.Tensor, pool_rows: int) -> torch.Tensor:
    """The kernel's `_scatter` on the host."""
    half_bits = pool_rows.bit_length() // 2
    for multiplier in MIX:
        linear = (linear * multiplier) % pool_rows
        linear = linear ^ (linear >> half_bits)
    return linear


def slot_table(sets: int, B: int, pool_rows: int, scattered: bool) -> list[torch.Tensor]:
    linear = torch.arange(sets * B, dtype=torch.int64)
    if scattered:
        linear = scatter(linear, pool_rows)
    return [s.to(torch.int32).to(bench.DEVICE).contiguous() for s in (1 + linear).view(sets, B)]


def measure(point: tuple[str, int, int, str], rounds: int) -> dict[str, Any]:
    model, tp, B, state = point
    g = bench.geometry(model, tp)
    dtype = bench.STATE_DTYPES[state]
    row_elems = g.HV * g.V * g.K
    row_bytes = row_elems * dtype.itemsize
    sets = max(2, min(bench.MAX_SETS, math.ceil(bench.ROTATION_BYTES / (B * row_bytes))))
    pool_rows = 1 << (sets * B - 1).bit_length()  # a power of two >= every slot set's rows
    pool = torch.zeros(pool_rows + 1, g.HV, g.V, g.K, device=bench.DEVICE, dtype=dtype)
    result: dict[str, Any] = {"model": model, "tp": tp, "variant": g.variant, "HV": g.HV, "B": B, "state": state,
                              "sets": sets, "pool_rows": pool_rows, "us": {}, "spread": {}}
    graphs = {}
    for placement in ("contiguous", "scattered"):
        tables = slot_table(sets, B, pool_rows, placement == "scattered")
        set_of = {id(t): number for number, t in enumerate(tables)}
        orders = ((True, False), (False, False)) + (((True, True),) if placement == "scattered" else ())
        for load, rows_fastest in orders:
            for block, warps in bench.SLOT_COPY_SHAPES:
                def launch(indices: torch.Tensor, block: int = block, warps: int = warps, load: bool = load,
                           scattered: bool = placement == "scattered", set_of: dict[int, int] = set_of,
                           rows_fastest: bool = rows_fastest) -> None:
                    grid = (B * triton.cdiv(row_elems, block),)
                    _rmw_kernel[grid](pool, indices, 1.0, pool.stride(0), row_elems, set_of[id(indices)] * B,
                                      pool_rows, pool_rows.bit_length() // 2, B, BLOCK=block, LOAD=load,
                                      SCATTERED=scattered, ROWS_FASTEST=rows_fastest, num_warps=warps)
                name = f"{'load' if load else 'computed'}/{placement}{'/rows-fastest' if rows_fastest else ''}"
                graphs[f"{name}@{block}x{warps}"] = (capture(launch, tables), len(tables))
    times: dict[str, list[float]] = {name: [] for name in graphs}
    for _ in range(rounds):  # interleaved, so drift hits every kernel alike
        for name, (graph, launches) in graphs.items():
            times[name].append(replay_us(graph, launches))
    del graphs
    torch.cuda.empty_cache()
    for name, values in times.items():  # each kernel at its faster block shape (as the decode benchmark's floor)
        kind = name.split("@")[0]
        median = statistics.median(values)
        if median < result["us"].get(kind, math.inf):
            result["us"][kind] = median
            result["spread"][kind] = (max(values) - min(values)) / median
    copy = bench.CopyTarget(2 * B * row_bytes, sets)  # reads and writes B state rows
    copies = []
    for launch_copy in (copy.launch, copy.launch_kernel):
        graph = capture(launch_copy, copy.sets)
        copies.append(statistics.median(replay_us(graph, sets) for _ in range(rounds)))
        del graph
    result["us"]["copy"] = min(copies)
    del copy
    torch.cuda.empty_cache()
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--points", nargs="+", default=["qwen3-next@4:32:bf16", "qwen3-next@4:512:bf16",
                                                        "qwen3-next@4:512:fp32", "qwen3-next@1:512:bf16"])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", default=os.path.join(os.environ["OUT"], "slot_placement.json")
                        if os.environ.get("OUT") else None)
    args = parser.parse_args(argv)
    results = []
    for text in args.points:
        row = measure(parse_point(text), args.rounds)
        reference = row["us"]["computed/contiguous"]
        print(f"{row['variant']} tp{row['tp']} HV={row['HV']} B={row['B']} {row['state']}: " + "  ".join(
            f"{name} {us:.2f} ({us / reference:.3f})" for name, us in row["us"].items()), flush=True)
        results.append(row)
    if args.json:
        environment = {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                       "triton": triton.__version__}
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump({"environment": environment, "points": results}, handle, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
