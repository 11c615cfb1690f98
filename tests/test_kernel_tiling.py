"""The tiling table and the persisted tuning cache (kernel/tiling.py): no GPU needed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gdr_check.kernel import tiling
from gdr_check.kernel.tiling import (
    TileConfig,
    choose_config,
    guarded_row,
    one_wave_register_cap,
    pick_config,
    record_tuning,
    register_cap,
    resident_programs,
    tuned_config,
)


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "tiling.json"
    monkeypatch.setenv(tiling.TUNING_CACHE_ENV, str(path))
    tiling.reload_tuning_cache()
    yield path
    tiling.reload_tuning_cache()


def record(head_rows: int, config: TileConfig, variant: str = "gdn", device: str = "GPU X", state: int = 4) -> dict:
    return {"variant": variant, "device": device, "K": 128, "V": 128, "state_bytes": state, "head_rows": head_rows,
            "config": config}


def test_tuned_config_is_the_nearest_tuned_size_at_or_below(cache: Path) -> None:
    record_tuning([record(8, TileConfig(2)), record(256, TileConfig(16, evict_first=True)),
                   record(4096, TileConfig(32, num_warps=2))])
    assert tuned_config("gdn", "GPU X", 8, 128, 128, 4) == TileConfig(2)
    assert tuned_config("gdn", "GPU X", 255, 128, 128, 4) == TileConfig(2)
    assert tuned_config("gdn", "GPU X", 256, 128, 128, 4) == TileConfig(16, evict_first=True)
    assert tuned_config("gdn", "GPU X", 10**6, 128, 128, 4) == TileConfig(32, num_warps=2)
    assert tuned_config("gdn", "GPU X", 1, 128, 128, 4) == TileConfig(2)  # below every record: the smallest
    # Other variant, device or state width: not tuned, so the built-in table decides.
    assert tuned_config("kda", "GPU X", 256, 128, 128, 4) is None
    assert tuned_config("gdn", "GPU Y", 256, 128, 128, 4) is None
    assert tuned_config("gdn", "GPU X", 256, 128, 128, 2) is None
    assert choose_config("gdn", "GPU Y", 256, 128, 128, 4) == pick_config(256, 128, 128, 4, "gdn").fitted(128, 128)
    assert choose_config("gdn", "GPU X", 4096, 128, 128, 4) == TileConfig(32, num_warps=2)


def test_records_merge_and_a_later_record_replaces_the_same_key(cache: Path) -> None:
    record_tuning([record(32, TileConfig(4)), record(32, TileConfig(8), variant="kda")])
    record_tuning([record(32, TileConfig(16))])
    assert tuned_config("gdn", "GPU X", 32, 128, 128, 4) == TileConfig(16)
    assert tuned_config("kda", "GPU X", 32, 128, 128, 4) == TileConfig(8)
    assert len(json.loads(cache.read_text())["records"]) == 2


def test_a_damaged_cache_is_ignored_record_by_record(cache: Path) -> None:
    cache.write_text(json.dumps({"records": [
        {"variant": "gdn", "device": "GPU X", "K": 128, "V": 128, "state_bytes": 4, "head_rows": 64,
         "config": {"block_v": 0}},  # invalid: skipped
        {"variant": "gdn"},  # incomplete: skipped
        {"variant": "gdn", "device": "GPU X", "K": 128, "V": 128, "state_bytes": 4, "head_rows": 64,
         "config": {"block_v": 8, "num_warps": 2, "unknown_field": 1}},
    ]}))
    assert tuned_config("gdn", "GPU X", 64, 128, 128, 4) == TileConfig(8, num_warps=2)
    cache.write_text("{not json")
    tiling.reload_tuning_cache()
    assert tuned_config("gdn", "GPU X", 64, 128, 128, 4) is None
    assert choose_config("gdn", "GPU X", 64, 128, 128, 4) == pick_config(64, 128, 128, 4, "gdn").fitted(128, 128)


def test_a_tuned_config_is_fitted_to_the_head(cache: Path) -> None:
    record_tuning([record(8, TileConfig(64, 4, num_warps=2))])
    fitted = choose_config("gdn", "GPU X", 8, 128, 128, 4)
    assert fitted == TileConfig(64, 2, num_warps=2)  # 64 rows x 2 tiles cover V = 128


def test_launch_key_separates_every_constexpr_flag_and_specialization() -> None:
    torch = pytest.importorskip("torch")
    from gdr_check.kernel.tiling import launch_key

    def tensors(**changes: object) -> list:
        base = dict(mixed=torch.zeros(2, 64), a=torch.zeros(2, 4), b=torch.zeros(2, 4), A_log=torch.zeros(4),
                    dt_bias=torch.zeros(4), state=torch.zeros(3, 4, 8, 8), out=torch.zeros(2, 1, 4, 8),
                    indices=torch.zeros(2, dtype=torch.int32))
        base.update(changes)
        return list(base.values())

    key = launch_key("sglang", (True, True), None, None, *tensors())
    assert key == launch_key("sglang", (True, True), None, None, *tensors())
    # KDA's lower bound (second flag) and the L2 norm each select another compiled variant.
    assert key != launch_key("sglang", (True, False), None, None, *tensors())
    assert key != launch_key("sglang", (False, True), None, None, *tensors())
    assert key != launch_key("vllm", (True, True), None, None, *tensors())
    assert key != launch_key("sglang", (True, True), TileConfig(8), None, *tensors())
    # dtype, leading stride and 16-byte alignment are part of Triton's specialization.
    assert key != launch_key("sglang", (True, True), None, None, *tensors(state=torch.zeros(3, 4, 8, 8).half()))
    assert key != launch_key("sglang", (True, True), None, None, *tensors(mixed=torch.zeros(2, 80)[:, :64]))
    misaligned = torch.zeros(2 * 64 + 1)[1:].view(2, 64)
    assert key != launch_key("sglang", (True, True), None, None, *tensors(mixed=misaligned))
    assert launch_key(["unhashable"], (True,), None, None, *tensors()) is None
    # Guarded launches of every call site share one entry: the pool size and the tag (passed as a cell) are not
    # specialized, so they are no part of the key; the guard's presence and its ring size are.
    cells = torch.zeros(8, 2, dtype=torch.int64)

    def guard(tag: int, pool_slots: int, max_records: int = 64) -> tiling.GuardLaunch:
        return tiling.GuardLaunch(torch.zeros(1, dtype=torch.int64), torch.zeros(max_records, 5, dtype=torch.int64),
                                  torch.zeros(1, dtype=torch.int32), max_records, tag, pool_slots, cells[tag, :1])

    guarded = launch_key("sglang", (True, True), None, guard(0, 3), *tensors())
    assert guarded != key and guarded == launch_key("sglang", (True, True), None, guard(5, 17), *tensors())
    assert guarded != launch_key("sglang", (True, True), None, guard(0, 3, max_records=32), *tensors())


def test_the_l2_hints_reach_the_kernels_as_constants():
    # evict_first hints the state's loads and (unless hint_stores is off) its stores; keep_inputs keeps q/k/gate.
    assert {k: v for k, v in TileConfig(16).constexprs(128, 128).items() if k.endswith("EVICTION")} == {
        "STATE_EVICTION": "", "STORE_EVICTION": "", "INPUT_EVICTION": ""}
    assert {k: v for k, v in TileConfig(16, evict_first=True).constexprs(128, 128).items()
            if k.endswith("EVICTION")} == {"STATE_EVICTION": "evict_first", "STORE_EVICTION": "evict_first",
                                           "INPUT_EVICTION": ""}
    hinted = TileConfig(16, evict_first=True, hint_stores=False, keep_inputs=True).constexprs(128, 128)
    assert (hinted["STATE_EVICTION"], hinted["STORE_EVICTION"], hinted["INPUT_EVICTION"]) == (
        "evict_first", "", "evict_last")


def test_the_plain_variant_of_a_guarded_launch_drops_exactly_the_guards_arguments_and_constants():
    # What the guarded variant's register cap is measured on: the same kernel, the same data, no guard.
    guard = tiling.GuardLaunch(counter="counter", records="records", flag="flag", max_records=64, tag=3,
                               pool_slots=9, tag_cell="cell")  # type: ignore[arg-type]  # only passed through
    head = ("mixed_qkv", "a", 0.5, 128)
    args = head + tiling.guard_arguments(guard, 40)
    assert args == head + (9, 40, "counter", "records", "flag", "cell")  # the tag as its cell, not as an int
    profile = type("Profile", (), {"reserved_slot_zero": True})  # sglang's: slot 0 reserved
    constants = {"K": 128, "BV": 16, **tiling.guard_constants(guard, profile, 40)}
    assert (constants["GUARD"], constants["SCAN_BLOCK"], constants["RESERVED_ZERO"]) == (True, 64, True)
    plain_args, plain_constants = tiling.plain_variant(args, constants, profile, 40)
    assert plain_args == head + (0, 40, None, None, None, None)
    assert plain_constants == {"K": 128, "BV": 16, "GUARD": False, "RESERVED_ZERO": True, "SCAN_BLOCK": 0,
                               "SCAN_LOOP": False, "MAX_RECORDS": 1}


@pytest.mark.parametrize(("registers", "warps", "programs"), [
    (40, 1, 32), (64, 1, 32), (72, 1, 28), (128, 1, 16), (168, 1, 12), (255, 1, 8), (128, 4, 4), (64, 8, 4)])
def test_resident_programs_follow_the_register_file(registers, warps, programs):
    # sm_80/sm_90 occupancy: 64K registers per SM in 256-register units per warp, at most 64 warps, 32 programs.
    assert resident_programs(registers, warps) == programs


def test_the_register_cap_keeps_the_plain_variants_residency_and_no_more():
    assert register_cap(40, 1) == 64  # 32 programs (the SM's limit) up to 64 registers
    assert register_cap(122, 1) == 128  # 122 and 128 both take 16 warps' worth of the register file
    assert register_cap(128, 1) == 128
    assert register_cap(168, 1) == 168  # 169 * 32 rounds up to 5632 registers a warp: 11 programs
    assert register_cap(200, 4) == 255


def test_a_launch_smaller_than_the_sms_hold_lifts_ptxas_register_target():
    # An H200 has 132 SMs. One row of Qwen3-Next at tp 1 is 1024 single-warp programs: with a programmatic
    # successor as large, 16 per SM, which hold at up to 128 registers each.
    assert one_wave_register_cap(1024, 1, 132) == 128
    assert one_wave_register_cap(256, 1, 132) == 255  # 4 per SM: anything ptxas likes
    assert one_wave_register_cap(1100, 1, 132) == 120  # 17 per SM: 120 registers hold 17, 128 only 16
    assert one_wave_register_cap(2048, 1, 132) is None  # 32 per SM: every slot, ptxas's own target
    assert one_wave_register_cap(200, 4, 132) == 128  # 4 warps a program: 4 per SM at 128 registers


def test_the_table_lifts_the_register_target_of_its_one_wave_rows_only():
    """The rows measured faster with ptxas's register target lifted (H200, 2026-12-03): GDN up to 16 pairs, and a
    bf16 state at 64 pairs for both kernels; not GDN's fp32 state at 64 pairs, nor KDA up to 16, nor past 64."""
    lifted = {(variant, pairs, itemsize): pick_config(pairs, 128, 128, itemsize, variant).lift_registers
              for variant in ("gdn", "kda") for pairs in (8, 16, 32, 64, 128, 1024) for itemsize in (4, 2)}
    assert sorted(key for key, lift in lifted.items() if lift) == [
        ("gdn", 8, 2), ("gdn", 8, 4), ("gdn", 16, 2), ("gdn", 16, 4), ("gdn", 64, 2), ("kda", 64, 2)]


