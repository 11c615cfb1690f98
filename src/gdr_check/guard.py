"""A runtime guard for a live engine: check every packed-decode call, keep the pool safe, stay capture-safe.

    import gdr_check

    with gdr_check.guard(engine="sglang", model="Qwen/Qwen3-Next-80B-A3B-Instruct", tp=4) as guard:
        engine.generate(prompts)        # every packed-decode call is checked, eager or under CUDA graphs
    guard.diagnostics                   # what was found (mode="record"); mode="raise" raises, "warn" warns

    @gdr_check.guard(engine="vllm", mode="warn")   # or as a decorator
    def decode_step(...): ...

On enter, the engine's packed-decode functions are replaced by a checking wrapper in EVERY imported module
that holds them (backends import them by name), and restored on exit, as `gdr_check.capture` does.

Per call, the wrapper does what depends on shapes once per call signature (the contract without index
values, and the comparison with the model's expected per-rank call when `model` is given) and a dictionary
lookup afterwards. The index values are checked on the device by a small kernel that also hands the engine's
kernel a copy of the indices with every faulty row set to -1 (skip), so an out-of-range or repeated slot can
neither write outside the pool nor race; the fault (rule, row, slot, layer) is recorded in a device buffer.
Nothing reads the device while a stream is capturing: faults found during graph replays are read at the next
eager call, after a replay (the guard hooks `torch.cuda.CUDAGraph.replay` with a non-blocking poll), at
`guard.raise_pending()`, and on exit.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import sys
import threading
import types
import warnings
from collections.abc import Callable, Sequence
from typing import Any, Literal

from .call import ARGUMENTS, ENGINES
from .capture import ENGINE_TARGETS, PARAMETERS, _split_target, install_wrappers, restore_wrappers
from .checks.compare import ModelGeometry, compare_call
from .checks.contract import describe_call
from .models.check import check_model
from .models.deployment import Deployment

Mode = Literal["raise", "warn", "record"]
MODES = ("raise", "warn", "record")
_LAYER_SEARCH_DEPTH = 8  # frames searched (once per pool) for the caller's `layer_id`


class GuardError(ValueError):
    """A guarded call broke the contract (mode="raise"): the first error's message, every diagnostic kept."""

    def __init__(self, diagnostics: list[Any]) -> None:
        first = diagnostics[0]
        where = next((n for n in first.notes if n.startswith("in ")), None)
        super().__init__(f"{first.code}: {first.message}" + (f" [{where}]" if where else ""))
        self.diagnostics = diagnostics


def _layer_label(state: Any, ordinal: int) -> str:
    """A name for the layer whose pool is `state`: the caller's `layer_id` (sglang and vLLM layers carry one)
    when a frame up the stack has it, else the order in which the guard first saw the pool."""
    frame = sys._getframe(2)
    for _ in range(_LAYER_SEARCH_DEPTH):
        if frame is None:
            break
        local = frame.f_locals
        layer = local.get("layer")
        layer_id = local.get("layer_id", getattr(layer, "layer_id", None))
        if isinstance(layer_id, int) and not isinstance(layer_id, bool):
            return f"layer {layer_id}"
        frame = frame.f_back
    return f"pool #{ordinal}"


class _Site:
    """One engine function being guarded, with its argument order for a fast bind."""

    def __init__(self, original: Callable, target: str, variant: str) -> None:
        self.original = original
        self.target = target
        self.variant = variant
        self.holders: list[str] = []
        signature = inspect.signature(original)
        self.names = [name for name in signature.parameters if name in PARAMETERS]
        self.defaults = {name: p.default for name, p in signature.parameters.items()
                         if name in PARAMETERS and p.default is not inspect.Parameter.empty}
        self.wrapper: Callable = original

    def bind(self, args: tuple, kwargs: dict) -> dict[str, Any]:
        values = dict(self.defaults)
        values.update(zip(self.names, args))
        values.update(kwargs)
        return values


