"""Deployments: per-rank call shapes and layouts, engine pools and dtypes, state bytes, TP rules, JSON document."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import zipfile
from dataclasses import replace
from pathlib import Path

import pytest

from checkpoint_builders import kimi_config, qwen3_5_config, qwen3_next_config, qwen_tensors, write_checkpoint
from gdr_check.deployment.settings import Deployment
from gdr_check.engines.profiles import profile_for
from gdr_check.pipeline.model_check import check_builtin, check_model
from gdr_check.sources import SourceError
from vllm_real import release

MiB = 1024 * 1024
KiB = 1024

# docs/models.md §9: (repo id, L_lin, [(tp, H_l, HV_l, width, conv KiB/slot/layer, SSM MiB/request)])
TABLE_9 = [
    ("Qwen/Qwen3-Next-80B-A3B-Instruct", 36, [
        (1, 16, 32, 8192, 48, 72), (2, 8, 16, 4096, 24, 36), (4, 4, 8, 2048, 12, 18), (8, 2, 4, 1024, 6, 9),
        (16, 1, 2, 512, 3, 4.5)]),
    ("Qwen/Qwen3.5-0.8B", 18, [
        (1, 16, 16, 6144, 36, 18), (2, 8, 8, 3072, 18, 9), (4, 4, 4, 1536, 9, 4.5), (8, 2, 2, 768, 4.5, 2.25),
        (16, 1, 1, 384, 2.25, 1.125)]),
    ("Qwen/Qwen3.5-4B", 24, [
        (1, 16, 32, 8192, 48, 48), (4, 4, 8, 2048, 12, 12), (16, 1, 2, 512, 3, 3)]),
    ("Qwen/Qwen3.6-27B", 48, [
        (1, 16, 48, 10240, 60, 144), (2, 8, 24, 5120, 30, 72), (8, 2, 6, 1280, 7.5, 18), (16, 1, 3, 640, 3.75, 9)]),
    ("Qwen/Qwen3.5-35B-A3B", 30, [(1, 16, 32, 8192, 48, 60), (8, 2, 4, 1024, 6, 7.5)]),
    ("Qwen/Qwen3.5-122B-A10B", 36, [(1, 16, 64, 12288, 72, 144), (16, 1, 4, 768, 4.5, 9)]),
    ("Qwen/Qwen3.5-397B-A17B", 45, [(4, 4, 16, 3072, 18, 45), (8, 2, 8, 1536, 9, 22.5)]),
    ("moonshotai/Kimi-Linear-48B-A3B-Instruct", 20, [
        (1, 32, 32, 12288, 72, 40), (2, 16, 16, 6144, 36, 20), (8, 4, 4, 1536, 9, 5), (32, 1, 1, 384, 2.25, 1.25)]),
]


@pytest.mark.parametrize("repo_id,layers,rows", TABLE_9, ids=[r[0] for r in TABLE_9])
def test_models_md_section_9(repo_id: str, layers: int, rows):
    for tp, H_l, HV_l, width, conv_kib, ssm_mib in rows:
        result = check_builtin(repo_id, Deployment(tp=tp))
        assert (result.heads.H, result.heads.HV, result.heads.width) == (H_l, HV_l, width)
        memory = result.memory
        assert memory.linear_layers == layers
        assert memory.conv_bytes_per_layer == conv_kib * KiB
        assert memory.ssm_bytes_per_layer * layers == ssm_mib * MiB
        assert memory.bytes_per_request == (conv_kib * KiB + ssm_mib * MiB / layers) * layers


def test_qwen3_5_397b_tp8_matches_tpu_inference_quote():
    # vllm-project/tpu-inference #2482: "4.27 -> 2.17 MB/slot" at TP 8, 8 layers per stage.
    fp32 = check_builtin("Qwen/Qwen3.5-397B-A17B", Deployment(tp=8)).memory
    bf16 = check_builtin("Qwen/Qwen3.5-397B-A17B", Deployment(tp=8, state_dtype="bf16")).memory
    assert 8 * (fp32.ssm_bytes_per_layer + fp32.conv_bytes_per_layer) == 4_268_032
    assert 8 * (bf16.ssm_bytes_per_layer + bf16.conv_bytes_per_layer) == 2_170_880


def test_sglang_call_for_qwen3_next_tp2():
    result = check_builtin("Qwen/Qwen3-Next-80B-A3B-Instruct", Deployment(tp=2, batch=4))
    call = result.call
    assert call.variant == "gdn" and call.use_qk_l2norm_in_kernel and call.lower_bound is None
    assert call.scale == 128 ** -0.5
    spec = {name: (t.shape, t.stride, t.dtype) for name, t in call.tensors().items()}
    assert spec["mixed_qkv"] == ((4, 4096), (4096, 1), "bfloat16")
    assert spec["a"] == ((4, 16), (16, 1), "bfloat16") and spec["b"] == spec["a"]
    assert spec["A_log"] == ((16,), (1,), "float32")  # fp32 parameter, though the checkpoint stores bf16
    assert spec["dt_bias"] == ((16,), (1,), "bfloat16")
    # sglang 0.5.23 counts 5 slots per running request for Qwen3-Next (`auto` -> extra_buffer under the overlap
    # schedule: 3 + 2 ping-pong, kv_cache_configurator.py:3062-3088): the fewest rows serving 4 are 4 x 5 + 1.
    rows = 4 * 5 + 1
    assert spec["initial_state"] == ((rows, 16, 128, 128), (16 * 128 * 128, 128 * 128, 128, 1), "float32")
    assert spec["out"] == ((4, 1, 16, 128), (16 * 128, 16 * 128, 128, 1), "bfloat16")
    assert spec["ssm_state_indices"] == ((4,), (1,), "int32")
    assert call.ssm_state_indices.values == (1, 2, 3, 4)
    assert all(t.device == "cuda:0" for t in call.tensors().values())
    pools = result.pools
    assert pools["ssm_pool"].shape == (36, rows, 16, 128, 128) and pools["ssm_pool"].dtype == "float32"
    assert pools["conv_pool"].shape == (36, rows, 4096, 3) and pools["conv_pool"].dtype == "bfloat16"
    assert pools["initial_state"].stride == pools["ssm_pool"].stride[1:]
    assert result.contract_run and result.report.errors == []


def test_kda_call_and_pools():
    result = check_builtin("moonshotai/Kimi-Linear-48B-A3B-Instruct", Deployment(tp=4))
    call = result.call
    assert call.variant == "kda"
    assert call.a.shape == (8, 8 * 128) and call.dt_bias.shape == (8 * 128,) and call.dt_bias.dtype == "float32"
    assert call.b.shape == (8, 8) and call.A_log.shape == (8,)
    # window-first for KDA; Kimi-Linear's `auto` is extra_buffer from sglang 0.5.16 (overrides.py
    # `_MAMBA_EXTRA_BUFFER_ARCHS`): 3 + 2 slots counted per request, 8 x 5 + 1 rows
    assert result.pools["conv_pool"].shape == (20, 8 * 5 + 1, 3, 3072)
    assert result.settings.state_dtype == "float32"


def test_vllm_pools_are_per_layer_and_window_first():
    result = check_builtin("Qwen/Qwen3-Next-80B-A3B-Instruct", Deployment(tp=4, engine="vllm"))
    assert set(result.pools) == {"ssm_state", "conv_state"}
    assert result.pools["ssm_state"].shape == (9, 8, 128, 128)
    assert result.pools["conv_state"].shape == (9, 3, 2048)


@pytest.mark.parametrize("repo_id,engine,state_dtype,expected", [
    ("Qwen/Qwen3-Next-80B-A3B-Instruct", "sglang", None, "float32"),
    ("Qwen/Qwen3-Next-80B-A3B-Instruct", "vllm", None, "bfloat16"),  # no mamba_ssm_dtype: the model dtype
    ("Qwen/Qwen3-Next-80B-A3B-Instruct", "vllm", "float32", "float32"),
    ("Qwen/Qwen3.5-4B", "vllm", None, "float32"),  # from text_config.mamba_ssm_dtype
    ("Qwen/Qwen3.5-4B", "sglang", "bf16", "bfloat16"),
    # vLLM's KDA recurrent state ignores --mamba-ssm-cache-dtype up to 0.29 and takes it from 0.30
    # (`kda_state_dtype`, model_executor/layers/mamba/mamba_utils.py of each release)
    ("moonshotai/Kimi-Linear-48B-A3B-Instruct", "vllm@0.29.0", "bfloat16", "float32"),
    ("moonshotai/Kimi-Linear-48B-A3B-Instruct", "vllm@0.30.0", "bfloat16", "bfloat16"),
    ("moonshotai/Kimi-Linear-48B-A3B-Instruct", "vllm", None, "float32"),
    ("moonshotai/Kimi-Linear-48B-A3B-Instruct", "sglang", None, "float32"),
])
def test_state_dtype_defaults(repo_id: str, engine: str, state_dtype: str | None, expected: str):
    result = check_builtin(repo_id, Deployment(engine=engine, state_dtype=state_dtype))
    assert result.settings.state_dtype == expected
    # vLLM decodes KDA with `fused_recurrent_kda`: no packed call, but its pool holds the state.
    state = result.call.initial_state if result.call is not None else result.pools["ssm_state"]
    assert state.dtype == expected
    assert result.to_dict()["deployment"]["state_dtype"] == expected


def test_bf16_state_reported_by_contract():
    result = check_builtin("Qwen/Qwen3-Next-80B-A3B-Instruct", Deployment(engine="vllm"))
    assert "GDR249" in result.report.codes()


def test_sglang_ignores_unknown_mamba_ssm_dtype(tmp_path: Path):
    config = qwen3_next_config(mamba_ssm_dtype="float8")
    write_checkpoint(tmp_path, config, qwen_tensors(qwen3_next_config()))
    result = check_model(str(tmp_path), Deployment())
    assert result.settings.state_dtype == "float32"
    [diagnostic] = [d for d in result.report if d.code == "GDR108"]
    assert (diagnostic.severity, diagnostic.message) == ("warning", (
        '`mamba_ssm_dtype` is "float8": not a state dtype sglang takes (float32, bfloat16, float16); sglang logs a '
        "warning and keeps its default, float32"))


# An invalid `mamba_ssm_dtype` (user test): it gave exit 0, no diagnostic, and "SSM state float32 (sglang's
# default)", or under vLLM "bfloat16 (vLLM's default: the model dtype (no `mamba_ssm_dtype` hook))" although
# the key was there. sglang's `mamba2_state_dtype` takes exactly float32/bfloat16/float16 and logs a warning
# for anything else, keeping float32; vLLM's Qwen3.5 hook copies the value into `mamba_ssm_cache_dtype`, which
# it cannot look up, so vLLM does not start. `torch_dtype: "bfloat61"` was already GDR108.
_BAD_SSM_DTYPES = [("float64", '"float64"'), ("garbage", '"garbage"'), (32, "32"), ("fp32", '"fp32"')]
_SGLANG_FALLBACK = "sglang logs a warning and keeps its default, float32"
_VLLM_FAILURE = ("its Qwen3.5 hook makes it `mamba_ssm_cache_dtype`, which vLLM's dtype table has no entry for, so "
                 "vLLM fails at start-up")


def _qwen3_5_checkpoint(tmp_path: Path, ssm_dtype) -> Path:
    config = qwen3_5_config()
    config["text_config"]["mamba_ssm_dtype"] = ssm_dtype
    (tmp_path / "config.json").write_text(json.dumps(config, indent=2))
    return tmp_path


def _gdr108(result):
    found = [d for d in result.report if d.code == "GDR108"]
    assert len(found) == 1, [(d.code, d.message) for d in result.report]
    return found[0]


@pytest.mark.parametrize("value,shown", _BAD_SSM_DTYPES, ids=[shown for _, shown in _BAD_SSM_DTYPES])
@pytest.mark.parametrize("engine", ["sglang", "vllm"])
def test_an_invalid_mamba_ssm_dtype_is_gdr108(engine: str, value, shown: str, tmp_path: Path):
    path = _qwen3_5_checkpoint(tmp_path, value)
    result = check_model(str(path), Deployment(engine=engine))
    diagnostic = _gdr108(result)
    prefix = f"`text_config.mamba_ssm_dtype` is {shown}: not a state dtype"
    if engine == "sglang":
        assert (diagnostic.severity, diagnostic.message) == (
            "warning", f"{prefix} sglang takes (float32, bfloat16, float16); {_SGLANG_FALLBACK}")
        assert (result.settings.state_dtype, result.settings.state_dtype_reason) == (
            "float32", f"sglang's default: it ignores `mamba_ssm_dtype` = {shown}")
    else:
        assert (diagnostic.severity, diagnostic.message) == (  # the names vLLM's dtype table has (review)
            "error", f"{prefix} vLLM takes (float32, bfloat16, float16, half, float, auto); {_VLLM_FAILURE}")
        assert (result.settings.state_dtype, result.settings.state_dtype_reason) == (
            "bfloat16", f"assumed: vLLM's default, the model dtype, since vLLM fails at start-up on "
                        f"`mamba_ssm_dtype` = {shown}")
        assert not result.ok
    assert diagnostic.fixes == ['set `mamba_ssm_dtype` to "float32", "bfloat16" or "float16"']
    assert diagnostic.location.json_key == "text_config.mamba_ssm_dtype"
    line = next(n for n, text in enumerate((path / "config.json").read_text().splitlines(), 1)
                if '"mamba_ssm_dtype"' in text)
    assert diagnostic.location.line == line


def test_an_invalid_mamba_ssm_dtype_under_a_set_state_dtype(tmp_path: Path):
    """sglang still reads the key and warns; vLLM's hook copies it only while `--mamba-ssm-cache-dtype` is left at
    "auto", so with the flag set vLLM never reads it: no finding (it said vLLM logged a warning: review)."""
    path = _qwen3_5_checkpoint(tmp_path, "garbage")
    result = check_model(str(path), Deployment(engine="sglang", state_dtype="float32"))
    diagnostic = _gdr108(result)
    assert (diagnostic.severity, diagnostic.message) == ("warning", (
        '`text_config.mamba_ssm_dtype` is "garbage": not a state dtype sglang takes (float32, bfloat16, float16); '
        "sglang logs a warning and ignores it (the deployment sets float32)"))
    assert (result.settings.state_dtype, result.settings.state_dtype_reason) == ("float32", "set by the deployment")
    result = check_model(str(path), Deployment(engine="vllm", state_dtype="float32"))
    assert "GDR108" not in result.report.codes()
    assert (result.settings.state_dtype, result.settings.state_dtype_reason) == ("float32", "set by the deployment")


@pytest.mark.parametrize("engine,value,expected,reason", [
    ("sglang", "bfloat16", "bfloat16", '`mamba_ssm_dtype` = "bfloat16" in the config'),
    ("vllm", "float16", "float16", '`mamba_ssm_dtype` = "float16" in the config'),
    ("vllm", "half", "float16", '`mamba_ssm_dtype` = "half" in the config'),  # vLLM's table has "half"
    ("vllm", "auto", "bfloat16", '`mamba_ssm_dtype` = "auto" in the config'),  # the conv dtype: the model dtype
    ("sglang", None, "float32", "sglang's default"),  # null is unset in both engines
    ("vllm", None, "bfloat16", "vLLM's default: the model dtype (no `mamba_ssm_dtype` in the config)"),
])
def test_a_mamba_ssm_dtype_the_engine_takes_is_no_finding(engine: str, value, expected: str, reason: str,
                                                          tmp_path: Path):
    result = check_model(str(_qwen3_5_checkpoint(tmp_path, value)), Deployment(engine=engine))
    assert "GDR108" not in result.report.codes()
    assert (result.settings.state_dtype, result.settings.state_dtype_reason) == (expected, reason)


def test_sglang_takes_the_mamba_ssm_dtype_names_exactly(tmp_path: Path):
    # `mamba2_state_dtype` looks the string up as written: "half" is no name it has, unlike vLLM's table.
    result = check_model(str(_qwen3_5_checkpoint(tmp_path, "half")), Deployment())
    assert _gdr108(result).message == ('`text_config.mamba_ssm_dtype` is "half": not a state dtype sglang takes '
                                       f"(float32, bfloat16, float16); {_SGLANG_FALLBACK}")
    assert result.settings.state_dtype == "float32"


def test_an_invalid_mamba_ssm_dtype_the_engine_does_not_read_is_no_finding(tmp_path: Path):
    # vLLM reads `mamba_ssm_dtype` for Qwen3.5/3.6 only; no engine reads it for KDA.
    path = tmp_path / "next"
    path.mkdir()
    (path / "config.json").write_text(json.dumps(qwen3_next_config(mamba_ssm_dtype="garbage")))
    result = check_model(str(path), Deployment(engine="vllm"))
    assert "GDR108" not in result.report.codes()
    assert result.settings.state_dtype_reason == "vLLM's default: the model dtype (no `mamba_ssm_dtype` hook)"
    kimi = tmp_path / "kimi"
    kimi.mkdir()
    (kimi / "config.json").write_text(json.dumps(kimi_config(mamba_ssm_dtype="garbage")))
    for engine in ("sglang", "vllm"):
        assert "GDR108" not in check_model(str(kimi), Deployment(engine=engine)).report.codes()


# -- tensor parallelism -----------------------------------------------------------------------------------------
def test_tp3_on_qwen3_next():
    result = check_builtin("Qwen/Qwen3-Next-80B-A3B-Instruct", Deployment(tp=3))
    errors = {d.code: d for d in result.report.errors}
    assert errors["GDR121"].message == (
        "tp=3 does not divide `linear_num_key_heads`=16; TP sizes that work: 1, 2, 4, 8, 16")
    assert errors["GDR121"].location.json_key == "linear_num_key_heads"
    assert errors["GDR121"].fixes == ["use tp=2", "use tp=4"]
    assert errors["GDR122"].message == "tp=3 does not divide `num_attention_heads`=16"
    assert errors["GDR123"].message == "tp=3 neither divides nor is a multiple of `num_key_value_heads`=2"
    assert result.call is None and result.to_dict()["shapes"] == {} and not result.contract_run


def test_tp3_on_qwen3_6_27b_fails_gdn_but_not_attention():
    result = check_builtin("Qwen/Qwen3.6-27B", Deployment(tp=3, engine="vllm"))
    codes = result.report.codes()
    assert "GDR121" in codes and "GDR122" not in codes
    diagnostic = next(d for d in result.report if d.code == "GDR121")
    assert diagnostic.message == "tp=3 does not divide `linear_num_key_heads`=16; TP sizes that work: 1, 2, 4, 8"
    assert any("conv width 2*H*K+HV*V = 10240 is not divisible by 3" in n for n in diagnostic.notes)


def test_tp16_attention_heads_reported_separately():
    result = check_builtin("Qwen/Qwen3.6-27B", Deployment(tp=16, engine="vllm"))
    diagnostic = next(d for d in result.report if d.code == "GDR122")
    assert diagnostic.message == "tp=16 does not divide `num_attention_heads`=24"
    assert any("Total number of attention heads (24) must be divisible by tensor parallel size (16)." in n
               for n in diagnostic.notes)
    # The GDN layers split fine at TP 16: the call exists and passes the contract.
    assert result.call is not None and result.contract_run
    assert "GDR121" not in result.report.codes()


def test_tp32_on_qwen_gdn():
    result = check_builtin("Qwen/Qwen3.5-397B-A17B", Deployment(tp=32))
    message = next(d.message for d in result.report if d.code == "GDR121")
    assert message == "tp=32 does not divide `linear_num_key_heads`=16; TP sizes that work: 1, 2, 4, 8, 16"


def test_kda_tp_message():
    result = check_builtin("moonshotai/Kimi-Linear-48B-A3B-Instruct", Deployment(tp=6))
    diagnostic = next(d for d in result.report if d.code == "GDR121")
    assert diagnostic.message == (
        "tp=6 does not divide `num_heads`=32; TP sizes that work: 1, 2, 4, 8, 16, 32")
    assert any("KDA num_heads (32) must be divisible by shard tp_size (6)" in n for n in diagnostic.notes)


# -- batch, slots, memory -------------------------------------------------------------------------------------
def test_grid_limit_from_contract():
    ok = check_builtin("Qwen/Qwen3-Next-80B-A3B-Instruct", Deployment(batch=2047))
    assert "GDR244" not in ok.report.codes()
    result = check_builtin("Qwen/Qwen3-Next-80B-A3B-Instruct", Deployment(batch=2048))
    assert "GDR244" in result.report.codes()
    vllm = check_builtin("Qwen/Qwen3-Next-80B-A3B-Instruct", Deployment(batch=2048, engine="vllm"))
    assert "GDR244" not in vllm.report.codes()


def test_kda_grid_limit_follows_the_kernel_sglang_dispatches_to():
    """sglang's CUDA KDA kernel (GDR226: l2norm on, B >= 8, K = V = 128, fp32 state, ...) launches a 1-D grid of
    B*HV blocks, so Triton's (NV, B, HV) limit of 65535 on B does not apply; with a bf16 state Triton runs."""
    name = "moonshotai/Kimi-Linear-48B-A3B-Instruct"
    cuda = check_builtin(name, Deployment(batch=70000))
    assert [(d.code, d.message) for d in cuda.report if d.code in ("GDR226", "GDR244")] == [
        ("GDR226", "with `use_qk_l2norm_in_kernel=True`, sglang runs its CUDA KDA decode kernel (Triton is skipped)")]
    assert not cuda.report.errors
    triton = check_builtin(name, Deployment(batch=70000, state_dtype="bfloat16"))
    assert [(d.code, d.message) for d in triton.report if d.code in ("GDR226", "GDR244")] == [
        ("GDR226", "with `use_qk_l2norm_in_kernel=True`, sglang skips its CUDA KDA decode kernel: `initial_state` "
                   "is bfloat16"),
        ("GDR244", "the launch grid needs B = 70000 > 65535, the CUDA grid limit: the launch fails")]