def test_launch_options_carry_the_register_cap_and_the_programmatic_launch():
    assert TileConfig(16, num_warps=2).launch_options() == {"num_warps": 2, "num_stages": 1}
    assert TileConfig(16, max_registers=96).launch_options(programmatic=True) == {
        "num_warps": 1, "num_stages": 1, "maxnreg": 96, "launch_pdl": True}


def test_a_guarded_launch_requests_a_single_tile_first_and_keeps_pipelined_loops() -> None:
    unguarded = choose_config("gdn", None, 8, 128, 128, 4)
    assert (unguarded.tiles_per_program, unguarded.prefetch) == (1, False)  # the table: the tile after the gates
    assert choose_config("gdn", None, 8, 128, 128, 4, scanned=True) == TileConfig(2, lift_registers=True)
    assert choose_config("kda", None, 16, 128, 128, 4, scanned=True) == TileConfig(4)
    loop = choose_config("gdn", None, 8192, 128, 128, 2)  # two tiles per program, a loop pipelined by Triton
    assert (loop.tiles_per_program, loop.prefetch) == (2, False)
    assert choose_config("gdn", None, 8192, 128, 128, 2, scanned=True) == loop
    prefetched = choose_config("kda", None, 512, 128, 128, 4)
    assert prefetched.prefetch and choose_config("kda", None, 512, 128, 128, 4, scanned=True) == prefetched


