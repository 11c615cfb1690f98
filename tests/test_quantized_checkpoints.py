"""Quantized checkpoints (models/quantized.py): packed projection weights read as their unpacked shapes.

The geometry is Qwen3-Next-80B's (H=16, HV=32, K=V=128, hidden 2048), whose projections the published FP8
checkpoint stores as in_proj_qkvz [12288, 2048], in_proj_ba [64, 2048] and out_proj [2048, 4096]. Each scheme
packs them as its own library does (AutoAWQ's GEMM layout, GPTQModel's, compressed-tensors' pack-quantized and
nvfp4-pack-quantized compressors, ModelOpt's NVFP4 export, bitsandbytes 4-bit); the releases leave `in_proj_ba`
(too few rows for the packed kernels), the conv, `A_log`, `dt_bias` and the norm in bf16, and one GPTQ release
quantizes `in_proj_ba` too.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from checkpoint_builders import Tensors, qwen3_next_config, qwen_tensors, write_checkpoint
from gdr_check.deployment.settings import Deployment
from gdr_check.pipeline.model_check import check_model

QWEN3_NEXT = {"hidden": 2048, "H": 16, "HV": 32, "K": 128, "V": 128}
PROJECTIONS = ("in_proj_qkvz", "out_proj")
GROUP = 128


def _awq(name: str, out: int, inp: int) -> Tensors:  # AutoAWQ WQLinear_GEMM, 4-bit: 8 values per int32 along out
    return {f"{name}.qweight": ("I32", (inp, out // 8)), f"{name}.qzeros": ("I32", (inp // GROUP, out // 8)),
            f"{name}.scales": ("F16", (inp // GROUP, out))}


def _gptq(name: str, out: int, inp: int) -> Tensors:  # GPTQModel, 4-bit: 8 values per int32 along in
    return {f"{name}.qweight": ("I32", (inp // 8, out)), f"{name}.qzeros": ("I32", (inp // GROUP, out // 8)),
            f"{name}.scales": ("F16", (inp // GROUP, out)), f"{name}.g_idx": ("I32", (inp,))}


def _gptq_without_g_idx(name: str, out: int, inp: int) -> Tensors:
    return {key: value for key, value in _gptq(name, out, inp).items() if not key.endswith(".g_idx")}


def _pack_quantized(name: str, out: int, inp: int) -> Tensors:  # compressed-tensors W4A16: pack factor 32 // 4
    return {f"{name}.weight_packed": ("I32", (out, inp // 8)), f"{name}.weight_scale": ("BF16", (out, inp // GROUP)),
            f"{name}.weight_shape": ("I64", (2,))}


def _nvfp4_packed(name: str, out: int, inp: int) -> Tensors:  # compressed-tensors NVFP4: two per byte, group 16
    return {f"{name}.weight_packed": ("U8", (out, inp // 2)), f"{name}.weight_scale": ("F8_E4M3", (out, inp // 16)),
            f"{name}.weight_global_scale": ("F32", (1,)), f"{name}.input_global_scale": ("F32", (1,))}


def _modelopt_nvfp4(name: str, out: int, inp: int) -> Tensors:  # ModelOpt: the packed bytes under `weight`
    return {f"{name}.weight": ("U8", (out, inp // 2)), f"{name}.weight_scale": ("F8_E4M3", (out, inp // 16)),
            f"{name}.weight_scale_2": ("F32", ()), f"{name}.input_scale": ("F32", ())}


def _bnb_nf4(name: str, out: int, inp: int) -> Tensors:  # bitsandbytes 4-bit: flat bytes, the shape in quant_state
    return {f"{name}.weight": ("U8", (out * inp // 2, 1)), f"{name}.weight.absmax": ("F32", (out * inp // 64,)),
            f"{name}.weight.quant_map": ("F32", (16,)), f"{name}.weight.quant_state.bitsandbytes__nf4": ("U8", (96,))}


AWQ = {"quant_method": "awq", "bits": 4, "group_size": GROUP, "zero_point": True, "version": "gemm"}
GPTQ = {"quant_method": "gptq", "bits": 4, "group_size": GROUP, "desc_act": False, "sym": True}
W4A16 = {"quant_method": "compressed-tensors", "format": "pack-quantized", "config_groups": {"group_0": {
    "targets": ["Linear"], "weights": {"num_bits": 4, "type": "int", "strategy": "group", "group_size": GROUP,
                                       "symmetric": True}}}}
NVFP4 = {"quant_method": "compressed-tensors", "format": "nvfp4-pack-quantized", "config_groups": {"group_0": {
    "targets": ["Linear"], "weights": {"num_bits": 4, "type": "float", "strategy": "tensor_group",
                                       "group_size": 16}}}}
MODELOPT = {"quant_method": "modelopt", "quant_algo": "NVFP4"}
BNB = {"quant_method": "bitsandbytes", "load_in_4bit": True, "bnb_4bit_quant_type": "nf4"}


def quantized(config: dict, projections: tuple[str, ...], pack) -> Tensors:
    """The bf16 tensors of `config` with each linear-attention layer's `projections` packed by `pack`."""
    tensors = qwen_tensors(config)
    for name, (_dtype, shape) in list(tensors.items()):
        base = name.removesuffix(".weight")
        if base.rsplit(".", 1)[-1] in projections and ".linear_attn." in name:
            del tensors[name]
            tensors.update(pack(base, *shape))
    return tensors


