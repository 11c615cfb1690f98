"""Every engine release epoch against the facts read from that release's own wheel.

tests/data/engine_facts/<engine>-<release>.json is what scripts/verify_engine_profiles.py read from the released
wheel (the packed decode wrappers and kernels, the layers' decode calls, the environment switch, the flags), with
the wheel's sha256. The expected values here come from those files, never from the profiles: the decode path,
the skip rule, beta, the grid limit and the flags that `--engine name@release` reports must be the ones the
release's own source implies.
"""

from __future__ import annotations

import json
import re
import sys
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from gdr_check.deployment.settings import Deployment
from gdr_check.engines.profiles import (
    NEWEST_VERIFIED,
    PROFILES,
    VERIFIED_RELEASES,
    UnknownEngineError,
    choose_engine,
    installed_engine,
    profile_for,
    substitution_note,
)
from gdr_check.kernel.layout import row_is_live
from gdr_check.pipeline.model_check import check_builtin
from repo_scripts import script

ROOT = Path(__file__).resolve().parents[1]
FACTS = ROOT / "tests" / "data" / "engine_facts"
GDN_MODEL = "Qwen/Qwen3-Next-80B-A3B-Instruct"  # HV = 32 value heads at TP 1
KDA_MODEL = "moonshotai/Kimi-Linear-48B-A3B-Instruct"  # HV = 32
GDN_PACKED = "fused_recurrent_gated_delta_rule_packed_decode"
KDA_PACKED = "fused_recurrent_kda_packed_decode"
# The releases the issue names, each on a GDN and a KDA model.
RELEASES = ("vllm@0.33.0", "vllm@0.20.0", "vllm@0.27.1", "sglang@0.5.13", "sglang@0.5.21")


def verifier() -> ModuleType:
    return script("verify_engine_profiles")


@cache
def facts(spec: str) -> dict[str, Any]:
    engine, _, release = spec.partition("@")
    data: dict[str, Any] = json.loads((FACTS / f"{engine}-{release}.json").read_text(encoding="utf-8"))
    return data


def fact_files() -> list[str]:
    return sorted(f"{path.stem.split('-')[0]}@{path.stem.split('-', 1)[1]}" for path in FACTS.glob("*.json"))


# -- the profiles agree with every wheel read ----------------------------------------------------------------------
@pytest.mark.parametrize("spec", fact_files())
def test_the_profile_of_each_verified_release_agrees_with_its_wheel(spec: str):
    data = facts(spec)
    assert re.fullmatch(r"[0-9a-f]{64}", data["wheel_sha256"]) and data["files"]
    assert verifier().compare(data) == []


def test_the_verified_releases_are_the_facts_on_file():
    on_file = {name: sorted(spec.partition("@")[2] for spec in fact_files() if spec.startswith(name + "@"))
               for name in VERIFIED_RELEASES}
    assert {name: sorted(releases) for name, releases in VERIFIED_RELEASES.items()} == on_file
    assert NEWEST_VERIFIED == {"sglang": "0.5.23", "vllm": "0.34.0"}


def test_a_changed_fact_is_a_disagreement():
    # The comparison can fail: a wheel that kept beta in fp32 disagrees with a profile that rounds it.
    data = json.loads(json.dumps(facts("vllm@0.28.0")))
    data["gdn_packed"]["beta"] = "fp32"
    (problem,) = verifier().compare(data)
    assert problem == ("vllm@0.28 (vllm 0.28.0): gdn_beta_rounding: profile says 'b.dtype', the wheel None")
    data = json.loads(json.dumps(facts("vllm@0.20.0")))
    data["flags"]["--mamba-ssm-cache-dtype"]["choices"].append("bfloat16")
    assert [p.split(":")[1].strip() for p in verifier().compare(data)] == ["flags"]


# -- what CI verifies: the newest release of each engine ----------------------------------------------------------
def _newest_on_file(engine: str) -> str:
    """The newest release whose facts are on file (the newest the verifier has read)."""
    releases = [spec.partition("@")[2] for spec in fact_files() if spec.startswith(engine + "@")]
    return max(releases, key=lambda release: tuple(int(part) for part in release.split(".")))


