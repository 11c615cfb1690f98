"""The repository's scripts (scripts/*.py) as modules, for the tests that call their functions: loaded once each."""

from __future__ import annotations

import importlib.util
import sys
from functools import cache
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent


@cache
def script(name: str) -> ModuleType:
    """scripts/<name>.py, imported under `name` (registered in sys.modules so that its dataclasses resolve)."""
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(name, module)
    spec.loader.exec_module(module)
    return module
