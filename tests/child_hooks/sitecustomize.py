"""Imported by Python at start-up in the processes the fault tests start (tests/child_faults.py puts this folder
first on PYTHONPATH): a dry-run child or rank worker with a fault variable set gets its fault. Tests only."""

import importlib.machinery
import importlib.util
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.append(os.path.dirname(HERE))  # tests/, for child_faults (last: it shadows nothing)

import child_faults  # noqa: E402 - found on the path just added

child_faults.install()

# The environment's own sitecustomize, which this one shadows, still runs.
_other = importlib.machinery.PathFinder.find_spec(
    "sitecustomize", [path for path in sys.path if os.path.abspath(path or os.curdir) != HERE])
if _other is not None and _other.loader is not None:
    _other.loader.exec_module(importlib.util.module_from_spec(_other))