def run(tmp_path: Path, quantization: dict | None, pack, projections=PROJECTIONS, weights: dict | None = None):
    config = qwen3_next_config(**QWEN3_NEXT)
    if quantization is not None:
        config["quantization_config"] = quantization
    write_checkpoint(tmp_path, config, quantized(qwen3_next_config(**(weights or QWEN3_NEXT)), projections, pack))
    return check_model(str(tmp_path), Deployment(tp=4))


@pytest.mark.parametrize(("quantization", "pack", "projections", "label"), [
    (AWQ, _awq, PROJECTIONS, "awq, 4-bit"),
    (GPTQ, _gptq, (*PROJECTIONS, "in_proj_ba"), "gptq, 4-bit"),
    (GPTQ, _gptq_without_g_idx, PROJECTIONS, "gptq, 4-bit"),
    (W4A16, _pack_quantized, PROJECTIONS, "compressed-tensors, 4-bit"),
    (NVFP4, _nvfp4_packed, PROJECTIONS, "compressed-tensors, 4-bit"),
    (MODELOPT, _modelopt_nvfp4, PROJECTIONS, "modelopt"),
    # No `quantization_config` (stripped by a conversion): the layouts tell AWQ and GPTQ apart by their scales.
    (None, _awq, PROJECTIONS, "no `quantization_config`"),
    (None, _gptq, PROJECTIONS, "no `quantization_config`"),
], ids=["awq", "gptq-with-ba", "gptq-no-g-idx", "w4a16", "nvfp4", "modelopt-nvfp4", "bare-awq", "bare-gptq"])
def test_a_quantized_checkpoint_checks_clean_and_says_how_it_was_read(tmp_path, quantization, pack, projections,
                                                                      label):
    # The wheel reported "lack `linear_attn.in_proj_qkvz.weight`" (GDR115) and exit 1 on every one of these.
    result = run(tmp_path, quantization, pack, projections)
    assert result.report.ok, [(d.code, d.message) for d in result.report if d.severity == "error"]
    assert (result.model.num_k_heads, result.model.num_v_heads, result.model.head_k_dim) == (16, 32, 128)
    packed = 6 * len(projections)  # 6 linear-attention layers of 8
    assert f"quantized checkpoint ({label}): {packed} packed projection weight(s) of the linear-attention layers " \
           "read as their unpacked [out, in] shapes" in result.notes
    assert not [note for note in result.notes if "not measured" in note]


def test_a_packed_weight_still_measures_the_head_count(tmp_path):
    # The config says 32 value heads; the AWQ projections were packed for 16 (and A_log too): one GDR111, and the
    # packed projections agree with what A_log measured instead of adding errors of their own.
    config = qwen3_next_config(**QWEN3_NEXT)
    config["quantization_config"] = AWQ
    weights = qwen3_next_config(**{**QWEN3_NEXT, "HV": 16})
    write_checkpoint(tmp_path, config, quantized(weights, PROJECTIONS, _awq))
    result = check_model(str(tmp_path), Deployment(tp=4))
    errors = [d for d in result.report if d.severity == "error"]
    assert [d.code for d in errors] == ["GDR111"]
    assert errors[0].message == "config says 32 value heads but `model.layers.0.linear_attn.A_log` holds 16"


def test_a_packed_projection_alone_wrong_is_named_with_its_stored_form(tmp_path):
    # Only out_proj's AWQ tensors were packed for 16 value heads: that tensor is the one a rule names, and its
    # source says how it is stored.
    config = qwen3_next_config(**QWEN3_NEXT)
    config["quantization_config"] = AWQ
    tensors = quantized(config, PROJECTIONS, _awq)
    tensors.update(_awq("model.layers.0.linear_attn.out_proj", 2048, 16 * 128))
    write_checkpoint(tmp_path, config, tensors)
    result = check_model(str(tmp_path), Deployment(tp=4))
    errors = [d for d in result.report if d.severity == "error"]
    assert [(d.code, d.message) for d in errors] == [("GDR111", "config says 128 channels per value head but "
                                                      "`model.layers.0.linear_attn.out_proj.qweight` holds 64")]
    assert "head_v_dim = 64 from tensor `model.layers.0.linear_attn.out_proj.qweight` [2048, 2048] unpacked (awq " \
           "4-bit, stored int32[2048, 256]) in `model.safetensors`" in errors[0].notes


def test_bitsandbytes_4bit_weights_count_as_present_unmeasured(tmp_path):
    result = run(tmp_path, BNB, _bnb_nf4)
    assert result.report.ok, [(d.code, d.message) for d in result.report if d.severity == "error"]
    assert "12 of them not measured (bitsandbytes 4-bit, stored uint8[12582912, 1]: its shape is kept in tensor " \
           "data, which is not read): present, shape not cross-checked" in result.notes


