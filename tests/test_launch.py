"""`gdr-check launch`: real vLLM 0.33.0 and sglang 0.5.23 command lines, read with gdr-check's own flag tables, and
the engines' start-up arithmetic predicted before launch.

Every expected number is computed here from the engines' source formulas (cited at each step) and the published
Qwen3-Next-80B-A3B config (16 key heads, 32 value heads, head dims 128, conv kernel 4, 48 layers with full attention
every 4th, 2 KV heads of 256), never read back from gdr-check.
"""

from __future__ import annotations

import json
import math
import re

import pytest

from cli_checkpoints import clean_output_env, run_cli
from gdr_check.deployment.launch_command import (
    LaunchCommandError,
    attention_tp,
    parse_launch,
    parse_log,
    split_command,
)
from gdr_check.deployment.launch_memory import LaunchModelError, derived_length
from gdr_check.engines.launch_flags import table_for

GiB = 1 << 30
MODEL = "Qwen/Qwen3-Next-80B-A3B-Instruct"
H100 = int(79.25 * GiB)  # the table's H100 total (torch's CUDA-visible total on an H100 80GB HBM3)
# The published Qwen3-Next-80B-A3B config.
HK, HV, DK, DV, CONV, LAYERS, FULL, KV_HEADS, HEAD_DIM = 16, 32, 128, 128, 4, 48, 12, 2, 256
LINEAR = LAYERS - FULL


@pytest.fixture(autouse=True)
def empty_cache(tmp_path, monkeypatch):
    clean_output_env(monkeypatch)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))  # the built-in description, never a download


# -- the parser ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("line, engine, entry", [
    (f"vllm serve {MODEL} --tensor-parallel-size 4", "vllm", "vllm serve"),
    (f"python -m vllm.entrypoints.openai.api_server --model {MODEL} -tp 4", "vllm",
     "python -m vllm.entrypoints.openai.api_server"),
    (f"python3 -m sglang.launch_server --model-path {MODEL} --tp 4", "sglang", "python -m sglang.launch_server"),
    (f"CUDA_VISIBLE_DEVICES=0,1,2,3 /opt/venv/bin/sglang serve --model {MODEL} --tensor-parallel-size 4", "sglang",
     "sglang serve"),
])
def test_each_entry_point_reads_the_model_and_tp(line, engine, entry):
    command = parse_launch(split_command(line))
    assert (command.engine, command.entry, command.get("model"), command.get("tp")) == (engine, entry, MODEL, 4)


def test_vllm_spellings_as_its_parser_takes_them():
    # argparse_utils.py:30-95: k is 1000, K is 1024; underscores stand for dashes; --no-x / --disable-x negate
    command = parse_launch(split_command(
        f"vllm serve {MODEL} --max_model_len 32k --max-num-seqs=64 --kv-cache-memory-bytes 2K "
        "--disable-prefix-caching --no-enforce-eager --speculative-config.num_speculative_tokens 3 --port 8000 "
        "--trust-remote-code"))
    assert command.get("max_model_len") == 32000
    assert command.get("kv_cache_memory_bytes") == 2048
    assert command.get("max_running") == 64
    assert command.get("prefix_caching") is False and command.get("enforce_eager") is False
    assert command.get("speculative_tokens") == 3
    assert command.ignored == ["--port", "8000", "--trust-remote-code"]


def test_a_switch_passed_over_takes_no_value():
    command = parse_launch(split_command(f"vllm serve --trust-remote-code {MODEL} -tp 2"))
    assert (command.get("model"), command.ignored) == (MODEL, ["--trust-remote-code"])


def test_vllm_speculative_config_json():
    command = parse_launch(["vllm", "serve", MODEL, "--speculative-config",
                            '{"method": "qwen3_next_mtp", "num_speculative_tokens": 2}'])
    assert command.get("speculative_tokens") == 2


def test_sglang_attention_dp_shards_the_heads_by_tp_over_attn_dp():
    command = parse_launch(split_command(f"sglang serve --model-path {MODEL} --tp 4 --attn-dp-size 2"))
    assert attention_tp(command) == 2  # runtime_context.py:73-76: tp // attn_dp // attn_cp
    old = parse_launch(split_command(f"sglang serve --model-path {MODEL} --tp 4 --dp-size 2 --enable-dp-attention"))
    assert (old.get("attn_dp"), old.get("dp"), attention_tp(old)) == (2, 1, 2)  # parallel_hook.py:39-61


@pytest.mark.parametrize("line, message", [
    (f"sglang serve --model-path {MODEL} --cuda-graph-max-bs 256",
     "sglang 0.5.23 rejects it: ambiguous option: --cuda-graph-max-bs could match --cuda-graph-max-bs-decode, "
     "--cuda-graph-max-bs-prefill"),
    (f"sglang serve --model-path {MODEL} --mamba-scheduler-strategy extra_buffer",
     "sglang 0.5.23 rejects it: unrecognized arguments: --mamba-scheduler-strategy (renamed "
     "--mamba-radix-cache-strategy in 0.5.14; the old spelling removed in 0.5.20)"),
    (f"vllm serve {MODEL} --cuda-graph-sizes 8 16",
     "vLLM 0.33.0 rejects it: unrecognized arguments: --cuda-graph-sizes (use --cudagraph-capture-sizes or "
     "--max-cudagraph-capture-size)"),
    (f"sglang serve --model-path {MODEL} --mamba-radix-cache-strategy ping_pong",
     "argument --mamba-radix-cache-strategy: invalid choice: 'ping_pong' (choose from 'auto', 'no_buffer', "
     "'extra_buffer', 'extra_buffer_lazy')"),
    (f"vllm serve {MODEL} --tensor-parallel-size four", "argument --tensor-parallel-size: invalid int value: 'four'"),
    ("sglang serve --tp 4", "the launch command names no model: give --model-path"),
    ("torchrun train.py", "not a launch command gdr-check reads: 'torchrun train.py'; expected `vllm serve MODEL "
     "...`, `python -m vllm.entrypoints.openai.api_server --model ...`, `sglang serve --model-path ...` or "
     "`python -m sglang.launch_server --model-path ...`"),
])
def test_what_the_engines_parser_rejects_is_one_line(line, message):
    with pytest.raises(LaunchCommandError) as caught:
        parse_launch(split_command(line))
    assert str(caught.value) == message


