"""A runtime guard for a live engine: check every packed-decode call, keep the pool safe, stay capture-safe.

    import gdr_check

    with gdr_check.guard(engine="sglang", model="Qwen/Qwen3-Next-80B-A3B-Instruct", tp=4) as guard:
        engine.generate(prompts)        # every packed-decode call is checked, eager or under CUDA graphs
    guard.diagnostics                   # what was found (mode="record"), up to 4096, the rest counted in
                                        # guard.dropped_diagnostics; mode="raise" raises, "warn" warns

    @gdr_check.guard(engine="vllm", mode="warn")   # or as a decorator
    def decode_step(...): ...

On enter, the engine's packed-decode functions are replaced by a checking wrapper in EVERY imported module
that holds them (backends import them by name), and restored on exit, as `gdr_check.capture` does. sglang's
targets include its Helion KDA decode (`helion_fused_recurrent_kda_packed_decode`, the "helion" KDA decode
backend; absent without the `helion` package), which its backend object (`HelionKDAKernel`) imports in its
`__init__` and keeps as an instance attribute. A backend built inside the block gets the wrapper; one built
before the guard was entered holds the function itself, so the live instances of such classes
(`capture.INSTANCE_HOLDERS`) are found through the garbage collector and their attribute is wrapped and
restored too (a walk over the process's objects on enter and on exit, about 45 ms for 2 million objects on a
development CPU; nothing per call). Objects frozen with `gc.freeze()` are invisible to that walk (a
RuntimeWarning says so when it may matter); a wrapper left on such an object after the guard has left passes
calls straight through, and the next guard wraps it again. Entering the guard before the engine builds its
attention backends needs no such walk to be right, and is the safer order: a class the list does not name is
only covered that way.

Per call, the wrapper does what depends on shapes once per call signature (the contract without index
values, and the comparison with the model's expected per-rank call when `model` is given); afterwards a call
costs a comparison of its signature with the last one's (checks/hotpath.py lists the steady state step by
step). A refused signature is refused on every call (mode="raise": GuardError each time). The index values
are checked on the device by a small kernel that also hands the engine's kernel a copy of the indices with every faulty
row set to -1 (skip), so an out-of-range or repeated slot can neither write outside the pool nor race; the
fault (rule, row, slot, layer) is recorded in a device buffer.
Nothing reads the device while a stream is capturing. A kernel that records a fault sets a flag word in host
memory (`FaultBuffer.flag`), which every eager call reads (one host load, no CUDA call): faults are read at
the first eager call or graph replay (the guard hooks `torch.cuda.CUDAGraph.replay`) after the faulty kernel
has run, at `guard.raise_pending()`, and on exit. A read synchronises the device, so while faults keep coming
the looks after a read are spaced (`device_guard.REPEAT_LOOK_INTERVAL`: at most 64 flagged calls or replays
apart, fewer when faults come faster, so that the records between two reads fill at most half the buffer).

The indices are checked once per decode step, not once per layer: every layer of a step passes the same
indices tensor (each with its own pool), so a call reuses the sanitised indices of its plan's last check when
the indices are the same object, their `_version` is unchanged, the capture epoch is unchanged, the current
CUDA stream is the check's, and the call's pool has not been served from that check yet. A pool served twice
starts a new step and a new check, which covers indices refilled between steps without a version bump (a
Triton kernel's write, a graph's input buffer). The stream condition keeps the reuse memory-safe across
streams: a call on another stream could read the sanitised indices before the check has written them. The
capture epoch is bumped around `torch.cuda.CUDAGraph.capture_begin` and `capture_end`, which one process-wide
set of wrappers hooks while any guard is entered (with `replay`, which polls every entered guard), so a check
made eagerly never serves a call being captured and a check captured into a graph never serves an eager call,
however guards are nested or interleaved. Reuse is off with `hook_graphs=False`, when torch was not imported
on enter (no capture can be seen); then every call is checked. Inference-mode indices (vLLM decodes under
`torch.inference_mode()`) have no version counter: for them reuse rests on the object, the stream and the
served pools. It assumes what the engines do: every step runs the same layers (so a step's first layer was
served in the step before), no write to the indices between two layers of one step other than an in-place
torch operation (seen by the version), and graphs captured through `torch.cuda.CUDAGraph` (`torch.cuda.graph`,
`make_graphed_callables`, the engines' graph runners); a capture begun through the CUDA runtime directly is
not seen (a graph could then keep an eager copy): guard such code with `hook_graphs=False`. Where indices
change unseen between two layers of a step (a step that skips its first layer, a write by a kernel
mid-step), a reused copy names the slots as they were at the check, yet stays memory-safe: it was checked
against a pool of the same size (the pool's shape is part of the signature). vLLM's layers may each get
their own indices tensor: then nothing is reused and every call is checked, as before.
A fault found by a shared check is recorded once, labelled with the layer (pool) whose call launched the
check: the step's first layer; the other layers' kernels get the same sanitised indices (the row as -1).
"""

from __future__ import annotations

import functools
import importlib
import inspect
import numbers
import os
import reprlib
import sys
import threading
import types
import warnings
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any, Literal

from ..base.errors import described
from ..base.limits import DEFAULT_MAX_RECORDS, KEPT_DIAGNOSTICS, UNLISTED_FAULTS, checked, counted
from ..base.records import dataclass
from ..base.tensor_spec import is_fake_tensor_type
from ..base.variants import kernel_variant, variant_spec
from ..call.packed_call import ARGUMENTS, TENSOR_ARGUMENTS, Variant
from ..checks.compare import ModelGeometry, compare_call
from ..checks.contract import describe_call
from ..checks.hotpath import address_errors, out_overlaps, run_contract, tensor_matcher
from ..deployment.settings import Deployment
from ..engines.profiles import live_engine, profile_for
from .capture import (
    GUARD_WRAPPERS,
    PARAMETERS,
    _split_target,
    engine_targets,
    install_wrappers,
    missing_function,
    restore_wrappers,
    unimportable_target,
)
from .model_check import check_model

