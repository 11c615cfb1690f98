"""`explain` on what users paste: every framing (engine log prefixes, tracebacks, multi-error logs, ANSI colours,
syslog escapes) and the numbers it reads from each error, with and without the deployment's context."""

from __future__ import annotations

import dataclasses
import json

import pytest

from gdr_check.checks import RULES
from gdr_check.checks.explanations import Context, find_all
from gdr_check.cli.main import main
from gdr_check.models import builtin
from gdr_check.pipeline import model_check as models_check
from pasted_corpus import CASES, PastedCase
from pasted_corpus import QWEN3_NEXT as QWEN3_NEXT_CORPUS


def _filled(code: str) -> str:
    """A wrapper message with numbers in every field (as the wrapper prints them)."""
    rule = RULES[code]
    return rule.message.format(**{name: str(3 + i) for i, name in enumerate(rule.fields())})


FRAMINGS = {
    "bare": "{m}",
    "exception": "ValueError: {m}",
    "vllm worker": "(Worker_TP1 pid=123) ERROR 11-30 10:00:00 [file.py:42] ValueError: {m}",
    "vllm compose": "svc  | (Worker_TP0_EP0 pid=331) ERROR 09-06 00:38:50 multiproc_executor.py:944] ValueError: {m}",
    "sglang": "[2026-11-30 10:00:00 TP0] ValueError: {m}",
    "torchrun": "[rank4]: ValueError: {m}",
    "traceback": ('Traceback (most recent call last):\n  File "x.py", line 3, in <module>\n    run()\n'
                  "ValueError: {m}\n"),
    "ansi": "\x1b[1;36m(VllmWorker TP1 pid=413)\x1b[0;0m ERROR 09-01 04:36:17 [executor.py:559] ValueError: {m}\r",
    "syslog": "#033[1;36m(VllmWorker TP1 pid=413)#033[0;0m ERROR 09-01 04:36:17 [executor.py:559] ValueError: {m}#015",
}

WRAPPER_CODES = sorted(code for code, rule in RULES.items() if rule.wrapper)


@pytest.mark.parametrize("framing", FRAMINGS)
@pytest.mark.parametrize("code", WRAPPER_CODES)
def test_every_wrapper_message_in_every_framing_maps_to_its_code(code, framing):
    message = _filled(code)
    found = find_all(FRAMINGS[framing].format(m=message))
    assert [f.rule.message.format(**f.values) for f in found] == [message]
    # Several templates can read the same text only when they print it the same (GDR218/GDR225 share it).
    assert found[0].rule.code == code or found[0].rule.message.format(**found[0].values) == message


# Real texts users posted (the framing and the message exactly as in the thread).
REAL = [
    # https://github.com/vllm-project/vllm/issues/55517 (a Qwen3-Next style model at --tp 3)
    ("qwen3.8-flash-next  | (Worker_TP0_EP0 pid=331) ERROR 09-06 00:38:50 multiproc_executor.py:944]     assert "
     "numerator % denominator == 0, \"{} is not divisible by {}\".format(\n"
     "qwen3.8-flash-next  | (Worker_TP0_EP0 pid=331) ERROR 09-06 00:38:50 multiproc_executor.py:944]            "
     "^^^^^^^^^^^^^^^^^^^^^^^^^^^^\n"
     "qwen3.8-flash-next  | (Worker_TP0_EP0 pid=331) ERROR 09-06 00:38:50 multiproc_executor.py:944] "
     "AssertionError: 16 is not divisible by 3\n"
     "qwen3.8-flash-next  | (EngineCore pid=261) INFO 09-06 00:38:50 multiproc_executor.py:472] [shutdown] "
     "Executor: waiting for worker exit count=3\n",
     [("GDR401", {"numerator": "16", "denominator": "3"})]),
    # https://github.com/gpustack/gpustack/issues/4769 (sglang, --tp 6)
    ('    assert numerator % denominator == 0, "{} is not divisible by {}".format(\n'
     "           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^\nAssertionError: 16 is not divisible by 6\n"
     "[2026-03-04 09:11:08] Received sigquit from a child process. It usually means the child failed.\n",
     [("GDR401", {"numerator": "16", "denominator": "6"})]),
    # https://github.com/microsoft/LMOps/issues/292 (torchrun's rank prefix)
    ("[rank4]:     assert numerator % denominator == 0, '{} is not divisible by {}'.format(\n"
     "[rank4]: AssertionError: 2 is not divisible by 4\n",
     [("GDR401", {"numerator": "2", "denominator": "4"})]),
]


@pytest.mark.parametrize("text,expected", REAL)
def test_real_pasted_logs(text, expected):
    assert [(f.rule.code, f.values) for f in find_all(text)] == expected


@pytest.mark.parametrize("case", CASES, ids=[case.url.split("github.com/")[1] for case in CASES])
def test_real_pasted_corpus(case: PastedCase):
    context = Context(tp=case.tp, batch=case.batch, widths=case.widths)
    found = find_all(case.text, context)
    assert [(f.rule.code, f.values) for f in found] == case.expected
    for sentence in case.reasons:
        assert sentence in found[0].reasons, found[0].reasons


