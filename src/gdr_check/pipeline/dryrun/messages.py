"""What the dry-run child (`runner/child.py`) sends back to the parent, as typed JSON objects.

The child writes one JSON object on its stdout and the parent (`runner/launch.py`) reads it back: these
`TypedDict`s name its keys and their types on both sides (at run time they are plain dicts, so the wire
format is unchanged). Torch-free: the parent imports this module without the kernel extra.
"""

from __future__ import annotations

from typing import Any, Literal, TypedDict, final


def not_importable(package: str, error: object) -> str:
    """Why the dry-run cannot run without `package` (torch or triton): the child's and the parent's words."""
    return f"{package} is not importable ({error}); the dry-run needs `pip install 'gdr-check[kernel]'`"


class RaisedError(TypedDict):
    """An exception a kernel raised on a launch (GDR312)."""

    exception: str
    message: str


@final  # no other keys: `"seconds" in run` tells a completed run from a raised one
class RaisedRun(TypedDict):
    raised: RaisedError


# A kernel's result on one step: the launch's seconds plus the checks of `verify.check_run`, or what it raised.
KernelRun = RaisedRun | dict[str, Any]


class StepRecordBase(TypedDict):
    step: int
    live_rows: int
    skipped_rows: int
    indices: list[int] | None
    beta_ties: int
    kernels: dict[str, KernelRun]


class StepRecord(StepRecordBase, total=False):
    """One decode step: the slot indices used, and each kernel's run (by kernel name)."""

    agreement: dict[str, Any]  # `verify.compare_runs` of the two kernels, when two ran


class KernelTiming(TypedDict, total=False):
    median_us: float
    bandwidth_gbps: float
    fraction_of_copy: float


class CopyBandwidth(TypedDict):
    """The device-to-device copy that the kernel times are compared with (`timing.copy_bandwidth`)."""

    bytes: int
    median_us: float
    bandwidth_gbps: float
    method: str


class Timing(TypedDict, total=False):
    """Per-kernel times; `meaningful` is False under the Triton interpreter (wall clock only)."""

    meaningful: bool
    method: str
    bytes_per_call: int
    rows: int
    live_rows: int
    kernels: dict[str, KernelTiming]
    copy: CopyBandwidth


class BackendUnavailable(TypedDict):
    backend: str
    reason: str


class SessionResultBase(TypedDict):
    geometry: dict[str, Any]
    kernels: dict[str, str]  # kernel name -> label
    steps: list[StepRecord]
    timing: Timing | None


class SessionResult(SessionResultBase, total=False):
    """What `session.run_session` returns: the launch geometry, the kernels, the steps and their timing."""

    backend_unavailable: BackendUnavailable


class DeviceInfo(TypedDict):
    type: str
    interpreter: bool
    reason: str
    python: str
    torch: str
    triton: str
    device_name: str


class OkResult(SessionResult):
    """A run that reached the kernels (whatever they did)."""

    status: Literal["ok"]
    device: DeviceInfo


class EnvironmentResult(TypedDict):
    """The dry run cannot run here (no torch, no triton, no CUDA device when asked for one)."""

    status: Literal["environment"]
    message: str


class FailedResult(TypedDict):
    """The child failed outside the kernels (its traceback is on stderr)."""

    status: Literal["failed"]
    exception: str
    message: str


ChildResult = OkResult | EnvironmentResult | FailedResult
