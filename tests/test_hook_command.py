"""`gdr-check hook install|uninstall|status`: the `.pth` start-up hook, in a throw-away virtual environment (its
site-packages is the default folder), and the engine plugins it loads where an engine's loader does not (vLLM
0.33.0's loader told to load another plugin only, tests/plugin_engines.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sysconfig
import venv
from pathlib import Path

import pytest

from gdr_check.cli.hook import PTH_LINE, PTH_NAME
from gdr_check.cli.main import main

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def environment(tmp_path_factory) -> tuple[Path, Path]:
    """A virtual environment seeing this interpreter's packages (no pip): its python and its site-packages."""
    folder = tmp_path_factory.mktemp("venv")
    venv.create(folder, system_site_packages=True, with_pip=False)
    python = folder / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    # `system_site_packages` shows the base interpreter's packages; where this interpreter is itself a virtual
    # environment (CI's per-version venvs), its own packages (typer, rich) are made visible by a path file.
    ours = sorted({sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]})
    (Path(purelib) / "test_parent_environment.pth").write_text("".join(f"{path}\n" for path in ours))
    return python, Path(purelib)


def _env(**variables: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GDR_CHECK_GUARD", "GDR_CHECK_CAPTURE",
                                                                     "GDR_CHECK_REPORT", "VLLM_", "SGLANG_"))}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), str(ROOT / "tests")])
    return {**env, **variables}


def _gdr_check(python: Path, *args: str, **variables: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(python), "-m", "gdr_check", *args], capture_output=True, text=True,
                          env=_env(**variables), timeout=120)


def _modules_at_start(python: Path, **variables: str) -> list[str]:
    probe = "import json, sys; print(json.dumps(sorted(n for n in sys.modules if n.split('.')[0] == 'gdr_check')))"
    result = subprocess.run([str(python), "-c", probe], capture_output=True, text=True, env=_env(**variables),
                            timeout=120, check=True)
    return json.loads(result.stdout)


def test_install_status_uninstall_in_the_environments_site_packages(environment):
    python, purelib = environment
    pth = purelib / PTH_NAME
    assert _gdr_check(python, "hook", "status").stdout.splitlines() == [
        f"not installed ({pth} does not exist)",
        "variables: none of GDR_CHECK_GUARD, GDR_CHECK_CAPTURE is set (the hook does nothing)"]
    installed = _gdr_check(python, "hook", "install")
    assert installed.returncode == 0 and installed.stdout == (
        f"installed {pth}: the engine plugins load at every Python start-up in this environment when "
        "GDR_CHECK_GUARD or GDR_CHECK_CAPTURE is set\n")
    assert pth.read_text() == PTH_LINE and len(PTH_LINE.splitlines()) == 1
    try:
        assert _gdr_check(python, "hook", "status", GDR_CHECK_GUARD="warn").stdout.splitlines() == [
            f"installed: {pth}", "variables: GDR_CHECK_GUARD='warn'"]
        # Without the variables an interpreter start imports nothing of gdr-check; with one, the start-up hook
        # and the plugins' light modules, not the guard.
        assert _modules_at_start(python) == []
        assert _modules_at_start(python, GDR_CHECK_CAPTURE="calls-{rank}.json") == [
            "gdr_check", "gdr_check.base", "gdr_check.base.identity", "gdr_check.base.lazy", "gdr_check.integrations",
            "gdr_check.integrations.hooks", "gdr_check.integrations.post_import",
            "gdr_check.integrations.sglang_plugin", "gdr_check.integrations.startup_hook",
            "gdr_check.integrations.variables", "gdr_check.integrations.vllm_plugin"]
    finally:
        removed = _gdr_check(python, "hook", "uninstall")
    assert removed.stdout == f"removed {pth}\n" and not pth.exists()
    assert _gdr_check(python, "hook", "uninstall").stdout == f"not installed: {pth} does not exist\n"


def test_the_hook_guards_a_vllm_worker_the_loader_does_not_reach(environment, tmp_path):
    given = os.environ.get("GDR_CHECK_VLLM_PATH")
    if not given or not Path(given).is_file():
        pytest.skip("set GDR_CHECK_VLLM_PATH to the vLLM wheel")
    pytest.importorskip("torch")
    import zipfile

    from test_plugins import VLLM_FILES, VLLM_OPS

    tree = tmp_path / "tree"
    with zipfile.ZipFile(given) as archive:
        archive.extractall(tree, members=[n for n in archive.namelist()
                                          if n in VLLM_FILES or (n.startswith(VLLM_OPS) and n.endswith(".py"))])
    python, purelib = environment
    assert _gdr_check(python, "hook", "install").returncode == 0
    try:
        out = tmp_path / "seen.json"
        result = subprocess.run([str(python), str(ROOT / "tests" / "plugin_engines.py"), "vllm", "spawn", str(tree),
                                 str(out)], capture_output=True, text=True, timeout=300, cwd=tmp_path,
                                env=_env(GDR_CHECK_GUARD="warn", VLLM_PLUGINS="another_plugin",
                                         TRITON_INTERPRET=os.environ.get("TRITON_INTERPRET", "")))
    finally:
        _gdr_check(python, "hook", "uninstall")
    assert result.returncode == 0, result.stderr[-3000:]
    seen = json.loads(out.read_text())
    assert set(seen["bindings"].values()) == {"wrapped"} and len(seen["bindings"]) == 3
    assert [line.split(": ", 2)[-1] for line in seen["log"] if " GDR2" in line] == [
        "GDR241: `ssm_state_indices` holds slot 9 at row 1, but the pool has 5 slots (0..4) [in pool #0]",
        "GDR242: slot 2 is used by rows 2, 3 of one batch [in pool #0]",
        "GDR241: `ssm_state_indices` holds slot 5 at row 5, but the pool has 5 slots (0..4) [in pool #0]"]


@pytest.mark.parametrize(("args", "message"), [
    (["hook", "frob"], "error: unknown hook action 'frob': use one of install, uninstall, status"),
    (["hook", "status", "--site-dir", "/nonexistent/site"],
     "error: /nonexistent/site: not a folder (the site-packages folder the hook goes into)"),
])
def test_bad_input_is_one_line_and_exit_2(args, message, capsys):
    assert main(args) == 2
    assert capsys.readouterr().err.strip() == message


def test_a_read_only_folder_is_one_line(tmp_path, capsys):
    if os.geteuid() == 0:
        pytest.skip("root writes into read-only folders")
    tmp_path.chmod(0o500)
    try:
        assert main(["hook", "install", "--site-dir", str(tmp_path)]) == 2
    finally:
        tmp_path.chmod(0o700)
    assert capsys.readouterr().err.startswith(f"error: cannot write {tmp_path / PTH_NAME}: ")


def test_default_folder_is_this_environments_site_packages(capsys, monkeypatch, tmp_path):
    monkeypatch.setattr(sysconfig, "get_paths", lambda: {"purelib": str(tmp_path)})
    assert main(["hook", "status"]) == 0
    assert capsys.readouterr().out.splitlines()[0] == f"not installed ({tmp_path / PTH_NAME} does not exist)"