def test_the_corpus_covers_every_pasted_rule():
    """Each GDR4xx rule has at least one text a user really posted (or, for GDR406/GDR409, a real negative;
    GDR410, GDR415 and GDR416 are quoted from the engines' source: no posted log of them was found)."""
    covered = {code for case in CASES + [PastedCase("", text, expected) for text, expected in REAL]
               for code, _ in case.expected}
    pasted = {code for code, rule in RULES.items() if rule.scope == "pasted"}
    assert pasted - covered == {"GDR406", "GDR409", "GDR410", "GDR415", "GDR416"}  # no posted log of these


def test_trailing_punctuation_and_markdown_quotes_are_ignored():
    for text in ("Triton Error [CUDA]: invalid argument.", "`Triton Error [CUDA]: invalid argument`",
                 "'RuntimeError: Triton Error [CUDA]: invalid argument'"):
        assert [f.rule.code for f in find_all(text)] == ["GDR402"], text
    [found] = find_all("ValueError: Total number of attention heads (16) must be divisible by tensor parallel size (3)")
    assert found.values == {"heads": "16", "tp": "3"}


def test_a_kda_state_dtype_that_is_no_state_dtype_is_not_advised_as_one():
    """vLLM refuses any KDA state dtype but auto, float32 and bfloat16; for float64 "bfloat16 halves the state as
    float64 would have" was wrong, and `check --state-dtype float64` is refused as an unknown dtype."""
    [found] = find_all("ValueError: KDA recurrent state supports only auto, float32, and bfloat16; got float64")
    assert found.reasons == ["`--mamba-ssm-cache-dtype float64` is the cause: vLLM keeps a KDA state in float32 "
                             "(auto) or bfloat16 only"]
    [found] = find_all("ValueError: KDA recurrent state supports only auto, float32, and bfloat16; got float16")
    assert found.reasons[1] == ("`gdr-check check MODEL --engine vllm --state-dtype float16` reports this before "
                                "launch (GDR138)")


def test_capture_sizes_capped_to_no_block_advise_memory_not_a_sequence_count():
    text = ("Capping cudagraph capture sizes from max 512 to {capped} to fit Mamba cache blocks ({blocks} blocks "
            "available). This limits the maximum batch size that can use CUDA graphs. To increase this limit, reduce "
            "max_num_seqs or increase available GPU memory.")
    [found] = find_all(text.format(capped=0, blocks=0))
    assert found.reasons[1] == ("no `--max-num-seqs` helps with no block at all: raise `--gpu-memory-utilization` or "
                                "lower `--max-model-len`; vLLM 0.20.0 and later refuse to start instead (GDR412)")
    [found] = find_all(text.format(capped=400, blocks=411))
    assert found.reasons[1].startswith("`--max-num-seqs 411` keeps every decode batch captured")

def test_the_kda_heads_message_names_the_tp_sizes_that_divide():
    [found] = find_all("[2026-11-02 09:14:03 TP1] ValueError: KDA num_heads (32) must be divisible by shard "
                       "tp_size (3)")
    assert (found.rule.code, found.values) == ("GDR410", {"heads": "32", "tp": "3"})
    assert found.reasons[0] == "32 = 3 × 10 + 2: tp=3 leaves a remainder; TP sizes that divide 32: 1, 2, 4, 8, 16, 32"
    assert find_all('f"KDA num_heads ({num_heads}) must be divisible by shard tp_size ({tp_size})"') == []


def test_the_divisibility_messages_name_every_tp_size_that_divides_in_one_wording():
    # GDR401, GDR408 and GDR410 rest on one fact, `count % tp == 0`: every divisor passes it, not only the powers of
    # two (24 heads split over 3, 6 or 12 ranks); past 64 the list stops at 64 and says so.
    every = "TP sizes that divide 24: 1, 2, 3, 4, 6, 8, 12, 24"
    [divide] = find_all("AssertionError: 24 is not divisible by 5")
    assert divide.reasons[0] == f"24 = 5 × 4 + 4: tp=5 leaves a remainder; {every} (the nearest: 4)"
    [heads] = find_all("ValueError: Total number of attention heads (24) must be divisible by tensor parallel "
                       "size (5).")
    assert heads.reasons[0] == f"24 = 5 × 4 + 4: tp=5 leaves a remainder; {every}"
    [kda] = find_all("ValueError: KDA num_heads (24) must be divisible by shard tp_size (5)")
    assert kda.reasons[0] == f"24 = 5 × 4 + 4: tp=5 leaves a remainder; {every}"
    [width] = find_all("AssertionError: 12288 is not divisible by 5")
    assert width.reasons[0] == ("12288 = 5 × 2457 + 3: tp=5 leaves a remainder; TP sizes up to 64 that divide 12288: "
                                "1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64 (the nearest: 4)")


def test_a_log_assert_names_the_dtype_and_never_matches_its_source_line():
    [found] = find_all("[2026-03-17 10:00:00 TP0] AssertionError: A_log must be float32, got torch.bfloat16")
    assert (found.rule.code, found.values) == ("GDR409", {"dtype": "torch.bfloat16"})
    assert found.reasons[0] == "`A_log` is bfloat16 (16-bit): the kernel needs float32"
    assert find_all('f"A_log must be float32, got {A_log.dtype}"') == []


