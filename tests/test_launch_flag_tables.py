"""The launch-flag tables per engine release, against what each release's own argument definitions hold.

tests/data/launch_flags/<engine>-<release>.json is what scripts/verify_launch_flags.py read from the released wheel
(every option string the parser defines, of those the table names): sglang 0.5.9-0.5.23 and vLLM 0.17.0, 0.18.0,
0.20.0, 0.22.0, 0.32.0 and 0.33.0 (`-sc` is defined from 0.20.0). The
spellings checked below were read in those wheels: `--mamba-scheduler-strategy` in `server_args.py` up to 0.5.19
(from 0.5.14 a `DeprecatedAliasStoreAction` with `new_flag="--mamba-radix-cache-strategy"`), `--cuda-graph-max-bs`
likewise for `--cuda-graph-max-bs-decode`, `--attn-dp-size` from 0.5.22 (`arg_groups/fields/parallel.py`); vLLM's
`--mamba-cache-mode` choices and its no-effect deprecation, and the state dtype choices, are the profiles' flags
(scripts/verify_engine_profiles.py, tests/data/engine_facts/).
"""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType

import pytest

from gdr_check.deployment.launch_command import parse_launch
from gdr_check.engines.launch_flags import LaunchCommandError, table_for, table_for_profile
from gdr_check.engines.profiles import profile_for
from gdr_check.models.adapters import ADAPTERS
from repo_scripts import script

ROOT = Path(__file__).resolve().parents[1]
FACTS = sorted((ROOT / "tests" / "data" / "launch_flags").glob("*.json"))
MODEL = "Qwen/Qwen3-Next-80B-A3B-Instruct"


def _verifier() -> ModuleType:
    return script("verify_launch_flags")


def test_every_sglang_release_and_vllm_0_33_was_read():
    vllm = {"vllm-0.17.0", "vllm-0.18.0", "vllm-0.20.0", "vllm-0.22.0", "vllm-0.32.0", "vllm-0.33.0"}
    assert {path.stem for path in FACTS} == {f"sglang-0.5.{n}" for n in range(9, 24)} | vllm


@pytest.mark.parametrize("path", FACTS, ids=lambda path: path.stem)
def test_each_releases_table_agrees_with_its_argument_definitions(path: Path):
    found = json.loads(path.read_text())
    profile = profile_for(f"{found['engine']}@{found['version']}")
    table = table_for_profile(profile, found["version"])
    verifier = _verifier()
    assert verifier.compare(found, table) == []
    # sglang's state-pool facts in the profile (auto's extra_buffer architectures, the no_buffer refusal, the cap
    # warning), against what the release holds, for the architectures gdr-check describes
    described = {name for adapter in ADAPTERS for name in adapter.architectures}
    assert verifier.compare_pool(found.get("pool"), profile, described) == []
    # the start-up defaults the table carries for the release (LaunchDefaults), against its source text
    assert verifier.compare_defaults(found.get("defaults"), table) == []


def test_the_pool_facts_were_read_where_sglang_changed_them():
    pools = {path.stem: json.loads(path.read_text())["pool"] for path in FACTS if path.stem.startswith("sglang")}
    assert pools["sglang-0.5.13"] == {"extra_buffer_architectures": [], "no_buffer_refuses_overlap": False,
                                      "pool_cap_warns": False}
    assert "Qwen3NextForCausalLM" in pools["sglang-0.5.14"]["extra_buffer_architectures"]
    assert "KimiLinearForCausalLM" not in pools["sglang-0.5.15"]["extra_buffer_architectures"]
    assert "KimiLinearForCausalLM" in pools["sglang-0.5.16"]["extra_buffer_architectures"]
    assert (pools["sglang-0.5.16"]["pool_cap_warns"], pools["sglang-0.5.17"]["pool_cap_warns"]) == (False, True)
    assert pools["sglang-0.5.14"]["no_buffer_refuses_overlap"] and pools["sglang-0.5.23"]["no_buffer_refuses_overlap"]
    verifier = _verifier()
    # 0.5.16's facts against 0.5.17's profile: the profile has what the release lacks
    wrong = verifier.compare_pool(pools["sglang-0.5.16"], profile_for("sglang@0.5.17"),
                                  {"KimiK3ForConditionalGeneration"})
    assert wrong == ["sglang 0.5.17: extra_buffer architectures ['InternS2PreviewForConditionalGeneration', "
                     "'KimiK3ForConditionalGeneration', 'KimiLinearForCausalLM', 'Qwen3NextForCausalLM', "
                     "'Qwen3_5ForConditionalGeneration', 'Qwen3_5MoeForConditionalGeneration'] in the profile, [] in "
                     "the release", "sglang 0.5.17: pool_cap_warns is True in the profile, False in the release"]