def test_only_a_guarded_launch_of_more_than_one_row_runs_the_duplicate_scan() -> None:
    guard = tiling.GuardLaunch(counter=None, records=None, flag=None, max_records=4, tag=1, pool_slots=9,  # type: ignore[arg-type]
                               tag_cell=None)  # type: ignore[arg-type]
    assert [tiling.has_duplicate_scan(guard, batch) for batch in (0, 1, 2, 129)] == [False, False, True, True]
    assert not tiling.has_duplicate_scan(None, 129)


def test_a_decode_launch_is_programmatic_by_default_up_to_the_measured_size_and_only_where_the_device_has_it(
        monkeypatch):
    pytest.importorskip("triton")
    import torch

    from gdr_check.kernel import _triton_common as common

    cuda = torch.device("cuda", 0)
    limit = tiling.PROGRAMMATIC_MAX_PAIRS
    assert limit == 256  # B = 1 and B = 8 at HV <= 32: measured faster (docs/performance-log.md)
    # The interpreter (the CPU test session), a CPU: never, whatever is asked.
    if common.INTERPRETED:
        assert not common.programmatic_launch_supported(cuda)
    assert not common.launches_programmatically(True, 1, torch.device("cpu"))
    monkeypatch.setattr(common, "programmatic_launch_supported", lambda device: True)  # an sm_90 device
    assert [common.launches_programmatically(None, pairs, cuda) for pairs in (1, limit, limit + 1)] == [
        True, True, False]
    assert common.launches_programmatically(True, 10 * limit, cuda)  # asked for (after the slot check)
    assert not common.launches_programmatically(False, 1, cuda)
    monkeypatch.setattr(common, "programmatic_launch_supported", lambda device: False)  # sm_80, ROCm
    assert not common.launches_programmatically(True, 1, cuda) and not common.launches_programmatically(None, 1, cuda)


