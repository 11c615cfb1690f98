"""The metadata path never imports torch or triton: `import gdr_check`, building TensorSpecs from shapes, and
checking a call made of TensorSpecs. Each probe runs in a fresh interpreter, so what the test process already
imported does not matter."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import textwrap

import pytest

HEAVY = ("torch", "triton")

METADATA_PATH = """
import gdr_check
from gdr_check import TensorSpec
S = TensorSpec.of
report = gdr_check.check_packed_decode(
    S((8, 8192)), S((8, 32)), S((8, 32)), S((32,), "float32"), S((32,), "float32"), 128 ** -0.5,
    S((9, 32, 128, 128), "float32"), S((8, 1, 32, 128)), S((8,), "int32", values=range(1, 9)), True)
assert report.ok, report.codes()
bad = gdr_check.check_kda_packed_decode(
    S((8, 1, 12288)), S((8, 4096)), S((8, 32)), S((1, 1, 32, 1), "float32"), S((4096,), "float32"), 0.088,
    S((9, 32, 128, 128), "float32"), S((8, 1, 32, 128)), S((8,), "int32"), True)
assert bad.errors[0].code == "GDR201", bad.codes()
try:
    bad.raise_for_errors()
except ValueError:
    pass
spec = TensorSpec.from_dict(TensorSpec.of((4, 4)).to_dict())
gdr_check.RULES
"""


def _modules_after(code: str) -> dict[str, bool]:
    probe = code + textwrap.dedent(f"""
        import json, sys
        print(json.dumps({{name: name in sys.modules for name in {HEAVY!r}}}))
    """)
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_metadata_path_does_not_import_torch_or_triton():
    assert _modules_after(METADATA_PATH) == {"torch": False, "triton": False}


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch is not installed (no kernel extra)")
def test_the_guard_detects_a_heavy_import():
    """Meta-test: the same probe reports torch when the code imports it (so the test above can fail)."""
    assert _modules_after(METADATA_PATH + "\nimport torch\n")["torch"] is True
