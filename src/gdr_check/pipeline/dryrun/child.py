"""`python -m gdr_check.pipeline.dryrun.child`: run one dry-run plan (JSON on stdin), print one JSON result on stdout.

Runs in its own process so that a device fault, which leaves the CUDA context unusable for the rest of the
process (docs/kernel-contract.md U3), cannot take down the caller. Anything else that writes to stdout (a library's
print) is redirected to stderr, so stdout carries exactly the result.

Result `status`: "ok" (the run finished; its checks may still have failed), "environment" (torch or triton is
missing, or `--device cuda` without a CUDA device: exit 3), "failed" (an exception outside the kernel calls).
"""

from __future__ import annotations

import json
import math
import os
import sys
import traceback
from typing import Any, TextIO

from .lifeline import die_with_parent
from .messages import ChildResult, DeviceInfo, EnvironmentResult, FailedResult, OkResult, not_importable
from .plan import DryRunPlan

ENVIRONMENT_EXIT = 3


def _claim_stdout() -> TextIO:
    """A private handle on the real stdout; fd 1 becomes stderr for everything else."""
    result = os.fdopen(os.dup(1), "w", encoding="utf-8")
    sys.stdout.flush()
    os.dup2(2, 1)
    return result


def jsonable(value: Any) -> Any:
    """Non-finite floats as strings ("inf", "nan"): the result must be strict JSON."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {key: jsonable(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(item) for item in value]
    return value


def _environment(message: str) -> EnvironmentResult:
    return {"status": "environment", "message": message}


def _resolve_device(requested: str) -> tuple[Any, bool, str] | EnvironmentResult:
    """(torch device, interpreter?, why) or an environment result. Imports torch but not triton."""
    try:
        import torch
    except ImportError as error:
        return _environment(not_importable("torch", error))
    has_cuda = torch.cuda.is_available()
    if requested == "cuda" and not has_cuda:
        return _environment(f"--device cuda, but torch {torch.__version__} sees no CUDA device")
    if requested == "cpu" or not has_cuda:
        why = "--device cpu" if requested == "cpu" else "no CUDA device"
        # The interpreter must be chosen before triton (and the kernel modules) are imported.
        os.environ["TRITON_INTERPRET"] = "1"
        return torch.device("cpu"), True, why
    os.environ.pop("TRITON_INTERPRET", None)
    return torch.device("cuda", torch.cuda.current_device()), False, "CUDA"


def _versions(torch: Any, triton: Any, device: Any) -> dict[str, str]:
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU (Triton interpreter)"
    return {"python": sys.version.split()[0], "torch": torch.__version__, "triton": triton.__version__,
            "device_name": name}


def run(plan_data: dict[str, Any]) -> tuple[ChildResult, int]:
    plan = DryRunPlan.from_dict(plan_data)
    resolved = _resolve_device(plan.device)
    if isinstance(resolved, dict):
        return resolved, ENVIRONMENT_EXIT
    device, interpreter, why = resolved
    try:
        import torch
        import triton
    except ImportError as error:
        return _environment(not_importable("triton", error)), ENVIRONMENT_EXIT
    from .session import run_session

    versions = _versions(torch, triton, device)
    device_info: DeviceInfo = {"type": device.type, "interpreter": interpreter, "reason": why,
                               "python": versions["python"], "torch": versions["torch"],
                               "triton": versions["triton"], "device_name": versions["device_name"]}
    result: OkResult = {"status": "ok", "device": device_info, **run_session(plan, device, interpreter)}
    return result, 0


def main() -> int:
    die_with_parent()
    output = _claim_stdout()
    try:
        plan_data = json.load(sys.stdin)
        result, code = run(plan_data)
    except Exception as error:  # noqa: BLE001 - reported to the parent as a failed run, with the traceback on stderr
        traceback.print_exc()
        failed: FailedResult = {"status": "failed", "exception": type(error).__name__, "message": str(error).strip()}
        result, code = failed, 1
    output.write(json.dumps(jsonable(result)) + "\n")
    output.flush()
    return code


if __name__ == "__main__":
    sys.exit(main())
