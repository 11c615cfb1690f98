"""The lazily exported names of each package (PEP 562, `gdr_check._lazy`) are its `__all__`, and each resolves."""

from __future__ import annotations

import importlib

import pytest

# package -> names in `__all__` that are not lazy exports
PACKAGES = {
    "gdr_check": {"__version__"},
    "gdr_check.models": set(),
    "gdr_check.runner": set(),
    "gdr_check.kernel": set(),
}


@pytest.mark.parametrize("name", sorted(PACKAGES))
def test_all_is_the_lazy_exports(name: str) -> None:
    package = importlib.import_module(name)
    assert sorted(package.__all__) == sorted(set(package._EXPORTS) | PACKAGES[name])
    assert len(package.__all__) == len(set(package.__all__))


@pytest.mark.parametrize("name", ["gdr_check", "gdr_check.models", "gdr_check.runner"])
def test_every_export_resolves(name: str) -> None:
    package = importlib.import_module(name)
    for export in package._EXPORTS:
        assert getattr(package, export) is not None, export
