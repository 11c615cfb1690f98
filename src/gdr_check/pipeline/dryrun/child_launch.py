"""Run a plan in a child process and collect what it says (no torch here: this runs in the CLI process)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Mapping
from typing import Any

from ...base.records import dataclass
from .lifeline import parent_environment
from .plan import DryRunPlan

CHILD_MODULE = "gdr_check.pipeline.dryrun.child"
DEFAULT_TIMEOUT_S = 1800.0


@dataclass
class ChildOutcome:
    """The child's JSON result, or how it ended without one."""

    result: dict[str, Any] | None
    returncode: int | None
    stderr: str
    timed_out: bool = False
    timeout: float | None = None

    @property
    def last_stderr_line(self) -> str:
        lines = [line.strip() for line in self.stderr.splitlines() if line.strip()]
        return lines[-1] if lines else "(nothing on stderr)"

    @property
    def crashed(self) -> bool:
        return self.result is None

    def how(self) -> str:
        """How a crashed child ended, for the GDR311 message."""
        if self.timed_out:
            return f"did not finish within {self.timeout:g} s and was killed"
        code = self.returncode
        if code is not None and code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = f"signal {-code}"
            return f"was killed by {name}"
        return f"exited with status {code} without a result"


def child_environment(plan: DryRunPlan, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The caller's environment, with TRITON_INTERPRET set only for `--device cpu`.

    For `auto` the child decides after asking torch for a CUDA device, before it imports triton; an inherited
    TRITON_INTERPRET would otherwise run CUDA tensors through the interpreter.
    """
    env = dict(os.environ if base is None else base)
    env.pop("TRITON_INTERPRET", None)
    if plan.device == "cpu":
        env["TRITON_INTERPRET"] = "1"
    env.setdefault("PYTHONUNBUFFERED", "1")
    env.update(parent_environment())  # the child dies with this process (lifeline.py)
    return env


def run_child(plan: DryRunPlan, *, timeout: float = DEFAULT_TIMEOUT_S,
              env: Mapping[str, str] | None = None) -> ChildOutcome:
    command = [sys.executable, "-m", CHILD_MODULE]
    process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               env=child_environment(plan, env), text=True)
    try:
        stdout, stderr = process.communicate(json.dumps(plan.to_dict()), timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        stdout, stderr = process.communicate()
        return ChildOutcome(None, process.returncode, stderr or "", timed_out=True, timeout=timeout)
    except BaseException:  # Ctrl-C, SIGTERM (as the CLI raises it): the child goes with the run
        process.kill()
        process.wait()
        raise
    return ChildOutcome(_parse(stdout), process.returncode, stderr or "")


def _parse(stdout: str) -> dict[str, Any] | None:
    """The last line of stdout as a JSON object, or None."""
    lines = [line for line in stdout.splitlines() if line.strip()]
    if not lines:
        return None
    try:
        value = json.loads(lines[-1])
    except json.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None
