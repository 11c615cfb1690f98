"""The engine plugins (src/gdr_check/integrations/), loaded by each engine's own plugin loader read from its
released wheel, in a worker the engine forks or spawns (tests/plugin_engines.py drives it in a fresh
interpreter). Skipped without GDR_CHECK_VLLM_PATH / GDR_CHECK_SGLANG_PATH (the wheels or unpacked trees).

What is expected comes from the releases: the entry-point group names, the version, which modules bind the
packed-decode functions (read from the release's source text), and the order in which a worker reaches the
plugin's hook (init_worker, init_device, load_model; __init__'s distributed set-up before initialize)."""

from __future__ import annotations

import ast
import json
import logging
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("triton")
pytest.importorskip("numpy")

from gdr_check.integrations import post_import, sglang_plugin, variables, vllm_plugin

try:  # Python 3.11+
    import tomllib
except ModuleNotFoundError:  # pragma: no cover - 3.10
    import tomli as tomllib  # type: ignore[no-redef]

ROOT = Path(__file__).resolve().parents[1]
TESTS = ROOT / "tests"
GDN = "fused_recurrent_gated_delta_rule_packed_decode"
KDA = "fused_recurrent_kda_packed_decode"
VLLM_FILES = ("vllm/plugins/__init__.py", "vllm/envs.py", "vllm/version.py", "vllm/_version.py",
              "vllm/v1/worker/worker_base.py", "vllm/model_executor/layers/mamba/gdn/qwen_gdn_linear_attn.py")
VLLM_OPS = "vllm/third_party/flash_linear_attention/ops/"
SGLANG_FILES = ("sglang/srt/plugins/__init__.py", "sglang/srt/plugins/hook_registry.py", "sglang/srt/environ.py",
                "sglang/version.py", "sglang/_version.py", "sglang/kernels/ops/attention/fla/fused_recurrent.py",
                "sglang/kernels/ops/attention/fla/utils.py", "sglang/kernels/ops/attention/fla/op.py",
                "sglang/srt/layers/attention/linear/kernels/kernel_backend.py",
                "sglang/srt/layers/attention/linear/kernels/gdn_triton.py",
                "sglang/srt/layers/attention/linear/kernels/kda_triton.py")
# Read as text only (the order checks): never imported.
VLLM_TEXT = ("vllm/v1/executor/multiproc_executor.py",)
SGLANG_TEXT = ("sglang/srt/model_executor/model_runner.py", "sglang/srt/managers/scheduler.py")
REPORT_SCHEMA = json.loads((ROOT / "src" / "gdr_check" / "schema" / "report-v1.json").read_text())


def _wheel(variable: str) -> Path:
    given = os.environ.get(variable)
    if not given or not Path(given).is_file():
        pytest.skip(f"set {variable} to the engine's wheel")
    return Path(given)


@pytest.fixture(scope="module")
def vllm_tree(tmp_path_factory) -> Path:
    wheel = _wheel("GDR_CHECK_VLLM_PATH")
    root = tmp_path_factory.mktemp("vllm")
    with zipfile.ZipFile(wheel) as archive:
        names = [n for n in archive.namelist() if n in VLLM_FILES + VLLM_TEXT
                 or (n.startswith(VLLM_OPS) and n.endswith(".py"))]
        archive.extractall(root, members=names)
    return root


@pytest.fixture(scope="module")
def sglang_tree(tmp_path_factory) -> Path:
    wheel = _wheel("GDR_CHECK_SGLANG_PATH")
    root = tmp_path_factory.mktemp("sglang")
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(root, members=[n for n in archive.namelist() if n in SGLANG_FILES + SGLANG_TEXT])
    return root


