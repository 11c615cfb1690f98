"""Every architecture sglang 0.5.23 routes to its GDN/KDA backends, built from its real tensor table.

Each checkpoint is written header-only with the tensor names and shapes the engine's model file loads
(sglang 0.5.23 `srt/models/<family>.py`) and a config with the keys its config class reads
(`srt/configs/<family>.py`). The expected per-rank numbers are computed here by hand from the config values,
not by the adapters.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from checkpoint_builders import (
    Tensors,
    _full_attention,
    _norms,
    kda_layer,
    kimi_config,
    mla_layer,
    qwen3_5_config,
    qwen3_5_layer,
    qwen3_next_config,
    qwen_tensors,
    write_checkpoint,
)
from cli_checkpoints import run_cli
from gdr_check.deployment.settings import Deployment
from gdr_check.models.adapters import select_adapter
from gdr_check.pipeline.dryrun.driver import nothing_to_run
from gdr_check.pipeline.explain_numbers import ExplainModelError, model_numbers
from gdr_check.pipeline.model_check import check_checkpoint, check_model
from gdr_check.sources import Checkpoint


def codes(result) -> list[str]:
    return result.report.codes()


def errors(result) -> list[str]:
    return [d.code for d in result.report if d.severity == "error"]


def only(result, code: str):
    found = [d for d in result.report if d.code == code]
    assert len(found) == 1, (code, [(d.code, d.message) for d in result.report])
    return found[0]


def config_only(config: dict) -> Checkpoint:
    return Checkpoint(target="mem", root=None, kind="config-only", config=config, config_file="config.json")


# -- Jet-Nemotron -------------------------------------------------------------------------------------------
JET = {"num_heads": 4, "head_dim": 8, "expand_v": 2.0, "conv_size": 4, "reduction": 8}


def jet_config() -> dict:
    return {
        "architectures": ["JetNemotronForCausalLM"], "model_type": "jet_nemotron",
        "hidden_size": 64, "num_hidden_layers": 4, "layer_types": ["attn", "jet", "swa", "jet"],
        "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 128, "torch_dtype": "bfloat16",
        "efficient_attention_config": {"jet": {
            "mode": "jet", "expand_v": JET["expand_v"], "num_heads": JET["num_heads"], "head_dim": JET["head_dim"],
            "norm_eps": "1e-5", "conv_size": JET["conv_size"], "dconv_generator_reduction": JET["reduction"],
            "dconv_implementation": "triton"}},
    }


def jet_tensors(hidden: int = 64) -> Tensors:
    H, K, W, r = JET["num_heads"], JET["head_dim"], JET["conv_size"], JET["reduction"]
    V = int(K * JET["expand_v"])
    tensors: Tensors = {}
    for i, kind in enumerate(["attn", "jet", "swa", "jet"]):
        prefix = f"model.layers.{i}."
        tensors.update(_norms(prefix, hidden))
        if kind != "jet":
            tensors.update(_full_attention(prefix, hidden, 4, 2, 16))
            continue
        p = f"{prefix}self_attn."
        tensors.update({
            f"{p}q_proj.weight": ("BF16", (H * K, hidden)), f"{p}k_proj.weight": ("BF16", (H * K, hidden)),
            f"{p}v_proj.weight": ("BF16", (H * V, hidden)), f"{p}a_proj.weight": ("BF16", (H, hidden)),
            f"{p}b_proj.weight": ("BF16", (H, hidden)), f"{p}g_proj.weight": ("BF16", (H * V, hidden)),
            f"{p}o_proj.weight": ("BF16", (hidden, H * V)), f"{p}A_log": ("F32", (H,)),
            f"{p}dt_bias": ("BF16", (H,)), f"{p}o_norm.weight": ("BF16", (V,)),
            f"{p}dynamic_conv1d.kernel_generator.w1.weight": ("BF16", (H * V // r, hidden)),
            f"{p}dynamic_conv1d.kernel_generator.w2.weight": ("BF16", (H * V * W, H * V // r)),
            f"{p}dynamic_conv1d.kernel_generator.w2.bias": ("BF16", (H * V * W,)),
        })
    return tensors


def test_jet_nemotron_geometry_pools_and_decode_path(tmp_path: Path):
    write_checkpoint(tmp_path / "jet", jet_config(), jet_tensors())
    result = check_model(str(tmp_path / "jet"), Deployment(batch=8))
    model = result.model
    assert (model.family, model.kind, model.linear_layers) == ("jet-nemotron", "gdn", [1, 3])
    # H = HV = num_heads = 4, K = head_dim = 8, V = int(8 * 2.0) = 16, W = conv_size = 4.
    assert (model.num_k_heads, model.num_v_heads, model.head_k_dim, model.head_v_dim,
            model.conv_kernel) == (4, 4, 8, 16, 4)
    assert model.weights_checked and errors(result) == []
    # JetBlock decodes with its own kernel: no packed call, no contract; the pools are still sized.
    assert result.decode.kernel == "fused_recurrent_gated_delta_rule_update" and not result.decode.packed
    assert result.call is None and not result.contract_run
    # 2 JetBlock layers, 9 slots; conv channels 2*4*8 + 4*16 = 128, W-1 = 3 columns.
    # JetNemotronForCausalLM has no extra_buffer in sglang 0.5.23 (overrides.py `_MAMBA_EXTRA_BUFFER_ARCHS`): `auto`
    # is no_buffer, 3 slots counted per request with the radix cache, 8 x 3 + 1 rows
    assert result.pools["ssm_pool"].shape == (2, 8 * 3 + 1, 4, 16, 8)
    assert result.pools["conv_pool"].shape == (2, 8 * 3 + 1, 128, 3)
    # per request: 2 layers x (3*128*2 B bf16 conv + 4*16*8*4 B fp32 state) = 2 x (768 + 2048)
    assert result.memory.bytes_per_request == 2 * (768 + 2048)
    info = only(result, "GDR134")
    assert info.message == ("the decode step under sglang calls `fused_recurrent_gated_delta_rule_update`, "
                            "not the packed decode kernel")


def test_jet_nemotron_runs_at_tp1_only(tmp_path: Path):
    write_checkpoint(tmp_path / "jet", jet_config(), jet_tensors())
    result = check_model(str(tmp_path / "jet"), Deployment(tp=2))
    diagnostic = only(result, "GDR126")
    assert diagnostic.message == "`JetNemotronForCausalLM` runs at tp=1 only; tp=2 is not supported"
    assert not result.ok


def test_jet_vlm_reads_text_config():
    config = {"architectures": ["JetVLMForConditionalGeneration"], "model_type": "jet_vlm",
              "text_config": {**jet_config(), "model_type": "jet_nemotron"}}
    result = check_checkpoint(config_only(config), Deployment())
    assert result.model.family == "jet-nemotron" and result.model.linear_layers == [1, 3]
    assert result.model.head_v_dim == 16


# -- Kimi-K3 ------------------------------------------------------------------------------------------------
def k3_config(*, H: int = 4, D: int = 32, layers: int = 8, bound: float | None = -5.0) -> dict:
    kda = [i + 1 for i in range(layers) if (i + 1) % 4 != 0]
    lac = {"num_heads": H, "head_dim": D, "short_conv_kernel_size": 4, "kda_layers": kda,
           "full_attn_layers": [i + 1 for i in range(layers) if i + 1 not in kda], "use_full_rank_gate": True}
    if bound is not None:
        lac["gate_lower_bound"] = bound
    text = {"model_type": "kimi_linear", "hidden_size": 64, "num_hidden_layers": layers, "num_attention_heads": 4,
            "linear_attn_config": lac, "kv_lora_rank": 32, "qk_nope_head_dim": 16, "qk_rope_head_dim": 8,
            "v_head_dim": 16, "torch_dtype": "bfloat16"}
    return {"architectures": ["KimiK3ForConditionalGeneration"], "model_type": "kimi_k3", "text_config": text,
            "vision_config": {"vt_hidden_size": 32}}


def k3_tensors(config: dict) -> Tensors:
    """The raw K3 checkpoint: `language_model.layers.*`, full-rank `g_proj`, `A_log` stored as [head_dim]."""
    text = config["text_config"]
    lac = text["linear_attn_config"]
    H, D, hidden = lac["num_heads"], lac["head_dim"], text["hidden_size"]
    tensors: Tensors = {}
    for i in range(text["num_hidden_layers"]):
        prefix = f"language_model.layers.{i}."
        tensors.update(_norms(prefix, hidden))
        if i + 1 not in lac["kda_layers"]:
            tensors.update(mla_layer(prefix, text))
            continue
        layer = kda_layer(prefix, hidden, H, D, 4)
        p = f"{prefix}self_attn."
        del layer[f"{p}g_a_proj.weight"], layer[f"{p}g_b_proj.weight"]
        layer[f"{p}g_proj.weight"] = ("BF16", (H * D, hidden))
        layer[f"{p}A_log"] = ("F32", (D,))
        tensors.update(layer)
    return tensors


def test_kimi_k3_has_no_false_shape_errors_and_takes_the_safe_gate_path(tmp_path: Path):
    config = k3_config()
    write_checkpoint(tmp_path / "k3", config, k3_tensors(config))
    result = check_model(str(tmp_path / "k3"), Deployment(tp=2, batch=8))
    model = result.model
    assert (model.family, model.kind) == ("kimi-k3", "kda") and model.weights_checked
    assert model.linear_layers == [0, 1, 2, 4, 5, 6]  # 1-based kda_layers [1, 2, 3, 5, 6, 7]
    assert model.layouts == ("kda-full-rank-gate",)
    assert errors(result) == [], [(d.code, d.message) for d in result.report]
    assert model.lower_bound[0] == -5.0
    assert result.decode.kernel == "kda_fused_decode" and not result.decode.packed and result.call is None
    # tp=2: 2 heads of 32 per rank; KDA conv is window-first: (W-1, 3 * 2 * 32) = (3, 192)
    # KimiK3ForConditionalGeneration: `auto` is extra_buffer from sglang 0.5.17, 3 + 2 counted slots, 8 x 5 + 1 rows
    assert result.pools["ssm_pool"].shape == (6, 8 * 5 + 1, 2, 32, 32)
    assert result.pools["conv_pool"].shape == (6, 8 * 5 + 1, 3, 192)
    vllm = check_model(str(tmp_path / "k3"), Deployment(tp=2, engine="vllm"))
    # vLLM 0.33 (from 0.27.0) decodes KDA with its own KDA packed op, another argument list: no contract call
    assert vllm.decode.kernel == "fused_recurrent_kda_packed_decode" and not vllm.decode.packed and vllm.call is None


def test_kimi_k3_tp_that_does_not_divide_heads(tmp_path: Path):
    config = k3_config(H=4)
    result = check_checkpoint(config_only(config), Deployment(tp=8))
    assert "GDR121" in errors(result)


def test_kimi_k3_wrong_a_log_length_is_reported(tmp_path: Path):
    config = k3_config(H=4, D=32)
    tensors = k3_tensors(config)
    tensors["language_model.layers.0.self_attn.A_log"] = ("F32", (7,))
    write_checkpoint(tmp_path / "k3", config, tensors)
    result = check_model(str(tmp_path / "k3"), Deployment())
    assert "GDR111" in errors(result) or "GDR113" in errors(result)


# -- GLM-5-Next, Bailing hybrid (Ling-V3) -------------------------------------------------------------------
def glm5_config(**extra) -> dict:
    config = {"architectures": ["Glm5NextForConditionalGeneration"], "model_type": "glm5_next",
              "hidden_size": 64, "num_hidden_layers": 8, "num_attention_heads": 4,
              "linear_num_heads": 4, "linear_head_dim": 16, "linear_conv_kernel_dim": 4, "torch_dtype": "bfloat16"}
    config.update(extra)
    return config


def test_glm5_next_default_layer_rule_and_kda_tensors(tmp_path: Path):
    config = glm5_config()
    tensors: Tensors = {}
    for i in range(8):
        prefix = f"model.layers.{i}."
        tensors.update(_norms(prefix, 64))
        if i % 4 != 3:  # Glm5NextTextConfig: layer i is KDA iff i % 4 != 3
            tensors.update(kda_layer(prefix, 64, 4, 16, 4))
    write_checkpoint(tmp_path / "glm", config, tensors)
    result = check_model(str(tmp_path / "glm"), Deployment(tp=2))
    assert result.model.family == "glm5-next" and result.model.linear_layers == [0, 1, 2, 4, 5, 6]
    assert errors(result) == [] and result.decode.packed and result.contract_run
    # tp=2: H/tp = 2, mixed_qkv width 3 * 2 * 16 = 96, gate a: HV_l * K = 32
    assert result.shapes()["mixed_qkv"] == [8, 96] and result.shapes()["a"] == [8, 32]


def test_glm5_next_kda_layers_are_zero_based_and_lower_bound_changes_the_path():
    config = glm5_config(linear_attn_config={"num_heads": 4, "head_dim": 16, "short_conv_kernel_size": 4,
                                             "kda_layers": [0, 1, 2, 4, 5, 6], "gate_lower_bound": -5.0})
    result = check_checkpoint(config_only(config), Deployment())
    assert result.model.linear_layers == [0, 1, 2, 4, 5, 6]
    assert not result.decode.packed and result.call is None
    assert "helion" in result.decode.switch


def bailing_config(**extra) -> dict:
    config = {"architectures": ["BailingMoeV3ForCausalLM"], "model_type": "bailing_hybrid",
              "hidden_size": 64, "num_hidden_layers": 8, "num_attention_heads": 8, "head_dim": 16,
              "v_head_dim": 16, "short_conv_kernel_size": 4, "layer_group_size": 4, "torch_dtype": "bfloat16"}
    config.update(extra)
    return config


def test_bailing_hybrid_kda_layer_groups_and_tp():
    result = check_checkpoint(config_only(bailing_config()), Deployment(tp=2))
    # layer_group_size 4: layer i is full iff (i+1) % 4 == 0
    assert result.model.family == "bailing-hybrid" and result.model.linear_layers == [0, 1, 2, 4, 5, 6]
    assert (result.model.num_k_heads, result.model.head_k_dim) == (8, 16)
    assert result.decode.packed and result.shapes()["mixed_qkv"] == [8, 3 * 4 * 16]
    assert "GDR121" in errors(check_checkpoint(config_only(bailing_config()), Deployment(tp=3)))
    safe = check_checkpoint(config_only(bailing_config(kda_safe_gate=True, kda_lower_bound=-5.0)), Deployment())
    assert not safe.decode.packed and safe.model.lower_bound[0] == -5.0


def test_bailing_without_short_conv_is_lightning_attention():
    config = bailing_config()
    del config["short_conv_kernel_size"]
    result = check_checkpoint(config_only(config), Deployment())
    diagnostic = only(result, "GDR101")
    assert diagnostic.severity == "info" and "lightning attention" in diagnostic.notes[0]


def test_bailing_list_layer_group_size_of_wrong_length():
    result = check_checkpoint(config_only(bailing_config(layer_group_size=[1, 1, 1, 0])), Deployment())
    assert any("has 4 entries but `num_hidden_layers` is 8" in d.message for d in result.report)


# -- Qwen derivatives ----------------------------------------------------------------------------------------
def test_qwen4_exp_sparse_and_indexed_layers_are_full():
    config = qwen3_5_config()
    config["architectures"] = ["Qwen4ExpForConditionalGeneration"]
    config["model_type"] = "qwen4_exp"
    config["text_config"]["model_type"] = "qwen4_exp_text"
    config["text_config"]["layer_types"] = ["linear_attention", "qwen_sparse_attention", "linear_attention",
                                            "indexed_attention", "linear_attention", "full_attention",
                                            "linear_attention", "linear_attention"]
    result = check_checkpoint(config_only(config), Deployment())
    assert result.model.family == "qwen4-exp" and result.model.linear_layers == [0, 2, 4, 6, 7]
    assert "GDR104" not in codes(result)


@pytest.mark.parametrize("root,text,family", [
    ("intern_s2_preview", "qwen3_5_moe_text", "qwen3.5-moe"),
    ("interns2_mobius", "interns2_mobius_text", "interns2-mobius"),
    ("minicpmv4_6", "qwen3_5_text", "qwen3.5"),
    ("minicpmv4_6", "qwen3_5_moe_text", "qwen3.5-moe"),
])
def test_qwen3_5_wrappers(root: str, text: str, family: str, tmp_path: Path):
    config = qwen3_5_config()
    config.update(architectures=["SomeWrapperForConditionalGeneration"], model_type=root)
    config["text_config"]["model_type"] = text
    c = config["text_config"]
    tensors: Tensors = {}
    for i in range(8):
        prefix = f"model.language_model.layers.{i}."
        tensors.update(qwen3_5_layer(prefix, c) if (i + 1) % 4 else _full_attention(prefix, 64, 4, 2, 256))
    write_checkpoint(tmp_path / root, config, tensors)
    result = check_model(str(tmp_path / root), Deployment(tp=2))
    assert result.model.family == family and errors(result) == []
    # H=2, HV=4, K=V=16 at tp=2: mixed_qkv width 2*1*16 + 2*16 = 64
    assert result.shapes()["mixed_qkv"] == [8, 64]


def test_kimi_k3_selected_before_its_kimi_linear_text_config():
    assert select_adapter(k3_config(), []).adapter.family == "kimi-k3"


def test_kimi_k3_text_only_class_with_a_kimi_linear_config_is_no_mismatch():
    """sglang's `KimiK3LinearForCausalLM` takes a `KimiLinearConfig`: the class names K3, the model type Kimi-Linear,
    and that is how it is served (GDR109 must not ask to switch to Kimi-Linear's class)."""
    text = dict(k3_config()["text_config"])
    config = {**text, "architectures": ["KimiK3LinearForCausalLM"]}
    result = check_checkpoint(config_only(config), Deployment())
    assert result.model.family == "kimi-k3" and "GDR109" not in codes(result)


# -- no silent pass ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("value,shown,problem", [
    ("32", '"32"', "a string, not a whole number"),
    (32.0, "32.0", "a float, not a whole number"),
    (True, "true", "a boolean, not a whole number"),
    (None, "null", "null, not a whole number"),
    ([32], "[32]", "a list, not a whole number"),
    (0, "0", "not a positive whole number"),
    (-32, "-32", "not a positive whole number"),
])
def test_wrong_typed_head_counts_are_errors(value, shown: str, problem: str, tmp_path: Path):
    config = qwen3_next_config(linear_num_value_heads=value)
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config, indent=2))
    result = check_model(str(path), Deployment())
    diagnostic = only(result, "GDR108")
    assert diagnostic.message == f"`linear_num_value_heads` is {shown}: {problem}"
    line = next(n for n, text in enumerate(path.read_text().splitlines(), 1) if '"linear_num_value_heads"' in text)
    assert diagnostic.location.line == line
    assert not result.ok and "GDR103" not in codes(result)


