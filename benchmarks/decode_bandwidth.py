"""GDN packed-decode bandwidth on a CUDA GPU: our Triton kernel vs sglang 0.5.23 vs the copy roofline.

Bytes per call follow docs/kernel-contract.md §11: B * (2 * state bytes per row + mixed_qkv row bytes
+ out row bytes). Timing is CUDA-graph replay (median of replays) of a graph that launches the kernel once
per slot set; consecutive launches use disjoint slot sets whose states add up to several times the L2, so
every launch streams its state from HBM ("cold"). ``--warm`` also times one launch on the same slots every
replay, the method behind the reference figures. Every configuration is checked against the float64
reference first (fp32 state: max error / max |ref| <= 1e-5).

    python benchmarks/decode_bandwidth.py                # table on stdout, JSON under $OUT if set
    python benchmarks/decode_bandwidth.py --tune         # also time every candidate tiling per point
    GDR_CHECK_SGLANG_PATH=.sglang/src python benchmarks/decode_bandwidth.py   # adds the sglang columns
"""

from __future__ import annotations

import argparse
import datetime
import itertools
import json
import math
import os
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

import torch
import triton

from gdr_check.kernel.gdn.checked import packed_decode
from gdr_check.kernel.gdn.fused import launch_packed_decode
from gdr_check.kernel.gdn.naive import naive_packed_decode
from gdr_check.kernel.tiling import TileConfig, pick_config

K = V = 128
HEAD_SHAPES = ((16, 32), (4, 8), (16, 64))
BATCHES = (1, 8, 32, 128, 512)
STATE_DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}
ACTIVATION = torch.bfloat16
ROTATION_BYTES = 256 << 20  # state bytes per graph replay: over 4x the H200's 60 MB L2
MAX_SETS = 512
REPLAYS = 15
FP32_STATE_TOLERANCE = 1e-5
BF16_STATE_TOLERANCE = 1e-2

# sglang 0.5.23 on an H200, docs/kernel-contract.md §11 (TB/s; one launch, same slots every replay).
REFERENCE_TBPS = {
    (16, 32, "fp32"): (0.48, 2.16, 3.19, 3.86, 4.06),
    (16, 32, "bf16"): (0.28, 1.49, 2.55, 3.54, 3.97),
    (4, 8, "fp32"): (0.12, 0.82, 2.12, 3.19, 3.87),
    (4, 8, "bf16"): (0.07, 0.51, 1.51, 2.58, 3.54),
    (16, 64, "fp32"): (0.82, 2.58, 3.64, 4.00, 4.10),
    (16, 64, "bf16"): (0.52, 1.94, 3.16, 3.84, 4.06),
}

# Tilings timed by --tune (see kernel/tiling.py for the fields).
_T = TileConfig
CANDIDATES = (
    _T(4), _T(8), _T(16), _T(8, evict_first=True), _T(16, evict_first=True), _T(32),
    _T(16, 2, num_stages=2, prefetch=False), _T(16, 2, num_stages=2, prefetch=False, evict_first=True),
    _T(8, 4), _T(8, 4, evict_first=True), _T(16, 2), _T(16, 2, evict_first=True),
)


def config_label(c: TileConfig) -> str:
    return (f"{c.block_v}x{c.tiles_per_program}/w{c.num_warps}/s{c.num_stages}{'/E' if c.evict_first else ''}"
            f"{'/np' if not c.prefetch else ''}"
            f"{f'/r{c.max_registers}' if c.max_registers else ''}{f'/L{c.loop_stages}' if c.loop_stages > 1 else ''}"
            f"{'/Lo' if c.evict_first and not c.hint_stores else ''}{'/K' if c.keep_inputs else ''}"
            f"{'/1w' if c.lift_registers else ''}")


def bytes_per_call(B: int, H: int, HV: int, state_itemsize: int, act_itemsize: int = 2) -> int:
    state = HV * V * K * state_itemsize
    return B * (2 * state + (2 * H * K + HV * V) * act_itemsize + HV * V * act_itemsize)


@dataclass
class Problem:
    """Inputs for one (B, H, HV, state dtype) point, with ``sets`` disjoint slot sets for rotation."""

    B: int
    H: int
    HV: int
    state: str
    sets: int
    mixed_qkv: torch.Tensor = field(repr=False)
    a: torch.Tensor = field(repr=False)
    b: torch.Tensor = field(repr=False)
    A_log: torch.Tensor = field(repr=False)
    dt_bias: torch.Tensor = field(repr=False)
    pool: torch.Tensor = field(repr=False)
    out: torch.Tensor = field(repr=False)
    index_sets: list[torch.Tensor] = field(repr=False)

    @property
    def scale(self) -> float:
        return K**-0.5

    def args(self, indices: torch.Tensor, pool: torch.Tensor | None = None, out: torch.Tensor | None = None):
        pool = self.pool if pool is None else pool
        out = self.out if out is None else out
        return (self.mixed_qkv, self.a, self.b, self.A_log, self.dt_bias, self.scale, pool, out, indices, True)


