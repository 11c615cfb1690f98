"""Signals during a dry-run: SIGINT and SIGTERM stop the run with one line and the shell's code (130, 143), its
child process dies with it, and no report (not even a partial one) is left at the `-o` path; a parent killed
outright (SIGKILL, no cleanup at all) still takes its child along (the parent-death signal). The child is held
in place with a fault installed in it (child_faults.py: it sleeps instead of running), so no kernel runs and torch
is not needed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import child_faults
from cli_checkpoints import write_good

OLD = b"the previous report\n"


def _children(pid: int) -> list[int]:
    try:
        return [int(child) for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def _alive(pid: int) -> bool:
    """Running, not a zombie waiting to be reaped."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return False
    return fields[0] != "Z"


def _until(condition, what: str, limit: float = 60.0) -> None:
    """Wait for `condition` (polled), failing with `what` past `limit` seconds: a bound on a hang, not a timing."""
    deadline = time.monotonic() + limit
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


@pytest.fixture
def started(tmp_path):
    """A dry-run whose child is running (and sleeping): (the CLI process, its child's pid, the report path)."""
    write_good(tmp_path / "good")
    report = tmp_path / "report.json"
    report.write_bytes(OLD)
    environment = {k: v for k, v in os.environ.items()
                   if not k.startswith(("GDR_CHECK_", "GITHUB_")) or k == "GDR_CHECK_CACHE_DIR"}
    environment = child_faults.environment({**environment, child_faults.DRYRUN_FAULT: "hang", "NO_COLOR": "1"})
    process = subprocess.Popen([sys.executable, "-m", "gdr_check", "dry-run", "good", "--device", "cpu",
                                "--output-format", "json", "-o", str(report)], cwd=tmp_path, env=environment,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        _until(lambda: _children(process.pid), "the dry-run started no child")
        (child,) = _children(process.pid)
        yield process, child, report
    finally:
        if process.poll() is None:
            process.kill()
        process.communicate()
        for pid in _children(process.pid):
            os.kill(pid, signal.SIGKILL)


@pytest.mark.parametrize("signum,code,line", [(signal.SIGINT, 130, "error: interrupted"),
                                              (signal.SIGTERM, 143, "error: terminated")])
def test_a_signal_stops_the_run_and_its_child(started, signum, code, line):
    process, child, report = started
    os.kill(process.pid, signum)
    stdout, stderr = process.communicate(timeout=60)
    assert (process.returncode, stdout, stderr.decode().splitlines()) == (code, b"", [line])
    # Killed and reaped by the run once it waits on the child; a signal that lands while the child is still being
    # spawned (the child exists, `Popen` has not returned) leaves it to the parent-death signal, which the kernel
    # delivers as the run exits: a moment later, under load (lifeline.py).
    _until(lambda: not _alive(child), "the child outlived the run")
    assert report.read_bytes() == OLD and sorted(p.name for p in report.parent.iterdir()) == ["good", "report.json"]


def test_a_parent_killed_outright_takes_its_child_along(started):
    process, child, report = started
    os.kill(process.pid, signal.SIGKILL)
    process.wait(timeout=60)
    _until(lambda: not _alive(child), "the child outlived its parent")
    assert report.read_bytes() == OLD
