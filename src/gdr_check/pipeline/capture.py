"""Record the arguments of live packed-decode kernel calls to a JSON file, and read such recordings back.

    import gdr_check

    with gdr_check.capture("decode-{rank}.json"):
        engine.generate(prompts)            # every packed-decode call is recorded, then runs as usual

    @gdr_check.capture("decode.json")       # or as a decorator; calls accumulate up to `max_calls`
    def decode_step(...): ...

Then `gdr-check call decode-0.json --model Qwen/Qwen3-Next-80B-A3B-Instruct --tp 4`.

On enter, the packed-decode functions of the installed engines (sglang, vLLM) are replaced by a recording
wrapper in every imported module that holds them, so call sites that did `from ... import <function>` are
covered too; on exit everything is restored and the recording is written atomically. Capture inside the
process that runs the model: sglang and vLLM run their model workers in child processes by default.

This module imports neither torch nor the engines at import time; tensors are read by duck typing.
"""

from __future__ import annotations

import functools
import gc
import importlib
import importlib.util
import inspect
import json
import os
import re
import sys
import threading
import types
import warnings
import weakref
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import field
from pathlib import Path
from typing import Any, ParamSpec, Protocol, TypeVar, cast

from ..base.errors import described, printable
from ..base.files import (
    cache_refusal,
    empty_path_refusal,
    folder_name_refusal,
    reserved_name_refusal,
    write_problem,
    write_whole,
)
from ..base.identity import tool_info
from ..base.limits import LimitError, checked
from ..base.records import dataclass
from ..base.tensor_spec import TensorSpec
from ..base.variants import kernel_variant
from ..call.packed_call import ARGUMENTS, ENGINES, TENSOR_ARGUMENTS, PackedDecodeCall, Variant
from ..call.recording import KIND, SCHEMA_VERSION
from ..engines.profiles import (
    PROFILES,
    EngineProfile,
    UnknownEngineError,
    installed_release,
    live_engine,
    profile_for,
)

DEFAULT_MAX_CALLS = 256  # a Qwen3-Next decode step makes 36 calls per rank: about 7 steps
GDN_FUNCTION = "fused_recurrent_gated_delta_rule_packed_decode"
KDA_FUNCTION = "fused_recurrent_kda_packed_decode"
HELION_KDA_FUNCTION = "helion_fused_recurrent_kda_packed_decode"  # sglang's Helion KDA decode backend

# Where each release defines its packed-decode functions: the release's profile (`EngineProfile.decode_targets`,
# verified against every release's wheel by scripts/verify_engine_profiles.py): sglang's under srt/ before 0.5.16
# and under sglang/kernels/ from 0.5.16, its Helion KDA decode from 0.5.18 (absent without the `helion` package);
# vLLM's GDN decode under model_executor/ before 0.26 and under third_party/ from 0.26. vLLM's own KDA packed ops
# (0.27 on, `EngineProfile.other_api_targets`) take another argument list and are never wrapped. Call sites that
# imported a function by name are found by identity, not listed.
def engine_targets(engine: str | EngineProfile) -> tuple[str, ...]:
    """The default targets ("package.module:function") of the release `engine` selects."""
    return profile_for(engine).decode_targets


# Positional order of the sglang wrappers (docs/kernel-contract.md §1); the KDA one adds `lower_bound`.
PARAMETERS: tuple[str, ...] = (*ARGUMENTS, "use_qk_l2norm_in_kernel", "lower_bound")
_TARGET = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*$")
_MAX_UNRECORDED = 20  # reasons kept for calls that could not be described
_P = ParamSpec("_P")
_R = TypeVar("_R")

