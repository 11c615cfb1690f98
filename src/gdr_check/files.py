"""File facts shared by the readers (sources/) and the writers (capture, the CLI's report writer), kept in a
module that imports nothing of the package, so that `import gdr_check.capture` inside an engine stays small."""

from __future__ import annotations

import os
import stat

# The `kind` a recording of kernel calls declares (`gdr_check.capture()`, recording.py): JSON like a model's
# config.json, which the readers must tell apart.
RECORDING_KIND = "gdr-check-capture"


def new_file_mode(existing: os.stat_result | None) -> int:
    """The mode of a file written atomically (a temporary file, renamed) where `existing` was: its mode, else what
    the umask leaves of 0o666, as `open` would give (`tempfile.mkstemp` makes 0600)."""
    if existing is not None:
        return stat.S_IMODE(existing.st_mode)
    return 0o666 & ~_umask()


def _umask() -> int:
    """The process's umask, read without setting it where Linux tells it (`os.umask` sets and restores, a window in
    which another thread of an engine would create files with the wrong mode)."""
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0)
    os.umask(mask)
    return mask
