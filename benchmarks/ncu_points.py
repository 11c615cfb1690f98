"""Nsight Compute evidence for the decode points that stay below target: achieved DRAM bandwidth of one
launch of ours, of sglang's fastest path (its Triton kernel for GDN; for KDA its Helion decode when helion
imports, else its Triton kernel) and of the slot copy (the state rows read and written in place at their
slots, `decode_vs_sglang._slot_copy_kernel`: the floor any slot-pool kernel meets) per point, run under ncu by
`main`, which re-executes itself. `--stalls` adds a second pass with the warp-state section and prints, per
launch, the stall reasons that take most of a warp's cycles between instructions (what a latency-bound launch
waits on).

    GDR_CHECK_SGLANG_PATH=<wheel> PYTHONPATH=src python benchmarks/ncu_points.py [--points kda:8:8:fp32:512 ...]
        [--stalls]      # needs ncu on PATH; $OUT, if set, receives the raw CSVs
"""

from __future__ import annotations

import argparse
import csv
import io
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator

# (variant, H, HV, state, B): the points where sglang's fastest path came out ahead of ours (within 0.5 %) in
# the 15:04 UTC graph-replay run of 2026-12-01 (Kimi-Linear tp 4 and tp 1).
POINTS = (("kda", 8, 8, "fp32", 512), ("kda", 8, 8, "bf16", 128), ("kda", 32, 32, "fp32", 128),
          ("kda", 32, 32, "bf16", 512))
METRICS = ("gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,"
           "dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active,"
           "launch__registers_per_thread,launch__occupancy_limit_registers,launch__grid_size,smsp__inst_executed.sum")
KERNELS = "regex:packed_decode|_slot_copy_kernel"  # ours, sglang's Triton and Helion kernels, the slot copy
LAUNCHES_PER_POINT = 3  # ours, sglang's fastest path, the slot copy: each launched twice, the second kept
CHECKED_ENV = "NCU_POINTS_CHECKED"  # the child also launches the checked kernel, right after ours (--checked)


def launches_per_point(checked: bool) -> int:
    return LAUNCHES_PER_POINT + int(checked)
STALL_PREFIX, STALL_SUFFIX = "smsp__average_warps_issue_stalled_", "_per_issue_active.ratio"


def parse_points(specs: list[str] | None) -> tuple[tuple[str, int, int, str, int], ...]:
    """`variant:H:HV:state:B` specs (e.g. gdn:4:8:bf16:1), or POINTS; ValueError names a bad one."""
    if not specs:
        return POINTS
    points = []
    for spec in specs:
        parts = spec.split(":")
        try:
            variant, H, HV, state, B = parts[0], int(parts[1]), int(parts[2]), parts[3], int(parts[4])
            valid = len(parts) == 5 and variant in ("gdn", "kda") and state in ("fp32", "bf16") and min(H, HV, B) > 0 \
                and HV % H == 0
        except (IndexError, ValueError):
            valid = False
        if not valid:
            raise ValueError(f"{spec!r} is not VARIANT:H:HV:STATE:B (gdn or kda, fp32 or bf16, HV a multiple of H, "
                             "all counts positive)")
        points.append((variant, H, HV, state, B))
    return tuple(points)


def child() -> None:
    import argparse

    import torch

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import decode_vs_sglang as bench

    from gdr_check.kernel.engine_kernels import load_sglang_packed_decode

    gdn, kda = load_sglang_packed_decode()
    sglang = bench.sglang_impl(gdn, kda)
    refs: dict[str, object] = {}
    print("helion:", bench.load_helion(os.environ.get("GDR_CHECK_SGLANG_PATH"), argparse.Namespace(no_helion=False),
                                       refs), file=sys.stderr)
    ours = bench.ours_impl(None)
    checked = os.environ.get(CHECKED_ENV) == "1"
    for variant, H, HV, state, B in parse_points(os.environ["NCU_POINTS_CHILD"].split()):
        reference = refs.get("sglang_helion", sglang) if variant == "kda" else sglang
        g = bench.Geometry("point", 1, variant, H, HV, 128, 128)
        x = bench.make_inputs(g, B, state, 5 * B + 1, 5, seed=1)
        slot_copy = bench.slot_copy_launch(x, *bench.SLOT_COPY_SHAPES[0])  # the decode table's floor is the
        # faster of its shapes; the first (2048 elements x 4 warps) was it at every B = 1 point
        # Set 0: the warm-up that compiles them; then each kept launch on a slot set not touched since (1-4).
        for ours_set, checked_set, reference_set, copy_set in ((0, 0, 0, 0), (1, 4, 2, 3)):
            ours(x, x.index_sets[ours_set], x.pool, x.out)
            if checked:
                bench.checked_impl(x, x.index_sets[checked_set], x.pool, x.out)
            reference(x, x.index_sets[reference_set], x.pool, x.out)  # type: ignore[operator]
            slot_copy(x.index_sets[copy_set])
            torch.cuda.synchronize()
        del x
        torch.cuda.empty_cache()