def make_problem(B: int, H: int, HV: int, state: str, seed: int) -> Problem:
    torch.manual_seed(seed)
    dev = "cuda"
    row_state_bytes = HV * V * K * STATE_DTYPES[state].itemsize
    sets = max(2, min(MAX_SETS, math.ceil(ROTATION_BYTES / (B * row_state_bytes))))
    pool = torch.randn(sets * B + 1, HV, V, K, device=dev, dtype=STATE_DTYPES[state]).mul_(0.1)
    slots = (torch.randperm(sets * B, device=dev) + 1).to(torch.int32).view(sets, B)
    return Problem(
        B, H, HV, state, sets,
        mixed_qkv=torch.randn(B, 2 * H * K + HV * V, device=dev, dtype=ACTIVATION),
        a=torch.randn(B, HV, device=dev, dtype=ACTIVATION),
        b=torch.randn(B, HV, device=dev, dtype=ACTIVATION),
        A_log=torch.empty(HV, device=dev).uniform_(0.0, 2.5),
        dt_bias=torch.randn(HV, device=dev) * 0.5,
        pool=pool,
        out=torch.empty(B, 1, HV, V, device=dev, dtype=ACTIVATION),
        index_sets=[s.contiguous() for s in slots],
    )


def capture(launch: Callable[[torch.Tensor], object], index_sets: list[torch.Tensor]) -> torch.cuda.CUDAGraph:
    """A CUDA graph that launches once per slot set (compiled and warmed up outside the capture)."""
    for indices in index_sets[:2]:
        launch(indices)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        launch(index_sets[0])
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for indices in index_sets:
            launch(indices)
    return graph


def replay_us(graph: torch.cuda.CUDAGraph, launches: int) -> float:
    """Median per-launch time over REPLAYS replays of `graph`, which holds `launches` launches."""
    warm_up_until = time.perf_counter() + 0.02  # >= 3 replays and 20 ms: clocks up, caches in steady state
    for replay in itertools.count():
        graph.replay()
        torch.cuda.synchronize()
        if replay >= 2 and time.perf_counter() > warm_up_until:
            break
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(REPLAYS):
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e3 / launches)
    return statistics.median(times)


def graph_time_us(launch: Callable[[torch.Tensor], object], index_sets: list[torch.Tensor]) -> float:
    """Median time per launch of a CUDA graph that launches once per slot set (the graph is freed on return)."""
    return replay_us(capture(launch, index_sets), len(index_sets))


def matched_copy_us(total_bytes: int, sets: int) -> float:
    """Per-copy time of a device-to-device copy moving the same bytes (read + write), rotated like the kernel."""
    words = total_bytes // 2 // 4
    src = torch.randn(sets, words, device="cuda")
    dst = torch.empty_like(src)
    slots = [torch.tensor(i) for i in range(sets)]
    return graph_time_us(lambda i: dst[int(i)].copy_(src[int(i)]), slots)  # src, dst freed on return


def copy_roofline_tbps(size_bytes: int = 4 << 30) -> float:
    src = torch.empty(size_bytes, dtype=torch.uint8, device="cuda").random_(0, 255)
    dst = torch.empty_like(src)
    for _ in range(3):
        dst.copy_(src)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(20):
        start.record()
        dst.copy_(src)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e-3)
    del src, dst  # 2 x size_bytes: free them before the caller allocates its pools
    torch.cuda.empty_cache()
    return 2 * size_bytes / statistics.median(times) / 1e12


def verify(problem: Problem, sglang_gdn: Callable | None, use_wrapper: bool) -> dict:
    """One step on a fresh copy of the pool against the float64 reference (sglang profile, -1 padding row)."""
    result = measure_errors(problem, sglang_gdn, use_wrapper)
    torch.cuda.empty_cache()  # the reference and the pool copies were freed when measure_errors returned
    tolerance = FP32_STATE_TOLERANCE if problem.state == "fp32" else BF16_STATE_TOLERANCE
    result["ok"] = all(
        r["state_rel"] <= tolerance and r["out_rel"] <= 2e-2 and r["untouched_intact"] and r["out_finite"]
        for r in result.values() if isinstance(r, dict)
    ) and "wrapper_error" not in result
    return result


