"""`gdr-check dry-run --ranks all`: start one process per TP rank, wait for them, stop them all on any failure.

Torch-free (this runs in the CLI process). Each rank is `python -m gdr_check.pipeline.dryrun.rank_worker SPEC` with the
torchrun variables set (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR=127.0.0.1, a free MASTER_PORT). When a rank
exits without a result, the others are blocked in a collective: they get a short grace period, then are killed,
so no process group is left hanging. The process groups also carry the same timeout.
"""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import field
from pathlib import Path
from typing import Any

from ...base.records import dataclass
from .child_launch import child_environment
from .plan import DryRunPlan

WORKER_MODULE = "gdr_check.pipeline.dryrun.rank_worker"
GRACE_S = 3.0
POLL_S = 0.05


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class RankOutcome:
    rank: int
    returncode: int | None
    events: list[dict[str, Any]]
    stderr: str
    killed: bool = False  # stopped by us (after another rank failed, or at the timeout)

    @property
    def result(self) -> dict[str, Any] | None:
        for event in reversed(self.events):
            if event.get("event") == "result":
                return dict(event)
        return None

    @property
    def failure(self) -> dict[str, Any] | None:
        for event in reversed(self.events):
            if event.get("event") == "failed":
                return dict(event)
        return None

    @property
    def last_event(self) -> str:
        for event in reversed(self.events):
            kind = event.get("event")
            if kind == "step":
                return f"started step {event.get('step')}"
            if kind == "gather":
                return f"waiting to gather step {event.get('step')}"
            if kind == "init":
                return "starting the process group"
        return "starting"

    def how(self) -> str:
        """How the rank ended, when it has no result."""
        failure = self.failure
        if failure is not None:
            return f"raised {failure.get('exception')}: {failure.get('message')}"
        code = self.returncode
        if code is not None and code < 0 and not self.killed:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = f"signal {-code}"
            return f"was killed by {name} ({self.last_event})"
        if self.killed:
            return f"was stopped ({self.last_event})"
        return f"exited with status {code} without a result ({self.last_event})"

    @property
    def last_stderr_line(self) -> str:
        lines = [line.strip() for line in self.stderr.splitlines() if line.strip()]
        return lines[-1] if lines else "(nothing on stderr)"


@dataclass
class RanksOutcome:
    tp: int
    ranks: list[RankOutcome] = field(default_factory=list)
    timed_out: bool = False
    timeout: float = 0.0
    first_failure: int | None = None  # the rank that ended first without a result
    wall_s: float = 0.0

    @property
    def result(self) -> dict[str, Any] | None:
        """Rank 0's result, when every rank finished."""
        if self.timed_out or self.first_failure is not None or not self.ranks:
            return None
        return self.ranks[0].result


def _environment(plan: DryRunPlan, rank: int, world: int, port: int) -> dict[str, str]:
    env = child_environment(plan)
    env.update({"RANK": str(rank), "WORLD_SIZE": str(world), "LOCAL_RANK": str(rank),
                "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)})
    # Keep NVLink multicast off wherever NCCL runs (a shared host's GPUs can be taken out of service by it).
    env.setdefault("NCCL_NVLS_ENABLE", "0")
    env.setdefault("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1")
    return env


def _events(text: str) -> list[dict[str, Any]]:
    events = []
    for line in text.splitlines():
        try:
            value = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict):
            events.append(value)
    return events


def run_ranks(plan: DryRunPlan, *, layout: str, tp: int, timeout: float,
              weights: dict[str, Any] | None = None) -> RanksOutcome:
    """Run `tp` rank processes over `plan` (the per-rank call) and collect what each said."""
    outcome = RanksOutcome(tp=tp, timeout=timeout)
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="gdr-check-ranks-") as folder:
        root = Path(folder)
        spec_path = root / "spec.json"
        spec_path.write_text(json.dumps({"plan": plan.to_dict(), "layout": layout, "timeout": timeout,
                                         "weights": weights}),
                             encoding="utf-8")
        port = free_port()
        processes: list[subprocess.Popen[bytes]] = []
        files = []
        try:
            for rank in range(tp):
                out = open(root / f"rank{rank}.out", "wb")  # closed below
                err = open(root / f"rank{rank}.err", "wb")
                files += [out, err]
                processes.append(subprocess.Popen([sys.executable, "-m", WORKER_MODULE, str(spec_path)],
                                                  stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                                  env=_environment(plan, rank, tp, port)))
            killed = _wait(processes, outcome, start + timeout)
        finally:
            for process in processes:
                if process.poll() is None:
                    process.kill()
                    process.wait()
            for handle in files:
                handle.close()
        for rank, process in enumerate(processes):
            text = (root / f"rank{rank}.out").read_text(encoding="utf-8", errors="replace")
            stderr = (root / f"rank{rank}.err").read_text(encoding="utf-8", errors="replace")
            outcome.ranks.append(RankOutcome(rank, process.returncode, _events(text), stderr, rank in killed))
    outcome.wall_s = time.monotonic() - start
    return outcome


def _wait(processes: list[subprocess.Popen[bytes]], outcome: RanksOutcome, deadline: float) -> set[int]:
    """Wait for every rank; on the first failure or at the deadline, stop the rest. The ranks we killed."""
    stop_at: float | None = None
    while True:
        codes = [process.poll() for process in processes]
        if all(code is not None for code in codes):
            return set()
        if outcome.first_failure is None:
            for rank, code in enumerate(codes):
                if code not in (None, 0):
                    outcome.first_failure = rank
                    stop_at = time.monotonic() + GRACE_S
                    break
        now = time.monotonic()
        if now >= deadline:
            outcome.timed_out = outcome.first_failure is None
            return _kill(processes)
        if stop_at is not None and now >= stop_at:
            return _kill(processes)
        time.sleep(POLL_S)


def _kill(processes: list[subprocess.Popen[bytes]]) -> set[int]:
    killed = set()
    for rank, process in enumerate(processes):
        if process.poll() is None:
            process.kill()
            killed.add(rank)
    for process in processes:
        process.wait()
    return killed
