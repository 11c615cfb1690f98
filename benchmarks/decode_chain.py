"""One GDN decode layer as sglang 0.5.23 runs it, on a CUDA GPU: the packed decode between its two neighbours.

In sglang's Qwen3-Next decode the packed decode kernel sits between `causal_conv1d_update` (its output is
`mixed_qkv`) and `FusedRMSNormGated` (it reads `out`). Both neighbours are launched programmatically (PDL) on
sm_90+: the conv kernel waits for the grid before it and lets the next grid launch at once; the norm waits for
the grid before it. sglang's own decode kernel is launched plainly, so the chain breaks at it; gdr-check's is
launched programmatically up to `tiling.PROGRAMMATIC_MAX_PAIRS` (row, value head) pairs.

This times the three kernels per layer over `layers` layers (each with its own conv and state pools, so the
state streams from HBM as in a model), captured in one CUDA graph and replayed (as the engines decode), for
each decode kernel: sglang's Triton kernel, ours as launched by default, and ours launched plainly. Figures are
µs per layer (the three kernels), the median of interleaved rounds; the decode alone is also timed in the same
way (no neighbours) for reference. The neighbours are sglang's own files, run unmodified from the wheel with
stand-ins for the two helper modules they import (as `gdr_check.kernel.engine_kernels` loads `fused_recurrent.py`).

    GDR_CHECK_SGLANG_PATH=<sglang 0.5.23 wheel> PYTHONPATH=src python benchmarks/decode_chain.py   # JSON under $OUT
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import statistics
import sys
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import triton

# Same graph method as the other benchmarks (run from this folder, as `python benchmarks/...`).
from decode_bandwidth import replay_us
from decode_vs_sglang import geometry

from gdr_check.kernel.engine_kernels import (
    SGLANG_PATH_ENV,
    extract_from_wheel,
    load_sglang_packed_decode,
    modules_restored,
)
from gdr_check.kernel.gdn.fused import launch_packed_decode

CONV_FILE = "sglang/kernels/ops/mamba/causal_conv1d_triton.py"
NORM_FILE = "sglang/kernels/ops/attention/fla/fused_norm_gate.py"
STATE_BYTES_PER_GRAPH = 256 << 20  # over 4x the H200's L2: every layer's state comes from HBM
CONV_WIDTH = 4


def _standins() -> dict[str, types.ModuleType]:
    """The two sglang helper modules the neighbours import, as far as they use them."""
    jit_utils = types.ModuleType("sglang.kernels.jit.utils")
    capability = torch.cuda.get_device_capability()
    jit_utils.is_arch_support_pdl = lambda: capability[0] >= 9  # type: ignore[attr-defined]
    arch = types.SimpleNamespace(major=capability[0], minor=capability[1])
    jit_utils.get_jit_cuda_arch = lambda: arch  # type: ignore[attr-defined]
    srt_utils = types.ModuleType("sglang.srt.utils")
    srt_utils.cdiv = triton.cdiv  # type: ignore[attr-defined]
    srt_utils.next_power_of_2 = triton.next_power_of_2  # type: ignore[attr-defined]
    srt_utils.is_cpu = srt_utils.is_npu = srt_utils.cpu_has_amx_support = lambda: False  # type: ignore[attr-defined]
    names = ("sglang", "sglang.kernels", "sglang.kernels.jit", "sglang.srt")
    modules = {name: types.ModuleType(name) for name in names}
    for module in modules.values():
        module.__path__ = []
    modules[jit_utils.__name__], modules[srt_utils.__name__] = jit_utils, srt_utils
    return modules


def load_neighbours(wheel: str) -> tuple[Callable[..., Any], type]:
    """sglang's `causal_conv1d_update` and `FusedRMSNormGated`, executed from the wheel's files (extracted: Triton
    reads a kernel's source from its file)."""
    folder = extract_from_wheel(Path(wheel).resolve(), (CONV_FILE, NORM_FILE))
    loaded = {}
    stand_ins = _standins()
    with modules_restored(stand_ins):
        sys.modules.update(stand_ins)
        for name, member in (("conv", CONV_FILE), ("norm", NORM_FILE)):
            spec = importlib.util.spec_from_file_location(f"gdr_check_reference_{name}", folder / member)
            assert spec is not None and spec.loader is not None
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            loaded[name] = module
    return loaded["conv"].causal_conv1d_update, loaded["norm"].FusedRMSNormGated


def build(g: Any, B: int, layers: int, norm_type: type, dev: str = "cuda") -> dict[str, Any]:
    act = torch.bfloat16 if dev == "cuda" else torch.float16  # (the interpreter has no bf16)
    dim = 2 * g.H * g.K + g.HV * g.V
    torch.manual_seed(B)
    norm = norm_type(g.V, eps=1e-6, activation="silu", device=dev, dtype=act)
    torch.nn.init.ones_(norm.weight)
    return {
        "x": torch.randn(B, dim, device=dev).to(act),
        "weight": torch.randn(dim, CONV_WIDTH, device=dev).to(act) * 0.3,
        "a": torch.randn(B, g.HV, device=dev).to(act), "b": torch.randn(B, g.HV, device=dev).to(act),
        "A_log": torch.empty(g.HV, device=dev).uniform_(0.0, 2.5), "dt_bias": torch.randn(g.HV, device=dev) * 0.5,
        "z": torch.randn(B, g.HV, g.V, device=dev).to(act), "norm": norm,
        "indices": torch.arange(1, B + 1, device=dev, dtype=torch.int32),
        "conv": [torch.randn(B + 1, dim, CONV_WIDTH - 1, device=dev).to(act) for _ in range(layers)],
        "pools": [torch.randn(B + 1, g.HV, g.V, g.K, device=dev) * 0.1 for _ in range(layers)],
        "out": torch.empty(B, 1, g.HV, g.V, device=dev, dtype=act),
    }


def decoders(sglang_gdn: Callable[..., Any]) -> dict[str, Callable[..., Any]]:
    return {
        "sglang": lambda *args: sglang_gdn(*args),
        "ours": lambda *args: launch_packed_decode(*args, engine="sglang"),
        "ours_plain": lambda *args: launch_packed_decode(*args, engine="sglang", programmatic=False),
    }


def layer_step(t: dict[str, Any], g: Any, conv_update: Callable[..., Any], decode: Callable[..., Any],
               neighbours: bool) -> Callable[[], None]:
    """All layers once: conv update -> packed decode -> gated norm per layer (or the decode alone)."""
    scale = g.K ** -0.5

    def run() -> None:
        for conv_pool, pool in zip(t["conv"], t["pools"], strict=True):
            mixed = conv_update(t["x"], conv_pool, t["weight"], None, "silu",
                                conv_state_indices=t["indices"]) if neighbours else t["x"]
            decode(mixed, t["a"], t["b"], t["A_log"], t["dt_bias"], scale, pool, t["out"], t["indices"], True)
            if neighbours:
                t["norm"](t["out"].view(-1, g.V), t["z"].view(-1, g.V))
    return run


def captured(run: Callable[[], None]) -> torch.cuda.CUDAGraph:
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(2):  # compile and warm outside the capture
            run()
    torch.cuda.current_stream().wait_stream(stream)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        run()
    return graph


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--geometries", nargs="*", default=["Qwen/Qwen3-Next-80B-A3B-Instruct@4",
                                                             "Qwen/Qwen3-Next-80B-A3B-Instruct@1",
                                                             "Qwen/Qwen3.5-397B-A17B@8"])
    parser.add_argument("--batches", type=int, nargs="*", default=[1, 8, 32])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--json", default=os.path.join(os.environ["OUT"], "decode_chain.json")
                        if os.environ.get("OUT") else None)
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        raise SystemExit("decode_chain.py needs a CUDA device")
    wheel = os.environ.get(SGLANG_PATH_ENV)
    if not wheel or not wheel.endswith(".whl"):
        raise SystemExit(f"set {SGLANG_PATH_ENV} to the sglang 0.5.23 wheel (its conv and norm files are read)")
    conv_update, norm_type = load_neighbours(wheel)
    sglang_gdn, _ = load_sglang_packed_decode()
    points = []
    for entry in args.geometries:
        model, tp = entry.rsplit("@", 1)
        g = geometry(model, int(tp))
        for B in args.batches:
            layers = max(8, min(256, math.ceil(STATE_BYTES_PER_GRAPH / (B * g.HV * g.V * g.K * 4))))
            t = build(g, B, layers, norm_type)
            graphs = {}
            for name, decode in decoders(sglang_gdn).items():
                for neighbours in (True, False):
                    graphs[(name, neighbours)] = captured(layer_step(t, g, conv_update, decode, neighbours))
            times: dict[tuple[str, bool], list[float]] = {key: [] for key in graphs}
            for _ in range(args.rounds):
                for key, graph in graphs.items():
                    times[key].append(replay_us(graph, layers))
            us = {f"{name}{'' if neighbours else ':alone'}": statistics.median(values)
                  for (name, neighbours), values in times.items()}
            point = {"model": model, "tp": int(tp), "H": g.H, "HV": g.HV, "B": B, "layers": layers, "us": us}
            points.append(point)
            print(f"{g.label} B={B:>3} ({layers} layers) per layer, conv+decode+norm: sglang {us['sglang']:.2f}"
                  f" | ours {us['ours']:.2f} ({us['ours'] / us['sglang']:.3f}) | ours plain {us['ours_plain']:.2f}"
                  f" || decode alone: sglang {us['sglang:alone']:.2f} ours {us['ours:alone']:.2f}"
                  f" plain {us['ours_plain:alone']:.2f}", flush=True)
            del graphs, t
            torch.cuda.empty_cache()
    if args.json:
        environment = {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                       "triton": triton.__version__, "rounds": args.rounds}
        Path(args.json).write_text(json.dumps({"environment": environment, "points": points}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
