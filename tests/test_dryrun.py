"""`gdr-check dry-run`: end to end on small checkpoints under the Triton interpreter, plus the torch-free parts.

End-to-end runs start the real child process (`python -m gdr_check.pipeline.dryrun.child`), which picks the interpreter
because this machine has no CUDA device (or GDR_CHECK_TEST_GPU is unset and conftest set TRITON_INTERPRET).
Sizes are tiny (H=2, HV=4, K=V=16; batch 2, 2 steps) so each run costs a few seconds.

The child-crash and timeout tests install their fault in the child by monkeypatching (child_faults.py).
"""

from __future__ import annotations

import ast
import dataclasses
import importlib.metadata
import importlib.util
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import child_faults
import gdr_check.pipeline.dryrun.entry
from checkpoint_builders import kimi_config, kimi_tensors, qwen3_next_config, qwen_tensors, write_checkpoint
from gdr_check.base.tensor_spec import TensorSpec
from gdr_check.call.packed_call import PackedDecodeCall
from gdr_check.checks import rules_dryrun
from gdr_check.cli.main import main
from gdr_check.deployment.settings import Deployment
from gdr_check.engines.profiles import profile_for
from gdr_check.pipeline.dryrun import backends
from gdr_check.pipeline.dryrun import driver as runner_api
from gdr_check.pipeline.dryrun import rank_run as ranks_api
from gdr_check.pipeline.dryrun.child_launch import ChildOutcome
from gdr_check.pipeline.dryrun.diagnose import dryrun_diagnostics
from gdr_check.pipeline.dryrun.geometry import launch_geometry, restrided
from gdr_check.pipeline.dryrun.kernels import KernelUnderTest
from gdr_check.pipeline.dryrun.plan import DryRunPlan, plan_for
from gdr_check.pipeline.model_check import check_builtin, check_model
from rule_patterns import message_pattern

REPO = Path(__file__).resolve().parents[1]
SGLANG_SOURCE = REPO / ".sglang" / "src"
FAULT = child_faults.DRYRUN_FAULT
# The torch-free CI runs (Python 3.10/3.13, dependency floors) install no kernel extra: what needs it skips.
KERNEL_EXTRA = all(importlib.util.find_spec(name) is not None for name in ("torch", "triton", "numpy"))
needs_kernel_extra = pytest.mark.skipif(not KERNEL_EXTRA, reason="the kernel extra (torch, triton) is not installed")


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("dryrun")
    gdn = qwen3_next_config(layers=4, H=2, HV=4, K=16, V=16)
    kda = kimi_config(layers=4, H=4, D=16)
    return {
        "gdn": write_checkpoint(root / "gdn", gdn, qwen_tensors(gdn)),
        "kda": write_checkpoint(root / "kda", kda, kimi_tensors(kda)),
    }