@pytest.fixture(scope="module")
def dist(tmp_path_factory) -> Path:
    """The package's entry points as an installed distribution declares them, from pyproject.toml."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    folder = tmp_path_factory.mktemp("dist")
    info = folder / f"gdr_check-{project['version']}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {project['name']}\nVersion: {project['version']}\n")
    groups = project["entry-points"]
    (info / "entry_points.txt").write_text("".join(
        f"[{group}]\n" + "".join(f"{name} = {value}\n" for name, value in entries.items()) + "\n"
        for group, entries in groups.items()))
    return folder


def _drive(engine: str, method: str, tree: Path, dist: Path, tmp_path: Path, **variables: str) -> dict:
    out = tmp_path / f"{engine}-{method}.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GDR_CHECK_GUARD", "GDR_CHECK_CAPTURE",
                                                                     "GDR_CHECK_REPORT", "VLLM_", "SGLANG_"))}
    env.update(variables)
    env["PYTHONPATH"] = os.pathsep.join([str(dist), str(ROOT / "src"), str(TESTS)])
    result = subprocess.run([sys.executable, str(TESTS / "plugin_engines.py"), engine, method, str(tree), str(out)],
                            env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-4000:]
    return json.loads(out.read_text())


def _version(tree: Path, package: str) -> str:
    text = (tree / package / "_version.py").read_text()
    found = re.search(r"^__version__ = version = '([^']+)'", text, re.M)
    assert found, text
    return found.group(1)


def _binders(tree: Path, package: str, names: tuple[str, ...], loaded: set[str]) -> set[str]:
    """`module.name` for every loaded module of the release that defines or imports one of `names` by name."""
    found = set()
    for file in (tree / package).rglob("*.py"):
        parts = file.relative_to(tree).with_suffix("").parts
        module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        if module not in loaded:
            continue
        for node in ast.walk(ast.parse(file.read_text())):
            if isinstance(node, ast.FunctionDef) and node.name in names:
                found.add(f"{module}.{node.name}")
            elif isinstance(node, ast.ImportFrom):
                found |= {f"{module}.{alias.name}" for alias in node.names if alias.name in names}
    return found


VLLM_LOADED = {"vllm.third_party.flash_linear_attention.ops",
               "vllm.third_party.flash_linear_attention.ops.fused_recurrent",
               "vllm.model_executor.layers.mamba.gdn.qwen_gdn_linear_attn"}
SGLANG_LOADED = {"sglang.kernels.ops.attention.fla.fused_recurrent",
                 "sglang.srt.layers.attention.linear.kernels.gdn_triton",
                 "sglang.srt.layers.attention.linear.kernels.kda_triton"}
# The plugin's own modules: what an engine process imports of gdr-check when no variable is set.
INERT = {"gdr_check", "gdr_check.base", "gdr_check.base.identity", "gdr_check.base.lazy", "gdr_check.integrations",
         "gdr_check.integrations.hooks",
         "gdr_check.integrations.post_import", "gdr_check.integrations.variables"}
VLLM_FAULTS = [
    "GDR241: `ssm_state_indices` holds slot 9 at row 1, but the pool has 5 slots (0..4) [in pool #0]",
    "GDR242: slot 2 is used by rows 2, 3 of one batch [in pool #0]",
    "GDR241: `ssm_state_indices` holds slot 5 at row 5, but the pool has 5 slots (0..4) [in pool #0]",
]
SGLANG_FAULTS = VLLM_FAULTS[:2]


# -- the releases: group names and the order a worker reaches the hook -------------------------------------------------
def test_entry_point_groups_are_the_ones_the_releases_read(vllm_tree, sglang_tree):
    groups = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"]
    vllm_loader = (vllm_tree / "vllm/plugins/__init__.py").read_text()
    sglang_loader = (sglang_tree / "sglang/srt/plugins/__init__.py").read_text()
    vllm_group = re.search(r'^DEFAULT_PLUGINS_GROUP = "([^"]+)"', vllm_loader, re.M).group(1)
    sglang_group = re.search(r'^GENERAL_PLUGINS_GROUP = "([^"]+)"', sglang_loader, re.M).group(1)
    assert groups == {vllm_group: {"gdr_check": "gdr_check.integrations.vllm_plugin:register"},
                      sglang_group: {"gdr_check": "gdr_check.integrations.sglang_plugin:register"}}


def _calls_in_order(function: ast.FunctionDef) -> list[str]:
    """The names `function` calls (`name(...)`, `x.name(...)`), in source order."""
    calls = [node for node in ast.walk(function) if isinstance(node, ast.Call)
             and isinstance(node.func, (ast.Attribute, ast.Name))]
    return [call.func.attr if isinstance(call.func, ast.Attribute) else call.func.id
            for call in sorted(calls, key=lambda c: (c.lineno, c.col_offset))]


def _method(tree: Path, file: str, cls: str, name: str) -> ast.FunctionDef:
    module = ast.parse((tree / file).read_text())
    owner = next(n for n in module.body if isinstance(n, ast.ClassDef) and n.name == cls)
    return next(n for n in owner.body if isinstance(n, ast.FunctionDef) and n.name == name)


def test_vllm_workers_load_plugins_then_init_device_then_load_model(vllm_tree):
    """The hook (after `WorkerWrapperBase.init_device`) runs after the plugins loaded and before the model is
    built, in the order `WorkerProc.__init__` calls them."""
    init_worker = _calls_in_order(_method(vllm_tree, "vllm/v1/worker/worker_base.py", "WorkerWrapperBase",
                                          "init_worker"))
    assert "load_general_plugins" in init_worker
    proc = _calls_in_order(_method(vllm_tree, "vllm/v1/executor/multiproc_executor.py", "WorkerProc", "__init__"))
    order = [name for name in proc if name in ("init_worker", "init_device", "load_model")]
    assert order[:3] == ["init_worker", "init_device", "load_model"]


def test_sglang_runners_build_the_groups_before_initialize_which_loads_the_model_before_graphs(sglang_tree):
    file = "sglang/srt/model_executor/model_runner.py"
    init = _calls_in_order(_method(sglang_tree, file, "ModelRunner", "__init__"))
    assert init.index("init_torch_distributed") < init.index("initialize")
    initialize = _calls_in_order(_method(sglang_tree, file, "ModelRunner", "initialize"))
    assert "load_model" in initialize
    scheduler = ast.parse((sglang_tree / "sglang/srt/managers/scheduler.py").read_text())
    run = next(n for n in scheduler.body if isinstance(n, ast.FunctionDef) and n.name == "run_scheduler_process")
    first = run.body[0]
    assert isinstance(first, ast.Expr) and ast.unparse(first) == "load_plugins()"


# -- vLLM --------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_vllm_plugin_unset_wraps_nothing_and_imports_nothing_heavy(method, vllm_tree, dist, tmp_path):
    seen = _drive("vllm", method, vllm_tree, dist, tmp_path)
    assert set(seen["gdr_check_modules"]) == INERT | {"gdr_check.integrations.vllm_plugin"}
    assert set(seen["bindings"].values()) == {"original"} and len(seen["bindings"]) == 3
    assert [line for line in seen["log"] if "gdr" in line] == [] and seen["error"] is None


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_vllm_plugin_guards_every_binding_and_reports_a_bad_call(method, vllm_tree, dist, tmp_path):
    seen = _drive("vllm", method, vllm_tree, dist, tmp_path, GDR_CHECK_GUARD="warn",
                  GDR_CHECK_REPORT=str(tmp_path / "report-{rank}.json"))
    expected = _binders(vllm_tree, "vllm", (GDN,), VLLM_LOADED)
    assert seen["bindings"] == dict.fromkeys(expected, "wrapped") and len(expected) == 3
    assert seen["error"] is None
    who = f"vllm@{_version(vllm_tree, 'vllm')}, TP rank 1 of 2"
    mine = [line for line in seen["log"] if "gdr_check" in line]
    assert mine[0].startswith(f"WARNING vllm.gdr_check: gdr-check guard ({who}): cannot compare the calls with "
                              f"/nonexistent/served-model (MissingPaths: path `/nonexistent/served-model` does not "
                              f"exist;")
    assert mine[1:] == [
        f"INFO vllm.gdr_check: gdr-check guard on (warn mode) in {who}: no model (contract and slots only), state "
        f"dtype float32; 2 bindings of 1 packed-decode function wrapped; report: {tmp_path / 'report-1.json'}",
        *(f"WARNING vllm.gdr_check: gdr-check guard ({who}): {fault}" for fault in VLLM_FAULTS),
        f"INFO vllm.gdr_check: gdr-check guard ({who}): 1 packed-decode call checked, 3 faults; report: "
        f"{tmp_path / 'report-1.json'}",
    ]
    report = json.loads((tmp_path / "report-1.json").read_text())
    jsonschema = pytest.importorskip("jsonschema")
    jsonschema.validate(report, REPORT_SCHEMA)
    assert report["command"] == "guard"
    assert {k: v for k, v in report["source"].items() if k != "pid"} == {
        "engine": f"vllm@{_version(vllm_tree, 'vllm')}", "model": "/nonexistent/served-model", "tp": 2, "rank": 1}
    assert report["guard"]["calls"] == 1 and report["guard"]["state_dtype"] == "float32"
    faults = [f"{d['code']}: {d['message']} [{d['notes'][0]}]" for d in report["diagnostics"]
              if d["severity"] == "error"]
    assert faults == VLLM_FAULTS
    # `gdr-check call` reads the report: its findings, exit 1 for the errors
    path = tmp_path / "report-1.json"
    called = subprocess.run([sys.executable, "-m", "gdr_check", "call", str(path), "--output-format", "concise"],
                            capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
    assert called.returncode == 1
    assert called.stdout.splitlines() == [f"{path}:1:1: error[{fault.split(' [')[0].replace(': ', '] ', 1)}"
                                          for fault in VLLM_FAULTS]
    assert called.stderr == "summary: 1 call(s) checked: 3 error(s), 0 warning(s), 0 note(s)\n"


def test_vllm_plugin_in_raise_mode_stops_the_step_after_reporting(vllm_tree, dist, tmp_path):
    seen = _drive("vllm", "spawn", vllm_tree, dist, tmp_path, GDR_CHECK_GUARD="raise",
                  GDR_CHECK_REPORT=str(tmp_path / "r-{rank}.json"))
    assert seen["error"] == f"GuardError: {VLLM_FAULTS[0]} (and 2 more errors)"
    report = json.loads((tmp_path / "r-1.json").read_text())
    assert [d["code"] for d in report["diagnostics"]] == ["GDR241", "GDR242", "GDR241"]


def test_vllm_plugin_error_leaves_the_engine_as_it_was(vllm_tree, dist, tmp_path):
    """The worker's TP rank cannot be read: one line, nothing wrapped, the step runs."""
    seen = _drive("vllm", "spawn", vllm_tree, dist, tmp_path, GDR_CHECK_GUARD="warn", PLUGIN_TEST_BROKEN="rank")
    assert set(seen["bindings"].values()) == {"original"} and seen["error"] is None
    assert [line for line in seen["log"] if "gdr_check" in line] == [
        "WARNING vllm.gdr_check: gdr-check: cannot read this vLLM worker's deployment (AssertionError: tensor model "
        "parallel group is not initialized); the worker runs without the guard"]
    assert "gdr_check.guard" not in seen["gdr_check_modules"]