def test_the_comparison_fails_on_a_table_that_reads_a_spelling_the_release_lacks():
    found = json.loads((ROOT / "tests" / "data" / "launch_flags" / "sglang-0.5.21.json").read_text())
    newest = table_for("sglang")  # 0.5.23 reads --attn-dp-size, which 0.5.21 does not define
    problems = _verifier().compare(found, newest)
    assert "sglang 0.5.21: the table reads --attn-dp-size (attn_dp), which the release does not define" in problems
    assert "sglang 0.5.21: the table rejects --mamba-scheduler-strategy, which the release defines " \
        "(sglang/srt/server_args.py)" not in problems  # removed in 0.5.20: both agree


def read(release: str | None, words: str):
    return parse_launch(words.split(), version=release)


def refused(release: str | None, words: str) -> str:
    with pytest.raises(LaunchCommandError) as caught:
        read(release, words)
    return str(caught.value)


def test_the_old_strategy_spelling_is_mapped_with_a_note_while_the_release_keeps_it():
    command = read("0.5.16", f"sglang serve --model-path {MODEL} --mamba-scheduler-strategy extra_buffer "
                             "--cuda-graph-max-bs 64")
    assert command.settings["mamba_strategy"] == "extra_buffer"
    assert command.settings["max_cudagraph_capture_size"] == 64
    assert command.notes == [
        "--mamba-scheduler-strategy is a deprecated alias of --mamba-radix-cache-strategy in sglang 0.5.16",
        "--cuda-graph-max-bs is a deprecated alias of --cuda-graph-max-bs-decode in sglang 0.5.16"]
    assert command.engine_spec == "sglang@0.5.16"


def test_spellings_a_release_does_not_define_are_refused_in_argparses_words():
    assert refused("0.5.20", f"sglang serve --model-path {MODEL} --mamba-scheduler-strategy extra_buffer") == (
        "sglang 0.5.20 rejects it: unrecognized arguments: --mamba-scheduler-strategy (renamed "
        "--mamba-radix-cache-strategy in 0.5.14; the old spelling removed in 0.5.20)")
    assert refused("0.5.13", f"sglang serve --model-path {MODEL} --mamba-radix-cache-strategy auto") == (
        "sglang 0.5.13 rejects it: unrecognized arguments: --mamba-radix-cache-strategy (sglang 0.5.13 names it "
        "--mamba-scheduler-strategy)")
    assert refused("0.5.21", f"sglang serve --model-path {MODEL} --attn-dp-size 2") == (
        "sglang 0.5.21 rejects it: unrecognized arguments: --attn-dp-size (sglang 0.5.21: --enable-dp-attention "
        "--dp-size N)")
    assert refused("0.5.9", f"sglang serve --model-path {MODEL} --linear-attn-backend triton") == (
        "sglang 0.5.9 rejects it: unrecognized arguments: --linear-attn-backend (sglang 0.5.9 has no "
        "linear-attention backend flags)")
    # --pp-size, --pp-max-micro-batch-size and --pp-async-batch-depth share the prefix (fields/parallel.py:59-72)
    assert refused(None, f"sglang serve --model-path {MODEL} --pp 2") == (
        "sglang 0.5.23 rejects it: ambiguous option: --pp could match --pp-size, --pp-max-micro-batch-size, "
        "--pp-async-batch-depth")


def test_choices_follow_the_release():
    assert refused("0.5.11", f"sglang serve --model-path {MODEL} --mamba-scheduler-strategy extra_buffer_lazy") == (
        "argument --mamba-scheduler-strategy: invalid choice: 'extra_buffer_lazy' (choose from 'auto', "
        "'no_buffer', 'extra_buffer')")
    assert read("0.5.13", f"sglang serve --model-path {MODEL} --mamba-scheduler-strategy extra_buffer_lazy"
                ).settings["mamba_strategy"] == "extra_buffer_lazy"
    assert refused("0.21", f"vllm serve {MODEL} --mamba-ssm-cache-dtype bfloat16") == (
        "argument --mamba-ssm-cache-dtype: invalid choice: 'bfloat16' (choose from 'auto', 'float32', 'float16')")
    assert read("0.22", f"vllm serve {MODEL} --mamba-ssm-cache-dtype bfloat16").settings["state_dtype"] == "bfloat16"
    assert refused("0.32", f"vllm serve {MODEL} --mamba-cache-mode all") == (
        "argument --mamba-cache-mode: invalid choice: 'all' (choose from 'align', 'none')")
    assert read("0.29", f"vllm serve {MODEL} --mamba-cache-mode all").notes == []