def dry_run(capsys, *args: str) -> tuple[int, str, str]:
    code = main(["dry-run", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def dry_run_json(capsys, *args: str) -> tuple[int, dict]:
    code, out, _ = dry_run(capsys, *args, "--output-format", "json")
    return code, json.loads(out)


def all_checks_passed(document: dict) -> bool:
    return all(check.get("passed", True)
               for step in document["steps"] for run in step["kernels"].values() for check in run.values()
               if isinstance(check, dict))


# -- end to end ----------------------------------------------------------------------------------------------------
def _sglang_source() -> str | None:
    return os.environ.get("GDR_CHECK_SGLANG_PATH") or (str(SGLANG_SOURCE) if SGLANG_SOURCE.is_dir() else None)


@pytest.fixture(scope="module")
def passing_runs(checkpoints) -> dict[str, tuple[int, str, str]]:
    """Every end-to-end run expected to pass, started together: the interpreter runs are CPU-bound but each
    child spends seconds importing torch, so running them side by side keeps the module well under a minute."""
    if not KERNEL_EXTRA:
        pytest.skip("the kernel extra (torch, triton) is not installed")
    common = ["--batch", "2", "--steps", "2"]
    commands = {f"{variant}-{engine}": [str(checkpoints[variant]), *common, "--engine", engine,
                                        "--output-format", "json"]
                for variant in ("gdn", "kda") for engine in ("sglang", "vllm")}
    commands["full"] = [str(checkpoints["gdn"]), *common, "--output-format", "full"]
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}  # the CPU path, also on a machine with a GPU
    if _sglang_source():
        env["GDR_CHECK_SGLANG_PATH"] = _sglang_source()  # type: ignore[assignment]
        commands["sglang-backend"] = [str(checkpoints["gdn"]), *common, "--backend", "sglang",
                                      "--output-format", "json"]
    processes = {name: subprocess.Popen([sys.executable, "-m", "gdr_check", "dry-run", *args], env=env, text=True,
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE)
                 for name, args in commands.items()}
    results = {}
    for name, process in processes.items():
        out, err = process.communicate(timeout=300)
        results[name] = (process.returncode, out, err)
    return results


KDA_UNDER_VLLM = ("nothing to dry-run: under vLLM 0.33 the decode step calls its own "
                  "`fused_recurrent_kda_packed_decode` (another argument list), not the contract's packed decode "
                  "kernel")


def test_vllm_kda_is_not_run_with_the_packed_kernel(passing_runs):
    # vLLM 0.33 decodes KDA with its own KDA packed op (another argument list; `fused_recurrent_kda` before 0.27):
    # the packed contract does not apply, nothing runs, exit 1, and
    # the error that says so is in the document (GDR314), not only in the `full` verdict.
    code, out, err = passing_runs["kda-vllm"]
    document = json.loads(out)
    assert code == 1 and not document["launched"] and document["refused_because"] == ["GDR314"]
    assert document["decode_path"]["kernel"] == "fused_recurrent_kda_packed_decode"
    assert not document["decode_path"]["packed"]
    [nothing] = [d for d in document["diagnostics"] if d["code"] == "GDR314"]
    assert nothing["severity"] == "error" and nothing["message"] == KDA_UNDER_VLLM
    assert nothing["notes"] == [
        "vLLM 0.33's KDA layer decodes non-speculative batches with its own KDA packed op (another argument list: "
        "raw_g, raw_beta, state_indices), not the contract's `fused_recurrent_kda_packed_decode`; "
        "`fused_recurrent_kda` only for speculative rows"]
    assert nothing["fixes"][0] == ("dry-run under sglang: `--engine sglang` (its KDA layers decode with "
                                   "`fused_recurrent_kda_packed_decode`)")


@pytest.mark.parametrize("variant,engine", [("gdn", "sglang"), ("gdn", "vllm"), ("kda", "sglang")])
def test_passes_for_each_variant_and_engine(passing_runs, variant, engine):
    code, out, err = passing_runs[f"{variant}-{engine}"]
    document = json.loads(out)
    assert code == 0, ([d["message"] for d in document["diagnostics"]], err)
    assert document["launched"] and document["passed"]
    assert document["environment"]["interpreter"] is True
    assert [s["step"] for s in document["steps"]] == [1, 2]
    assert all_checks_passed(document)
    step = document["steps"][0]
    assert step["live_rows"] == 1 and step["skipped_rows"] == 1
    assert document["geometry"]["call"]["variant"] == variant
    if engine == "sglang":
        # The state is a per-layer view of the stacked pool, with its neighbours allocated around it; the pool's
        # 2 x 5 + 1 rows (sglang counts 5 slots per request, `auto` -> extra_buffer) run as 8 under the interpreter.
        assert document["geometry"]["pool"]["shape"] == [3, 8, 4, 16, 16]
        assert document["geometry"]["pool_layer"] == 1
        assert -1 in step["indices"]
    else:
        assert document["geometry"]["pool"] is None
    codes = [d["code"] for d in document["diagnostics"]]
    assert "GDR321" in codes  # bf16 activations ran as fp16: said, not passed as bf16


def test_json_document_shape(passing_runs):
    document = json.loads(passing_runs["gdn-sglang"][1])
    assert document["schema_version"] == 1 and document["tool"]["name"] == "gdr-check"
    assert document["command"] == "dry-run"
    assert document["deployment"] == {"tp": 1, "batch": 2, "num_slots": 2 * 5 + 1, "state_dtype": "float32",
                                      "conv_dtype": "bfloat16", "engine": "sglang", "engine_profile": "sglang@0.5.23",
                                      "engine_profile_reason": "flag", "sm": None, "gpu_memory": None,
                                      "mamba_strategy": "auto", "speculative_tokens": 0}
    assert document["dry_run"] == {"backend": "builtin", "engine": "sglang", "device_requested": "auto",
                                   "steps_requested": 2, "seed": 0}
    assert set(document["steps"][0]["kernels"]["builtin"]) == {"seconds", "output", "state", "untouched",
                                                               "skipped_rows", "written"}
    assert document["timing"]["meaningful"] is False and "bandwidth_gbps" not in document["timing"]
    for diagnostic in document["diagnostics"]:
        assert {"code", "name", "severity", "message", "notes", "fixes", "url"} <= set(diagnostic)


def test_full_report_on_cpu(passing_runs):
    code, out, err = passing_runs["full"]
    assert code == 0, out + err
    assert "no CUDA device: Triton interpreter on CPU" in out
    assert "layer 1 of ssm_pool [3, 8, 4, 16, 16]" in out
    assert "not a kernel time; no bandwidth figures" in out
    assert "warning[GDR321]" in out
    # the bf16 checkpoint under sglang 0.5.23: beta is rounded to bf16 (GDR253, a warning since the drift grows
    # with context length)
    assert "warning[GDR253]: sglang 0.5.23 rounds beta = sigmoid(b) to bfloat16" in out
    # the pool's 2 x 5 + 1 rows (sglang counts 5 slots per request) run as 8 under the interpreter: said as a note
    assert "info[GDR322]: the interpreter run is at reduced sizes: slots S 11 -> 8" in out
    assert out.rstrip().endswith("dry-run passed: 2 step(s) verified; 0 error(s), 2 warning(s), 1 note(s)")


def test_sglang_backend_runs_the_engine_kernel_and_compares(passing_runs):
    if "sglang-backend" not in passing_runs:
        pytest.skip("no sglang source (.sglang/src or GDR_CHECK_SGLANG_PATH)")
    code, out, err = passing_runs["sglang-backend"]
    document = json.loads(out)
    assert code == 0, ([d["message"] for d in document["diagnostics"]], err)
    assert list(document["kernels"]) == ["sglang", "builtin"]
    for step in document["steps"]:
        assert set(step["kernels"]) == {"sglang", "builtin"}
        assert step["agreement"]["out"]["passed"] and step["agreement"]["initial_state"]["passed"]
    assert all_checks_passed(document)


def test_vllm_backend_on_kda_runs_nothing(capsys, checkpoints, monkeypatch):
    # vLLM decodes KDA with its own KDA packed op, not the contract's: no call to compare, exit 1 (GDR314). The
    # deployment decides before the environment: whether vLLM is installed is not even looked at, so a missing
    # vLLM is not the exit 2 of an unusable environment here (installing it would only lead to this refusal).
    def looked_at(*args):
        raise AssertionError("the backend's environment was looked at for a deployment with nothing to run")

    monkeypatch.setattr(runner_api, "missing_backend", looked_at)
    monkeypatch.setattr(runner_api, "known_unavailable", looked_at)
    code, document = dry_run_json(capsys, str(checkpoints["kda"]), "--batch", "2", "--backend", "vllm")
    assert code == 1
    assert document["decode_path"]["kernel"] == "fused_recurrent_kda_packed_decode"
    assert document["launched"] is False and document["steps"] == [] and document["refused_because"] == ["GDR314"]
    [nothing] = document["diagnostics"]
    assert nothing["code"] == "GDR314" and nothing["message"] == KDA_UNDER_VLLM
    # `--backend vllm` runs vLLM's kernel with vLLM's semantics: the fix changes both options
    assert nothing["fixes"] == [
        "dry-run under sglang: `--engine sglang --backend builtin` (its KDA layers decode with "
        "`fused_recurrent_kda_packed_decode`); `--engine sglang --backend sglang` also runs sglang's own kernel",
        f"`gdr-check {checkpoints['kda']} --engine vllm` with the same deployment options (`--tp`, `--batch`, "
        "`--slots`, `--state-dtype`) still checks the TP split, the state pools and the shapes; only the kernel "
        "contract and the dry-run need the packed call",
    ]


def test_vllm_backend_on_kda_without_vllm_is_still_nothing_to_run(capsys, checkpoints, monkeypatch):
    # With vLLM reported missing, the refusal is still GDR314 (exit 1), not the missing-engine line (exit 2) ...
    monkeypatch.setattr(runner_api, "missing_backend", lambda backend, variant: "vllm is not importable")
    code, document = dry_run_json(capsys, str(checkpoints["kda"]), "--batch", "2", "--backend", "vllm")
    assert code == 1 and document["refused_because"] == ["GDR314"]
    # ... while a deployment with a call to run still stops at the missing engine: exit 2, one line
    code, out, err = dry_run(capsys, str(checkpoints["gdn"]), "--batch", "2", "--backend", "vllm")
    assert code == 2 and err == "error: vllm is not importable\n" and out == ""


def test_nothing_to_run_names_the_model_without_linear_layers(capsys, tmp_path):
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64,
                                  "num_hidden_layers": 2, "num_attention_heads": 4}))
    code, document = dry_run_json(capsys, str(tmp_path), "--device", "cpu")
    assert code == 1 and document["launched"] is False and document["refused_because"] == ["GDR314"]
    [nothing] = document["diagnostics"]
    assert nothing["code"] == "GDR314" and nothing["severity"] == "error"
    assert nothing["message"] == "nothing to dry-run: `LlamaForCausalLM` has no GDN or KDA layers"
    # GDR101's why and place: the `architectures` line of config.json
    assert nothing["notes"] == ["no layer is a GDN/KDA layer by the config, and no tensor is a GDN/KDA parameter"]
    assert nothing["location"]["json_key"] == "architectures"
    assert nothing["fixes"] == [
        "if `LlamaForCausalLM` is the model you deploy, it has no packed decode to verify: leave it out of the "
        "dry-run (`gdr-check TARGET` reports it as GDR101, a note, exit 0)",
        "if the deployed model has GDN or KDA layers, point the dry-run at its checkpoint: this config describes "
        "`LlamaForCausalLM`",
    ]
    # which is what `gdr-check TARGET` does with it
    assert main([str(tmp_path)]) == 0 and "info[GDR101]" in capsys.readouterr().out
    code, out, _ = dry_run(capsys, str(tmp_path), "--device", "cpu", "--ranks", "all", "--tp", "2",
                           "--output-format", "json")
    ranks = json.loads(out)
    assert code == 1 and ranks["refused_because"] == ["GDR314"]
    assert [d["message"] for d in ranks["diagnostics"]] == [nothing["message"]]