@pytest.mark.parametrize("engine", ["sglang", "vllm"])
def test_newest_verifies_the_index_release_or_else_the_newest_read(engine: str):
    newest = verifier().newest_release
    read = _newest_on_file(engine)
    assert newest(engine, read) == (read, f"{engine}: {read} is the newest release on the index and the newest "
                                          f"verified")
    assert newest(engine, None) == (read, f"{engine}: the index gave no newest release; verifying the newest "
                                          f"verified one, {read}")
    later = re.sub(r"\d+$", lambda number: str(int(number.group()) + 1), read)  # 0.34.0 -> 0.34.1
    assert newest(engine, later) == (later, (
        f"{engine}: {later} on the index is newer than the newest verified release, {read}: it is checked against "
        f"the newest profile (add it to VERIFIED_RELEASES and tests/data/engine_facts once it agrees)"))
    assert newest(engine, "0.1.0")[0] == read
    assert newest(engine, "latest")[0] == read


def test_newest_reads_pips_answer(monkeypatch: pytest.MonkeyPatch):
    import subprocess

    module = verifier()
    answers = {"vllm": (0, "vllm (0.34.0)\nAvailable versions: 0.34.0, 0.33.0\n"), "sglang": (1, "")}

    def run(command: list[str], **_: Any) -> subprocess.CompletedProcess[str]:
        code, out = answers[command[-1]]
        return subprocess.CompletedProcess(command, code, out, "ERROR: no index")

    monkeypatch.setattr(module.subprocess, "run", run)
    assert module.index_newest("vllm") == "0.34.0"
    assert module.index_newest("sglang") is None


def test_every_profile_has_a_verified_release_and_keeps_float32():
    for profile in PROFILES:
        mine = [r for r in VERIFIED_RELEASES[profile.name] if profile_for(f"{profile.name}@{r}") is profile]
        assert mine, profile.spec
        assert profile.state_dtype_setting("float32") == profile.state_dtype_fix()


# -- what each release's report says, from its wheel's facts ---------------------------------------------------
def _axis_value(axis: str, B: int, HV: int) -> int:
    value = eval(axis, {"__builtins__": {}}, {"NV": 1, "B": B, "HV": HV, "H": HV})
    assert isinstance(value, int)
    return value


def _grid_fails(packed: dict[str, Any], B: int, HV: int) -> bool:
    """Whether the wheel's own launch grid exceeds CUDA's limits at (B, HV): gridDim.x <= 2**31 - 1, y and z <=
    65535; where the wrapper chooses between two grids, its own condition picks."""
    grids = packed["grids"]
    grid = grids[0]
    if len(grids) == 2:
        condition = eval(packed["grid_condition"], {"__builtins__": {}}, {"B": B, "HV": HV})
        grid = grids[0] if condition else grids[1]
    values = [_axis_value(axis, B, HV) for axis in grid]
    return values[0] > 2**31 - 1 or any(value > 65535 for value in values[1:])


def _gdn_expected(spec: str) -> tuple[str, bool]:
    data = facts(spec)
    decode = data["decode"]
    packed = (data["gdn_packed"] is not None
              and ("packed_decode" in decode["gdn_layer_calls"] if data["engine"] == "sglang" else
                   bool(decode["gdn_layers"])))
    return (GDN_PACKED, True) if packed else (decode.get("qwen3_next_decode_calls", ["?"])[0], False)


def _kda_expected(spec: str) -> tuple[str, bool]:
    data = facts(spec)
    decode = data["decode"]
    if data["engine"] == "sglang":
        packed = data["kda_packed"] is not None and "packed_decode" in decode["kda_layer_calls"]
        return (KDA_PACKED, True) if packed else ("/".join(decode["kda_triton_decode_calls"]), False)
    calls = {call for layer in decode["kda_layer_calls"].values() for call in layer}
    # vLLM's own KDA packed op has another argument list: never the contract's packed call
    return (KDA_PACKED if KDA_PACKED in calls else "fused_recurrent_kda"), False


@pytest.mark.parametrize("spec", RELEASES)
def test_gdn_decode_path_beta_and_grid_limit_follow_the_wheel(spec: str):
    data = facts(spec)
    B = 4096  # B * HV = 131072 > 65535; B itself is within every grid's limits
    check = check_builtin(GDN_MODEL, Deployment(engine=spec, batch=B, state_dtype="bfloat16"))
    assert check.decode is not None and check.heads is not None and check.heads.HV == 32
    assert (check.decode.kernel, check.decode.packed) == _gdn_expected(spec)
    codes = set(check.report.codes())
    assert ("GDR253" in codes) == (data["gdn_packed"]["beta"] == "b.dtype")  # beta rounded to b's dtype
    assert ("GDR244" in codes) == _grid_fails(data["gdn_packed"], B, 32)
    switch = data["decode"].get("env_switch")
    if switch is not None:  # vLLM: on by default, the variable turns it off
        assert switch["default"] == "1" and ("GDR133" in codes)
        assert f"`{switch['name']}` defaults to \"1\"" in check.decode.reason