def test_startup_logs():
    vllm = parse_log("INFO 12-01 10:00:00 [utils.py:233] non-default args: {'model_tag': 'Qwen/Qwen3-Next-80B-A3B-"
                     "Instruct', 'model': 'Qwen/Qwen3-Next-80B-A3B-Instruct', 'tensor_parallel_size': 4, "
                     "'gpu_memory_utilization': 0.9, 'max_model_len': 131072}\n")
    assert (vllm.engine, vllm.get("tp"), vllm.get("memory_fraction"), vllm.get("max_model_len")) == (
        "vllm", 4, 0.9, 131072)
    sglang = parse_log("[2026-01-01 10:00:00] server_args=ServerArgs(model_path='Qwen/Qwen3-Next-80B-A3B-Instruct', "
                       "tp_size=4, attn_dp_size=2, mem_fraction_static=0.8, max_running_requests=None, "
                       "mamba_radix_cache_strategy='auto', disable_radix_cache=False)\n")
    assert (sglang.engine, sglang.get("tp"), sglang.get("attn_dp"), sglang.get("memory_fraction")) == (
        "sglang", 4, 2, 0.8)
    with pytest.raises(LaunchCommandError, match="no startup settings in the log"):
        parse_log("nothing here\n")


# -- vLLM 0.33.0 arithmetic --------------------------------------------------------------------------------------
def vllm_blocks(tp: int, utilization: float, weights: int, peak: int) -> tuple[int, int]:
    """(blocks, bytes per block) as vLLM 0.33.0 computes them for Qwen3-Next on a Hopper GPU with prefix caching on."""
    conv_dim = HK * DK * 2 + HV * DV  # mamba_utils.py:282
    mamba_page = conv_dim // tp * (CONV - 1) * 2 + HV // tp * DV * DK * 2  # bf16 conv and SSM (auto)
    attn_token = 2 * max(1, KV_HEADS // tp) * HEAD_DIM * 2  # FullAttentionSpec: K and V, bf16
    align = math.lcm(16, 64)  # FlashAttention MultipleOf(16); FlashInfer GDN prefill checkpoints on a 64 grid
    block = align * -(-mamba_page // (align * attn_token))  # platforms/interface.py:1096-1099
    group = FULL  # kv_cache_planning.py:495-506: 12 full, 36 linear -> groups of 12
    bytes_per_block = group * block * attn_token
    available = math.ceil(H100 * utilization) - weights - peak  # utils.py:724-726, gpu_worker.py:754-758
    return available // bytes_per_block, bytes_per_block


def test_vllm_refuses_when_max_num_seqs_exceeds_the_blocks_and_names_the_largest_that_fits():
    weights = 40 * GiB
    expected, _ = vllm_blocks(4, 0.62, weights, 4 * GiB)
    most, _ = vllm_blocks(4, 0.62, weights, 2 * GiB)
    fewest, _ = vllm_blocks(4, 0.62, weights, 8 * GiB)
    seqs = most + 100
    run = run_cli("launch", "--gpu", "h100", "--weights-per-rank", "40GiB", "--", "vllm", "serve", MODEL,
                  "--tensor-parallel-size", "4", "--max-model-len", "4096", "--gpu-memory-utilization", "0.62",
                  "--max-num-seqs", str(seqs))
    assert run.exit_code == 1, run.stdout + run.stderr
    assert "verdict: vLLM 0.33.0 refuses to start" in run.stdout
    assert (f"error[GDR501]: max_num_seqs ({seqs}) exceeds the {expected} Mamba cache blocks vLLM 0.33.0 allocates "
            f"at any start-up peak (max_num_seqs <= {expected})") in run.stdout
    assert f"= help: `--max-num-seqs {fewest}` fits at every estimate" in run.stdout


def test_the_issue_command_starts_on_an_h100_with_the_default_max_num_seqs():
    # vllm serve ... -tp 4 --max-model-len 131072 --gpu-memory-utilization 0.9: 1024 sequences (arg_utils.py:2986)
    weights = int(80e9 * 2) // 4  # the built-in model's estimate: 80B parameters in bf16, over 4 ranks
    fewest, _ = vllm_blocks(4, 0.9, weights, 8 * GiB)
    assert fewest > 1024
    run = run_cli("launch", "--gpu", "h100", "--", "vllm", "serve", MODEL, "--tensor-parallel-size", "4",
                  "--max-model-len", "131072", "--gpu-memory-utilization", "0.9")
    assert run.exit_code == 0, run.stdout + run.stderr
    assert "max_num_seqs 1024 (the default on this GPU)" in run.stdout
    assert "verdict: vLLM 0.33.0 starts" in run.stdout
    assert "GDR501" not in run.stdout


def test_vllm_default_max_num_seqs_is_256_on_an_a100():
    run = run_cli("launch", "--gpu", "a100-80g", "--output-format", "json", "--", "vllm", "serve", MODEL, "-tp", "4",
                  "--max-model-len", "8192")
    document = json.loads(run.stdout)
    assert document["plan"]["max_num_seqs"] == 256 and document["plan"]["max_num_seqs_default"] is True


def test_vllm_refuses_a_max_model_len_one_request_cannot_hold():
    # 0.56 x 79.25 GiB - 40 GiB leaves 2.38 GiB at a 2 GiB peak; one request at 262144 tokens needs more
    run = run_cli("launch", "--weights-per-rank", "40GiB", "--", "vllm", "serve", MODEL, "-tp", "2",
                  "--max-model-len", "262144", "--gpu-memory-utilization", "0.56", "--max-num-seqs", "8")
    assert run.exit_code == 1
    assert "error[GDR502]: one request at --max-model-len 262144 needs" in run.stdout


# -- sglang 0.5.23 arithmetic ------------------------------------------------------------------------------------
def sglang_pool(attn_tp: int, weights: int, fraction: float) -> tuple[int, int]:
    """(max_mamba_cache_size, bytes per slot) for Qwen3-Next: fp32 SSM state, bf16 conv (environ.py:1628)."""
    conv_dim = HK * DK * 2 + HV * DV
    per_slot = LINEAR * (conv_dim // attn_tp * (CONV - 1) * 2 + HV // attn_tp * DV * DK * 4)
    rest = int(H100 * fraction) - weights  # kv_cache_configurator.py:2990-3040
    budget = rest * 0.9 / 1.9  # :3350-3356, mamba_full_memory_ratio fallback 0.9
    return int((budget - per_slot) // per_slot), per_slot


def test_sglang_attention_dp_caps_the_running_requests_with_extra_buffer_slots():
    # memory_hook.py:281-328 on an 81152 MiB GPU, tp 4, attention DP 2, decode graphs up to 512:
    reserved = 512 + 8192 * 1.5 + 4 / 8 * 1024 + 512 * 2 + 512 * 2 * 3 + 512 * 2 * 1.5
    fraction = round((79.25 * 1024 - reserved) / (79.25 * 1024), 3)
    pool, _ = sglang_pool(2, 40 * GiB, fraction)
    ratio = 3 + 2  # radix cache on, extra_buffer (auto under the overlap schedule) with overlap: 2 tracking slots
    run = run_cli("launch", "--weights-per-rank", "40GiB", "--", "python", "-m", "sglang.launch_server",
                  "--model-path", MODEL, "--tp", "4", "--attn-dp-size", "2", "--context-length", "131072")
    assert run.exit_code == 0, run.stdout + run.stderr
    assert (f"warning[GDR503]: sglang 0.5.23 caps running requests at {pool // ratio} per attention-DP group: {pool} "
            f"state slots, 5 per request (extra_buffer)") in run.stdout
    assert f"kernel call checked as: tp 2, batch {pool // ratio}, {pool + 1} pool rows, engine sglang" in run.stdout
    assert "verdict: sglang 0.5.23 starts, capping the running requests" in run.stdout


def test_sglang_without_the_radix_cache_counts_one_slot_per_request():
    pool, _ = sglang_pool(4, 40 * GiB, 0.85)
    run = run_cli("launch", "--weights-per-rank", "40GiB", "--output-format", "json", "--", "sglang", "serve",
                  "--model-path", MODEL, "--tp", "4", "--mem-fraction-static", "0.85", "--disable-radix-cache")
    plan = json.loads(run.stdout)["plan"]
    assert (plan["pool_size"], plan["ratio"]) == (pool, 1)


def test_sglang_refuses_when_the_weights_fill_the_static_fraction():
    run = run_cli("launch", "--weights-per-rank", "40GiB", "--", "sglang", "serve", "--model-path", MODEL,
                  "--tp-size", "2", "--mem-fraction-static", "0.5")
    assert run.exit_code == 1
    assert ("error[GDR504]: sglang 0.5.23 stops at start: the weights (40.00 GiB) fill --mem-fraction-static 0.5 of "
            "79.25 GiB") in run.stdout


# -- input the command cannot take ---------------------------------------------------------------------------------
def test_a_repo_id_one_letter_off_gets_did_you_mean():
    run = run_cli("launch", "--", "vllm", "serve", "Qwen/Qwen3-Next-80B-A3B-Instruc")
    assert run.exit_code == 2 and run.stdout == ""
    assert "did you mean `Qwen/Qwen3-Next-80B-A3B-Instruct` (a built-in model)?" in run.stderr
    assert len(run.stderr.strip().splitlines()) == 1


def test_a_rejected_flag_is_one_usage_line():
    run = run_cli("launch", "--", "sglang", "serve", "--model-path", MODEL, "--cuda-graph-max-bs", "256")
    assert run.exit_code == 2 and "ambiguous option: --cuda-graph-max-bs" in run.stderr
    assert len(run.stderr.strip().splitlines()) == 1


def test_no_command_is_a_usage_error():
    run = run_cli("launch")
    assert run.exit_code == 2 and "give the engine command after `--`" in run.stderr


# -- FP8 block quantization at TP (vLLM 0.33.0 fp8_utils.py:1296-1345) --------------------------------------------
def _fp8_checkpoint(tmp_path, ignored: list[str]):
    from gdr_check.models.builtin import get_builtin

    config = get_builtin(MODEL).config_copy()
    config["quantization_config"] = {"quant_method": "fp8", "activation_scheme": "dynamic",
                                     "weight_block_size": [128, 128], "modules_to_not_convert": ignored}
    folder = tmp_path / "Qwen3-Next-80B-A3B-Instruct-FP8"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(config))
    return folder


def test_fp8_in_proj_ba_at_tp_names_the_tp_sizes_that_work(tmp_path):
    folder = _fp8_checkpoint(tmp_path, [])
    # in_proj_ba is one column-parallel output of 2 x 32 value heads: 64 / 2 = 32 columns per rank at TP 2, not a
    # multiple of 128; at TP 1 nothing is split and a single output is not checked.
    run = run_cli("launch", "--weights-per-rank", "20GiB", "--", "vllm", "serve", str(folder), "-tp", "2",
                  "--max-model-len", "4096")
    assert run.exit_code == 1
    assert ("error[GDR505]: `in_proj_ba` is 32 output columns per rank at TP 2, not a multiple of the FP8 block 128: "
            "vLLM 0.33.0 stops loading the checkpoint (TP sizes that work: 1)") in run.stdout


def test_fp8_with_in_proj_ba_kept_unquantized_loads_at_every_tp_that_splits_the_heads(tmp_path):
    linear = [i for i in range(LAYERS) if (i + 1) % 4]
    folder = _fp8_checkpoint(tmp_path, [f"model.layers.{i}.linear_attn.in_proj_ba" for i in linear])
    # in_proj_qkvz: (2 x 2048 + 2 x 4096) / 16 = 768 = 6 x 128; out_proj input 4096 / 16 = 256 = 2 x 128
    run = run_cli("launch", "--weights-per-rank", "10GiB", "--", "vllm", "serve", str(folder), "-tp", "16",
                  "--max-model-len", "4096")
    assert "GDR505" not in run.stdout, run.stdout


def test_check_gets_the_same_did_you_mean():
    run = run_cli("Qwen/Qwen3-Next-80B-A3B-Instrut", "--tp", "4", "--output-format", "concise")
    assert run.exit_code == 2
    assert ("error: `Qwen/Qwen3-Next-80B-A3B-Instrut` is neither a local path nor a model in the local Hugging Face "
            "cache") in run.stderr
    assert "; help: did you mean `Qwen/Qwen3-Next-80B-A3B-Instruct` (a built-in model)?" in run.stderr


def test_a_repo_id_far_from_every_built_in_gets_no_guess():
    run = run_cli("launch", "--", "vllm", "serve", "Org/Some-Other-Model")
    assert run.exit_code == 2 and "did you mean" not in run.stderr


def test_launch_shows_the_check_command_of_the_same_deployment_and_check_agrees(tmp_path):
    # sglang, tp 4 with attention DP 2: the GDN layers see tp 2; 8 running requests (--max-running-requests 8
    # lowers the decode graphs to 8 too, memory_hook.py:182-188); the pool from --max-mamba-cache-size 64.
    run = run_cli("launch", "--weights-per-rank", "40GiB", "--", "sglang", "serve", "--model-path", MODEL, "--tp", "4",
                  "--attn-dp-size", "2", "--max-running-requests", "16", "--max-mamba-cache-size", "128")
    # `auto` stays `auto`: check resolves it as sglang does (extra_buffer for Qwen3-Next), 64 // 5 = 12 >= 8 served
    expected = f"gdr-check {MODEL} --tp 2 --batch 8 --slots 65 --engine sglang@0.5.23"  # the release read
    assert f"  the same deployment in `check`: {expected}\n" in run.stdout, run.stdout
    check = run_cli(*expected.split()[1:], "--output-format", "concise")
    launched = {line.split("]")[0].rsplit("[", 1)[1] for line in run.stdout.splitlines()
                if line.startswith(("error[", "warning["))}
    checked = set(re.findall(r"(?:error|warning)\[(GDR\d{3})\]", check.stdout))
    assert checked and checked == {code for code in launched if not code.startswith("GDR5")}, (check.stdout,
                                                                                             run.stdout)


def test_from_log_reads_an_engine_startup_log_and_refuses_a_folder(tmp_path):
    log = tmp_path / "server.log"
    log.write_text("[2026-01-01 10:00:00] server_args=ServerArgs(model_path='Qwen/Qwen3-Next-80B-A3B-Instruct', "
                   "tp_size=4, attn_dp_size=2, mem_fraction_static=0.8, max_running_requests=None)\n"
                   "[2026-01-01 10:00:05] Load weight begin.\n")
    run = run_cli("launch", "--weights-per-rank", "40GiB", "--from-log", str(log))
    assert run.exit_code == 0, run.stderr
    assert run.stdout.startswith("sglang 0.5.23: sglang startup log (server_args) model_path "
                                 "Qwen/Qwen3-Next-80B-A3B-Instruct\n  read: tp_size 4, attn_dp_size 2, "
                                 "mem_fraction_static 0.8\n")
    assert "attention TP 2 (tp 4 / attn-dp 2)" in run.stdout
    folder = run_cli("launch", "--from-log", str(tmp_path))
    assert folder.exit_code == 2 and "is not a regular file" in folder.stderr
    assert len(folder.stderr.strip().splitlines()) == 1


def test_sglang_checks_every_output_of_a_merged_fp8_layer_even_at_tp_1(tmp_path):
    # srt/models/qwen3_next.py:177-183: in_proj_ba has two outputs of 32 value heads; fp8.py:600-610 checks each
    # output of a merged layer at any TP: 32 % 128 != 0 already at TP 1.
    folder = _fp8_checkpoint(tmp_path, [])
    run = run_cli("launch", "--weights-per-rank", "20GiB", "--", "sglang", "serve", "--model-path", str(folder))
    assert run.exit_code == 1
    assert ("error[GDR505]: `in_proj_ba` is 32 output columns per rank at TP 1, not a multiple of the FP8 block 128: "
            "sglang 0.5.23 stops loading the checkpoint (TP sizes that work: none)") in run.stdout


def test_heads_that_do_not_split_are_the_model_checks_error_and_the_verdict():
    run = run_cli("launch", "--weights-per-rank", "10GiB", "--", "vllm", "serve", MODEL, "-tp", "3",
                  "--max-model-len", "4096")
    assert run.exit_code == 1, run.stderr
    assert "verdict: vLLM 0.33.0 stops loading the model (GDR" in run.stdout
    codes = set(re.findall(r"error\[(GDR1\d\d)\]", run.stdout))
    assert codes and codes == set(re.findall(r"error\[(GDR1\d\d)\]", run_cli(MODEL, "--tp", "3", "--engine", "vllm",
                                                                            "--output-format", "concise").stdout))


def test_vllm_speculative_tokens_widen_the_conv_window_and_add_state_blocks():
    # mamba_utils.py:282-286: the conv window holds kernel - 1 + draft tokens columns; abstract.py:86-90 and
    # kv_cache_interface.py:1135-1141: in align mode (prefix caching on) a state group holds 2 + draft + 1 prefill
    # checkpoint blocks per request.
    tp, spec, length = 4, 2, 8192
    conv_dim = HK * DK * 2 + HV * DV
    state = conv_dim // tp * (CONV - 1 + spec) * 2 + HV // tp * DV * DK * 2
    attn_token = 2 * max(1, KV_HEADS // tp) * HEAD_DIM * 2
    block = 64 * -(-state // (64 * attn_token))
    full_groups, linear_groups = 1, 3
    per_request = full_groups * -(-length // block) + linear_groups * (2 + spec + 1)
    run = run_cli("launch", "--weights-per-rank", "40GiB", "--output-format", "json", "--", "vllm", "serve", MODEL,
                  "-tp", str(tp), "--max-model-len", str(length), "--speculative-config",
                  json.dumps({"method": "qwen3_next_mtp", "num_speculative_tokens": spec}))
    plan = json.loads(run.stdout)["plan"]
    assert (plan["block_size"], plan["bytes_per_block"], plan["blocks_per_request"]) == (
        block, FULL * block * attn_token, per_request)


def test_sglang_speculative_pool_is_the_joint_solve_with_the_verify_state():
    # kv_cache_configurator.py:3357-3372: K = (budget - slot x (1 + D)) // (slot x (1 + D / ratio))
    _, slot = sglang_pool(4, 40 * GiB, 0.85)
    budget = (int(H100 * 0.85) - 40 * GiB) * 0.9 / 1.9
    draft, ratio = 4, 5
    pool = int((budget - slot * (1 + draft)) // (slot * (1 + draft / ratio)))
    run = run_cli("launch", "--weights-per-rank", "40GiB", "--output-format", "json", "--", "sglang", "serve",
                  "--model-path", MODEL, "--tp", "4", "--mem-fraction-static", "0.85", "--speculative-algorithm",
                  "EAGLE", "--speculative-num-draft-tokens", str(draft))
    plan = json.loads(run.stdout)["plan"]
    assert (plan["pool_size"], plan["ratio"], plan["draft_tokens"]) == (pool, ratio, draft)


def test_launch_flags_a_float16_kda_state_under_vllm():
    # mamba_utils.py:133-148 (vLLM 0.33.0): the KDA state dtype function refuses float16 while the config is built
    done = run_cli("launch", "--gpu", "h100", "--", "vllm", "serve", "moonshotai/Kimi-Linear-48B-A3B-Instruct",
                   "--tensor-parallel-size", "4", "--max-model-len", "65536", "--mamba-ssm-cache-dtype", "float16")
    assert done.exit_code == 1, done.stdout + done.stderr
    assert ("error[GDR138]: vLLM 0.33 refuses a float16 KDA recurrent state: it stops at start-up" in done.stdout)
    assert ("vLLM 0.33 stops with `ValueError: KDA recurrent state supports only auto, float32, and bfloat16; got "
            "float16`") in done.stdout


# -- the start-up defaults of earlier releases (launch --engine-version) ----------------------------------------
def _plan(*args: str) -> dict:
    run = run_cli("launch", "--output-format", "json", *args)
    assert run.exit_code in (0, 1), run.stdout + run.stderr
    return json.loads(run.stdout)["plan"]


@pytest.mark.parametrize("release, utilization, at_capture", [
    ("0.17.1", 0.9, "assert"),  # config/cache.py:49 default=0.9; no Mamba block check (causal_conv1d.py:1162 asserts)
    ("0.18.0", 0.9, "cap"),  # cache.py:41 0.9; compilation.py:1198-1245 caps the capture sizes with a warning
    ("0.19.0", 0.9, "cap"),  # cache.py:41 0.9; compilation.py:1282 the same cap
    ("0.20.0", 0.92, "refuse"),  # cache.py:66 0.92; compilation.py:1421-1442 raises ValueError
    ("0.33.0", 0.92, "refuse"),  # cache.py:215 0.92; compilation.py:1510-1531
])
def test_vllm_utilization_default_and_mamba_block_check_per_release(release, utilization, at_capture):
    plan = _plan("--gpu", "h100", "--engine-version", release, "--", "vllm", "serve", MODEL, "-tp", "4",
                 "--max-model-len", "8192")
    assert (plan["memory_fraction"], plan["memory_fraction_default"]) == (utilization, True)
    assert plan["mamba_blocks_at_capture"] == at_capture


@pytest.mark.parametrize("release, gpu, seqs, capture", [
    # config/vllm.py `_set_cudagraph_sizes`: min(max_num_seqs x 2, 512) up to 0.27.0 (0.27.0 vllm.py:1834), from
    # 0.28.0 the ceiling is 1024 on SM100 (0.28.0 vllm.py:1937-1941); B200 gets 1024 sequences in both
    # (arg_utils.py get_batch_defaults: >= 70 GiB and no "a100" in the name)
    ("0.27.0", "b200", 1024, min(1024 * 2, 512)),
    ("0.28.0", "b200", 1024, min(1024 * 2, 1024)),
    ("0.33.0", "h100", 1024, min(1024 * 2, 512)),
    ("0.33.0", "a100-80g", 256, min(256 * 2, 512)),
])
def test_vllm_capture_size_default_per_release(release, gpu, seqs, capture):
    plan = _plan("--gpu", gpu, "--engine-version", release, "--", "vllm", "serve", MODEL, "-tp", "4",
                 "--max-model-len", "8192")
    assert (plan["max_num_seqs"], plan["capture_max"]) == (seqs, capture)


def test_vllm_capture_size_counts_the_draft_tokens():
    # min(max_num_seqs x decode_query_len x 2, 512) with decode_query_len = 1 + 2 draft tokens (vllm.py:2466-2470)
    plan = _plan("--gpu", "h100", "--", "vllm", "serve", MODEL, "-tp", "4", "--max-model-len", "8192",
                 "--max-num-seqs", "64", "--speculative-config",
                 '{"method": "qwen3_next_mtp", "num_speculative_tokens": 2}')
    assert plan["capture_max"] == min(64 * 3 * 2, 512)


def test_vllm_0_19_caps_the_capture_sizes_where_0_20_refuses():
    # 0.6 x 79.25 GiB - 42 GiB leaves too few blocks for 1024 sequences at any peak; 0.19.0 caps the capture sizes
    # (a warning, it starts), 0.20.0 raises (compilation.py:1421-1442)
    line = ["--weights-per-rank", "42GiB", "--", "vllm", "serve", MODEL, "-tp", "2", "--max-model-len", "4096",
            "--gpu-memory-utilization", "0.6", "--max-num-seqs", "1024"]
    old = run_cli("launch", "--engine-version", "0.19.0", *line)
    assert "warning[GDR511]: vLLM 0.19.0 caps its decode CUDA graphs: its largest decode CUDA-graph batch, 512, " \
           "exceeds the" in old.stdout and "GDR501" not in old.stdout
    new = run_cli("launch", "--engine-version", "0.20.0", *line)
    assert "error[GDR501]: max_num_seqs (1024) exceeds the" in new.stdout and "GDR511" not in new.stdout


def _sglang_fraction(mib: float, chunked: int, graph_bs: int, tp: int, speculative_mib: int = 0) -> float:
    # sglang's `--mem-fraction-static` default (0.5.9 server_args.py:1020-1062, 0.5.23 memory_hook.py:281-327):
    # 512 + max(chunked, 2048) x 1.5 + graph bs x 2 + tp / 8 x 1024, at least 10 GiB above 60 GiB, then the
    # speculative reserve
    reserved = 512 + max(chunked, 2048) * 1.5 + graph_bs * 2 + tp / 8 * 1024
    if mib > 60 * 1024:
        reserved = max(reserved, 10 * 1024)
    return round((mib - (reserved + speculative_mib)) / mib, 3)


@pytest.mark.parametrize("release, graph_bs, chunked", [
    ("0.5.19", 24, 2048),  # 0.5.19 memory_hook.py: under 35 GiB, chunked 2048, graphs to 24 at TP < 4
    ("0.5.20", 48, 4096),  # 0.5.20 memory_hook.py: 4096 and 48
])
def test_sglang_small_gpu_graph_defaults_per_release(release, graph_bs, chunked):
    plan = _plan("--gpu-total-memory", "24GiB", "--weights-per-rank", "10GiB", "--engine-version", release, "--",
                 "sglang", "serve", "--model-path", MODEL, "--tp", "1", "--context-length", "8192")
    assert plan["cuda_graph_max_bs"] == graph_bs
    assert plan["memory_fraction"] == _sglang_fraction(24 * 1024, chunked, graph_bs, 1)


@pytest.mark.parametrize("release, speculative_mib", [
    ("0.5.9", 2048),  # server_args.py:1050-1057: EAGLE (not STANDALONE, not NGRAM) + 2 GiB
    ("0.5.13", 4096),  # 0.5.10-0.5.13 server_args.py: + 4 GiB
    ("0.5.14", 0),  # 0.5.14 server_args.py:3278-3314: no speculative reserve
    ("0.5.23", 0),
])
def test_sglang_speculative_reserve_per_release(release, speculative_mib):
    plan = _plan("--gpu", "h100", "--weights-per-rank", "40GiB", "--engine-version", release, "--", "python", "-m",
                 "sglang.launch_server", "--model-path", MODEL, "--tp", "4", "--context-length", "8192",
                 "--speculative-algorithm", "EAGLE", "--speculative-num-draft-tokens", "2")
    assert plan["memory_fraction"] == _sglang_fraction(79.25 * 1024, 8192, 512, 4, speculative_mib)


@pytest.mark.parametrize("release, align, state_blocks", [
    # 0.33.0: FlashInfer's GDN prefill on Hopper aligns the block to 64 tokens and holds one checkpoint block more
    # (platforms/interface.py:1089-1094, qwen_gdn_linear_attn.py:748, kv_cache_interface.py:1135-1141)
    ("0.33.0", 64, 2 + 1),
    # 0.32.0: neither (interface.py:1084-1094 aligns to the backend's 16-token kernel block only; align mode holds
    # 2 + draft blocks)
    ("0.32.0", 16, 2),
])
def test_vllm_gdn_prefill_checkpoints_from_0_33(release, align, state_blocks):
    conv_dim = 2 * HK * DK + HV * DV
    page = conv_dim // 4 * (CONV - 1) * 2 + HV // 4 * DV * DK * 2  # bf16 conv and SSM (the model dtype), tp 4
    attn_token = 2 * max(1, KV_HEADS // 4) * HEAD_DIM * 2
    block = align * math.ceil(page / (align * attn_token))
    plan = _plan("--gpu", "h100", "--engine-version", release, "--", "vllm", "serve", MODEL, "-tp", "4",
                 "--max-model-len", "8192")
    assert plan["block_size"] == block
    # 12 full-attention layers in one group, 36 linear layers in three: ceil(8192 / block) + 3 x state blocks
    assert plan["blocks_per_request"] == math.ceil(8192 / block) + 3 * state_blocks


# -- real startup logs (--from-log) ------------------------------------------------------------------------------
# vllm-project/vllm#36734: vLLM 0.17.1's banner and its non-default args (Qwen3.5-122B-A10B-GPTQ-Int4, TP 2)
_BANNER = "(APIServer pid=140954) INFO 03-17 11:29:48 [utils.py:302] "
_VLLM_0_17_LOG = (
    _BANNER + "       \u2588     \u2588     \u2588\u2584   \u2584\u2588\n"
    + _BANNER + " \u2584\u2584 \u2584\u2588 \u2588     \u2588     \u2588 \u2580\u2584\u2580 \u2588"
    "  version 0.17.1\n"
    + _BANNER + "  \u2588\u2584\u2588\u2580 \u2588     \u2588     \u2588     \u2588"
    "  model   Qwen/Qwen3.5-122B-A10B-GPTQ-Int4\n"
    "(APIServer pid=140954) INFO 03-17 11:29:48 [utils.py:238] non-default args: {'model_tag': "
    "'Qwen/Qwen3.5-122B-A10B-GPTQ-Int4', 'enable_auto_tool_choice': True, 'tool_call_parser': 'qwen3_coder', "
    "'port': 8848, 'model': 'Qwen/Qwen3.5-122B-A10B-GPTQ-Int4', 'max_model_len': 131072, 'served_model_name': "
    "['Qwen3.5-27B-AWQ-4bit'], 'reasoning_parser': 'qwen3', 'tensor_parallel_size': 2, 'enable_prefix_caching': "
    "True, 'max_num_seqs': 16}\n")
# nlzy/vllm-gfx906#45: a compilation_config printed as JSON (null, true, false) inside the Python dict, and the API
# server's version line of a release before any profile
_VLLM_JSON_LOG = (
    "(APIServer pid=24796) INFO 10-02 11:31:04 [api_server.py:1896] vLLM API server version "
    "0.10.2.dev756+gfx906.update1.gcdfcd781c\n"
    "(APIServer pid=24796) INFO 10-02 11:31:04 [utils.py:328] non-default args: {'model_tag': "
    "'/mnt/models/vllm_models/Qwen3-Next-80B-A3B-Thinking-AWQ-8bit/', 'model': "
    "'/mnt/models/vllm_models/Qwen3-Next-80B-A3B-Thinking-AWQ-8bit/', 'max_model_len': 131072, "
    "'tensor_parallel_size': 4, 'gpu_memory_utilization': 0.95, 'max_num_batched_tokens': 7168, 'max_num_seqs': 80, "
    "'compilation_config': {\"level\":3,\"debug_dump_path\":\"\",\"cache_dir\":\"\",\"backend\":\"\",\"custom_ops\":[],"
    "\"splitting_ops\":null,\"use_inductor\":true,\"compile_sizes\":null,\"inductor_compile_config\":"
    "{\"enable_auto_functionalized_v2\":false},\"inductor_passes\":{},\"cudagraph_mode\":null,\"use_cudagraph\":true,"
    "\"cudagraph_num_of_warmups\":0,\"cudagraph_capture_sizes\":null,\"cudagraph_copy_inputs\":false,"
    "\"full_cuda_graph\":false,\"pass_config\":{},\"max_capture_size\":null,\"local_cache_dir\":null}}\n")


def test_a_vllm_log_is_read_as_the_release_its_banner_names():
    command = parse_log(_VLLM_0_17_LOG)
    assert (command.table.version, command.get("tp"), command.get("max_running"), command.get("max_model_len")) == (
        "0.17.1", 2, 16, 131072)
    assert command.notes == ["vLLM 0.17.1: the release the log names (its banner)"]
    assert parse_log(_VLLM_0_17_LOG, version="0.33.0").table.version == "0.33.0"  # --engine-version wins


def test_a_vllm_log_with_a_json_argument_and_a_release_before_every_profile():
    command = parse_log(_VLLM_JSON_LOG, version="0.33.0")
    assert (command.get("tp"), command.get("memory_fraction"), command.get("max_running")) == (4, 0.95, 80)
    assert command.get("compilation_config")["cudagraph_mode"] is None  # JSON null: vLLM's default mode
    assert command.get("cudagraph_capture_sizes") is None
    with pytest.raises(LaunchCommandError) as caught:
        parse_log(_VLLM_JSON_LOG)
    assert str(caught.value).startswith("the log is from vLLM 0.10.2.dev756+gfx906.update1.gcdfcd781c: no vLLM "
                                        "profile for version")
    assert str(caught.value).endswith("give --engine-version to read it as another release")


def test_an_unset_cudagraph_mode_in_a_log_keeps_full_decode_graphs():
    plan = _plan("--gpu", "h100", "--weights-per-rank", "20GiB", "--", "vllm", "serve", MODEL, "-tp", "4",
                 "--max-model-len", "8192", "--compilation-config", '{"cudagraph_mode": null}')
    assert plan["full_cuda_graphs"] is True


def test_an_sglang_log_wrapped_by_the_terminal_is_read_under_the_release_spellings():
    # A server_args line wrapped inside words (as sgl-project/sglang#10622 pasted one: `prefill_round_robin_b` /
    # `alance`), with sglang 0.5.13's field names: the strategy under its old name, attention DP as
    # --enable-dp-attention --dp-size (parallel_hook.py:39-61 reads it as attention DP)
    log = ("[2026-01-01 10:00:00] server_args=ServerArgs(model_path='Qwen/Qwen3-Next-80B-A3B-Instruct', tp_size=4, "
           "mem_fraction_static=0.8, enable_dp_attent\nion=True, dp_size=2, cuda_graph_max_bs=256, "
           "mamba_scheduler_strategy='no_buffer', prefill_round_robin_b\nalance=False)\n")
    old = parse_log(log, version="0.5.13")
    assert (old.get("tp"), old.get("attn_dp"), old.get("dp"), old.get("mamba_strategy"),
            old.get("max_cudagraph_capture_size")) == (4, 2, 1, "no_buffer", 256)
    new = parse_log(log)  # read as 0.5.23, which renamed the strategy flag: said, not read
    assert new.get("mamba_strategy") is None
    assert (
        "the log sets `mamba_scheduler_strategy`, which sglang 0.5.23 does not take (unrecognized arguments: "
        "--mamba-scheduler-strategy (renamed --mamba-radix-cache-strategy in 0.5.14; the old spelling removed in "
        "0.5.20)): not read; give --engine-version with the release that wrote the log") in new.notes


# -- a maximum length above the model's -----------------------------------------------------------------------------
def test_vllm_refuses_a_max_model_len_above_the_config():
    # vllm/config/model.py:2655-2685 (0.33.0): 1048576 > max_position_embeddings 262144 (the published config, no
    # rope scaling) raises unless VLLM_ALLOW_LONG_MAX_MODEL_LEN is set
    line = ["vllm", "serve", MODEL, "-tp", "4", "--max-model-len", str(4 * 262144)]
    run = run_cli("launch", "--gpu", "h100", "--", *line)
    assert run.exit_code == 1
    assert ("error[GDR512]: --max-model-len 1048576 is above the model's 262144 (max_position_embeddings): vLLM 0.33.0 "
            "stops at start-up") in run.stdout
    assert ("vLLM stops with `ValueError: User-specified max_model_len (1048576) is greater than the derived "
            "max_model_len (max_position_embeddings=262144 or model_max_length=None in model's "
            "config.json).") in run.stdout
    assert "verdict: vLLM 0.33.0 refuses to start" in run.stdout
    # GDR512 supersedes GDR502 (the KV cache of one such sequence): with weights that leave too little memory
    # for it, only GDR512 is shown (both were)
    heavy = run_cli("launch", "--gpu", "h100", "--weights-per-rank", "70GiB", "--", *line)
    assert "error[GDR512]" in heavy.stdout and "GDR502" not in heavy.stdout
    allowed = run_cli("launch", "--gpu", "h100", "--", "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1", *line)
    assert ("warning[GDR512]: --max-model-len 1048576 is above the model's 262144 (max_position_embeddings): vLLM "
            "0.33.0 serves it, as VLLM_ALLOW_LONG_MAX_MODEL_LEN is set") in allowed.stdout


def test_sglang_refuses_a_context_length_above_the_config():
    # srt/configs/model_config.py:1296-1316 (0.5.23)
    run = run_cli("launch", "--gpu", "h100", "--", "sglang", "serve", "--model-path", MODEL, "--tp", "4",
                  "--context-length", "300000")
    assert run.exit_code == 1
    assert ("sglang stops with `ValueError: Warning: User-specified context_length (300000) is greater than the "
            "derived context_length (262144).") in run.stdout


@pytest.mark.parametrize("rope, vllm_length, sglang_length", [
    (None, 4096, 4096),
    ({"rope_type": "linear", "factor": 4.0}, 4 * 4096, 4 * 4096),
    # vLLM leaves a YaRN max_position_embeddings unscaled (model.py:2607-2618); sglang scales it unless the RoPE
    # parameters name original_max_position_embeddings (hf_transformers/common.py:680-688)
    ({"rope_type": "yarn", "factor": 4.0}, 4096, 4 * 4096),
    ({"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 1024}, 4096, 4096),
    ({"rope_type": "llama3", "factor": 8.0}, 4096, 4096),
])
def test_the_derived_length_follows_each_engine(rope, vllm_length, sglang_length):
    config = {"max_position_embeddings": 4096, "rope_scaling": rope}
    assert derived_length(config, table_for("vllm")) == (vllm_length, "max_position_embeddings")
    assert derived_length(config, table_for("sglang")) == (sglang_length, "max_position_embeddings")


@pytest.mark.parametrize("length, factor, shown", [(4096, 1e308, "4096 and a RoPE factor 1e+308"),
                                                   (10 ** 400, 1.0, f"{str(10 ** 400)[:159]}… and a RoPE factor 1")])
def test_a_length_past_every_number_is_one_line(length, factor, shown):
    """A RoPE factor or a length key so large the product is no number (it was `internal error: OverflowError`)."""
    config = {"max_position_embeddings": length, "rope_scaling": {"rope_type": "linear", "factor": factor}}
    for engine in ("vllm", "sglang"):
        with pytest.raises(LaunchModelError) as caught:
            derived_length(config, table_for(engine))
        assert str(caught.value) == (f"the model's config gives `max_position_embeddings` {shown}: their product is "
                                     "not a length")


def test_vllm_refuses_a_max_model_len_below_one_in_its_words():
    # config/model.py:1070-1075 (0.33.0); -1 is its auto-fit value (argparse_utils.py:77-92)
    with pytest.raises(LaunchCommandError) as caught:
        parse_launch(split_command(f"vllm serve {MODEL} --max-model-len 0"))
    assert str(caught.value) == ("vLLM refuses --max-model-len 0: `ValueError: max_model_len must be a positive "
                                 "integer, got int: 0. Example: max_model_len=2048`")
    assert parse_launch(split_command(f"vllm serve {MODEL} --max-model-len -1")).get("max_model_len") == -1


@pytest.mark.parametrize("config, vllm, sglang", [
    # vLLM: the smallest length key, model_max_length over all (model_arch_config_convertor.py:374-402, 0.33.0);
    # sglang: the first of max_sequence_length, seq_length, max_seq_len, model_max_length, max_position_embeddings
    # (hf_transformers/common.py:668-694, 0.5.23)
    ({"max_position_embeddings": 8192, "seq_length": 4096}, (4096, "seq_length"), (4096, "seq_length")),
    ({"max_position_embeddings": 8192, "max_seq_len": 16384}, (8192, "max_position_embeddings"),
     (16384, "max_seq_len")),
    ({"max_position_embeddings": 8192, "seq_length": 4096, "model_max_length": 16384},
     (16384, "model_max_length"), (4096, "seq_length")),
    ({"model_max_length": 1048576}, (1048576, "model_max_length"), (1048576, "model_max_length")),
])
def test_the_length_key_each_engine_reads(config, vllm, sglang):
    assert derived_length(config, table_for("vllm")) == vllm
    assert derived_length(config, table_for("sglang")) == sglang


@pytest.mark.parametrize("text", [
    "non-default args: {'model': 'm', 'tensor_parallel_size': " + "1+" * 100_000 + "1}",
    "server_args=ServerArgs(model_path='m', tp_size=" + "1+" * 100_000 + "1)",
])
def test_a_deep_expression_in_a_startup_line_is_no_traceback(text):
    # ast.literal_eval overflows the parser's recursion on a long `1+1+...`: passed over (sglang) or one line (vLLM)
    try:
        command = parse_log(text)
    except LaunchCommandError as error:
        assert str(error) == "the log's `non-default args:` line is cut or not a Python dict"
    else:
        assert command.get("model") == "m" and command.get("tp") is None