def test_attention_heads_with_the_model_names_the_sizes_that_work_for_every_head_count():
    [found] = find_all("Total number of attention heads (16) must be divisible by tensor parallel size (3).",
                       Context(tp=3, widths=QWEN3_NEXT_CORPUS))
    assert found.reasons == [
        "16 = 3 × 5 + 1: tp=3 leaves a remainder; TP sizes that divide 16: 1, 2, 4, 8, 16",
        "the linear-attention heads (num_k_heads (H) = 16, num_v_heads (HV) = 32) must divide too: TP sizes that "
        "work for the whole model: 1, 2, 4, 8, 16",
        "16 is the model's num_k_heads (H) (unsharded, 16)",
        "16 is the model's num_attention_heads (full attention) (unsharded, 16)"]
    from gdr_check.engines.profiles import profile_for

    [sglang] = find_all("Total number of attention heads (16) must be divisible by tensor parallel size (3).",
                        Context(profile=profile_for("sglang")))
    assert sglang.reasons[-1] == (
        "this is vLLM's start-up check; sglang 0.5.23 does not run it (sglang fails in `divide()` unless DP "
        "attention makes the attention TP size a divisor of 16 instead): the log is not from the engine you named")
    [vllm] = find_all("Total number of attention heads (16) must be divisible by tensor parallel size (3).",
                      Context(profile=profile_for("vllm@0.28")))
    assert not any("not from the engine" in reason for reason in vllm.reasons)


def test_a_multi_error_log_gives_every_error_in_order_and_counts_repeats():
    log = "\n".join([
        "[2026-11-30 10:00:00 TP0] AssertionError: 16 is not divisible by 3",
        "[2026-11-30 10:00:00 TP1] AssertionError: 16 is not divisible by 3",
        "\x1b[31mRuntimeError: Triton Error [CUDA]: invalid argument\x1b[0m",
        "(Worker_TP1 pid=7) ERROR 11-30 10:00:01 [gdn.py:9] RuntimeError: shape '[4, -1, 8192]' is invalid for "
        "input of size 16384",
        "torch.AcceleratorError: CUDA error: an illegal memory access was encountered",
        "AssertionError: Not enough space for mamba ping pong idx, try to increase --mamba-full-memory-ratio.",
        "AssertionError: Attempted to load weight (torch.Size([32])) into parameter (torch.Size([16]))",
    ])
    found = find_all(log)
    assert [(f.rule.code, f.line, f.count) for f in found] == [
        ("GDR401", 1, 2), ("GDR402", 3, 1), ("GDR404", 4, 1), ("GDR403", 5, 1), ("GDR405", 6, 1), ("GDR407", 7, 1)]


def test_the_gates_factor_without_a_model():
    text = "ValueError: `a`/`b` must have shape [B, HV] with HV=16 (got a.shape=(4, 32), b.shape=(4, 32))."
    [found] = find_all(text)
    assert found.reasons[0].startswith("32 = 2 × 16: the gates are unsharded while the pool is sharded for tp=2")
    [sharded] = find_all("`a`/`b` must have shape [B, HV] with HV=32 (got a.shape=(4, 16), b.shape=(4, 16)).")
    assert sharded.reasons[0].startswith("32 = 2 × 16: the gates are this rank's shard for tp=2")


QWEN3_NEXT = {"num_k_heads (H)": 16, "num_v_heads (HV)": 32, "mixed_qkv width (2*H*K + HV*V)": 8192,
              "out/v width (HV*V)": 4096, "in_proj_qkvz width (2*H*K + 2*HV*V)": 12288, "in_proj_ba width (2*HV)": 64}


def test_divisibility_names_the_tp_sizes_and_the_models_head_count():
    [found] = find_all("AssertionError: 16 is not divisible by 3", Context(tp=3, widths=QWEN3_NEXT))
    assert found.reasons == [
        "16 = 3 × 5 + 1: tp=3 leaves a remainder; TP sizes that divide 16: 1, 2, 4, 8, 16 (the nearest: 2)",
        "16 is the model's num_k_heads (H) (unsharded, 16)"]


def test_grid_limit_with_model_tp_and_batch():
    [found] = find_all("RuntimeError: Triton Error [CUDA]: invalid argument",
                       Context(tp=2, batch=5000, widths=QWEN3_NEXT))
    assert found.reasons == [
        "HV_l = 16 value heads per rank: the largest batch that launches is 65535 // 16 = 4095",
        "--batch 5000: the grid needs B*HV_l = 5000*16 = 80000, which crosses the limit: this is the cause"]


def test_reshape_numbers_name_the_per_rank_width():
    [found] = find_all("RuntimeError: shape '[4, -1, 8192]' is invalid for input of size 16384",
                       Context(tp=2, widths=QWEN3_NEXT))
    assert found.reasons == [
        "16384 elements are 0.5 × 32768 (the product of the known sizes): not a whole number",
        "16384 = 4 × 4096: the input is per-rank for tp=2 (width 4096) while the shape uses the full width 8192",
        "8192 is the model's mixed_qkv width (2*H*K + HV*V) (unsharded, 8192)"]


