"""Nsight Compute evidence for the decode points that stay below target: achieved DRAM bandwidth of one
launch of ours and of sglang's fastest path per point (its Triton kernel for GDN; for KDA its Helion decode
when helion imports, else its Triton kernel), run under ncu by `main`, which re-executes itself.

    GDR_CHECK_SGLANG_PATH=<wheel> PYTHONPATH=src python benchmarks/ncu_points.py        # needs ncu on PATH
"""

from __future__ import annotations

import csv
import io
import os
import shutil
import subprocess
import sys

# (variant, H, HV, state, B): the points where sglang's fastest path came out ahead of ours (within 0.5 %) in
# the 15:04 UTC graph-replay run of 2026-12-01 (Kimi-Linear tp 4 and tp 1).
POINTS = (("kda", 8, 8, "fp32", 512), ("kda", 8, 8, "bf16", 128), ("kda", 32, 32, "fp32", 128),
          ("kda", 32, 32, "bf16", 512))
METRICS = ("gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,"
           "dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active,"
           "launch__registers_per_thread,launch__occupancy_limit_registers,launch__grid_size")


def child() -> None:
    import argparse

    import torch

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import decode_vs_sglang as bench

    from gdr_check.kernel.engines import load_sglang_packed_decode

    gdn, kda = load_sglang_packed_decode()
    sglang = bench.sglang_impl(gdn, kda)
    refs: dict[str, object] = {}
    print("helion:", bench.load_helion(os.environ.get("GDR_CHECK_SGLANG_PATH"), argparse.Namespace(no_helion=False),
                                       refs), file=sys.stderr)
    ours = bench.ours_impl(None)
    for variant, H, HV, state, B in POINTS:
        reference = refs.get("sglang_helion", sglang) if variant == "kda" else sglang
        g = bench.Geometry("point", 1, variant, H, HV, 128, 128)
        x = bench.make_inputs(g, B, state, 4 * B + 1, 4, seed=1)
        for impl in (ours, reference):  # compile outside the profiled launches
            impl(x, x.index_sets[0], x.pool, x.out)  # type: ignore[operator]
        torch.cuda.synchronize()
        ours(x, x.index_sets[1], x.pool, x.out)  # kept: a slot set not touched since the warm-up
        reference(x, x.index_sets[2], x.pool, x.out)  # type: ignore[operator]
        torch.cuda.synchronize()
        del x
        torch.cuda.empty_cache()


def main() -> int:
    if os.environ.get("NCU_POINTS_CHILD"):
        child()
        return 0
    if len(sys.argv) > 1:
        print(f"usage: python {sys.argv[0]}  (no arguments: profiles the points in POINTS with Nsight Compute; "
              "$OUT, if set, receives ncu_raw.csv)")
        return 0 if sys.argv[1] in ("-h", "--help") else 2
    if shutil.which("ncu") is None:
        print("error: Nsight Compute's `ncu` is not on PATH", file=sys.stderr)
        return 2
    # Every decode launch is profiled (ours, sglang's Triton kernel, Helion's `..._packed_decode_body`); per point
    # the third and fourth (ours, then sglang's) are kept, the first two being the warm-up that compiled them.
    command = ["ncu", "--clock-control", "none", "--metrics", METRICS, "--csv", "--print-units", "base",
               "--kernel-name", "regex:packed_decode", sys.executable, os.path.abspath(__file__)]
    done = subprocess.run(command, capture_output=True, text=True, env={**os.environ, "NCU_POINTS_CHILD": "1"})
    text = done.stdout
    start = text.find('"ID"')
    if start < 0:
        print(done.stdout[-3000:], done.stderr[-3000:])
        return 1
    if os.environ.get("OUT"):
        with open(os.path.join(os.environ["OUT"], "ncu_raw.csv"), "w") as handle:
            handle.write(text[start:])
    rows = list(csv.DictReader(io.StringIO(text[start:])))
    table: dict[tuple[str, str], dict[str, str]] = {}
    for row in rows:
        value = row["Metric Value"].replace(",", "")  # ncu groups thousands
        table.setdefault((row["ID"], row["Kernel Name"][:60]), {})[row["Metric Name"]] = value
    print("kernel | us | DRAM read MB | write MB | achieved TB/s | DRAM % of peak | warps active % | regs")
    for (launch, name), m in table.items():
        if int(launch) % 4 < 2:
            continue
        if int(launch) % 4 == 2:
            print(POINTS[int(launch) // 4])
        seconds = float(m["gpu__time_duration.sum"]) * 1e-9
        read, write = float(m["dram__bytes_read.sum"]), float(m["dram__bytes_write.sum"])
        print(f"{name} | {seconds * 1e6:.1f} | {read / 1e6:.1f} | {write / 1e6:.1f} | "
              f"{(read + write) / seconds / 1e12:.2f} | {m['dram__throughput.avg.pct_of_peak_sustained_elapsed']} | "
              f"{m['sm__warps_active.avg.pct_of_peak_sustained_active']} | {m['launch__registers_per_thread']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
