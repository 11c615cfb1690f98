"""benchmarks/slot_placement.py: its four kernels touch exactly the slots the placement names (the experiment
behind the copy-floor analysis in docs/performance-log.md measures what it says it measures)."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("triton")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
slot_placement = importlib.import_module("slot_placement")
bench = importlib.import_module("decode_vs_sglang")


@pytest.mark.parametrize("pool_rows", [64, 1024, 1 << 15])
def test_the_scatter_is_a_permutation_that_breaks_up_neighbours(pool_rows):
    scattered = slot_placement.scatter(torch.arange(pool_rows), pool_rows)
    assert sorted(scattered.tolist()) == list(range(pool_rows))  # disjoint sets, the pool covered once
    adjacent = ((scattered[1:] - scattered[:-1]).abs() == 1).sum().item()
    assert adjacent < pool_rows // 16  # consecutive rows land apart, unlike the contiguous placement


@pytest.mark.parametrize("rows_fastest", [False, True])
@pytest.mark.parametrize("scattered", [False, True])
@pytest.mark.parametrize("load", [True, False])
def test_each_kernel_rewrites_exactly_the_slots_of_its_placement(monkeypatch, scattered, load, rows_fastest):
    monkeypatch.setattr(bench, "DEVICE", "cpu")
    sets, B, pool_rows, row_elems = 4, 8, 32, 16
    tables = slot_placement.slot_table(sets, B, pool_rows, scattered)
    assert len({slot for table in tables for slot in table.tolist()}) == sets * B
    assert all(1 <= slot <= pool_rows for table in tables for slot in table.tolist())  # slot 0 never touched
    pool = torch.ones(pool_rows + 1, row_elems)
    for number, table in enumerate(tables):
        # one = 2.0 instead of the benchmark's 1.0, so that the rows written are visible
        slot_placement._rmw_kernel[(2 * B,)](pool, table, 2.0, pool.stride(0), row_elems, number * B, pool_rows,
                                         pool_rows.bit_length() // 2, B, BLOCK=row_elems // 2, LOAD=load,
                                         SCATTERED=scattered, ROWS_FASTEST=rows_fastest)
    written = sorted((pool[:, 0] == 2.0).nonzero().flatten().tolist())
    assert written == sorted(slot for table in tables for slot in table.tolist())
    assert bool((pool[pool[:, 0] == 2.0] == 2.0).all()) and bool((pool[pool[:, 0] != 2.0] == 1.0).all())
    if not scattered:
        assert tables[1].tolist() == list(range(B + 1, 2 * B + 1))
