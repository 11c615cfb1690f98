"""Model descriptions: adapters per family, layer maps, config vs weights, and the model-level rules."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from checkpoint_builders import (
    interval_layer_types,
    kimi_config,
    kimi_tensors,
    olmo_hybrid_layer,
    qwen3_5_config,
    qwen3_next_config,
    qwen_tensors,
    write_checkpoint,
    write_safetensors,
)
from gdr_check.base.errors import display_path
from gdr_check.base.registry import RULES
from gdr_check.deployment.settings import Deployment
from gdr_check.models import get_builtin, list_builtin
from gdr_check.models.adapters import select_adapter
from gdr_check.pipeline.model_check import check_checkpoint, check_model
from gdr_check.sources import Checkpoint, TensorInfo

DEFAULT = Deployment()


def codes(result) -> list[str]:
    return result.report.codes()


def only(result, code: str):
    found = [d for d in result.report if d.code == code]
    assert len(found) == 1, (code, [(d.code, d.message) for d in result.report])
    return found[0]


def config_only(config: dict, tensors: dict | None = None) -> Checkpoint:
    infos = {name: TensorInfo(name, dtype, tuple(shape), "model.safetensors")
             for name, (dtype, shape) in (tensors or {}).items()}
    return Checkpoint(target="mem", root=None, kind="config-only", config=config, config_file="config.json",
                      tensors=infos)


# -- descriptions per family -----------------------------------------------------------------------------------
def test_qwen3_next_small_checkpoint(tmp_path: Path):
    config = qwen3_next_config()
    write_checkpoint(tmp_path, config, qwen_tensors(config))
    result = check_model(str(tmp_path), DEFAULT)
    model = result.model
    assert (model.architecture, model.family, model.kind) == ("Qwen3NextForCausalLM", "qwen3-next", "gdn")
    assert model.linear_layers == [0, 1, 2, 4, 5, 6]  # (i+1) % 4 == 0 is full attention
    assert (model.num_k_heads, model.num_v_heads, model.head_k_dim, model.head_v_dim, model.conv_kernel) == (
        2, 4, 16, 16, 4)
    assert model.weights_checked and model.layouts == ("gdn-fused-qkvz",)
    assert model.sources["num_v_heads"].key == "linear_num_value_heads"
    assert model.sources["num_v_heads"].location.line is not None
    assert model.sources["linear_layers"].key == "full_attention_interval"
    assert model.dtypes.A_log == "bfloat16" and model.dtypes.activation == "bfloat16"
    assert result.report.ok, [(d.code, d.message) for d in result.report]


@pytest.mark.parametrize("namespace,text_only", [
    ("model.language_model.", False), ("language_model.model.", False), ("model.", True),
])
def test_qwen3_5_namespaces(tmp_path: Path, namespace: str, text_only: bool):
    config = qwen3_5_config(text_only=text_only)
    write_checkpoint(tmp_path, config, qwen_tensors(config, namespace=namespace))
    result = check_model(str(tmp_path), DEFAULT)
    model = result.model
    assert model.family == "qwen3.5" and model.namespace == namespace
    assert model.linear_layers == [0, 1, 2, 4, 5, 6]
    assert model.sources["linear_layers"].key == ("layer_types" if text_only else "text_config.layer_types")
    assert model.dtypes.A_log == "float32" and model.dtypes.mamba_ssm_dtype == "float32"
    assert result.report.ok


def test_qwen3_5_moe_adapter():
    config = qwen3_5_config(moe=True)
    result = check_checkpoint(config_only(config), DEFAULT)
    assert result.model.family == "qwen3.5-moe"
    assert not result.model.weights_checked
    assert "no weights were read" not in " ".join(result.notes)  # the config-only reader already says so


def test_kimi_linear_small_checkpoint(tmp_path: Path):
    config = kimi_config()
    write_checkpoint(tmp_path, config, kimi_tensors(config, conv_rank=2))
    result = check_model(str(tmp_path), Deployment(tp=2))
    model = result.model
    assert (model.kind, model.family) == ("kda", "kimi-linear")
    assert model.linear_layers == [0, 1, 2, 4, 5, 6]  # 1-based kda_layers [1, 2, 3, 5, 6, 7]
    assert (model.num_k_heads, model.num_v_heads, model.head_k_dim, model.head_v_dim) == (4, 4, 16, 16)
    assert model.num_key_value_heads is None  # the legacy field is ignored for KDA
    assert model.sources["head_k_dim"].key == "linear_attn_config.head_dim"  # not the legacy root head_dim 72
    assert model.dtypes.A_log == "float32"
    assert result.report.errors == []


def test_kimi_optional_key_fields_fall_back():
    config = kimi_config()
    config["linear_attn_config"]["num_k_heads"] = 4
    result = check_checkpoint(config_only(config), DEFAULT)
    assert result.model.sources["num_k_heads"].key == "linear_attn_config.num_k_heads"
    assert result.model.sources["num_v_heads"].key == "linear_attn_config.num_heads"


def test_kimi_asymmetric_heads_error():
    config = kimi_config()
    config["linear_attn_config"]["head_k_dim"] = 8
    result = check_checkpoint(config_only(config), DEFAULT)
    assert only(result, "GDR125").message == (
        "the KDA kernel needs equal key and value heads and head dims (got H=4, HV=4, K=8, V=16)")
    assert not result.contract_run


def test_generic_olmo_hybrid(tmp_path: Path):
    config = {
        "architectures": ["OlmoHybridForCausalLM"], "model_type": "olmo_hybrid", "hidden_size": 64,
        "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 4,
        "layer_types": ["linear_attention", "linear_attention", "linear_attention", "full_attention"],
        "linear_num_key_heads": 2, "linear_num_value_heads": 2, "linear_key_head_dim": 16,
        "linear_value_head_dim": 32, "linear_conv_kernel_dim": 4, "torch_dtype": "bfloat16",
    }
    tensors = {}
    for i in range(3):
        tensors.update(olmo_hybrid_layer(f"model.layers.{i}.", 64, 2, 2, 16, 32, 4))
    write_checkpoint(tmp_path, config, tensors)
    result = check_model(str(tmp_path), DEFAULT)
    assert result.model.family == "generic-gdn" and result.model.layouts == ("gdn-separate-qkv",)
    assert result.shapes()["mixed_qkv"] == [8, 2 * 2 * 16 + 2 * 32]
    # OLMo-Hybrid doubles beta by default, which the packed kernel does not do.
    assert only(result, "GDR106").severity == "warning"
    assert not any(d.code.startswith("GDR11") for d in result.report)


def test_gigachat_zero_based_full_attention_layers():
    config = {
        "architectures": ["GigaChat3_5ForCausalLM"], "model_type": "gigachat3_5", "hidden_size": 64,
        "num_hidden_layers": 6, "full_attention_layers": [0, 5], "num_attention_heads": 4,
        "num_key_value_heads": 2, "linear_num_key_heads": 8, "linear_num_value_heads": 16,
        "linear_key_head_dim": 128, "linear_value_head_dim": 128, "linear_conv_kernel_dim": 4,
    }
    result = check_checkpoint(config_only(config), DEFAULT)
    assert result.model.linear_layers == [1, 2, 3, 4]
    assert result.model.sources["linear_layers"].key == "full_attention_layers"


def test_unknown_architecture_inferred_from_tensors(tmp_path: Path):
    reference = qwen3_5_config(text_only=True, H=2, HV=4, K=16, V=16)
    tensors = qwen_tensors(reference, namespace="model.")
    write_safetensors(tmp_path / "model.safetensors", tensors)  # no config.json
    result = check_model(str(tmp_path / "model.safetensors"), DEFAULT)
    model = result.model
    assert model.family == "inferred-gdn" and not model.known_architecture
    assert (model.num_k_heads, model.num_v_heads, model.head_k_dim, model.head_v_dim, model.conv_kernel) == (
        2, 4, 16, 16, 4)
    assert model.sources["head_k_dim"].kind == "assumed"
    assert model.sources["num_v_heads"].tensor == "model.layers.0.linear_attn.A_log"
    assert model.linear_layers == [0, 1, 2, 4, 5, 6] and model.num_hidden_layers == 8
    warning = only(result, "GDR102")
    assert warning.severity == "warning"
    assert warning.message == ("the unnamed architecture (no config.json) is not a known GDN/KDA architecture: "
                               "its geometry is inferred from tensor shapes")
    assert "head_k_dim = 16 (assumed equal to head_v_dim: no tensor holds K alone)" in warning.notes
    assert result.call is not None


def test_a_tp_error_resting_on_the_assumed_key_head_dim_is_a_warning(tmp_path: Path):
    # H = 2 key heads of K = 8: the tensors measure only H*K = 16, and with K = V = 16 assumed, H = 1 would not
    # split at TP 2. The model runs at TP 2; the wheel said so as an error (exit 1) on a guessed value.
    reference = qwen3_5_config(text_only=True, H=2, HV=4, K=8, V=16)
    write_safetensors(tmp_path / "model.safetensors", qwen_tensors(reference, namespace="model."))
    result = check_model(str(tmp_path / "model.safetensors"), Deployment(tp=2))
    assert (result.model.num_k_heads, result.model.head_k_dim) == (1, 16)
    warning = only(result, "GDR121")
    assert warning.severity == "warning"
    assert warning.message == "tp=2 does not divide `num_k_heads`=1; TP sizes that work: 1"
    assert warning.notes[0] == ("only H*K = 16 is measured: H = 1 rests on head_k_dim = head_v_dim = 16, an "
                                "assumption (no config field and no tensor gives K alone); the TP sizes listed rest on "
                                "it too")
    assert warning.fixes[0] == "pass the checkpoint with its config.json (its head_k_dim settles H)"
    assert not [d for d in result.report if d.severity == "error"]


def test_a_tp_error_on_the_measured_key_width_stays_an_error_without_a_config(tmp_path: Path):
    # H*K = 3*6 = 18 (measured) does not split at TP 4 whatever K is.
    reference = qwen3_5_config(text_only=True, H=3, HV=12, K=6, V=6)
    write_safetensors(tmp_path / "model.safetensors", qwen_tensors(reference, namespace="model."))
    result = check_model(str(tmp_path / "model.safetensors"), Deployment(tp=4))
    assert only(result, "GDR121").severity == "error"


def test_a_tp_error_on_measured_value_heads_stays_an_error_without_a_config(tmp_path: Path):
    reference = qwen3_5_config(text_only=True, H=2, HV=6, K=16, V=16)
    write_safetensors(tmp_path / "model.safetensors", qwen_tensors(reference, namespace="model."))
    result = check_model(str(tmp_path / "model.safetensors"), Deployment(tp=4))
    assert only(result, "GDR121").severity == "error"  # HV = 6 comes from A_log itself


@pytest.mark.parametrize(("config", "subject"), [
    ({"hidden_size": 64}, "the unnamed architecture (its config.json names none)"),
    ({}, "the unnamed architecture (its config.json names none)"),
    ({"architectures": ["LlamaForCausalLM"], "hidden_size": 64}, "`LlamaForCausalLM`"),
])
def test_a_config_without_linear_attention_is_named_as_it_names_itself(config, subject):
    result = check_checkpoint(config_only(config), DEFAULT)
    assert only(result, "GDR101").message == f"{subject} has no GDN or KDA layers: nothing to check"


def test_unknown_kda_architecture_inferred():
    config = kimi_config()
    tensors = kimi_tensors(config)
    checkpoint = config_only({"architectures": ["SolarOpen2ForCausalLM"], "num_hidden_layers": 8}, tensors)
    result = check_checkpoint(checkpoint, DEFAULT)
    model = result.model
    assert model.kind == "kda" and (model.num_v_heads, model.head_v_dim, model.head_k_dim) == (4, 16, 16)
    assert "GDR102" in codes(result)


@pytest.mark.parametrize("architecture,model_type,phrase", [
    ("MiniMaxText01ForCausalLM", "minimax_text_01", "lightning attention"),
    ("BailingMoeLinearV2ForCausalLM", "bailing_moe_linear", "Ring/Ling-linear"),
    ("LlamaForCausalLM", "llama", "no layer is a GDN/KDA layer"),
])
def test_models_without_linear_attention(architecture: str, model_type: str, phrase: str):
    result = check_checkpoint(config_only({"architectures": [architecture], "model_type": model_type,
                                           "num_hidden_layers": 4}), DEFAULT)
    diagnostic = only(result, "GDR101")
    assert diagnostic.message == f"`{architecture}` has no GDN or KDA layers: nothing to check"
    assert diagnostic.severity == "info" and any(phrase in note for note in diagnostic.notes)
    assert result.model is None and result.call is None
    document = result.to_dict()
    assert document["model"] is None and document["shapes"] == {}


def test_qwen_config_with_every_layer_full_is_an_error_not_nothing_to_check():
    # The architecture and the `linear_*` fields say linear attention: "nothing to check" would be a silent pass.
    config = qwen3_5_config(layer_types=["full_attention"] * 8)
    result = check_checkpoint(config_only(config), DEFAULT)
    diagnostic = only(result, "GDR107")
    assert diagnostic.severity == "error" and not result.ok
    assert diagnostic.message == ("`Qwen3_5ForConditionalGeneration` has linear attention (routed to the engines' "
                                  "GDN backend) but `text_config.layer_types` makes no layer a linear-attention layer")
    assert diagnostic.location.json_key == "text_config.layer_types"


@pytest.mark.parametrize("architectures, what, fix", [
    (["LlamaForCausalLM"], "names `LlamaForCausalLM`, but `model_type` `qwen3_next` is served by "
     "`Qwen3NextForCausalLM`", 'set `architectures` to ["Qwen3NextForCausalLM"], or `model_type` to the one '
     "`LlamaForCausalLM` reads"),
    (["Qwen3NextForCausalLm"], "names `Qwen3NextForCausalLm`, but `model_type` `qwen3_next` is served by "
     "`Qwen3NextForCausalLM`", 'set `architectures` to ["Qwen3NextForCausalLM"], or `model_type` to the one '
     "`Qwen3NextForCausalLm` reads"),
    ("Qwen3NextForCausalLM", 'is "Qwen3NextForCausalLM", not a list of class names',
     'write it as a list: ["Qwen3NextForCausalLM"]'),
    ([], "is an empty list", 'write it as a list: ["Qwen3NextForCausalLM"]'),
    ([7], "is [7], whose first entry is no class name", 'write it as a list: ["Qwen3NextForCausalLM"]'),
], ids=["another model's", "a typo", "a string", "empty", "a number"])
def test_architectures_that_do_not_serve_the_model_type_are_a_warning(architectures, what, fix):
    """sglang and vLLM build the model class `architectures[0]` names; transformers the config `model_type`
    names: a config whose two disagree loads another model (or none)."""
    config = qwen3_next_config()
    config["architectures"] = architectures
    result = check_checkpoint(config_only(config), DEFAULT)
    diagnostic = only(result, "GDR109")
    assert (diagnostic.severity, diagnostic.message, diagnostic.fixes) == (
        "warning", f"`architectures` {what}; sglang and vLLM take the model class from its first entry", [fix])
    assert diagnostic.location.json_key == "architectures"
    assert result.model is not None and result.model.family == "qwen3-next"  # described by its model type


def test_released_configs_name_their_own_architecture():
    for model in list_builtin():  # the published config.json of each built-in model
        assert "GDR109" not in check_checkpoint(config_only(dict(model.config)), DEFAULT).report.codes(), model.repo_id


def test_another_family_s_architecture_says_why_its_fields_are_missing():
    config = qwen3_next_config()
    config["architectures"] = ["KimiLinearForCausalLM"]
    result = check_checkpoint(config_only(config), DEFAULT)
    first = [d for d in result.report if d.code == "GDR107"][0]
    assert first.notes[0] == ("`model_type` `qwen3_next` is qwen3-next's (served by `Qwen3NextForCausalLM`), while "
                              "`architectures` names kimi-linear's `KimiLinearForCausalLM`: the fields are looked up "
                              "as kimi-linear's")


@pytest.mark.parametrize("interval, shown", [(0, "0"), ("4", '"4"'), (-1, "-1")])
def test_an_unusable_interval_is_named_not_a_missing_layer_types(interval, shown):
    result = check_checkpoint(config_only(qwen3_next_config(full_attention_interval=interval)), DEFAULT)
    diagnostic = only(result, "GDR107")
    assert diagnostic.message == (
        "`Qwen3NextForCausalLM` has linear attention (routed to the engines' GDN backend) but "
        f"`full_attention_interval` is {shown}: the layer map needs a positive whole number (every n-th layer is "
        "full attention)")
    assert diagnostic.location.json_key == "full_attention_interval"


# -- config vs weights ---------------------------------------------------------------------------------------
def test_config_says_more_value_heads_than_a_log(tmp_path: Path):
    weights = qwen3_next_config(HV=8)
    config = qwen3_next_config(HV=32)
    write_checkpoint(tmp_path, config, qwen_tensors(weights))
    result = check_model(str(tmp_path), DEFAULT)
    diagnostic = only(result, "GDR111")
    assert diagnostic.message == "config says 32 value heads but `model.layers.0.linear_attn.A_log` holds 8"
    assert diagnostic.severity == "error"
    location = diagnostic.location
    assert location.json_key == "linear_num_value_heads" and location.file.endswith("config.json")
    text = (tmp_path / "config.json").read_text().splitlines()
    assert '"linear_num_value_heads"' in text[location.line - 1]
    assert location.tensor == "model.layers.0.linear_attn.A_log" and location.shard == "model.safetensors"
    assert any("config key `linear_num_value_heads`" in note for note in diagnostic.notes)
    assert any("every linear-attention layer (6)" in note for note in diagnostic.notes)
    # One cause, one diagnostic: the projections sized for 8 heads are explained by the same field.
    assert not any(d.code in ("GDR113", "GDR112") for d in result.report)


def test_one_layer_disagrees_with_config(tmp_path: Path):
    config = qwen3_5_config(text_only=True)
    tensors = qwen_tensors(config)
    tensors["model.layers.5.linear_attn.norm.weight"] = ("F32", (32,))
    write_checkpoint(tmp_path, config, tensors)
    result = check_model(str(tmp_path), DEFAULT)
    diagnostic = only(result, "GDR111")
    assert diagnostic.message == (
        "config says 16 channels per value head but `model.layers.5.linear_attn.norm.weight` holds 32")
    assert any("only in layer 5" in note for note in diagnostic.notes)
    # The other five layers agree with the config: the fix is the tensor, not the config (second user test).
    assert diagnostic.fixes == ["re-download or re-export `model.safetensors` (layer 5): the other layers hold 16, "
                                "as the config says"]


def test_half_the_layers_disagreeing_in_two_shards_name_both_and_leave_the_config(tmp_path: Path):
    # Layers 0-2 of 6 hold another norm size, in two shards: changing the config to them would make the other half
    # disagree and the fix flip back (third user test); the fix names both shards.
    config = qwen3_5_config(text_only=True)
    tensors = qwen_tensors(config)
    for layer in (0, 1, 2):
        tensors[f"model.layers.{layer}.linear_attn.norm.weight"] = ("F32", (32,))
    write_checkpoint(tmp_path, config, tensors, shards=4)
    diagnostic = only(check_model(str(tmp_path), DEFAULT), "GDR111")
    assert len(diagnostic.fixes) == 1 and diagnostic.fixes[0].startswith("re-download or re-export `model-0000")
    assert diagnostic.fixes[0].endswith(" (layers 0-2): the other layers hold 16, as the config says")
    assert diagnostic.fixes[0].count(".safetensors`") == 2


def test_one_odd_tensor_leaves_the_rest_of_its_layer_alone(tmp_path: Path):
    """A layer whose `in_proj_ba` is sized for twice the value heads, the rest of it as the config says: the odd
    tensor is the one finding. The tensors after it that fit the config are neither shapes "expected" as they
    are (GDR113) nor read with the odd head count (`out_proj` holding half the head dim, GDR111)."""
    config = qwen3_next_config()
    tensors = qwen_tensors(config)
    rows, width = tensors["model.layers.0.linear_attn.in_proj_ba.weight"][1]
    tensors["model.layers.0.linear_attn.in_proj_ba.weight"] = ("BF16", (2 * rows, width))
    write_checkpoint(tmp_path, config, tensors)
    result = check_model(str(tmp_path), DEFAULT)
    found = [(d.code, d.message) for d in result.report if d.code in ("GDR111", "GDR112", "GDR113")]
    assert found == [("GDR111", f"config says {config['linear_num_value_heads']} value heads but "
                                f"`model.layers.0.linear_attn.in_proj_ba.weight` holds "
                                f"{2 * config['linear_num_value_heads']}")]
    assert any("only in layer 0" in note for note in only(result, "GDR111").notes)


def test_a_wrong_tensor_after_an_odd_one_is_still_found(tmp_path: Path):
    """After an odd `in_proj_b` (twice the value heads) and a tensor that fits the config, a `conv1d` sized for
    twice the key heads is read against the config, not against the odd tensor's head count (against which it
    fits by chance)."""
    config = qwen3_5_config(text_only=True)
    tensors = qwen_tensors(config)
    prefix = "model.layers.0.linear_attn."
    rows, width = tensors[prefix + "in_proj_b.weight"][1]
    tensors[prefix + "in_proj_b.weight"] = ("BF16", (2 * rows, width))
    dtype, (channels, one, kernel) = tensors[prefix + "conv1d.weight"]
    tensors[prefix + "conv1d.weight"] = (dtype, (channels + 2 * config["linear_num_key_heads"]
                                                 * config["linear_key_head_dim"], one, kernel))
    write_checkpoint(tmp_path, config, tensors)
    found = [(d.code, d.message) for d in check_model(str(tmp_path), DEFAULT).report
             if d.code in ("GDR111", "GDR112", "GDR113")]
    assert found == [
        ("GDR111", f"config says {config['linear_num_value_heads']} value heads but `{prefix}in_proj_b.weight` "
                   f"holds {2 * config['linear_num_value_heads']}"),
        ("GDR111", f"config says {config['linear_num_key_heads']} key heads but `{prefix}conv1d.weight` holds "
                   f"{2 * config['linear_num_key_heads']}")]


def test_layer_vs_layer_without_config_values():
    reference = qwen3_5_config(text_only=True)
    tensors = qwen_tensors(reference)
    tensors["model.layers.6.linear_attn.A_log"] = ("F32", (8,))
    result = check_checkpoint(config_only({"architectures": ["Mystery"], "num_hidden_layers": 8}, tensors), DEFAULT)
    diagnostic = only(result, "GDR112")
    assert diagnostic.message == (
        "`model.layers.6.linear_attn.A_log` holds 8 value heads but `model.layers.0.linear_attn.A_log` holds 4")


def test_unexplained_shape(tmp_path: Path):
    config = qwen3_next_config()
    tensors = qwen_tensors(config)
    tensors["model.layers.1.linear_attn.in_proj_qkvz.weight"] = ("BF16", (193, 64))
    write_checkpoint(tmp_path, config, tensors)
    diagnostic = only(check_model(str(tmp_path), DEFAULT), "GDR113")
    assert diagnostic.message == ("`model.layers.1.linear_attn.in_proj_qkvz.weight` has shape [193, 64], "
                                  "expected [192, 64]")


def test_missing_tensor_in_one_layer(tmp_path: Path):
    config = qwen3_next_config()
    tensors = qwen_tensors(config)
    del tensors["model.layers.4.linear_attn.dt_bias"]
    write_checkpoint(tmp_path, config, tensors)
    diagnostic = only(check_model(str(tmp_path), DEFAULT), "GDR115")
    assert diagnostic.message == "linear-attention layer 4 lacks `linear_attn.dt_bias`"  # it said "layers 4 lack"
    assert diagnostic.fixes == ["check that every shard of the index is present and complete"]
    # the shard as every report path is shown: from the working directory (absolute when outside it)
    assert diagnostic.location.file == display_path(tmp_path / "model.safetensors")
    assert diagnostic.location.tensor == "model.layers.4.linear_attn.dt_bias"


def test_missing_tensor_in_several_layers_is_plural(tmp_path: Path):
    config = qwen3_next_config()
    tensors = qwen_tensors(config)
    for layer in (0, 1, 2, 4):
        del tensors[f"model.layers.{layer}.linear_attn.dt_bias"]
    write_checkpoint(tmp_path, config, tensors)
    diagnostic = only(check_model(str(tmp_path), DEFAULT), "GDR115")
    assert diagnostic.message == "linear-attention layers 0-2, 4 lack `linear_attn.dt_bias`"


def test_one_layer_is_counted_in_the_singular():
    types = ["linear_attention"] + ["full_attention"] * 3
    result = check_checkpoint(config_only(qwen3_5_config(layers=4, layer_types=types)), DEFAULT)
    assert only(result, "GDR131").message.endswith("per rank: 1 layer x (768 B conv + 4 KiB SSM)")
    assert only(result, "GDR105").message == "`layer_types` and `full_attention_interval`=4 disagree on layers 1-2"


def test_layer_kind_mismatch_against_layer_types(tmp_path: Path):
    config = qwen3_5_config(text_only=True)
    tensors = qwen_tensors(config, linear=[0, 1, 2, 4, 5, 6, 7])  # layer 7 holds GDN weights
    write_checkpoint(tmp_path, config, tensors)
    diagnostic = only(check_model(str(tmp_path), DEFAULT), "GDR114")
    assert diagnostic.message == (
        "`layer_types` makes layer 7 full-attention, but its tensors are linear-attention")
    assert diagnostic.fixes == ["fix `layer_types` so that layer 7 is linear-attention"]


def test_kimi_zero_based_kda_layers_mistake(tmp_path: Path):
    config = kimi_config()
    tensors = kimi_tensors(config)
    config["linear_attn_config"]["kda_layers"] = [n - 1 for n in config["linear_attn_config"]["kda_layers"]]
    write_checkpoint(tmp_path, config, tensors)
    result = check_model(str(tmp_path), DEFAULT)
    messages = [(d.code, d.message) for d in result.report if d.code in ("GDR104", "GDR114")]
    assert messages == [
        ("GDR104", "`linear_attn_config.kda_layers` names layers [0] outside 1..8 (the list is 1-based)"),
        ("GDR104", "`linear_attn_config.kda_layers` and `full_attn_layers` both name layers [4]"),
        ("GDR114", "`linear_attn_config.kda_layers` makes layer 3 linear-attention, but its tensors are "
                   "full-attention"),
        ("GDR114", "`linear_attn_config.kda_layers` makes layers 2, 6 full-attention, but their tensors are "
                   "linear-attention"),
    ]
    assert any("1-based" in note for d in result.report if d.code == "GDR114" for note in d.notes)


def test_layer_types_disagree_with_interval():
    types = interval_layer_types(8)
    types[3], types[2] = "linear_attention", "full_attention"
    config = qwen3_5_config(layer_types=types)
    result = check_checkpoint(config_only(config), DEFAULT)
    diagnostic = only(result, "GDR105")
    assert diagnostic.severity == "warning"
    assert diagnostic.message == "`layer_types` and `full_attention_interval`=4 disagree on layers 2-3"
    assert any("sglang 0.5.23 follows the interval rule" in note for note in diagnostic.notes)
    assert result.model.linear_layers == [0, 1, 3, 4, 5, 6]  # explicit layer_types wins


def test_qwen3_next_explicit_layer_types_preferred():
    types = ["linear_attention"] * 7 + ["full_attention"]
    result = check_checkpoint(config_only(qwen3_next_config(layer_types=types)), DEFAULT)
    assert result.model.linear_layers == list(range(7))
    assert only(result, "GDR105").message.endswith("disagree on layer 3")


@pytest.mark.parametrize("types", [interval_layer_types(8)[:6], interval_layer_types(8) + ["linear_attention"] * 2],
                         ids=["short", "long"])
def test_layer_types_of_another_length_is_one_gdr104_not_also_gdr105(types):
    """The layers one of `layer_types` and the interval rule names and the other does not are the list's length
    (GDR104), not a disagreement between the two (GDR105: it used to name layer 6 of a 6-entry list as well)."""
    result = check_checkpoint(config_only(qwen3_next_config(layer_types=types)), DEFAULT)
    assert [(d.code, d.message) for d in result.report if d.code in ("GDR104", "GDR105")] == [
        ("GDR104", f"`layer_types` has {len(types)} entries but `num_hidden_layers` is 8")]


@pytest.mark.parametrize("types", [interval_layer_types(8)[:6], interval_layer_types(8) + ["linear_attention"] * 2],
                         ids=["short", "long"])
def test_layer_types_of_another_length_with_weights_is_one_gdr104(tmp_path: Path, types):
    """With the weights read, the layers the list does not name are not a layer-kind mismatch (GDR114: "makes layers
    6 full-attention layers") nor layers without tensors (GDR115: layers 8-9 of an 8-layer model): the model has
    `num_hidden_layers` layers, of which the list names the kinds of those it reaches."""
    config = qwen3_5_config(text_only=True)
    tensors = qwen_tensors(config)
    config["layer_types"] = types
    write_checkpoint(tmp_path, config, tensors)
    result = check_model(str(tmp_path), DEFAULT)
    assert [(d.code, d.message) for d in result.report if d.severity != "info" and d.code != "GDR253"] == [
        ("GDR104", f"`layer_types` has {len(types)} entries but `num_hidden_layers` is 8")]
    assert result.model.linear_layers == ([0, 1, 2, 4, 5] if len(types) < 8 else [0, 1, 2, 4, 5, 6])


def test_a_short_layer_types_still_disagrees_on_the_layers_it_names():
    types = interval_layer_types(8)[:6]
    types[1] = "full_attention"
    result = check_checkpoint(config_only(qwen3_next_config(layer_types=types)), DEFAULT)
    assert [d.code for d in result.report if d.code in ("GDR104", "GDR105")] == ["GDR104", "GDR105"]
    diagnostic = only(result, "GDR105")
    assert diagnostic.message == "`layer_types` and `full_attention_interval`=4 disagree on layer 1"
    assert "`layer_types` has 6 entries for 8 layers (GDR104): layers 6-7 are not compared" in diagnostic.notes


@pytest.mark.parametrize(("types", "note"), [
    (interval_layer_types(8)[:7], "`layer_types` has 7 entries for 8 layers (GDR104): layer 7 is not compared"),
    (interval_layer_types(8) + ["linear_attention"],
     "`layer_types` has 9 entries for 8 layers (GDR104): entry 8 is not compared"),
], ids=["one-short", "one-long"])
def test_a_layer_types_one_off_names_the_one_layer_or_entry_in_the_singular(types, note):
    """It said "layers 7 are not compared" and "entries 8 are not compared" (review)."""
    types[1] = "full_attention"
    diagnostic = only(check_checkpoint(config_only(qwen3_next_config(layer_types=types)), DEFAULT), "GDR105")
    assert note in diagnostic.notes


def test_layer_types_making_one_layer_linear_says_layer():
    """One linear-attention layer by `layer_types`: "makes layers 0 linear attention (1 layers)" (review)."""
    types = ["linear_attention"] + ["full_attention"] * 7
    diagnostic = only(check_checkpoint(config_only(qwen3_next_config(layer_types=types)), DEFAULT), "GDR105")
    assert diagnostic.notes[0] == "`layer_types` makes layer 0 linear attention (1 layer)"
    assert diagnostic.notes[1] == "the interval rule makes layers 0-2, 4-6 linear attention (6 layers)"


def test_one_odd_layer_note_says_layer_holds():
    """GDR112's note for one layer said "layers 6 hold 8"; GDR113's said "layers 1" (review)."""
    reference = qwen3_5_config(text_only=True)
    tensors = qwen_tensors(reference)
    tensors["model.layers.6.linear_attn.A_log"] = ("F32", (8,))
    tensors["model.layers.1.linear_attn.in_proj_qkvz.weight"] = ("BF16", (193, 64))
    result = check_checkpoint(config_only({"architectures": ["Mystery"], "num_hidden_layers": 8}, tensors), DEFAULT)
    assert only(result, "GDR112").notes[0] == "layer 6 holds 8"
    assert only(result, "GDR113").notes[0] == "layer 1"


def test_missing_config_field_taken_from_tensors(tmp_path: Path):
    config = qwen3_next_config()
    del config["linear_num_value_heads"]
    write_checkpoint(tmp_path, config, qwen_tensors(qwen3_next_config()))
    result = check_model(str(tmp_path), DEFAULT)
    diagnostic = only(result, "GDR103")
    assert diagnostic.message == "the config has no `linear_num_value_heads`" and diagnostic.severity == "warning"
    assert result.model.num_v_heads == 4 and result.call is not None


def test_missing_config_field_without_weights_is_an_error():
    config = qwen3_next_config()
    del config["linear_key_head_dim"]
    result = check_checkpoint(config_only(config), DEFAULT)
    assert only(result, "GDR103").severity == "error"
    assert result.call is None and result.to_dict()["shapes"] == {}


def test_value_heads_not_multiple_of_key_heads():
    result = check_checkpoint(config_only(qwen3_next_config(H=16, HV=30, K=128, V=128)), DEFAULT)
    diagnostic = only(result, "GDR124")
    assert diagnostic.message == "`linear_num_value_heads`=30 is not a multiple of `linear_num_key_heads`=16"
    assert any("Invalid head config inferred from mixed_qkv: H=16, HV=30." in n for n in diagnostic.notes)
    assert not result.contract_run


# -- full-size geometries, sparse on disk -------------------------------------------------------------------------
def test_qwen3_next_80b_sharded_full_size(tmp_path: Path):
    config = get_builtin("Qwen/Qwen3-Next-80B-A3B-Instruct").config_copy()
    write_checkpoint(tmp_path, config, qwen_tensors(config), shards=41)
    assert len(list(tmp_path.glob("model-*-of-00041.safetensors"))) == 41
    result = check_model(str(tmp_path), Deployment(tp=4))
    model = result.model
    assert result.checkpoint.kind in ("directory", "sharded")
    assert len(model.linear_layers) == 36 and model.linear_layers[:4] == [0, 1, 2, 4]
    assert (model.num_k_heads, model.num_v_heads, model.head_k_dim, model.head_v_dim) == (16, 32, 128, 128)
    assert result.shapes()["mixed_qkv"] == [8, 2048]
    assert result.report.errors == []


def test_qwen3_next_80b_sharded_mismatch_points_at_index(tmp_path: Path):
    config = get_builtin("Qwen/Qwen3-Next-80B-A3B-Instruct").config_copy()
    tensors = qwen_tensors(config)
    tensors["model.layers.46.linear_attn.A_log"] = ("BF16", (16,))
    write_checkpoint(tmp_path, config, tensors, shards=41)
    diagnostic = only(check_model(str(tmp_path), DEFAULT), "GDR111")
    assert diagnostic.message == "config says 32 value heads but `model.layers.46.linear_attn.A_log` holds 16"
    assert diagnostic.location.shard.endswith("-of-00041.safetensors")
    note = next(n for n in diagnostic.notes if "from tensor" in n)
    assert "bfloat16[16]" in note


def test_qwen3_5_moe_full_size(tmp_path: Path):
    config = get_builtin("Qwen/Qwen3.5-35B-A3B").config_copy()
    tensors = qwen_tensors(config, namespace="model.language_model.", experts=256, expert_dim=512)
    write_checkpoint(tmp_path, config, tensors, shards=14)
    result = check_model(str(tmp_path), Deployment(tp=2))
    model = result.model
    assert model.family == "qwen3.5-moe" and len(model.linear_layers) == 30
    assert result.shapes()["mixed_qkv"] == [8, 4096]
    assert result.report.errors == []


def test_kimi_linear_48b_full_size(tmp_path: Path):
    config = get_builtin("moonshotai/Kimi-Linear-48B-A3B-Instruct").config_copy()
    write_checkpoint(tmp_path, config, kimi_tensors(config), shards=20)
    result = check_model(str(tmp_path), Deployment(tp=8))
    model = result.model
    assert len(model.linear_layers) == 20 and model.linear_layers[3] == 4
    assert (model.num_v_heads, model.head_v_dim) == (32, 128)
    assert result.shapes() == {
        "mixed_qkv": [8, 1536], "a": [8, 512], "b": [8, 4], "A_log": [4], "dt_bias": [512],
        "initial_state": [8 * 5 + 1, 4, 128, 128], "out": [8, 1, 4, 128], "ssm_state_indices": [8],
    }
    assert result.report.errors == []


# -- built-ins and rule metadata --------------------------------------------------------------------------------
def test_builtin_list_and_lookup():
    ids = [m.repo_id for m in list_builtin()]
    assert "Qwen/Qwen3-Next-80B-A3B-Instruct" in ids and "moonshotai/Kimi-Linear-48B-A3B-Base" in ids
    assert get_builtin("qwen/qwen3.6-27b").repo_id == "Qwen/Qwen3.6-27B"
    assert get_builtin("Qwen/Qwen3.5-2B").confidence == "U"
    for model in list_builtin():
        assert select_adapter(model.config, []).adapter is not None


def test_model_rules_metadata():
    model_rules = [r for r in RULES.values() if r.code.startswith("GDR1")]
    assert len(model_rules) >= 15
    for rule in model_rules:
        assert rule.summary and (rule.summary[0].islower() or rule.summary[0] == "`")
        # (a message may open with a field: GDR101/GDR102's subject is a name in backticks or "the unnamed ...")
        assert not rule.message.endswith(".") and (rule.message[0].islower() or rule.message[0] in "`{")
        assert rule.explanation and rule.scope == "model"
    json.dumps([r.name for r in model_rules])


def test_sharded_tensor_diagnostic_points_at_index_line(tmp_path: Path):
    config = get_builtin("Qwen/Qwen3-Next-80B-A3B-Instruct").config_copy()
    tensors = qwen_tensors(config)
    name = "model.layers.9.linear_attn.in_proj_qkvz.weight"
    tensors[name] = ("BF16", (12289, 2048))
    write_checkpoint(tmp_path, config, tensors, shards=41)
    diagnostic = only(check_model(str(tmp_path), DEFAULT), "GDR113")
    assert diagnostic.message == f"`{name}` has shape [12289, 2048], expected [12288, 2048]"
    location = diagnostic.location
    assert location.file.endswith("model.safetensors.index.json") and location.tensor == name
    index_lines = (tmp_path / "model.safetensors.index.json").read_text().splitlines()
    assert name in index_lines[location.line - 1]


def test_bare_config_json(tmp_path: Path):
    config = get_builtin("Qwen/Qwen3.6-27B").config_copy()
    (tmp_path / "config.json").write_text(json.dumps(config, indent=2))
    result = check_model(str(tmp_path / "config.json"), Deployment(tp=8))
    assert result.checkpoint.kind == "config-only" and not result.model.weights_checked
    assert result.shapes()["mixed_qkv"] == [8, 1280]
    assert result.model.sources["num_v_heads"].location.line is not None


@pytest.mark.parametrize("namespace", ["transformer.", "backbone.model."])
def test_tensors_under_names_the_family_does_not_load_are_an_error_not_a_silent_pass(tmp_path: Path, namespace: str):
    # A Qwen3-Next config with HV=4 and weights of HV=8 renamed out of `model.`: they cannot be cross-checked,
    # and the engine would not find them; the run must not pass as if no weights had been given.
    config = qwen3_next_config()
    write_checkpoint(tmp_path, config, qwen_tensors(qwen3_next_config(HV=8), namespace=namespace))
    result = check_model(str(tmp_path), DEFAULT)
    errors = [d for d in result.report if d.severity == "error"]
    assert [d.code for d in errors] == ["GDR116"]
    assert errors[0].message == ("the weights hold 78 tensors, none under the layer names `Qwen3NextForCausalLM` "
                                 "loads (`model.layers.<i>.linear_attn.*`)")
    assert errors[0].notes[0].startswith(f"for example `{namespace}layers.0.linear_attn.")
    # said in the header too, whatever the selection (GDR116 may be ignored)
    assert "no tensor lies under the layer names this family loads: shapes come from the config alone and nothing " \
           "was cross-checked" in result.notes
    assert not any("no weights were read" in note for note in result.notes)


@pytest.mark.parametrize("tensors", [
    {"model.embed_tokens.weight": ("BF16", (256, 64)), "lm_head.weight": ("BF16", (256, 64)),
     "model.norm.weight": ("BF16", (64,))},  # a shard without layers
    {"mtp.fc.weight": ("BF16", (64, 128)), "mtp.layers.0.self_attn.q_proj.weight": ("BF16", (64, 64))},  # MTP only
])
def test_a_shard_of_the_familys_own_non_layer_tensors_is_not_gdr116(tmp_path: Path, tensors):
    write_checkpoint(tmp_path, qwen3_next_config(), tensors)
    result = check_model(str(tmp_path), DEFAULT)
    assert "GDR116" not in [d.code for d in result.report]
    assert any("nothing was cross-checked" in note for note in result.notes)


def test_one_foreign_tensor_beside_a_config_is_counted_in_the_singular(tmp_path: Path):
    write_checkpoint(tmp_path, qwen3_next_config(), {"a": ("F32", (2,))})
    result = check_model(str(tmp_path), DEFAULT)
    assert [d.message for d in result.report if d.code == "GDR116"] == [
        "the weights hold 1 tensor, none under the layer names `Qwen3NextForCausalLM` loads "
        "(`model.layers.<i>.linear_attn.*`)"]


def test_kimi_with_a_wrong_head_count_is_one_error(tmp_path: Path):
    # `num_heads` is KDA's key and value head count at once: the wheel reported it twice (value heads from A_log,
    # key heads from q_proj), and a norm [D] in between put the config's count back, so dt_bias and g_b_proj were
    # read as 64 channels per head: four errors whose fixes, applied, matched no tensor (second user test).
    config = kimi_config(H=8, D=16)
    write_checkpoint(tmp_path, config, kimi_tensors(kimi_config(H=4, D=16)))
    result = check_model(str(tmp_path), DEFAULT)
    errors = [(d.code, d.message) for d in result.report if d.severity == "error"]
    assert errors == [("GDR111", "config says 8 value heads but `model.layers.0.self_attn.A_log` holds 4")]
