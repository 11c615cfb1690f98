"""Where the checked kernels should check the slot indices: in every program's prologue, or in a separate
one-program-per-row launch before the kernel (which then runs on the sanitised indices). CUDA-graph replay
with the state cold in L2, the method and inputs of `decode_vs_sglang.py`, one process, interleaved rounds:

- ``ours``: the unchecked launch (the reference the checked kernel should stay within 2 % of);
- ``checked``: `packed_decode` / `kda_packed_decode` as shipped (`device_guard.SEPARATE_CHECK_MIN_PAIRS`);
- ``prologue``: the same with the check forced into the prologue;
- ``separate``: the same with the check forced into a separate launch (taken only past one scan block, B > 128).

    PYTHONPATH=src python benchmarks/guard_placement.py [--batches 1 8 32 128 256 512 1024]   # JSON under $OUT

`device_guard.SEPARATE_CHECK_MIN_PAIRS` was chosen from this comparison (docs/performance-log.md, "Runtime guard").
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import warnings

# Same inputs and graph method as the decode benchmark (run from this folder, as `python benchmarks/...`).
import decode_vs_sglang as bench
import torch
from decode_bandwidth import capture, replay_us

from gdr_check.kernel import device_guard

GEOMETRIES = (("Qwen/Qwen3-Next-80B-A3B-Instruct", 1), ("Qwen/Qwen3-Next-80B-A3B-Instruct", 4),
              ("moonshotai/Kimi-Linear-48B-A3B-Instruct", 4), ("moonshotai/Kimi-Linear-48B-A3B-Instruct", 1))
PLACEMENTS = {"prologue": 1 << 62, "separate": 1}  # SEPARATE_CHECK_MIN_PAIRS that forces each


def measure(g: bench.Geometry, B: int, state: str, repeats: int) -> dict[str, float]:
    itemsize = bench.STATE_DTYPES[state].itemsize
    sets = max(2, min(bench.MAX_SETS, math.ceil(bench.ROTATION_BYTES / (B * g.HV * g.V * g.K * itemsize))))
    x = bench.make_inputs(g, B, state, sets * B + 1, sets, seed=B)
    ours = bench.ours_impl(None)
    graphs = {"ours": capture(lambda idx: ours(x, idx, x.pool, x.out), x.index_sets),
              "checked": capture(lambda idx: bench.checked_impl(x, idx, x.pool, x.out), x.index_sets)}
    shipped = device_guard.SEPARATE_CHECK_MIN_PAIRS
    try:
        for name, pairs in PLACEMENTS.items():
            device_guard.SEPARATE_CHECK_MIN_PAIRS = pairs
            graphs[name] = capture(lambda idx: bench.checked_impl(x, idx, x.pool, x.out), x.index_sets)
    finally:
        device_guard.SEPARATE_CHECK_MIN_PAIRS = shipped
    rounds: dict[str, list[float]] = {name: [] for name in graphs}
    for _ in range(repeats):  # interleaved, so drift hits every variant alike
        for name, graph in graphs.items():
            rounds[name].append(replay_us(graph, len(x.index_sets)))
    return {name: statistics.median(values) for name, values in rounds.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batches", type=int, nargs="*", default=[1, 8, 32, 128, 256, 512, 1024])
    parser.add_argument("--states", nargs="*", default=["fp32", "bf16"])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", default=os.path.join(os.environ["OUT"], "guard_placement.json")
                        if os.environ.get("OUT") else None)
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("guard_placement: no CUDA device", file=sys.stderr)
        return 2
    points = []
    for model, tp in GEOMETRIES:
        g = bench.geometry(model, tp)
        for state in args.states:
            for B in args.batches:
                times = measure(g, B, state, args.repeats)
                points.append({"variant": g.variant, "H": g.H, "HV": g.HV, "state": state, "B": B,
                               "pairs": B * g.HV, "graph_us": times})
                ratios = " ".join(f"{name}/ours={times[name] / times['ours']:.3f}" for name in times if name != "ours")
                print(f"{g.variant} HV={g.HV:2d} {state} B={B:5d} pairs={B * g.HV:6d} ours={times['ours']:8.2f} "
                      f"{ratios}", flush=True)
                torch.cuda.empty_cache()
    if args.json:
        with open(args.json, "w") as handle:
            json.dump({"separate_check_min_pairs": device_guard.SEPARATE_CHECK_MIN_PAIRS, "points": points}, handle,
                      indent=1)
    return 0


if __name__ == "__main__":
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sys.exit(main())
