"""benchmarks/ncu_points.py: its points parse as documented and its ncu reading keeps each point's launches in
the order the child makes them (ours, sglang's, the slot copy), refusing a profile that does not match."""

from __future__ import annotations

import csv
import importlib
import io
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
ncu_points = importlib.import_module("ncu_points")

KERNELS = ("gdn_packed_decode_kernel", "fused_recurrent_gated_delta_rule_packed_decode_kernel", "_slot_copy_kernel")


def test_points_parse_and_bad_ones_are_named():
    assert ncu_points.parse_points(["gdn:4:8:bf16:1", "kda:32:32:fp32:512"]) == (
        ("gdn", 4, 8, "bf16", 1), ("kda", 32, 32, "fp32", 512))
    assert ncu_points.parse_points(None) == ncu_points.POINTS
    for bad in ("gdn:3:8:fp32:1", "gdn:4:8:fp32", "mamba:4:8:fp32:1", "gdn:4:8:fp16:1", "gdn:4:8:fp32:0",
                "gdn:4:8:fp32:1:2", "gdn:four:8:fp32:1"):
        with pytest.raises(ValueError, match=f"^{bad!r} is not VARIANT:H:HV:STATE:B"):
            ncu_points.parse_points([bad])


def fake_ncu(monkeypatch, kernels, returncode=0, raw=False):
    """ncu's CSV for launches of `kernels` in order: the metrics page (a row per metric) or the raw page (a row
    per launch after a units row), every field quoted as ncu writes them."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, quoting=csv.QUOTE_ALL)
    if raw:
        writer.writerow(["ID", "Kernel Name", "smsp__average_warps_issue_stalled_wait_per_issue_active.ratio"])
        writer.writerow(["", "", "ratio"])
        writer.writerows([str(i), name, f"{i}.5"] for i, name in enumerate(kernels))
    else:
        writer.writerow(["ID", "Kernel Name", "Metric Name", "Metric Value"])
        writer.writerows([str(i), name, "dram__bytes_read.sum", f"{i},000"] for i, name in enumerate(kernels))
    done = subprocess.CompletedProcess([], returncode, "==PROF== profiling\n" + buffer.getvalue(), "")
    monkeypatch.setattr(ncu_points.subprocess, "run", lambda *args, **kwargs: done)


@pytest.mark.parametrize("raw", [False, True], ids=["metrics", "raw"])
def test_the_kept_launches_are_the_second_of_each_kernel_per_point(monkeypatch, raw):
    fake_ncu(monkeypatch, KERNELS * 4, raw=raw)  # two points: warm-up, kept, warm-up, kept
    rows = ncu_points.profile(ncu_points.POINTS[:2], [])
    assert [row["kernel"] for row in rows] == list(KERNELS) * 2
    key = "smsp__average_warps_issue_stalled_wait_per_issue_active.ratio" if raw else "dram__bytes_read.sum"
    assert [row[key] for row in rows] == (["3.5", "4.5", "5.5", "9.5", "10.5", "11.5"] if raw else
                                          ["3000", "4000", "5000", "9000", "10000", "11000"])


@pytest.mark.parametrize("kernels, returncode", [(KERNELS * 3, 0), (KERNELS * 4, 1),
                                                 (KERNELS * 3 + KERNELS[::-1], 0)],
                         ids=["a launch short", "ncu failed", "out of order"])
def test_a_profile_that_does_not_match_the_points_is_refused(monkeypatch, capsys, kernels, returncode):
    fake_ncu(monkeypatch, kernels, returncode)
    assert ncu_points.profile(ncu_points.POINTS[:2], []) is None
    assert capsys.readouterr().err.startswith("error: ")


def test_with_the_checked_kernel_each_point_keeps_four_launches_in_order(monkeypatch, capsys):
    checked = (KERNELS[0], KERNELS[0], *KERNELS[1:])  # ours, the checked kernel (same kernel), sglang's, the copy
    fake_ncu(monkeypatch, checked * 4)
    rows = ncu_points.profile(ncu_points.POINTS[:2], [], checked=True)
    assert [row["dram__bytes_read.sum"] for row in rows] == ["4000", "5000", "6000", "7000",
                                                             "12000", "13000", "14000", "15000"]
    fake_ncu(monkeypatch, KERNELS * 4)  # three launches a point: not what --checked launches
    assert ncu_points.profile(ncu_points.POINTS[:2], [], checked=True) is None
    assert capsys.readouterr().err.startswith("error: ncu exited with 0 after 12 profiled launches; expected 16")
