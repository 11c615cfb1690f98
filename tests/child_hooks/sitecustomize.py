"""Imported by Python at start-up in the processes the fault tests start (tests/child_faults.py puts this folder
first on PYTHONPATH): a dry-run child or rank worker with a fault variable set gets its fault. Tests only."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/, for child_faults

import child_faults

child_faults.install()