@pytest.mark.parametrize("spec", RELEASES)
def test_kda_decode_path_and_grid_limit_follow_the_wheel(spec: str):
    data = facts(spec)
    B = 4096
    check = check_builtin(KDA_MODEL, Deployment(engine=spec, batch=B, state_dtype="bfloat16"))
    assert check.decode is not None
    assert (check.decode.kernel, check.decode.packed) == _kda_expected(spec)
    codes = set(check.report.codes())
    if check.decode.packed:  # the bf16 state keeps sglang's CUDA KDA kernel out: Triton's grid launches
        assert ("GDR244" in codes) == _grid_fails(data["kda_packed"], B, 32)
    else:
        assert "GDR244" not in codes and "GDR134" in codes


@pytest.mark.parametrize("spec", [*RELEASES, "vllm@0.18.0", "sglang@0.5.10"])
def test_the_skip_rule_follows_the_wheel(spec: str):
    skip = facts(spec)["gdn_packed"]["skip_at_or_below"]  # -1: `idx < 0`, 0: `idx <= 0`
    assert row_is_live(0, spec) == (0 > skip)
    assert row_is_live(1, spec) and not row_is_live(-1, spec)


_FLAG = re.compile(r"(--[a-z][a-z0-9-]+)(?:[ =]([A-Za-z0-9_.]+))?")


@pytest.mark.parametrize("spec", [*RELEASES, "vllm@0.22.0", "vllm@0.32.0", "sglang@0.5.10", "sglang@0.5.23"])
def test_fixes_name_only_flags_and_choices_the_release_has(spec: str):
    flags = facts(spec)["flags"]
    engine_flags = {name for other in fact_files() for name in facts(other)["flags"]}
    # both state dtypes, a budget too small for the batch, and a huge batch: the state, budget and grid fixes
    checks = [check_builtin(model, Deployment(engine=spec, batch=4096, state_dtype=state, gpu_memory=2**30))
              for model in (GDN_MODEL, KDA_MODEL) for state in ("float32", "bfloat16")]
    named = [(flag, value) for check in checks for diagnostic in check.report for fix in diagnostic.fixes
             for flag, value in _FLAG.findall(fix) if flag in engine_flags]
    assert named, "the report names no engine flag: the test would check nothing"
    for flag, value in named:
        assert flag in flags, f"{spec} has no {flag}"
        choices = flags[flag]["choices"]
        assert choices is None or not value or value in choices, f"{spec}: {flag} has no choice {value!r}"
        assert not flags[flag]["no_effect"] and not flags[flag]["replaced_by"]


def test_the_bfloat16_state_fix_appears_only_where_the_flag_has_it():
    def halves(spec: str) -> bool:
        check = check_builtin(GDN_MODEL, Deployment(engine=spec, batch=4096, state_dtype="float32",
                                                     gpu_memory=2**30))
        return any("bfloat16" in fix for d in check.report for fix in d.fixes if "halve" in fix)

    for spec in ("vllm@0.20.0", "vllm@0.22.0", "vllm@0.33.0", "sglang@0.5.13"):
        flag = "--mamba-ssm-cache-dtype" if spec.startswith("vllm") else "--mamba-ssm-dtype"
        assert halves(spec) == ("bfloat16" in facts(spec)["flags"][flag]["choices"]), spec


# -- the GPU where it changes the path ------------------------------------------------------------------------
@pytest.mark.parametrize("spec", ["sglang@0.5.13", "sglang@0.5.21", "sglang@0.5.10"])
def test_sm100_with_a_bf16_state_leaves_the_packed_kernel_where_the_release_says(spec: str):
    rule = facts(spec)["decode"]["sm100_bf16_state"]
    for sm, state in ((100, "bfloat16"), (90, "bfloat16"), (100, "float32"), (None, "bfloat16")):
        check = check_builtin(GDN_MODEL, Deployment(engine=spec, state_dtype=state, sm=sm))
        assert check.decode is not None
        moved = rule is not None and sm is not None and sm // 10 == 10 and state == "bfloat16"
        assert check.decode.packed == (not moved), (spec, sm, state)
        if moved:
            assert check.decode.kernel == "flashinfer GDN decode"
            assert check.decode.switch == "`--linear-attn-decode-backend triton` keeps the packed kernel"
            assert "triton" in facts(spec)["flags"]["--linear-attn-decode-backend"]["choices"]


