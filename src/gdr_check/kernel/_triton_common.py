# mypy: disable-error-code="untyped-decorator, no-untyped-def"
# (Triton kernels: `triton.jit` is untyped and kernel parameters take pointers, ints or constexprs.)
"""Triton helpers shared by the GDN and KDA decode kernels, and their direct launcher."""

from __future__ import annotations

import functools
from collections.abc import Hashable
from typing import Any

import torch
import triton
import triton.language as tl

from .tiling import PROGRAMMATIC_MAX_PAIRS, one_wave_register_cap, register_cap, resident_programs

try:  # the launch option of programmatic dependent launch (Triton 3.4+ for NVIDIA)
    from triton.backends.nvidia.compiler import CUDAOptions

    _TRITON_LAUNCHES_PDL = "launch_pdl" in CUDAOptions.__dataclass_fields__
except (ImportError, AttributeError):
    _TRITON_LAUNCHES_PDL = False


@triton.jit
def softplus(z, THRESHOLD: tl.constexpr):
    # log(1 + exp(z)), not log1p, to match the reference kernels; linear above the threshold.
    return tl.where(z <= THRESHOLD, tl.log(1.0 + tl.exp(z)), z)


@triton.jit
def load_query_key(row, i_h, H: tl.constexpr, K: tl.constexpr, BK: tl.constexpr, USE_L2NORM: tl.constexpr,
                   EVICTION: tl.constexpr):
    """q and k of key head i_h from one packed [q | k | v] row, as fp32 [BK] (lanes >= K are zero)."""
    o_k = tl.arange(0, BK)
    mask_k = o_k < K
    q = tl.load(row + i_h * K + o_k, mask=mask_k, other=0.0, eviction_policy=EVICTION).to(tl.float32)
    k = tl.load(row + H * K + i_h * K + o_k, mask=mask_k, other=0.0, eviction_policy=EVICTION).to(tl.float32)
    if USE_L2NORM:
        # eps inside the square root; the zero padding lanes add nothing to the sums.
        q = q / tl.sqrt(tl.sum(q * q) + 1e-6)
        k = k / tl.sqrt(tl.sum(k * k) + 1e-6)
    return q, k