def test_too_few_slots():
    result = check_builtin("Qwen/Qwen3-Next-80B-A3B-Instruct", Deployment(batch=8, slots=8))
    assert result.call.initial_state.shape[0] == 8
    assert "GDR241" in result.report.codes()


def test_state_footprint_and_budget():
    per_request = (48 * KiB + 2 * MiB) * 36
    result = check_builtin("Qwen/Qwen3-Next-80B-A3B-Instruct", Deployment(batch=8, gpu_memory=1024 * MiB))
    assert result.memory.bytes_per_request == per_request
    assert result.memory.requests_that_fit == 1024 * MiB // per_request - 1 == 12
    info = next(d for d in result.report if d.code == "GDR131")
    assert info.message == (
        "each request holds 73.688 MiB of linear-attention state per rank: 36 layers x (48 KiB conv + 2 MiB SSM)")
    assert "GDR132" not in result.report.codes()
    small = check_builtin("Qwen/Qwen3-Next-80B-A3B-Instruct", Deployment(batch=64, gpu_memory=1024 * MiB))
    warning = next(d for d in small.report if d.code == "GDR132")
    assert warning.severity == "warning"
    assert warning.message == "a 1 GiB budget holds the state of 12 requests per rank, fewer than the batch of 64"


def test_the_library_s_target_settings_take_the_budget_as_written_and_one_target_as_a_string():
    # `TargetSettings(gpu_memory="1GiB")` was ignored (only `gpu_memory_bytes` was read), and a str of targets
    # was checked letter by letter ("path `Q` does not exist", ...).
    from gdr_check.base.limits import SizeError
    from gdr_check.pipeline.library import TargetSettings, check_targets

    settings = TargetSettings(batch=64, gpu_memory="1GiB")
    assert settings.gpu_memory_bytes == 1024 * MiB
    for targets in ("Qwen/Qwen3-Next-80B-A3B-Instruct", Path("Qwen/Qwen3-Next-80B-A3B-Instruct"),
                    ["Qwen/Qwen3-Next-80B-A3B-Instruct"]):
        (result,) = check_targets(targets, lambda target: settings)
        assert result.target == "Qwen/Qwen3-Next-80B-A3B-Instruct" and result.error is None
        # one slot: 36 layers x (3 x 8192 bf16 conv + 32 x 128 x 128 fp32 SSM) = 77266944 bytes; sglang's pool
        # K = (1 GiB - slot) // slot = 12, serving 12 // 5 = 2 requests (kv_cache_configurator.py:3379-3385, :3137)
        assert next(d for d in result.diagnostics if d.code == "GDR136").message == (
            "a 1 GiB budget gives a pool of 12 slots, which serves 2 running requests per rank at 5 state slot(s) "
            "counted per request (3 for the radix cache + 2 ping-pong: extra_buffer with the overlap schedule), fewer "
            "than the batch of 64")
    # one field: a changed budget is the one used, and a number is bytes (as pyproject.toml takes it)
    assert replace(settings, gpu_memory="2GiB").gpu_memory_bytes == 2048 * MiB
    assert TargetSettings(gpu_memory=1024 * MiB).gpu_memory_bytes == 1024 * MiB
    with pytest.raises(SizeError, match=r"^gpu_memory: not a size: 'lots' \(e\.g\. 80GiB, 141GB or a byte count\)$"):
        TargetSettings(gpu_memory="lots")
    # out of range: the words every number's range has (a LimitError, and still a SizeError)
    with pytest.raises(SizeError, match=r"^gpu_memory is 2e6TiB: must be in 1\.\.2\*\*60 \(bytes per rank for the "
                                        r"state pools\); see https://\S+/limits\.md$"):
        TargetSettings(gpu_memory="2e6TiB")
    with pytest.raises(SizeError, match=r"^gpu_memory is 0: must be in 1\.\.2\*\*60 "):
        replace(settings, gpu_memory=0)