def test_vllm_allow_list_without_gdr_check_loads_nothing(vllm_tree, dist, tmp_path):
    seen = _drive("vllm", "spawn", vllm_tree, dist, tmp_path, GDR_CHECK_GUARD="warn", VLLM_PLUGINS="other")
    assert seen["gdr_check_modules"] == [] and set(seen["bindings"].values()) == {"original"}


# -- sglang ------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_sglang_plugin_unset_wraps_nothing_and_imports_nothing_heavy(method, sglang_tree, dist, tmp_path):
    seen = _drive("sglang", method, sglang_tree, dist, tmp_path)
    assert set(seen["gdr_check_modules"]) == INERT | {"gdr_check.integrations.sglang_plugin"}
    assert set(seen["bindings"].values()) == {"original"} and len(seen["bindings"]) == 4
    assert [line for line in seen["log"] if "sglang.gdr_check" in line] == []


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_sglang_plugin_guards_every_binding_and_reports_a_bad_call(method, sglang_tree, dist, tmp_path):
    seen = _drive("sglang", method, sglang_tree, dist, tmp_path, GDR_CHECK_GUARD="record",
                  GDR_CHECK_REPORT=str(tmp_path / "report-{rank}.json"))
    expected = _binders(sglang_tree, "sglang", (GDN, KDA), SGLANG_LOADED)
    assert seen["bindings"] == dict.fromkeys(expected, "wrapped") and len(expected) == 4
    who = f"sglang@{_version(sglang_tree, 'sglang')}, TP rank 1 of 2"
    mine = [line for line in seen["log"] if line.split(" ")[1] == "sglang.gdr_check:"]
    assert [line for line in mine if " GDR2" in line] == [
        f"INFO sglang.gdr_check: gdr-check guard ({who}): {fault}" for fault in SGLANG_FAULTS]
    assert mine[-1] == (f"INFO sglang.gdr_check: gdr-check guard ({who}): 1 packed-decode call checked, 2 faults; "
                        f"report: {tmp_path / 'report-1.json'}")
    report = json.loads((tmp_path / "report-1.json").read_text())
    pytest.importorskip("jsonschema").validate(report, REPORT_SCHEMA)
    assert report["source"]["engine"] == f"sglang@{_version(sglang_tree, 'sglang')}"
    assert [f"{d['code']}: {d['message']} [{d['notes'][0]}]" for d in report["diagnostics"]
            if d["severity"] == "error"] == SGLANG_FAULTS


