"""What both engine plugins do (standard library only): read the variables, patch the one engine method where a
worker has its model config and parallel state but no model and no CUDA graph yet, and from that method enter
the guard or the capture (`served`, imported only then).

Nothing here raises into the engine: a variable the plugin cannot use, a class it cannot patch or a worker it
cannot read is said once, on the engine's logger, and the engine goes on as if the plugin were not installed.
"""

from __future__ import annotations

import functools
import importlib
import logging
import os
import types
from collections.abc import Callable
from typing import Any, NamedTuple

from .post_import import when_imported
from .variables import ServedDeployment, SettingsError, read_settings

MARK = "__gdr_check_plugin__"  # on a method the plugin wrapped: it is wrapped once however often plugins load


class EngineHook(NamedTuple):
    """Where a plugin enters: `method` of `module:cls`, before (`after=False`) or after the engine's own code
    runs, and how a worker's deployment is read from the method's `self` (None: not a worker to guard, such as
    sglang's draft model runner)."""

    name: str  # the engine as its messages name it: "vLLM", "sglang"
    module: str
    cls: str
    method: str
    after: bool
    deployment: Callable[[Any], ServedDeployment | None]
    logger: logging.Logger


def register(hook: EngineHook) -> None:
    """The plugin's entry point: with no variable set, nothing; else the hook is placed when (or once) its
    module is imported. Never raises."""
    try:
        if read_settings(os.environ) is None:
            return
        when_imported(hook.module, functools.partial(_patch, hook))
    except SettingsError as error:
        hook.logger.warning("gdr-check: %s; the %s plugin does nothing", error, hook.name)
    except Exception as error:  # noqa: BLE001 - the engine must start whatever happens here
        hook.logger.warning("gdr-check: the %s plugin could not place its hook on %s.%s.%s (%s: %s); the engine "
                            "runs without the guard", hook.name, hook.module, hook.cls, hook.method,
                            type(error).__name__, error)


def _patch(hook: EngineHook, module: types.ModuleType) -> None:
    """Wrap `hook.method` of the class (once). A class or method the release lacks is said once."""
    try:
        cls = getattr(module, hook.cls)
        original = getattr(cls, hook.method)
        if getattr(original, MARK, False):
            return
        wrapper = _wrapped(hook, original)
        setattr(cls, hook.method, wrapper)
    except Exception as error:  # noqa: BLE001
        hook.logger.warning("gdr-check: cannot hook %s.%s.%s in this %s release (%s: %s); the engine runs without "
                            "the guard", hook.module, hook.cls, hook.method, hook.name, type(error).__name__, error)


def _wrapped(hook: EngineHook, original: Callable[..., Any]) -> Callable[..., Any]:
    if hook.after:
        @functools.wraps(original)
        def after(self: Any, *args: Any, **kwargs: Any) -> Any:
            result = original(self, *args, **kwargs)
            enter(hook, self)
            return result
        wrapper = after
    else:
        @functools.wraps(original)
        def before(self: Any, *args: Any, **kwargs: Any) -> Any:
            enter(hook, self)
            return original(self, *args, **kwargs)
        wrapper = before
    setattr(wrapper, MARK, True)
    return wrapper


def enter(hook: EngineHook, worker: Any) -> None:
    """Enter the guard or the capture in this worker, as the variables ask (read again: a worker's environment
    is its own). Never raises into the engine, except what the guard raises by design in raise mode."""
    try:
        settings = read_settings(os.environ)
        if settings is None:
            return
        deployment = hook.deployment(worker)
    except Exception as error:  # noqa: BLE001
        hook.logger.warning("gdr-check: cannot read this %s worker's deployment (%s: %s); the worker runs without "
                            "the guard", hook.name, type(error).__name__, error)
        return
    if deployment is None:
        return
    try:
        # torch, the guard and, on entry, the engine's Triton kernels: imported in a worker that asks for them only,
        # never where the plugin is merely loaded.
        from .served import start
    except Exception as error:  # noqa: BLE001
        hook.logger.warning("gdr-check: cannot import the guard (%s: %s); the worker runs without it",
                            type(error).__name__, error)
        return
    start(settings, deployment, hook.logger)


def release_of(module_name: str) -> str | None:
    """`__version__` of an engine's version module (`vllm.version`, `sglang.version`) when it is imported or
    imports, else None."""
    try:
        version = getattr(importlib.import_module(module_name), "__version__", None)
    except Exception:  # noqa: BLE001
        return None
    return version if isinstance(version, str) and version else None
