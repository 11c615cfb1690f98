"""GDR508/GDR509: group-quantized GDN and KDA projections at TP, predicted from a launch command.

Each test writes a model folder holding a `config.json`: a built-in model's published geometry with the
`quantization_config` of a published quantized export (its repo id in the fixture's docstring; where the card gives
the recipe and not the JSON, the fixture writes that recipe in the format's own keys and says so). The expected
widths and outcomes are computed here from the engines' source, cited file:line, not from gdr-check's tables.
"""

from __future__ import annotations

import json

import pytest

from cli_checkpoints import run_cli
from gdr_check.models.builtin import get_builtin

# sglang 0.5.23 kernels/jit/csrc/gemm/marlin/marlin.cuh:31-32: tile_k_size = 16, tile_n_size = 4 * 16 = 64;
# gptq_marlin_repack.cuh:311-316 refuses size_n % tile_n_size.
SGLANG_TILE_N = 4 * 16
# sglang 0.5.23 srt/layers/quantization/marlin_utils.py:21-22 (GPTQ_MARLIN_MIN_THREAD_N = 64).
SGLANG_MIN_THREAD_N = 64


def _folder(tmp_path, name: str, model: str, quantization: dict) -> str:
    builtin = get_builtin(model)
    assert builtin is not None
    config = builtin.config_copy()
    config["quantization_config"] = quantization
    folder = tmp_path / name
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(config))
    return str(folder)


def _geometry(model: str) -> dict:
    config = get_builtin(model).config_copy()
    return config.get("text_config", config)


def _linear_layers(text: dict) -> list[int]:
    interval = text["full_attention_interval"]
    return [i for i in range(text["num_hidden_layers"]) if (i + 1) % interval]


def _launch(folder: str, *command: str, engine: str | None = None):
    args = ["launch", "--weights-per-rank", "20GiB"]
    if engine:
        args += ["--engine-version", engine]
    return run_cli(*args, "--", *command, folder)


def autoround_qwen36(keep_gates: bool) -> dict:
    """nchapman/Qwen3.6-35B-A3B-int4-AutoRound: AutoRound 0.12.2, W4A16 symmetric, group 128, packing
    `auto_round:auto_gptq`; its card says `linear_attn.in_proj_a` / `in_proj_b` are kept BF16, with entries for both
    the checkpoint's names and vLLM's fused `in_proj_ba`. Written here in AutoRound's `extra_config` form (16 bits),
    one entry per linear-attention layer."""
    text = _geometry("Qwen/Qwen3.6-35B-A3B")
    extra = {}
    if keep_gates:
        for i in _linear_layers(text):
            for name in ("in_proj_a", "in_proj_b", "in_proj_ba"):
                extra[f"model.language_model.layers.{i}.linear_attn.{name}"] = {"bits": 16, "data_type": "float"}
    return {"quant_method": "auto-round", "bits": 4, "group_size": 128, "sym": True,
            "packing_format": "auto_round:auto_gptq", "data_type": "int", "extra_config": extra}


def test_autoround_keeping_in_proj_a_b_in_bf16_loads_on_sglang_at_tp_2(tmp_path):
    folder = _folder(tmp_path, "Qwen3.6-35B-A3B-int4-AutoRound", "Qwen/Qwen3.6-35B-A3B", autoround_qwen36(True))
    run = _launch(folder, "python", "-m", "sglang.launch_server", "--tp", "2", "--model-path")
    assert "error[GDR508]" not in run.stdout and "warning[GDR509]" not in run.stdout, run.stdout


