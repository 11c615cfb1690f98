"""The recording file `gdr_check.capture()` writes: its format and `load_recording`, which reads one back.

Reading a recording is a metadata path of its own (`gdr-check call`,
`gdr_check.pipeline.call_check.check_recording`): plain JSON, bounded in size and checked field by field,
giving each call as a `PackedDecodeCall`. The capture hooks that write it (`pipeline/capture.py`) are
runtime code and need none of this module's readers' speed; this module needs none of their imports.
"""

from __future__ import annotations

import json
import os
from dataclasses import field
from typing import Any, TypeGuard

from ..base.errors import InputError, not_utf8, printable
from ..base.files import RECORDING_KIND, json_error_reason, loads_bounded
from ..base.identity import REPORT_SCHEMA_VERSION
from ..base.limits import LIMITS, MAX_RECORDING_BYTES, read_bounded, shorten
from ..base.records import dataclass
from ..base.tensor_spec import TensorSpec, check_sizes, index_values_problem, known_dtype
from ..base.variants import VARIANTS
from ..engines.profiles import UnknownEngineError, profile_for
from .guard_report import GuardReport, is_guard_report, read_guard_report
from .packed_call import ENGINES, TENSOR_ARGUMENTS, PackedDecodeCall

SCHEMA_VERSION = 1
KIND = RECORDING_KIND


# -- reading -------------------------------------------------------------------------------------------------------
class RecordingError(InputError):
    """A recording that cannot be read: one line naming the file (exit code 2 in the CLI)."""

    code = "recording"

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}")
        self.path = path


@dataclass(frozen=True)
class RecordedCall:
    index: int
    call: PackedDecodeCall
    function: str | None = None
    engine: str | None = None
    caller: str | None = None
    values_read: bool = True

    def to_dict(self) -> dict[str, Any]:
        return {"index": self.index, "function": self.function, "engine": self.engine,
                "variant": self.call.variant, "caller": self.caller, "values_read": self.values_read,
                "call": self.call.to_dict()}


@dataclass(frozen=True)
class Recording:
    path: str
    calls: list[RecordedCall]
    calls_seen: int | None = None
    calls_dropped: int = 0
    max_calls: int | None = None  # None: the file does not say
    # Why the capture could not describe a call (the first of the file's `unrecorded`), to explain an empty one.
    unrecorded_reason: str | None = None
    skipped_targets: list[dict[str, Any]] = field(default_factory=list)
    # The file's text, for the checks that point a call's diagnostics at its lines (`api.check_recording`).
    text: str = field(default="", repr=False)
    # A served worker's guard report (`GDR_CHECK_REPORT`) read in a recording's place: its findings (no calls).
    guard: GuardReport | None = None


def _is_int(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


_MAX_RANK = 16


def _tensor(data: Any, where: str) -> TensorSpec:
    if not isinstance(data, dict):
        raise ValueError(f"`{where}` must be an object with `shape`, `stride` and `dtype`")
    for key in ("shape", "stride"):
        value = data.get(key)
        if not isinstance(value, list) or not all(_is_int(v) for v in value):
            raise ValueError(f"`{where}.{key}` must be a list of integers")
    check_sizes(data["shape"], f"{where}.shape")
    if len(data["shape"]) != len(data["stride"]):
        raise ValueError(f"`{where}.shape` and `{where}.stride` have different lengths")
    if len(data["shape"]) > _MAX_RANK:
        raise ValueError(f"`{where}.shape` has {len(data['shape'])} dimensions; at most {_MAX_RANK} are allowed")
    dim = LIMITS["dim"]
    for key in ("shape", "stride"):
        bad = [v for v in data[key] if not dim.allows(abs(v))]
        if bad:
            raise ValueError(f"`{where}.{key}` holds {shorten(bad[0])}: each entry must be in "
                             f"{dim.range_text} in magnitude ({dim.what})")
    if not isinstance(data.get("dtype"), str):
        raise ValueError(f"`{where}.dtype` must be a string")
    dtype = known_dtype(data["dtype"], f"{where}.dtype")
    if "device" in data and not isinstance(data["device"], str):
        raise ValueError(f"`{where}.device` must be a string")
    values = data.get("values")
    if values is not None and not isinstance(values, list):
        raise ValueError(f"`{where}.values` must be a list of numbers")
    # a capture records the slot indices' values, every element: what a TensorSpec's must be
    problem = None if values is None else index_values_problem(values, data["shape"], dtype)
    if problem is not None:
        raise ValueError(f"`{where}.values` {problem}")
    for key in ("storage", "offset"):
        if data.get(key) is not None and not _is_int(data[key]):
            raise ValueError(f"`{where}.{key}` must be an integer")
    return TensorSpec.from_dict(data)


def _optional_number(data: dict[str, Any], key: str, where: str) -> float | None:
    value = data.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"`{where}.{key}` must be a number or null")
    # NaN, inf, 1e400 or an integer too large for a float. A finite scale <= 0 is read: GDR245 judges it, as it
    # judges a passed one; so does GDR254/GDR257 a lower bound.
    limit = LIMITS[key]
    if not limit.allows(abs(value)):
        raise ValueError(f"`{where}.{key}` is {shorten(value)}: must be a finite number of at most "
                         f"{limit.maximum_text} in magnitude")
    return float(value)


