"""`explain`'s GDR402 (Triton's `invalid argument`) for a KDA model: sglang's Triton KDA decode launches (NV, B, HV),
so its limit is B <= 65535, not GDN's B*HV_l; its CUDA KDA kernel (taken for B >= 8 with the default float32 state,
GDR226) launches B*HV_l blocks on grid x, limited by 2**31 - 1. The checker reports no GDR244 for Kimi-Linear at
batch 70000, and explain agrees (user test: it applied GDN's 65535 // HV_l)."""

from __future__ import annotations

from gdr_check.cli.main import main

KIMI = "moonshotai/Kimi-Linear-48B-A3B-Instruct"
GRID = "RuntimeError: Triton Error [CUDA]: invalid argument"
TRITON = ("a KDA model: sglang 0.5.23's Triton KDA decode launches a (NV, B, HV) grid, so B <= 65535 and HV_l <= 65535 "
          "(HV_l = 32 value heads per rank), not B*HV_l: the largest batch that launches on Triton is 65535")
CUDA = ("with sglang 0.5.23's default float32 KDA state (bfloat16 activations), its CUDA KDA kernel takes every call "
        "of B >= 8 (GDR226): a 1-D grid of B*HV_l blocks, limited only by 2**31 - 1 = 2147483647 (B <= 67108863 at "
        "HV_l = 32), so the batch does not cross Triton's limit unless the state is another dtype (--mamba-ssm-dtype)")


def _numbers(out: str) -> list[str]:
    lines = out.splitlines()
    start = lines.index("numbers:") + 1
    return [line.removeprefix("  - ") for line in lines[start:lines.index("", start)]]


def _explain(capsys, *options: str) -> list[str]:
    assert main(["explain", GRID, "--model", KIMI, *options]) == 0
    return _numbers(capsys.readouterr().out)


def test_kda_batch_past_65535_runs_the_cuda_kernel_whose_grid_fits(capsys):
    assert _explain(capsys, "--batch", "70000") == [
        TRITON, CUDA,
        "--batch 70000: the CUDA kernel launches B*HV_l = 70000*32 = 2240000 blocks, which is within the limit: with "
        "the float32 state the grid is not the cause; with another state dtype Triton runs, and B = 70000 > 65535 is "
        "the cause"]


def test_kda_limit_is_on_b_not_b_times_hv(capsys):
    # 4000 * 32 = 128000 > 65535 crossed GDN's limit; KDA's grids take it on either kernel
    assert _explain(capsys, "--batch", "4000")[2] == (
        "--batch 4000: the CUDA kernel launches B*HV_l = 4000*32 = 128000 blocks, which is within the limit, and "
        "B = 4000 is within Triton's: look for another bad launch argument")


def test_kda_batch_below_8_runs_triton(capsys):
    first = _explain(capsys, "--batch", "4", "--tp", "4")[0]
    assert first.endswith("(HV_l = 8 value heads per rank), not B*HV_l: the largest batch that launches on Triton is "
                          "65535")
    assert _explain(capsys, "--batch", "4")[2] == (
        "--batch 4: the Triton grid needs B = 4 and HV_l = 32, which is within the limit: look for another bad launch "
        "argument")


def test_kda_on_vllm_names_its_kernel(capsys):
    assert _explain(capsys, "--batch", "70000", "--engine", "vllm") == [
        "vLLM 0.33 decodes KDA layers with its own `fused_recurrent_kda_packed_decode` (another argument list, not "
        "the contract's), whose Triton grid is (NV, B*H): B*H_l <= 65535 (H_l = 32 heads per rank), so the largest "
        "batch that launches is 2047",
        "--batch 70000: the grid needs B*H_l = 70000*32 = 2240000, which crosses the limit: this is the cause"]


def test_kda_on_vllm_before_its_packed_op_names_its_kernel(capsys):
    assert _explain(capsys, "--batch", "70000", "--engine", "vllm@0.26.0") == [
        "vLLM 0.26 decodes KDA layers with `fused_recurrent_kda`, not the packed KDA kernel: gdr-check knows no grid "
        "limit of it; look for another bad launch argument"]