# The same bad value in each family's config: Qwen3-Next's root `linear_*`, Qwen3.5's `text_config.linear_*` and
# Kimi-Linear's `linear_attn_config.*`. Kimi reads `head_dim` (and `num_heads`) for both K and V, so an invalid
# one was reported twice: GDR108 for K, and a false "the config has no `linear_attn_config.head_dim`" (GDR103)
# for V (user test). A present but invalid value is one GDR108 in every family; null is such a value.
_BAD_SIZES = [
    ("128", '"128": a string, not a whole number'),
    (-128, "-128: not a positive whole number"),
    (0, "0: not a positive whole number"),
    (1e3, "1000.0: a float, not a whole number"),
    (None, "null: null, not a whole number"),
    (100000000, "100000000: outside the allowed range 1..65_536 (key head dim)"),
]
_FAMILY_KEYS = {  # family -> (config with the value set, the key GDR108 names), for a head dim and a head count
    "qwen3-next": (lambda size=None, heads=None: qwen3_next_config(
        **({"linear_key_head_dim": size} if heads is None else {"linear_num_key_heads": heads})),
        "linear_key_head_dim", "linear_num_key_heads"),
    "qwen3.5": (lambda size=None, heads=None: qwen3_5_config(
        **({"linear_key_head_dim": size} if heads is None else {"linear_num_key_heads": heads})),
        "text_config.linear_key_head_dim", "text_config.linear_num_key_heads"),
    "kimi-linear": (lambda size=None, heads=None: kimi_config(linear_attn_config={
        **kimi_config()["linear_attn_config"], **({"head_dim": size} if heads is None else {"num_heads": heads})}),
        "linear_attn_config.head_dim", "linear_attn_config.num_heads"),
}