def test_a_kda_layer_on_sm100_stops_where_kda_takes_no_flashinfer_decode():
    backends = facts("sglang@0.5.13")["decode"]["kda_decode_backends"]
    assert "flashinfer" not in backends
    check = check_builtin(KDA_MODEL, Deployment(engine="sglang@0.5.13", state_dtype="bfloat16", sm=100))
    assert check.decode is not None and not check.decode.packed
    assert check.decode.reason.endswith(f"(it takes {', '.join(backends)}): the engine stops at start-up")


# -- resolving a release -------------------------------------------------------------------------------------
@pytest.mark.parametrize("spec,profile", [
    ("sglang@0.5.21", "sglang@0.5.20"), ("sglang@0.5.13", "sglang@0.5.13"), ("sglang@0.5.12", "sglang@0.5.11"),
    ("vllm@0.27.1", "vllm@0.27"), ("vllm@0.33.0", "vllm@0.33"), ("vllm@0.34.0", "vllm@0.33"),
    ("vllm@0.19.0", "vllm@0.18"), ("vllm@0.17.1", "vllm@0.17"), ("sglang@0.5.9", "sglang@0.5.9"),
    ("vllm", "vllm@0.33"), ("sglang", "sglang@0.5.23"),
])
def test_any_release_resolves_to_its_epoch(spec: str, profile: str):
    assert profile_for(spec).spec == profile


def test_a_release_before_the_packed_decode_names_the_kernel_it_decodes_with():
    gdn = check_builtin(GDN_MODEL, Deployment(engine="vllm@0.17.1"))
    assert gdn.decode is not None and not gdn.decode.packed
    assert gdn.decode.kernel == facts("vllm@0.17.1")["decode"]["qwen3_next_decode_calls"][0]
    assert "GDR134" in gdn.report.codes() and gdn.call is None and gdn.pools  # the rest is still checked
    kda = check_builtin(KDA_MODEL, Deployment(engine="sglang@0.5.9"))
    assert kda.decode is not None and kda.decode.kernel == "fused_sigmoid_gating_delta_rule_update"
    with pytest.raises(UnknownEngineError, match="no sglang profile for version '0.5.8'"):
        profile_for("sglang@0.5.8")


def test_a_release_newer_than_the_newest_verified_is_checked_with_a_warning():
    assert profile_for("vllm@0.35.0").spec == "vllm@0.33"
    assert substitution_note("vllm@0.35.0") == (
        "vLLM 0.35.0 is newer than the newest release gdr-check verified, vLLM 0.34.0: checked as vLLM 0.33, whose "
        "facts may have changed since (scripts/verify_engine_profiles.py reads a release's wheel)")
    assert substitution_note("vllm@0.27.1") == (
        "vLLM 0.27.1 is checked as vLLM 0.27, the profile of its release epoch (its wheel was verified against it)")


# -- the installed engine ------------------------------------------------------------------------------------------
def _install(site: Path, name: str, version: str) -> None:
    info = site / f"{name}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n", encoding="utf-8")