def test_kimi_linear_under_vllm_is_nothing_to_run_from_the_library():
    check = check_builtin("moonshotai/Kimi-Linear-48B-A3B-Instruct", Deployment(engine="vllm"))
    result = runner_api.dry_run_check(check)
    assert not result.launched and not result.ok and result.refused_because == ["GDR314"]
    assert result.nothing_to_run is not None and result.nothing_to_run.message == KDA_UNDER_VLLM
    assert result.diagnostics == [result.nothing_to_run]
    ranks = ranks_api.ranks_dry_run(check)
    assert ranks.outcome is None and not ranks.ok and ranks.refused_because == ["GDR314"]
    assert ranks.diagnostics == [result.nothing_to_run]
    # under sglang the same model has its packed call: nothing to say
    assert runner_api.nothing_to_run(check_builtin("moonshotai/Kimi-Linear-48B-A3B-Instruct", Deployment())) is None


def test_an_ok_deployment_without_a_per_rank_call_is_said(checkpoints):
    # An ok report comes with a call; were it not so, the refusal still carries its error (no bare exit 1).
    check = check_model(str(checkpoints["gdn"]), Deployment())
    assert check.report.ok and check.call is not None and runner_api.nothing_to_run(check) is None
    without = dataclasses.replace(check, call=None)
    result = runner_api.dry_run_check(without)
    assert result.refused_because == ["GDR314"]
    assert result.diagnostics[0].message == "nothing to dry-run: the deployment has no per-rank kernel call"
    assert [d.code for d in result.diagnostics] == ["GDR314", "GDR253"]  # and the deployment's own warning