def _model_errors(result) -> list[tuple[str, str]]:
    return [(d.code, d.message) for d in result.report if d.severity == "error" and d.code < "GDR2"]


@pytest.mark.parametrize("family", list(_FAMILY_KEYS))
@pytest.mark.parametrize("value,problem", _BAD_SIZES, ids=[shown.split(":")[0] for _, shown in _BAD_SIZES])
def test_an_invalid_head_dim_is_one_gdr108_in_every_family(family: str, value, problem: str, tmp_path: Path):
    make, size_key, _ = _FAMILY_KEYS[family]
    path = tmp_path / "config.json"
    path.write_text(json.dumps(make(size=value), indent=2))
    result = check_model(str(path), Deployment())
    assert result.model is not None and result.model.family == family
    assert _model_errors(result) == [("GDR108", f"`{size_key}` is {problem}")]
    assert "GDR103" not in codes(result)
    *sections, leaf = size_key.split(".")
    lines = path.read_text().splitlines()
    start = next((n for n, text in enumerate(lines) if f'"{sections[-1]}"' in text), 0) if sections else 0
    line = next(n for n, text in enumerate(lines[start:], start + 1) if f'"{leaf}"' in text)  # not Kimi's root one
    assert only(result, "GDR108").location.line == line


@pytest.mark.parametrize("family", list(_FAMILY_KEYS))
def test_an_invalid_head_count_is_one_gdr108_in_every_family(family: str):
    make, _, heads_key = _FAMILY_KEYS[family]
    result = check_checkpoint(config_only(make(heads="x")), Deployment())
    assert _model_errors(result) == [("GDR108", f'`{heads_key}` is "x": a string, not a whole number')]
    assert "GDR103" not in codes(result)