def profile(points: tuple[tuple[str, int, int, str, int], ...], extra: list[str], checked: bool = False
            ) -> list[dict[str, str]] | None:
    """The kept launches' ncu rows (one dict of metric name -> value per launch, with its kernel name), or None.
    `checked`: each point has the checked kernel's launch too, after ours."""
    command = ["ncu", "--clock-control", "none", "--csv", "--print-units", "base", "--kernel-name", KERNELS, *extra,
               sys.executable, os.path.abspath(__file__)]
    environment = {**os.environ, "NCU_POINTS_CHILD": " ".join(":".join(map(str, point)) for point in points),
                   CHECKED_ENV: "1" if checked else "0"}
    done = subprocess.run(command, capture_output=True, text=True, env=environment)
    text = done.stdout
    start = text.find('"ID"')
    if start < 0:
        print(done.stdout[-3000:], done.stderr[-3000:])
        return None
    if os.environ.get("OUT"):
        name = "ncu_stalls_raw.csv" if "--page" in extra else "ncu_raw.csv"
        with open(os.path.join(os.environ["OUT"], name), "w") as handle:
            handle.write(text[start:])
    launches: dict[str, dict[str, str]] = {}
    for row in csv.DictReader(io.StringIO(text[start:])):
        if "Metric Name" in row:  # one row per metric
            launch = launches.setdefault(row["ID"], {"kernel": row["Kernel Name"]})
            launch[row["Metric Name"]] = row["Metric Value"].replace(",", "")  # ncu groups thousands
        else:  # --page raw: one row per launch, a column per metric (the first data row holds the units)
            if row.get("ID", "").strip().isdigit():
                launches[row["ID"]] = {"kernel": row.get("Kernel Name", "")} | {
                    key: (value or "").replace(",", "") for key, value in row.items()}
    ordered = [launches[key] for key in sorted(launches, key=int)]
    # per point: twice its launches, the first half the warm-up that compiled them
    launches = launches_per_point(checked)
    per_point = 2 * launches
    if done.returncode != 0 or len(ordered) != per_point * len(points):
        print(f"error: ncu exited with {done.returncode} after {len(ordered)} profiled launches; expected "
              f"{per_point * len(points)} ({per_point} per point)", file=sys.stderr)
        return None
    kept = [row for index, row in enumerate(ordered) if index % per_point >= launches]
    ours = [row for index, row in enumerate(kept) if index % launches < launches - 2]  # and the checked kernel's
    if not all("packed_decode" in row["kernel"] for row in ours) or \
            not all("_slot_copy_kernel" in row["kernel"] for row in kept[launches - 1::launches]):
        order = "ours, the checked kernel, sglang's" if checked else "ours, sglang's"
        print(f"error: the profiled launches are not in the order {order}, the slot copy: "
              + ", ".join(row["kernel"][:40] for row in kept), file=sys.stderr)
        return None
    return kept


def _headed_by_point(rows: list[dict[str, str]], points: tuple[tuple[str, int, int, str, int], ...], launches: int
                     ) -> Iterator[dict[str, str]]:
    """`rows`, each point printed before its first launch (`launches` per point)."""
    for index, row in enumerate(rows):
        if index % launches == 0:
            print(points[index // launches])
        yield row


def main() -> int:
    if os.environ.get("NCU_POINTS_CHILD"):
        child()
        return 0
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--points", nargs="+", help="VARIANT:H:HV:STATE:B (default: the four KDA tie points)")
    parser.add_argument("--stalls", action="store_true", help="also the warp stall reasons per launch")
    parser.add_argument("--checked", action="store_true",
                        help="also the checked kernel (context='engine', the runtime guard's slot checks), after ours")
    args = parser.parse_args()
    try:
        points = parse_points(args.points)
    except ValueError as error:
        parser.error(f"--points: {error}")  # exit 2
    if shutil.which("ncu") is None:
        print("error: Nsight Compute's `ncu` is not on PATH", file=sys.stderr)
        return 2
    launches = launches_per_point(args.checked)
    rows = profile(points, ["--metrics", METRICS], args.checked)
    if rows is None:
        return 1
    print("kernel | us | DRAM read MB | write MB | achieved TB/s | DRAM % of peak | warps active % | regs | "
          "warp instructions")
    for m in _headed_by_point(rows, points, launches):
        seconds = float(m["gpu__time_duration.sum"]) * 1e-9
        read, write = float(m["dram__bytes_read.sum"]), float(m["dram__bytes_write.sum"])
        print(f"{m['kernel'][:60]} | {seconds * 1e6:.2f} | {read / 1e6:.2f} | {write / 1e6:.2f} | "
              f"{(read + write) / seconds / 1e12:.2f} | {m['dram__throughput.avg.pct_of_peak_sustained_elapsed']} | "
              f"{m['sm__warps_active.avg.pct_of_peak_sustained_active']} | {m['launch__registers_per_thread']} | "
              f"{m.get('smsp__inst_executed.sum', '?')}")
    if args.stalls:
        stalls = profile(points, ["--section", "WarpStateStats", "--page", "raw"], args.checked)
        if stalls is None:
            return 1
        print("kernel | cycles between a warp's instructions, by stall reason (largest four)")
        for m in _headed_by_point(stalls, points, launches):
            reasons = []
            for key, value in m.items():
                if key.startswith(STALL_PREFIX) and key.endswith(STALL_SUFFIX):
                    try:
                        reasons.append((float(value), key[len(STALL_PREFIX):-len(STALL_SUFFIX)]))
                    except ValueError:
                        continue
            top = ", ".join(f"{name} {cycles:.1f}" for cycles, name in sorted(reasons, reverse=True)[:4])
            print(f"{m['kernel'][:60]} | total {sum(c for c, _ in reasons):.1f}: {top}")
    return 0

if __name__ == "__main__":
    sys.exit(main())
