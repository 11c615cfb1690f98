"""What a new user reads in README.md and docs/ matches what the installed tool does (found by trying every
documented command and option as a user would)."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest

from cli_checkpoints import clean_output_env, run_cli
from gdr_check import __version__

ROOT = Path(__file__).resolve().parent.parent
QWEN = "Qwen/Qwen3-Next-80B-A3B-Instruct"


@pytest.fixture
def cwd(tmp_path: Path, monkeypatch) -> Path:
    clean_output_env(monkeypatch)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "no-cache"))
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_the_ci_guide_shows_the_rule_links_the_reports_carry(cwd: Path):
    document = json.loads(run_cli(QWEN, "--tp", "4", "--isolated", "--output-format", "json").stdout)
    url = document["diagnostics"][0]["url"]
    assert url == f"https://github.com/gdr-check/gdr-check/blob/v{__version__}/docs/rules/GDR131.md"
    shown = "`https://github.com/gdr-check/gdr-check/blob/v<version>/docs/rules/<CODE>.md`"
    assert shown in (ROOT / "docs" / "ci.md").read_text()
    assert shown.replace("<version>", __version__).replace("<CODE>", "GDR131").strip("`") == url


# -- explain writes full or json (its --help says so) ----------------------------------------------------------
@pytest.mark.parametrize("fmt", ["sarif", "jsn"])
def test_explain_refuses_a_format_it_does_not_write(cwd: Path, fmt: str):
    result = run_cli("explain", "GDR212", "--output-format", fmt)
    assert result.exit_code == 2
    assert f"error: Invalid value for --output-format: explain writes full or json, not '{fmt}'\n" in result.stderr
    assert "Traceback" not in result.stderr


def test_launch_refuses_a_format_it_does_not_write_and_writes_nothing_in_it(cwd: Path):
    """It wrote a SARIF document on stdout beside "unknown format 'sarif'" (found in review)."""
    result = run_cli("launch", "--output-format", "sarif", "--", "vllm", "serve", QWEN)
    assert (result.exit_code, result.stdout) == (2, "")
    assert result.stderr == ("error: Invalid value for --output-format: unknown format 'sarif'; expected one of: "
                             "full, json\n")

def test_explain_reads_json_from_the_environment_and_full_for_any_other_format(cwd: Path, monkeypatch):
    monkeypatch.setenv("GDR_CHECK_OUTPUT_FORMAT", "json")
    assert json.loads(run_cli("explain", "GDR212").stdout)["code"] == "GDR212"
    monkeypatch.setenv("GDR_CHECK_OUTPUT_FORMAT", "sarif")  # set for `check` in CI: explain still answers
    result = run_cli("explain", "GDR212")
    assert result.exit_code == 0
    assert result.stdout.startswith("GDR212 state-pool-not-4d (error): ")


# -- README "Checking a checkpoint": a file names its checkpoint directory ------------------------------------
def test_a_file_named_on_the_command_line_stands_for_its_directory(cwd: Path):
    from cli_checkpoints import write_good
    from fixtures_sources import qwen3_next_config

    readme = (ROOT / "README.md").read_text()
    assert "gdr-check path/to/model.safetensors            # a shard, index or config.json stands for its directory\n" \
        in readme
    write_good(cwd / "ckpt")
    whole = json.loads(run_cli("ckpt", "--isolated", "--output-format", "json").stdout)["source"]
    assert whole["tensors"] > 0
    for name in ("config.json", "model.safetensors"):
        named = json.loads(run_cli(f"ckpt/{name}", "--isolated", "--output-format", "json").stdout)["source"]
        assert (named["kind"], named["tensors"]) == (whole["kind"], whole["tensors"])
    (cwd / "config-only").mkdir()
    (cwd / "config-only" / "config.json").write_text(json.dumps(qwen3_next_config()))
    alone = json.loads(run_cli("config-only", "--isolated", "--output-format", "json").stdout)["source"]
    assert alone["tensors"] == 0 and alone["weights_checked"] is False


# -- README: the Python example of the library's runs, run as written ----------------------------------------------
def test_the_readmes_library_example_runs_as_written(cwd: Path, capsys):
    readme = (ROOT / "README.md").read_text()
    start = readme.index("```python\nfrom gdr_check import Run, TargetSettings, check_targets\n")
    block = readme[start + len("```python\n"):readme.index("```", start + 3)]
    exec(compile(block, "README.md", "exec"), {})
    printed = capsys.readouterr().out.splitlines()
    # What the example's comments say it prints.
    assert printed == ["1", "['GDR121', 'GDR122', 'GDR123']"]
    assert "# 1: tp=3 does not divide the heads" in block and "# ['GDR121', 'GDR122', 'GDR123']" in block


# -- README: what gdr_check.pipeline.library's functions return ----------------------------------------------------
def test_the_readme_says_what_check_targets_returns(cwd: Path):
    from gdr_check.pipeline.library import TargetSettings, check_targets
    from gdr_check.pipeline.pyproject_config import Config
    from gdr_check.pipeline.results import Run, TargetResult
    from gdr_check.pipeline.selection import Selection

    readme = " ".join((ROOT / "README.md").read_text().split())
    assert ("`check_targets(targets, settings_for)` gives the list of (target, TP size) results, and "
            "`Run(check_targets(...))` is what `gdr-check check` renders:") in readme
    settings = TargetSettings(Config(), Selection(), "sglang", [2, 3], 8, None, None, None)
    results = check_targets([QWEN], lambda target: settings)
    assert isinstance(results, list) and all(isinstance(r, TargetResult) for r in results)
    assert [r.tp for r in results] == [2, 3]
    assert Run(results).exit_code == 1  # tp=3 does not divide the heads
    # The README's example, with the defaults `gdr-check check` uses for everything but the TP sizes.
    run = Run(check_targets([QWEN], lambda target: TargetSettings(tp_sizes=[2, 3])))
    assert run.exit_code == 1
    assert [d.code for r in run.results if r.tp == 3 for d in r.diagnostics if d.severity == "error"] == [
        "GDR121", "GDR122", "GDR123"]
    assert [d.code for r in run.results if r.tp == 2 for d in r.diagnostics if d.severity == "error"] == []


# -- the guard refuses a bad deployment when it is made or entered, not inside the engine's first decode ------
def test_guard_refuses_a_bad_tp_when_made():
    import gdr_check
    from gdr_check.base.limits import LimitError
    from gdr_check.base.report import LIMITS_DOCS_URL

    with pytest.raises(LimitError) as refused:
        gdr_check.guard(tp=0)
    assert str(refused.value) == f"tp is 0: must be in 1..4_096 (tensor-parallel size); see {LIMITS_DOCS_URL}"
    with pytest.raises(ValueError, match="^unknown state dtype "):
        gdr_check.guard(state_dtype="int8")


def test_guard_refuses_a_model_it_cannot_read_on_entry_and_patches_nothing(cwd: Path, monkeypatch):
    import gdr_check
    from fake_engine import install
    from gdr_check.base.source_error import SourceError

    engine = install(monkeypatch)
    original = engine.sglang_kernels.fused_recurrent_gated_delta_rule_packed_decode
    guard = gdr_check.guard(engine="sglang", model="nope/x")
    with pytest.raises(SourceError, match=r"^`nope/x` is neither a local path nor a model in the local Hugging Face"):
        with guard:
            pass
    assert engine.sglang_kernels.fused_recurrent_gated_delta_rule_packed_decode is original and guard.sites == []
    with gdr_check.guard(engine="sglang", model=QWEN, tp=4) as loaded:  # a built-in model: read on entry
        assert loaded._expected and loaded.sites
        assert engine.sglang_kernels.fused_recurrent_gated_delta_rule_packed_decode is not original
    assert engine.sglang_kernels.fused_recurrent_gated_delta_rule_packed_decode is original


# -- explain: an ordinary log line is no error -----------------------------------------------------------------
VLLM_LOG = """\
INFO 11-30 10:00:00 [__init__.py:241] Automatically detected platform cuda.
(APIServer pid=100) INFO 11-30 10:00:01 [api_server.py:1805] vLLM API server version 0.29.0
(APIServer pid=100) WARNING 11-30 10:00:02 [config.py:100] `torch_dtype` is deprecated! Use `dtype` instead!
(APIServer pid=100) INFO 11-30 10:00:02 [config.py:101] `max_model_len` is 262144: capped by the KV cache
(VllmWorker TP0 pid=101) INFO 11-30 10:00:03 [parallel_state.py:1200] rank 0 of 4 is ready
(VllmWorker TP0 pid=101) ERROR 11-30 10:00:05 [multiproc_executor.py:585] AssertionError: 16 is not divisible by 3
"""


def test_explain_reads_only_the_error_of_an_ordinary_vllm_log(cwd: Path):
    result = run_cli("explain", VLLM_LOG, "--output-format", "json")
    assert result.exit_code == 0
    found = json.loads(result.stdout)
    assert (found["code"], found["line"]) == ("GDR401", 6)  # one document: the only error in the log


@pytest.mark.parametrize(("line", "code"), [
    ("checkpoints/a/config.json:3:5: error[GDR104] `layer_types` has 6 entries but `num_hidden_layers` is 8",
     "GDR104"),
    ("info[GDR133]: vLLM 0.33 runs the GDN packed decode by default (`VLLM_ENABLE_FLA_PACKED_RECURRENT_DECODE` "
     "defaults to \"1\"); `VLLM_ENABLE_FLA_PACKED_RECURRENT_DECODE=0` turns it off", "GDR133"),
])
def test_explain_still_reads_gdr_checks_own_generic_messages_with_their_code(cwd: Path, line: str, code: str):
    result = run_cli("explain", line, "--output-format", "json")
    assert result.exit_code == 0 and json.loads(result.stdout)["code"] == code


def test_the_readme_names_the_rules_explain_reads_only_with_their_code():
    from gdr_check.checks import RULES
    from gdr_check.checks.explanations import _MIN_LITERAL, _literal_length

    generic = sorted(code for code, rule in RULES.items() if _literal_length(rule) < _MIN_LITERAL)
    readme = " ".join((ROOT / "README.md").read_text().split())
    assert f"the few with little fixed text ({', '.join(generic)}) only from a line that names their code" in readme


# -- a guard that saw no call needs no torch (the base install has none) ---------------------------------------
def test_a_guard_that_saw_no_call_exits_without_importing_torch():
    from test_no_heavy_imports import _modules_after

    code = """