@pytest.mark.parametrize("family", list(_FAMILY_KEYS))
def test_a_missing_head_dim_is_gdr103_in_every_family(family: str):
    make, size_key, _ = _FAMILY_KEYS[family]
    config = make(size=1)
    text = config["text_config"] if family == "qwen3.5" else config
    section, _, leaf = size_key.removeprefix("text_config.").rpartition(".")
    del (text[section] if section else text)[leaf]
    result = check_checkpoint(config_only(config), Deployment())
    assert "GDR108" not in codes(result)
    assert (only(result, "GDR103").message, only(result, "GDR103").severity) == (
        f"the config has no `{size_key.removeprefix('text_config.')}`", "error")  # the key as the family names it


@pytest.mark.parametrize("family", list(_FAMILY_KEYS))
def test_explain_names_the_invalid_head_dim_in_every_family(family: str, tmp_path: Path):
    """`explain --model` on a config whose head dim is invalid said, for Kimi-Linear only, "the config has no
    `linear_attn_config.head_dim`" (the false GDR103): it names the invalid value, as for the GDN families."""
    make, size_key, _ = _FAMILY_KEYS[family]
    (tmp_path / "config.json").write_text(json.dumps(make(size="128")))
    with pytest.raises(ExplainModelError) as raised:
        model_numbers(str(tmp_path))
    assert str(raised.value) == (f"{tmp_path}: the model's head counts and sizes are not all known (`{size_key}` is "
                                 '"128": a string, not a whole number), so explain has no widths to read the numbers '
                                 "with")