def test_the_installed_engine_is_the_default_profile(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    assert choose_engine(None, None) == ("sglang", "default")  # nothing installed here
    _install(tmp_path, "vllm", "0.27.1")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert installed_engine() == "vllm@0.27.1"
    assert choose_engine(None, None) == ("vllm@0.27.1", "installed")
    assert choose_engine(None, "sglang@0.5.20") == ("sglang@0.5.20", "config")
    assert choose_engine("vllm@0.20.0", "sglang") == ("vllm@0.20.0", "flag")
    assert "vllm" not in sys.modules  # read from the package metadata, never imported
    deployment = Deployment(engine="vllm@0.27.1", engine_reason="installed")
    assert deployment.profile_note == (
        "engine profile vllm@0.27: vllm@0.27.1 is installed in this Python environment (read from its package "
        "metadata); `--engine` checks for another; vLLM 0.27.1 is checked as vLLM 0.27, the profile of its release "
        "epoch (its wheel was verified against it)")


def test_an_installed_release_no_profile_covers_is_not_the_default(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch):
    _install(tmp_path, "sglang", "0.4.10")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert installed_engine() is None and choose_engine(None, None) == ("sglang", "default")


# -- the command line ------------------------------------------------------------------------------------------
@pytest.fixture
def good(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    from cli_checkpoints import clean_output_env, write_good

    clean_output_env(monkeypatch)
    monkeypatch.chdir(tmp_path)
    return write_good(tmp_path / "good")


def _deployment(result: Any) -> dict[str, Any]:
    document = json.loads(result.stdout)
    found: dict[str, Any] = (document["results"][0] if "results" in document else document)["deployment"]
    return found


def test_reports_name_the_profile_and_why_it_was_chosen(good: Path, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch):
    from cli_checkpoints import run_cli

    default = _deployment(run_cli(str(good), "--isolated", "--output-format", "json"))
    assert (default["engine_profile"], default["engine_profile_reason"]) == ("sglang@0.5.23", "default")
    flag = _deployment(run_cli(str(good), "--isolated", "--engine", "vllm@0.27.1", "--output-format", "json"))
    assert (flag["engine"], flag["engine_profile"], flag["engine_profile_reason"]) == (
        "vllm@0.27.1", "vllm@0.27", "flag")
    (tmp_path / "pyproject.toml").write_text('[tool.gdr-check]\nengine = "sglang@0.5.21"\n')
    config = _deployment(run_cli(str(good), "--output-format", "json"))
    assert (config["engine_profile"], config["engine_profile_reason"]) == ("sglang@0.5.20", "config")
    (tmp_path / "pyproject.toml").unlink()
    site = tmp_path / "site"
    _install(site, "vllm", "0.20.0")
    monkeypatch.syspath_prepend(str(site))
    found = run_cli(str(good), "--isolated", "--output-format", "json")
    installed = _deployment(found)
    assert (installed["engine"], installed["engine_profile"], installed["engine_profile_reason"]) == (
        "vllm@0.20.0", "vllm@0.20", "installed")
    text = run_cli(str(good), "--isolated")
    assert ("engine profile vllm@0.20: vllm@0.20.0 is installed in this Python environment (read from its package "
            "metadata); `--engine` checks for another") in " ".join(text.stdout.split())


def test_the_librarys_engine_argument_is_reported_as_an_argument(good: Path, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch):
    from gdr_check.pipeline.library import TargetSettings, check_targets

    def reported(settings: TargetSettings) -> tuple[str, str]:
        (result,) = check_targets(str(good), lambda target: settings)
        deployment = result.check.to_dict()["deployment"]
        return deployment["engine_profile"], deployment["engine_profile_reason"]

    assert reported(TargetSettings(tp_sizes=[1], engine="vllm@0.27.1")) == ("vllm@0.27", "argument")
    assert reported(TargetSettings(tp_sizes=[1], engine="sglang")) == ("sglang@0.5.23", "argument")
    assert reported(TargetSettings(tp_sizes=[1])) == ("sglang@0.5.23", "default")
    site = tmp_path / "site"
    _install(site, "vllm", "0.20.0")
    monkeypatch.syspath_prepend(str(site))
    assert reported(TargetSettings(tp_sizes=[1])) == ("vllm@0.20", "installed")


@pytest.mark.parametrize(("args", "sm"), [(["--gpu", "B200"], 100), (["--gpu", "h100"], 90), (["--sm", "103"], 103),
                                          ([], None)])
def test_the_gpu_reaches_the_report(good: Path, args: list[str], sm: int | None):
    from cli_checkpoints import run_cli

    result = run_cli(str(good), "--isolated", "--engine", "sglang@0.5.21", *args, "--output-format", "json")
    assert result.exit_code in (0, 1), result.stderr
    assert _deployment(result)["sm"] == sm


@pytest.mark.parametrize(("args", "problem"), [
    (["--gpu", "tpu-v5"], "Invalid value for --gpu: unknown GPU 'tpu-v5'; expected one of: a100,"),
    (["--sm", "7"], "Invalid value for --sm: expected a compute capability times ten, such as 90 (H100) or 100 "
                    "(B200), got 7"),
    (["--gpu", "h100", "--sm", "90"], "Invalid value for --gpu: give --gpu or --sm, not both"),
])
def test_a_bad_gpu_is_one_line_and_exit_2(good: Path, args: list[str], problem: str):
    from cli_checkpoints import run_cli

    result = run_cli(str(good), "--isolated", *args)
    assert result.exit_code == 2 and result.stdout == ""
    (line,) = [line for line in result.stderr.splitlines() if line.strip()]
    assert line.startswith("error: ") and problem in line, line


def test_the_verifier_compares_a_release_in_a_fresh_process():
    """`scripts/verify_engine_profiles.py` as CI runs it: its own interpreter, where no test has loaded the rules
    before (it read the wrapper orders from a registry that a check no longer fills with every rule, and failed
    with a KeyError in CI only)."""
    import subprocess

    script = ("import json, sys; sys.path.insert(0, 'scripts'); import verify_engine_profiles as v; "
              "facts = json.load(open('tests/data/engine_facts/sglang-0.5.23.json')); print(v.compare(facts))")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert (done.returncode, done.stdout, done.stderr) == (0, "[]\n", "")