def test_pool_numbers_and_weight_shards():
    [pool] = find_all(
        "AssertionError: Not enough space for mamba cache, try to increase --mamba-full-memory-ratio or "
        "--max-mamba-cache-size. mid=None, self.mamba_pool.size=64, self.mamba_allocator.available_size()=2, "
        "len(reqs)=8")
    assert pool.reasons == ["8 requests need slots and 2 of 64 are free: 6 short; 62 slots are held by running "
                            "requests"]
    [weight] = find_all("AssertionError: Attempted to load weight (torch.Size([32])) into parameter "
                        "(torch.Size([16]))", Context(widths=QWEN3_NEXT))
    assert weight.reasons[0] == ("dim 0: 32 = 2 × 16: the checkpoint tensor is unsharded while the parameter is "
                                 "this rank's shard for tp=2: the loader did not split it")
    assert "32 is the model's num_v_heads (HV) (unsharded, 32)" in weight.reasons


def test_source_lines_are_not_errors():
    # The assert's own source line holds the template with `{}` in its fields: not numbers, no match.
    assert find_all('assert numerator % denominator == 0, "{} is not divisible by {}".format(') == []


def test_cli_explains_every_error_of_a_log_with_the_model(capsys):
    log = ("[2026-11-30 10:00:00 TP0] AssertionError: 16 is not divisible by 3\n"
           "RuntimeError: Triton Error [CUDA]: invalid argument\n")
    assert main(["explain", log, "--model", "Qwen/Qwen3-Next-80B-A3B-Instruct", "--tp", "2", "--batch", "5000"]) == 0
    out = capsys.readouterr().out
    assert out.index("GDR401 tp-does-not-divide") < out.index("GDR402 triton-launch-invalid-argument")
    assert "matched (line 1): 16 is not divisible by 3" in out
    assert "  - --batch 5000: the grid needs B*HV_l = 5000*16 = 80000, which crosses the limit" in out


def test_cli_json_lists_several_errors(capsys):
    log = "AssertionError: 16 is not divisible by 3\nCUDA error: an illegal memory access was encountered\n"
    assert main(["explain", log, "--output-format", "json"]) == 0
    documents = json.loads(capsys.readouterr().out)
    assert [(d["code"], d["line"]) for d in documents] == [("GDR401", 1), ("GDR403", 2)]


def test_cli_unknown_model_is_one_line_exit_2(capsys):
    assert main(["explain", "GDR401", "--model", "no/such-model"]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") <= 2 and "no/such-model" in captured.err


def test_engine_profile_changes_the_reasoning():
    from gdr_check.engines.profiles import profile_for

    text = "RuntimeError: Triton Error [CUDA]: invalid argument"
    [vllm] = find_all(text, Context(tp=2, batch=5000, profile=profile_for("vllm"), widths=QWEN3_NEXT))
    # vLLM 0.28 and later split the grid into (NV, HV, B): B*HV is no limit, B and HV still are (gridDim.z, y)
    assert vllm.reasons == [
        "vLLM 0.33 splits the GDN decode grid into (NV, HV, B) when B*HV > 65535: the limit is B <= 65535 and HV_l "
        "<= 65535, not B*HV_l",
        "unless the decode batch exceeds that, look for another bad launch argument (shared memory, a kernel of "
        "another layer)"]
    [huge] = find_all(text, Context(tp=2, batch=70000, profile=profile_for("vllm"), widths=QWEN3_NEXT))
    assert huge.reasons[1] == "--batch 70000 crosses B <= 65535: this is the cause"
    [unsplit] = find_all(text, Context(tp=2, batch=5000, profile=profile_for("vllm@0.27.1"), widths=QWEN3_NEXT))
    assert unsplit.reasons[0].startswith("HV_l = 16 value heads per rank")
    [sglang] = find_all(text, Context(tp=2, batch=5000, profile=profile_for("sglang"), widths=QWEN3_NEXT))
    assert sglang.reasons[0].startswith("HV_l = 16 value heads per rank")
    [pool] = find_all("Not enough space for mamba ping pong idx, try to increase --mamba-full-memory-ratio.",
                      Context(profile=profile_for("vllm")))
    assert pool.reasons and "has no --mamba-full-memory-ratio" in pool.reasons[0]


def test_cli_unknown_engine_is_one_line_exit_2(capsys):
    assert main(["explain", "GDR401", "--engine", "tgi"]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and "tgi" in captured.err and "Traceback" not in captured.err


def test_cli_context_from_pyproject(tmp_path, monkeypatch, capsys):
    (tmp_path / "pyproject.toml").write_text('[tool.gdr-check]\nmodel = "Qwen/Qwen3-Next-80B-A3B-Instruct"\n'
                                             'tp = 2\nbatch = 5000\nengine = "sglang"\n')
    monkeypatch.chdir(tmp_path)
    assert main(["explain", "RuntimeError: Triton Error [CUDA]: invalid argument"]) == 0
    out = capsys.readouterr().out
    assert "  - --batch 5000: the grid needs B*HV_l = 5000*16 = 80000, which crosses the limit: this is the cause" \
        in out


def test_cli_bad_model_in_pyproject_is_one_line(tmp_path, monkeypatch, capsys):
    (tmp_path / "pyproject.toml").write_text('[tool.gdr-check]\nmodel = 3\n')
    monkeypatch.chdir(tmp_path)
    assert main(["explain", "RuntimeError: Triton Error [CUDA]: invalid argument"]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("error:") == 1 and "model" in captured.err


def test_an_unknown_model_in_pyproject_names_the_file_and_key(tmp_path, monkeypatch, capsys):
    """Not `--model`, which nobody passed: explain says where the model came from. Only explain reads the key, so a
    check, which never uses it, does not fail on a repo that is cached on another machine (review)."""
    (tmp_path / "pyproject.toml").write_text('[tool.gdr-check]\nmodel = "nope/nope"\n')
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "cache"))
    assert main(["explain", "GDR212"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.splitlines()[-1] == (
        "error: pyproject.toml: `tool.gdr-check.model`: `nope/nope` is neither a local path nor a model in the local "
        f"Hugging Face cache `{tmp_path / 'cache'}`; help: download it (`hf download nope/nope`), or set "
        "`HF_HUB_CACHE` to the cache that holds it")
    assert main(["Qwen/Qwen3-Next-80B-A3B-Instruct", "-q", "--exit-zero"]) == 0


def test_a_built_in_model_explain_cannot_read_named_in_pyproject_names_the_file_and_key(tmp_path, monkeypatch,
                                                                                       capsys):
    # explain reads every built-in model (Qwen-style GDN, Kimi-Linear KDA) as `call` does: one whose config lost its
    # linear-attention table stands in for a model it cannot read, and the check's own message says why.
    kimi = builtin.get_builtin("moonshotai/Kimi-Linear-48B-A3B-Instruct")
    assert kimi is not None
    unreadable = dataclasses.replace(kimi, config={key: value for key, value in kimi.config.items()
                                                   if key != "linear_attn_config"})
    monkeypatch.setattr(models_check, "get_builtin", lambda repo_id: unreadable)  # the uncached repo id's fallback
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "no-cache"))
    (tmp_path / "pyproject.toml").write_text('[tool.gdr-check]\nmodel = "moonshotai/Kimi-Linear-48B-A3B-Instruct"\n')
    monkeypatch.chdir(tmp_path)
    assert main(["explain", "RuntimeError: Triton Error [CUDA]: invalid argument"]) == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        "error: pyproject.toml: `tool.gdr-check.model`: moonshotai/Kimi-Linear-48B-A3B-Instruct: "
        "`KimiLinearForCausalLM` has linear attention (routed to the engines' KDA backend) but "
        "`linear_attn_config.full_attn_layers` is missing: sglang 0.5.23 asserts that it is set")