class Guard:
    """Context manager and decorator installing the runtime guard (see the module docs)."""

    def __init__(self, engine: str = "sglang", model: str | None = None, *, tp: int = 1, mode: Mode = "raise",
                 targets: Sequence[str] | None = None, state_dtype: str | None = None, hook_graphs: bool = True,
                 max_records: int = 64) -> None:
        if engine not in ENGINES:
            raise ValueError(f"unknown engine {engine!r}; expected one of: {', '.join(ENGINES)}")
        if mode not in MODES:
            raise ValueError(f"unknown mode {mode!r}; expected one of: {', '.join(MODES)}")
        if isinstance(targets, str):
            targets = [targets]
        self.engine = engine
        self.model = model
        self.tp = tp
        self.mode = mode
        self.state_dtype = state_dtype
        self.hook_graphs = hook_graphs
        self.max_records = max_records
        self.extra_targets = [f"{m}:{a}" for m, a in map(_split_target, targets or ())]
        self.diagnostics: list[Any] = []
        self.calls = 0
        self.sites: list[_Site] = []
        self._replaced: list[tuple[dict[str, Any], str, _Site]] = []
        self._depth = 0
        self._lock = threading.RLock()
        self._verdicts: dict[tuple, Any] = {}
        self._buffers: dict[Any, Any] = {}
        self._tags: dict[tuple, int] = {}
        self._expected: Any = None
        self._warned: set[str] = set()
        self._replay: Any = None

    # -- context manager and decorator -------------------------------------------------------------------------
    def __enter__(self) -> Guard:
        with self._lock:
            if self._depth == 0:
                self._patch()
            self._depth += 1
        return self

    def __exit__(self, exc_type: Any, exc: Any, traceback: Any) -> None:
        with self._lock:
            self._depth -= 1
            if self._depth:
                return
            self._unpatch()
        if exc is None:
            self.raise_pending()

    def __call__(self, function: Callable) -> Callable:
        @functools.wraps(function)
        def guarded(*args: Any, **kwargs: Any) -> Any:
            with self:
                return function(*args, **kwargs)

        return guarded

    # -- faults -------------------------------------------------------------------------------------------------
    def raise_pending(self) -> list[Any]:
        """Read every fault buffer (synchronises the device; does nothing while capturing) and act on the
        faults per `mode`. Returns the new diagnostics."""
        from .kernel.device_guard import diagnostics_of, is_capturing

        if is_capturing():
            return []
        found: list[Any] = []
        for buffer in list(self._buffers.values()):
            faults, _ = buffer.take()
            found += diagnostics_of(faults, "engine", self.engine)
        self._act(found)
        return found

    def poll(self) -> None:
        """Act on faults the device has already reported, without waiting for it."""
        from .kernel.device_guard import PendingFaults

        for buffer in list(self._buffers.values()):
            try:
                buffer.poll("engine", self.engine)
            except PendingFaults as pending:
                self._act(pending.diagnostics)

    def _act(self, diagnostics: list[Any]) -> None:
        if not diagnostics:
            return
        self.diagnostics.extend(diagnostics)
        errors = [d for d in diagnostics if d.severity == "error"]
        if self.mode == "raise" and errors:
            raise GuardError(errors)
        if self.mode == "warn":
            for d in diagnostics:
                key = f"{d.code}:{d.message}"
                if key not in self._warned:
                    self._warned.add(key)
                    warnings.warn(f"gdr_check.guard: {d.code}: {d.message}", RuntimeWarning, stacklevel=4)

    # -- per call -------------------------------------------------------------------------------------------------
    def _buffer(self, device: Any) -> Any:
        buffer = self._buffers.get(device)
        if buffer is None:
            from .kernel.device_guard import FaultBuffer

            buffer = self._buffers.setdefault(device, FaultBuffer(device, self.max_records))
        return buffer

    def _verdict(self, site: _Site, args: tuple) -> Any:
        from .kernel.device_guard import shape_verdict, signature_of

        key = (site.variant, *signature_of(args))
        verdict = self._verdicts.get(key)
        if verdict is None:
            verdict = shape_verdict(site.variant, args, self.engine,
                                    extra=self._compare_with_model if self.model else None)
            self._verdicts[key] = verdict
            self._act(verdict.errors + verdict.others)
        return verdict

    def _compare_with_model(self, args: tuple) -> list[Any]:
        """The differences between this call and the model's expected per-rank call (shapes only)."""
        if self._expected is None:
            check = check_model(self.model, Deployment(tp=self.tp, engine=self.engine, state_dtype=self.state_dtype))
            if check.call is None or check.model is None:
                self._expected = False
            else:
                config = getattr(check.checkpoint, "config", None) or {}
                text = config.get("text_config") if isinstance(config.get("text_config"), dict) else config
                head_dim = text.get("head_dim") if isinstance(text, dict) else None
                geometry = ModelGeometry.from_model(check.model, self.model,
                                                    head_dim if isinstance(head_dim, int) else None)
                reason = check.settings.state_dtype_reason if check.settings else None
                self._expected = (check.call, geometry, reason)
        if not self._expected:
            return []
        expected, geometry, reason = self._expected
        tensors = dict(zip(("mixed_qkv", "a", "b", "A_log", "dt_bias"), args[:5]))
        tensors.update(initial_state=args[6], out=args[7], ssm_state_indices=args[8])
        recorded = describe_call(expected.variant, tensors, args[5], bool(args[9]),
                                 args[10] if len(args) > 10 else None, read_values=False)
        comparison = compare_call(recorded, expected, geometry, tp=self.tp, engine=self.engine,
                                  state_dtype_reason=reason)
        return list(comparison.diagnostics)

    def _tag(self, buffer: Any, state: Any, pool_slots: int) -> int:
        key = (state.data_ptr(), pool_slots)
        tag = self._tags.get(key)
        if tag is None:
            tag = buffer.tag_for(_layer_label(state, len(self._tags)), pool_slots)
            self._tags[key] = tag
        return tag

    def _guarded_call(self, site: _Site, args: tuple, kwargs: dict) -> Any:
        from .kernel.device_guard import guard_indices, is_capturing

        values = site.bind(args, kwargs)
        ordered = tuple(values.get(name) for name in (*ARGUMENTS, "use_qk_l2norm_in_kernel")) + (
            (values.get("lower_bound"),) if site.variant == "kda" else ())
        self.calls += 1
        verdict = self._verdict(site, ordered)
        if verdict.errors or verdict.pool_slots == 0:  # refused (mode="raise" raised already) or no pool
            return site.original(**values)
        capturing = is_capturing()
        if not capturing:
            self.poll()
        state = values["initial_state"]
        buffer = self._buffer(state.device)
        tag = self._tag(buffer, state, verdict.pool_slots)
        values["ssm_state_indices"] = guard_indices(values["ssm_state_indices"], verdict.pool_slots, self.engine,
                                                    buffer, tag)
        return site.original(**values)

    # -- patching -------------------------------------------------------------------------------------------------
    def _resolve(self, target: str) -> Callable | None:
        module_name, attribute = _split_target(target)
        module = sys.modules.get(module_name)
        if module is None:
            try:
                module = importlib.import_module(module_name)
            except Exception:  # noqa: BLE001 - a path this engine version lacks, or an engine that fails to import
                return None
        function = getattr(module, attribute, None)
        return function if callable(function) else None

    def _patch(self) -> None:
        by_id: dict[int, _Site] = {}
        self.sites = []
        for target in [*ENGINE_TARGETS[self.engine], *self.extra_targets]:
            function = self._resolve(target)
            if function is None or id(function) in by_id:
                continue
            function = getattr(function, "__gdr_check_guard_original__", function)
            site = _Site(function, target, "kda" if "kda" in target.rsplit(":", 1)[1].lower() else "gdn")
            missing = [name for name in ARGUMENTS if name not in site.names]
            if missing:
                continue  # another API (vLLM's KDA op): not the packed-decode contract
            site.wrapper = self._wrapper_for(site)
            by_id[id(function)] = site
            self.sites.append(site)
        self._replaced = install_wrappers(by_id)
        if not self.sites:
            warnings.warn(f"gdr_check.guard found no {self.engine} packed-decode function to guard; pass "
                          f"targets=['package.module:function_name'] for another location", RuntimeWarning,
                          stacklevel=3)
        if self.hook_graphs and "torch" in sys.modules:
            self._hook_replay()

    def _wrapper_for(self, site: _Site) -> Callable:
        @functools.wraps(site.original)
        def guarded_wrapper(*args: Any, **kwargs: Any) -> Any:
            if self._depth <= 0:
                return site.original(*args, **kwargs)
            return self._guarded_call(site, args, kwargs)

        guarded_wrapper.__gdr_check_guard_original__ = site.original  # type: ignore[attr-defined]
        return guarded_wrapper

    def _hook_replay(self) -> None:
        torch = sys.modules["torch"]
        graph_class = getattr(getattr(torch, "cuda", None), "CUDAGraph", None)
        if graph_class is None:
            return
        replay = graph_class.replay
        guard = self

        @functools.wraps(replay)
        def replay_and_poll(graph: Any, *args: Any, **kwargs: Any) -> Any:
            result = replay(graph, *args, **kwargs)
            guard.poll()
            return result

        graph_class.replay = replay_and_poll
        self._replay = (graph_class, replay)

    def _unpatch(self) -> None:
        restore_wrappers(self._replaced, self.sites)
        self._replaced = []
        if self._replay is not None:
            graph_class, replay = self._replay
            graph_class.replay = replay
            self._replay = None


# `gdr_check.guard(...)` must work however `gdr_check.guard` was reached (see the same device in capture.py):
# importing this submodule binds the package attribute to the module, so the module itself is callable.
class _CallableModule(types.ModuleType):
    def __call__(self, engine: str = "sglang", model: str | None = None, *, tp: int = 1, mode: Mode = "raise",
                 targets: Sequence[str] | None = None, state_dtype: str | None = None, hook_graphs: bool = True,
                 max_records: int = 64) -> Guard:
        """Guard the engine's packed-decode calls inside a `with` block or a decorated function."""
        return Guard(engine, model, tp=tp, mode=mode, targets=targets, state_dtype=state_dtype,
                     hook_graphs=hook_graphs, max_records=max_records)


sys.modules[__name__].__class__ = _CallableModule
guard = sys.modules[__name__]