def test_sglang_plugin_error_leaves_the_engine_as_it_was(sglang_tree, dist, tmp_path):
    seen = _drive("sglang", "spawn", sglang_tree, dist, tmp_path, GDR_CHECK_GUARD="warn", PLUGIN_TEST_BROKEN="rank")
    assert set(seen["bindings"].values()) == {"original"} and seen["error"] is None
    assert [line for line in seen["log"] if "sglang.gdr_check" in line] == [
        "WARNING sglang.gdr_check: gdr-check: cannot read this sglang worker's deployment (ValueError: config "
        "namespace 'parallel' not published); the worker runs without the guard"]


def test_sglang_allow_list_without_gdr_check_loads_nothing(sglang_tree, dist, tmp_path):
    seen = _drive("sglang", "spawn", sglang_tree, dist, tmp_path, GDR_CHECK_GUARD="warn", SGLANG_PLUGINS="other")
    assert seen["gdr_check_modules"] == [] and set(seen["bindings"].values()) == {"original"}


# -- in process: the variables and the import hook ---------------------------------------------------------------------
@pytest.mark.parametrize(("environ", "expected"), [
    ({}, None),
    ({"GDR_CHECK_GUARD": ""}, None),
    ({"GDR_CHECK_GUARD": "Warn"}, variables.PluginSettings(guard="warn")),
    ({"GDR_CHECK_CAPTURE": "calls-{rank}.json"}, variables.PluginSettings(capture="calls-{rank}.json")),
    ({"GDR_CHECK_GUARD": "raise", "GDR_CHECK_REPORT": "r.json"},
     variables.PluginSettings(guard="raise", report="r.json")),
])
def test_settings(environ, expected):
    assert variables.read_settings(environ) == expected


