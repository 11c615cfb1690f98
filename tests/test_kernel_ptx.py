"""The kernels' PTX for sm_90, compiled on this (CPU) machine by Triton's NVIDIA backend: what the GPU tests cannot
show, because a race they would need to catch is timing-dependent.

A decode kernel launched programmatically (PDL, `PROGRAMMATIC`: after the slot check or whatever the stream ran
before) must not read anything before `griddepcontrol.wait`: every global load of the kernel comes after it; it
then lets the next grid launch (`griddepcontrol.launch_dependents`). The check releases its successor
(`griddepcontrol.launch_dependents`) only with `RELEASE`. The kernels are compiled in a child process without
TRITON_INTERPRET (the test session interprets them, and an interpreted kernel does not compile)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("torch")
pytest.importorskip("triton")

COMPILE = r"""
import json, re, sys
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler.compiler import ASTSource
from gdr_check.kernel import device_guard
from gdr_check.kernel.gdn import fused as gdn
from gdr_check.kernel.kda import fused as kda
from gdr_check.kernel.tiling import TileConfig, guard_constants

POINTERS = {"mixed_qkv": "*bf16", "a": "*bf16", "b": "*bf16", "A_log": "*fp32", "dt_bias": "*fp32", "out": "*bf16",
            "state": "*bf16", "slots": "*i32", "safe_slots": "*i32", "fault_counter": "*i64", "counter": "*i64",
            "fault_records": "*i64", "records": "*i64", "fault_flag": "*i32", "flag": "*i32", "fault_tag_cell": "*i64"}

def ptx(kernel, constants):
    names = kernel.arg_names
    floats = ("scale", "lower_bound")
    signature = {n: "constexpr" if n in constants else POINTERS.get(n, "fp32" if n in floats else "i32") for n in names}
    attrs = {(i,): [["tt.divisibility", 16]] for i, n in enumerate(names) if signature[n].startswith("*")}
    try:
        source = ASTSource(kernel, signature, constexprs={(names.index(k),): v for k, v in constants.items()},
                           attrs=attrs)
    except TypeError:
        print(json.dumps({"skip": "this Triton's ASTSource takes other arguments"}))
        sys.exit(0)
    return triton.compile(source, target=GPUTarget("cuda", 90, 32), options={"num_warps": 1}).asm["ptx"]

def first(text, pattern):
    return next((i for i, line in enumerate(text.splitlines()) if re.search(pattern, line)), None)

profile = type("Profile", (), {"reserved_slot_zero": True})
guard = type("Guard", (), {"max_records": 64})  # what `guard_constants` reads of a GuardLaunch
# any access to global memory: loads, stores, atomics and reductions, asynchronous copies
MEMORY = r"\b(ld|st|atom|red)\.global|\bcp\.async"
result = {}
for variant, kernel in (("gdn", gdn.gdn_packed_decode_kernel), ("kda", kda.kda_packed_decode_kernel)):
    for launch, programmatic in (("programmatic", True), ("plain", False)):
        for guarded, tiling, batch in ((False, TileConfig(16), 512), (True, TileConfig(16), 512),
                                       (True, TileConfig(4, prefetch=False), 1), (False, TileConfig(8, 2), 8)):
            constants = {**tiling.constexprs(128, 128), "H": 4, "HV": 8, "USE_L2NORM": True,
                         "SKIP_AT_OR_BELOW": -1, "PROGRAMMATIC": programmatic,
                         **guard_constants(guard if guarded else None, profile, batch)}
            constants.update({"ROUND_BETA": True} if variant == "gdn" else {"USE_LOWER_BOUND": False})
            text = ptx(kernel, constants)
            result[f"{variant}/{launch}/{guarded}/{tiling.block_v}x{tiling.tiles_per_program}"] = [
                first(text, r"griddepcontrol\.wait"), first(text, MEMORY),
                first(text, r"griddepcontrol\.launch_dependents")]
for release in (True, False):
    text = ptx(device_guard.slot_guard_kernel, {"SKIP_AT_OR_BELOW": -1, "RESERVED_ZERO": True, "SCAN_BLOCK": 1024,
                                                 "SCAN_LOOP": False, "MAX_RECORDS": 64, "RELEASE": release})
    result[f"check/{release}"] = first(text, r"griddepcontrol\.launch_dependents")
print(json.dumps(result))
"""


@pytest.fixture(scope="module")
def lines():
    """Per kernel variant, the PTX line numbers of the grid-dependency instructions and the first global load."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    done = subprocess.run([sys.executable, "-c", COMPILE], capture_output=True, text=True, env=env, timeout=600)
    if done.returncode != 0 and "No module named 'triton.backends.nvidia" in done.stderr:
        pytest.skip("this Triton has no NVIDIA backend")
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    if "skip" in result:
        pytest.skip(result["skip"])
    return result


def test_a_kernel_launched_programmatically_touches_no_memory_before_the_wait_and_releases_the_next_grid(lines):
    programmatic = {key: value for key, value in lines.items() if "/programmatic/" in key}
    assert len(programmatic) == 8  # gdn and kda: unguarded, guarded (scan), one row, two tiles per program
    for key, (wait, access, release) in programmatic.items():
        assert wait is not None and access is not None and wait < access, key
        assert release is not None and wait < release, key


def test_a_kernel_launched_normally_neither_waits_nor_releases(lines):
    plain = {key: value for key, value in lines.items() if "/plain/" in key}
    assert len(plain) == 8
    assert all(wait is None and release is None for wait, _, release in plain.values())


def test_the_check_releases_its_successor_only_with_release(lines):
    assert lines["check/True"] is not None
    assert lines["check/False"] is None