def test_refuses_a_deployment_with_errors(capsys, checkpoints):
    code, out, _ = dry_run(capsys, str(checkpoints["gdn"]), "--tp", "3")
    assert code == 1
    assert "error[GDR121]" in out
    assert "dry-run not launched: the deployment has 3 error(s) (GDR121, GDR122, GDR123)" in out

    code, document = dry_run_json(capsys, str(checkpoints["gdn"]), "--tp", "3")
    assert code == 1
    assert document["launched"] is False and document["passed"] is False
    assert document["refused_because"] == ["GDR121", "GDR122", "GDR123"]
    assert document["steps"] == [] and document["child"] is None


@needs_kernel_extra
def test_child_crash_is_reported(capsys, checkpoints, monkeypatch):
    child_faults.enable(monkeypatch)
    monkeypatch.setenv(FAULT, "abort")
    code, out, _ = dry_run(capsys, str(checkpoints["gdn"]), "--batch", "2")
    assert code == 1
    assert ("error[GDR311]: the dry-run child process was killed by SIGABRT; last stderr line: simulated device "
            f"fault ({FAULT}=abort)") in out

    code, document = dry_run_json(capsys, str(checkpoints["gdn"]), "--batch", "2")
    assert code == 1
    assert document["launched"] is True and document["passed"] is False
    assert document["child"]["returncode"] < 0 and document["child"]["timed_out"] is False
    assert [(d["code"], d["severity"]) for d in document["diagnostics"]] == [("GDR311", "error"),
                                                                             ("GDR253", "warning")]


@needs_kernel_extra
def test_child_timeout_is_reported(capsys, checkpoints, monkeypatch):
    child_faults.enable(monkeypatch)
    monkeypatch.setenv(FAULT, "hang")
    code, document = dry_run_json(capsys, str(checkpoints["gdn"]), "--batch", "2", "--timeout", "1")
    assert code == 1
    assert document["child"]["timed_out"] is True
    assert "did not finish within 1 s and was killed" in document["diagnostics"][0]["message"]