import warnings
import gdr_check
warnings.simplefilter("ignore")  # no engine installed: the guard says it found nothing to guard
with gdr_check.guard(engine="sglang", mode="raise") as guard:
    pass
assert guard.raise_pending() == [] and guard.diagnostics == []
"""
    assert _modules_after(code) == {"torch": False, "triton": False}


# -- explain -: the paste from standard input (a log too long for one argument) ---------------------------------
def _stdin(monkeypatch, data: bytes) -> None:
    import io
    import sys

    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data), encoding="utf-8"))


def test_explain_reads_the_tail_of_a_long_log_from_stdin_with_the_logs_line_numbers(cwd: Path, monkeypatch):
    noise = "".join(f"(VllmWorker TP0 pid=101) INFO 11-30 10:00:03 [loader.py:100] loading shard {i} of 400\n"
                    for i in range(3000))  # ~270 KB: more than one argument may hold, the error at the end
    _stdin(monkeypatch, (noise + VLLM_LOG.splitlines()[-1] + "\n").encode())
    result = run_cli("explain", "-", "--output-format", "json")
    assert result.exit_code == 0, result.stderr
    found = json.loads(result.stdout)
    assert (found["code"], found["line"], found["values"]) == (
        "GDR401", 3001, {"numerator": "16", "denominator": "3"})


def test_explain_from_stdin_matches_the_same_paste_given_as_an_argument(cwd: Path, monkeypatch):
    _stdin(monkeypatch, VLLM_LOG.encode())
    piped = run_cli("explain", "-", "--output-format", "json")
    assert piped.stdout == run_cli("explain", VLLM_LOG, "--output-format", "json").stdout


def test_explain_from_an_empty_stdin_is_one_line_and_exit_2(cwd: Path, monkeypatch):
    _stdin(monkeypatch, b"")
    result = run_cli("explain", "-")
    assert (result.exit_code, result.stdout) == (2, "")
    assert result.stderr == "error: standard input is empty: pipe a log into `gdr-check explain -`\n"


def test_explain_from_stdin_that_matches_nothing_is_one_line_and_exit_2(cwd: Path, monkeypatch):
    # README: a paste in which no known error is found is one `error:` line (the hint is on that line)
    _stdin(monkeypatch, b"x\n")
    result = run_cli("explain", "-")
    assert (result.exit_code, result.stdout) == (2, "")
    assert result.stderr == ("error: no rule matches 'x\\n': pass a code (GDR212), a rule name, "
                             "or the whole error message as printed\n")


def test_explain_from_stdin_that_is_not_utf8_is_no_traceback(cwd: Path, monkeypatch):
    _stdin(monkeypatch, b"\xff\xfe\x00garbage\x80\n")
    result = run_cli("explain", "-")
    assert result.exit_code == 2 and result.stderr.startswith("error: no rule matches ")
    assert "Traceback" not in result.stderr


def test_the_readme_pipes_the_log_into_explain():
    readme = (ROOT / "README.md").read_text()
    assert "gdr-check explain - --model Qwen/Qwen3-Next-80B-A3B-Instruct --tp 2 --batch 5000 --engine vllm" \
        " < worker.log\n" in readme


# -- GDR101 points at the `architectures` line, as docs/ci.md says of every config-key diagnostic -------------
def test_a_model_without_linear_attention_points_at_its_architectures_line(cwd: Path):
    (cwd / "llama").mkdir()
    (cwd / "llama" / "config.json").write_text(json.dumps(
        {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2,
         "num_attention_heads": 4}, indent=2))
    result = run_cli("llama", "--isolated", "--output-format", "concise")
    assert result.exit_code == 0
    assert result.stdout == ("llama/config.json:2:3: info[GDR101] `LlamaForCausalLM` has no GDN or KDA layers: "
                             "nothing to check\n")


# -- call --index past the recording says how many calls it holds ---------------------------------------------
@pytest.mark.parametrize(("count", "held"), [(1, "one call (index 0)"), (3, "3 calls (indices 0-2)")])
def test_call_index_past_the_recording_names_the_calls_it_holds(cwd: Path, count: int, held: str):
    from test_call_command import expected_call, write_recording

    path = write_recording(cwd / "rec.json", *[expected_call()] * count)
    result = run_cli("call", path, "--index", "5", "--isolated")
    assert (result.exit_code, result.stdout) == (2, "")
    assert result.stderr == f"error: --index: {path} holds {held}; there is no call 5\n"


# -- a TP size listed twice is checked once ------------------------------------------------------------------
def test_a_tp_size_listed_twice_is_checked_once(cwd: Path):
    document = json.loads(run_cli(QWEN, "--tp", "4,2,4", "--isolated", "--output-format", "json").stdout)
    assert [result["deployment"]["tp"] for result in document["results"]] == [4, 2]
    (cwd / "pyproject.toml").write_text("[tool.gdr-check]\ntp = [2, 2]\n")
    document = json.loads(run_cli(QWEN, "--output-format", "json").stdout)
    assert document["deployment"]["tp"] == 2 and "results" not in document


# -- dir() lists the lazily exported names, without importing them -------------------------------------------
def test_dir_lists_the_public_names_without_importing_torch():
    from test_no_heavy_imports import _modules_after

    code = """
