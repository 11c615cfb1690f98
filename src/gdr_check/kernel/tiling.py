"""How the decode kernels cut the work into programs (no torch/triton here, so the table is cheap to read).

A program owns one (row n, value head j) pair and ``block_v * tiles_per_program`` rows of that head's
[V, K] state, looping over ``tiles_per_program`` tiles of [block_v, next_pow2(K)]. The launch is a 1-D grid
of ``cdiv(V, block_v * tiles_per_program) * B * HV`` programs, so B has no 65535 limit (2**31 - 1 programs).
"""

from __future__ import annotations

import functools
import json
import os
import tempfile
from dataclasses import asdict, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..base.records import dataclass
from .layout import next_power_of_2

if TYPE_CHECKING:
    import torch

# Keep the fp32 state tile at or under this many elements per thread: the tile lives in registers, and
# past ~128 per thread ptxas spills (the reference kernel spills from K = 256 on with one warp).
MAX_TILE_ELEMENTS_PER_THREAD = 128
MAX_PROGRAMS = 2**31 - 1  # CUDA's limit on grid dimension 0
# Up to this many (row, value head) pairs a decode launch is programmatic by default (PDL, where the device has it:
# its launch overlaps the previous grid's end). Measured on an H200 against the plain launch (graph replay,
# 2026-12-02, docs/performance-log.md): B = 1 1.16-1.35x faster, B = 8 (64-256 pairs) 1.07-1.13x; from 1024 pairs
# no gain, and 5 % slower at GDN HV = 8 bf16 B = 128.
PROGRAMMATIC_MAX_PAIRS = 256