def test_unknown_torch_dtype_is_an_error():
    result = check_checkpoint(config_only(qwen3_next_config(torch_dtype="bfloat17")), Deployment())
    diagnostic = only(result, "GDR108")
    assert diagnostic.message == ('`torch_dtype` is "bfloat17": not a model dtype (expected one of bfloat16, '
                                  'float16, float32)')


def test_unreadable_layer_count_is_not_nothing_to_check():
    # A wrong-typed value is GDR108 (docs/model-families.md), also when no layer can be described without it.
    # GDR107 says that nothing was described: ignoring GDR108 must not turn the unchecked model into a pass.
    result = check_checkpoint(config_only(qwen3_next_config(num_hidden_layers="48")), Deployment())
    diagnostic = only(result, "GDR108")
    assert diagnostic.severity == "error" and result.model is None and codes(result) == ["GDR108", "GDR107"]
    assert only(result, "GDR107").message == ("`Qwen3NextForCausalLM` has linear attention (routed to the engines' "
                                              "GDN backend) but `num_hidden_layers` holds a value that cannot be used "
                                              "(GDR108)")
    assert diagnostic.message == "`num_hidden_layers` is \"48\": a string, not a whole number"
    assert diagnostic.notes == ["`Qwen3NextForCausalLM` has linear attention (routed to the engines' GDN backend), "
                                "but its layers could not be described: nothing else was checked"]