Mode = Literal["raise", "warn", "record"]
MODES = ("raise", "warn", "record")
_LAYER_SEARCH_DEPTH = 8  # frames searched (once per pool) for the caller's `layer_id`
_PLAN_CACHE_SIZE = 4096  # signatures kept per guarded function; engines use a handful (one per batch-size bucket)
_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


def _stacklevel_outside_package() -> int:
    """The `stacklevel` (for a `warnings.warn` in the caller of this function) of the first frame outside
    gdr_check: the engine's or the user's call, however many of the guard's own frames lie between (a fault
    found while a later call is planned is warned about at that call's line, not inside the guard)."""
    frame: types.FrameType | None = sys._getframe(2)  # the frame that called the warning's caller
    level = 2
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE_DIR):
        frame, level = frame.f_back, level + 1
    return level


HOST_POOL_LABELS = 4096  # pools the host check names (`_check_on_host`) before it starts over


class GuardError(ValueError):
    """A guarded call broke the contract (mode="raise"): the first error's message and how many more there are,
    every diagnostic kept."""

    def __init__(self, diagnostics: list[Any], unlisted: int = 0) -> None:
        if diagnostics:
            first = diagnostics[0]
            where = next((n for n in first.notes if n.startswith("in ")), None)
            text = f"{first.code}: {first.message}" + (f" [{where}]" if where else "")
            more = [counted(len(diagnostics) - 1, "more error")] if len(diagnostics) > 1 else []
            if unlisted:
                more.append(f"{counted(unlisted, 'more fault')} {UNLISTED_FAULTS}")
            if more:
                text += f" (and {', and '.join(more)})"
        else:
            text = f"{counted(unlisted, 'fault')} {UNLISTED_FAULTS}"
        super().__init__(text)
        self.diagnostics = diagnostics
        self.unlisted = unlisted  # faults the device counted but did not keep records of


class GuardTargetError(GuardError):
    """An explicit `targets` entry whose module cannot be imported or has no such function: refused on entry, in
    the words `gdr_check.capture` refuses its own with (the engine's default locations only warn)."""

    def __init__(self, message: str) -> None:
        ValueError.__init__(self, message)
        self.diagnostics: list[Any] = []
        self.unlisted = 0


def _layer_label(state: Any, ordinal: int) -> str:
    """A name for the layer whose pool is `state`: the caller's `layer_id` (sglang and vLLM layers carry one)
    when a frame up the stack has it, else the order in which the guard first saw the pool. A function's
    locals are read only where its code has one of the two names: before Python 3.13, reading `f_locals`
    leaves a snapshot of every local on the frame, which keeps the caller's tensors alive until it returns."""
    frame: types.FrameType | None = sys._getframe(2)
    for _ in range(_LAYER_SEARCH_DEPTH):
        if frame is None:
            break
        code = frame.f_code
        if not code.co_flags & inspect.CO_OPTIMIZED or not _LAYER_NAMES.isdisjoint(
                code.co_varnames + code.co_cellvars + code.co_freevars):
            local = frame.f_locals
            try:  # a caller's property may raise: a name is not worth the engine's call
                layer_id = local.get("layer_id", getattr(local.get("layer"), "layer_id", None))
            except Exception:  # noqa: BLE001
                layer_id = None
            if isinstance(layer_id, numbers.Integral) and not isinstance(layer_id, bool):
                return f"layer {int(layer_id)}"
        frame = frame.f_back
    return f"pool #{ordinal}"


_LAYER_NAMES = frozenset({"layer", "layer_id"})


def _signature(values: dict[str, Any], l2norm_default: Any = False, bound_default: Any = None
               ) -> tuple[Any, ...]:
    """What a call's shape-level decision depends on: shape, strides, dtype and device of each tensor argument,
    and the scalars with their types (`True == 1`), an omitted flag or bound taken as the function's default
    (the value the contract is run with: `_Site.ordered`). No data pointer, no index value. Raises (KeyError,
    AttributeError, ...) when an argument is missing or is not a tensor: the caller then takes the slow path."""
    q, a, b = values["mixed_qkv"], values["a"], values["b"]
    g, d, h = values["A_log"], values["dt_bias"], values["initial_state"]
    o, i, scale = values["out"], values["ssm_state_indices"], values["scale"]
    l2norm = values.get("use_qk_l2norm_in_kernel", l2norm_default)
    bound = values.get("lower_bound", bound_default)
    # NaN is not equal to itself: a fresh NaN per call would never find its plan (the wrapper's inlined key then
    # misses, and this one finds the plan by the NaN's name), nor would a tensor, hashed by identity (a
    # contract error: keyed by what it is). The types are taken first, so a float NaN and the string "nan"
    # keep apart.
    scale_type, bound_type = type(scale), type(bound)
    scale, bound = _keyed_scalar(scale), _keyed_scalar(bound)
    return (q.shape, q.stride(), q.dtype, q.device, a.shape, a.stride(), a.dtype, a.device,
            b.shape, b.stride(), b.dtype, b.device, g.shape, g.stride(), g.dtype, g.device,
            d.shape, d.stride(), d.dtype, d.device, h.shape, h.stride(), h.dtype, h.device,
            o.shape, o.stride(), o.dtype, o.device, i.shape, i.stride(), i.dtype, i.device,
            scale, scale_type, l2norm, type(l2norm), bound, bound_type)


def _keyed_scalar(value: Any) -> Any:
    """A scalar argument as the signature keys it: a tensor (hashed by identity) by its shape, dtype and device,
    and on the CPU by its value's text when it holds one (reading a GPU tensor's would wait for the device);
    "nan" for a NaN of any type (a NumPy float, a Decimal); anything else as it is."""
    if hasattr(value, "data_ptr"):
        device = value.device
        shown = repr(value) if device.type == "cpu" and value.numel() <= 1 else None
        return ("tensor", tuple(value.shape), value.dtype, str(device), shown)
    try:
        if value != value:
            return "nan"
    except Exception:  # noqa: BLE001 - a signalling NaN, an array: keyed as it is (or loosely, if unhashable)
        pass
    return value