# Engine classes whose instances keep a packed-decode function as an attribute, set when the engine builds its
# attention backends: sglang's Helion KDA backend imports its decode function in `__init__` and calls it through
# the instance. An instance built before the guard or capture was entered holds the function itself, which no
# module scan finds; so the live instances of these classes (and their subclasses) are searched too, through the
# garbage collector, once on enter and once on exit, and only where the class's module is already imported.
# Packages a target needs beyond its engine: without them the engine cannot take that path, so the target is
# absent rather than broken.
OPTIONAL_DEPENDENCIES: dict[str, tuple[str, ...]] = {
    f"sglang.kernels.ops.attention.helion.kda_decode:{HELION_KDA_FUNCTION}": ("helion",),
}
# Every release's holders (`EngineProfile.instance_holders`): only a holder whose class is imported is searched,
# and only the functions being wrapped are replaced on it.
INSTANCE_HOLDERS: tuple[str, ...] = tuple(dict.fromkeys(holder for profile in PROFILES
                                                        for holder in profile.instance_holders))


class CaptureError(ValueError):
    """A capture that cannot start (a bad target, engine or path) or cannot write its recording."""


class CapturePathTypeError(CaptureError, TypeError):
    """`path` is no path (an int, None): a CaptureError and a TypeError, naming `path`."""


# -- writing ---------------------------------------------------------------------------------------------------
def dump_recording(document: dict[str, Any]) -> str:
    """The recording as JSON text: the header indented, one line per call (a call is long but flat)."""
    header = json.dumps({k: v for k, v in document.items() if k != "calls"}, indent=1)
    calls = [json.dumps(call, separators=(", ", ": ")) for call in document.get("calls", [])]
    body = "[]" if not calls else "[\n  " + ",\n  ".join(calls) + "\n ]"
    return header[:-2] + f',\n "calls": {body}\n}}\n'


def _process_rank() -> int:
    """This process's distributed rank, for `{rank}` in the path: torch.distributed, then RANK, else 0."""
    torch = sys.modules.get("torch")
    try:
        if torch is not None and torch.distributed.is_available() and torch.distributed.is_initialized():
            return int(torch.distributed.get_rank())
    except Exception:  # noqa: BLE001 - a half-initialised process group must not stop the write
        pass
    for name in ("RANK", "LOCAL_RANK"):
        if os.environ.get(name, "").isdigit():
            return int(os.environ[name])
    return 0


def _resolve_path(template: str) -> Path:
    if "{" not in template:
        return Path(template)
    try:
        return Path(template.format_map({"pid": os.getpid(), "rank": _process_rank()}))
    except (KeyError, IndexError, ValueError, TypeError, AttributeError) as error:  # `{rank[0]}`, `{pid.x}`
        raise CaptureError(f"bad placeholder in capture path {template!r}: use {{pid}} or {{rank}} ({error})"
                           ) from error


_MAX_MESSAGE = 4096  # a path error's length: a path in full (printable() escapes its control characters)


def _destination_problem(path: Path) -> str | None:
    """Why a recording cannot be written at `path`, as far as can be told before the engine runs, or None."""
    refusal = cache_refusal(path, "a recording") or reserved_name_refusal(path, "a recording")
    if refusal is not None:
        return refusal
    if os.path.isdir(path):
        return "it is a directory"
    return write_problem(path)  # (a missing folder among them: refused, not created)


# -- what one call looks like ------------------------------------------------------------------------------------
def _torch_state() -> tuple[bool, bool]:
    """(compiling, capturing a CUDA graph). Reading index values would break a graph capture."""
    torch = sys.modules.get("torch")
    if torch is None:
        return False, False
    compiling = False
    try:
        compiling = bool(torch.compiler.is_compiling())
    except Exception:  # noqa: BLE001 - older torch
        pass
    capturing = False
    try:
        capturing = bool(torch.cuda.is_available() and torch.cuda.is_current_stream_capturing())
    except Exception:  # noqa: BLE001
        pass
    return compiling, capturing