@pytest.mark.parametrize("with_weights", [False, True], ids=["config only", "with weights"])
def test_an_out_of_range_layer_count_is_gdr108_with_or_without_weights(with_weights: bool, tmp_path: Path):
    """docs/limits.md: a config field out of range is GDR108. Without weights the layer map needs the count, so
    it was reported as GDR107 (undescribed), while the same config with weights gave GDR108."""
    config = qwen3_next_config()
    tensors = qwen_tensors(config) if with_weights else {}
    config["num_hidden_layers"] = 10**30
    path = write_checkpoint(tmp_path / "huge", config, tensors)
    if not with_weights:
        (path / "model.safetensors").unlink()
    result = check_model(str(path), Deployment())
    assert errors(result) == (["GDR108"] if with_weights else ["GDR108", "GDR107"])  # (see the test above)
    assert only(result, "GDR108").message == ("`num_hidden_layers` is 1000000000000000000000000000000: outside the "
                                              "allowed range 1..65_536 (decoder layers)")


@pytest.mark.parametrize("make", ["qwen3.5", "kimi"])
def test_the_header_of_a_model_with_an_unusable_layer_count_shows_it_unknown(make: str, tmp_path: Path, monkeypatch):
    """The layers come from `layer_types` (or Kimi's layer lists) while `num_hidden_layers` is GDR108: the model
    line said '18 of None layers linear'; it says '?' as the heads line does for an unusable dimension."""
    monkeypatch.setenv("NO_COLOR", "1")
    monkeypatch.setenv("COLUMNS", "200")
    if make == "qwen3.5":
        config = qwen3_5_config(layers=24)
        config["text_config"]["num_hidden_layers"] = 10**12
        line = ("Qwen3_5ForConditionalGeneration (qwen3.5), GDN: 18 of ? layers linear [0-2, 4-6, 8-10, 12-14, 16-18, "
                "20-22]")
    else:
        config = kimi_config(layers=8)
        config["num_hidden_layers"] = 10**12
        line = "KimiLinearForCausalLM (kimi-linear), KDA: 6 of ? layers linear [0-2, 4-6]"
    path = tmp_path / "ck" / "config.json"
    path.parent.mkdir()
    path.write_text(json.dumps(config, indent=2))
    run = run_cli(str(path.parent))
    assert run.exit_code == 1 and "GDR108" in run.stdout
    [model] = [row for row in run.stdout.splitlines() if row.lstrip().startswith("model ")]
    assert model.split(None, 1)[1] == line


