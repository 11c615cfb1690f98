"""PEP 562 lazy exports, shared by the package `__init__` modules.

A package lists `name -> module` (relative to the package) and gets a module `__getattr__` that imports the
module on first use, so importing the package stays cheap and never pulls in torch or triton.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from importlib import import_module
from types import ModuleType
from typing import Any


def lazy_getattr(package: str, exports: Mapping[str, str], namespace: dict[str, Any]) -> Callable[[str], Any]:
    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(import_module(module, package), name)
        namespace[name] = value  # later lookups skip __getattr__
        return value

    return __getattr__


def lazy_dir(exports: Mapping[str, str], namespace: dict[str, Any]) -> Callable[[], list[str]]:
    """A module `__dir__` for `dir()`, `help()` and tab completion: the lazy exports (loaded or not), the
    submodules imported so far and the module's dunders; not the names the package imports for its own
    machinery (`TYPE_CHECKING`, these helpers, `annotations`)."""

    def __dir__() -> list[str]:
        own = {name for name, value in namespace.items()
               if (name.startswith("__") and name.endswith("__"))
               or (isinstance(value, ModuleType) and not name.startswith("_"))}
        return sorted(own | set(exports))

    return __dir__
