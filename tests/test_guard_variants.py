"""benchmarks/guard_variants.py: every variant still applies to the package's source, and a copy imports under
its own name (the experiment behind the checked kernel's figures in docs/performance-log.md stays runnable)."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("triton")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
guard_variants = importlib.import_module("guard_variants")

from gdr_check.kernel._triton_common import INTERPRETED  # noqa: E402
from kernel_helpers import DEVICE, make_call  # noqa: E402


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> tuple[list[str], Path]:
    """Every variant's copy, built once for the module (52 package copies: seconds)."""
    folder = tmp_path_factory.mktemp("variants")
    return guard_variants.build(sorted(guard_variants.VARIANTS), None, folder), folder


def test_every_variant_applies_and_imports_as_its_own_package(built, monkeypatch):
    names, folder = built
    assert names == sorted(guard_variants.VARIANTS)
    monkeypatch.syspath_prepend(str(folder))
    copy = importlib.import_module("gdr_check_no_record.kernel.gdn.fused")
    assert copy.__file__.startswith(str(folder))
    source = (folder / "gdr_check_no_record" / "kernel" / "gdn" / "fused.py").read_text(encoding="utf-8")
    assert "        if False:\n          record_fault(fault_counter" in source
    # The copy's modules import each other, not the package they were copied from.
    checked = importlib.import_module("gdr_check_no_record.kernel.gdn.checked")
    assert checked.checked_launch.__module__ == "gdr_check_no_record.kernel.device_guard"
    assert checked.launch_packed_decode.__module__ == "gdr_check_no_record.kernel.gdn.fused"
    # A variant made by a function of the source: the record's body moved, as written, into a called function.
    common = (folder / "gdr_check_record_out_of_line" / "kernel" / "_triton_common.py").read_text(encoding="utf-8")
    body_at = common.index("@triton.jit(noinline=True)\ndef _record_body(")
    out_of_line = common[body_at:common.index("def record_fault(")]
    assert "    index = tl.atomic_add(counter, 1)\n" in out_of_line and "    tl.store(flag, 1)\n" in out_of_line
    assert common[common.index("def record_fault("):].split("\n\n\n")[0].endswith(
        "    if fault != 0:\n        _record_body(counter, records, flag, fault, i_n, slot, tag, slots, stride_index, "
        "MAX_RECORDS, SCAN_BLOCK, TAG_IN_CELL)")


def test_a_replacement_that_no_longer_matches_names_its_variant(tmp_path, monkeypatch):
    monkeypatch.setitem(guard_variants.VARIANTS, "stale", [("kernel/gdn/fused.py", "no such line", "")])
    with pytest.raises(SystemExit,
                       match=r"^variant gdr_check_stale: its replacement no longer matches kernel/gdn/fused\.py$"):
        guard_variants.build(["stale"], None, tmp_path)


@pytest.mark.skipif(not INTERPRETED, reason="runs the variants' kernels in Triton's CPU interpreter")
def test_every_variant_runs_a_faulty_call_through_its_guarded_kernels(built, monkeypatch):
    # A variant that patches the fault record's branch only fails when a fault takes that branch (a name the
    # kernel no longer has, an argument list that changed): every variant runs a call with an out-of-range slot,
    # GDN and KDA, through the checked kernels.
    names, folder = built
    monkeypatch.syspath_prepend(str(folder))
    for name in names:
        checked = importlib.import_module(f"gdr_check_{name}.kernel.ops")
        faults = importlib.import_module(f"gdr_check_{name}.kernel.device_guard")
        for kda in (False, True):
            # two rows of one head, the second past the pool: the interpreter runs each program in Python, so the
            # smallest faulty call keeps the 104 runs short
            call = make_call(B=2, H=1, HV=1, K=8, V=8, slots=[1, 7], pool_slots=4, kda=kda, seed=5)
            run = checked.kda_packed_decode if kda else checked.packed_decode
            buffer = faults.FaultBuffer(DEVICE)
            run(*call.args(), context="engine", faults=buffer, label=f"{name} layer")
            assert int(buffer.counter[0]) in (0, 1), name  # (variants without a record count none)