def measure_errors(problem: Problem, sglang_gdn: Callable | None, use_wrapper: bool) -> dict:
    """Relative state and output errors of ours (and sglang's) against the float64 reference."""
    B = problem.B
    indices = problem.index_sets[0].clone()
    if B > 1:
        indices[-1] = -1
    touched = indices[indices >= 0].long()
    pool = problem.pool.clone() if problem.pool.numel() * problem.pool.element_size() < (8 << 30) else None
    if pool is None:  # keep memory bounded: verify on a pool of only the touched slots
        pool = torch.zeros((B + 1, *problem.pool.shape[1:]), device="cuda", dtype=problem.pool.dtype)
        pool[1 : touched.numel() + 1] = problem.pool[touched]
        indices = torch.where(indices >= 0, torch.arange(1, B + 1, device="cuda", dtype=torch.int32), indices)
        touched = indices[indices >= 0].long()
    ref_out, ref_pool = naive_packed_decode(*problem.args(indices, pool=pool, out=problem.out))
    ref_state = ref_pool[touched]
    scale = ref_state.abs().max().item()
    result = {}

    def errors(new_pool: torch.Tensor, out: torch.Tensor, name: str) -> None:
        state_err = (new_pool[touched].double() - ref_state).abs().max().item() / scale
        out_err = ((out.double() - ref_out).abs().max() / ref_out.abs().max()).item()
        untouched = torch.ones(pool.shape[0], dtype=torch.bool, device="cuda")
        untouched[touched] = False
        intact = torch.equal(new_pool[untouched], pool[untouched])
        result[name] = {"state_rel": state_err, "out_rel": out_err, "untouched_intact": intact,
                        "out_finite": bool(torch.isfinite(out).all())}

    ours_pool, ours_out = pool.clone(), torch.full_like(problem.out, float("nan"))
    try:
        run = packed_decode if use_wrapper else launch_packed_decode
        run(*problem.args(indices, pool=ours_pool, out=ours_out), engine="sglang")
    except ValueError as exc:  # a contract refusal here is a finding of its own; still check the numerics
        result["wrapper_error"] = str(exc)
        launch_packed_decode(*problem.args(indices, pool=ours_pool, out=ours_out), engine="sglang")
    errors(ours_pool, ours_out, "ours")
    if sglang_gdn is not None:
        sg_pool, sg_out = pool.clone(), torch.full_like(problem.out, float("nan"))
        sglang_gdn(*problem.args(indices, pool=sg_pool, out=sg_out))
        errors(sg_pool, sg_out, "sglang")
    return result


def checked_wrapper_available() -> bool:
    try:
        from gdr_check import check_packed_decode  # noqa: F401
    except ImportError:
        return False
    return True


def load_sglang() -> tuple[Callable | None, str]:
    try:
        from gdr_check.kernel.engine_kernels import load_sglang_packed_decode

        gdn, _ = load_sglang_packed_decode()
        return gdn, gdn.source_path
    except (FileNotFoundError, ImportError) as exc:
        return None, f"not loaded: {exc}"


def run_point(problem: Problem, sglang_gdn, args) -> dict:
    tbytes = bytes_per_call(problem.B, problem.H, problem.HV, STATE_DTYPES[problem.state].itemsize) / 1e12
    chosen = pick_config(problem.B * problem.HV, V, K, STATE_DTYPES[problem.state].itemsize)

    def ours(config: TileConfig) -> Callable:
        return lambda idx: launch_packed_decode(*problem.args(idx), engine="sglang", config=config)

    point = {"B": problem.B, "H": problem.H, "HV": problem.HV, "state": problem.state, "sets": problem.sets,
             "bytes": tbytes * 1e12, "config": asdict(chosen)}
    point["ours_us"] = graph_time_us(ours(chosen), problem.index_sets)
    if args.tune:
        tuned = {}
        for config in CANDIDATES:
            fitted = config.fitted(V, K)
            if fitted != config:
                continue
            tuned[config_label(config)] = graph_time_us(ours(config), problem.index_sets)
        point["tune_us"] = tuned
        point["best"], point["best_us"] = min(tuned.items(), key=lambda kv: kv[1])
        if args.warm_tune:
            point["tune_warm_us"] = {config_label(c): graph_time_us(ours(c), [problem.index_sets[0]])
                                     for c in CANDIDATES if c.fitted(V, K) == c}
    if sglang_gdn is not None:
        point["sglang_us"] = graph_time_us(lambda idx: sglang_gdn(*problem.args(idx)), problem.index_sets)
    if args.warm:
        same = [problem.index_sets[0]]
        point["ours_warm_us"] = graph_time_us(ours(chosen), same)
        if sglang_gdn is not None:
            point["sglang_warm_us"] = graph_time_us(lambda idx: sglang_gdn(*problem.args(idx)), same)
    point["copy_us"] = matched_copy_us(int(point["bytes"]), problem.sets)  # last: it reallocates memory
    for key in [k for k in point if k.endswith("_us") and not k.startswith("tune")]:
        point[key.replace("_us", "_tbps")] = tbytes / (point[key] * 1e-6)
    return point