def test_deployment_validation():
    with pytest.raises(ValueError):
        Deployment(engine="trt")
    with pytest.raises(ValueError):
        Deployment(state_dtype="int8")
    # the rows: as given, else the fewest the engine serves the batch from (vLLM: one slot per request and row 0)
    qwen = "Qwen/Qwen3-Next-80B-A3B-Instruct"
    assert check_builtin(qwen, Deployment(batch=16, engine="vllm")).settings.num_slots == 17
    assert check_builtin(qwen, Deployment(batch=16, slots=20)).settings.num_slots == 20


# -- entry point and document ----------------------------------------------------------------------------------
def test_builtin_fallback_when_not_cached(tmp_path: Path):
    result = check_model("Qwen/Qwen3-Next-80B-A3B-Instruct", Deployment(tp=4), cache_dir=str(tmp_path))
    assert result.builtin is not None and result.checkpoint.kind == "builtin"
    assert "not in the local cache: using the built-in description of Qwen/Qwen3-Next-80B-A3B-Instruct" in (
        result.to_dict()["source"]["notes"])
    assert result.shapes()["mixed_qkv"] == [8, 2048]


def test_unknown_repo_id_raises_source_error(tmp_path: Path):
    with pytest.raises(SourceError) as caught:
        check_model("nobody/NoSuchModel-1B", Deployment(), cache_dir=str(tmp_path))
    assert caught.value.code == "GDR007"