import gdr_check, gdr_check.kernel, gdr_check.models, gdr_check.pipeline.dryrun
assert set(gdr_check.__all__) <= set(dir(gdr_check)), set(gdr_check.__all__) - set(dir(gdr_check))
for package in (gdr_check.kernel, gdr_check.models, gdr_check.pipeline.dryrun):
    assert set(package.__all__) <= set(dir(package)), package.__name__
"""
    assert _modules_after(code) == {"torch": False, "triton": False}


# -- GDR115 names the namespace of a layer that has no tensor at all ----------------------------------------
def test_layers_without_any_tensor_are_named_by_their_namespace(cwd: Path):
    from checkpoint_builders import qwen3_next_config, qwen_tensors, write_checkpoint

    config = qwen3_next_config()
    tensors = {name: spec for name, spec in qwen_tensors(config).items() if not name.startswith("model.layers.5.")}
    write_checkpoint(cwd / "ckpt", config, tensors)
    result = run_cli("ckpt", "--isolated", "--select", "GDR115", "--output-format", "concise")
    assert result.exit_code == 1
    assert "error[GDR115] linear-attention layer 5 lacks `model.layers.<n>.*`\n" in result.stdout


# -- a tensor's location in a checkpoint without an index is its shard's path from the working directory -----
def test_a_tensor_diagnostic_without_an_index_points_at_the_shard_from_the_working_directory(cwd: Path):
    from checkpoint_builders import qwen3_next_config, qwen_tensors, write_checkpoint

    config = qwen3_next_config()
    tensors = qwen_tensors(config)
    del tensors["model.layers.4.linear_attn.A_log"]
    write_checkpoint(cwd / "ckpt", config, tensors)
    concise = run_cli("ckpt", "--isolated", "--select", "GDR115", "--output-format", "concise")
    assert concise.stdout == ("ckpt/model.safetensors:1:1: error[GDR115] linear-attention layer 4 lacks "
                              "`linear_attn.A_log`\n")
    sarif = json.loads(run_cli("ckpt", "--isolated", "--select", "GDR115", "--output-format", "sarif").stdout)
    location = sarif["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
    assert location == "ckpt/model.safetensors" and (cwd / location).is_file()



def _shown_runs() -> list[tuple[str, str, str]]:
    """(page, command, output) of every ```text block in README.md and docs/ that shows a `$ gdr-check` run."""
    runs = []
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        for block in page.read_text(encoding="utf-8").split("```text\n")[1:]:
            text = block.split("```\n", 1)[0]
            if text.startswith("$ gdr-check "):
                command, output = re.match(r"\$ ((?:[^\n]*\\\n)*[^\n]*)\n(.*)", text, re.S).groups()
                runs.append((str(page.relative_to(ROOT)), command.replace("\\\n", " "), output))
    return runs


SHOWN_RUNS = _shown_runs()


def test_the_docs_show_runs():
    assert [(page, command.split()[1]) for page, command, _ in SHOWN_RUNS][:1] == [
        ("README.md", "Qwen/Qwen3-Next-80B-A3B-Instruct")]
    assert len(SHOWN_RUNS) >= 3


@pytest.mark.parametrize("page,command,shown", SHOWN_RUNS, ids=[f"{p}:{c[:60]}" for p, c, _ in SHOWN_RUNS])
def test_a_run_the_docs_show_is_what_the_command_prints(cwd: Path, page: str, command: str, shown: str):
    """Sample output in the README and docs is the tool's, whole, not an older release's (the README showed 9 slots
    after the default pool became sglang's batch x slots + 1)."""
    args = shlex.split(command)
    assert args[0] == "gdr-check"
    result = run_cli(*args[1:])
    assert shown == result.stdout, page