def test_cli_reads_a_posted_vllm_log_with_the_models_numbers(capsys):
    """vllm-project/vllm#24881 (Qwen3-Next, MTP, --tp 4), through the CLI with the built-in model's widths."""
    [case] = [case for case in CASES if case.url.endswith("/vllm/issues/24881")]
    assert main(["explain", case.text, "--model", "Qwen/Qwen3-Next-80B-A3B-Instruct", "--tp", "4",
                 "--engine", "vllm"]) == 0
    out = capsys.readouterr().out
    assert "GDR404 reshape-invalid-for-size" in out
    assert "matched (line 3): shape '[15, -1, 2048]' is invalid for input of size 90112" in out
    for sentence in case.reasons:
        assert f"  - {sentence}" in out


def test_cli_attention_heads_with_the_model(capsys):
    text = "Value error, Total number of attention heads (16) must be divisible by tensor parallel size (3)."
    assert main(["explain", text, "--model", "Qwen/Qwen3-Next-80B-A3B-Instruct", "--tp", "3", "--engine", "vllm",
                 "--output-format", "json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["code"] == "GDR408" and document["values"] == {"heads": "16", "tp": "3"}
    assert "16 is the model's num_attention_heads (full attention) (unsharded, 16)" in document["reasons"]


def test_illegal_access_names_the_engines_skip_rule_and_pool_rows():
    from gdr_check.engines.profiles import profile_for

    text = "torch.AcceleratorError: CUDA error: an illegal memory access was encountered"
    [sglang] = find_all(text, Context(batch=64, profile=profile_for("sglang")))
    assert sglang.reasons == [
        "sglang 0.5.23's packed decode skips a row whose slot is negative; any other slot must be below the state "
        "pool's row count, or the kernel reads and writes outside the pool",
        "sglang 0.5.23 allocates the pool size (--max-mamba-cache-size) + 1 rows and keeps row 0 for padding: live "
        "slots run from 1 to the size; --batch 64 needs a size of at least 64 (more with speculative or "
        "prefix-cache buffers, GDR135)"]
    [vllm] = find_all(text, Context(profile=profile_for("vllm")))
    assert vllm.reasons == [
        "vLLM 0.33's packed decode skips a row whose slot is <= 0; any other slot must be below the state pool's "
        "row count, or the kernel reads and writes outside the pool"]


@pytest.mark.parametrize("text", [
    "ValueError('`initial_state` must be a 4D tensor (got ndim=5).')",
    'ValueError("`initial_state` must be a 4D tensor (got ndim=5).")',
    "exceptions: [RuntimeError('boom'), ValueError('`initial_state` must be a 4D tensor (got ndim=5).')]",
])
def test_an_exception_in_its_repr_form_is_found_with_clean_values(text):
    # `repr(error)` and lists of exceptions in logs: the message between the quotes, not `5).'` as a value
    (found,) = find_all(text)
    assert (found.rule.code, found.values) == ("GDR212", {"ndim": "5"})
    assert found.matched_message == "`initial_state` must be a 4D tensor (got ndim=5)."


def test_a_rule_name_in_any_case_and_with_underscores_is_found(capsys):
    assert main(["explain", "State_Pool_Not_4D"]) == 0
    assert capsys.readouterr().out.startswith("GDR212 state-pool-not-4d (error)")


# -- the numbers of the wrapper's per-head messages and of reshapes, with the model (first user test) -----------
QWEN = "Qwen/Qwen3-Next-80B-A3B-Instruct"
QWEN3_NEXT_HEAD_DIMS = {"head_k_dim (K)": 128, "head_v_dim (V)": 128}


def _numbers(out: str) -> list[str]:
    """The sentences under `numbers:` in `explain`'s full output."""
    lines = out.splitlines()
    start = lines.index("numbers:") + 1
    return [line.removeprefix("  - ") for line in lines[start:lines.index("", start)]]


def test_a_reshape_of_out_with_the_global_heads_names_the_head_count_not_the_head_size(capsys):
    """`out` = [B, 1, HV, V] reshaped with the global HV=32 on a rank holding 8: dim 2 is the split one, not the
    head size 128 that the last dim is (which tensor parallelism never splits)."""
    text = "RuntimeError: shape '[8, 1, 32, 128]' is invalid for input of size 8192"
    assert main(["explain", text, "--model", QWEN, "--tp", "4"]) == 0
    out = capsys.readouterr().out
    assert _numbers(out) == [
        "8192 elements are 0.25 × 32768 (the product of the known sizes): not a whole number",
        "8192 = 8 × 1 × 8 × 128: the input is per-rank for tp=4 while the shape's dim 2 is the full 32 (the model's "
        "num_v_heads (HV)); reshape with the rank's 32/4 = 8",
        "128 is the model's head_k_dim (K) and head_v_dim (V): tensor parallelism never splits a head's size"]
    assert "while the shape uses the full width 128" not in out
    # Without the model or the TP size: a middle dim (the heads of [tokens, heads, head size]) before the last.
    for context in (Context(), Context(tp=4)):
        [found] = find_all(text, context)
        assert found.reasons == [
            "8192 elements are 0.25 × 32768 (the product of the known sizes): not a whole number",
            "8192 = 8 × 1 × 8 × 128: the input is per-rank for tp=4 while the shape's dim 2 is the full 32; reshape "
            "with the rank's 32/4 = 8"]


def test_a_reshape_of_the_unsharded_input_with_a_ranks_heads_names_the_head_count():
    [found] = find_all("RuntimeError: shape '[8, 1, 8, 128]' is invalid for input of size 32768",
                       Context(tp=4, widths=QWEN3_NEXT, head_dims=QWEN3_NEXT_HEAD_DIMS))
    assert found.reasons == [
        "32768 elements are 4 × 8192 (the product of the shape's sizes): without a -1 the shape must hold all 32768",
        "32768 = 8 × 1 × 32 × 128: the input is unsharded while the shape's dim 2 is a rank's 8 of the full 32 (the "
        "model's num_v_heads (HV)) at tp=4; reshape this rank's shard, or with the full 32",
        "128 is the model's head_k_dim (K) and head_v_dim (V): tensor parallelism never splits a head's size"]


def test_a_reshape_never_blames_the_models_head_size_or_the_token_count():
    # Only the head size (128) and the tokens (8) divide by 4: no TP split explains it; the rows disagree.
    [found] = find_all("RuntimeError: shape '[8, 128]' is invalid for input of size 256",
                       Context(tp=4, widths=QWEN3_NEXT, head_dims=QWEN3_NEXT_HEAD_DIMS))
    assert found.reasons == [
        "256 elements are 0.25 × 1024 (the product of the known sizes): not a whole number",
        "256 = 2 × 128: the input holds 2 rows of the shape's width 128, and 2 is not a multiple of the leading size "
        "(8): the width fits; the row count (tokens, or sequences × tokens each) disagrees with the leading size",
        "128 is the model's head_k_dim (K) and head_v_dim (V): tensor parallelism never splits a head's size"]
    # The first dim is the split one when the model names it as a head count: [HV, V].
    [heads] = find_all("RuntimeError: shape '[32, 128]' is invalid for input of size 1024",
                       Context(tp=4, widths=QWEN3_NEXT, head_dims=QWEN3_NEXT_HEAD_DIMS))
    assert heads.reasons[1] == ("1024 = 8 × 128: the input is per-rank for tp=4 while the shape's dim 0 is the full "
                                "32 (the model's num_v_heads (HV)); reshape with the rank's 32/4 = 8")


@pytest.mark.parametrize("text,title,numbers", [
    ("`A_log` and `dt_bias` must have 8 elements (got A_log.numel()=32, dt_bias.numel()=32).",
     "GDR215 decay-param-sizes-mismatch-value-heads (error): `A_log`/`dt_bias` do not have HV elements",
     ["32 = 4 × 8: `A_log` and `dt_bias` are unsharded while the pool is sharded for tp=4; pass this rank's 8 "
      "elements (the slice [rank*8:(rank+1)*8])",
      "32 is the model's num_v_heads (HV) (unsharded, 32)",
      "8 is the model's num_v_heads (HV) per rank at tp=4 (32/4)"]),
    ("`out` must have shape (8, 1, 8, 128) (got out.shape=(8, 1, 32, 128)).",
     "GDR216 out-shape-mismatch (error): `out` is not [B, 1, HV, V]",
     ["32 = 4 × 8: `out` has the full 32 value heads while the pool is sharded for tp=4; allocate `out` as "
      "(8, 1, 8, 128)",
      "32 is the model's num_v_heads (HV) (unsharded, 32)",
      "8 is the model's num_v_heads (HV) per rank at tp=4 (32/4)"]),
    ("Invalid packed `mixed_qkv` last dim=4096 for HV=32, V=128.",
     "GDR217 packed-width-invalid (error): `mixed_qkv`'s last dim minus the pool's HV*V is not a positive, even q+k "
     "width",
     ["4096 - HV*V = 4096 - 32*128 = 0: `mixed_qkv` is exactly HV*V wide (the v block alone): no width is left for q "
      "and k",
      "32 = 4 × 8: the pool holds the model's full 32 value heads, unsharded for tp=4; a rank's pool holds 8",
      "at tp=4 a rank's `mixed_qkv` is 2048 wide (8192/4) with 8 value heads in its pool",
      "4096 is the model's out/v width (HV*V) (unsharded, 4096)",
      "32 is the model's num_v_heads (HV) (unsharded, 32)"]),
], ids=["GDR215", "GDR216", "GDR217"])
def test_the_per_head_messages_get_the_numbers_with_the_model(capsys, text, title, numbers):
    assert main(["explain", text, "--model", QWEN, "--tp", "4"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == title
    assert _numbers(out) == numbers


def test_the_gates_name_the_models_head_counts_too():
    [found] = find_all("`a`/`b` must have shape [B, HV] with HV=8 (got a.shape=(8, 32), b.shape=(8, 32)).",
                       Context(tp=4, widths=QWEN3_NEXT))
    assert found.reasons == [
        "32 = 4 × 8: the gates are unsharded while the pool is sharded for tp=4; pass this rank's 8 gate columns "
        "(the column slice [rank*8:(rank+1)*8])",
        "32 is the model's num_v_heads (HV) (unsharded, 32)",
        "8 is the model's num_v_heads (HV) per rank at tp=4 (32/4)"]


def test_decay_sizes_without_a_model_and_apart():
    [shard] = find_all("`A_log` and `dt_bias` must have 32 elements (got A_log.numel()=16, dt_bias.numel()=16).")
    assert shard.reasons == [
        "32 = 2 × 16: `A_log` and `dt_bias` are this rank's shard for tp=2 while the pool, the gates and `out` are "
        "sized with the full 32 value heads; size them with HV_l = 16"]
    [apart] = find_all("`A_log` and `dt_bias` must have 8 elements (got A_log.numel()=32, dt_bias.numel()=1024).",
                       Context(tp=4, head_dims=QWEN3_NEXT_HEAD_DIMS))
    assert apart.reasons == [
        "32 = 4 × 8: `A_log` is unsharded while the pool is sharded for tp=4; pass this rank's 8 elements (the "
        "slice [rank*8:(rank+1)*8])",
        "1024 = 8 × 128: `dt_bias` is HV*K long, KDA's per-channel layout: a KDA model decodes with the KDA kernel"]
    # Without the model: a factor of 128 is more values per head than any TP split gives, not "tp=128".
    [kda] = find_all("`A_log` and `dt_bias` must have 32 elements (got A_log.numel()=32, dt_bias.numel()=4096).")
    assert kda.reasons == [
        "4096 = 32 × 128: `dt_bias` is HV*K long, KDA's per-channel layout: a KDA model decodes with the KDA kernel"]


@pytest.mark.parametrize("got,reasons", [
    ("(8, 1, 16, 128)", ["32 = 2 × 16: `out` has this rank's 16 value heads for tp=2 (you said --tp 4) while the "
                         "pool, the gates and `A_log` are sized with the full 32; size them with HV_l = 16"]),
    ("(8, 1, 32, 64)", ["dim 3 (V): 64 where the pool gives 128"]),
    ("(1, 8, 32, 128)", ["`out` is [1, B, HV, V] = (1, 8, 32, 128), the layout after `out.transpose(0, 1)`: pass "
                         "the [B, 1, HV, V] buffer before transposing"]),
    ("(8, 32, 128)", ["`out` has 3 dimensions, the kernel writes 4: [B, 1, HV, V] = (8, 1, 32, 128) (`out` lacks "
                      "the token axis: `out.unsqueeze(1)`)"]),
])
def test_out_shape_numbers(got, reasons):
    [found] = find_all(f"`out` must have shape (8, 1, 32, 128) (got out.shape={got}).", Context(tp=4))
    assert found.reasons == reasons


@pytest.mark.parametrize("width,reason", [
    (2048, "2048 - HV*V = 2048 - 32*128 = -2048: `mixed_qkv` is narrower than the pool's HV*V (4096): no width is "
           "left for q and k"),
    (8193, "8193 - HV*V = 8193 - 32*128 = 4097: `mixed_qkv` is wider than HV*V, but q and k are two blocks of H*K: "
           "the rest must be even"),
])
def test_the_packed_width_says_narrower_or_wider_as_the_numbers_do(width, reason):
    [found] = find_all(f"Invalid packed `mixed_qkv` last dim={width} for HV=32, V=128.")
    assert found.reasons == [reason]


@pytest.mark.parametrize("text", [
    "`` `out` must be contiguous. ``",
    "``  `out` must be contiguous.``",
    "```` `out` must be contiguous. ````",
    "ValueError: `` `out` must be contiguous. ``",
    "it raised `` ValueError: `out` must be contiguous. `` on every rank",
])
def test_a_double_backtick_code_span_around_a_message_is_read(text):
    [found] = find_all(text)
    assert (found.rule.code, found.matched_message) == ("GDR208", "`out` must be contiguous.")


VIEW = ("view size is not compatible with input tensor's size and stride (at least one dimension spans across two "
        "contiguous subspaces). Use .reshape(...) instead.")


@pytest.mark.parametrize("text, code, message", [
    ('"`out` must be contiguous."', "GDR208", "`out` must be contiguous."),
    ('"AssertionError: 32 is not divisible by 3"', "GDR401", "32 is not divisible by 3"),
    ("'AssertionError: 32 is not divisible by 3'", "GDR401", "32 is not divisible by 3"),
    ('log: "A_log must be float32, got torch.bfloat16"', "GDR409", "A_log must be float32, got torch.bfloat16"),
    ('AssertionError: "32 is not divisible by 3"', "GDR401", "32 is not divisible by 3"),
    # an apostrophe in the message (tensor's) is not a quote of the paste (review)
    (f"RuntimeError: '{VIEW}'", "GDR411", VIEW),
    (f"'RuntimeError: {VIEW}'", "GDR411", VIEW),
    (f'"{VIEW}"', "GDR411", VIEW),
])
def test_the_quotes_around_a_paste_are_not_part_of_the_matched_message(text, code, message):
    """README: quotes around a message do not matter; the closing one was kept in `matched_message` (user test),
    which the JSON output carries. A message's own backticks stay (`out`)."""
    [found] = find_all(text)
    assert (found.rule.code, found.matched_message) == (code, message)


def test_a_double_backtick_code_span_keeps_the_values_of_a_message_with_fields(capsys):
    text = "`` `initial_state` must be a 4D tensor (got ndim=5). ``"
    [found] = find_all(text)
    assert (found.rule.code, found.values) == ("GDR212", {"ndim": "5"})
    assert main(["explain", "`` `out` must be contiguous. ``"]) == 0
    assert capsys.readouterr().out.startswith("GDR208 out-not-contiguous (error): ")
    # A run of backticks that never closes is no span; the message after it is still found by its own text.
    assert [f.rule.code for f in find_all("`` `out` must be contiguous.")] == ["GDR208"]


def test_gates_and_out_sized_for_another_tp_are_named_with_the_models_head_count():
    # With the model (HV = 32) and --tp 4, 16 heads are neither whole nor this rank's: sized for tp = 2. The wheel
    # called them "the full 16 value heads" (second user test); for the gates, 2 x 8 is first b and a unsplit.
    context = Context(tp=4, widths=QWEN3_NEXT, head_dims=QWEN3_NEXT_HEAD_DIMS)
    [out] = find_all("`out` must have shape [8, 1, 8, 128] (got out.shape=[8, 1, 16, 128]).", context)
    assert out.reasons[0] == ("16 = 32/2: sized for tp=2 (the model's 32 value heads over 2 ranks) while the pool "
                              "holds this rank's 8 at tp=4; allocate `out` as (8, 1, 8, 128)")
    [gates] = find_all("`a`/`b` must have shape [B, HV] with HV=8 (got a.shape=(8, 16), b.shape=(8, 16)).", context)
    assert gates.reasons[:2] == [
        "16 = 2 × 8: b and a together, as the fused `in_proj_ba` projection gives them for 8 value heads; split "
        "its output into `b` and `a`, 8 columns each",
        "16 = 32/2: sized for tp=2 (the model's 32 value heads over 2 ranks) while the pool holds this rank's 8 at "
        "tp=4; pass this rank's 8 gate columns (the column slice [rank*8:(rank+1)*8])"]


def test_a_reshape_of_full_rows_to_a_ranks_width_names_the_width_not_the_tokens():
    # [8, 2048] for 65536: 8 full 8192-wide mixed_qkv rows, not 8 of 32 value heads in dim 0 (second user test).
    [found] = find_all("RuntimeError: shape '[8, 2048]' is invalid for input of size 65536",
                       Context(tp=4, widths=QWEN3_NEXT, head_dims=QWEN3_NEXT_HEAD_DIMS))
    assert found.reasons[1] == (
        "65536 = 8 × 8192: the input is unsharded while the shape's dim 1 is a rank's 2048 of the full 8192 (the "
        "model's mixed_qkv width (2*H*K + HV*V)) at tp=4; reshape this rank's shard, or with the full 8192")


def test_a_tensor_sized_for_a_larger_tp_is_read_against_the_models_head_count():
    # At --tp 2 the rank holds 16 of 32 value heads; `out` with 8 was sized for tp=4. The pool is right: the fix is
    # `out`, not "size them with HV_l = 8" (third user test).
    context = Context(tp=2, widths=QWEN3_NEXT, head_dims=QWEN3_NEXT_HEAD_DIMS)
    [out] = find_all("`out` must have shape [8, 1, 16, 128] (got out.shape=[8, 1, 8, 128]).", context)
    assert out.reasons[0] == ("8 = 32/4: sized for tp=4 (the model's 32 value heads over 4 ranks) while the pool "
                              "holds this rank's 16 at tp=2; allocate `out` as (8, 1, 16, 128)")