def test_autoround_quantizing_in_proj_ba_stops_sglang_at_tp_2_with_the_repack_message(tmp_path):
    folder = _folder(tmp_path, "Qwen3.6-35B-A3B-int4-AutoRound", "Qwen/Qwen3.6-35B-A3B", autoround_qwen36(False))
    text = _geometry("Qwen/Qwen3.6-35B-A3B")
    tp = 2
    # sglang 0.5.23 srt/models/qwen3_next.py:177-182: in_proj_ba merges two outputs of num_v_heads, column-parallel;
    # the repack sees their per-rank sum.
    per_rank = 2 * (text["linear_num_value_heads"] // tp)
    assert per_rank % SGLANG_TILE_N  # 32: the case under test
    heads = (text["linear_num_key_heads"], text["linear_num_value_heads"])
    working = [t for t in (1, 2, 4, 8, 16) if all(h % t == 0 for h in heads)
               and (2 * (text["linear_num_value_heads"] // t)) % SGLANG_TILE_N == 0]
    run = _launch(folder, "python", "-m", "sglang.launch_server", "--tp", str(tp), "--model-path")
    assert run.exit_code == 1
    assert (f"error[GDR508]: `in_proj_ba` is {per_rank} output columns per rank at TP {tp}, not a multiple of "
            f"{SGLANG_TILE_N} (AutoRound 4-bit (GPTQ packing), group 128): sglang 0.5.23 stops loading the checkpoint "
            f"(TP sizes that work: {', '.join(map(str, working))})") in run.stdout, run.stdout
    assert f"sglang says: `size_n = {per_rank} is not divisible by tile_n_size = {SGLANG_TILE_N}`" in run.stdout
    assert f"`in_proj_ba` in {len(_linear_layers(text))} linear-attention layers" in run.stdout


def test_vllm_replicates_qwen35_in_proj_ba_under_awq_from_0_22(tmp_path):
    # vLLM 0.20.0 splits Qwen3.5's in_proj_ba (two outputs of num_v_heads, mamba/gdn_linear_attn.py:419-432) over
    # TP, so AWQMarlin's check
    # (awq_marlin.py, min_thread_n 64) sees 2 x num_v_heads / TP; from 0.22.0 the projection is replicated under
    # AWQ, GPTQ and AutoRound (mamba/gdn/qwen_gdn_linear_attn.py:620-632): every rank holds all 2 x num_v_heads.
    folder = _folder(tmp_path, "Qwen3.6-35B-A3B-AWQ", "Qwen/Qwen3.6-35B-A3B", awq_qwen3_next())
    text = _geometry("Qwen/Qwen3.6-35B-A3B")
    tp = 2
    split = 2 * (text["linear_num_value_heads"] // tp)
    assert split % SGLANG_MIN_THREAD_N and (2 * text["linear_num_value_heads"]) % SGLANG_MIN_THREAD_N == 0
    old = _launch(folder, "vllm", "serve", "-tp", str(tp), "--max-model-len", "4096", "--model", engine="0.20.0")
    assert f"warning[GDR509]: `in_proj_ba` is {split} output columns per rank at TP {tp}" in old.stdout, old.stdout
    new = _launch(folder, "vllm", "serve", "-tp", str(tp), "--max-model-len", "4096", "--model", engine="0.22.0")
    assert "warning[GDR509]" not in new.stdout, new.stdout


def gptq_coder_next(keep_linear_attention: bool) -> dict:
    """btbtyler09/Qwen3-Coder-Next-GPTQ-4bit (GPTQModel 5.7.0): 4-bit, group 32, symmetric, desc_act off; its card
    says only the MoE experts are quantized and the linear-attention projections stay FP16. Written here as
    GPTQModel's `dynamic` negative entry for those layers."""
    quant = {"quant_method": "gptq", "bits": 4, "group_size": 32, "sym": True, "desc_act": False,
             "checkpoint_format": "gptq"}
    if keep_linear_attention:
        quant["dynamic"] = {r"-:.*\.linear_attn\..*": {}}
    return quant


@pytest.mark.parametrize("keep", [True, False])
def test_gptq_coder_next_on_sglang_at_tp_4(tmp_path, keep):
    folder = _folder(tmp_path, "Qwen3-Coder-Next-GPTQ-4bit", "Qwen/Qwen3-Next-80B-A3B-Instruct",
                     gptq_coder_next(keep))
    run = _launch(folder, "python", "-m", "sglang.launch_server", "--tp", "4", "--model-path")
    if keep:
        assert "error[GDR508]" not in run.stdout, run.stdout
        return
    text = _geometry("Qwen/Qwen3-Next-80B-A3B-Instruct")
    per_rank = 2 * (text["linear_num_value_heads"] // 4)  # 16
    assert (f"error[GDR508]: `in_proj_ba` is {per_rank} output columns per rank at TP 4, not a multiple of "
            f"{SGLANG_TILE_N} (GPTQ 4-bit, group 32)") in run.stdout, run.stdout


def awq_qwen3_next() -> dict:
    """An AutoAWQ GEMM config of Qwen3-Next as the AutoAWQ exporter writes it (`quant_method`, `bits`, `group_size`,
    `zero_point`, `version`, `modules_to_not_convert`), quantizing the linear-attention projections."""
    return {"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": True, "version": "gemm",
            "modules_to_not_convert": ["lm_head", "mlp.gate"]}


def test_awq_falls_back_on_sglang_and_old_vllm_but_not_once_vllm_pads_marlin_tiles(tmp_path):
    folder = _folder(tmp_path, "Qwen3-Next-80B-A3B-Instruct-AWQ", "Qwen/Qwen3-Next-80B-A3B-Instruct", awq_qwen3_next())
    text = _geometry("Qwen/Qwen3-Next-80B-A3B-Instruct")
    tp = 2
    # vLLM 0.22.0 quantization/awq_marlin.py:294-300 and utils/marlin_utils.py (min_thread_n 64): Qwen3-Next's
    # in_proj_ba is one interleaved output of 2 x num_v_heads (qwen_gdn_linear_attn.py create_ba_proj).
    per_rank = 2 * text["linear_num_value_heads"] // tp
    assert per_rank % SGLANG_MIN_THREAD_N
    # 0.23.0 is the last release without the padding (its marlin_utils.py has no allow_tile_padding).
    old = _launch(folder, "vllm", "serve", "-tp", str(tp), "--max-model-len", "4096", "--model", engine="0.23.0")
    assert (f"warning[GDR509]: `in_proj_ba` is {per_rank} output columns per rank at TP {tp}, not a multiple of 64 "
            f"(AWQ 4-bit, group 128): vLLM 0.23.0 falls back to its unoptimized kernel for it (TP sizes without a "
            f"fallback: 1)") in old.stdout, old.stdout
    assert ("vLLM says: `Layer 'model.layers.0.linear_attn.in_proj_ba' is not supported by AWQMarlin. Falling back "
            "to unoptimized AWQ kernels.`") in old.stdout
    # The plain AWQ kernel takes 32 columns: 32 % (32 // 4 bits) == 0 (awq.py:198-212): a warning, no error.
    assert "error[GDR508]" not in old.stdout
    # vLLM 0.24.0 auto_awq.py:317-327: check_marlin_supports_layer(..., allow_tile_padding=True) falls back only
    # for a split group; the group of 128 divides every input slice here.
    new = _launch(folder, "vllm", "serve", "-tp", str(tp), "--max-model-len", "4096", "--model", engine="0.24.0")
    assert "warning[GDR509]" not in new.stdout and "error[GDR508]" not in new.stdout, new.stdout
    sg = _launch(folder, "python", "-m", "sglang.launch_server", "--tp", str(tp), "--model-path")
    assert ("sglang says: `Layer 'model.layers.0.linear_attn.in_proj_ba' is not supported by AWQMarlin. Falling back "
            "to unoptimized AWQ kernels.`") in sg.stdout, sg.stdout


def test_awq_modules_to_not_convert_matches_by_substring_in_sglang_only_on_the_fused_name(tmp_path):
    # sglang 0.5.23 awq/awq.py:61-62 reads `modules_to_not_convert` as substrings of the layer's own path: "in_proj_b"
    # is a substring of "...in_proj_ba" and keeps it unquantized; "in_proj_a" alone is not.
    quant = awq_qwen3_next()
    for entries, expect in ((["in_proj_b"], False), (["in_proj_a"], True)):
        quant["modules_to_not_convert"] = entries
        folder = _folder(tmp_path, f"awq-{entries[0]}", "Qwen/Qwen3-Next-80B-A3B-Instruct", quant)
        run = _launch(folder, "python", "-m", "sglang.launch_server", "--tp", "2", "--model-path")
        assert ("warning[GDR509]: `in_proj_ba`" in run.stdout) is expect, (entries, run.stdout)


def ct_w4a16_qwen36() -> dict:
    """twigboy2000/Qwen3.6-35B-A3B-W4A16-g32-gfx1151: compressed-tensors W4A16 (`pack-quantized`), symmetric,
    group 32, the vision tower kept; its card lists no linear-attention projection as kept, so `ignore` here holds
    the vision tower and lm_head."""
    return {"quant_method": "compressed-tensors", "format": "pack-quantized",
            "config_groups": {"group_0": {"targets": ["Linear"], "weights": {
                "num_bits": 4, "type": "int", "symmetric": True, "strategy": "group", "group_size": 32}}},
            "ignore": ["lm_head", "re:.*visual.*"]}


def test_compressed_tensors_wna16_on_sglang_refuses_in_proj_ba_at_tp_2_and_loads_at_tp_1(tmp_path):
    folder = _folder(tmp_path, "Qwen3.6-35B-A3B-W4A16-g32", "Qwen/Qwen3.6-35B-A3B", ct_w4a16_qwen36())
    text = _geometry("Qwen/Qwen3.6-35B-A3B")
    two = _launch(folder, "python", "-m", "sglang.launch_server", "--tp", "2", "--model-path")
    per_rank = 2 * (text["linear_num_value_heads"] // 2)
    assert (f"error[GDR508]: `in_proj_ba` is {per_rank} output columns per rank at TP 2, not a multiple of 64 "
            f"(compressed-tensors W4A16, group 32)") in two.stdout, two.stdout
    one = _launch(folder, "python", "-m", "sglang.launch_server", "--tp", "1", "--model-path")
    assert "error[GDR508]" not in one.stdout, one.stdout  # 2 x 32 = 64 columns on one rank


def test_kimi_linear_gptq_on_sglang_refuses_b_proj_even_at_tp_1(tmp_path):
    """A constructed GPTQ config (no published Kimi-Linear export with a GPTQ/AWQ `quantization_config` was found):
    KDA's `b_proj` has one output per head (sglang 0.5.23 models/kimi_linear.py:357-364, the unfused path a
    quantized checkpoint takes, :259), 32 for Kimi-Linear: fewer than Marlin's 64 on one rank."""
    quant = {"quant_method": "gptq", "bits": 4, "group_size": 128, "sym": True, "desc_act": False}
    folder = _folder(tmp_path, "Kimi-Linear-GPTQ", "moonshotai/Kimi-Linear-48B-A3B-Instruct", quant)
    heads = get_builtin("moonshotai/Kimi-Linear-48B-A3B-Instruct").config_copy()["linear_attn_config"]["num_heads"]
    run = _launch(folder, "python", "-m", "sglang.launch_server", "--tp", "1", "--model-path")
    assert (f"error[GDR508]: `b_proj` is {heads} output columns per rank at TP 1, not a multiple of 64 (GPTQ 4-bit, "
            f"group 128): sglang 0.5.23 stops loading the checkpoint (TP sizes that work: none)") in run.stdout, \
        run.stdout
    assert "= help: keep `b_proj` unquantized in the checkpoint" in run.stdout


def test_modelopt_nvfp4_on_vllm_checks_the_input_slice_only(tmp_path):
    # vLLM 0.33.0 quantization/modelopt.py:2026-2029: input_size_per_partition % 16. out_proj's input is value_dim /
    # TP = 32 x 128 / 16 = 256 at TP 16: a multiple of 16, so NVFP4 loads at every TP that splits the heads.
    quant = {"quant_method": "modelopt", "quant_algo": "NVFP4", "group_size": 16, "exclude_modules": ["lm_head"]}
    folder = _folder(tmp_path, "Qwen3-Next-NVFP4", "Qwen/Qwen3-Next-80B-A3B-Instruct", quant)
    run = _launch(folder, "vllm", "serve", "-tp", "16", "--max-model-len", "4096", "--model")
    assert "error[GDR508]" not in run.stdout and "warning[GDR509]" not in run.stdout, run.stdout


def test_explain_reads_the_repack_message_with_the_models_widths():
    text = _geometry("Qwen/Qwen3-Next-80B-A3B-Instruct")
    tp = 2
    ba = 2 * text["linear_num_value_heads"]  # in_proj_ba: two values per value head
    width = ba // tp
    run = run_cli("explain", f"RuntimeError: size_n = {width} is not divisible by tile_n_size = {SGLANG_TILE_N}",
                  "--model", "Qwen/Qwen3-Next-80B-A3B-Instruct", "--tp", str(tp))
    assert run.exit_code == 0, run.stderr
    working = [t for t in (1, 2, 4, 8, 16) if ba % t == 0 and (ba // t) % SGLANG_TILE_N == 0]
    assert run.stdout.startswith("GDR419 marlin-repack-not-divisible (error)")
    assert (f"that is in_proj_ba width (2*HV) = {ba} over tp={tp}; TP sizes whose slice is a multiple of "
            f"{SGLANG_TILE_N}: {', '.join(map(str, working))}") in run.stdout, run.stdout


def _wheel_text(engine: str, member: str) -> str | None:
    import os
    import zipfile
    from pathlib import Path

    given = os.environ.get(f"GDR_CHECK_{engine.upper()}_PATH")
    if not given:
        return None
    path = Path(given)
    if path.is_dir():
        return (path / member).read_text() if (path / member).is_file() else None
    with zipfile.ZipFile(path) as wheel:
        return wheel.read(member).decode() if member in wheel.namelist() else None


@pytest.mark.parametrize("engine", ["sglang", "vllm"])
def test_each_message_is_the_wheels_own_words_at_the_cited_lines(engine):
    """Every engine message GDR508/GDR509 quote from the newest release is in the file and lines they cite, as the
    string literals there (split over lines as the source splits them)."""
    import re
    from dataclasses import replace

    from gdr_check.engines.launch_flags import table_for

    table = table_for(engine)
    checked = 0
    facts = table.group_quant
    quoted = list(facts.checks)
    if facts.awq_shards_disagree:
        quoted.append(replace(facts.checks[0], says=facts.awq_shards_disagree, source=facts.awq_shards_source))
    for check in quoted:
        name, version, where = check.source.split(" ", 2)
        if version != table.version:
            continue  # an earlier release's file, read when the fact was written (engines/group_quant.py)
        file, lines = where.rsplit(":", 1)
        member = file if file.startswith("vllm/") else f"sglang/{file}"
        text = _wheel_text(engine, member)
        if text is None:
            pytest.skip(f"GDR_CHECK_{engine.upper()}_PATH is not set, or holds no {member}")
        first, last = (int(n) for n in lines.split("-"))
        cited = "\n".join(text.splitlines()[first - 1:last])
        literals = "".join(re.findall(r'"((?:[^"\\]|\\.)*)"', cited))
        for fragment in re.split(r"\{[a-z]+\}|\b\d+\b", check.says):
            fragment = fragment.replace("'", "").strip(" .")
            assert fragment.replace("'", "") in literals.replace("%s", "").replace("'", ""), (check, fragment)
        checked += 1
    assert checked >= 2


def test_a_scheme_the_release_is_not_modelled_for_is_said_in_the_header(tmp_path):
    folder = _folder(tmp_path, "Qwen3-Coder-Next-GPTQ-4bit", "Qwen/Qwen3-Next-80B-A3B-Instruct", gptq_coder_next(False))
    run = _launch(folder, "vllm", "serve", "-tp", "4", "--max-model-len", "4096", "--model")
    assert ("  note: quantization: GPTQ 4-bit, group 32: the per-rank widths are not checked: how vLLM 0.33.0 picks "
            "this scheme's kernel (per layer and GPU, or outside Marlin) is not modelled") in run.stdout, run.stdout
    run = _launch(folder, "python", "-m", "sglang.launch_server", "--tp", "4", "--model-path")
    assert ("  note: quantization: GPTQ 4-bit, group 32: the GDN/KDA projections' per-rank widths checked as this "
            "release loads them (GDR508, GDR509)") in run.stdout, run.stdout


def test_sglang_0_5_9_splits_qwen35_gates_into_in_proj_b_and_in_proj_a(tmp_path):
    # sglang 0.5.9 srt/models/qwen3_5.py:148-165: in_proj_b and in_proj_a are separate column-parallel layers of
    # num_v_heads outputs; 0.5.10 merges them into in_proj_ba (two outputs, summed per rank).
    folder = _folder(tmp_path, "Qwen3.6-35B-A3B-int4-AutoRound", "Qwen/Qwen3.6-35B-A3B", autoround_qwen36(False))
    heads = _geometry("Qwen/Qwen3.6-35B-A3B")["linear_num_value_heads"]
    assert heads % SGLANG_TILE_N and (2 * heads) % SGLANG_TILE_N == 0
    old = _launch(folder, "python", "-m", "sglang.launch_server", "--tp", "1", "--model-path", engine="0.5.9")
    assert (f"error[GDR508]: `in_proj_b` is {heads} output columns per rank at TP 1, not a multiple of "
            f"{SGLANG_TILE_N}") in old.stdout, old.stdout
    assert f"error[GDR508]: `in_proj_a` is {heads} output columns per rank at TP 1" in old.stdout
    new = _launch(folder, "python", "-m", "sglang.launch_server", "--tp", "1", "--model-path", engine="0.5.10")
    assert "error[GDR508]" not in new.stdout, new.stdout


def test_sglang_0_5_9_fp8_in_proj_ba_is_one_output_and_loads_at_tp_1(tmp_path):
    # sglang 0.5.9 srt/models/qwen3_next.py:259-267: in_proj_ba is one column-parallel output (2 x num_v_heads), not
    # split at TP 1 and not merged, so the FP8 block check has nothing to refuse; 0.5.10 on merges two outputs of
    # num_v_heads (qwen3_next.py:143-146 in 0.5.14) and checks each against block_n at any TP.
    quant = {"quant_method": "fp8", "activation_scheme": "dynamic", "weight_block_size": [128, 128]}
    folder = _folder(tmp_path, "Qwen3-Next-FP8", "Qwen/Qwen3-Next-80B-A3B-Instruct", quant)
    old = _launch(folder, "python", "-m", "sglang.launch_server", "--tp", "1", "--model-path", engine="0.5.9")
    assert "error[GDR505]" not in old.stdout, old.stdout
    new = _launch(folder, "python", "-m", "sglang.launch_server", "--tp", "1", "--model-path", engine="0.5.10")
    assert "error[GDR505]: `in_proj_ba` is 32 output columns per rank at TP 1" in new.stdout, new.stdout


@pytest.mark.parametrize("blocks,quantized", [("model.language_model.layers,mtp.layers", True),
                                              ("model.visual.blocks", False)])
def test_autoround_block_name_to_quantize_limits_what_is_checked(tmp_path, blocks, quantized):
    # sglang 0.5.23 auto_round.py:240-245: a layer outside `block_name_to_quantize` stays unquantized.
    quant = {**autoround_qwen36(False), "block_name_to_quantize": blocks}
    folder = _folder(tmp_path, "Qwen3.6-35B-A3B-AutoRound", "Qwen/Qwen3.6-35B-A3B", quant)
    run = _launch(folder, "python", "-m", "sglang.launch_server", "--tp", "2", "--model-path")
    assert ("error[GDR508]: `in_proj_ba`" in run.stdout) is quantized, run.stdout


@pytest.mark.parametrize("entries,version,refused", [
    (["in_proj_a"], "0.33.0", True),    # in_proj_a is not a substring of ...in_proj_ba: the shards disagree
    (["in_proj_b"], "0.23.0", True),    # before 0.24 only the shards are read: in_proj_b named, in_proj_a not
    (["in_proj_b"], "0.24.0", False),   # from 0.24 the fused name first: "in_proj_b" is in "...in_proj_ba"
    (["in_proj_a", "in_proj_b"], "0.23.0", False),
])
def test_vllm_awq_refuses_a_fused_layer_whose_shards_differ(tmp_path, entries, version, refused):
    # vLLM quantization/utils/quant_utils.py:500-505 (0.22.0, shards only) and :664-683 (0.33.0, the fused name
    # first); Qwen3.5's packed_modules_mapping maps in_proj_ba to in_proj_b, in_proj_a (models/qwen3_5.py:481-484).
    quant = {**awq_qwen3_next(), "modules_to_not_convert": entries}
    folder = _folder(tmp_path, "Qwen3.6-35B-A3B-AWQ", "Qwen/Qwen3.6-35B-A3B", quant)
    run = _launch(folder, "vllm", "serve", "-tp", "2", "--max-model-len", "4096", "--model", engine=version)
    line = (f"error[GDR510]: `in_proj_ba` fuses `in_proj_b` and `in_proj_a`, and `modules_to_not_convert` keeps only "
            f"`{entries[0]}` unquantized: vLLM {version} stops loading the checkpoint (all shards of a fused layer "
            f"must have one precision)")
    assert (line in run.stdout) is refused, run.stdout
    if refused:
        assert ("vLLM says: `Detected some but not all shards of model.layers.0.linear_attn.in_proj_ba are quantized. "
                "All shards of fused layers to have the same precision.`") in run.stdout


REDOS = "(.|.)*(.|.)*(.|.)*(.|.)*(.|.)*(.|.)*X"


@pytest.mark.parametrize("quantization,line", [
    ({"quant_method": "awq", "bits": 0, "group_size": 128, "version": "gemm"},
     "`quantization_config.bits` is 0 (an int), not a positive integer"),
    ({"quant_method": "awq", "bits": 64, "group_size": 128, "version": "gemm"},
     "`quantization_config.bits` is 64: the engines load 2, 3, 4 or 8-bit groups"),
    ({"quant_method": "awq", "bits": 4, "group_size": "32", "version": "gemm"},
     "`quantization_config.group_size` is '32' (a str), not a positive integer or -1"),
    ({"quant_method": "gptq", "bits": 4, "group_size": -7, "sym": True, "desc_act": False},
     "`quantization_config.group_size` is -7 (an int), not a positive integer or -1"),
    ({"quant_method": "compressed-tensors", "format": "pack-quantized",
      "config_groups": {"group_0": {"weights": {"num_bits": True, "strategy": "group", "group_size": 128}}}},
     "`quantization_config.config_groups.group_0.weights.num_bits` is True (a bool), not a positive integer"),
    ({"quant_method": "gptq", "bits": 4, "group_size": 128, "sym": True, "desc_act": False,
      "dynamic": {f"-:{REDOS}": {}}},
     f"`quantization_config.dynamic` holds the pattern '{REDOS}': a quantified group, more than 3 unbounded "
     "repeats or over 512 characters, which gdr-check does not run (it can backtrack without end)"),
    ({"quant_method": "compressed-tensors", "format": "pack-quantized", "ignore": ["re:.*a.*b.*c.*d"],
      "config_groups": {"g": {"weights": {"num_bits": 4, "strategy": "group", "group_size": 128}}}},
     "`quantization_config.ignore` holds the pattern '.*a.*b.*c.*d': a quantified group, more than 3 unbounded "
     "repeats or over 512 characters, which gdr-check does not run (it can backtrack without end)"),
], ids=["bits-0", "bits-64", "group-str", "group-negative", "ct-bits-bool", "dynamic-redos", "ignore-many-repeats"])
@pytest.mark.parametrize("engine", ["vllm serve", "python -m sglang.launch_server --model-path"])
def test_a_quantization_config_no_engine_loads_is_one_line_and_exit_2(tmp_path, quantization, line, engine):
    """Values gdr-check cannot compute with (it divided by the bits and ran the config's patterns as given: a
    ZeroDivisionError as "internal error", and a pattern that backtracked for minutes)."""
    folder = _folder(tmp_path, "bad", "Qwen/Qwen3-Next-80B-A3B-Instruct", quantization)
    result = run_cli("launch", "--weights-per-rank", "20GiB", "--", *engine.split(), folder, "--max-model-len", "4096")
    assert (result.exit_code, result.stdout) == (2, "")
    assert result.stderr == f"error: {line}\n"