def test_json_document():
    document = check_builtin("Qwen/Qwen3.5-35B-A3B", Deployment(tp=2, batch=4)).to_dict()
    text = json.dumps(document)
    assert json.loads(text) == document
    assert document["schema_version"] == 1
    assert document["model"] == {**document["model"], "architecture": "Qwen3_5MoeForConditionalGeneration",
                                 "kind": "gdn", "num_hidden_layers": 40, "num_k_heads": 16, "num_v_heads": 32,
                                 "head_k_dim": 128, "head_v_dim": 128, "conv_kernel": 4}
    assert len(document["model"]["linear_layers"]) == 30
    assert document["deployment"] == {**document["deployment"], "tp": 2, "batch": 4, "num_slots": 4 * 5 + 1,
                                      "state_dtype": "float32", "engine": "sglang"}
    assert document["shapes"] == {
        "mixed_qkv": [4, 4096], "a": [4, 16], "b": [4, 16], "A_log": [16], "dt_bias": [16],
        "initial_state": [4 * 5 + 1, 16, 128, 128], "out": [4, 1, 16, 128], "ssm_state_indices": [4],
    }
    assert {"code", "name", "severity", "message", "fixes"} <= set(document["diagnostics"][0])


def test_metadata_path_imports_no_torch(tmp_path: Path):
    config = qwen3_next_config()
    write_checkpoint(tmp_path, config, qwen_tensors(config))
    script = (
        "import sys\n"
        "from gdr_check.pipeline.model_check import check_model\nfrom gdr_check.deployment.settings import Deployment\n"
        f"check_model({str(tmp_path)!r}, Deployment(tp=2)).to_dict()\n"
        "heavy = [m for m in ('torch', 'triton', 'numpy') if m in sys.modules]\n"
        "print(heavy)\n"
        "sys.exit(1 if heavy else 0)\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize(("text", "size"), [
    ("80GiB", 80 * 2**30), ("141GB", 141 * 10**9), ("1.5TiB", 3 * 2**39), ("1PiB", 2**50), ("1 PB", 10**15),
    ("1EiB", 2**60), ("1e3k", 10**6), ("4096", 4096)])