@triton.jit
def locate_program(V: tl.constexpr, BV: tl.constexpr, TILES: tl.constexpr, HV: tl.constexpr, H: tl.constexpr):
    """Decode the 1-D program id into (row n as int64, value head j, key head i, first V row, head_row).

    The head counts are constants: divisions by them compile to shifts or multiplies, where a run-time
    divisor costs a ~20-instruction sequence ahead of the slot's load, on every program's critical path."""
    V_PER_PROGRAM: tl.constexpr = BV * TILES
    PROGRAMS_PER_HEAD: tl.constexpr = (V + V_PER_PROGRAM - 1) // V_PER_PROGRAM
    pid = tl.program_id(0)
    head_row = pid // PROGRAMS_PER_HEAD  # n * HV + j, the row of `out` viewed as [B*HV, V]
    v_start = (pid % PROGRAMS_PER_HEAD) * V_PER_PROGRAM
    i_hv = head_row % HV
    i_n = (head_row // HV).to(tl.int64)
    i_h = i_hv // (HV // H)  # consecutive value heads share a key head
    return i_n, i_hv, i_h, v_start, head_row.to(tl.int64)


@triton.jit
def wait_for_previous_grid():
    """Wait for the grid this one was launched programmatically after (PDL: `griddepcontrol.wait`, sm_90+) and
    return 0, for the caller to add to the address of what that grid wrote: a load may be moved above an asm
    statement, but not above the value its address depends on."""
    return tl.inline_asm_elementwise("griddepcontrol.wait; mov.u32 $0, 0;", "=r", [], dtype=tl.int32, is_pure=False,
                                     pack=1)


@triton.jit
def release_dependents():
    """Let the grid launched programmatically after this one start (`griddepcontrol.launch_dependents`). Safe
    before any successor: one launched programmatically must wait before it reads what earlier grids wrote (CUDA's
    contract; ours do, in `wait_for_previous_grid`), and one launched plainly starts after this grid ends anyway."""
    tl.inline_asm_elementwise("griddepcontrol.launch_dependents; mov.u32 $0, 0;", "=r", [], dtype=tl.int32,
                              is_pure=False, pack=1)


# Whether Triton runs this process's kernels in its CPU interpreter: `triton.jit` reads TRITON_INTERPRET when a
# kernel is defined, and gives an interpreted function then (the decode kernels are defined right after this).
INTERPRETED = type(softplus).__name__ == "InterpretedFunction"


@functools.lru_cache(maxsize=16)
def programmatic_launch_supported(device: Any) -> bool:
    """Whether kernels on `device` can be launched programmatically after the previous one (PDL): an NVIDIA device
    of compute capability 9.0 or later (not ROCm, whose devices torch also calls "cuda", with capabilities of
    9.x), and a Triton with the `launch_pdl` launch option."""
    if (INTERPRETED or getattr(device, "type", None) != "cuda" or not _TRITON_LAUNCHES_PDL
            or torch.version.hip is not None):  # (the interpreter runs no inline assembly)
        return False
    return torch.cuda.get_device_capability(device)[0] >= 9


def launches_programmatically(requested: bool | None, pairs: int, device: Any) -> bool:
    """Whether a decode launch of `pairs` (row, value head) pairs on `device` is programmatic (PDL): as
    `requested` (None: up to `tiling.PROGRAMMATIC_MAX_PAIRS`, where it was measured faster), and only where
    `programmatic_launch_supported` (never under the interpreter, on a CPU, ROCm or before sm_90)."""
    if requested is False or (requested is None and pairs > PROGRAMMATIC_MAX_PAIRS):
        return False
    return programmatic_launch_supported(device)


@functools.lru_cache(maxsize=16)
def residency_model_applies(device_index: int) -> bool:
    """Whether `tiling.resident_programs` describes the device: the register file and limits of sm_80 and sm_90
    (other NVIDIA parts hold fewer warps and programs per SM, and ROCm's are another design)."""
    if torch.version.hip is not None:
        return False
    return torch.cuda.get_device_capability(device_index) in ((8, 0), (9, 0))


@functools.lru_cache(maxsize=16)
def multiprocessors(device_index: int) -> int:
    """The device's SM count."""
    return int(torch.cuda.get_device_properties(device_index).multi_processor_count)


@triton.jit
def load_slot(slots, i_n, stride_index, SKIP_AT_OR_BELOW: tl.constexpr):
    """The row's slot (int64) and whether the row is live: above the profile's skip sentinel
    (`EngineProfile.skip_at_or_below`: sglang skips idx < 0, vLLM idx <= 0)."""
    slot = tl.load(slots + i_n * stride_index).to(tl.int64)
    live = slot > SKIP_AT_OR_BELOW
    return slot, live


@triton.jit
def load_state_tile(head_state, rows, row_limit, K: tl.constexpr, BK: tl.constexpr, EVICTION: tl.constexpr):
    """State rows ``rows`` of one head as a [BV, BK] tile in the pool's dtype; rows >= row_limit read 0."""
    o_k = tl.arange(0, BK)
    mask = (rows < row_limit)[:, None] & (o_k < K)[None, :]
    return tl.load(head_state + rows[:, None] * K + o_k[None, :], mask=mask, other=0.0, eviction_policy=EVICTION)


@triton.jit
def store_state_tile(head_state, rows, row_limit, tile, K: tl.constexpr, BK: tl.constexpr, EVICTION: tl.constexpr):
    o_k = tl.arange(0, BK)
    mask = (rows < row_limit)[:, None] & (o_k < K)[None, :]
    tl.store(head_state + rows[:, None] * K + o_k[None, :], tile.to(head_state.dtype.element_ty), mask=mask,
             eviction_policy=EVICTION)


# Fault codes of the device-side slot guard (device_guard.py maps them to the contract's rules).
FAULT_OUT_OF_RANGE = tl.constexpr(1)  # GDR241
FAULT_DUPLICATE = tl.constexpr(2)  # GDR242
FAULT_RESERVED_SLOT = tl.constexpr(3)  # GDR247


@triton.jit
def _bit_or(left, right):
    return left | right


@triton.jit
def load_scan_block(slots, slot, i_n, batch, stride_index, SKIP_AT_OR_BELOW: tl.constexpr,
                    RESERVED_ZERO: tl.constexpr, SCAN_BLOCK: tl.constexpr, SCAN_LOOP: tl.constexpr):
    """The other rows' slots that `guard_row` compares with row i_n's, where the scan is one block (SCAN_BLOCK
    > 0, no loop); otherwise `slot` itself, which guard_row then ignores.

    A load of its own, so that the decode kernels can request it with the state, long before the verdict is
    needed (only the stores wait for it). Only the rows before i_n are read, and the rows after it as well for
    a slot-0 row under RESERVED_ZERO (is it followed by a live one?); other lanes read the skip sentinel, so
    guard_row must be given the same `slot`: its "followed" bit, set by those lanes for a non-zero slot, only
    counts for a slot-0 row."""
    if SCAN_BLOCK == 0 or SCAN_LOOP:
        return slot
    else:
        offsets = tl.arange(0, SCAN_BLOCK)
        end = tl.where(slot == 0, batch, i_n) if RESERVED_ZERO else i_n
        return tl.load(slots + offsets * stride_index, mask=offsets < end, other=SKIP_AT_OR_BELOW)


@triton.jit
def guard_row(slots, slot, i_n, batch, stride_index, pool_slots, block,
              SKIP_AT_OR_BELOW: tl.constexpr, RESERVED_ZERO: tl.constexpr, SCAN_BLOCK: tl.constexpr,
              SCAN_LOOP: tl.constexpr):
    """For row i_n and its slot (int64, as given): whether the row is computed, and its fault code (0: none).
    `block`: what `load_scan_block` returned for the row.

    A row is computed when it is above the engine's skip sentinel, inside the pool (0 <= slot < pool_slots)
    and the first row naming its slot; an out-of-range or repeated slot skips the row, so no index can make
    the kernel touch memory outside the pool or race on a slot. With RESERVED_ZERO (sglang), slot 0 on a row
    followed by a non-zero row is a live request in the reserved padding slot (recorded, still computed);
    trailing rows at slot 0 are CUDA-graph padding and repeat slot 0 freely.

    The scan's shape is fixed at launch from the batch (`tiling.scan_shape`): none for one row, one vector
    load of the rows' slots up to SCAN_BLOCK rows (128 in the decode kernels' prologue, 1024 in the
    one-program-per-row check), a loop of SCAN_BLOCK-row blocks beyond. Both questions (an earlier row
    with this slot? a later non-zero row?) are answered by one bitwise-or reduction; which earlier row it
    was is looked up only when a duplicate is recorded (`record_fault`).
    """
    live = slot > SKIP_AT_OR_BELOW
    out_of_range = live & (slot >= pool_slots)
    is_zero = slot == 0
    if SCAN_BLOCK == 0:  # a batch of one row: nothing to compare, and a lone slot-0 row is padding
        repeated = is_zero & (slot != slot)
        reserved = repeated
        padding = repeated
    else:
        offsets = tl.arange(0, SCAN_BLOCK)
        if SCAN_LOOP:
            # Only slot-0 rows (sglang) look past themselves; other rows stop at their own row.
            end = tl.where(is_zero, batch, i_n) if RESERVED_ZERO else i_n
            seen = tl.zeros([SCAN_BLOCK], dtype=tl.int32)
            for start in range(0, end, SCAN_BLOCK):
                rows = start + offsets
                other = tl.load(slots + rows * stride_index, mask=rows < end, other=SKIP_AT_OR_BELOW).to(tl.int64)
                seen |= ((rows < i_n) & (other == slot)).to(tl.int32)
                if RESERVED_ZERO:
                    seen |= ((rows > i_n) & (rows < end) & (other != 0)).to(tl.int32) * 2
        else:
            other = block.to(tl.int64)
            seen = ((offsets < i_n) & (other == slot)).to(tl.int32)
            if RESERVED_ZERO:
                seen |= ((offsets > i_n) & (offsets < batch) & (other != 0)).to(tl.int32) * 2
        found = tl.reduce(seen, 0, _bit_or)
        repeated = (found & 1) != 0
        if RESERVED_ZERO:
            followed = (found & 2) != 0
            padding = is_zero & ~followed
            reserved = is_zero & followed
        else:
            padding = is_zero & (slot != slot)
            reserved = padding
    duplicate = live & (~out_of_range) & repeated & (~padding)
    fault = tl.where(out_of_range, FAULT_OUT_OF_RANGE,
                     tl.where(duplicate, FAULT_DUPLICATE, tl.where(reserved, FAULT_RESERVED_SLOT, 0)))
    computed = live & (~out_of_range) & (~duplicate)
    return computed, fault


@triton.jit
def first_row_with(slots, slot, i_n, stride_index, SCAN_BLOCK: tl.constexpr):
    """The first row before i_n whose slot is `slot` (only called for a recorded duplicate, off the hot path)."""
    offsets = tl.arange(0, SCAN_BLOCK)
    first = tl.full([SCAN_BLOCK], 2**62, dtype=tl.int64)
    for start in range(0, i_n, SCAN_BLOCK):
        rows = start + offsets
        mask = rows < i_n
        other = tl.load(slots + rows * stride_index, mask=mask, other=-1).to(tl.int64)
        first = tl.minimum(first, tl.where(mask & (other == slot), rows.to(tl.int64), 2**62))
    return tl.min(first, axis=0)


@triton.jit
def load_readable_slot(slots, i_n, stride_index, pool_slots, SKIP_AT_OR_BELOW: tl.constexpr):
    """The row's slot (int64, as given) and whether its state may be read: live and inside the pool.

    Reading needs nothing more (rows that repeat a slot read the same in-pool state), so the guarded kernels
    start the state stream on this and only gate their stores on guard_row's verdict: the O(B) duplicate
    scan then overlaps the state's latency instead of preceding it."""
    slot = tl.load(slots + i_n * stride_index).to(tl.int64)
    readable = (slot > SKIP_AT_OR_BELOW) & (slot < pool_slots)
    return slot, readable


@triton.jit
def record_fault(counter, records, flag, fault, i_n, slot, tag, slots, stride_index, MAX_RECORDS: tl.constexpr,
                 SCAN_BLOCK: tl.constexpr, TAG_IN_CELL: tl.constexpr = False):
    """Write (code [+ 256 * (first row + 1) for a duplicate], row, slot, tag, stamp) into the fault records when
    `fault` is non-zero. `counter[0]` (int64) numbers every fault ever recorded and is never reset; `counter[1]` is
    the first number not to be kept, which the host sets to (faults it has read) + MAX_RECORDS after each read. So
    fault i lands in row i % MAX_RECORDS only when it is one of the first MAX_RECORDS since the host's last read:
    each row has one writer between two reads (when several faults raced for a row of a ring of the last
    MAX_RECORDS, a GPU finished their stores in any order, which left a row with an earlier fault's stamp, or
    one fault's fields under another's stamp). The rest are counted, not kept (`device_guard.FaultBuffer.take`).
    The stamp, i + 1, is written last, released after the other fields: the host takes a row only once it holds
    the stamp of the fault it expects there. `flag` (host memory) is set so that the host notices without a
    copy. Nothing is written on a clean row. TAG_IN_CELL: `tag` is the address of a cell holding it
    (`tiling.GuardLaunch.tag_cell`), read only here."""
    if fault != 0:  # a branch, not a masked atomic: a clean row issues no atomic and waits on none
        code = fault.to(tl.int64)
        if SCAN_BLOCK != 0:
            if fault == FAULT_DUPLICATE:
                code += (first_row_with(slots, slot, i_n, stride_index, SCAN_BLOCK) + 1) * 256
        index = tl.atomic_add(counter, 1)
        if index < tl.load(counter + 1, volatile=True):  # (set by the host between kernels, never by one)
            record = records + (index % MAX_RECORDS) * 5
            fields = tl.arange(0, 4)
            if TAG_IN_CELL:
                site = tl.load(tag)
            else:
                site = tag
            values = tl.where(fields == 0, code,
                              tl.where(fields == 1, i_n.to(tl.int64), tl.where(fields == 2, slot, site)))
            # (no `.to` on site: an int64 read from its cell, or the slot check's int argument, widened by tl.where)
            tl.store(record + fields, values)
            # The fields' stores (several threads') are ordered before the stamp's release by the barrier; `fault`
            # is the program's own, so all of its threads take this branch.
            tl.debug_barrier()
            tl.atomic_xchg(record + 4, index + 1, sem="release")
        tl.store(flag, 1)


class DirectLauncher:
    """Launches a kernel's compiled variants without going through the JIT on every call (the decode kernels
    and the guard's slot check).

    The JIT binds the arguments, works out their specialization (dtypes, 16-byte alignment, ints equal to 1)
    and looks the variant up on every call; at small B that host work is most of an eager decode step. The
    callers compute a key that holds everything the specialization and the grid depend on (dtypes, devices,
    the int arguments' values or the batch, each pointer's alignment, the constants), so after the first call
    through the JIT a key maps to its compiled kernel and grid, launched with the JIT's own launcher on the
    current stream. Nothing here touches the host side of the device (capture-safe). If this Triton's
    launcher takes another convention, the first failure switches the direct path off for this kernel and the
    JIT is used. `stream`: the current stream's handle by device index (default: the Triton driver's).
    """

    def __init__(self, kernel: Any, max_variants: int = 4096, stream: Any = None) -> None:
        self.kernel = kernel
        self.variants: dict[Hashable, tuple[Any, int, int, tuple[Any, ...]]] = {}
        self.enabled = True
        self.max_variants = max_variants
        self._stream: Any = stream

    def run_cached(self, key: Hashable, args: tuple[Any, ...]) -> bool:
        """Launch the variant stored under ``key``; False when there is none (the caller takes the JIT)."""
        entry = self.variants.get(key) if self.enabled else None
        if entry is None:
            return False
        compiled, grid, device_index, constants = entry
        try:
            stream = self._stream(device_index)
            compiled.run(grid, 1, 1, stream, compiled.function, compiled.packed_metadata, None, None, None,
                         *args, *constants)
        except (TypeError, AttributeError):
            self.enabled = False
            self.variants.clear()
            return False
        return True

    def launch(self, key: Hashable | None, grid: int, device_index: int | None, args: tuple[Any, ...],
               constants: dict[str, Any], options: dict[str, Any],
               plain: tuple[tuple[Any, ...], dict[str, Any]] | None = None, lift_registers: bool = False) -> None:
        """Launch through the JIT and remember the compiled variant under ``key`` (None: don't).

        ``plain``: for a guarded launch, the unguarded variant's (args, constants), with the guarded launch's
        tiling (which may differ from an unguarded launch's in its tile order: `tiling.choose_config`). ptxas
        sizes a kernel's registers for its most demanding block, and the fault record's branch, which only a
        faulty row takes, can lift the count of the whole kernel: 168 against 128 for a KDA bf16 tile on sm_90,
        12 resident single-warp programs per SM instead of 16, 9 % slower on every clean call (Kimi-Linear tp 1,
        B = 128, on an H200). So on sm_80 and sm_90 (the SMs `tiling.resident_programs` describes), where the guarded
        variant would hold fewer programs per SM than the plain one, the variant kept for later launches is
        recompiled with a register cap that holds as many (`register_cap`); the record's branch spills at
        worst. Where the count costs no residency the variant stays uncapped: a cap makes ptxas
        schedule the main path differently, measured up to 4 % slower where it was not needed. A guarded launch
        with fewer programs than the SMs hold goes the other way: its cap is lifted (`one_wave_register_cap`),
        so that ptxas does not split the state's loads to stay within full residency's count; so is an unguarded
        one whose tiling asks for it (`TileConfig.lift_registers`)."""
        if ((plain is not None or lift_registers) and device_index is not None and "maxnreg" not in options
                and residency_model_applies(device_index)):
            lifted = one_wave_register_cap(grid, int(options.get("num_warps", 4)), multiprocessors(device_index))
            if lifted is not None:
                options = {**options, "maxnreg": lifted}
        compiled = self.kernel[(grid,)](*args, **constants, **options)
        if key is None or device_index is None or not self.enabled:
            return
        if not (hasattr(compiled, "run") and hasattr(compiled, "function") and hasattr(compiled, "packed_metadata")):
            return  # the interpreter, or a Triton without compiled-kernel launchers
        if self._stream is None:
            try:
                self._stream = triton.runtime.driver.active.get_current_stream
            except Exception:  # noqa: BLE001 - no active driver or another Triton: the JIT path stays
                self.enabled = False
                return
        if plain is not None and "maxnreg" not in options and residency_model_applies(device_index):
            compiled = self._within_plain_residency(compiled, grid, args, constants, options, plain)
        names = self.kernel.arg_names[len(args):]
        if len(self.variants) >= self.max_variants:
            self.variants.clear()
        self.variants[key] = (compiled, grid, device_index, tuple(constants[name] for name in names))

    def _within_plain_residency(self, compiled: Any, grid: int, args: tuple[Any, ...], constants: dict[str, Any],
                                options: dict[str, Any], plain: tuple[tuple[Any, ...], dict[str, Any]]) -> Any:
        """`compiled`, or its recompilation under `register_cap` where it holds fewer programs per SM than the
        plain variant (compiled without a launch). Where this Triton cannot say, `compiled` as it is."""
        warps = int(options.get("num_warps", 4))
        try:
            compiled.run  # noqa: B018 - loading the binary is what sets n_regs
            registers = int(compiled.n_regs)
            if resident_programs(registers, warps) == resident_programs(1, warps):
                return compiled  # already as resident as any variant can be
            plain_kernel = self.kernel.warmup(*plain[0], grid=(grid,), **plain[1], **options)
            plain_kernel.run  # noqa: B018
            cap = register_cap(int(plain_kernel.n_regs), warps)
            if registers <= cap:
                return compiled
            capped = self.kernel.warmup(*args, grid=(grid,), **constants, **options, maxnreg=cap)
            capped.run  # noqa: B018
        except Exception:  # noqa: BLE001 - another Triton's warmup or kernel object: keep the launched variant
            return compiled
        return capped


@functools.lru_cache(maxsize=64)
def device_name(device: Any) -> str | None:
    """The CUDA device's name (the tuning cache's key), None for other devices."""
    if getattr(device, "type", None) != "cuda":
        return None
    return str(torch.cuda.get_device_name(device))


@triton.jit
def start_program(slots, state, mixed_qkv, scale, stride_qkv, stride_slot, stride_index, pool_slots, batch,
                  H: tl.constexpr, HV: tl.constexpr, K: tl.constexpr, V: tl.constexpr, BK: tl.constexpr,
                  BV: tl.constexpr, TILES: tl.constexpr, STATE_EVICTION: tl.constexpr, INPUT_EVICTION: tl.constexpr,
                  PREFETCH: tl.constexpr, USE_L2NORM: tl.constexpr, SKIP_AT_OR_BELOW: tl.constexpr,
                  PROGRAMMATIC: tl.constexpr, GUARD: tl.constexpr, RESERVED_ZERO: tl.constexpr,
                  SCAN_BLOCK: tl.constexpr, SCAN_LOOP: tl.constexpr):
    """The GDN and KDA decode kernels' common start, in the order measured fastest: the program's row and heads,
    the wait for the previous grid, the slot, the first state tile (PREFETCH), the guard's duplicate scan, and q, k
    (scaled q, k . q). Returns `slots` (moved past the wait), the row n, value head j, first V row and `out` row,
    whether the row is live, the slot as given, the head's state, its readable rows, the first tile, the scan's
    slots, the packed row, q, k and k . q. Inlined: the compiled kernels are those of the code written out in each
    (their PTX compared instruction for instruction)."""
    i_n, i_hv, i_h, v_start, head_row = locate_program(V, BV, TILES, HV, H)
    if PROGRAMMATIC:
        # Launched programmatically after the stream's previous grid (PDL: the slot check, or any other), whose
        # writes may still be in flight: nothing is read before the wait (the slots' address depends on its
        # result; every other load follows it), and the next grid may launch at once, to wait in its turn.
        slots += wait_for_previous_grid()
        release_dependents()
    if GUARD:  # memory-safe: reads need an in-pool slot; writes wait for the duplicate scan's verdict below
        slot, live = load_readable_slot(slots, i_n, stride_index, pool_slots, SKIP_AT_OR_BELOW)
        given_slot = slot
    else:
        slot, live = load_slot(slots, i_n, stride_index, SKIP_AT_OR_BELOW)
        given_slot = slot  # (read only by the guard)
    slot = tl.where(live, slot, 0)

    # With PREFETCH the first state tile is requested before the q/k loads and the gate arithmetic, so its
    # latency overlaps them instead of following them: the state stream is what the kernel waits on. (A
    # single tile without it comes after the gate arithmetic: faster at small B, tiling.py.)
    head_state = state + slot * stride_slot + i_hv * (V * K)
    state_rows = tl.where(live, V, 0)  # a skipped row reads no state: every state lane masked off
    next_tile = state_rows  # (a placeholder: without PREFETCH the kernel loads its first tile itself)
    if PREFETCH:
        next_tile = load_state_tile(head_state, v_start + tl.arange(0, BV), state_rows, K, BK, STATE_EVICTION)
    scan = live  # (a placeholder: read only by the guard)
    if GUARD:  # the duplicate scan's slots are requested with the state; only the stores wait for the verdict
        scan = load_scan_block(slots, given_slot, i_n, batch, stride_index, SKIP_AT_OR_BELOW, RESERVED_ZERO,
                               SCAN_BLOCK, SCAN_LOOP)
    row = mixed_qkv + i_n * stride_qkv
    q, k = load_query_key(row, i_h, H, K, BK, USE_L2NORM, INPUT_EVICTION)
    q = q * scale
    k_dot_q = tl.sum(k * q)
    return slots, i_n, i_hv, v_start, head_row, live, given_slot, head_state, state_rows, next_tile, scan, row, q, k, \
        k_dot_q
