"""Test-wide settings.

Kernel tests run Triton kernels on the CPU through its interpreter, which must be enabled before triton is
imported; GDR_CHECK_TEST_GPU=1 runs them on a real GPU instead.
"""

import os

if not os.environ.get("GDR_CHECK_TEST_GPU"):
    os.environ.setdefault("TRITON_INTERPRET", "1")