def test_the_short_speculative_config_flag_is_refused_before_vllm_0_20():
    assert refused("0.18.0", f"vllm serve {MODEL} -sc {{}}") == (
        "vLLM 0.18.0 rejects it: unrecognized arguments: -sc (vLLM 0.18.0: --speculative-config)")
    assert read("0.20.0", f"vllm serve {MODEL} -sc {{}}").settings["speculative_config"] == {}


def test_a_flag_the_release_accepts_and_ignores_gets_a_note():
    assert read(None, f"vllm serve {MODEL} --mamba-cache-mode align").notes == [
        "--mamba-cache-mode is deprecated and has no effect in vLLM 0.33.0: --enable-prefix-caching decides"]


def test_attention_dp_before_0_5_22_is_the_switch_and_the_dp_size():
    command = read("0.5.21", f"sglang serve --model-path {MODEL} --tp 4 --enable-dp-attention --dp-size 2")
    assert (command.settings["attn_dp"], command.settings["dp"]) == (2, 1)
    assert command.notes == ["--enable-dp-attention --dp-size 2 is read as 2 attention data-parallel groups inside "
                             "the TP group (`--attn-dp-size 2` from sglang 0.5.22)"]


def test_an_unknown_release_is_one_line():
    assert refused("0.4.0", f"sglang serve --model-path {MODEL}").startswith(
        "no sglang profile for version '0.4.0' (engine 'sglang@0.4.0'); known versions: 0.5.9, ")


def test_launch_reads_the_command_as_the_release_given(tmp_path):
    from gdr_check.cli.main import main

    def run(*args: str) -> tuple[int, str]:
        import contextlib
        import io
        out = io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            code = main(["launch", "--weights-per-rank", "40GiB", *args])
        return code, out.getvalue()

    command = ["--", "sglang", "serve", "--model-path", MODEL, "--tp", "4", "--mamba-scheduler-strategy", "auto"]
    code, out = run("--engine-version", "0.5.16", *command)
    assert code == 0 and out.startswith(f"sglang 0.5.16: sglang serve --model-path {MODEL}\n"), out
    assert ("  note: --mamba-scheduler-strategy is a deprecated alias of --mamba-radix-cache-strategy in sglang "
            "0.5.16\n") in out
    code, out = run(*command)  # the newest release: the old spelling is gone
    assert code == 2 and "sglang 0.5.23 rejects it: unrecognized arguments: --mamba-scheduler-strategy" in out


def test_the_launch_defaults_were_read_where_the_releases_changed_them():
    defaults = {path.stem: json.loads(path.read_text())["defaults"] for path in FACTS}
    # sglang: GPUs under 35 GiB get 4096-token chunks and decode graphs to 48 / 160 from 0.5.20 (24 / 80 before)
    assert defaults["sglang-0.5.19"]["graph_tiers"][1] == [35, 2048, 24, 80]
    assert defaults["sglang-0.5.20"]["graph_tiers"][1] == [35, 4096, 48, 160]
    # the speculative reserve: 2 GiB (0.5.9), 4 GiB (0.5.10-0.5.13), none from 0.5.14; STANDALONE 6 GiB
    assert defaults["sglang-0.5.9"]["speculative_reserve_mib"] == [["STANDALONE", 6144], ["*", 2048]]
    assert defaults["sglang-0.5.13"]["speculative_reserve_mib"] == [["STANDALONE", 6144], ["*", 4096]]
    assert defaults["sglang-0.5.14"]["speculative_reserve_mib"] == []
    # vLLM: nothing checks the Mamba blocks at capture in 0.17, 0.18 caps the capture sizes, 0.20 refuses; the
    # utilization default 0.9 until 0.19, 0.92 after; the FlashInfer GDN checkpoints only in 0.33
    assert [defaults[f"vllm-{v}"]["mamba_blocks_at_capture"] for v in ("0.17.0", "0.18.0", "0.20.0", "0.33.0")] == [
        "assert", "cap", "refuse", "refuse"]
    assert [defaults[f"vllm-{v}"]["memory_fraction"] for v in ("0.17.0", "0.18.0", "0.20.0", "0.33.0")] == [
        0.9, 0.9, 0.92, 0.92]
    assert [defaults[f"vllm-{v}"]["gdn_prefill_checkpoints"] for v in ("0.32.0", "0.33.0")] == [False, True]


def test_the_comparison_fails_on_a_table_whose_defaults_the_release_lacks():
    found = json.loads((ROOT / "tests" / "data" / "launch_flags" / "vllm-0.18.0.json").read_text())["defaults"]
    verifier = _verifier()
    assert verifier.compare_defaults(found, table_for("vllm", "0.20.0")) == [
        "vllm 0.20.0: memory_fraction is 0.92 in the table, 0.9 in the release",
        "vllm 0.20.0: mamba_blocks_at_capture is 'refuse' in the table, 'cap' in the release"]
