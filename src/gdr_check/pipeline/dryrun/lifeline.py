"""A dry-run's child processes die with the process that started them.

Ctrl-C and SIGTERM reach the parent, which kills its children on the way out (`launch.run_child`,
`ranks.run_ranks`); a parent killed outright (SIGKILL, the out-of-memory killer) runs no cleanup, so each child
also asks the kernel for a SIGKILL when its parent dies (Linux's parent-death signal), and exits at once when the
parent that started it is already gone. Imports nothing heavy: it runs before the child imports torch.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys

PARENT_ENV = "GDR_CHECK_DRYRUN_PARENT"  # the pid of the process that started the child
_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
ORPHANED_EXIT = 128 + signal.SIGKILL  # as if the parent-death signal had come


def parent_environment() -> dict[str, str]:
    """What a child's environment carries for `die_with_parent`."""
    return {PARENT_ENV: str(os.getpid())}


def die_with_parent() -> None:
    """In the child, first thing: SIGKILL when the parent dies; exit now if it already has (it died between the
    fork and this call, and the signal would never come)."""
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        except (OSError, AttributeError):  # no libc symbol: the parent's own cleanup still applies
            pass
    expected = os.environ.get(PARENT_ENV, "")
    if expected.isdigit() and os.getppid() != int(expected):
        os._exit(ORPHANED_EXIT)