def test_a_size_takes_every_unit_up_to_the_limit(text, size):
    from gdr_check.base.limits import parse_size

    # Every size inside 1..2**60 has a unit to write it with: 1PiB was "not a size" (units stopped at tera).
    assert parse_size(text) == size


def test_a_size_past_the_limit_names_the_limit_not_the_unit():
    from gdr_check.base.limits import SizeError, parse_size
    with pytest.raises(SizeError, match=r"^gpu_memory is 2EiB: must be in 1\.\.2\*\*60 "):
        parse_size("2EiB")


# vLLM 0.30+: `MambaStateDtypeCalculator.kda_state_dtype` (model_executor/layers/mamba/mamba_utils.py:133-148 in the
# 0.33.0 wheel) takes "auto" (float32), "float32" and "bfloat16" and raises, for any other value,
# ValueError("KDA recurrent state supports only auto, float32, and bfloat16; " f"got {mamba_ssm_cache_dtype}").
KIMI = "moonshotai/Kimi-Linear-48B-A3B-Instruct"
_KDA_REFUSAL = "ValueError: KDA recurrent state supports only auto, float32, and bfloat16; got float16"


def test_vllm_refuses_a_float16_kda_state():
    result = check_builtin(KIMI, Deployment(engine="vllm@0.33.0", state_dtype="float16", tp=4))
    [diagnostic] = [d for d in result.report if d.code == "GDR138"]
    assert (diagnostic.severity, diagnostic.message) == (
        "error", "vLLM 0.33 refuses a float16 KDA recurrent state: it stops at start-up")
    assert f"vLLM 0.33 stops with `{_KDA_REFUSAL}`" in diagnostic.notes
    assert diagnostic.fixes[:2] == ["serve with `--mamba-ssm-cache-dtype bfloat16` (halves the state)",
                                    "serve with `--mamba-ssm-cache-dtype float32`"]