def environment() -> dict:
    props = torch.cuda.get_device_properties(0)
    return {
        "device": props.name, "sms": props.multi_processor_count,
        "torch": torch.__version__, "triton": triton.__version__,
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    }


def fmt(x: float | None, spec: str) -> str:
    return "-" if x is None else format(x, spec)


def print_table(points: list[dict], roofline: float) -> None:
    """One line per point. roof: share of the big-copy roofline; @size: ours over a same-size copy."""
    header = (f"{'H,HV':>6} {'state':>5} {'B':>4} | {'ours us':>8} {'TB/s':>5} {'roof':>5} {'@size':>5} | "
              f"{'sgl us':>8} {'TB/s':>5} {'ratio':>5} | {'ref':>5} {'/ref':>5} | {'warm us o/s':>13} | ok  config")
    print(header)
    print("-" * len(header))
    for p in points:
        ref = REFERENCE_TBPS.get((p["H"], p["HV"], p["state"]))
        ref_tbps = ref[BATCHES.index(p["B"])] if ref and p["B"] in BATCHES else None
        ratio = p["sglang_us"] / p["ours_us"] if "sglang_us" in p else None
        warm = (f"{fmt(p.get('ours_warm_us'), '.1f')}/{fmt(p.get('sglang_warm_us'), '.1f')}"
                if "ours_warm_us" in p else "-")
        at_size = p["copy_us"] / p["ours_us"] if "copy_us" in p else None
        print(f"{p['H']:>2},{p['HV']:>3} {p['state']:>5} {p['B']:>4} | {p['ours_us']:>8.1f} "
              f"{p['ours_tbps']:>5.2f} {p['ours_tbps'] / roofline:>5.1%} {fmt(at_size, '5.1%')} | "
              f"{fmt(p.get('sglang_us'), '8.1f')} {fmt(p.get('sglang_tbps'), '5.2f')} {fmt(ratio, '5.2f')} | "
              f"{fmt(ref_tbps, '5.2f')} {fmt(p['ours_tbps'] / ref_tbps if ref_tbps else None, '5.2f')} | "
              f"{warm:>13} | {'yes' if p['verify']['ok'] else 'NO '} {config_label(TileConfig(**p['config']))}"
              + (f"  best {p['best']} {p['best_us']:.1f}us" if "best" in p else ""))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tune", action="store_true", help="time every candidate tiling at every point")
    parser.add_argument("--warm", action="store_true", help="also time one launch on the same slots (reference method)")
    parser.add_argument("--warm-tune", action="store_true", help="with --tune, time every candidate that way too")
    parser.add_argument("--batches", type=int, nargs="*", default=list(BATCHES))
    parser.add_argument("--heads", type=str, nargs="*", default=[f"{h},{hv}" for h, hv in HEAD_SHAPES])
    parser.add_argument("--states", nargs="*", default=list(STATE_DTYPES))
    parser.add_argument("--json", default=os.path.join(os.environ["OUT"], "decode_bandwidth.json")
                        if os.environ.get("OUT") else None)
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("decode_bandwidth: no CUDA device", file=sys.stderr)
        return 2

    env = environment()
    sglang_gdn, sglang_source = load_sglang()
    use_wrapper = checked_wrapper_available()
    env.update(sglang=sglang_source, checked_wrapper=use_wrapper)
    roofline = copy_roofline_tbps()
    env["copy_roofline_tbps"] = roofline
    print(json.dumps(env), flush=True)

    points, failures = [], 0
    for heads in args.heads:
        H, HV = (int(x) for x in heads.split(","))
        for state in args.states:
            for B in args.batches:
                problem = make_problem(B, H, HV, state, seed=B * 1000 + HV)
                try:
                    point = run_point(problem, sglang_gdn, args)
                    point["verify"] = verify(problem, sglang_gdn, use_wrapper)
                except Exception as exc:  # noqa: BLE001 - report the point and carry on: device time is scarce
                    print(f"FAILED H={H} HV={HV} {state} B={B}: {exc!r}", flush=True)
                    failures += 1
                    continue
                finally:
                    del problem
                    torch.cuda.empty_cache()
                points.append(point)
                print(json.dumps(point), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"environment": env, "points": points}, f, indent=1)
    print(f"\n{env['device']}  torch {env['torch']}  triton {env['triton']}  {env['date']}  "
          f"copy roofline {roofline:.2f} TB/s  sglang: {sglang_source}")
    print_table(points, roofline)
    return 0 if not failures and all(p["verify"]["ok"] for p in points) else 1


if __name__ == "__main__":
    sys.exit(main())