def test_a_guarded_record_serves_guarded_launches_only(cache: Path) -> None:
    # `decode_vs_sglang.py --tune --guarded` records the checked kernel's own tiling: the guard changes the binary,
    # so its fastest tiling is measured apart and never given to an unguarded launch.
    record_tuning([record(64, TileConfig(4)), {**record(64, TileConfig(8, evict_first=True)), "guarded": True}])
    assert choose_config("gdn", "GPU X", 64, 128, 128, 4) == TileConfig(4)
    assert choose_config("gdn", "GPU X", 64, 128, 128, 4, scanned=True, guarded=True) == TileConfig(8, evict_first=True)
    # used as recorded: the scanned launch's tile-first rule applies to the unguarded choice only
    record_tuning([{**record(64, TileConfig(8, prefetch=False)), "guarded": True}])
    assert choose_config("gdn", "GPU X", 64, 128, 128, 4, scanned=True, guarded=True) == TileConfig(8, prefetch=False)
    assert len(json.loads(cache.read_text())["records"]) == 2  # the guarded record replaced its own key only
    # A guarded launch on a device without a guarded record takes the unguarded choice (tile first where scanned).
    record_tuning([record(16, TileConfig(2, prefetch=False), variant="kda")])
    assert choose_config("kda", "GPU X", 16, 128, 128, 4, scanned=True, guarded=True) == TileConfig(2)
    assert tuned_config("kda", "GPU X", 16, 128, 128, 4, guarded=True) is None