@pytest.mark.parametrize("config,key", [
    (dict(jet_config(), layer_types=None), "layer_types"),
    ({**k3_config(), "text_config": {**k3_config()["text_config"],
                                     "linear_attn_config": {"num_heads": 4, "head_dim": 32}}},
     "linear_attn_config.kda_layers"),
    ({"architectures": ["MyHybridForCausalLM"], "model_type": "my_hybrid", "num_hidden_layers": 4,
      "linear_attn_config": {"kda_layers": [1, 2]}}, "linear_attn_config"),
])
def test_markers_without_a_description_are_errors(config: dict, key: str):
    result = check_checkpoint(config_only(config), Deployment())
    assert errors(result) and set(errors(result)) == {"GDR107"}
    assert any(key in d.message or d.location.json_key == key or key in (d.location.json_key or "")
               for d in result.report), [(d.message, d.location) for d in result.report]


def test_llama_stays_nothing_to_check():
    result = check_checkpoint(config_only({"architectures": ["LlamaForCausalLM"], "model_type": "llama",
                                           "num_hidden_layers": 4, "num_attention_heads": 8}), Deployment())
    assert codes(result) == ["GDR101"] and result.ok


@pytest.mark.parametrize("config,error", [
    ({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "num_hidden_layers": 4},
     "error[GDR314]: nothing to dry-run: `LlamaForCausalLM` has no GDN or KDA layers"),
    (jet_config(), "error[GDR314]: nothing to dry-run: under sglang 0.5.23 the decode step calls "
                   "`fused_recurrent_gated_delta_rule_update`, not a packed decode kernel"),
])
def test_dry_run_with_nothing_to_run_exits_1(config: dict, error: str, tmp_path: Path, capsys):
    from gdr_check.cli.main import main

    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    code = main(["dry-run", str(path), "--output-format", "full"])
    out = " ".join(capsys.readouterr().out.split())
    assert code == 1 and error in out, out
    assert out.endswith("dry-run not launched: nothing to run (GDR314); 1 error(s), 0 warning(s), 0 note(s)"), out