def test_a_missing_projection_is_still_missing_when_others_are_packed(tmp_path):
    config = qwen3_next_config(**QWEN3_NEXT)
    config["quantization_config"] = GPTQ
    tensors = quantized(config, PROJECTIONS, _gptq)
    for key in [k for k in tensors if k.startswith("model.layers.1.linear_attn.out_proj.")]:
        del tensors[key]
    write_checkpoint(tmp_path, config, tensors)
    result = check_model(str(tmp_path), Deployment(tp=4))
    assert [d.code for d in result.report if d.severity == "error"] == ["GDR115"]


def test_packed_moe_experts_beside_the_mixer_are_neither_read_nor_counted(tmp_path):
    # A 4-bit MoE release packs every expert of a layer too; only the mixer's projections stand for its weights
    # (the reviewer's 48-layer NVFP4 MoE checkpoint took 56 s, every uint8 weight scanning the whole layer).
    config = qwen3_next_config(**QWEN3_NEXT)
    config["quantization_config"] = NVFP4
    tensors = quantized(config, PROJECTIONS, _nvfp4_packed)
    for layer in range(8):
        for expert in range(16):
            for projection, (out, inp) in {"gate_proj": (512, 2048), "up_proj": (512, 2048),
                                          "down_proj": (2048, 512)}.items():
                tensors.update(_nvfp4_packed(f"model.layers.{layer}.mlp.experts.{expert}.{projection}", out, inp))
    write_checkpoint(tmp_path, config, tensors)
    result = check_model(str(tmp_path), Deployment(tp=4))
    assert result.report.ok, [(d.code, d.message) for d in result.report if d.severity == "error"]
    assert "quantized checkpoint (compressed-tensors, 4-bit): 12 packed projection weight(s) of the linear-attention " \
           "layers read as their unpacked [out, in] shapes" in result.notes


def test_awq_in_a_gemv_layout_counts_as_present_unmeasured(tmp_path):
    # AWQ's GEMV kernels pack along another axis, and neither engine loads them: read as GEMM they gave false
    # shape errors (review of this change).
    gemv = {**AWQ, "version": "gemv"}
    result = run(tmp_path, gemv, lambda name, out, inp: {f"{name}.qweight": ("I32", (out, inp // 8)),
                                                          f"{name}.scales": ("F16", (out, inp // GROUP))})
    assert result.report.ok, [(d.code, d.message) for d in result.report if d.severity == "error"]
    assert "12 of them not measured (awq gemv 4-bit, stored int32[12288, 256]): present, shape not cross-checked" \
        in result.notes


def test_a_wrong_value_head_count_under_unmeasured_projections_is_one_error(tmp_path):
    # bitsandbytes hides in_proj_ba's shape: the norm [V] after A_log put the config's HV back, and the conv was then
    # solved against it, for a second, wrong GDR111 on the key heads (16 -> 8) with a fix that broke the model.
    result = run(tmp_path, BNB, _bnb_nf4, weights={**QWEN3_NEXT, "HV": 16})
    errors = [(d.code, d.message) for d in result.report if d.severity == "error"]
    assert errors == [("GDR111", "config says 32 value heads but `model.layers.0.linear_attn.A_log` holds 16")]


def test_a_packed_weight_no_field_explains_says_how_it_was_read(tmp_path):
    # GDR113 names the stored `.qweight` with its unpacked shape: a note says so and gives the stored form (review).
    config = qwen3_next_config(**QWEN3_NEXT)
    config["quantization_config"] = AWQ
    tensors = quantized(config, PROJECTIONS, _awq)
    tensors.update(_awq("model.layers.0.linear_attn.in_proj_qkvz", 12288 + 8, 2048))
    write_checkpoint(tmp_path, config, tensors)
    [error] = [d for d in check_model(str(tmp_path), Deployment(tp=4)).report if d.severity == "error"]
    assert (error.code, error.message) == ("GDR113", "`model.layers.0.linear_attn.in_proj_qkvz.qweight` has shape "
                                                     "[12296, 2048], expected [12288, 2048]")
    assert "read as [12296, 2048] unpacked (awq 4-bit, stored int32[2048, 1537])" in error.notes


@pytest.mark.parametrize(("quantization", "pack"), [(AWQ, _awq), (GPTQ, _gptq)], ids=["awq", "gptq"])
def test_bits_that_disagree_with_the_packing_are_an_error(tmp_path, quantization, pack):
    """The engines size a packed parameter from the config's bits (sglang 0.5.23's AWQ and AWQ-Marlin configs read
    `bits`/`w_bit`), so weights packed 4-bit under `bits: 8` do not load: the unpacked shape follows the bits, as the
    engine's does, and the checkpoint disagrees with the config. (It read AWQ's out from the scales and GPTQ's in
    from g_idx, which hid the bits, and exit 0.)"""
    result = run(tmp_path, {**quantization, "bits": 8}, pack)
    errors = [d for d in result.report if d.severity == "error"]
    assert errors and not result.report.ok
    assert any("8-bit, stored int32" in note for d in errors for note in d.notes), [d.notes for d in errors]