@pytest.mark.parametrize(("environ", "message"), [
    ({"GDR_CHECK_GUARD": "loud"}, "GDR_CHECK_GUARD='loud' is not a guard mode: use one of raise, warn, record"),
    ({"GDR_CHECK_GUARD": "\x1b[2J"}, "GDR_CHECK_GUARD='\\x1b[2J' is not a guard mode: use one of raise, warn, record"),
    ({"GDR_CHECK_GUARD": "warn", "GDR_CHECK_REPORT": "report-{node}.json"},
     "GDR_CHECK_REPORT='report-{node}.json' is not a path template: its only placeholders may be {rank} and {pid} "
     "(a literal brace is written twice)"),
    ({"GDR_CHECK_CAPTURE": "calls-{rank", "GDR_CHECK_GUARD": "warn"},
     "GDR_CHECK_CAPTURE='calls-{rank' is not a path template: its only placeholders may be {rank} and {pid} "
     "(a literal brace is written twice)"),
    ({"GDR_CHECK_CAPTURE": "c.json", "GDR_CHECK_REPORT": "r.json"},
     "GDR_CHECK_REPORT is set but GDR_CHECK_GUARD is not: the report holds the guard's findings; set "
     "GDR_CHECK_GUARD=warn (or record, raise) too"),
])
def test_bad_settings_are_one_line_and_the_plugin_does_nothing(environ, message, monkeypatch, caplog):
    with pytest.raises(variables.SettingsError) as raised:
        variables.read_settings(environ)
    assert str(raised.value) == message
    for name in variables.VARIABLES:
        monkeypatch.delenv(name, raising=False)
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    before = list(sys.meta_path)
    with caplog.at_level(logging.WARNING):
        vllm_plugin.register()
        sglang_plugin.register()
    assert sys.meta_path == before
    assert [r.getMessage() for r in caplog.records] == [
        f"gdr-check: {message}; the vLLM plugin does nothing", f"gdr-check: {message}; the sglang plugin does nothing"]