@pytest.mark.parametrize("variant,pairs,itemsize,scanned,expected", [
    # B = 1 (no scan): the single tile after the gates, two rows per program
    ("gdn", 8, 2, False, TileConfig(2, prefetch=False, lift_registers=True)),
    # B = 2 at HV = 8 scans: the tile first, as for every scanning launch
    ("gdn", 16, 2, True, TileConfig(2, lift_registers=True)),
    # 64 pairs with a bf16 state: 8-row tiles under a 96-register cap
    ("gdn", 64, 2, True, TileConfig(8, evict_first=True, max_registers=96)),
    ("kda", 64, 2, True, TileConfig(8, evict_first=True, max_registers=96)),
    # 4096 pairs (B = 128 at HV = 32)
    ("gdn", 4096, 2, True, TileConfig(8, evict_first=True)),
    ("kda", 4096, 2, True, TileConfig(16, evict_first=True)),
])
def test_guarded_launches_take_the_rows_measured_as_guarded_launches(cache: Path, variant: str, pairs: int,
                                                                      itemsize: int, scanned: bool,
                                                                      expected: TileConfig) -> None:
    assert choose_config(variant, "GPU X", pairs, 128, 128, itemsize, scanned, guarded=True) == expected
    assert choose_config(variant, "GPU X", pairs, 128, 128, itemsize) == pick_config(pairs, 128, 128, itemsize, variant)


@pytest.mark.parametrize("itemsize", [4, 2])
def test_kda_up_to_16_pairs_has_no_guarded_row(cache: Path, itemsize: int) -> None:
    # The tune's 2-row tile lost to the table's 4 rows as a decode step (`tiling._GUARDED_ROWS`' comment).
    for pairs in (8, 16):
        assert guarded_row(pairs, 128, 128, itemsize, "kda") is None
    table = pick_config(8, 128, 128, itemsize, "kda")
    assert table.block_v == 4
    assert choose_config("kda", "GPU X", 8, 128, 128, itemsize, False, guarded=True) == table  # one row: no scan


def test_without_a_guarded_row_a_guarded_launch_takes_the_table_s_row_tile_first(cache: Path) -> None:
    table = pick_config(64, 128, 128, 4, "gdn")  # fp32 at 64 pairs: no guarded row (nothing measured faster)
    assert table == TileConfig(4, prefetch=False)
    assert choose_config("gdn", "GPU X", 64, 128, 128, 4, True, guarded=True) == TileConfig(4)
    # A device tuned for unguarded launches: its record, not the built-in guarded row (measured against the table)
    record_tuning([record(64, TileConfig(16), state=2)])
    assert choose_config("gdn", "GPU X", 64, 128, 128, 2, True, guarded=True) == TileConfig(16)
