"""benchmarks/runtime_guard.py's helpers, on the CPU (the benchmark itself needs a CUDA device)."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("triton")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
runtime_guard = importlib.import_module("runtime_guard")
device_guard = importlib.import_module("gdr_check.kernel.device_guard")


def test_counting_the_checks_passes_every_argument_through(monkeypatch):
    # The separate slot check is called with release=...: a counter that dropped keywords broke the fault cases.
    calls = []
    monkeypatch.setattr(device_guard.CheckLaunch, "__call__",
                        lambda check, *args, **options: calls.append((args, options)) or "sanitised")
    results = []
    count = runtime_guard.counted_checks(lambda: results.append(
        device_guard.CheckLaunch.__call__(object(), "indices", 8, release=True)))
    assert count == 1
    assert calls == [(("indices", 8), {"release": True})]
    assert results == ["sanitised"]
    assert "counted" not in device_guard.CheckLaunch.__call__.__qualname__  # restored afterwards
