"""Packaging: one import namespace (`gdr_check`), a console script and `python -m gdr_check`."""

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", str(ROOT), "--no-deps", "--no-build-isolation", "-q", "-w", str(out)],
        capture_output=True, text=True, timeout=300,
    )
    if build.returncode != 0:
        pytest.skip(f"cannot build a wheel here: {build.stderr.strip().splitlines()[-1:]}")
    return next(out.glob("gdr_check-*.whl"))


def test_wheel_installs_only_the_gdr_check_namespace(wheel: Path):
    names = zipfile.ZipFile(wheel).namelist()
    tops = {name.split("/", 1)[0] for name in names}
    assert tops == {"gdr_check", next(t for t in tops if t.endswith(".dist-info"))}
    for module in ("gdr_check/cli/main.py", "gdr_check/checks/contract.py", "gdr_check/kernel/gdn.py",
                   "gdr_check/sources/open.py", "gdr_check/models/check.py", "gdr_check/runner/child.py"):
        assert module in names
    assert not any(name.startswith("gdr_check/tests/") or name.startswith("gdr_check/benchmarks/") for name in names)


def test_wheel_declares_the_console_script_and_keeps_torch_optional(wheel: Path):
    archive = zipfile.ZipFile(wheel)
    dist = next(n for n in archive.namelist() if n.endswith(".dist-info/entry_points.txt"))
    assert "gdr-check = gdr_check.cli.main:run" in archive.read(dist).decode()
    metadata = archive.read(dist.replace("entry_points.txt", "METADATA")).decode()
    requires = [line for line in metadata.splitlines() if line.startswith("Requires-Dist:")]
    core = [line for line in requires if "extra ==" not in line]
    assert not any("torch" in line or "triton" in line for line in core)
    assert any("torch" in line and 'extra == "kernel"' in line for line in requires)


def test_generic_names_are_not_importable_outside_the_repository(tmp_path: Path):
    probe = ("import importlib.util, sys; "
             "print([m for m in ('cli', 'checks', 'kernel', 'sources', 'models') if importlib.util.find_spec(m)])")
    found = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert found.stdout.strip() == "[]"


def test_python_dash_m_runs_the_cli(tmp_path: Path):
    done = subprocess.run([sys.executable, "-m", "gdr_check", "--version"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.startswith("gdr-check ")