@dataclass(frozen=True)
class TileConfig:
    block_v: int
    tiles_per_program: int = 1
    num_warps: int = 1
    num_stages: int = 1
    # Load and store the state with an evict-first L2 policy: it is streamed once, while q/k rows and
    # the slot indices are shared between programs.
    evict_first: bool = False
    # With several tiles per program, issue tile t+1's load before tile t's store (see gdn.py).
    prefetch: bool = True
    # Register cap per thread (ptxas maxnreg): more resident warps, so more state bytes in flight.
    max_registers: int | None = None
    # Software-pipeline depth of the tile loop (Triton's loop pipeliner): above 1, the state tiles of the next
    # iterations are copied into shared memory asynchronously (cp.async) while this one computes, so a
    # program keeps several tiles in flight without holding them in registers. 1: no pipelining.
    loop_stages: int = 1
    # With evict_first, the state stores carry the hint too (False: the loads only, as sglang's Helion bf16 KDA
    # configuration hints them).
    hint_stores: bool = True
    # Load q, k (and KDA's gate row) with an evict-last L2 policy: every V block of a head, and every value head
    # of a key head, reads the same ones.
    keep_inputs: bool = False
    # A launch so small that it and a programmatic successor fit in one wave lifts ptxas's register target to what
    # one wave allows (`one_wave_register_cap`), as guarded launches do; larger launches keep ptxas's own target.
    lift_registers: bool = False

    def constexprs(self, K: int, V: int) -> dict[str, Any]:
        """The decode kernels' tiling constants for a [V, K] state (both kernels take the same ones)."""
        state_eviction = "evict_first" if self.evict_first else ""
        return {"K": K, "V": V, "BK": next_power_of_2(K), "BV": self.block_v, "TILES": self.tiles_per_program,
                "STATE_EVICTION": state_eviction, "STORE_EVICTION": state_eviction if self.hint_stores else "",
                "INPUT_EVICTION": "evict_last" if self.keep_inputs else "", "PREFETCH": self.prefetch,
                "LOOP_STAGES": self.loop_stages}

    def launch_options(self, programmatic: bool = False) -> dict[str, int]:
        """Triton's launch options for this tiling; `programmatic`: launched after the previous grid with
        programmatic dependent launch (the kernel waits for that grid's writes itself, PROGRAMMATIC)."""
        options = {"num_warps": self.num_warps, "num_stages": self.num_stages}
        if self.max_registers is not None:
            options["maxnreg"] = self.max_registers
        if programmatic:
            options["launch_pdl"] = True
        return options

    def fitted(self, V: int, K: int) -> TileConfig:
        """This config with block_v clamped to the head (V) and to the register budget (K)."""
        budget_rows = max(1, MAX_TILE_ELEMENTS_PER_THREAD * 32 * self.num_warps // next_power_of_2(K))
        register_cap = 1 << (budget_rows.bit_length() - 1)  # largest power of two within the budget
        block_v = max(1, min(self.block_v, next_power_of_2(V), register_cap))
        tiles = max(1, min(self.tiles_per_program, -(-V // block_v)))
        return replace(self, block_v=block_v, tiles_per_program=tiles)

    def programs_per_head(self, V: int) -> int:
        return -(-V // (self.block_v * self.tiles_per_program))

    def grid(self, B: int, HV: int, V: int) -> tuple[int]:
        """The 1-D launch grid; program ids are int32, which is the only bound on B."""
        programs = self.programs_per_head(V) * B * HV
        if programs > MAX_PROGRAMS:
            raise ValueError(f"the launch needs {programs} programs, more than {MAX_PROGRAMS}: split the batch")
        return (programs,)


# The register file's limits per SM on sm_80 and sm_90: 64K registers, allocated per warp in units of 256;
# at most 64 warps and 32 programs.
_SM_REGISTERS, _REGISTER_UNIT, _SM_WARPS, _SM_PROGRAMS = 65536, 256, 64, 32


def resident_programs(registers: int, num_warps: int) -> int:
    """Programs of `num_warps` warps one SM holds at `registers` per thread, as far as registers limit it."""
    per_warp = -(-registers * 32 // _REGISTER_UNIT) * _REGISTER_UNIT
    return max(0, min(_SM_PROGRAMS, _SM_WARPS // num_warps, _SM_REGISTERS // (per_warp * num_warps)))


def one_wave_register_cap(programs: int, num_warps: int, multiprocessors: int) -> int | None:
    """The register cap (ptxas maxnreg) for a launch of `programs` programs so small that it and a programmatic
    successor as large are resident at once on `multiprocessors` SMs however many registers each takes up to the
    cap; None where the SMs need every program slot (the cap would be full residency's count).

    Without a cap ptxas keeps a program within full residency's count (64 registers for one warp on sm_90), and
    where the guard's live values push a kernel past it ptxas issues the state's loads in two groups, the second
    after the q/k loads have returned: a whole memory latency on every row at small B (the guarded GDN kernel at
    Qwen3-Next tp 1, B = 1: 4 of its 16 loads early; under a cap of 80 or more it takes 72 registers and issues
    all 16 together, as the unguarded kernel does at 64). With fewer programs than the SMs hold, the count costs
    nothing, so such launches lift ptxas's target rather than lose the latency."""
    needed = -(-2 * programs // max(1, multiprocessors))  # programs per SM, this launch and its successor
    if needed >= resident_programs(1, num_warps):
        return None
    return next(cap for cap in range(255, 0, -1) if resident_programs(cap, num_warps) >= needed)


def register_cap(plain_registers: int, num_warps: int) -> int:
    """The most registers per thread (at most 255, ptxas's limit) that hold as many programs per SM as
    `plain_registers` do: the cap that costs a guarded variant no residency."""
    target = resident_programs(plain_registers, num_warps)
    return next(cap for cap in range(255, plain_registers - 1, -1) if resident_programs(cap, num_warps) >= target)


# Chosen on an H200 (torch 2.11, triton 3.6) by `benchmarks/decode_vs_sglang.py --tune` (2026-12-01), K = V =
# 128, bf16 activations, cold L2, over the Qwen3-Next, Qwen3.5-397B and Kimi-Linear geometries per TP rank.
# Keyed by the number of (row, value head) pairs B*HV, i.e. how much independent work the launch has: few
# pairs want many tiny programs (latency), many pairs want 8-16 rows per warp (bandwidth). Rows: (upper bound
# on B*HV, fp32-state config, 2-byte-state config). Up to 8192 pairs KDA's bf16 state keeps one 16-row tile
# per program where GDN's pipelines two: its per-column decay makes the two-tile loop slower than sglang's
# (measured 0.92-0.95x); past 8192 pairs it takes the loop pipelined through shared memory (see its row).
_E = True
#
# Up to 128 pairs most tilings load their single state tile after the gate arithmetic (prefetch=False): 2.0-2.6 %
# faster at B = 1 with an fp32 state and at B = 8 with bf16, 1.8 % at Qwen3-Next tp 1 bf16 B = 1, no faster at
# HV = 8 bf16 B = 1, which stays prefetched (H200, 2026-12-01, `guard_variants.py --ours`, 7 interleaved rounds:
# docs/data/tuning/small_b_kernel_variants.json). A scheduling barrier that kept the early load ahead of
# everything else was 0.8-8.9 % slower, and four warps per program 11-30 % slower.
#
# One-wave launches (few pairs) lift ptxas's register target (lift_registers), as guarded launches do
# (`one_wave_register_cap`: 255 registers at 8 pairs of 2-row tiles, 128 at 64 pairs of 8-row ones, K = V = 128):
# without it ptxas holds a program to full residency's 64 registers, which these launches cannot use. H200,
# 2026-12-03, `decode_vs_sglang.py --tune` with 5 interleaved rounds at HV = 8, the target set by hand (r255 at up
# to 16 pairs, r128 at 64; docs/data/tuning/small_b_register_target.json):
# GDN at up to 16 pairs 1.78 / 1.67 against 1.92 / 1.76 us (Qwen3-Next tp 4, B = 1, fp32 / bf16; B = 2: 2.04 / 1.84
# against 2.17 / 1.95); GDN bf16 at 64 pairs 2.78 against 2.94 us (B = 8); KDA bf16 at 64 pairs, its tile first,
# 2.78 against 2.95 us. Not taken: GDN fp32 at 64 pairs (3.69 against 3.87 at tp 4 but 3.75 against 3.76 at
# Qwen3.5 tp 8), KDA at up to 16 pairs (1-4 % slower with the lifted target at B = 1), HV = 32 at B = 1 (no gain).
_GDN_TABLE: tuple[tuple[int, TileConfig, TileConfig], ...] = (
    (16, TileConfig(2, prefetch=False, lift_registers=True), TileConfig(2, lift_registers=True)),
    (32, TileConfig(4, prefetch=False), TileConfig(4, prefetch=False)),
    # bf16 up to 128 pairs in 8-row tiles: 3.20 / 3.24 against 3.49 / 3.51 us for 16 rows (Qwen3-Next tp 4 /
    # Qwen3.5 tp 8, B = 8; --tune at 18:42 with 5 interleaved rounds, docs/data/tuning/b8_b32_1842.json), and at
    # 257-2048 pairs too: 19.45 against 20.23 us (Qwen3-Next tp 1, B = 32).
    (64, TileConfig(4, prefetch=False), TileConfig(8, evict_first=_E, prefetch=False, lift_registers=True)),
    (128, TileConfig(4, prefetch=False), TileConfig(8, evict_first=_E, prefetch=False)),
    (256, TileConfig(16, evict_first=_E), TileConfig(16, evict_first=_E)),
    (2048, TileConfig(8, evict_first=_E), TileConfig(8, evict_first=_E, prefetch=False)),
    (4096, TileConfig(16), TileConfig(16, evict_first=_E)),
    (8192, TileConfig(16), TileConfig(16, 2, num_stages=2, evict_first=_E, prefetch=False)),
    # Past 8192 pairs a bf16 state's q and k are kept in L2 (evict-last): 275.5 / 550.8 against 278.0 / 553.6 us
    # without, Qwen3-Next tp 1, B = 512 / 1024 (H200, 2026-12-01, --tune with 5 interleaved rounds).
    (1 << 62, TileConfig(16), TileConfig(16, 2, num_stages=2, prefetch=False, keep_inputs=True)),
)
_KDA_TABLE: tuple[tuple[int, TileConfig, TileConfig], ...] = (
    # At B*HV <= 16 the first tile is loaded after the gate arithmetic (prefetch=False with one tile): 2.26
    # against 2.62 us for Kimi-Linear tp=4 at B = 1 with an fp32 state. (Two rows per program measured 2.39 /
    # 2.33 against 2.45 / 2.39 us in the small-batch A/B, fp32 / bf16, but 2.40 / 2.38 in the 18:56 run against
    # 2.41 / 2.38 with four rows at 17:25, and the guarded kernel took 4-6 % longer with them: four rows stay.)
    # At 32 pairs the fp32 state's first tile late too: 3.26 against 3.34 us (Kimi-Linear tp 1, B = 1).
    (16, TileConfig(4, prefetch=False), TileConfig(4)),
    (32, TileConfig(4, prefetch=False), TileConfig(4)),
    # KDA reads a K-wide gate row per (row, value head) besides q and k: every V block of the head reads them,
    # so keeping them in L2 (keep_inputs: evict-last) pays where blocks are many. Figures below: H200,
    # 2026-12-01, `decode_vs_sglang.py --tune` with 5 interleaved rounds, against sglang's Helion path (its
    # fastest for KDA) in the same run.
    # 4.67 / 4.73 us, Kimi tp 4 B = 8; bf16's tile loaded after the gates: 3.32 against 3.40 us (small-batch A/B),
    # and at up to 64 pairs, under the one-wave register target (see _GDN_TABLE), first: 2.78 against 2.95 us.
    (64, TileConfig(4, keep_inputs=True), TileConfig(8, evict_first=_E, lift_registers=True)),
    (128, TileConfig(4, keep_inputs=True), TileConfig(8, evict_first=_E, prefetch=False)),
    # fp32 at 129-256 pairs with its tile loaded after the gates: 10.28 / 10.33 against 10.46 / 10.53 us (Kimi
    # tp 1 B = 8 / tp 4 B = 32, the 18:42 sweep)
    (256, TileConfig(16, evict_first=_E, prefetch=False), TileConfig(16, evict_first=_E)),
    (2048, TileConfig(8, evict_first=_E), TileConfig(16, evict_first=_E)),
    # A bf16 state without the evict-first hint from 2048 pairs: 74.9 against 76.4 us (Kimi-Linear tp 4,
    # B = 512; Helion 75.7) and 72.9 against 73.4 us (tp 1, B = 128).
    (4096, TileConfig(16), TileConfig(16)),
    # At 8192 pairs the software-pipelined loop tied one 16-row tile in the sweep (151.9 against 152.3 us,
    # Kimi-Linear tp 4, B = 1024) and came out 1.4 % behind sglang in the final run: the single tile stays.
    # fp32 keeps its inputs: 273.2 against 275.8 us (tp 4, B = 1024).
    (8192, TileConfig(16, keep_inputs=True), TileConfig(16)),
    # Past 8192 pairs: fp32 keeps its inputs (536.1 / 1061.2 against 537.7 / 1070.5 us at Kimi-Linear tp 1,
    # B = 512 / 1024); a bf16 state streams through the software-pipelined loop (8 tiles per program, 3 stages
    # in shared memory), the evict-first hint on its loads only (as sglang's Helion bf16 configuration), inputs
    # kept: 284.7 / 563.6 against 288.6 / 568.8 us for the loop with neither hint (Helion 285.7 / 573.9 us).
    (1 << 62, TileConfig(16, keep_inputs=True),
     TileConfig(16, 8, prefetch=False, loop_stages=3, evict_first=_E, hint_stores=False, keep_inputs=True)),
)
_TABLES = {"gdn": _GDN_TABLE, "kda": _KDA_TABLE}

# Guarded launches (the device guard in the kernel: the checked kernel at up to 128 rows) whose fastest tiling is not
# the table's row, keyed by (variant, the table row's bound, 2-byte state). The guard changes the binary ptxas
# schedules, and at these latency-bound sizes schedules differ by up to 10 % (docs/performance-log.md), so these were
# measured as guarded launches: H200, 2026-12-03, `decode_vs_sglang.py --tune --guarded` with 5 interleaved rounds,
# against the table's row as the guarded launch runs it (its single tile first where it scans):
# - up to 16 pairs, GDN bf16, its single tile after the gates (B = 1, HV = 8: no scan; a launch that scans still takes
#   its tile first): 1.70 against 1.79 us;
# - 64 pairs of 8-row tiles under a 96-register cap (21 resident programs per SM, not the one-wave 128): KDA bf16
#   2.96 against 3.14 us (Kimi-Linear tp 4, B = 8) and 2.83 against 3.05 (tp 1, B = 2); GDN bf16 2.84 against 2.88
#   (Qwen3-Next tp 4, B = 8) and 2.73 against 2.78 (tp 1, B = 2);
# - 4096 pairs (B = 128, HV = 32): GDN bf16 in 8-row tiles, 71.8 against 76.7 us; KDA bf16 with the evict-first
#   hint, 75.0 against 76.3.
# Where no row is given the table's stands: no candidate was faster (GDN and KDA fp32 at 64 pairs, bf16 at 256
# pairs, KDA bf16 at 1024). KDA up to 16 pairs has none either: the tune's 2-row tile (1.79 against 1.84 us fp32, 1.80
# against 1.83 bf16) lost to the table's 4 rows as a 16-layer decode step in two same-process A/Bs (7 and 9 rounds,
# Kimi-Linear tp 4, B = 1: checked / unchecked 1.020 and 0.982 against 0.936 and 0.937 fp32, 1.046 and 1.080 against
# 1.030 and 1.032 bf16), while gaining at most 1.7 points cold; an engine decodes in steps.
_GUARDED_ROWS: dict[tuple[str, int, bool], TileConfig] = {
    ("gdn", 16, True): TileConfig(2, prefetch=False, lift_registers=True),
    ("gdn", 64, True): TileConfig(8, evict_first=_E, max_registers=96),
    ("kda", 64, True): TileConfig(8, evict_first=_E, max_registers=96),
    ("gdn", 4096, True): TileConfig(8, evict_first=_E),
    ("kda", 4096, True): TileConfig(16, evict_first=_E),
}


def _table_row(head_rows: int, variant: str) -> tuple[int, TileConfig, TileConfig]:
    for row in _TABLES.get(variant, _GDN_TABLE):
        if head_rows <= row[0]:
            return row
    raise AssertionError("unreachable: the last bound is unbounded")


@functools.lru_cache(maxsize=1024)
def pick_config(head_rows: int, V: int, K: int, state_itemsize: int, variant: str = "gdn") -> TileConfig:
    """The tiling for a launch of ``variant`` ("gdn" or "kda") with ``head_rows`` = B*HV (row, value head) pairs."""
    _, fp32_config, narrow_config = _table_row(head_rows, variant)
    return (fp32_config if state_itemsize >= 4 else narrow_config).fitted(V, K)


def guarded_row(head_rows: int, V: int, K: int, state_itemsize: int, variant: str = "gdn") -> TileConfig | None:
    """The built-in tiling of a guarded launch where it differs from the table's (`_GUARDED_ROWS`), else None."""
    config = _GUARDED_ROWS.get((variant, _table_row(head_rows, variant)[0], state_itemsize < 4))
    return None if config is None else config.fitted(V, K)


# -- tuned configs, persisted per device ----------------------------------------------------------------------
# `benchmarks/decode_vs_sglang.py --tune` times every candidate tiling at each point and records the fastest
# here, keyed by (variant, device name, K, V, state bytes, guarded, B*HV). A launch whose signature was tuned on
# its device uses that record (the nearest tuned B*HV at or below its own, else the smallest), so a first call
# on a tuned machine is neither slow nor untuned; everything else uses the built-in table above. `--tune
# --guarded` times the candidates as guarded launches (the checked kernel's, with the device guard in the
# kernel) and records them apart: the guard changes the binary ptxas schedules, so the fastest tiling of a
# guarded launch need not be the unguarded one's (docs/performance-log.md).
TUNING_CACHE_ENV = "GDR_CHECK_TILING_CACHE"
_CONFIG_FIELDS = frozenset(TileConfig.__dataclass_fields__)


def tuning_cache_path() -> Path:
    """Where tuned configs are read and written: $GDR_CHECK_TILING_CACHE, else ~/.cache/gdr_check/tiling.json."""
    given = os.environ.get(TUNING_CACHE_ENV)
    if given:
        return Path(given)
    return Path(os.path.expanduser("~")) / ".cache" / "gdr_check" / "tiling.json"


TuningKey = tuple[str, str, int, int, int, bool]  # variant, device name, K, V, state bytes, guarded


@functools.lru_cache(maxsize=8)
def _load_tuning(path: str) -> dict[TuningKey, tuple[tuple[int, TileConfig], ...]]:
    try:
        with open(path, encoding="utf-8") as handle:
            records = json.load(handle).get("records", [])
    except (OSError, ValueError, AttributeError):
        return {}
    table: dict[TuningKey, dict[int, TileConfig]] = {}
    for record in records if isinstance(records, list) else []:
        try:
            key = (str(record["variant"]), str(record["device"]), int(record["K"]), int(record["V"]),
                   int(record["state_bytes"]), record.get("guarded", False) is True)
            fields = {k: v for k, v in dict(record["config"]).items() if k in _CONFIG_FIELDS}
            config = TileConfig(**fields)
            if config.block_v < 1 or config.tiles_per_program < 1 or config.num_warps < 1:
                continue
            table.setdefault(key, {})[int(record["head_rows"])] = config
        except (KeyError, TypeError, ValueError):
            continue  # a damaged record is skipped, never fatal
    return {key: tuple(sorted(rows.items())) for key, rows in table.items()}


def reload_tuning_cache() -> None:
    """Forget the tuned configs read so far (the next lookup reads the file again)."""
    _load_tuning.cache_clear()
    choose_config.cache_clear()


def tuned_config(variant: str, device: str, head_rows: int, V: int, K: int, state_itemsize: int,
                 guarded: bool = False) -> TileConfig | None:
    rows = _load_tuning(str(tuning_cache_path())).get((variant, device, K, V, state_itemsize, guarded))
    if not rows:
        return None
    chosen = rows[0][1]
    for tuned_rows, config in rows:
        if tuned_rows <= head_rows:
            chosen = config
    return chosen


# Under Triton's CPU interpreter a program costs the same Python work whatever its tile, so the fewest programs win:
# a whole head per program (four warps give the register budget of 128 rows at K = 128). The table's small-B
# tilings, 1024 programs of 4 rows at Qwen3-Next tp 4 B = 4, took 20 s per launch on a 2-core CPU; this one 0.8 s.
INTERPRETER_CONFIG = TileConfig(128, num_warps=4)


@functools.lru_cache(maxsize=4096)
def choose_config(variant: str, device: str | None, head_rows: int, V: int, K: int, state_itemsize: int,
                  scanned: bool = False, interpreted: bool = False, guarded: bool = False) -> TileConfig:
    """The tuned config for this device when one is recorded, else the built-in table's; fitted to (V, K).
    `interpreted`: the kernels run in Triton's CPU interpreter, which takes `INTERPRETER_CONFIG`. `guarded`: a
    launch with the device guard in the kernel, which takes a config tuned as a guarded launch where the device
    has one (as recorded), else the unguarded choice, in which the built-in table's guarded row (`_GUARDED_ROWS`)
    replaces its row.

    `scanned`: for a kernel that runs the device guard's duplicate scan (`has_duplicate_scan`), which always
    requests a single tile first (prefetch), where the table loads it after the gate arithmetic (faster unguarded
    at small B). Unprefetched, the guarded kernel took 1.01-1.17x the unguarded launch on the H200 (2026-12-01
    18:47 run), against 1.01-1.04x with the tile first (18:56 run); with the scan's slots requested early
    (`load_scan_block`) the unprefetched form was still 0.2-6.4 points slower than the tile first at all seven
    such points (20:59 A/B, docs/data/guard_variants/h200_9_scan_early.json)."""
    if interpreted:
        return INTERPRETER_CONFIG.fitted(V, K)
    if guarded and device:
        tuned_guarded = tuned_config(variant, device, head_rows, V, K, state_itemsize, guarded=True)
        if tuned_guarded is not None:
            return tuned_guarded.fitted(V, K)
    tuned = tuned_config(variant, device, head_rows, V, K, state_itemsize) if device else None
    built_in_guarded = guarded_row(head_rows, V, K, state_itemsize, variant) if guarded and tuned is None else None
    config = (tuned or built_in_guarded or pick_config(head_rows, V, K, state_itemsize, variant)).fitted(V, K)
    if scanned and config.tiles_per_program == 1 and not config.prefetch:
        return replace(config, prefetch=True)
    return config


def record_tuning(records: list[dict[str, Any]], path: Path | None = None) -> Path:
    """Merge tuned configs into the cache file (atomically replaced). Each record holds variant, device, K, V,
    state_bytes, head_rows and config (TileConfig fields), and `guarded: true` for a guarded launch's; a later
    record replaces one with the same key."""
    path = path or tuning_cache_path()
    try:
        with open(path, encoding="utf-8") as handle:
            existing = json.load(handle).get("records", [])
    except (OSError, ValueError, AttributeError):
        existing = []
    merged: dict[tuple[Any, ...], dict[str, Any]] = {}
    for record in [*existing, *records]:
        config = record["config"] if isinstance(record["config"], dict) else asdict(record["config"])
        record = {**record, "config": config}
        merged[(record["variant"], record["device"], record["K"], record["V"], record["state_bytes"],
                record.get("guarded", False) is True, record["head_rows"])] = record
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=".tiling-", suffix=".json")
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        json.dump({"records": list(merged.values())}, handle, indent=1)
    os.replace(temporary, path)
    reload_tuning_cache()
    return path


@dataclass(frozen=True)
class GuardLaunch:
    """What a guarded launch passes to the kernel: the fault buffer's tensors, the call site's tag and the
    pool size the slots are checked against (device_guard.FaultBuffer)."""

    counter: torch.Tensor
    records: torch.Tensor
    flag: torch.Tensor  # host memory the kernel sets when it records a fault (FaultBuffer.flag)
    max_records: int
    tag: int
    pool_slots: int
    # The tag as the kernel reads it, only when it records a fault: a 16-byte-aligned device cell holding `tag`
    # (FaultBuffer.tag_cell). Passed as an int, the tag took part in Triton's specialization (1 is a constant, a
    # multiple of 16 is marked so), so call sites compiled to different binaries that ptxas scheduled up to 5 %
    # apart on clean calls (docs/performance-log.md); as a cell every call site runs one binary.
    tag_cell: torch.Tensor


def guard_arguments(guard: GuardLaunch | None, batch: int) -> tuple[Any, ...]:
    """The kernel's run-time guard arguments; without a guard, the pointers are never read (GUARD=False)."""
    if guard is None:
        return 0, batch, None, None, None, None
    return guard.pool_slots, batch, guard.counter, guard.records, guard.flag, guard.tag_cell


GUARD_CHUNK = 128  # rows compared per step of the duplicate scan (one vector load of slots per step)


def scan_shape(batch: int, max_block: int = GUARD_CHUNK) -> tuple[int, bool]:
    """The duplicate scan for a launch of `batch` rows: (rows per block, whether to loop).

    Fixed at launch, so the compiler sees it: no scan at all for one row, one block of next_pow2(batch) slots
    (a single vector load, no loop) up to `max_block` rows, a loop of `max_block`-row blocks beyond. The
    launch key holds the batch, so each bucket is its own compiled variant (at most log2(max_block) + 2 per
    configuration: 9 for the decode kernels' prologue, 12 for the one-program-per-row check)."""
    if batch <= 1:
        return 0, False
    if batch <= max_block:
        return next_power_of_2(batch), False
    return max_block, True


def has_duplicate_scan(guard: GuardLaunch | None, batch: int) -> bool:
    """Whether a launch's kernel runs the device guard's duplicate scan: a guarded launch of more than one row."""
    return guard is not None and scan_shape(batch)[0] > 0


def guard_constants(guard: GuardLaunch | None, profile: object, batch: int) -> dict[str, Any]:
    block, loop = scan_shape(batch) if guard is not None else (0, False)
    return {"GUARD": guard is not None, "RESERVED_ZERO": bool(getattr(profile, "reserved_slot_zero", False)),
            "SCAN_BLOCK": block, "SCAN_LOOP": loop, "MAX_RECORDS": guard.max_records if guard is not None else 1}


def plain_variant(args: tuple[Any, ...], constants: dict[str, Any], profile: object, batch: int
                  ) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """A guarded launch's (args, constants) with the guard's arguments and constants replaced by those of no
    guard: the unguarded variant, whose register count caps the guarded one's (`DirectLauncher.launch`)."""
    unguarded = guard_arguments(None, batch)
    return args[: len(args) - len(unguarded)] + unguarded, {**constants, **guard_constants(None, profile, batch)}


def launch_key(engine: object, flags: tuple[bool | None, ...], config: TileConfig | None, guard: GuardLaunch | None,
               *tensors: Any) -> tuple[Any, ...] | None:
    """What a decode launch's compiled variant depends on, for the kernels' direct launcher: the engine, the
    launch's ``flags`` (each a bool, or None for a default), config and guard, and per tensor its dtype and
    16-byte alignment, plus the shapes and leading strides that become the kernel's int arguments (Triton
    specializes ints equal to 1 or divisible by 16, so the values themselves are in the key). The guard's pool
    size and tag are not: the kernels take them unspecialized (the tag as its cell), so every call site shares
    one entry. Tensors in the order mixed_qkv, a, b, A_log, dt_bias, state, out, indices. None (no direct
    launch) for an unhashable engine."""
    try:
        hash(engine)
    except TypeError:
        return None
    mixed, a, b, A_log, dt_bias, state, out, indices = tensors
    guard_key = None if guard is None else (
        guard.max_records, guard.counter.data_ptr() % 16 == 0, guard.records.data_ptr() % 16 == 0,
        guard.flag.data_ptr() % 16 == 0, guard.tag_cell.data_ptr() % 16 == 0)
    return (
        engine, flags, config, guard_key, mixed.device, mixed.shape[0], mixed.shape[1],
        state.shape[-3:], mixed.stride(0), a.stride(0), b.stride(0), state.stride(0), indices.stride(0),
        mixed.dtype, a.dtype, b.dtype, A_log.dtype, dt_bias.dtype, state.dtype, out.dtype, indices.dtype,
        mixed.data_ptr() % 16 == 0, a.data_ptr() % 16 == 0, b.data_ptr() % 16 == 0, A_log.data_ptr() % 16 == 0,
        dt_bias.data_ptr() % 16 == 0, state.data_ptr() % 16 == 0, out.data_ptr() % 16 == 0,
        indices.data_ptr() % 16 == 0,
    )
