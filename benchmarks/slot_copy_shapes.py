"""Is the slot copy's program shape part of the floor it sets? The decode benchmark (`decode_vs_sglang.py`) takes
the faster of two shapes of its slot copy (2048 elements x 4 warps and 8192 x 8 per program) as the floor for
a kernel that must load a row's slot before it can stream the row's state. This script times the slot copy at
more shapes, next to our kernel's unchecked launch, under CUDA-graph replay with the state cold in L2 (one
launch per slot set, sets holding >= 256 MB of state, interleaved rounds, medians), for the small batches
where the kernel stays above 1.10x that floor.

    PYTHONPATH=src python benchmarks/slot_copy_shapes.py [--points qwen3-next@4:1:fp32 ...] [--json FILE]
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
from decode_bandwidth import capture, replay_us
from guard_variants import parse_point

from gdr_check.kernel.gdn.fused import launch_packed_decode
from gdr_check.kernel.kda.fused import launch_kda_packed_decode

SHAPES = ((256, 1), (512, 1), (1024, 1), (1024, 2), (2048, 2), (2048, 4), (4096, 4), (8192, 8))
POINTS = ("qwen3-next@4:1:fp32", "qwen3-next@4:1:bf16", "qwen3-next@1:1:bf16", "kimi-linear@4:1:bf16",
          "kimi-linear@1:1:fp32")


def measure(point: tuple[str, int, int, str], rounds: int) -> dict[str, Any]:
    model, tp, B, state = point
    g = bench.geometry(model, tp)
    itemsize = bench.STATE_DTYPES[state].itemsize
    sets = max(2, min(bench.MAX_SETS, math.ceil(bench.ROTATION_BYTES / (B * g.HV * g.V * g.K * itemsize))))
    x = bench.make_inputs(g, B, state, sets * B + 1, sets, seed=B * 1000 + g.HV)
    launch = launch_packed_decode if g.variant == "gdn" else launch_kda_packed_decode
    graphs = {"ours": capture(lambda idx: launch(*x.args(idx, x.pool, x.out), engine="sglang"), x.index_sets)}
    for block, warps in SHAPES:
        graphs[f"{block}x{warps}"] = capture(bench.slot_copy_launch(x, block, warps), x.index_sets)
    times: dict[str, list[float]] = {name: [] for name in graphs}
    for _ in range(rounds):
        for name, graph in graphs.items():
            times[name].append(replay_us(graph, len(x.index_sets)))
    return {"model": model, "tp": tp, "variant": g.variant, "HV": g.HV, "B": B, "state": state,
            "us": {name: statistics.median(values) for name, values in times.items()}}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--points", nargs="+", default=list(POINTS))
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--json", default=os.path.join(os.environ["OUT"], "slot_copy_shapes.json")
                        if os.environ.get("OUT") else None)
    args = parser.parse_args(argv)
    results = []
    for point in (parse_point(text) for text in args.points):
        row = measure(point, args.rounds)
        print(f"{row['variant']} tp{row['tp']} HV={row['HV']} B={row['B']} {row['state']}: "
              + "  ".join(f"{name} {us:.2f}" for name, us in row["us"].items()), flush=True)
        results.append(row)
        torch.cuda.empty_cache()
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__, "points": results},
                      handle, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
