"""benchmarks/tma_state_probe.py: the TMA variant of the GDN kernel computes what the float64 reference does,
with a plain or a bulk store, and leaves the pool alone outside the named slots (the experiment behind the
"bulk-copy engine" entry of docs/performance-log.md timed a correct kernel)."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("triton")
pytest.importorskip("triton.tools.tensor_descriptor")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
bench = importlib.import_module("decode_vs_sglang")
probe = importlib.import_module("tma_state_probe")
naive = importlib.import_module("gdr_check.kernel")


@pytest.mark.parametrize("candidate", [probe.Candidate(16, 2, 2, 1, False), probe.Candidate(32, 4, 3, 2, True),
                                       probe.Candidate(4, 1, 1, 1, False)], ids=lambda c: c.label)
def test_the_tma_kernel_matches_the_float64_reference(monkeypatch, candidate):
    monkeypatch.setattr(bench, "DEVICE", "cpu")
    # TP 8: H = 2, HV = 4 (two value heads per key head, as at every TP), K = V = 128 as served; the candidates'
    # tiles cover V = 128 as at TP 4, with half the programs of TP 4's eight value heads to interpret.
    g = bench.geometry("Qwen/Qwen3-Next-80B-A3B-Instruct", 8)
    x = bench.make_inputs(g, 3, "fp32", 8, 2, seed=3)
    # b in fp32: sglang's beta rounding goes through b's dtype, and the interpreter's fp32 -> bf16 conversion
    # truncates where the GPU's rounds to nearest (the reference rounds as the GPU does).
    x.b = x.b.float()
    pool = torch.randn(5, g.HV, g.V, g.K).mul_(0.1)
    indices = torch.tensor([4, -1, 1], dtype=torch.int32)
    ref_out, ref_pool = naive.naive_packed_decode(*x.args(indices, pool, x.out), engine="sglang")
    new_pool, out = pool.clone(), torch.full_like(x.out, float("nan"))
    probe.tma_impl(candidate)(x, indices, new_pool, out)
    scale = ref_pool.abs().max()
    assert ((new_pool.double() - ref_pool).abs().max() / scale).item() <= 1e-5
    live = indices >= 0
    got = out.reshape(3, g.HV, g.V).double()[live]
    want = ref_out.reshape(3, g.HV, g.V)[live]
    assert ((got - want).abs().max() / want.abs().max()).item() <= 1e-2  # out is bf16
    assert bool((out.reshape(3, -1)[1] == 0).all())  # the skipped row's out is zero, as sglang writes it
    for untouched in (0, 2, 3):  # slots no row names, the skipped row's included, stay bitwise equal
        assert torch.equal(new_pool[untouched], pool[untouched])
