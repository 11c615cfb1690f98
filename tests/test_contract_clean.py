"""Valid calls in awkward layouts produce no error and no warning beyond the expected CPU one and, for GDN
under sglang 0.5.23, the bf16 beta rounding (GDR253: a warning, the drift grows with context length).

Layouts: `mixed_qkv` as a row-strided view of a wider projection buffer, `a`/`b` as contiguous column blocks
of one fused buffer, a page-padded slot pitch (`backing[:, :HV]` of a wider page, or `backing[::2]`), int32
and int64 (stride-2) indices, -1 padding rows; both variants, both engines.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from contract_calls import awkward_call, call_for, check, qwen_gdn_call, qwen_kda_call  # noqa: E402
from gdr_check import TensorSpec  # noqa: E402

EXPECTED_INFO = {"gdn": {"sglang": set(), "vllm": set()}, "kda": {"sglang": {"GDR226"}, "vllm": set()}}
# The bf16 `b` of these calls: sglang 0.5.23 rounds beta to it (GDR253); vLLM (0.29, the default) keeps fp32.
BETA = {"gdn": {"sglang": ["GDR253"], "vllm": []}, "kda": {"sglang": [], "vllm": []}}


@pytest.mark.parametrize("variant", ["gdn", "kda"])
@pytest.mark.parametrize("engine", ["sglang", "vllm"])
@pytest.mark.parametrize("index_dtype", [torch.int32, torch.int64], ids=["int32", "int64"])
@pytest.mark.parametrize("pool", ["head-page", "every-other"])
def test_awkward_valid_calls_are_clean(variant, engine, index_dtype, pool):
    call = awkward_call(variant, index_dtype=index_dtype, pool=pool)
    # The layouts really are the awkward ones.
    assert call["mixed_qkv"].stride(0) > call["mixed_qkv"].shape[1] and call["mixed_qkv"].stride(1) == 1
    assert call["a"].stride(0) > call["a"].shape[1] and call["b"].stride(0) > call["b"].shape[1]
    assert call["a"].untyped_storage().data_ptr() == call["b"].untyped_storage().data_ptr()
    state = call["initial_state"]
    assert state.stride(0) > state[0].numel() and not state.is_contiguous()
    assert call["ssm_state_indices"].tolist()[-2:] == [-1, -1]
    assert (call["ssm_state_indices"].stride(0) == 2) == (index_dtype == torch.int64)

    report = check(variant, call, engine=engine)
    assert report.ok, [(d.code, d.message) for d in report.errors]
    assert [d.code for d in report.warnings] == ["GDR251", *BETA[variant][engine]]  # all-CPU tensors
    infos = {d.code for d in report.diagnostics if d.severity == "info"}
    assert infos == EXPECTED_INFO[variant][engine]
    report.raise_for_errors()  # no error: does not raise


@pytest.mark.parametrize("variant", ["gdn", "kda"])
@pytest.mark.parametrize("engine", ["sglang", "vllm"])
def test_qwen_and_kimi_sized_calls_on_meta_are_clean(variant, engine):
    call = qwen_gdn_call() if variant == "gdn" else qwen_kda_call()
    report = check(variant, call, engine=engine)
    assert report.ok and [d.code for d in report.warnings] == BETA[variant][engine], report.codes()


@pytest.mark.parametrize("variant", ["gdn", "kda"])
def test_plain_calls_are_clean_and_the_same_from_tensor_specs(variant):
    call = call_for(variant)
    live = check(variant, call)
    assert live.ok and [d.code for d in live.warnings] == ["GDR251", *BETA[variant]["sglang"]]
    specs = {k: TensorSpec.from_tensor(v, read_values=True) if isinstance(v, torch.Tensor) else v
             for k, v in call.items()}
    from_specs = check(variant, specs)
    assert [(d.code, d.message) for d in from_specs] == [(d.code, d.message) for d in live]


@pytest.mark.parametrize("variant", ["gdn", "kda"])
def test_padding_rows_and_a_transposed_out_of_size_1_are_clean(variant):
    call = call_for(variant)
    B, _, HV, V = call["out"].shape
    call["out"] = torch.empty(1, B, HV, V, dtype=torch.bfloat16).transpose(0, 1)  # contiguous: size-1 axis
    call["ssm_state_indices"] = torch.tensor([4, -1, 6, -1], dtype=torch.int64)
    report = check(variant, call)
    assert report.ok and [d.code for d in report.warnings] == ["GDR251", *BETA[variant]["sglang"]]
