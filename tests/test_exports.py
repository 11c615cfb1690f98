"""The lazily exported names of each package (PEP 562, `gdr_check.base.lazy`) are its `__all__`, and each resolves."""

from __future__ import annotations

import importlib

import pytest

# package -> names in `__all__` that are not lazy exports
PACKAGES = {
    "gdr_check": {"__version__"},
    "gdr_check.models": set(),
    "gdr_check.pipeline.dryrun": set(),
    "gdr_check.kernel": set(),
}


@pytest.mark.parametrize("name", sorted(PACKAGES))
def test_all_is_the_lazy_exports(name: str) -> None:
    package = importlib.import_module(name)
    assert sorted(package.__all__) == sorted(set(package._EXPORTS) | PACKAGES[name])
    assert len(package.__all__) == len(set(package.__all__))


@pytest.mark.parametrize("name", ["gdr_check", "gdr_check.models", "gdr_check.pipeline.dryrun"])
def test_every_export_resolves(name: str) -> None:
    package = importlib.import_module(name)
    for export in package._EXPORTS:
        assert getattr(package, export) is not None, export


@pytest.mark.parametrize("name", sorted(PACKAGES))
def test_dir_lists_the_public_names_not_the_import_machinery(name: str) -> None:
    package = importlib.import_module(name)
    names = dir(package)
    assert set(package.__all__) <= set(names)
    for machinery in ("TYPE_CHECKING", "annotations", "lazy_dir", "lazy_getattr", "_EXPORTS", "_lazy"):
        assert machinery not in names, machinery
    assert {"__all__", "__getattr__", "__name__"} <= set(names)


def test_dir_lists_a_subpackage_once_it_is_imported() -> None:
    package = importlib.import_module("gdr_check")
    importlib.import_module("gdr_check.sources")
    assert "sources" in dir(package)
