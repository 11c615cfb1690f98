"""How the decode kernels cut the work into programs (no torch/triton here, so the table is cheap to read).

A program owns one (row n, value head j) pair and ``block_v * tiles_per_program`` rows of that head's
[V, K] state, looping over ``tiles_per_program`` tiles of [block_v, next_pow2(K)]. The launch is a 1-D grid
of ``cdiv(V, block_v * tiles_per_program) * B * HV`` programs, so B has no 65535 limit (2**31 - 1 programs).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from .layout import next_power_of_2

# Keep the fp32 state tile at or under this many elements per thread: the tile lives in registers, and
# past ~128 per thread ptxas spills (the reference kernel spills from K = 256 on with one warp).
MAX_TILE_ELEMENTS_PER_THREAD = 128
MAX_PROGRAMS = 2**31 - 1  # CUDA's limit on grid dimension 0


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

    def launch_options(self) -> dict:
        options = {"num_warps": self.num_warps, "num_stages": self.num_stages}
        if self.max_registers is not None:
            options["maxnreg"] = self.max_registers
        return options

    def fitted(self, V: int, K: int) -> TileConfig:
        """This config with block_v clamped to the head (V) and to the register budget (K)."""
        budget_rows = max(1, MAX_TILE_ELEMENTS_PER_THREAD * 32 * self.num_warps // next_power_of_2(K))
        register_cap = 1 << (budget_rows.bit_length() - 1)  # largest power of two within the budget
        block_v = max(1, min(self.block_v, next_power_of_2(V), register_cap))
        tiles = max(1, min(self.tiles_per_program, -(-V // block_v)))
        return TileConfig(block_v, tiles, self.num_warps, self.num_stages, self.evict_first, self.prefetch,
                          self.max_registers)

    def programs_per_head(self, V: int) -> int:
        return -(-V // (self.block_v * self.tiles_per_program))

    def grid(self, B: int, HV: int, V: int) -> tuple[int]:
        """The 1-D launch grid; program ids are int32, which is the only bound on B."""
        programs = self.programs_per_head(V) * B * HV
        if programs > MAX_PROGRAMS:
            raise ValueError(f"the launch needs {programs} programs, more than {MAX_PROGRAMS}: split the batch")
        return (programs,)


# Chosen on an H200 (torch 2.11, triton 3.6) by `benchmarks/decode_bandwidth.py --tune`, K = V = 128, bf16
# activations, cold L2. Keyed by the number of (row, value head) pairs B*HV, i.e. how much independent work
# the launch has: few pairs want many tiny programs (latency), many pairs want 8-16 rows per warp
# (bandwidth). Rows: (upper bound on B*HV, fp32-state config, 2-byte-state config).
_TABLE: tuple[tuple[int, TileConfig, TileConfig], ...] = (
    (32, TileConfig(4), TileConfig(4)),
    (128, TileConfig(4), TileConfig(16, evict_first=True)),
    (256, TileConfig(16, evict_first=True), TileConfig(16, evict_first=True)),
    (2048, TileConfig(8, evict_first=True), TileConfig(16, evict_first=True)),
    (8192, TileConfig(16), TileConfig(16, 2, num_stages=2, evict_first=True, prefetch=False)),
    (1 << 62, TileConfig(16), TileConfig(16, 2, num_stages=2, prefetch=False)),
)


@functools.lru_cache(maxsize=1024)
def pick_config(head_rows: int, V: int, K: int, state_itemsize: int) -> TileConfig:
    """The tiling for a launch with ``head_rows`` = B*HV (row, value head) pairs."""
    for bound, fp32_config, narrow_config in _TABLE:
        if head_rows <= bound:
            config = fp32_config if state_itemsize >= 4 else narrow_config
            return config.fitted(V, K)
    raise AssertionError("unreachable: the last bound is unbounded")


@dataclass(frozen=True)
class GuardLaunch:
    """What a guarded launch passes to the kernel: the fault buffer's tensors, the call site's tag and the
    pool size the slots are checked against (device_guard.FaultBuffer)."""

    counter: object
    records: object
    max_records: int
    tag: int
    pool_slots: int


def guard_arguments(guard: GuardLaunch | None, batch: int) -> tuple:
    """The kernel's run-time guard arguments; without a guard, the pointers are never read (GUARD=False)."""
    if guard is None:
        return 0, batch, None, None, 0
    return guard.pool_slots, batch, guard.counter, guard.records, guard.tag


GUARD_CHUNK = 128  # rows compared per step of the kernels' duplicate scan


def guard_constants(guard: GuardLaunch | None, profile: object) -> dict:
    return {"GUARD": guard is not None, "RESERVED_ZERO": bool(getattr(profile, "reserved_slot_zero", False)),
            "CHUNK": GUARD_CHUNK, "MAX_RECORDS": guard.max_records if guard is not None else 1}