@pytest.mark.parametrize("engine, state_dtype", [
    ("vllm@0.33.0", "bfloat16"), ("vllm@0.33.0", "float32"), ("vllm@0.33.0", None),
    ("vllm@0.29.0", "float16"),  # before 0.30 the flag is ignored for KDA: the state stays float32
    ("sglang", "float16"),
])
def test_kda_state_dtypes_the_engine_takes(engine, state_dtype):
    result = check_builtin(KIMI, Deployment(engine=engine, state_dtype=state_dtype, tp=4))
    assert "GDR138" not in result.report.codes()


def test_a_gdn_model_keeps_a_float16_state_under_vllm():
    # `_mamba_state_dtype` (mamba_utils.py:96-110) looks any non-auto name up: float16 is taken for GDN
    result = check_builtin("Qwen/Qwen3-Next-80B-A3B-Instruct", Deployment(engine="vllm", state_dtype="float16"))
    assert "GDR138" not in result.report.codes() and result.settings.state_dtype == "float16"


def test_the_kda_refusal_is_the_release_own_text():
    # The message is read from the wheel (GDR_CHECK_VLLM_PATH, vLLM 0.33.0): the ValueError's two string parts
    wheel = release()
    if wheel is None or not wheel.is_file():
        pytest.skip("set GDR_CHECK_VLLM_PATH to the vLLM 0.33.0 wheel")
    with zipfile.ZipFile(wheel) as archive:
        tree = ast.parse(archive.read("vllm/model_executor/layers/mamba/mamba_utils.py"))
    [function] = [node for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)
                  and node.name == "kda_state_dtype"]
    [raised] = [node.exc for node in ast.walk(function) if isinstance(node, ast.Raise)]
    assert isinstance(raised, ast.Call) and isinstance(raised.func, ast.Name)
    [message] = raised.args
    parts = [value.value if isinstance(value, ast.Constant) else "{dtype}"
             for value in (message.values if isinstance(message, ast.JoinedStr) else [message])]
    accepted = [node for node in ast.walk(function) if isinstance(node, ast.Compare)
                and isinstance(node.ops[0], ast.In)]
    profile = profile_for("vllm@0.33.0")
    assert profile.kda_state_dtype_refusal == f"{raised.func.id}: {''.join(parts)}"
    assert list(profile.kda_state_dtypes or ()) == [item.value for item in accepted[0].comparators[0].elts]
