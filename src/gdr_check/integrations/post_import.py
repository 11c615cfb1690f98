"""Run a function on a module once it is imported, without importing it (standard library only).

The plugins patch one engine class per engine (where a worker has its model config and parallel state, before
it builds the model). The class's module is often not imported yet when the engine loads its plugins (vLLM's
API server, sglang's scheduler before its model runner), and importing it there would cost seconds in every
engine process. `when_imported` patches it at once if it is imported, else right after its first import, from a
finder placed first on `sys.meta_path` that removes itself once it has run. A forked child inherits both the
patched class and a finder still waiting.
"""

from __future__ import annotations

import sys
import threading
import types
from collections.abc import Callable, Sequence
from importlib.machinery import ModuleSpec
from typing import Any

Callback = Callable[[types.ModuleType], None]


class _Loader:
    """The module's own loader, and the callback run after it has executed the module."""

    def __init__(self, loader: Any, callback: Callback, finder: _Finder) -> None:
        self.loader = loader
        self.callback = callback
        self.finder = finder

    def create_module(self, spec: ModuleSpec) -> types.ModuleType | None:
        create = getattr(self.loader, "create_module", None)
        return create(spec) if create is not None else None

    def exec_module(self, module: types.ModuleType) -> None:
        self.loader.exec_module(module)
        self.finder.remove()
        self.callback(module)

    def __getattr__(self, name: str) -> Any:  # get_source, is_package, ... of the module's own loader
        return getattr(self.loader, name)


class _Finder:
    """A meta path finder that answers for one module name only: it asks the finders after it for the module's
    spec and puts `_Loader` in front of the spec's loader."""

    def __init__(self, name: str, callback: Callback) -> None:
        self.name = name
        self.callback = callback
        self.busy = threading.local()

    def find_spec(self, fullname: str, path: Sequence[str] | None = None, target: Any = None) -> ModuleSpec | None:
        if fullname != self.name or getattr(self.busy, "on", False):
            return None
        self.busy.on = True
        try:
            for finder in list(sys.meta_path):
                find = getattr(finder, "find_spec", None)
                if finder is self or find is None:
                    continue
                spec: ModuleSpec | None = find(fullname, path, target)
                if spec is not None:
                    if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                        spec.loader = _Loader(spec.loader, self.callback, self)  # type: ignore[assignment]
                    return spec
            return None
        finally:
            self.busy.on = False

    def remove(self) -> None:
        try:
            sys.meta_path.remove(self)
        except ValueError:
            pass


def when_imported(name: str, callback: Callback) -> None:
    """Call `callback(module)` now if module `name` is imported, else right after it is first imported (the
    callback's own errors are its own to handle: it runs inside the engine's import)."""
    module = sys.modules.get(name)
    if module is not None:
        callback(module)
        return
    if any(isinstance(f, _Finder) and f.name == name and f.callback == callback for f in sys.meta_path):
        return  # already waiting (a plugin loaded twice in one process)
    sys.meta_path.insert(0, _Finder(name, callback))
