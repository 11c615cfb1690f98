"""Test-wide settings.

Kernel tests run Triton kernels on the CPU through its interpreter, which must be enabled before triton is
imported; GDR_CHECK_TEST_GPU=1 runs them on a real GPU instead.
"""

import os
import sys

import pytest

import interpreter_shortcuts

if not os.environ.get("GDR_CHECK_TEST_GPU"):
    os.environ.setdefault("TRITON_INTERPRET", "1")


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """Once triton's interpreter is imported (by a test module, or by an earlier test), its shortcuts are installed
    (tests/interpreter_shortcuts.py)."""
    if "triton.runtime.interpreter" in sys.modules:
        interpreter_shortcuts.install()