def _number(value: Any, read_tensor: bool) -> float | None:
    """A float for JSON: Python numbers as they are, one-element tensors when reading is allowed."""
    if value is None or isinstance(value, bool):
        return None if value is None else float(value)
    if isinstance(value, (int, float)):
        return float(value)
    if hasattr(value, "item"):  # a tensor: reading it synchronises, which a CUDA-graph capture forbids
        if not read_tensor:
            return None
        try:
            return float(value.item())
        except (TypeError, ValueError, RuntimeError):
            return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _caller(frame: types.FrameType | None) -> dict[str, Any] | None:
    if frame is None:
        return None
    return {"module": frame.f_globals.get("__name__"), "function": frame.f_code.co_name, "line": frame.f_lineno}


def _guess_engine(module: str) -> str | None:
    top = module.split(".", 1)[0]
    return top if top in ENGINES else None


Binder = Callable[[tuple[Any, ...], dict[str, Any]], dict[str, Any]]


def _binder(function: Callable[..., Any]) -> tuple[Binder | None, str | None]:
    """A function mapping (args, kwargs) to argument names, or the reason the function cannot be recorded."""
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):
        signature = None
    if signature is None:  # a C or JIT callable: assume the sglang positional order
        def by_position(args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
            # Fewer positional arguments than PARAMETERS is usual: the rest come by keyword.
            return {**dict(zip(PARAMETERS, args, strict=False)), **kwargs}
        return by_position, None
    missing = [name for name in ARGUMENTS if name not in signature.parameters]
    if missing:
        names = ", ".join(f"`{name}`" for name in missing)
        return None, f"its signature is not the sglang packed-decode API (no {names})"

    def bind(args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        return dict(bound.arguments)

    return bind, None


@dataclass
class _Site:
    """One distinct function object being recorded, wherever it is held."""

    original: Callable[..., Any]
    target: str
    module: str
    function: str
    variant: Variant
    engine: str | None
    bind: Binder
    wrapper: Callable[..., Any] = field(init=False)
    holders: list[str] = field(default_factory=list)
    targets: list[str] = field(default_factory=list)

    def describe(self, args: tuple[Any, ...], kwargs: dict[str, Any], read_values: bool) -> PackedDecodeCall:
        arguments = self.bind(args, kwargs)
        tensors: dict[str, TensorSpec] = {}
        for name in TENSOR_ARGUMENTS:
            value = arguments.get(name)
            if value is None or not hasattr(value, "shape"):
                raise TypeError(f"`{name}` is {type(value).__name__}, not a tensor")
            tensors[name] = TensorSpec.from_tensor(value, read_values=read_values and name == "ssm_state_indices")
        lower_bound = arguments.get("lower_bound")
        return PackedDecodeCall(
            scale=_number(arguments.get("scale"), read_values),
            use_qk_l2norm_in_kernel=bool(arguments.get("use_qk_l2norm_in_kernel", False)),
            lower_bound=None if lower_bound is None else _number(lower_bound, read_values),
            variant=self.variant,
            **tensors,
        )


# -- patching ------------------------------------------------------------------------------------------------------
def _own_namespace(obj: Any) -> dict[str, Any] | None:
    """`obj`'s own `__dict__`, read directly (a lazy module's or an object's `__getattr__` does not run); None
    when it has none."""
    try:
        namespace = object.__getattribute__(obj, "__dict__")
    except AttributeError:
        return None
    return namespace if isinstance(namespace, dict) else None


def _module_namespaces() -> Iterator[tuple[str, dict[str, Any]]]:
    """(name, namespace) of every imported module; namespaces are read directly so lazy modules stay lazy."""
    for name, module in list(sys.modules.items()):
        namespace = _own_namespace(module) if isinstance(module, types.ModuleType) else None
        if namespace is not None:
            yield name, namespace


def _holder_instances(classes: Iterable[str] | None = None) -> Iterator[tuple[str, dict[str, Any]]]:
    """(name, attribute namespace) of every live instance of `classes` ("package.module:Class"; default
    `INSTANCE_HOLDERS`, read at call time) and of their subclasses, for the classes whose module is imported;
    nothing is imported here. The name is the class's and the instance's id: `package.module.Class@0x...`.

    Objects frozen with `gc.freeze()` (sglang freezes the heap around CUDA-graph capture) are invisible to the
    collector's search: a RuntimeWarning says so when a holder class is imported and objects are frozen."""
    found: list[type] = []
    for target in INSTANCE_HOLDERS if classes is None else classes:
        module_name, _, class_name = target.partition(":")
        module = sys.modules.get(module_name)
        holder = (_own_namespace(module) or {}).get(class_name) if module is not None else None
        stack = [holder] if isinstance(holder, type) else []
        while stack:
            cls = stack.pop()
            if cls not in found:
                found.append(cls)
                stack.extend(cls.__subclasses__())
    if not found:
        return
    if gc.get_freeze_count():
        warnings.warn(f"{gc.get_freeze_count()} objects are frozen (gc.freeze()): live {found[0].__qualname__} "
                      f"instances among them cannot be found to wrap their packed-decode function; enter the guard "
                      f"or capture before the engine builds its attention backends", RuntimeWarning, stacklevel=4)
    kinds = set(found)
    for instance in gc.get_referrers(*found):  # an instance of a Python class refers to its class
        kind = type(instance)
        namespace = _own_namespace(instance) if kind in kinds else None
        if namespace is not None:
            yield f"{kind.__module__}.{kind.__qualname__}@{id(instance):#x}", namespace


def _namespaces_holding() -> Iterator[tuple[str, dict[str, Any]]]:
    """The namespaces a packed-decode function can be bound in: every imported module, then the instances of
    `INSTANCE_HOLDERS`."""
    yield from _module_namespaces()
    yield from _holder_instances()


# Every guard wrapper made in this process (`Guard._wrapper_for` adds each), while it lives: a wrapper left bound
# after its guard has left is recognised by identity, so that a namespace can be passed over in C (below).
GUARD_WRAPPERS: weakref.WeakSet[Callable[..., Any]] = weakref.WeakSet()


def _holding(namespaces: Iterable[tuple[str, dict[str, Any]]], ids: set[int]
             ) -> Iterator[tuple[str, dict[str, Any]]]:
    """The namespaces that hold an object whose id is in `ids`. An engine process has thousands of modules and
    hundreds of thousands of names; the test runs in C (`map(id, ...)` into `set.isdisjoint`), and only the few
    namespaces it keeps are walked in Python (a guard's entry and exit went from ~40 ms to a few in a process
    with torch, triton and a test suite loaded)."""
    for name, namespace in namespaces:
        try:
            if not ids.isdisjoint(map(id, namespace.values())):
                yield name, namespace
        except RuntimeError:  # the namespace changed size while it was read (another thread): read it whole
            yield name, namespace


def install_wrappers(by_id: dict[int, Any]) -> list[tuple[dict[str, Any], str, Any]]:
    """Bind each site's `wrapper` wherever a module holds its `original` (engines import the kernel by name into
    their backend modules, so patching the defining module alone misses them), and wherever a live instance of
    an `INSTANCE_HOLDERS` class does. `by_id` maps id(original) to its site; each replaced binding is noted in
    `site.holders` and returned as (namespace, key, site)."""
    replaced = []
    wanted = set(by_id).union(map(id, list(GUARD_WRAPPERS)))
    for module_name, namespace in _holding(_namespaces_holding(), wanted):
        for key, value in list(namespace.items()):
            site = by_id.get(id(value))
            if site is None and type(value) is types.FunctionType:
                value = _stale_guard_original(value)  # a guard's wrapper left behind (a frozen instance)
                site = by_id.get(id(value))
            if site is not None and value is site.original:
                namespace[key] = site.wrapper
                site.holders.append(f"{module_name}.{key}")
                replaced.append((namespace, key, site))
    return replaced


def _stale_guard_original(function: types.FunctionType) -> Any:
    """The function a runtime guard's wrapper wraps, when the wrapper's guard is no longer entered (it passes
    calls straight through): such a leftover binding is guarded again like the original. Anything else is
    returned as it is."""
    attributes = function.__dict__
    original, owner = attributes.get("__gdr_check_guard_original__"), attributes.get("__gdr_check_guard__")
    if original is None or owner is None or getattr(owner, "_depth", 1) > 0:
        return function
    return original


def restore_wrappers(replaced: list[tuple[dict[str, Any], str, Any]], sites: list[Any],
                     original_of: Callable[[Any], Callable[..., Any]] = lambda site: site.original) -> None:
    """Undo `install_wrappers`, also where a module imported meanwhile copied a wrapper by name."""
    for namespace, key, site in replaced:
        if namespace.get(key) is site.wrapper:
            namespace[key] = original_of(site)
    wrappers = {id(site.wrapper): site for site in sites}
    for _, namespace in _holding(_namespaces_holding(), set(wrappers)):
        for key, value in list(namespace.items()):
            site = wrappers.get(id(value))
            if site is not None and value is site.wrapper:
                namespace[key] = original_of(site)


def _split_target(target: str) -> tuple[str, str]:
    if not isinstance(target, str) or not _TARGET.match(target.strip()):
        raise CaptureError(f"bad capture target {target!r}: expected 'package.module:function_name'")
    module, attribute = target.strip().split(":")
    return module, attribute


def unimportable_target(kind: str, target: str, error: BaseException) -> str:
    """Why an explicit `targets` entry of a capture or a guard (`kind`) was refused: its module fails to import."""
    return f"cannot import {_split_target(target)[0]!r} for {kind} target {target!r}: {error}"


def missing_function(kind: str, target: str) -> str:
    """Why an explicit `targets` entry of a capture or a guard (`kind`) was refused: its module has no such
    function."""
    module_name, attribute = _split_target(target)
    return f"{kind} target {target!r}: {module_name} has no function {attribute!r}"


class _RecordingWrapper(Protocol):
    """A capture's recording wrapper: the function it wraps and the capture that installed it."""

    __wrapped__: Callable[..., Any]
    __gdr_check_capture__: Capture

    def __call__(self, *args: Any, **kwargs: Any) -> Any: ...


def _live_original(function: Callable[..., Any]) -> Callable[..., Any]:
    """`function`, minus the wrappers of captures that have already ended (captures that overlap without
    nesting would otherwise leave a finished capture's pass-through wrapper installed)."""
    while True:
        owner = getattr(function, "__gdr_check_capture__", None)
        if owner is None or owner._depth > 0:
            return function
        # Only a capture's wrapper carries `__gdr_check_capture__`, and `functools.wraps` gave it `__wrapped__`.
        function = cast(_RecordingWrapper, function).__wrapped__


def engine_releases(engine: str | None) -> list[tuple[str, str]]:
    """The engine releases a capture wraps, each as (what its calls are labelled with: a name or `name@version`,
    why it was chosen: `profiles.LIVE_REASONS`): the release `engine` selects (`profiles.live_engine`); else each
    engine already imported, else each installed, at its installed release where the package metadata tells it
    (else its newest profile)."""
    if engine is not None:
        return [live_engine(engine)]
    names = [name for name in ENGINES if name in sys.modules]
    if not names:
        for name in ENGINES:
            try:
                if importlib.util.find_spec(name) is not None:
                    names.append(name)
            except (ImportError, ValueError):
                continue
    releases = []
    for name in names:
        installed = installed_release(name)
        releases.append((installed, "installed") if installed is not None else (name, "default"))
    return releases


class Capture:
    """A context manager and decorator that records packed-decode calls to `path` (see the module docs).

    `path` may hold `{pid}` and `{rank}`; its folder must exist (none is created: CaptureError on entry, as
    `-o` refuses a missing folder). `targets` adds import paths ("package.module:function_name") to the
    engines' own; `engine` ("sglang" or "vllm") limits the search to one engine and labels every call with it.
    At most `max_calls` calls are recorded; later ones run unrecorded and are counted. Re-entering (a decorated
    function that recurses, or the same object used again) keeps one recording that grows across uses and is
    rewritten at every outermost exit.
    """

    def __init__(self, path: str | os.PathLike[str], *, targets: Sequence[str] | None = None,
                 max_calls: int = DEFAULT_MAX_CALLS, engine: str | None = None) -> None:
        if engine is not None:  # "sglang", "vllm" or name@version: the release decides what is wrapped
            try:
                profile_for(engine)
            except UnknownEngineError as error:
                raise CaptureError(str(error)) from None
        # The releases wrapped (each: its calls' engine label, why), chosen at each outermost entry.
        self.releases: list[tuple[str, str]] = []
        if isinstance(targets, str):
            targets = [targets]
        try:
            max_calls = checked("max_calls", max_calls)
        except LimitError as error:
            raise CaptureError(str(error)) from None
        if not isinstance(path, (str, bytes, os.PathLike)):
            raise CapturePathTypeError(f"path is {described(path)}: must be the recording's file path (a str, bytes "
                                       f"or os.PathLike)")
        self.path_template = os.fsdecode(path)  # (bytes too, as os.fspath gives them)
        if "\0" in self.path_template:  # (os calls would raise "embedded null byte")
            raise CaptureError(printable(f"cannot record to `{self.path_template}`: a path cannot hold a null byte",
                                         _MAX_MESSAGE))
        empty = empty_path_refusal(self.path_template, "a recording")
        if empty is not None:
            raise CaptureError(empty)
        folder = folder_name_refusal(self.path_template, "a recording")
        if folder is not None:
            raise CaptureError(printable(f"cannot record to `{self.path_template}`: it {folder}", _MAX_MESSAGE))
        _resolve_path(self.path_template)  # a bad placeholder fails here, not after the engine ran
        self.extra_targets = [f"{m}:{a}" for m, a in map(_split_target, targets or ())]
        self.max_calls = max_calls
        self.engine = engine
        self.path: Path | None = None
        self._directory = os.getcwd()  # (set again at each outermost entry)
        self._state_lock = threading.RLock()
        self._calls_lock = threading.Lock()
        self._depth = 0
        self._sites: list[_Site] = []
        self._replaced: list[tuple[dict[str, Any], str, _Site]] = []
        self._skipped: list[dict[str, str]] = []
        self._calls: list[dict[str, Any]] = []
        self._calls_seen = 0
        self._calls_dropped = 0
        self._unrecorded: list[dict[str, Any]] = []

    # -- context manager and decorator ---------------------------------------------------------------------
    def __enter__(self) -> Capture:
        with self._state_lock:
            if self._depth == 0:
                # A relative path is the working directory's at entry: a chdir in the block moves nothing.
                self._directory = os.getcwd()
                path = self._path()
                problem = _destination_problem(path)
                if problem is not None:  # now, not after the engine ran
                    raise CaptureError(printable(f"cannot record to `{path}`: {problem}", _MAX_MESSAGE))
                self._patch()
            self._depth += 1
        return self

    def __exit__(self, exc_type: Any, exc: Any, traceback: Any) -> None:
        with self._state_lock:
            self._depth -= 1
            if self._depth:
                return
            self._unpatch()
            if not self._sites:  # nothing could be recorded (warned at entry): never replace a recording with that
                return
            try:
                self.write()
            except Exception as error:
                if exc is None:
                    raise
                # The body already failed; its exception matters more than the recording.
                warnings.warn(f"gdr_check.capture could not write {self.path_template}: {error}", RuntimeWarning,
                              stacklevel=2)

    def __call__(self, function: Callable[_P, _R]) -> Callable[_P, _R]:
        @functools.wraps(function)
        def captured(*args: _P.args, **kwargs: _P.kwargs) -> _R:
            with self:
                return function(*args, **kwargs)

        return captured

    # -- results -----------------------------------------------------------------------------------------------
    @property
    def calls(self) -> list[dict[str, Any]]:
        with self._calls_lock:
            return list(self._calls)

    def document(self) -> dict[str, Any]:
        with self._calls_lock:
            calls = list(self._calls)
            seen, dropped, unrecorded = self._calls_seen, self._calls_dropped, list(self._unrecorded)
        return {
            "schema_version": SCHEMA_VERSION,
            "kind": KIND,
            "tool": tool_info(),
            # The engine releases whose functions were searched: the profile each selects, and why.
            "engine_profiles": [{"engine": label, "profile": profile_for(label).spec, "reason": reason}
                                for label, reason in self.releases],
            "patched": [{"function": s.function, "module": s.module, "variant": s.variant, "engine": s.engine,
                         "targets": list(s.targets), "holders": list(s.holders)} for s in self._sites],
            "skipped_targets": list(self._skipped),
            "max_calls": self.max_calls,
            "calls_seen": seen,
            "calls_dropped": dropped,
            "unrecorded": unrecorded,
            "calls": calls,
        }

    def _path(self) -> Path:
        """The recording's path now ({pid} and {rank} filled in), relative to the directory at the last entry."""
        return Path(self._directory) / _resolve_path(self.path_template)

    def write(self) -> Path:
        """Write the recording (atomically) to the path, resolved now; CaptureError names a path that cannot take it."""
        text = dump_recording(self.document())  # serialised first: a failure leaves no file
        path = self._path()
        problem = _destination_problem(path)
        if problem is None:
            try:
                write_whole(path, text.encode("utf-8"))
            except OSError as error:
                reason = error.strerror or str(error) or type(error).__name__
                problem = reason[:1].lower() + reason[1:]
        if problem is not None:
            raise CaptureError(printable(f"cannot write the recording to `{path}`: {problem}", _MAX_MESSAGE))
        self.path = path
        return path

    # -- patching ------------------------------------------------------------------------------------------------
    def _targets(self) -> list[tuple[str, bool, str | None]]:
        """(target, explicit, the engine label of its calls): each release's own targets, then `targets`."""
        self.releases = engine_releases(self.engine)
        defaults = [(t, False, label) for label, _ in self.releases for t in engine_targets(label)]
        label = self.releases[0][0] if self.engine is not None else None
        return defaults + [(t, True, label) for t in self.extra_targets]

    def _resolve(self, target: str, explicit: bool) -> Callable[..., Any] | None:
        module_name, attribute = _split_target(target)
        try:
            module = importlib.import_module(module_name)
        except Exception as error:  # an engine that fails to import is skipped, not fatal
            if explicit:
                raise CaptureError(unimportable_target("capture", target, error)) from error
            # A path this engine version does not have is expected; a module that exists but fails is news,
            # except for the target's own optional dependency (sglang's Helion decode without `helion`): the
            # engine cannot take that path either.
            missing = (getattr(error, "name", None) or "") if isinstance(error, ModuleNotFoundError) else ""
            absent = bool(missing) and (module_name.startswith(missing)
                                        or missing.split(".")[0] in OPTIONAL_DEPENDENCIES.get(target, ()))
            if not absent:
                self._skipped.append({"target": target, "reason": f"import failed: {type(error).__name__}: {error}"})
            return None
        function: object = getattr(module, attribute, None)
        if function is None or not callable(function):
            if explicit:
                raise CaptureError(missing_function("capture", target))
            return None
        return function

    def _patch(self) -> None:
        self._sites, self._replaced, self._skipped = [], [], []
        by_id: dict[int, _Site] = {}
        for target, explicit, label in self._targets():
            function = self._resolve(target, explicit)
            if function is None:
                continue
            site = by_id.get(id(function))
            if site is None:
                site = self._new_site(target, function, label)
                if site is None:
                    continue
                by_id[id(function)] = site
                self._sites.append(site)
            site.targets.append(target)
        self._replaced = install_wrappers(by_id)
        if not self._sites:
            searched = [profile_for(label).label for label, _ in self.releases]
            where = f"in {' or '.join(searched)}" if searched else "(neither sglang nor vLLM is installed)"
            skipped = "".join(f"; skipped {entry['target']}: {entry['reason']}" for entry in self._skipped)
            warnings.warn(printable(f"gdr_check.capture found no packed-decode function to record {where}, so it "
                                    f"writes no recording (an existing file is left as it is){skipped}; pass "
                                    f"targets=['package.module:function_name'] for another location", _MAX_MESSAGE),
                          RuntimeWarning, stacklevel=3)

    def _new_site(self, target: str, function: Callable[..., Any], label: str | None) -> _Site | None:
        bind, problem = _binder(function)
        if bind is None:
            self._skipped.append({"target": target, "reason": f"not recorded: {problem}"})
            return None
        module_name = target.split(":", 1)[0]
        name = getattr(function, "__name__", target.rsplit(":", 1)[1])
        try:
            parameters = list(inspect.signature(function).parameters)
        except (TypeError, ValueError):
            parameters = []
        site = _Site(original=function, target=target, module=module_name, function=name,
                     variant=kernel_variant(name, parameters).name, engine=label or _guess_engine(module_name),
                     bind=bind)
        site.wrapper = self._wrapper_for(site)
        return site

    def _wrapper_for(self, site: _Site) -> Callable[..., Any]:
        original = site.original

        @functools.wraps(original)
        def recording_wrapper(*args: Any, **kwargs: Any) -> Any:
            if self._depth > 0:
                self._record(site, args, kwargs, sys._getframe(1))
            return original(*args, **kwargs)

        # A function attribute (written through the function's __dict__, which is what `f.name = x` does).
        recording_wrapper.__dict__["__gdr_check_capture__"] = self
        return recording_wrapper

    def _unpatch(self) -> None:
        restore_wrappers(self._replaced, self._sites, lambda site: _live_original(site.original))
        self._replaced = []

    # -- recording -------------------------------------------------------------------------------------------------
    def _record(self, site: _Site, args: tuple[Any, ...], kwargs: dict[str, Any],
                frame: types.FrameType | None) -> None:
        """Describe one call. Never raises: the engine's call must run whatever happens here."""
        try:
            compiling, capturing = _torch_state()
            if compiling:  # under torch.compile tracing the arguments are fake tensors
                return
            with self._calls_lock:
                self._calls_seen += 1
                if len(self._calls) >= self.max_calls:
                    self._calls_dropped += 1
                    return
            try:
                call = site.describe(args, kwargs, read_values=not capturing)
            except Exception as error:  # noqa: BLE001 - a call the recorder cannot describe is noted, never fatal
                self._note_unrecorded(site, f"{type(error).__name__}: {error}")
                return
            entry: dict[str, Any] = {
                "function": site.function, "module": site.module, "engine": site.engine, "variant": site.variant,
                "caller": _caller(frame), "values_read": not capturing, "call": call.to_dict(),
            }
            with self._calls_lock:
                if len(self._calls) >= self.max_calls:
                    self._calls_dropped += 1
                    return
                entry = {"index": len(self._calls), **entry}
                self._calls.append(entry)
        except Exception:  # noqa: BLE001 - recording is best effort
            return

    def _note_unrecorded(self, site: _Site, reason: str) -> None:
        with self._calls_lock:
            if len(self._unrecorded) < _MAX_UNRECORDED:
                self._unrecorded.append({"function": site.function, "module": site.module, "reason": reason})




class _CallableModule(types.ModuleType):
    def __call__(self, path: str | os.PathLike[str], *, targets: Sequence[str] | None = None,
                 max_calls: int = DEFAULT_MAX_CALLS, engine: str | None = None) -> Capture:
        """Record the packed-decode calls made inside a `with` block or a decorated function to `path`."""
        return Capture(path, targets=targets, max_calls=max_calls, engine=engine)


sys.modules[__name__].__class__ = _CallableModule
capture = sys.modules[__name__]