def test_a_safe_gate_layer_under_sglang_names_the_switch_and_what_the_dry_run_models():
    # A KDA layer with a safe-gate lower bound under sglang: GDR314 names the switch, which changes the
    # deployment's path, not the dry-run's.
    check = check_checkpoint(config_only(bailing_config(kda_safe_gate=True, kda_lower_bound=-5.0)), Deployment())
    nothing = nothing_to_run(check)
    assert nothing is not None and nothing.message == (
        "nothing to dry-run: under sglang 0.5.23 the decode step calls `KDA decode (unfused)`, not a packed decode "
        "kernel")
    assert nothing.fixes[0] == (
        "in the deployment: a decode backend that supports the safe gate in the packed decode "
        "(`--linear-attn-decode-backend helion`) takes the packed kernel, with `lower_bound` (the dry-run models the "
        "default decode kernels, so it does not follow this switch)")
    assert len(nothing.fixes) == 2  # vLLM decodes KDA with `fused_recurrent_kda`: no engine to dry-run under


def test_kimi_linear_ignores_gate_lower_bound():
    # sglang builds Kimi-Linear's KDA layer without `safe_gate`: the packed decode runs whatever the config says.
    from checkpoint_builders import kimi_config

    config = kimi_config()
    config["linear_attn_config"]["gate_lower_bound"] = -5.0
    result = check_checkpoint(config_only(config), Deployment())
    assert result.model.lower_bound is None and result.decode.packed and result.call is not None


def test_llm_config_section_is_read():
    config = qwen3_5_config()
    config["llm_config"] = config.pop("text_config")
    result = check_checkpoint(config_only(config), Deployment())
    assert result.model.family == "qwen3.5" and result.model.num_v_heads == 4
    assert result.model.sources["num_v_heads"].key == "llm_config.linear_num_value_heads"


@pytest.mark.parametrize("value,shown", [("oops", '"oops"'), (None, "null"), ([1, 2], "[1, 2]")])
def test_a_text_config_that_is_no_object_is_named_not_its_missing_fields(value, shown):
    """Every field of a multimodal model's text model lies in `text_config`: when that is no object, it is the
    one problem to fix, not the layer count and heads that are then missing."""
    result = check_checkpoint(config_only({**k3_config(), "text_config": value}), Deployment())
    diagnostic = only(result, "GDR107")
    assert diagnostic.location.json_key == "text_config"
    assert diagnostic.message.endswith(f"but `text_config` is {shown}: not an object, so the fields it holds "
                                       "cannot be read")


def test_a_null_section_beside_a_readable_one_is_not_the_problem():
    """Qwen3.5 reads `text_config`, else `llm_config`: with a readable `text_config`, a null `llm_config` hides
    nothing, and the real problem (the layer count) is the one named."""
    config = qwen3_5_config()
    del config["text_config"]["num_hidden_layers"], config["text_config"]["layer_types"]
    config["llm_config"] = None
    result = check_checkpoint(config_only(config), Deployment())
    diagnostic = only(result, "GDR107")
    assert "`num_hidden_layers` is missing" in diagnostic.message and "llm_config" not in diagnostic.message