def test_when_imported_runs_after_the_first_import_and_leaves_no_finder(tmp_path, monkeypatch):
    (tmp_path / "plugin_probe_module.py").write_text("VALUE = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "plugin_probe_module", raising=False)
    seen = []
    before = list(sys.meta_path)
    post_import.when_imported("plugin_probe_module", lambda module: seen.append(module.VALUE))
    post_import.when_imported("plugin_probe_module", lambda module: seen.append(module.VALUE))  # a second waits too
    assert seen == [] and len(sys.meta_path) == len(before) + 2
    import plugin_probe_module  # noqa: F401

    assert seen == [1] or seen == [1, 1]
    assert seen == [1, 1] and sys.meta_path == before
    post_import.when_imported("plugin_probe_module", lambda module: seen.append(2))  # imported: at once
    assert seen == [1, 1, 2]


def test_vllm_plugin_capture_with_the_guard_records_the_calls_as_the_engine_made_them(vllm_tree, dist, tmp_path):
    seen = _drive("vllm", "fork", vllm_tree, dist, tmp_path, GDR_CHECK_GUARD="record",
                  GDR_CHECK_CAPTURE=str(tmp_path / "calls-{rank}.json"))
    assert set(seen["bindings"].values()) == {"wrapped"}
    path = tmp_path / "calls-1.json"
    who = f"vllm@{_version(vllm_tree, 'vllm')}, TP rank 1 of 2"
    mine = [line for line in seen["log"] if "capture" in line]
    assert mine == [f"INFO vllm.gdr_check: gdr-check capture on in {who}: up to 256 packed-decode calls to {path}",
                    f"INFO vllm.gdr_check: gdr-check capture ({who}): 1 call recorded to {path}"]
    recording = json.loads(path.read_text())
    # the slots as the engine passed them (the capture wraps the guard, which hands the kernel a sanitised copy)
    assert [call["call"]["ssm_state_indices"]["values"] for call in recording["calls"]] == [[1, 9, 2, 2, 0, 5, 3, -1]]
    called = subprocess.run([sys.executable, "-m", "gdr_check", "call", str(path), "--engine", "vllm",
                             "--output-format", "concise", "--select", "GDR241,GDR242"], capture_output=True,
                            text=True, env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
    assert called.returncode == 1, called.stderr
    assert [line.split(": ", 1)[1] for line in called.stdout.splitlines()] == [
        "error[GDR241] `ssm_state_indices` holds slot 9 at row 1, but the pool has 5 slots (0..4)",
        "error[GDR241] `ssm_state_indices` holds slot 5 at row 5, but the pool has 5 slots (0..4)",
        "error[GDR242] slot 2 is used by rows 2, 3 of one batch"]


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_vllm_plugin_guard_under_cuda_graphs(method, vllm_tree, dist, tmp_path):
    """GPU (GDR_CHECK_TEST_GPU=1): the guard entered by the plugin, vLLM's kernel compiled, the step captured in a
    CUDA graph on valid slots and replayed on bad ones: the faults come from the replay, found on the device."""
    import torch

    if not os.environ.get("GDR_CHECK_TEST_GPU") or not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU and GDR_CHECK_TEST_GPU=1")
    seen = _drive("vllm", method, vllm_tree, dist, tmp_path, GDR_CHECK_GUARD="warn", PLUGIN_TEST_GRAPH="1",
                  GDR_CHECK_REPORT=str(tmp_path / "report-{rank}.json"))
    assert set(seen["bindings"].values()) == {"wrapped"} and seen["error"] is None
    log = [line for line in seen["log"] if "gdr_check" in line or "plugin_engines" in line]
    captured = log.index("INFO plugin_engines: captured")
    faults = [line for line in log if " GDR241: " in line or " GDR242: " in line]
    assert [line.split("): ", 1)[1] for line in faults] == VLLM_FAULTS
    assert all(log.index(line) > captured for line in faults)  # found in the replay
    report = json.loads((tmp_path / "report-1.json").read_text())
    assert report["guard"]["calls"] == 2  # the warm-up and the captured call: a replay makes no Python call


def test_a_release_without_the_hooked_class_is_one_line_and_nothing_else(monkeypatch, caplog):
    import types

    for name in variables.VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("GDR_CHECK_GUARD", "warn")
    monkeypatch.setitem(sys.modules, vllm_plugin.WORKER_MODULE, types.ModuleType(vllm_plugin.WORKER_MODULE))
    before = list(sys.meta_path)
    with caplog.at_level(logging.WARNING):
        vllm_plugin.register()
    assert sys.meta_path == before
    assert [r.getMessage() for r in caplog.records] == [
        "gdr-check: cannot hook vllm.v1.worker.worker_base.WorkerWrapperBase.init_device in this vLLM release "
        "(AttributeError: module 'vllm.v1.worker.worker_base' has no attribute 'WorkerWrapperBase'); the engine runs "
        "without the guard"]