def test_broken_environment_is_one_line_and_exit_2(capsys, checkpoints, tmp_path, monkeypatch):
    fake = tmp_path / "torch"
    fake.mkdir()
    (fake / "__init__.py").write_text("raise ImportError('simulated: no torch here')\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    code, out, err = dry_run(capsys, str(checkpoints["gdn"]), "--batch", "2")
    assert code == 2 and out == ""
    assert err.splitlines() == [
        "error: torch is not importable (simulated: no torch here); the dry-run needs "
        "`pip install 'gdr-check[kernel]'`"
    ]
    code, out, _ = dry_run(capsys, str(checkpoints["gdn"]), "--output-format", "json")
    assert code == 2 and json.loads(out)["error"]["code"] == "environment"


SGLANG_FILE = "sglang/kernels/ops/attention/fla/fused_recurrent.py"
NO_SGLANG = ("error: sglang's packed-decode kernel is not available (sglang is not installed and GDR_CHECK_SGLANG_PATH "
             "is not set); `--backend sglang` needs `pip install sglang`, or GDR_CHECK_SGLANG_PATH set to an sglang "
             "wheel or source tree")


class _FakeSglang:
    """An installed sglang distribution (its metadata) whose files are under `root`."""

    version = "0.4.9"

    def __init__(self, root: Path):
        self.root = root

    def locate_file(self, path: str) -> Path:
        return self.root / path


def _sglang_installed(monkeypatch, root: Path | None) -> None:
    """sglang's metadata as `runner.backends` reads it: none (`root` None), or a distribution with its files under
    `root`; GDR_CHECK_SGLANG_PATH unset."""
    real = importlib.metadata.distribution

    def distribution(name):
        if name != "sglang":
            return real(name)
        if root is None:
            raise importlib.metadata.PackageNotFoundError(name)
        return _FakeSglang(root)

    monkeypatch.setattr(backends.importlib.metadata, "distribution", distribution)
    monkeypatch.delenv("GDR_CHECK_SGLANG_PATH", raising=False)


def _no_vllm(monkeypatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(backends.importlib.util, "find_spec", lambda name, *rest: None if name == "vllm" else
                        real(name, *rest))


@pytest.fixture
def no_launch(monkeypatch):
    monkeypatch.setattr(runner_api, "run_child", lambda *args, **kwargs: pytest.fail("the child was launched"))
    monkeypatch.setattr(ranks_api, "run_ranks", lambda *args, **kwargs: pytest.fail("the ranks were launched"))


@pytest.mark.parametrize("ranks", ["one", "all"])
def test_an_engine_backend_that_is_not_installed_is_one_line_and_exit_2(capsys, checkpoints, monkeypatch, no_launch,
                                                                        ranks):
    """As a missing torch says it (one line naming what is missing and how to get it, exit 2), before anything is
    launched: it was GDR313 and exit 1, a finding about the deployment rather than about this machine (user test)."""
    _sglang_installed(monkeypatch, None)
    _no_vllm(monkeypatch)
    common = [str(checkpoints["gdn"]), "--batch", "2", "--tp", "2", "--ranks", ranks]
    assert dry_run(capsys, *common, "--backend", "sglang") == (2, "", NO_SGLANG + "\n")
    assert dry_run(capsys, *common, "--backend", "vllm") == (
        2, "", "error: vllm is not importable (No module named 'vllm'); `--backend vllm` needs `pip install vllm`\n")
    code, out, err = dry_run(capsys, *common, "--backend", "sglang", "--output-format", "json")
    assert code == 2 and json.loads(out)["error"]["code"] == "environment" and err == NO_SGLANG + "\n"


def test_a_sglang_path_that_holds_no_kernel_is_one_line_and_exit_2(capsys, checkpoints, monkeypatch, no_launch,
                                                                   tmp_path):
    """GDR_CHECK_SGLANG_PATH wins over an installed sglang (the child never falls back to another copy): a path
    without the file is the environment's error, whatever is installed."""
    _sglang_installed(monkeypatch, tmp_path / "site-packages")
    (tmp_path / "empty").mkdir()
    (tmp_path / "other.whl").write_bytes(b"not a zip")
    for given, problem in (("nowhere", "does not exist"), ("empty", f"holds no {SGLANG_FILE}"),
                           ("other.whl", "is not a readable wheel: File is not a zip file")):
        monkeypatch.setenv("GDR_CHECK_SGLANG_PATH", str(tmp_path / given))
        assert dry_run(capsys, str(checkpoints["gdn"]), "--batch", "2", "--backend", "sglang") == (
            2, "", f"error: sglang's packed-decode kernel is not available (GDR_CHECK_SGLANG_PATH=`{tmp_path / given}` "
                   f"{problem}); `--backend sglang` needs GDR_CHECK_SGLANG_PATH set to an sglang wheel or source tree "
                   "(or unset, to use an installed sglang)\n")


def test_an_installed_sglang_without_the_kernel_file_is_still_gdr313(capsys, checkpoints, monkeypatch, no_launch,
                                                                     tmp_path):
    """The case GDR313 keeps: the engine is here, but has no packed decode to run (exit 1, nothing launched)."""
    _sglang_installed(monkeypatch, tmp_path)
    code, document = dry_run_json(capsys, str(checkpoints["gdn"]), "--batch", "2", "--backend", "sglang")
    assert code == 1 and document["launched"] is False and document["refused_because"] == ["GDR313"]
    assert document["diagnostics"][0]["message"] == (
        f"backend `sglang` is not available: sglang 0.4.9 is installed but has no {SGLANG_FILE}")


def test_the_parent_finds_sglangs_kernel_where_the_child_loads_it(monkeypatch, tmp_path):
    """`runner.backends` (torch-free, in the parent) looks where `kernel.engines.find_sglang_source` (the child's
    loader, which imports triton) looks: a file, an unpacked wheel, a git checkout, a wheel; a path without it."""
    _sglang_installed(monkeypatch, None)
    for root in ("tree", "checkout/python"):
        (tmp_path / root / SGLANG_FILE).parent.mkdir(parents=True)
        (tmp_path / root / SGLANG_FILE).write_text("")
    with zipfile.ZipFile(tmp_path / "sglang.whl", "w") as wheel:
        wheel.writestr(SGLANG_FILE, "")
    found = [tmp_path / "tree" / SGLANG_FILE, tmp_path / "tree", tmp_path / "checkout", tmp_path / "sglang.whl"]
    for path in found + [tmp_path / "nowhere", tmp_path / "checkout" / "python" / "sglang"]:
        monkeypatch.setenv("GDR_CHECK_SGLANG_PATH", str(path))
        parent = backends.missing_backend("sglang", "gdn")
        assert (parent is None) == (path in found), (path, parent)
        if KERNEL_EXTRA:
            from gdr_check.kernel import (
                engine_kernels as engines,  # imports triton: here only when the kernel extra is installed
            )

            assert (backends.SGLANG_PATH_ENV, backends.SGLANG_FILE) == (engines.SGLANG_PATH_ENV, engines.SGLANG_FILE)
            try:
                child = engines.find_sglang_source()
            except FileNotFoundError:
                child = None
            assert (child is not None) == (parent is None), (path, child, parent)


def test_a_report_path_that_cannot_be_written_is_refused_before_the_run(capsys, checkpoints, tmp_path, monkeypatch):
    """The dry-run takes minutes on a GPU: an --output-file it could not write at the end is refused first."""
    monkeypatch.setattr(gdr_check.pipeline.dryrun.entry, "dry_run",
                        lambda *args, **kwargs: pytest.fail("the dry-run ran"))
    (tmp_path / "file").write_text("")
    for target, reason in ((tmp_path / "file" / "report.json", f"`{tmp_path / 'file'}` is not a directory"),
                           (tmp_path, "is a directory"),
                           (tmp_path / "config.json", "it is named as a checkpoint's file (a config or weights), "
                                                      "which a report must not replace or pose as: name the report "
                                                      "otherwise")):
        code, out, err = dry_run(capsys, str(checkpoints["gdn"]), "-o", str(target))
        assert (code, out, err) == (2, "", f"error: cannot write `{target}`: {reason}\n")


def test_usage_errors_exit_2(capsys, checkpoints):
    assert dry_run(capsys, str(checkpoints["gdn"]), "--backend", "sglang", "--engine", "vllm")[0] == 2
    assert dry_run(capsys, str(checkpoints["gdn"]), "--steps", "0")[0] == 2
    assert dry_run(capsys, str(checkpoints["gdn"]), "--output-format", "xml")[0] == 2
    for given, why in (("0", "got 0 (B = 0 launches nothing)"), ("-5", "got -5")):  # the number as given
        assert dry_run(capsys, str(checkpoints["gdn"]), "--batch", given) == (
            2, "", f"error: Invalid value for --batch: a dry-run needs at least one row, {why}\n")


def test_the_cli_process_never_imports_torch(checkpoints):
    # The child aborts before it imports anything heavy; the parent must not have imported torch either.
    script = ("import sys; from gdr_check.cli.main import main; code = main(['dry-run', sys.argv[1]]); "
              "assert 'torch' not in sys.modules and 'triton' not in sys.modules, 'heavy import'; sys.exit(code)")
    env = child_faults.environment({**os.environ, FAULT: "abort"})
    done = subprocess.run([sys.executable, "-c", script, str(checkpoints["gdn"])], capture_output=True, text=True,
                          env=env)
    assert done.returncode == 1, done.stderr
    assert "GDR311" in done.stdout


# -- torch-free parts -------------------------------------------------------------------------------------------------
def test_the_only_function_level_imports_are_the_kernel_extras():
    """torch, triton and the modules that import them stay inside the tests that skip without the kernel extra, so
    the torch-free runs collect this file; every other import is at module level (zipfile, runner.backends,
    runner.api and ranks_api were imported inside functions: review)."""
    local = set()
    for function in ast.walk(ast.parse(Path(__file__).read_text())):
        if isinstance(function, ast.FunctionDef):
            for node in ast.walk(function):
                if isinstance(node, ast.Import):
                    local.update((function.name, alias.name) for alias in node.names)
                elif isinstance(node, ast.ImportFrom):
                    local.update((function.name, f"{node.module}.{alias.name}") for alias in node.names)
    assert sorted(local) == [
        ("_session", "gdr_check.pipeline.dryrun.session"), ("_session", "torch"),
        ("_stand_in", "gdr_check.kernel.gdn.naive.naive_packed_decode"),
        ("test_sglang_releases_before_the_kernels_move_are_found_too", "gdr_check.kernel.engine_kernels"),
        ("test_step_indices_are_distinct_live_slots_with_padding",
         "gdr_check.pipeline.dryrun.synthetic_tensors.live_rows"),
        ("test_step_indices_are_distinct_live_slots_with_padding",
         "gdr_check.pipeline.dryrun.synthetic_tensors.step_indices"),
        ("test_step_indices_are_distinct_live_slots_with_padding", "torch"),
        ("test_the_parent_finds_sglangs_kernel_where_the_child_loads_it", "gdr_check.kernel.engine_kernels")]


def test_interpreter_geometry_keeps_group_size_and_layouts():
    check = check_builtin("Qwen/Qwen3-Next-80B-A3B-Instruct", Deployment(tp=1, batch=16))
    geometry = launch_geometry(check.call, check.pools, interpreter=True)
    # 16 requests x the 5 slots sglang counts (`auto` -> extra_buffer) + row 0: 81 rows
    assert geometry.deployed.to_dict() == {"B": 16, "S": 81, "H": 16, "HV": 32, "K": 128, "V": 128}
    assert geometry.dims.to_dict() == {"B": 4, "S": 8, "H": 1, "HV": 2, "K": 128, "V": 128}
    assert [c.text() for c in geometry.reductions] == [
        "batch B 16 -> 4", "slots S 81 -> 8", "key heads H 16 -> 1", "value heads HV 32 -> 2"]
    assert "H 16 -> 1, HV 32 -> 2 (G=2, K=128, V=128 and the layouts kept)" in geometry.notes[0]
    call = geometry.call
    assert call.mixed_qkv.shape == (4, 2 * 128 + 2 * 128) and call.mixed_qkv.dtype == "float16"
    assert call.initial_state.dtype == "float32" and call.A_log.dtype == "float32"
    assert {c.what for c in geometry.substitutions} == {"`mixed_qkv`", "`a`", "`b`", "`dt_bias`", "`out`"}
    # The state is a view of the stacked pool: the pool's inner strides, offset to the middle layer.
    assert geometry.pool.shape == (36, 8, 2, 128, 128)
    assert call.initial_state.stride == geometry.pool.stride[1:]
    assert call.initial_state.offset == 18 * geometry.pool.stride[0]


def test_gpu_geometry_is_the_deployed_call():
    check = check_builtin("moonshotai/Kimi-Linear-48B-A3B-Instruct", Deployment(tp=2, batch=8))
    geometry = launch_geometry(check.call, check.pools, interpreter=False)
    assert geometry.reductions == () and geometry.substitutions == ()
    for name, spec in check.call.tensors().items():
        launched = getattr(geometry.call, name)
        assert (launched.shape, launched.stride, launched.dtype) == (spec.shape, spec.stride, spec.dtype), name


def test_restrided_keeps_each_axis_padding():
    padded = TensorSpec.of((9, 4, 16, 16), "float32", stride=(2 * 4 * 16 * 16, 16 * 16, 16, 1))  # backing[::2]
    reduced = restrided(padded, (5, 2, 16, 16))
    assert reduced.stride == (2 * 16 * 16 + 4 * 16 * 16, 16 * 16, 16, 1)
    wide_rows = TensorSpec.of((8, 128), "bfloat16", stride=(192, 1))
    assert restrided(wide_rows, (4, 64), "float16").stride == (128, 1)


@needs_kernel_extra
def test_step_indices_are_distinct_live_slots_with_padding():
    # torch and runner.tensors (which imports it) are the kernel extra's: local, so the torch-free runs collect
    import torch

    from gdr_check.pipeline.dryrun.synthetic_tensors import live_rows, step_indices

    generator = torch.Generator().manual_seed(0)
    for engine in ("sglang", "vllm"):
        for batch, slots in ((4, 5), (8, 9), (4, 3)):
            for step in range(4):
                values = step_indices(batch, slots, engine, step, generator)
                live = [values[r] for r in live_rows(values, engine)]
                assert len(live) == len(set(live)) and all(1 <= s < slots for s in live)
                assert len(live) < batch  # some padding rows every step
                padding = [v for v in values if v not in live]
                assert all(v == -1 or (engine == "vllm" and v == 0) for v in padding)
    one_row = [step_indices(1, 2, "sglang", step, generator) for step in range(2)]
    assert one_row == [[1], [-1]]


def test_plan_round_trips_through_json():
    check = check_builtin("Qwen/Qwen3.5-4B", Deployment(tp=2, batch=4))
    plan = DryRunPlan(call=check.call, pools=check.pools, backend="sglang", device="cpu", steps=2, seed=7)
    again = DryRunPlan.from_dict(json.loads(json.dumps(plan.to_dict())))
    assert again.to_dict() == plan.to_dict()
    assert isinstance(again.call, PackedDecodeCall) and again.call.variant == "gdn"


# -- the checks catch broken kernels (in-process session, float64 stand-in kernels: no Triton) ------------------------
def _stand_in(flaw: str | None):
    """The float64 reference written back in the kernel's dtypes, with one deliberate flaw."""
    from gdr_check.kernel.gdn.naive import naive_packed_decode  # imports torch: the kernel extra's, as its callers skip

    def kernel(*args, **_):
        if flaw == "raise":
            raise ValueError("simulated contract refusal")
        state, out, indices = args[6], args[7], args[8]
        ref_out, ref_state = naive_packed_decode(*args, engine="sglang")
        live = indices >= 0
        slots = indices[live].long()
        out.copy_(ref_out.to(out.dtype))
        state[slots] = ref_state[slots].to(state.dtype)
        if flaw == "output":
            out[live] *= 1.05
        elif flaw == "state":
            state[slots] += 0.01
        elif flaw == "slot0":
            state[0] += 1.0
        elif flaw == "unwritten":
            out[~live] = float("nan")
        elif flaw == "skipped":
            out[~live] = 1.0
        return out, state

    return kernel


def _session(monkeypatch, checkpoints, ours: str | None, engine: str | None = None) -> list[str]:
    # torch and runner.session (which imports it) are the kernel extra's: local, so the torch-free runs collect
    import torch

    from gdr_check.pipeline.dryrun import session

    def kernel(name: str, flaw: str | None) -> KernelUnderTest:
        return KernelUnderTest(name=name, label=f"stand-in ({flaw})", checked=_stand_in(flaw), fast=_stand_in(flaw))

    monkeypatch.setattr(session, "builtin_kernel", lambda variant, profile: kernel("builtin", ours))
    monkeypatch.setattr(session, "engine_kernel", lambda backend, variant: kernel(backend, engine))
    check = check_model(str(checkpoints["gdn"]), Deployment(batch=4))
    backend = "builtin" if engine is None else "sglang"
    plan = plan_for(check, backend=backend, steps=2, timing=False)
    result = {"status": "ok", "device": {"interpreter": False},
              **session.run_session(plan, torch.device("cpu"), interpreter=False)}
    return [d.code for d in dryrun_diagnostics(ChildOutcome(result, 0, ""), backend)]


@needs_kernel_extra
@pytest.mark.parametrize("flaw,code", [(None, None), ("output", "GDR301"), ("state", "GDR302"),
                                       ("slot0", "GDR303"), ("skipped", "GDR304"), ("unwritten", "GDR305"),
                                       ("raise", "GDR312")])
def test_each_check_catches_its_flaw(monkeypatch, checkpoints, flaw, code):
    assert _session(monkeypatch, checkpoints, flaw) == ([] if code is None else [code])


@needs_kernel_extra
def test_engine_and_ours_disagreeing(monkeypatch, checkpoints):
    codes = _session(monkeypatch, checkpoints, ours="state", engine="good")
    assert sorted(codes) == ["GDR302", "GDR306"]


@needs_kernel_extra
def test_diagnostics_name_the_worst_step(monkeypatch, checkpoints):
    message = rules_dryrun.StateMismatch(
        kernel="gdr-check", step=2, error="0.02", tolerance="1e-05", dtype="float32", slot=3, head=1,
    ).diagnostic().message
    assert message.startswith("the state of touched slots after the gdr-check kernel differs")
    assert message_pattern(rules_dryrun.StateMismatch.rule).fullmatch(message)
    with pytest.raises(TypeError, match=r"unknown fields \['solt'\], missing \['slot'\]"):
        rules_dryrun.StateMismatch(kernel="k", step=2, error="e", tolerance="t", dtype="d", solt=3, head=1)


SGLANG_SRT_FILE = "sglang/srt/layers/attention/fla/fused_recurrent.py"  # sglang 0.5.10 - 0.5.15


def test_sglang_releases_before_the_kernels_move_are_found_too(monkeypatch, tmp_path):
    """sglang kept `fused_recurrent.py` under srt/ until 0.5.16 (the profiles' `kernel_file`, read from the wheels):
    `--backend sglang` finds it there as well, in a wheel, an unpacked tree and a checkout."""
    assert (profile_for("sglang@0.5.15").kernel_file, profile_for("sglang@0.5.16").kernel_file) == (
        SGLANG_SRT_FILE, SGLANG_FILE)
    _sglang_installed(monkeypatch, None)
    (tmp_path / "tree" / SGLANG_SRT_FILE).parent.mkdir(parents=True)
    (tmp_path / "tree" / SGLANG_SRT_FILE).write_text("")
    (tmp_path / "checkout" / "python" / SGLANG_SRT_FILE).parent.mkdir(parents=True)
    (tmp_path / "checkout" / "python" / SGLANG_SRT_FILE).write_text("")
    with zipfile.ZipFile(tmp_path / "sglang-0.5.13.whl", "w") as wheel:
        wheel.writestr(SGLANG_SRT_FILE, "")
    for path in (tmp_path / "tree", tmp_path / "checkout", tmp_path / "sglang-0.5.13.whl"):
        monkeypatch.setenv("GDR_CHECK_SGLANG_PATH", str(path))
        assert backends.missing_backend("sglang", "gdn") is None, path
        if KERNEL_EXTRA:
            from gdr_check.kernel import engine_kernels

            found = engine_kernels.find_sglang_source()
            assert found is not None and found.as_posix().endswith(SGLANG_SRT_FILE)