def _shown(value: Any) -> str:
    """A value of the file as a message shows it: short, printable, a string quoted."""
    return printable(shorten(repr(value) if isinstance(value, str) else value))


def _count(value: Any, where: str) -> int:
    """`value` when it is a whole number >= 0 (a call's `index`, `calls_seen`), else ValueError naming `where`."""
    if not _is_int(value) or value < 0:
        raise ValueError(f"`{where}` must be a whole number >= 0 (got {_shown(value)})")
    return value


def _unique_indices(entries: list[Any], recorded: list[RecordedCall]) -> None:
    """ValueError naming the first call whose index (its `index`, else its position) an earlier call has: a
    call's index is how the report and `--index` name it."""
    first: dict[int, int] = {}
    for position, call in enumerate(recorded):
        earlier = first.setdefault(call.index, position)
        if earlier != position:
            given = "index" in entries[earlier]
            other = f"`calls[{earlier}].index`" if given else f"the position of `calls[{earlier}]` (it has no `index`)"
            mine = (f"`calls[{position}].index` is {call.index}" if "index" in entries[position] else
                    f"the position of `calls[{position}]` (it has no `index`) is {call.index}")
            raise ValueError(f"{mine}, as is {other}: each call's index must be unique")


def _call_entry(entry: Any, index: int) -> RecordedCall:
    where = f"calls[{index}]"
    if not isinstance(entry, dict):
        raise ValueError(f"`{where}` must be an object")
    data = entry.get("call")
    if not isinstance(data, dict):
        raise ValueError(f"`{where}.call` is missing")
    variant = data.get("variant", entry.get("variant", "gdn"))
    if variant not in VARIANTS:
        names = " or ".join(f'"{name}"' for name in VARIANTS)
        raise ValueError(f"`{where}.call.variant` must be {names} (got {variant!r})")
    engine = entry.get("engine")
    if engine is not None and not _names_an_engine(engine):
        raise ValueError(f"`{where}.engine` must be one of {', '.join(ENGINES)} (or name@version) or null (got "
                         f"{printable(repr(engine))})")
    missing = [name for name in (*TENSOR_ARGUMENTS, "scale") if name not in data]
    if missing:
        raise ValueError(f"`{where}.call` has no `{missing[0]}`")
    spec = VARIANTS[variant]
    if not spec.has_lower_bound and data.get("lower_bound") is not None:
        takers = " and ".join(s.label for s in VARIANTS.values() if s.has_lower_bound)
        raise ValueError(f"`{where}.call.lower_bound` is {_shown(data['lower_bound'])}, but the call is a {spec.label} "
                         f"call: the {spec.label} kernel has no lower_bound (only {takers} calls take one)")
    if "index" in entry:
        _count(entry["index"], f"{where}.index")
    tensors = {name: _tensor(data[name], f"{where}.call.{name}") for name in TENSOR_ARGUMENTS}
    flag = data.get("use_qk_l2norm_in_kernel", False)
    if not isinstance(flag, bool):
        raise ValueError(f"`{where}.call.use_qk_l2norm_in_kernel` must be true or false")
    call = PackedDecodeCall(
        scale=_optional_number(data, "scale", f"{where}.call"), use_qk_l2norm_in_kernel=flag,
        lower_bound=_optional_number(data, "lower_bound", f"{where}.call"), variant=variant, **tensors,
    )
    caller = entry.get("caller")
    if isinstance(caller, dict):
        caller = ":".join(str(caller[k]) for k in ("module", "function", "line") if caller.get(k) is not None)
    function = entry.get("function")
    return RecordedCall(index=entry["index"] if _is_int(entry.get("index")) else index, call=call,
                        function=function if isinstance(function, str) else None, engine=engine,
                        caller=caller if isinstance(caller, str) and caller else None,
                        values_read=entry.get("values_read", True) is not False)


