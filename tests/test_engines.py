"""Engine profiles: selection by name and version, the facts each profile carries, the fixes that name each
engine's own flags, and a guard that no code outside the profile module branches on an engine's name."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest

from gdr_check.checks.compare import ModelGeometry, compare_call
from gdr_check.checks.contract import run_contract
from gdr_check.cli.main import main
from gdr_check.deployment.settings import Deployment
from gdr_check.engines.profiles import (
    ENGINE_NAMES,
    PROFILES,
    SGLANG_0_5_23,
    VLLM_0_28,
    VLLM_0_29,
    VLLM_0_30,
    VLLM_0_33,
    EngineProfile,
    UnknownEngineError,
    profile_for,
)
from gdr_check.pipeline.model_check import check_builtin

SRC = Path(__file__).resolve().parents[1] / "src" / "gdr_check"
MiB = 1024 * 1024
_VLLM_VERSIONS = "0.17, 0.18, 0.20, 0.22, 0.26, 0.27, 0.28, 0.29, 0.30, 0.32, 0.33"
_SGLANG_VERSIONS = ("0.5.9, 0.5.10, 0.5.11, 0.5.13, 0.5.14, 0.5.15, 0.5.16, 0.5.17, 0.5.18, 0.5.19, 0.5.20, 0.5.22, "
                    "0.5.23")


# -- selection ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("spec,expected", [
    ("sglang", SGLANG_0_5_23),
    ("sglang@0.5.23", SGLANG_0_5_23),
    ("sglang@0.5.24", SGLANG_0_5_23),  # a later release keeps the newest known facts
    ("vllm", VLLM_0_33),  # a name alone is its newest profile
    ("vllm@0.29", VLLM_0_29),
    ("vllm@0.29.0", VLLM_0_29),
    ("vllm@0.29.1", VLLM_0_29),
    ("vllm@0.31.1", VLLM_0_30),
    ("vllm@0.35.0", VLLM_0_33),
    ("vllm@0.28", VLLM_0_28),
    ("vllm@0.28.2", VLLM_0_28),
])
def test_profile_for_selects_by_name_and_version(spec: str, expected: EngineProfile):
    assert profile_for(spec) is expected
    assert profile_for(expected) is expected


def test_the_newest_profile_of_each_name_is_its_default():
    for name in ("sglang", "vllm"):
        newest = [p for p in PROFILES if p.name == name][-1]
        assert profile_for(name) is newest
    assert ENGINE_NAMES == ("sglang", "vllm")


@pytest.mark.parametrize("spec,code,message", [
    ("trtllm", "unknown-engine",
     "unknown engine 'trtllm'; expected one of: sglang, vllm, optionally @version (sglang@0.5.23, vllm@0.34.0, ...)"),
    ("VLLM", "unknown-engine",
     "unknown engine 'VLLM'; expected one of: sglang, vllm, optionally @version (sglang@0.5.23, vllm@0.34.0, ...)"),
    ("vllm@0.16", "unknown-engine-version",
     f"no vLLM profile for version '0.16' (engine 'vllm@0.16'); known versions: {_VLLM_VERSIONS}, or a later release"),
    ("vllm@latest", "unknown-engine-version",
     f"no vLLM profile for version 'latest' (engine 'vllm@latest'); known versions: {_VLLM_VERSIONS}, or a later "
     "release"),
    ("sglang@", "unknown-engine-version",
     f"no sglang profile for version '' (engine 'sglang@'); known versions: {_SGLANG_VERSIONS}, or a later release"),
])
def test_unknown_engines_raise_a_typed_error_naming_the_choices(spec: str, code: str, message: str):
    with pytest.raises(UnknownEngineError) as caught:
        profile_for(spec)
    assert caught.value.code == code
    assert str(caught.value) == message
    assert isinstance(caught.value, ValueError)  # callers that catch ValueError keep working


def test_profiles_are_frozen_slotted_data():
    with pytest.raises(dataclasses.FrozenInstanceError):
        VLLM_0_29.skip_at_or_below = -1  # type: ignore[misc]
    assert not hasattr(VLLM_0_29, "__dict__")
    assert len({p.spec for p in PROFILES}) == len(PROFILES)


def test_the_two_vllm_profiles_differ_only_in_beta_rounding_and_version():
    differing = {f.name for f in dataclasses.fields(EngineProfile)
                 if getattr(VLLM_0_28, f.name) != getattr(VLLM_0_29, f.name)}
    assert differing == {"version", "gdn_beta_rounding"}
    assert VLLM_0_28.gdn_beta_rounding == SGLANG_0_5_23.gdn_beta_rounding == "b.dtype"
    assert VLLM_0_29.gdn_beta_rounding is None


def test_report_schema_accepts_every_engine_choice():
    schema = json.loads((SRC / "schema" / "report-v1.json").read_text())
    deployment = schema["$defs"]["deployment"]["properties"]
    for choice in (*ENGINE_NAMES, *(p.spec for p in PROFILES)):  # every `--engine` value that selects a profile
        assert re.fullmatch(deployment["engine"]["pattern"], choice)
    for profile in PROFILES:
        assert re.fullmatch(deployment["engine_profile"]["pattern"], profile.spec)


# -- the profile decides ---------------------------------------------------------------------------------------
def test_deployment_reports_the_profile_its_engine_selected():
    result = check_builtin("Qwen/Qwen3-Next-80B-A3B-Instruct", Deployment(engine="vllm"))
    assert result.to_dict()["deployment"]["engine"] == "vllm"
    assert result.to_dict()["deployment"]["engine_profile"] == "vllm@0.33"
    assert result.to_dict()["deployment"]["engine_profile_reason"] == "default"
    pinned = check_builtin("Qwen/Qwen3-Next-80B-A3B-Instruct", Deployment(engine="vllm@0.28.1"))
    assert pinned.to_dict()["deployment"]["engine_profile"] == "vllm@0.28"
    with pytest.raises(UnknownEngineError):
        Deployment(engine="vllm@0.1")


@pytest.mark.parametrize(("engine", "note"), [
    ("vllm@0.31", "vLLM 0.31 is checked as vLLM 0.30, the profile of its release epoch (its wheel was verified "
                  "against it)"),
    ("vllm@0.25.1", "vLLM 0.25.1 has no profile of its own: checked as vLLM 0.22, the newest profile at or below it "
                    "(behaviour carries forward until a profile records a change)"),
    ("vllm@0.28.1", "vLLM 0.28.1 has no profile of its own: checked as vLLM 0.28, the newest profile at or below it "
                    "(behaviour carries forward until a profile records a change)"),
    ("sglang@0.6.0", "sglang 0.6.0 is newer than the newest release gdr-check verified, sglang 0.5.23: checked as "
                     "sglang 0.5.23, whose facts may have changed since (scripts/verify_engine_profiles.py reads a "
                     "release's wheel)"),
])
def test_a_version_checked_as_an_older_profile_says_so(engine, note):
    # A user who typed 0.30 and read "vLLM 0.29" in the header was given no reason (user test of the wheel).
    notes = check_builtin("Qwen/Qwen3-Next-80B-A3B-Instruct", Deployment(engine=engine)).source_dict()["notes"]
    assert note in notes


@pytest.mark.parametrize(("engine", "profile"), [
    ("sglang@0.5.23.post1", "sglang@0.5.23"), ("vllm@0.30.0rc1", "vllm@0.29"), ("vllm@v0.30", "vllm@0.30"),
    ("vllm@0.29.1+cu130", "vllm@0.29"), ("vllm@0.29.0", "vllm@0.29"), ("vllm@0.29rc1", "vllm@0.28")])
def test_released_version_strings_select_a_profile(engine, profile):
    # The wheel refused `sglang@0.5.23.post1` and `vllm@0.30.0rc1`, real release names, while its error offered
    # "or a later release" (second user test). A pre-release comes before its release.
    result = check_builtin("Qwen/Qwen3-Next-80B-A3B-Instruct", Deployment(engine=engine))
    document = result.to_dict()
    assert document["deployment"]["engine_profile"] == profile
    schema = json.loads((SRC / "schema" / "report-v1.json").read_text())
    assert re.fullmatch(schema["$defs"]["deployment"]["properties"]["engine"]["pattern"], engine)


@pytest.mark.parametrize("engine", ["vllm", "vllm@0.29", "sglang@0.5.23", "vllm@0.29.0", "sglang@0.5.23.post1"])
def test_a_name_or_a_profiles_own_version_adds_no_note(engine):
    notes = check_builtin("Qwen/Qwen3-Next-80B-A3B-Instruct", Deployment(engine=engine)).source_dict()["notes"]
    assert not [note for note in notes if "has no profile of its own" in note]


@pytest.mark.parametrize("name", ["check_packed_decode", "check_kda_packed_decode"])
def test_an_unknown_engine_raises_whatever_the_arguments(name):
    """docs/engines.md: the library raises UnknownEngineError for an engine it has no profile of; arguments that
    are no tensors (GDR228) do not turn that into a report."""
    import gdr_check

    check = getattr(gdr_check, name)
    with pytest.raises(UnknownEngineError, match=r"^no vLLM profile for version '0\.16'") as raised:
        check(*[None] * 9, engine="vllm@0.16")
    assert raised.value.__context__ is None  # not "during handling of" the arguments' description failing
    assert [d.code for d in check(*[None] * 9).errors][:1] == ["GDR228"]


def test_call_context_carries_the_profile_and_its_name():
    call = check_builtin("Qwen/Qwen3-Next-80B-A3B-Instruct", Deployment()).call
    from gdr_check.call.packed_call import CallContext

    ctx = CallContext.build(call, "vllm@0.28")
    assert ctx.engine == "vllm" and ctx.profile is VLLM_0_28
    assert run_contract(call, "vllm@0.28").ok and run_contract(call, VLLM_0_29).ok


def test_row_liveness_follows_the_skip_sentinel():
    from gdr_check.kernel.layout import row_is_live

    assert [row_is_live(slot, "sglang") for slot in (-1, 0, 1)] == [False, True, True]
    assert [row_is_live(slot, "vllm@0.28") for slot in (-1, 0, 1)] == [False, False, True]


# -- fixes name the selected engine's flags -------------------------------------------------------------------------
@pytest.mark.parametrize("engine,flag", [
    ("sglang", "--mamba-ssm-dtype bfloat16"),
    ("vllm", "--mamba-ssm-cache-dtype bfloat16"),
    ("vllm@0.28", "--mamba-ssm-cache-dtype bfloat16"),
])
def test_state_budget_fix_names_the_engines_state_dtype_flag(engine: str, flag: str):
    # Qwen3.5-35B-A3B: the config asks for an fp32 SSM state, which both engines honour.
    result = check_builtin("Qwen/Qwen3.5-35B-A3B", Deployment(batch=512, gpu_memory=1024 * MiB, engine=engine))
    warning = next(d for d in result.report if d.code == "GDR132")
    assert warning.fixes[-1] == f"halve the SSM state with `{flag}`, at some accuracy cost (GDR249)"
    other = "--mamba-ssm-dtype" if "cache" in flag else "--mamba-ssm-cache-dtype"
    assert not any(other in fix for d in result.report for fix in d.fixes)


def test_state_budget_has_no_dtype_fix_when_the_state_is_already_16_bit():
    # vLLM keeps Qwen3-Next's state in the model dtype (bf16): halving it is not on offer.
    result = check_builtin("Qwen/Qwen3-Next-80B-A3B-Instruct",
                           Deployment(batch=4096, gpu_memory=1024 * MiB, engine="vllm"))
    warning = next(d for d in result.report if d.code == "GDR132")
    assert warning.fixes == ["lower the batch to 26", "raise TP to split the state across more ranks"]


def test_a_budget_that_holds_some_requests_but_not_the_batch_stays_a_warning(capsys):
    result = check_builtin("Qwen/Qwen3-Next-80B-A3B-Instruct", Deployment(batch=64, gpu_memory=1024 * MiB))
    assert next(d for d in result.report if d.code == "GDR132").severity == "warning" and result.ok
    assert main(["Qwen/Qwen3-Next-80B-A3B-Instruct", "--gpu-memory", "1MiB", "--output-format", "concise"]) == 1
    # sglang counts the budget as GDR136 (its pool, K = -1 slots: start-up stops), which replaces GDR132
    assert "error[GDR136] a 1 MiB budget gives a pool of -1 slots" in capsys.readouterr().out
    vllm = check_builtin("Qwen/Qwen3-Next-80B-A3B-Instruct", Deployment(engine="vllm", gpu_memory=1 * MiB))
    assert next(d for d in vllm.report if d.code == "GDR132").message.startswith(
        "a 1 MiB budget holds the state of 0 requests per rank")
    # sglang's no_buffer pool with draft tokens counts the budget as GDR136, which replaces GDR132: the same
    no_room = check_builtin("Qwen/Qwen3-Next-80B-A3B-Instruct", Deployment(gpu_memory=100, speculative_tokens=2))
    assert next(d for d in no_room.report if d.code == "GDR136").severity == "error"
    some = check_builtin("Qwen/Qwen3-Next-80B-A3B-Instruct",
                         Deployment(batch=64, gpu_memory=1024 * MiB, speculative_tokens=2))
    assert next(d for d in some.report if d.code == "GDR136").severity == "warning"


def test_a_budget_that_holds_no_request_names_the_budget_for_one_not_a_batch_of_0():
    # 100 bytes: a batch of 0 serves nothing; one request needs its 73.688 MiB slot plus the reserved row 0.
    # A deployment that cannot hold one request cannot run: an error (a warning, exit 0, in the wheel).
    result = check_builtin("Qwen/Qwen3-Next-80B-A3B-Instruct", Deployment(gpu_memory=100))
    warning = next(d for d in result.report if d.code == "GDR132")
    assert warning.severity == "error" and not result.ok
    assert warning.message == "a 100 B budget holds the state of 0 requests per rank, fewer than the batch of 8"
    assert warning.fixes == [
        "not even one request fits: one needs 147.375 MiB per rank (a request and the reserved row 0): raise the "
        "budget to at least that",
        "raise TP to split the state across more ranks",
        "halve the SSM state with `--mamba-ssm-dtype bfloat16`, at some accuracy cost (GDR249)"]


@pytest.mark.parametrize("engine,fix", [
    ("sglang", "serve with `--mamba-ssm-dtype float32` to get the engine's float32 state"),
    ("vllm", "serve with `--mamba-ssm-cache-dtype float32` to get the engine's float32 state"),
])
def test_state_dtype_comparison_fix_names_the_engines_flag(engine: str, fix: str):
    check = check_builtin("Qwen/Qwen3.5-35B-A3B", Deployment(engine=engine))
    assert check.call is not None and check.model is not None and check.settings is not None
    assert check.call.initial_state.dtype == "float32"
    recorded = dataclasses.replace(
        check.call, initial_state=dataclasses.replace(check.call.initial_state, dtype="bfloat16"))
    geometry = ModelGeometry.from_model(check.model, "Qwen/Qwen3.5-35B-A3B")
    comparison = compare_call(recorded, check.call, geometry, tp=1, engine=engine,
                              state_dtype_reason=check.settings.state_dtype_reason)
    (state,) = [d for d in comparison.diagnostics if d.code == "GDR166"]
    assert state.fixes == [fix, "if the dtype is deliberate, compare with `--state-dtype bfloat16`"]


def test_the_packed_decode_switch_comes_from_the_profile():
    # vLLM's GDN packed decode is on by default (`VLLM_ENABLE_FLA_PACKED_RECURRENT_DECODE` defaults to "1" in
    # vllm/envs.py of every release from 0.18.0): the note says so, and asks for no export.
    sglang = check_builtin("Qwen/Qwen3-Next-80B-A3B-Instruct", Deployment(engine="sglang"))
    assert "GDR133" not in sglang.report.codes()
    vllm = check_builtin("Qwen/Qwen3-Next-80B-A3B-Instruct", Deployment(engine="vllm@0.28"))
    (switch,) = [d for d in vllm.report if d.code == "GDR133"]
    assert switch.message == ("vLLM 0.28 runs the GDN packed decode by default "
                              "(`VLLM_ENABLE_FLA_PACKED_RECURRENT_DECODE` defaults to \"1\"); "
                              "`VLLM_ENABLE_FLA_PACKED_RECURRENT_DECODE=0` turns it off")
    assert switch.fixes == ["leave `VLLM_ENABLE_FLA_PACKED_RECURRENT_DECODE` unset (or 1) for the packed decode "
                            "checked here"]
    assert vllm.decode is not None and vllm.decode.packed


# -- no engine branches outside the profile module -------------------------------------------------------------
# A comparison of an engine variable, or of anything with an engine's name as a string literal.
_ENGINE_NAMES = "|".join(sorted({p.name for p in PROFILES}))
_BRANCH = re.compile(
    r"\bengine\s*(?:==|!=)"  # engine == ..., ctx.engine != ...
    r"|(?:==|!=)\s*\w*engine\b"  # ... == engine
    rf"|(?:==|!=)\s*['\"](?:{_ENGINE_NAMES})['\"]"  # ... == "vllm"
    rf"|['\"](?:{_ENGINE_NAMES})['\"]\s*(?:==|!=)"  # "vllm" == ...
    rf"|\bin\s*[(\[{{]\s*['\"](?:{_ENGINE_NAMES})['\"]"  # ... in ("sglang", "vllm")
)
ALLOWED = {"engines.py"}


def _branches(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if _BRANCH.search(line)]


def test_the_branch_pattern_catches_the_usual_spellings():
    caught = ['if engine == "vllm":', 'x = 0 if ctx.engine != "sglang" else 1', 'if "vllm" == name:',
              'ok = backend in ("sglang", "vllm")', 'if name == engine:', "if kind != 'sglang':"]
    assert _branches("\n".join(caught)) == caught
    assert _branches('profile = profile_for(engine)\nif backend == "builtin":\nengine = "sglang"') == []


def test_no_engine_branches_outside_the_profile_module():
    found = {}
    for path in sorted(SRC.rglob("*.py")):
        relative = path.relative_to(SRC).as_posix()
        if relative in ALLOWED:
            continue
        lines = _branches(path.read_text())
        if lines:
            found[relative] = lines
    assert found == {}


# -- the CLI -----------------------------------------------------------------------------------------------------
@pytest.fixture
def good(tmp_path: Path, monkeypatch) -> Path:
    from cli_checkpoints import clean_output_env, write_good

    clean_output_env(monkeypatch)
    monkeypatch.chdir(tmp_path)
    return write_good(tmp_path / "good")


@pytest.mark.parametrize("engine,profile,slot_note", [
    ("sglang", "sglang@0.5.23", "slot 0 reserved"),
    ("vllm", "vllm@0.33", "block 0 null"),
    ("vllm@0.28", "vllm@0.28", "block 0 null"),
    ("sglang@0.5.23", "sglang@0.5.23", "slot 0 reserved"),
])
def test_cli_engine_option_takes_a_name_or_a_version(good: Path, engine: str, profile: str, slot_note: str):
    from cli_checkpoints import run_cli

    result = run_cli(str(good), "--isolated", "--engine", engine, "--output-format", "json")
    assert result.exit_code == 0, result.stderr
    deployment = json.loads(result.stdout)["results"][0]["deployment"] if "results" in json.loads(
        result.stdout) else json.loads(result.stdout)["deployment"]
    assert (deployment["engine"], deployment["engine_profile"]) == (engine, profile)
    full = run_cli(str(good), "--isolated", "--engine", engine)
    assert f"({slot_note})" in full.stdout


@pytest.mark.parametrize("engine,problem", [
    ("trtllm", "unknown engine 'trtllm'; expected one of: sglang, vllm, optionally @version (sglang@0.5.23, "
               "vllm@0.34.0, ...)"),
    ("vllm@0.1", f"no vLLM profile for version '0.1' (engine 'vllm@0.1'); known versions: {_VLLM_VERSIONS}, or a "
                 "later release"),
])
def test_cli_unknown_engine_is_one_line_and_exit_2(good: Path, engine: str, problem: str):
    from cli_checkpoints import run_cli

    result = run_cli(str(good), "--isolated", "--engine", engine)
    assert result.exit_code == 2 and result.stdout == ""
    assert "Traceback" not in result.stderr
    (line,) = [line for line in result.stderr.splitlines() if line.strip()]
    assert line.startswith("error: ") and problem in line


@pytest.mark.parametrize("command", ["check", "call", "dry-run"])
def test_an_unknown_state_dtype_names_the_option(good: Path, command: str):
    from cli_checkpoints import run_cli

    arguments = {"check": [str(good)], "call": ["call", "recording.json", "--model", str(good)],
                 "dry-run": ["dry-run", str(good)]}[command]
    result = run_cli(*arguments, "--isolated", "--state-dtype", "fp8")
    assert (result.exit_code, result.stdout) == (2, "")
    assert result.stderr.splitlines()[0] == ("error: Invalid value for --state-dtype: unknown state dtype 'fp8'; "
                                             "expected one of: float32, bfloat16, float16")


def test_config_engine_takes_a_version(good: Path, tmp_path: Path):
    from cli_checkpoints import run_cli

    (tmp_path / "pyproject.toml").write_text('[tool.gdr-check]\nengine = "vllm@0.28"\n')
    result = run_cli(str(good), "--output-format", "json")
    assert result.exit_code == 0, result.stderr
    (tmp_path / "pyproject.toml").write_text('[tool.gdr-check]\nengine = "vllm@0.2"\n')
    bad = run_cli(str(good))
    assert bad.exit_code == 2
    assert "`tool.gdr-check.engine`" in bad.stderr and "no vLLM profile for version '0.2'" in bad.stderr


def test_the_engines_page_names_every_profile_and_flag():
    page = (SRC.parents[1] / "docs" / "engines.md").read_text()
    for profile in PROFILES:
        assert f"`{profile.spec}`" in page
        for flag in (profile.state_dtype_flag, profile.conv_dtype_flag, profile.cache_size_flag,
                     profile.memory_ratio_flag, profile.scheduler_strategy_flag, profile.state_dtype_env,
                     profile.packed_decode_env):
            assert flag is None or flag in page, flag


# -- the call rules read the profile, not the engine's name ------------------------------------------------------
_DRIFT = ": the state drifts from fp32 beta, more with longer contexts"


@pytest.mark.parametrize("engine,messages", [
    ("sglang", [("warning", "sglang 0.5.23 rounds beta = sigmoid(b) to bfloat16 before the update" + _DRIFT)]),
    ("vllm@0.28", [("warning", "vLLM 0.28 rounds beta = sigmoid(b) to bfloat16 before the update" + _DRIFT)]),
    ("vllm@0.29", []),
    ("vllm", []),
])
def test_cli_beta_rounding_warning_follows_the_engine_profile(good: Path, engine: str,
                                                             messages: list[tuple[str, str]]):
    from cli_checkpoints import run_cli

    result = run_cli(str(good), "--isolated", "--engine", engine, "--output-format", "json")
    assert result.exit_code == 0, result.stderr
    document = json.loads(result.stdout)
    diagnostics = document["results"][0]["diagnostics"] if "results" in document else document["diagnostics"]
    assert [(d["severity"], d["message"]) for d in diagnostics if d["code"] == "GDR253"] == messages


def _indices_call(values: tuple[int, ...]):
    from gdr_check.checks.examples import CallExample, tensor

    return CallExample({"ssm_state_indices": tensor(len(values), values=values)}).call()


def test_slot_zero_is_reserved_under_sglang_only():
    live_in_zero = _indices_call((0, 1, 5, 2))
    assert [d.message for d in run_contract(live_in_zero, "sglang") if d.code == "GDR247"] == [
        "row 0 uses slot 0, which sglang reserves as the dummy slot that padding rows write"]
    for engine in ("vllm", "vllm@0.28"):  # vLLM skips index 0 (its null block): nothing to report
        assert [d.code for d in run_contract(live_in_zero, engine) if d.code in ("GDR241", "GDR242", "GDR247")] == []


def test_trailing_slot_zero_padding_repeats_only_where_slot_zero_is_reserved():
    padded = _indices_call((3, 1, 0, 0))
    assert [d.code for d in run_contract(padded, "sglang") if d.code in ("GDR242", "GDR247")] == []
    assert [d.code for d in run_contract(padded, "vllm") if d.code in ("GDR242", "GDR247")] == []  # skipped rows
    repeated = _indices_call((3, 1, 3, 0))
    assert [d.message for d in run_contract(repeated, "vllm") if d.code == "GDR242"] == [
        "slot 3 is used by rows 0, 2 of one batch"]


def test_grid_limit_and_state_dtype_fix_come_from_the_profile():
    from gdr_check.base.registry import RULE_SET
    from gdr_check.checks.examples import CallExample

    wide = RULE_SET.rules["GDR244"].example.call()
    assert [d.code for d in run_contract(wide, "sglang") if d.code == "GDR244"] == ["GDR244"]
    assert [d.code for d in run_contract(wide, "vllm@0.28") if d.code == "GDR244"] == []  # vLLM splits the grid
    bf16 = RULE_SET.rules["GDR249"].example.call()
    fixes = {engine: [d.fixes for d in run_contract(bf16, engine) if d.code == "GDR249"][0]
             for engine in ("sglang", "vllm")}
    assert fixes["sglang"][0] == ("keep the SSM state in float32 (`--mamba-ssm-dtype float32`) if memory allows "
                                  "(2x the state bytes)")
    assert "`--mamba-ssm-cache-dtype float32`" in fixes["vllm"][0]
    kda = CallExample({}, variant="kda").call()
    assert [d.message for d in run_contract(kda, "sglang") if d.code == "GDR226"] == [
        "with `use_qk_l2norm_in_kernel=True`, sglang skips its CUDA KDA decode kernel: B=4 < 8; K, V = 8, 8 "
        "(needs 128, 128); `b` is float32"]
    assert [d.code for d in run_contract(kda, "vllm") if d.code == "GDR226"] == []  # no CUDA fast path