def _loose_signature(values: dict[str, Any]) -> tuple[Any, ...]:
    """A key for a call `_signature` cannot describe (None, a list, a sparse or nested tensor...): what each
    argument is, so that the same mistake is judged (and reported) once."""
    key: list[Any] = []
    for name in PARAMETERS:
        value: Any = values.get(name)
        try:
            key.append((type(value), value.layout, value.dtype, value.device, bool(value.is_nested)))
        except Exception:  # noqa: BLE001 - not a tensor
            try:
                key.append((type(value), hash(value), value))
            except Exception:  # noqa: BLE001 - unhashable (a list, a NumPy array): keyed by its bounded repr,
                # so a different value is judged again and the message names the value of this call
                key.append((type(value), reprlib.repr(value)))
    return tuple(key)


def _tensors(args: tuple[Any, ...]) -> dict[str, Any]:
    """The tensor arguments of a call in the packed-decode order (`_Site.ordered`), by name (scale and the flags
    left out)."""
    return {name: value for name, value in zip(ARGUMENTS, args, strict=False) if name != "scale"}


class _Site:
    """One engine function being guarded, with its signature for binding positional calls."""

    def __init__(self, original: Callable[..., Any], target: str, variant: Variant) -> None:
        self.original = original
        self.target = target
        self.variant = variant
        self.holders: list[str] = []
        self.signature = inspect.signature(original)
        parameters = self.signature.parameters
        self.names = [name for name in parameters if name in PARAMETERS]
        self.kinds = {name: parameter.kind for name, parameter in parameters.items()}
        # A function with positional-only parameters or a *args cannot take a call by name alone: its calls
        # are bound by its signature (`bind`) and it is called with the bound arguments.
        positional_kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.VAR_POSITIONAL)
        self.binds_positionally = any(kind in positional_kinds for kind in self.kinds.values())
        # The contract's arguments the function gives a default, for a call that leaves them out.
        self.defaults = {name: parameter.default for name, parameter in parameters.items()
                         if name in PARAMETERS and parameter.default is not inspect.Parameter.empty}
        self.l2norm_default = parameters["use_qk_l2norm_in_kernel"].default \
            if "use_qk_l2norm_in_kernel" in parameters else False
        if self.l2norm_default is inspect.Parameter.empty:
            self.l2norm_default = False
        self.bound_default = parameters["lower_bound"].default if "lower_bound" in parameters else None
        if self.bound_default is inspect.Parameter.empty:
            self.bound_default = None
        self.wrapper: Callable[..., Any] = original
        self.plans: dict[tuple[Any, ...], _Plan] = {}
        # The plan of the last call with a full signature: consecutive calls (the layers of a decode step)
        # mostly share it, and comparing against its key costs less than building and hashing a new one.
        self.recent: _Plan | None = None

    def bind(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> inspect.BoundArguments | None:
        """The call bound by the function's signature, or None where Python would refuse it (an argument
        missing, given twice or unknown, too many positional ones, a positional-only one by name): the wrapper
        then calls the original as it was called, for its own TypeError, and checks nothing."""
        try:
            return self.signature.bind(*args, **kwargs)
        except TypeError:
            return None

    def named(self, bound: inspect.BoundArguments) -> dict[str, Any]:
        """A bound call's arguments by name (a **kwargs catch-all's entries among them, a *args' left out)."""
        values: dict[str, Any] = {}
        for name, value in bound.arguments.items():
            kind = self.kinds[name]
            if kind is inspect.Parameter.VAR_KEYWORD:
                values.update(value)
            elif kind is not inspect.Parameter.VAR_POSITIONAL:
                values[name] = value
        return values

    def ordered(self, values: dict[str, Any]) -> tuple[Any, ...]:
        """The contract's arguments in the packed-decode order (what `check_packed_decode` takes)."""
        ordered = tuple(values.get(name) for name in ARGUMENTS) + (
            values.get("use_qk_l2norm_in_kernel", self.l2norm_default),)
        return ordered + variant_spec(self.variant).call_extras(values.get("lower_bound", self.bound_default))


class _Plan:
    """What the guard decided for one call signature: refuse the call (a shape error), pass it through (no pool),
    or launch the slot check on `launch` with the pool's size and the tag of each pool seen (by address)."""

    __slots__ = ("key", "errors", "pool_slots", "launch", "tags", "batch", "stride", "host_flag", "last",
                 "stream", "on_host", "extents", "overlaps_seen", "matches")

    def __init__(self, key: tuple[Any, ...], errors: list[Any], pool_slots: int, launch: Any, batch: int = 0,
                 stride: int = 0, on_host: bool = False, extents: tuple[int, ...] | None = None) -> None:
        self.key = key  # the signature it was decided for (`_signature`, or `_loose_signature`'s key)
        self.errors = errors
        # The tensors' byte extents, for the per-call overlap test (`hotpath.out_overlaps`: GDR246 depends on
        # where `out` lies, which no signature holds); None for a loose signature or a non-tensor argument.
        self.extents = extents
        # Whether a call's eight tensors have the signature's metadata (`hotpath.tensor_matcher`, made from the
        # tensors of the call that planned it; never for a loose signature, whose calls take the full lookup).
        self.matches: Callable[..., bool] = _never
        self.overlaps_seen: set[str] = set()  # the overlap messages recorded already (warn and record modes)
        self.pool_slots = pool_slots
        self.launch = launch
        self.on_host = on_host  # CPU tensors that Triton cannot run: the slots are checked on the host
        self.batch = batch  # the slot indices' length and stride (part of the signature)
        self.stride = stride
        self.host_flag: Any = launch.buffer.host_flag if launch is not None else None  # see FaultBuffer
        self.tags: dict[int, int] = {}
        # The last check, for the other layers of its decode step (None: check the next call).
        self.last: _LastCheck | None = None
        # The current stream's handle on the launch's device (CUDA), else None: a check serves only its stream.
        device_index = getattr(launch, "device_index", None)
        self.stream: Callable[[], int] | None = (
            None if device_index is None else functools.partial(_raw_stream(), device_index))


def _never(*tensors: Any) -> bool:
    return False


def _call_bound(original: Callable[..., Any], bound: inspect.BoundArguments, **values: Any) -> Any:
    """`original` called with a bound call's arguments, the indices the guard passes in their place."""
    if "ssm_state_indices" in bound.arguments:
        bound.arguments["ssm_state_indices"] = values["ssm_state_indices"]
    return original(*bound.args, **bound.kwargs)


@dataclass(slots=True)
class _LastCheck:
    """A plan's last slot check: the indices it checked (the object itself, kept alive), their `_version` (None
    for an inference tensor, which has none) and data pointer (`.data = ...` moves it without a version bump),
    the capture epoch and the stream (None on the CPU) it ran in, the sanitised indices it produced, and the
    pool tags served from it."""

    indices: Any
    version: int | None
    pointer: int
    epoch: int
    stream: int | None
    safe: Any
    served: set[int]


def _reusable(last: _LastCheck | None, indices: Any, tag: int, epoch: int, stream: Callable[[], int] | None
              ) -> bool:
    """Whether the check `last` may serve a call passing `indices` for the pool `tag` (the wrapper inlines this
    on its fast path): a pool not served from it yet, the same object, unwritten since, in the same capture
    epoch, on the same stream."""
    return last is not None and tag not in last.served and last.indices is indices and last.epoch == epoch \
        and (last.version is None or last.version == indices._version) and last.pointer == indices.data_ptr() \
        and (last.stream is None or (stream is not None and last.stream == stream()))


def _raw_stream() -> Callable[[int], int]:
    """The current CUDA stream's handle by device index: torch's raw getter (what Triton's launcher uses), else
    the public `torch.cuda.current_stream(index).cuda_stream`."""
    torch = sys.modules["torch"]
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if callable(raw):
        return raw  # type: ignore[no-any-return]  # a private torch binding: untyped
    return lambda index: int(torch.cuda.current_stream(index).cuda_stream)


class _CaptureHooks:
    """Process-wide wrappers of `torch.cuda.CUDAGraph`: `capture_begin` and `capture_end` bump `epoch` before
    and after (a check's sanitised indices serve only calls of the same epoch: never a call being captured if
    the check ran eagerly, nor an eager call if it was captured), and `replay` polls every active guard's fault
    buffers. Installed while at least one guard with `hook_graphs` is entered, whatever the order in which
    guards are entered and left; restored when the last leaves."""

    def __init__(self) -> None:
        self.epoch = 0
        self.guards: list[Guard] = []
        self.saved: list[tuple[Any, str, Any, Any]] = []  # (class, name, original, our wrapper)
        self.lock = threading.Lock()

    @property
    def installed(self) -> bool:
        return bool(self.saved)

    def acquire(self, guard: Guard) -> bool:
        """Register `guard` (installing the wrappers if it is the first); True when capture is seen (reuse is
        safe)."""
        with self.lock:
            self.epoch += 1
            if not self.guards:
                self._install()
            self.guards.append(guard)
            names = {name for _, name, _, _ in self.saved}
            return {"capture_begin", "capture_end"} <= names

    def release(self, guard: Guard) -> None:
        with self.lock:
            self.epoch += 1
            if guard in self.guards:
                self.guards.remove(guard)
            if not self.guards:
                for graph_class, name, original, wrapper in reversed(self.saved):
                    if getattr(graph_class, name, None) is wrapper:  # leave another library's later wrapper be
                        setattr(graph_class, name, original)
                self.saved = []

    def _install(self) -> None:
        torch = sys.modules.get("torch")
        graph_class = getattr(getattr(torch, "cuda", None), "CUDAGraph", None)
        if graph_class is None:
            return
        hooks = self

        def bumping(method: Callable[..., Any]) -> Callable[..., Any]:
            @functools.wraps(method)
            def bump_epoch(graph: Any, *args: Any, **kwargs: Any) -> Any:
                hooks.epoch += 1
                try:
                    return method(graph, *args, **kwargs)
                finally:
                    hooks.epoch += 1

            return bump_epoch

        replay = graph_class.replay

        @functools.wraps(replay)
        def replay_and_poll(graph: Any, *args: Any, **kwargs: Any) -> Any:
            result = replay(graph, *args, **kwargs)
            for guard in list(hooks.guards):
                guard.poll()
            return result

        wrappers: list[tuple[str, Any, Callable[..., Any]]] = [("replay", replay, replay_and_poll)]
        for name in ("capture_begin", "capture_end"):
            method = getattr(graph_class, name, None)
            if method is not None:
                wrappers.append((name, method, bumping(method)))
        for name, original, wrapper in wrappers:
            setattr(graph_class, name, wrapper)
            self.saved.append((graph_class, name, original, wrapper))


_CAPTURE = _CaptureHooks()


class Guard:
    """Context manager and decorator installing the runtime guard (see the module docs)."""

    def __init__(self, engine: str | None = None, model: str | os.PathLike[str] | None = None, *, tp: int = 1,
                 mode: Mode = "raise", targets: Sequence[str] | None = None, state_dtype: str | None = None,
                 hook_graphs: bool = True, max_records: int = DEFAULT_MAX_RECORDS) -> None:
        # "sglang", "vllm", name@version or None (UnknownEngineError, a ValueError, names the choices): the release
        # `live_engine` selects (the one given, else the installed one, else the default) decides which functions
        # are wrapped (its `decode_targets`) and the contract they are checked against.
        engine, reason = live_engine(engine)
        self._profile = profile_for(engine)
        if mode not in MODES:
            raise ValueError(f"unknown mode {mode!r}; expected one of: {', '.join(MODES)}")
        if model is not None and not isinstance(model, (str, os.PathLike)):  # not os.fspath's words on entry
            raise TypeError(f"model is {described(model)}: must be a model id or checkpoint path (a str or "
                            f"os.PathLike), or None")
        if isinstance(targets, str):
            targets = [targets]
        # Built now so that a bad `tp` or `state_dtype` is refused here, not inside the engine's first decode call.
        self._deployment = Deployment(tp=tp, engine=engine, state_dtype=state_dtype, engine_reason=reason)
        self.engine = engine  # as given, or the installed release (`sglang@0.5.13`) where it narrows a name
        self.engine_profile = self._profile.spec  # the profile it selects
        self.engine_profile_reason = reason  # argument, installed or default (profiles.LIVE_REASONS)
        self.model = None if model is None else os.fspath(model)
        self.tp = tp
        self.mode = mode
        self.state_dtype = state_dtype
        self.hook_graphs = hook_graphs
        self.max_records = checked("max_records", max_records)
        self.extra_targets = [f"{m}:{a}" for m, a in map(_split_target, targets or ())]
        self.diagnostics: list[Any] = []
        self.unlisted_faults = 0  # faults the device counted past the max_records it keeps
        self.dropped_diagnostics = 0  # diagnostics found past the KEPT_DIAGNOSTICS that `diagnostics` holds
        self._unservable: list[Any] = []  # the model's errors where the deployment has no per-rank call
        self.calls = 0
        self.sites: list[_Site] = []
        self._replaced: list[tuple[dict[str, Any], str, _Site]] = []
        self._depth = 0
        self._lock = threading.RLock()
        self._buffers: dict[Any, Any] = {}
        self._tags: dict[tuple[int, int], int] = {}
        self._expected: Any = None
        self._warned: set[str] = set()
        self._hooked = False  # registered with the process-wide capture hooks (`_CaptureHooks`)
        self._reuse = False  # reuse a check within a decode step: only while capture is seen
        # The host check's last indices (CPU tensors, `_check_on_host`): the object, its version, its memory
        # (`.data =` moves it without a version bump) and the pools it has served in this step; and each pool's
        # layer label.
        self._host_last: tuple[Any, int | None, int, set[int]] | None = None
        self._host_labels: dict[int, str] = {}

    @property
    def epoch(self) -> int:
        """The process-wide capture epoch (see `_CaptureHooks`)."""
        return _CAPTURE.epoch

    # -- context manager and decorator -------------------------------------------------------------------------
    def __enter__(self) -> Guard:
        with self._lock:
            if self._depth == 0:
                first = self._expected is None
                self._load_expected()  # a model that cannot be read fails on entry, not mid-generation
                if self._unservable and (first or self.mode == "raise"):  # raised on every entry, noted once
                    self._act(self._unservable)
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

    def __call__(self, function: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(function)
        def guarded(*args: Any, **kwargs: Any) -> Any:
            with self:
                return function(*args, **kwargs)

        return guarded

    # -- faults -------------------------------------------------------------------------------------------------
    def raise_pending(self) -> list[Any]:
        """Read every fault buffer (synchronises the device; does nothing while capturing) and act on the
        faults per `mode`. Returns the new diagnostics."""
        if not self._buffers:  # no guarded call reached the device: nothing to read (and no torch needed)
            return []
        from ..kernel.device_guard import diagnostics_of, is_capturing

        if is_capturing():
            return []
        found: list[Any] = []
        unlisted = 0
        for buffer in list(self._buffers.values()):
            faults, total = buffer.take()
            found += diagnostics_of(faults, "engine", self.engine)
            unlisted += total - len(faults)
        self._act(found, unlisted, earlier=True)
        return found

    def poll(self) -> None:
        """Act on faults the device has already flagged, without waiting for it: a look at every fault buffer
        (after each graph replay; an eager call looks at its own buffer)."""
        for buffer in list(self._buffers.values()):
            self._look(buffer)

    def _act(self, diagnostics: list[Any], unlisted: int = 0, earlier: bool = False) -> None:
        """Keep `diagnostics`, and `unlisted` faults counted but no longer held, and raise or warn per the mode.
        `earlier`: faults a kernel recorded during an earlier call, read now (a warning says so, as it points at
        the line that read them)."""
        if not diagnostics and not unlisted:
            return
        room = max(KEPT_DIAGNOSTICS - len(self.diagnostics), 0)  # (the mode still acts on all of them)
        self.diagnostics.extend(diagnostics[:room])
        self.dropped_diagnostics += max(len(diagnostics) - room, 0)
        self.unlisted_faults += unlisted
        errors = [d for d in diagnostics if d.severity == "error"]
        if self.mode == "raise" and (errors or unlisted):  # (every slot fault is an error in the engine's context)
            raise GuardError(errors, unlisted)
        if self.mode == "warn":
            level = _stacklevel_outside_package()
            when = " (recorded by an earlier call)" if earlier else ""
            for d in diagnostics:
                key = f"{d.code}:{d.message}"
                if key not in self._warned:
                    self._warned.add(key)
                    warnings.warn(f"gdr_check.guard: {d.code}: {d.message}{when}", RuntimeWarning, stacklevel=level)
            if unlisted:
                warnings.warn(f"gdr_check.guard: {counted(unlisted, 'fault')} {UNLISTED_FAULTS}", RuntimeWarning,
                              stacklevel=level)

    # -- per call -------------------------------------------------------------------------------------------------
    def _buffer(self, device: Any) -> Any:
        buffer = self._buffers.get(device)
        if buffer is None:
            from ..kernel.device_guard import FaultBuffer

            buffer = self._buffers.setdefault(device, FaultBuffer(device, self.max_records))
        return buffer

    def _plan(self, site: _Site, values: dict[str, Any]) -> tuple[_Plan, int]:
        """The first call of a signature (or of a pool): decide on shapes (the contract without index values,
        and the model comparison), act on what that finds, and keep the decision for the signature's later
        calls. Off the steady state, which is `_Plan` lookups in the wrapper."""
        from ..kernel._triton_common import INTERPRETED
        from ..kernel.device_guard import shape_verdict

        strict = True
        try:
            key = _signature(values, site.l2norm_default, site.bound_default)
            hash(key)  # an unhashable scale or bound (a list) fails here
        except Exception:  # noqa: BLE001 - not every argument is a tensor or a plain scalar: key by what each is
            key, strict = _loose_signature(values), False
        plan = site.plans.get(key)
        if plan is None:
            self.poll()  # faults an earlier call recorded come before what this call's shapes show
            ordered = site.ordered(values)
            verdict = shape_verdict(site.variant, ordered, self.engine,
                                    extra=self._compare_with_model if self.model else None, engine_kernel=True)
            refused = bool(verdict.errors)
            launch, batch, stride, on_host = None, 0, 0, False
            if not refused and verdict.pool_slots is not None:  # an empty pool too: every live row is a fault
                device = values["initial_state"].device
                if device.type == "cpu" and not INTERPRETED:  # Triton has no CPU driver: no check can launch
                    on_host = True
                else:
                    launch = self._buffer(device).check_launch(self.engine, device)
                indices = values["ssm_state_indices"]
                batch, stride = int(indices.shape[0]), int(indices.stride(0))
            plan = _Plan(key, verdict.errors, verdict.pool_slots or 0, launch, batch, stride, on_host,
                         verdict.extents if strict else None)
            if strict:
                plan.matches = tensor_matcher(tuple(values[name] for name in TENSOR_ARGUMENTS))  # (the wrapper's order)
            if len(site.plans) >= _PLAN_CACHE_SIZE:
                site.plans.clear()
            site.plans[key] = plan
            # This call's overlap (judged per call, never kept with the plan) is reported with the plan's errors.
            overlapping = (address_errors(site.variant, ordered, self.engine)
                           if plan.extents is not None and out_overlaps(ordered, plan.extents) else [])
            plan.overlaps_seen.update(d.message for d in overlapping)
            # On the CPU under Triton's interpreter the kernels do run: GDR251 ("cannot run there outside the
            # interpreter") would be noise on every signature.
            others = [d for d in verdict.others if not (INTERPRETED and d.code == "GDR251")]
            self._act(verdict.errors + overlapping + others)
        elif plan.extents is not None and out_overlaps(site.ordered(values), plan.extents):
            self._overlap(site, values, plan)  # a plan seen before, reached off the wrapper's own path
        if strict:
            site.recent = plan
        if plan.launch is None:
            return plan, 0
        state = values["initial_state"]
        address = state.data_ptr()
        tag = plan.tags.get(address)
        if tag is None:
            tag = plan.tags[address] = self._tag(plan.launch.buffer, state, plan.pool_slots)
        return plan, tag

    def _overlap(self, site: _Site, values: dict[str, Any], plan: _Plan) -> None:
        """This call's `out` overlaps an input (`hotpath.out_overlaps`): the contract's GDR246, acted on per the
        mode. Outside raise mode each message is recorded once per signature: it repeats on every call that
        places `out` so, and the engine's call goes ahead, as for a refused signature."""
        errors = address_errors(site.variant, site.ordered(values), self.engine)
        if self.mode == "raise":
            if errors:  # with a refused signature's errors first: the call's every error, as its first call had
                raise GuardError([*plan.errors, *errors])
            return
        errors = [d for d in errors if d.message not in plan.overlaps_seen]
        plan.overlaps_seen.update(d.message for d in errors)
        self._act(errors)

    def _check_on_host(self, site: _Site, values: dict[str, Any]) -> None:
        """A call on CPU tensors where Triton cannot run (no `TRITON_INTERPRET`): no slot check can launch, and
        reading the slots costs no device sync, so the contract's slot rules (the device check's: out of range,
        repeated, sglang's slot 0) run on the host, in the guard's mode. Rows are not skipped: the call goes to
        the engine as given, unless raise mode stops it first. As on the device, the layers of one decode step
        (calls passing the same indices, unchanged, each to a pool not yet served) are checked once, by the
        first, and its faults name that layer."""
        from ..kernel.device_guard import FAULT_CODES

        args = site.ordered(values)
        pool, indices = args[6].data_ptr(), args[8]
        version, memory = None if indices.is_inference() else indices._version, indices.data_ptr()
        with self._lock:
            last = self._host_last
            if (last is not None and last[0] is indices and last[1] == version and last[2] == memory
                    and pool not in last[3]):
                last[3].add(pool)  # a later layer of the step whose first layer's check covered these indices
                return
            self._host_last = None  # set once this check has acted: in raise mode a later layer checks again
            label = self._host_labels.get(pool)
            if label is None:
                if len(self._host_labels) >= HOST_POOL_LABELS:  # a stand-in engine allocating pools anew
                    self._host_labels.clear()
                label = self._host_labels[pool] = _layer_label(args[6], len(self._host_labels))
        call = describe_call(site.variant, _tensors(args), args[5], bool(args[9]), args[10] if len(args) > 10 else None)
        slot_rules = FAULT_CODES.values()
        found = f"found on the host ({self.engine}: CPU tensors, no Triton interpreter); the call ran as given"
        self._act([replace(d, notes=[f"in {label}", found, *d.notes])
                   for d in run_contract(call, self.engine, "engine") if d.code in slot_rules])
        with self._lock:
            self._host_last = (indices, version, memory, {pool})

    def _check_traced(self, site: _Site, values: dict[str, Any], call: Callable[..., Any]) -> Any:
        """A call on fake tensors (`FakeTensorMode`, `torch.compile` tracing): no data pointer, no values, no
        kernel launch to guard. The contract runs on the metadata (shapes, strides, dtypes: GDR259 for a pool
        whose slots alias among them), with GDR260 saying the index values were not read, in the guard's mode;
        the call then goes on to be traced as given."""
        values = {**site.defaults, **values} if site.defaults else values
        args = site.ordered(values)
        try:
            call_spec = describe_call(site.variant, _tensors(args), args[5], bool(args[9]),
                                      args[10] if len(args) > 10 else None)
        except (TypeError, ValueError, AttributeError):  # an argument that is no tensor: the engine's to refuse
            return call(**values)
        self._act(run_contract(call_spec, self.engine, "engine").diagnostics)
        return call(**values)

    def _compare_with_model(self, args: tuple[Any, ...]) -> list[Any]:
        """The differences between this call and the model's expected per-rank call (shapes only)."""
        self._load_expected()
        if not self._expected:
            return []
        return self._differences(args)

    def _load_expected(self) -> None:
        """The model's expected per-rank call, read once (`model=` given), else nothing."""
        if self._expected is None and self.model is not None:
            check = check_model(self.model, self._deployment)
            if check.call is None or check.model is None:
                self._expected = False
                # The deployment has no per-rank call (a TP size that does not divide the heads, a config that
                # cannot be described): said on entry (`__enter__`), in the guard's mode, not never.
                self._unservable = [d for d in check.report if d.severity == "error"]
            else:
                config = getattr(check.checkpoint, "config", None) or {}
                text = config.get("text_config") if isinstance(config.get("text_config"), dict) else config
                head_dim = text.get("head_dim") if isinstance(text, dict) else None
                geometry = ModelGeometry.from_model(check.model, self.model,
                                                    head_dim if isinstance(head_dim, int) else None)
                reason = check.settings.state_dtype_reason if check.settings else None
                self._expected = (check.call, geometry, reason)

    def _differences(self, args: tuple[Any, ...]) -> list[Any]:
        expected, geometry, reason = self._expected
        recorded = describe_call(expected.variant, _tensors(args), args[5], bool(args[9]),
                                 args[10] if len(args) > 10 else None, read_values=False)
        comparison = compare_call(recorded, expected, geometry, tp=self.tp, engine=self.engine,
                                  state_dtype_reason=reason)
        return list(comparison.diagnostics)

    def _tag(self, buffer: Any, state: Any, pool_slots: int) -> int:
        key = (state.data_ptr(), pool_slots)
        tag = self._tags.get(key)
        if tag is None:
            tag = buffer.tag_for(_layer_label(state, len(self._tags)), pool_slots, "engine")
            self._tags[key] = tag
        return tag

    def _look(self, buffer: Any) -> None:
        """Read the faults `buffer` holds now (see `FaultBuffer.look`) and act on them."""
        from ..kernel.device_guard import PendingFaults

        try:
            buffer.look("engine", self.engine)
        except PendingFaults as pending:
            self._act(pending.diagnostics, pending.total - len(pending.diagnostics), earlier=True)

    # -- patching -------------------------------------------------------------------------------------------------
    def _resolve(self, target: str, explicit: bool = False) -> Callable[..., Any] | None:
        """The function `target` names, or None; GuardTargetError for an `explicit` one (from `targets`) that
        cannot be imported or has no such function (a default location this engine version lacks is normal)."""
        module_name, attribute = _split_target(target)
        module = sys.modules.get(module_name)
        if module is None:
            try:
                module = importlib.import_module(module_name)
            except Exception as error:
                if explicit:
                    raise GuardTargetError(unimportable_target("guard", target, error)) from error
                return None
        function = getattr(module, attribute, None)
        if explicit and not callable(function):
            raise GuardTargetError(missing_function("guard", target))
        return function if callable(function) else None

    def _patch(self) -> None:
        by_id: dict[int, _Site] = {}
        self.sites = []
        targets = [(t, False) for t in engine_targets(self._profile)] + [(t, True) for t in self.extra_targets]
        for target, explicit in targets:
            function = self._resolve(target, explicit)
            if function is None or id(function) in by_id:
                continue
            function = getattr(function, "__gdr_check_guard_original__", function)
            site = _Site(function, target, kernel_variant(target.rsplit(":", 1)[1]).name)
            missing = [name for name in ARGUMENTS if name not in site.names]
            if missing:
                continue  # another API (vLLM's KDA op): not the packed-decode contract
            site.wrapper = self._wrapper_for(site)
            by_id[id(function)] = site
            self.sites.append(site)
        self._replaced = install_wrappers(by_id)
        try:
            if self.sites and not self._replaced:
                warnings.warn(f"gdr_check.guard wrapped no binding of the {self.engine} packed-decode functions: "
                              f"another gdr_check.guard entered on them holds them (one guard per engine at a "
                              f"time); calls are checked by that guard only", RuntimeWarning, stacklevel=3)
            if not self.sites:
                warnings.warn(f"gdr_check.guard found no {self.engine} packed-decode function to guard; pass "
                              f"targets=['package.module:function_name'] for another location", RuntimeWarning,
                              stacklevel=3)
            if self.hook_graphs and "torch" in sys.modules:
                self._reuse = _CAPTURE.acquire(self)
                self._hooked = True
        except BaseException:  # entering failed (a warning made an error): leave nothing installed
            self._unpatch()
            raise

    def _wrapper_for(self, site: _Site) -> Callable[..., Any]:
        original = site.original
        plans = site.plans
        guard = self
        capture = _CAPTURE
        l2norm_default, bound_default = site.l2norm_default, site.bound_default

        @functools.wraps(original)
        def guarded_wrapper(*args: Any, **kwargs: Any) -> Any:
            # The steady state (a signature seen before, a pool seen before): the call compared with the site's
            # last plan (`_Plan.matches`, the scalars), a tag lookup, the overlap test, one read of the fault
            # flag, then either the step's check served again or the slot check's launch.
            if guard._depth <= 0:
                return original(*args, **kwargs)
            call = original  # called with the call's arguments by name (engines pass keywords)
            if args or site.binds_positionally:  # bound by the function's signature, and called that way
                bound = site.bind(args, kwargs)
                if bound is None:  # a binding Python refuses: the original's own TypeError
                    return original(*args, **kwargs)
                kwargs, call = site.named(bound), functools.partial(_call_bound, original, bound)
            guard.calls += 1
            if is_fake_tensor_type(type(kwargs.get("initial_state"))):  # tracing: no memory to look at
                return guard._check_traced(site, kwargs, call)
            try:
                q, a, b = kwargs["mixed_qkv"], kwargs["a"], kwargs["b"]
                g, d, h = kwargs["A_log"], kwargs["dt_bias"], kwargs["initial_state"]
                o, i, scale = kwargs["out"], kwargs["ssm_state_indices"], kwargs["scale"]
                l2norm = kwargs.get("use_qk_l2norm_in_kernel", l2norm_default)
                bound = kwargs.get("lower_bound", bound_default)
                plan = site.recent
                k = () if plan is None else plan.key  # (with no plan, never indexed: the test below stops first)
                # One check per decode step (`_reusable`, inlined): the layers of a step pass the same indices
                # tensor, each with its own pool. The last check's sanitised indices serve this call if this
                # pool was not served from it yet (a pool served twice means a new step, whose indices may have
                # been refilled without a version bump: a Triton kernel's write, a graph's input buffer), and the
                # indices are that object, unwritten since (version), in the same capture epoch and on the same
                # stream (another stream could read them before the check wrote them).
                last = None if plan is None else plan.last
                pool = h.data_ptr()
                tag: Any = None if plan is None else plan.tags.get(pool)
                reuse = last is not None and tag is not None and tag not in last.served and last.indices is i \
                    and last.epoch == capture.epoch and (last.version is None or last.version == i._version) \
                    and last.pointer == i.data_ptr() \
                    and (last.stream is None or last.stream == plan.stream())  # type: ignore[union-attr, misc]
                # `_signature` compared with the last plan's: the eight tensors by the plan's test
                # (`hotpath.tensor_matcher`: torch's C++ check, Python where it refuses; it reads the indices'
                # metadata again when they are the checked object, as an inference tensor has no version to see
                # a resize_, and `.data` can be reassigned without one), the scalars term by term with its key;
                # else the signature looked up in full. The key and the lookup must stay `_signature`.
                if plan is None or tag is None or not (
                        plan.matches(q, a, b, g, d, h, o, i)
                        and type(scale) is k[33] and scale == k[32]
                        and type(l2norm) is k[35] and l2norm == k[34]
                        and type(bound) is k[37] and bound == k[36]):
                    plan = site.recent = plans[(
                        q.shape, q.stride(), q.dtype, q.device, a.shape, a.stride(), a.dtype, a.device,
                        b.shape, b.stride(), b.dtype, b.device, g.shape, g.stride(), g.dtype, g.device,
                        d.shape, d.stride(), d.dtype, d.device, h.shape, h.stride(), h.dtype, h.device,
                        o.shape, o.stride(), o.dtype, o.device, i.shape, i.stride(), i.dtype, i.device,
                        scale, type(scale), l2norm, type(l2norm), bound, type(bound))]
                    tag = plan.tags[pool]
                    last = plan.last  # another plan: its own last check may serve (its terms were all read)
                    reuse = _reusable(last, i, tag, capture.epoch, plan.stream)
            except Exception:  # noqa: BLE001 - a new signature or pool, or an argument that is not a tensor
                plan = None
            if plan is None:  # outside the handler: what the first call raises is not chained to a KeyError
                if call is original and site.bind((), kwargs) is None:  # missing, unknown: its own TypeError
                    return original(**kwargs)
                values = {**site.defaults, **kwargs} if site.defaults else kwargs  # what the function runs with
                plan, tag = guard._plan(site, values)
                i, last = values["ssm_state_indices"], plan.last
                reuse = _reusable(last, i, tag, capture.epoch, plan.stream)  # (`_plan` judged the overlap)
            elif (extents := plan.extents) is not None:
                # Where `out` lies is each call's own (GDR246): `hotpath.out_overlaps`, inlined with the pool's
                # data pointer read once, must stay the same test.
                start = o.data_ptr()
                end = start + extents[0]
                if start < end and (
                        ((p := q.data_ptr()) < end and start < p + extents[1])
                        or ((p := a.data_ptr()) < end and start < p + extents[2])
                        or ((p := b.data_ptr()) < end and start < p + extents[3])
                        or ((p := g.data_ptr()) < end and start < p + extents[4])
                        or ((p := d.data_ptr()) < end and start < p + extents[5])
                        or (pool < end and start < pool + extents[6])
                        or ((p := i.data_ptr()) < end and start < p + extents[7])):
                    guard._overlap(site, kwargs, plan)
            launch = plan.launch
            if launch is None:
                if plan.errors and guard._buffers:
                    guard.poll()  # an earlier call's faults first (a refused call launches nothing to look after)
                if plan.errors and guard.mode == "raise":
                    if call is original and site.bind((), kwargs) is None:  # e.g. an unknown keyword too
                        return original(**kwargs)
                    raise GuardError(plan.errors)
                if plan.on_host:
                    guard._check_on_host(site, kwargs)
                return call(**kwargs)  # refused in another mode (the engine's own checks decide), or no pool
            if plan.host_flag[0]:  # a kernel has recorded a fault: read it (one host load when none has)
                guard._look(launch.buffer)
            if reuse:
                last.served.add(tag)  # type: ignore[union-attr]
                kwargs["ssm_state_indices"] = last.safe  # type: ignore[union-attr]
                return call(**kwargs)
            safe = kwargs["ssm_state_indices"] = launch(i, plan.batch, plan.stride, plan.pool_slots, tag)
            if guard._reuse:  # an inference tensor (vLLM decodes in inference mode) has no version counter
                stream = plan.stream
                plan.last = _LastCheck(i, None if i.is_inference() else i._version, i.data_ptr(), capture.epoch,
                                       None if stream is None else stream(), safe, {tag})
            return call(**kwargs)

        # Marker attributes on the wrapper function (functools.wraps types it without them): what it wraps, and
        # the guard it belongs to (a wrapper whose guard has left passes calls through: see capture.py).
        guarded_wrapper.__gdr_check_guard_original__ = original  # type: ignore[attr-defined]
        guarded_wrapper.__gdr_check_guard__ = guard  # type: ignore[attr-defined]
        GUARD_WRAPPERS.add(guarded_wrapper)
        return guarded_wrapper

    def _unpatch(self) -> None:
        # Each step runs whatever an earlier one raised: the capture hooks must not outlive the guard.
        try:
            restore_wrappers(self._replaced, self.sites)
        finally:
            self._replaced = []
            if self._hooked:
                _CAPTURE.release(self)
                self._hooked = False
            self._reuse = False
            for site in self.sites:  # no reference kept past the block, and nothing reused on re-entry
                for plan in site.plans.values():
                    plan.last = None
                if site.recent is not None:  # (it may have left the plan table when that was cleared)
                    site.recent.last = None


# `gdr_check.guard(...)` must work however `gdr_check.guard` was reached (see the same device in capture.py):
# importing this submodule binds the package attribute to the module, so the module itself is callable.
class _CallableModule(types.ModuleType):
    def __call__(self, engine: str | None = None, model: str | os.PathLike[str] | None = None, *, tp: int = 1,
                 mode: Mode = "raise", targets: Sequence[str] | None = None, state_dtype: str | None = None,
                 hook_graphs: bool = True, max_records: int = DEFAULT_MAX_RECORDS) -> Guard:
        """Guard the engine's packed-decode calls inside a `with` block or a decorated function."""
        return Guard(engine, model, tp=tp, mode=mode, targets=targets, state_dtype=state_dtype,
                     hook_graphs=hook_graphs, max_records=max_records)


sys.modules[__name__].__class__ = _CallableModule
guard = sys.modules[__name__]
