"""Three shortcuts through Triton's CPU interpreter (triton/runtime/interpreter.py) for the suite's in-process kernel
runs; each computes what the interpreter computes, in less time. tests/conftest.py installs them once triton's
interpreter is imported; GDR_CHECK_TEST_PLAIN_INTERPRETER=1 leaves the interpreter as it is (processes the tests
start, such as the dry-run's children and the rank workers, always run it as it is). tests/test_interpreter_shortcuts.py
checks each against the interpreter's own paths.

1. A reduction with a combine function of its own (the guard's `tl.reduce(seen, 0, _bit_or)`, over 128 or 1024
   rows per program) falls back to `ReduceOps.generic_reduce`, which calls the combine function once per element
   on one-element tensors. The shortcut calls the same combine function once per level of a pairwise tree on whole
   arrays (log2 of the rows' count: 7 or 10 calls instead of 127 or 1023), adjacent pairs first, as the GPU
   combines them; Triton's reductions require an associative combine function, so the result is the same. Where
   the combine function cannot take whole arrays, the interpreter's own path runs.
2. Every call of one `@triton.jit` function from another (`InterpretedFunction.__call__`) patches triton.language
   again for the callee (`_patch_lang`: five `inspect.getmembers` walks, about 2 ms), although the launch
   (`GridExecutor.__call__`) has already patched the same modules and nothing restores the callee's patches
   before the launch ends. The shortcut patches each module once per launch: a callee that sees only modules
   the launch has patched already is not patched again.
3. The numpy dtype of a Triton type (`_get_np_dtype`), asked for by nearly every operation the interpreter runs,
   builds its table of 17 `np.dtype`s again on each call (~6 s of a suite run's CPU). The shortcut asks the
   interpreter's function once per element type and keeps its answer: the table is a constant of the module.

Measured: the device guard's 28 scan-shape cases (tests/test_device_guard.py) spent about half their time in
the first two paths.
"""

from __future__ import annotations

import inspect
import os
import sys
from typing import Any

_installed = False
tree_reductions = 0  # reductions the tree took (the others fell back to the interpreter's own path)


def install() -> bool:
    """Install the shortcuts if triton's interpreter is imported and has the functions they replace; True when
    they are in place (now or before)."""
    global _installed
    if _installed:
        return True
    if os.environ.get("TRITON_INTERPRET") != "1" or os.environ.get("GDR_CHECK_TEST_PLAIN_INTERPRETER") == "1":
        return False
    interpreter = sys.modules.get("triton.runtime.interpreter")
    if interpreter is None:
        return False
    reduce_ops = getattr(interpreter, "ReduceOps", None)
    patch_lang = getattr(interpreter, "_patch_lang", None)
    if (reduce_ops is None or patch_lang is None or not hasattr(reduce_ops, "generic_reduce")
            or not hasattr(interpreter, "GridExecutor") or not hasattr(interpreter, "_get_np_dtype")):
        return False  # another Triton: the interpreter runs as it is
    _install_tree_reduce(interpreter, reduce_ops)
    _install_patch_once(interpreter, patch_lang)
    _install_np_dtype_table(interpreter)
    _installed = True
    return True


def _install_tree_reduce(interpreter: Any, reduce_ops: Any) -> None:
    import numpy as np

    generic = reduce_ops.generic_reduce

    def tree_reduce(self: Any, input: tuple[Any, ...]) -> list[Any]:
        original_axis = self.axis
        flat, axis = self.unravel(input, self.axis)
        dtypes = [arg.dtype for arg in flat]
        data = [arg.handle.data for arg in flat]
        if data[0].shape[axis] == 0:
            return generic(self, input)
        try:
            while data[0].shape[axis] > 1:
                count = data[0].shape[axis]
                paired = count - count % 2
                pairs = list(zip(data, dtypes, strict=True))
                left = [self.to_tensor(np.take(d, np.arange(0, paired, 2), axis), t) for d, t in pairs]
                right = [self.to_tensor(np.take(d, np.arange(1, paired, 2), axis), t) for d, t in pairs]
                combined = self.combine_fn.fn(*left, *right)
                combined = combined if isinstance(combined, tuple) else (combined,)
                halves = [np.asarray(c.handle.data if hasattr(c, "handle") else c).astype(d.dtype)
                          for c, d in zip(combined, data, strict=True)]
                if any(h.shape != left[0].handle.data.shape for h in halves):
                    return generic(self, input)
                if count % 2:  # the last element joins the next level, still after the others
                    halves = [np.concatenate([h, np.take(d, [count - 1], axis)], axis)
                              for h, d in zip(halves, data, strict=True)]
                data = halves
        except Exception:  # noqa: BLE001 - a combine function that takes one element at a time: the plain path
            return generic(self, input)
        global tree_reductions
        tree_reductions += 1
        out = []
        for values, dtype in zip(data, dtypes, strict=True):
            values = np.squeeze(values, axis)
            if self.keep_dims:
                if original_axis is not None:
                    values = np.expand_dims(values, axis)
                else:
                    for _ in range(data[0].ndim):
                        values = np.expand_dims(values, 0)
            elif original_axis is None:
                values = values.item()
            out.append(self.to_tensor(values, dtype))
        return out

    tree_reduce.__doc__ = "interpreter_shortcuts: " + (generic.__doc__ or "generic_reduce, by levels")
    reduce_ops.generic_reduce = tree_reduce
    reduce_ops._plain_generic_reduce = generic


def _install_patch_once(interpreter: Any, patch_lang: Any) -> None:
    import threading

    import triton.language as tl

    launches = threading.local()  # .stack: per launch under way, the modules its own patching covered

    class _Nothing:
        def restore(self) -> None:
            pass

    def langs_of(fn: Any) -> set[int]:
        return {id(value) for value in fn.__globals__.values() if inspect.ismodule(value) and value in (tl, tl.core)}

    def patch_lang_once(fn: Any) -> Any:
        stack = getattr(launches, "stack", None)
        if stack:
            langs = langs_of(fn)
            if stack[-1] is None:  # the launch's own patching (GridExecutor.__call__), restored when it ends
                stack[-1] = langs
            elif langs <= stack[-1]:
                return _Nothing()  # a callee inside the launch: its modules are patched already
            else:  # a callee that sees another module (triton's own helpers see `core`): patched once
                stack[-1] = stack[-1] | langs
        return patch_lang(fn)

    grid_call = interpreter.GridExecutor.__call__

    def launch(self: Any, *args: Any, **kwargs: Any) -> Any:
        stack = launches.__dict__.setdefault("stack", [])
        stack.append(None)
        try:
            return grid_call(self, *args, **kwargs)
        finally:
            stack.pop()

    interpreter._plain_patch_lang = patch_lang
    interpreter.GridExecutor._plain_call = grid_call
    interpreter._patch_lang = patch_lang_once
    interpreter.GridExecutor.__call__ = launch


def _install_np_dtype_table(interpreter: Any) -> None:
    import triton.language as tl

    plain = interpreter._get_np_dtype
    known: dict[Any, Any] = {}

    def np_dtype(tt_dtype: Any) -> Any:
        # A block's numpy dtype is its element's (the interpreter's own rule): keyed by the element type.
        key = tt_dtype.element_ty if isinstance(tt_dtype, tl.block_type) else tt_dtype
        try:
            return known[key]
        except KeyError:
            found = known[key] = plain(key)
            return found
        except TypeError:  # a type that cannot be a key: as the interpreter answers it
            return plain(tt_dtype)

    interpreter._plain_get_np_dtype = plain
    interpreter._get_np_dtype = np_dtype
