"""`explain` on PyTorch's other view error, a `.view` of a strided tensor (GDR411): recognised in any framing, and
read next to the packed decode kernel, whose `mixed_qkv` and gates are often column slices of a projection's
output (user test: it was "no rule matches", exit 2).

The message is PyTorch's (`aten/src/ATen/native/TensorShape.cpp`, `view_impl`), as the installed torch raises it.
"""

from __future__ import annotations

import json

import pytest

from gdr_check.checks import RULES
from gdr_check.checks.explanations import Context, find_all
from gdr_check.cli.main import main
from pasted_corpus import QWEN3_NEXT

VIEW_ERROR = ("view size is not compatible with input tensor's size and stride (at least one dimension spans across "
              "two contiguous subspaces). Use .reshape(...) instead.")
HEAD_DIMS = {"head_k_dim (K)": 128, "head_v_dim (V)": 128}


def test_the_message_is_torchs_for_a_column_slice_of_the_projection_and_a_transpose():
    torch = pytest.importorskip("torch")
    qkvz = torch.zeros(8, 3072)  # a rank's `in_proj_qkvz` output of Qwen3-Next at tp=4: 8 tokens
    mixed_qkv = qkvz[:, :2048]  # its [q | k | v] columns
    assert mixed_qkv.stride() == (3072, 1)
    assert mixed_qkv.view(8, -1, 128).shape == (8, 16, 128)  # splitting the last dim is a view
    for shape in ((-1,), (-1, 128)):  # merging the rows is not
        with pytest.raises(RuntimeError) as raised:
            mixed_qkv.view(*shape)
        assert str(raised.value) == VIEW_ERROR
    with pytest.raises(RuntimeError) as raised:
        torch.zeros(4, 6).t().view(24)
    assert str(raised.value) == VIEW_ERROR


@pytest.mark.parametrize("text", [
    VIEW_ERROR,
    f"RuntimeError: {VIEW_ERROR}",
    f"[2026-11-30 10:00:00 TP0] RuntimeError: {VIEW_ERROR}",
    f"(Worker_TP1 pid=123) ERROR 11-30 10:00:00 [gdn.py:42] RuntimeError: {VIEW_ERROR}",
    f"`{VIEW_ERROR}`",
], ids=["bare", "exception", "sglang", "vllm", "markdown"])
def test_the_view_error_is_recognised(text):
    [found] = find_all(text)
    assert (found.rule.code, found.rule.name, found.values) == ("GDR411", "view-incompatible-with-strides",
                                                                {"advice": "Use .reshape(...) instead."})


@pytest.mark.parametrize("text, advice", [
    # PyTorch 0.4's TH backend, as posted (geyang/deep-auto-punctuation#3, 2018; agrimgupta92/sgan#22, 2019)
    ("RuntimeError: invalid argument 2: view size is not compatible with input tensor's size and stride (at least "
     "one dimension spans across two contiguous subspaces). Call .contiguous() before .view(). at "
     "/opt/conda/conda-bld/pytorch_1533672544752/work/aten/src/TH/generic/THTensor.cpp:237",
     "Call .contiguous() before .view(). at /opt/conda/conda-bld/pytorch_1533672544752/work/aten/src/TH/generic/"
     "THTensor.cpp:237"),
    ("obs_traj.view(-1, 2).shape = {RuntimeError}invalid argument 2: view size is not compatible with input tensor's "
     "size and stride (at least one dimension spans across two contiguous subspaces). Call .contiguous() before "
     ".view(). at /pytorch/aten/src/TH/generic/THTensor.cpp:213",
     "Call .contiguous() before .view(). at /pytorch/aten/src/TH/generic/THTensor.cpp:213"),
], ids=["traceback", "debugger"])
def test_the_older_wording_is_recognised_too(text, advice):
    """PyTorch's older advice, "Call .contiguous() before .view().", then the source location (user test: it was
    "no rule matches")."""
    [found] = find_all(text)
    assert (found.rule.code, found.values) == ("GDR411", {"advice": advice})


def test_the_rule_names_the_kernels_stride_requirements():
    rule = RULES["GDR411"]
    assert rule.scope == "pasted" and rule.message == VIEW_ERROR.replace("Use .reshape(...) instead.", "{advice}")
    assert rule.fixes == (
        "pass `mixed_qkv`, `a` and `b` to the kernel without the view: it needs them dense in the last dim only "
        "(`stride(-1) == 1`, GDR202 and GDR204) and takes any row stride, so a column slice of the projection's "
        "output needs no copy",
        "to reshape a strided tensor, use `.reshape(...)` (it copies only when the strides leave no view) or "
        "`.contiguous().view(...)`; a transposed `mixed_qkv` or gate, or every other column of a fused output "
        "(`ba[:, 0::2]`), needs `.contiguous()` for the kernel too (GDR202, GDR204)")


def test_without_the_model_it_says_what_the_model_adds():
    [found] = find_all(f"RuntimeError: {VIEW_ERROR}")
    assert found.reasons == ["with --model (and --tp, --batch) gdr-check gives the width and strides of `mixed_qkv` "
                             "cut from the `in_proj_qkvz` output"]


def test_with_the_model_it_gives_the_slices_widths_and_strides():
    [found] = find_all(VIEW_ERROR, Context(tp=4, batch=8, widths=QWEN3_NEXT, head_dims=HEAD_DIMS))
    assert found.reasons == [
        "at tp=4 a rank's `in_proj_qkvz` rows are 3072 wide (12288/4): `mixed_qkv`, their 2048 [q | k | v] columns "
        "(8192/4), is a view of shape [8, 2048] and strides (3072, 1); `.view` can split its last dim "
        "(`.view(8, -1, 128)`) but not merge its rows (`.view(-1)`, `.view(-1, 128)`)",
        "`b` and `a` split from `in_proj_ba`'s rows, 16 wide (64/4), as two column blocks are views too: shape [8, 8], "
        "strides (16, 1)",
        "the kernel takes these slices as they are: it needs only stride(-1) == 1 of `mixed_qkv` (GDR202) and of "
        "`a`/`b` (GDR204)"]
    [unsharded] = find_all(VIEW_ERROR, Context(widths=QWEN3_NEXT))
    assert unsharded.reasons[0] == (
        "unsharded, `in_proj_qkvz` rows are 12288 wide: `mixed_qkv`, their 8192 [q | k | v] columns, is a view of "
        "shape [B, 8192] and strides (12288, 1); `.view` can split its last dim (`.view(B, heads, -1)`) but not "
        "merge its rows (`.view(-1)`)")


def test_a_kda_model_has_no_fused_qkvz_to_name():
    kimi = {"num_heads (H = HV)": 32, "mixed_qkv width (2*H*K + HV*V)": 12288, "out/v width (HV*V)": 4096,
            "a/dt_bias width (HV*K)": 4096}
    [found] = find_all(VIEW_ERROR, Context(tp=4, widths=kimi, head_dims=HEAD_DIMS))
    assert found.reasons == []


def test_the_cli_explains_it_with_the_model(capsys):
    assert main(["explain", f"RuntimeError: {VIEW_ERROR}", "--model", "Qwen/Qwen3-Next-80B-A3B-Instruct", "--tp",
                 "4", "--batch", "8", "--output-format", "json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert (document["code"], document["line"]) == ("GDR411", 1)
    assert document["reasons"][0].startswith("at tp=4 a rank's `in_proj_qkvz` rows are 3072 wide (12288/4)")