def _names_an_engine(engine: object) -> bool:
    """Whether `engine` selects an engine profile: "sglang", "vllm" or name@version (as `capture(engine=)` took)."""
    try:
        profile_for(engine)  # type: ignore[arg-type]
    except UnknownEngineError:
        return False
    return True


def load_recording(path: str | os.PathLike[str]) -> Recording:
    """Read and validate a recording. Raises `RecordingError` (one line) for anything unreadable."""
    shown = os.fspath(path)
    if os.path.isdir(path):
        raise RecordingError(shown, "is a directory, not a recording")
    try:
        # Non-blocking and fstat-checked: a FIFO, /dev/zero or a sparse multi-GB file is refused unread.
        raw = read_bounded(path, MAX_RECORDING_BYTES)
    except OSError as error:
        raise RecordingError(shown, f"cannot read the recording: {error}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise RecordingError(shown, not_utf8(raw, error)) from None
    try:
        document = loads_bounded(text)
    except json.JSONDecodeError as error:
        raise RecordingError(shown, f"not valid JSON (line {error.lineno}, column {error.colno}: "
                                    f"{json_error_reason(error)})") from None
    except RecursionError:
        raise RecordingError(shown, "not valid JSON: nested too deeply") from None
    if not isinstance(document, dict):
        raise RecordingError(shown, f"not a gdr-check recording: the top level is a {type(document).__name__}, "
                                    f"not an object")
    version = document.get("schema_version")
    if is_guard_report(document):
        if version != REPORT_SCHEMA_VERSION:
            raise RecordingError(shown, f"guard report schema_version {printable(repr(version), 40)} is not "
                                        f"supported; this gdr-check reads version {REPORT_SCHEMA_VERSION}")
        try:
            return Recording(path=shown, calls=[], text=text, guard=read_guard_report(document))
        except ValueError as error:
            raise RecordingError(shown, f"guard report: {error}") from None
    if document.get("kind", KIND) != KIND:
        raise RecordingError(shown, f"not a gdr-check recording: its `kind` is {printable(repr(document['kind']))}, "
                                    f"not {KIND!r}; record one with `gdr_check.capture()`")
    if version is None:
        raise RecordingError(shown, "not a gdr-check recording (no `schema_version`); record one with "
                                    "`gdr_check.capture()`")
    if version != SCHEMA_VERSION:
        raise RecordingError(shown, f"recording schema_version {version!r} is not supported; this gdr-check "
                                    f"reads version {SCHEMA_VERSION}")
    calls = document.get("calls")
    if not isinstance(calls, list):
        raise RecordingError(shown, "`calls` must be a list")
    try:
        recorded = [_call_entry(entry, i) for i, entry in enumerate(calls)]
        _unique_indices(calls, recorded)
        seen = document.get("calls_seen")
        if seen is not None:
            _count(seen, "calls_seen")
    except (ValueError, TypeError) as error:
        raise RecordingError(shown, str(error)) from None
    dropped = document.get("calls_dropped")
    skipped = document.get("skipped_targets")
    max_calls = document.get("max_calls")
    unrecorded = document.get("unrecorded")
    first = unrecorded[0] if isinstance(unrecorded, list) and unrecorded else None
    reason = first.get("reason") if isinstance(first, dict) else None
    return Recording(
        path=shown, calls=recorded, calls_seen=seen if _is_int(seen) else None,
        calls_dropped=dropped if _is_int(dropped) else 0,
        max_calls=max_calls if _is_int(max_calls) else None,
        unrecorded_reason=printable(reason, 200) if isinstance(reason, str) and reason else None,
        skipped_targets=[s for s in skipped if isinstance(s, dict)] if isinstance(skipped, list) else [],
        text=text,
    )


# `gdr_check.capture(...)` must work however `gdr_check.capture` was reached: importing this submodule binds
# the package attribute to the module, so the module itself is callable, and its `capture` attribute is the
# module too (a lazy package export of "capture" then yields the same object).
