"""A throwaway git repository holding this checkout's files (committed or not), for the CI replays.

pre-commit installs a hook from a git repository at a `rev`, and the GitHub Action is checked out from one; a
replay must test the working tree, including what is not committed yet. So the tracked and untracked
(not ignored) files are copied into a new repository and committed there; its HEAD is the `rev`.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# A commit needs an author; none is configured on a CI machine.
GIT_IDENTITY = ["-c", "user.name=gdr-check CI", "-c", "user.email=ci@example.invalid", "-c", "commit.gpgsign=false"]


def git(*args: str, cwd: Path) -> str:
    return subprocess.run(["git", *GIT_IDENTITY, *args], cwd=cwd, check=True, capture_output=True,
                          text=True).stdout.strip()


def snapshot_repository(destination: Path) -> str:
    """Copy the working tree's files into a new repository at `destination`, commit them; return the commit."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            check=True, capture_output=True).stdout.decode().split("\0")
    destination.mkdir(parents=True)
    for name in filter(None, listed):
        source = ROOT / name
        if not source.is_file():  # deleted but not yet staged as deleted
            continue
        target = destination / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target)
    git("init", "-q", cwd=destination)
    git("add", "-A", cwd=destination)
    git("commit", "-q", "-m", "snapshot of the working tree for a CI replay", cwd=destination)
    return git("rev-parse", "HEAD", cwd=destination)
