"""Experiment: the GDN decode kernel with the state moved by the bulk-copy engine (TMA), against ours and the
slot copy, side by side under CUDA-graph replay with the state cold in L2 (the inputs and graph method of
`decode_vs_sglang.py`).

The one route to more state bytes in flight per SM that the tiling sweeps had not tried
(docs/performance.md, *Nsight Compute: where the bf16 points stood*): the state tiles reach shared memory
through a host-built tensor descriptor over the pool viewed as [slots * HV * V, K], so a program can keep
several tiles in flight (Triton's loop pipeliner turns ``desc.load`` in a ``tl.range(..., num_stages=S)`` loop
into asynchronous bulk copies with barriers) without holding them in registers. Candidates vary the tile rows,
tiles per program, pipeline depth, warps and whether the update goes back by a bulk store or a plain one.
Every candidate is checked against the float64 reference before it is timed; a wrong one is reported, not
timed.

    PYTHONPATH=src:benchmarks python benchmarks/tma_state_probe.py [--points qwen3-next@4:512:bf16 ...]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import decode_vs_sglang as bench
import torch
import triton
import triton.language as tl
from decode_bandwidth import capture, replay_us
from triton.tools.tensor_descriptor import TensorDescriptor

from gdr_check.kernel._triton_common import load_query_key, locate_program, softplus


@triton.jit
def gdn_tma_kernel(mixed_qkv, a, b, A_log, dt_bias, out, state, state_desc, slots, scale,
                   stride_qkv, stride_a, stride_b, stride_slot,
                   H: tl.constexpr, HV: tl.constexpr, K: tl.constexpr, V: tl.constexpr, BV: tl.constexpr,
                   TILES: tl.constexpr, STAGES: tl.constexpr, BULK_STORE: tl.constexpr):
    # sglang 0.5.23's GDN semantics (skip slot < 0, beta rounded through b's dtype, q/k L2-normalised).
    i_n, i_hv, i_h, v_start, head_row = locate_program(V, BV, TILES, HV, H)
    slot = tl.load(slots + i_n).to(tl.int64)
    live = slot >= 0
    slot = tl.where(live, slot, 0)
    first_row = ((slot * HV + i_hv) * V + v_start).to(tl.int32)
    row = mixed_qkv + i_n * stride_qkv
    q, k = load_query_key(row, i_h, H, K, K, True, "")
    q = q * scale
    k_dot_q = tl.sum(k * q)
    z = tl.load(a + i_n * stride_a + i_hv).to(tl.float32) + tl.load(dt_bias + i_hv).to(tl.float32)
    decay = tl.exp(-tl.exp(tl.load(A_log + i_hv).to(tl.float32)) * softplus(z, 20.0))
    beta = tl.sigmoid(tl.load(b + i_n * stride_b + i_hv).to(tl.float32))
    beta = beta.to(b.dtype.element_ty).to(tl.float32)
    v_row = row + 2 * H * K + i_hv * V
    out_row = out + head_row * V
    head_state = state + slot * stride_slot + i_hv * (V * K)
    o_k = tl.arange(0, K)
    for t in tl.range(TILES, num_stages=STAGES):
        S = state_desc.load([first_row + t * BV, 0]).to(tl.float32)
        rows = v_start + t * BV + tl.arange(0, BV)
        v = tl.load(v_row + rows).to(tl.float32)
        predicted = tl.sum(S * k[None, :], axis=1)
        read = tl.sum(S * q[None, :], axis=1)
        u = beta * (v - decay * predicted)
        o = decay * read + u * k_dot_q
        tl.store(out_row + rows, tl.where(live, o, 0.0).to(out.dtype.element_ty))
        updated = (S * decay + u[:, None] * k[None, :]).to(state.dtype.element_ty)
        if BULK_STORE:
            if live:
                state_desc.store([first_row + t * BV, 0], updated)
        else:
            mask = (rows < tl.where(live, V, 0))[:, None]
            tl.store(head_state + rows[:, None] * K + o_k[None, :], updated, mask=mask)


@dataclass(frozen=True)
class Candidate:
    block_v: int
    tiles: int
    stages: int
    warps: int
    bulk_store: bool

    @property
    def label(self) -> str:
        return f"tma{self.block_v}x{self.tiles}/s{self.stages}/w{self.warps}" + ("/bs" if self.bulk_store else "")


CANDIDATES = (
    Candidate(16, 1, 1, 1, False), Candidate(16, 2, 2, 1, False), Candidate(16, 4, 3, 1, False),
    Candidate(16, 8, 3, 1, False), Candidate(16, 8, 4, 1, False), Candidate(32, 4, 3, 2, False),
    Candidate(32, 2, 2, 1, False), Candidate(64, 2, 2, 4, False), Candidate(16, 4, 3, 1, True),
    Candidate(16, 8, 4, 1, True), Candidate(32, 4, 3, 2, True), Candidate(8, 8, 4, 1, False),
    Candidate(8, 1, 1, 1, False), Candidate(4, 1, 1, 1, False),
)


def tma_impl(c: Candidate) -> bench.Impl:
    def run(x: bench.Inputs, indices: torch.Tensor, pool: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
        g = x.g
        rows = pool.view(-1, g.K)  # [slots * HV * V, K]
        desc = TensorDescriptor.from_tensor(rows, block_shape=[c.block_v, g.K])
        grid = (x.B * g.HV * triton.cdiv(g.V, c.block_v * c.tiles),)
        gdn_tma_kernel[grid](x.mixed_qkv, x.a, x.b, x.A_log, x.dt_bias, out, pool, desc, indices, x.scale,
                             x.mixed_qkv.stride(0), x.a.stride(0), x.b.stride(0), pool.stride(0),
                             H=g.H, HV=g.HV, K=g.K, V=g.V, BV=c.block_v, TILES=c.tiles, STAGES=c.stages,
                             BULK_STORE=c.bulk_store, num_warps=c.warps)
        return out
    return run


def parse_point(text: str) -> tuple[bench.Geometry, int, str]:
    name, batch, state = text.split(":")
    model, tp = name.split("@")
    full = {"qwen3-next": "Qwen/Qwen3-Next-80B-A3B-Instruct", "qwen3.5": "Qwen/Qwen3.5-397B-A17B"}[model]
    return bench.geometry(full, int(tp)), int(batch), state


DEFAULT_POINTS = ("qwen3-next@4:8:bf16", "qwen3-next@4:32:bf16") + tuple(
    f"{g}:{B}:{s}" for g in ("qwen3-next@4", "qwen3-next@1") for s in ("bf16", "fp32") for B in (128, 512, 1024))


def run_point(g: bench.Geometry, B: int, state: str, repeats: int) -> dict[str, Any]:
    itemsize = bench.STATE_DTYPES[state].itemsize
    row_bytes = g.HV * g.V * g.K * itemsize
    sets = max(2, min(bench.MAX_SETS, -(-bench.ROTATION_BYTES // (B * row_bytes))))
    x = bench.make_inputs(g, B, state, sets * B + 1, sets, seed=B * 1000 + g.HV)
    impls: dict[str, bench.Impl] = {"ours": bench.ours_impl(None)}
    impls.update({c.label: tma_impl(c) for c in CANDIDATES if c.block_v * c.tiles <= g.V})
    point: dict[str, Any] = {"geometry": g.label, "B": B, "state": state, "verify": {}, "errors": {}, "graph_us": {}}
    for name, impl in list(impls.items()):
        try:
            check = bench.verify(x, impl)
            point["verify"][name] = check
            if not check["ok"]:
                del impls[name]
        except Exception as exc:  # noqa: BLE001 - one candidate failing is recorded, not fatal
            point["errors"][name] = f"{type(exc).__name__}: {str(exc)[-300:]}"
            del impls[name]
    graphs = {}
    for name, impl in impls.items():
        try:
            graphs[name] = capture(lambda idx, impl=impl: impl(x, idx, x.pool, x.out), x.index_sets)
        except Exception as exc:  # noqa: BLE001
            point["errors"][name] = f"capture: {type(exc).__name__}: {str(exc)[-300:]}"
    graphs["slot_copy_plain"] = capture(bench.slot_copy_launch(x, 8192, 8), x.index_sets)
    rounds: dict[str, list[float]] = {name: [] for name in graphs}
    for _ in range(repeats):
        for name, graph in graphs.items():
            rounds[name].append(replay_us(graph, len(x.index_sets)))
    point["graph_us"] = {name: statistics.median(v) for name, v in rounds.items()}
    point["spread"] = {name: (max(v) - min(v)) / statistics.median(v) for name, v in rounds.items()}
    return point


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--points", nargs="*", default=list(DEFAULT_POINTS))
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", type=Path, default=Path(os.environ.get("OUT", ".")) / "tma_state_probe.json")
    args = parser.parse_args(argv)
    results = []
    for text in args.points:
        g, B, state = parse_point(text)
        point = run_point(g, B, state, args.repeats)
        results.append(point)
        times = point["graph_us"]
        ours = times.get("ours", float("nan"))
        ranked = sorted(times.items(), key=lambda kv: kv[1])
        line = " ".join(f"{n}={t:.2f}({t / ours:.3f})" for n, t in ranked[:6])
        print(f"{g.label} B={B} {state}: {line}", flush=True)
        for name, err in point["errors"].items():
            print(f"  {name}: {err}", flush=True)
        for name, check in point["verify"].items():
            if not check["ok"]:
                print(f"  {name}: WRONG {check}", flush=True)
        torch.cuda.empty_cache()
    args.json.write_text(json.dumps({"device": torch.cuda.get_device_name(), "triton": triton.__version__,
                                     "points": results}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
