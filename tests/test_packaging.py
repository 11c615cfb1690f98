"""Packaging, tested as shipped: the sdist and the wheel are built with build isolation, the way pip, pre-commit
and the GitHub Action build them (`python -m build`: the sdist first, then the wheel from the unpacked sdist), and
their contents are compared with the source tree. scripts/ci/installed_wheel.py then runs the installed wheel.

Building needs the build backend (setuptools, from the package index or pip's cache). Where it cannot be had,
these tests skip with the reason; CI sets GDR_CHECK_REQUIRE_BUILD=1, which turns that skip into a failure.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "src" / "gdr_check"
# What never belongs in a build input: VCS data, caches, earlier build outputs (a stale egg-info's SOURCES.txt
# would add files to the sdist), the test-only sglang wheel.
_NOT_SOURCES = shutil.ignore_patterns(".git", "__pycache__", "*.py[cod]", "*.egg-info", "build", "dist", ".sglang",
                                      ".whl", ".device", ".hypothesis", ".pytest_cache", ".venv*", ".mypy_cache",
                                      ".ruff_cache")


def _source_files(directory: Path) -> set[str]:
    """Files below `directory` as posix paths relative to it, caches left out."""
    return {path.relative_to(directory).as_posix() for path in directory.rglob("*")
            if path.is_file() and "__pycache__" not in path.parts and path.suffix not in (".pyc", ".pyo")}


def _cannot_build(reason: str) -> None:
    message = f"cannot build the sdist and wheel here: {reason}"
    if os.environ.get("GDR_CHECK_REQUIRE_BUILD") == "1":
        pytest.fail(f"{message} (GDR_CHECK_REQUIRE_BUILD=1: CI must build them)", pytrace=False)
    pytest.skip(message)


@pytest.fixture(scope="module")
def dists(tmp_path_factory) -> dict[str, Path]:
    """{"wheel": ..., "sdist": ...} built from a copy of the working tree (the checkout is left untouched)."""
    if importlib.util.find_spec("build") is None:
        _cannot_build("the `build` package is not installed (pip install -e '.[dev]')")
    work = tmp_path_factory.mktemp("packaging")
    tree = work / "tree"
    shutil.copytree(ROOT, tree, ignore=_NOT_SOURCES)
    out = work / "dist"
    try:
        built = subprocess.run([sys.executable, "-m", "build", "--outdir", str(out), str(tree)],
                               capture_output=True, text=True, timeout=600)
    except subprocess.TimeoutExpired:
        _cannot_build("`python -m build` did not finish within 600 s")
    if built.returncode != 0:
        last = (built.stderr.strip() or built.stdout.strip()).splitlines()[-3:]
        _cannot_build(f"`python -m build` exited {built.returncode}: {' | '.join(last)}")
    wheels, sdists = sorted(out.glob("gdr_check-*.whl")), sorted(out.glob("gdr_check-*.tar.gz"))
    assert len(wheels) == 1 and len(sdists) == 1, sorted(p.name for p in out.iterdir())
    return {"wheel": wheels[0], "sdist": sdists[0]}


def test_the_wheel_holds_every_file_of_the_package_and_nothing_else(dists):
    names = zipfile.ZipFile(dists["wheel"]).namelist()
    dist_info = {name.split("/", 1)[0] for name in names if ".dist-info/" in name}
    assert len(dist_info) == 1
    outside = sorted(name for name in names if name.split("/", 1)[0] not in {"gdr_check", *dist_info})
    assert outside == [], "the wheel installs more than gdr_check (tests, docs, benchmarks or scripts?)"
    shipped = {name.removeprefix("gdr_check/") for name in names if name.startswith("gdr_check/")}
    expected = _source_files(PACKAGE)
    assert {"py.typed", "schema/report-v1.json", "__main__.py", "cli/formats/__init__.py"} <= expected
    assert sorted(expected - shipped) == [], "modules or data of src/gdr_check missing from the wheel"
    assert sorted(shipped - expected) == [], "files in the wheel that src/gdr_check does not have"
    assert {name for name in expected if name.endswith(".py")}, "no module found: wrong PACKAGE path?"


def test_the_wheel_data_files_are_the_sources(dists):
    archive = zipfile.ZipFile(dists["wheel"])
    for name in ("py.typed", "schema/report-v1.json"):
        assert archive.read(f"gdr_check/{name}") == (PACKAGE / name).read_bytes()


def test_the_wheel_metadata_console_script_and_optional_torch(dists):
    archive = zipfile.ZipFile(dists["wheel"])
    entry_points = next(n for n in archive.namelist() if n.endswith(".dist-info/entry_points.txt"))
    declared = archive.read(entry_points).decode()
    assert "gdr-check = gdr_check.cli.entry:run" in declared
    # the engine plugins (docs/production-guard.md), in the groups the engines' loaders read (tests/test_plugins.py)
    assert "[vllm.general_plugins]\ngdr_check = gdr_check.integrations.vllm_plugin:register" in declared
    assert "[sglang.srt.plugins]\ngdr_check = gdr_check.integrations.sglang_plugin:register" in declared
    metadata = archive.read(entry_points.replace("entry_points.txt", "METADATA")).decode().splitlines()
    assert "License-Expression: Apache-2.0" in metadata
    assert "Requires-Python: >=3.10" in metadata
    requires = [line for line in metadata if line.startswith("Requires-Dist:")]
    core = [line for line in requires if "extra ==" not in line]
    assert not any("torch" in line or "triton" in line or "safetensors" in line for line in core), core
    assert any("torch" in line and 'extra == "kernel"' in line for line in requires)


def test_the_sdist_holds_the_sources_the_tests_and_the_docs(dists):
    with tarfile.open(dists["sdist"]) as archive:
        members = {member.name.split("/", 1)[1] for member in archive.getmembers()
                   if member.isfile() and "/" in member.name}
    expected = {f"src/gdr_check/{name}" for name in _source_files(PACKAGE)}
    expected |= {f"tests/{name}" for name in _source_files(ROOT / "tests")}
    expected |= {f"docs/{name}" for name in _source_files(ROOT / "docs")}
    expected |= {"pyproject.toml", "README.md", "MANIFEST.in"}
    assert {"tests/conftest.py", "tests/checkpoint_builders.py", "tests/fake_engine/__init__.py"} <= expected
    assert sorted(expected - members) == [], "files missing from the sdist"
    assert not any("__pycache__" in name or name.endswith(".pyc") for name in members)


def test_generic_names_are_not_importable_outside_the_repository(tmp_path: Path):
    probe = ("import importlib.util, sys; "
             "print([m for m in ('cli', 'checks', 'kernel', 'sources', 'models', 'runner', 'tests') "
             "if importlib.util.find_spec(m)])")
    found = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert found.stdout.strip() == "[]", found.stderr


def test_python_dash_m_runs_the_cli(tmp_path: Path):
    done = subprocess.run([sys.executable, "-m", "gdr_check", "--version"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.startswith("gdr-check "), done.stderr
