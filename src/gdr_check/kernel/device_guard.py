"""Device-side slot checks: shapes decided once per call signature, index values checked on the GPU.

The contract's value rules (GDR241 slot past the pool, GDR242 two live rows on one slot, GDR247 a live
request in sglang's reserved slot 0) need the slot indices, and reading them on the host synchronises the
device and breaks CUDA-graph capture. Here they run inside the decode kernel's prologue (our kernels) or in a
small check kernel launched before an engine's kernel (the guard): a faulty row is skipped (its `out` row is
zero, its state untouched), and a compact record (code, row, slot, tag) is written into the fault records in
device memory, numbered by an atomic counter (the first max_records after each read are kept). A kernel that
records a fault also sets a flag word in host memory that the device writes through (pinned memory, which
CUDA's unified addressing maps at the same address), so the host notices faults by reading one word of its
own memory on each eager call (`FaultBuffer.look`): no copy, no event, no sync. It reads the records (which
synchronises the device) only then, at most every REPEAT_LOOK_INTERVAL calls while faults keep coming, or when asked
(`FaultBuffer.take`, `raise_pending`); never while a stream is capturing.

Everything that depends only on shapes, strides, dtypes and devices (the contract's other rules, the model
comparison, the tiling) is decided on the first call of a signature and cached.
"""

from __future__ import annotations

import reprlib
import threading
from collections.abc import Callable
from dataclasses import replace
from typing import Any, Literal

import torch
import triton
import triton.language as tl

from ..base.errors import described
from ..base.limits import DEFAULT_MAX_RECORDS, UNLISTED_FAULTS, checked, counted
from ..base.records import dataclass
from ..base.registry import Finding
from ..base.report import Diagnostic, Severity
from ..call.packed_call import ARGUMENTS
from ..checks import RULES
from ..checks.hotpath import CONTRACT_CHECKS, address_errors, address_rules, byte_extents, out_overlaps
from ..checks.rules_guard import meta_report
from ._triton_common import (
    INTERPRETED,
    DirectLauncher,
    guard_row,
    load_scan_block,
    programmatic_launch_supported,
    record_fault,
    release_dependents,
)
from .layout import NOT_APPLICABLE_TO_OUR_KERNELS, Engine, check_engine
from .tiling import GUARD_CHUNK, GuardLaunch, scan_shape

Context = Literal["direct", "engine"]
CONTEXTS: tuple[str, ...] = ("direct", "engine")
# Where the checked kernels check the slots in a separate one-program-per-row launch instead of in every
# program's prologue (see checked_launch): past one scan block (B > GUARD_CHUNK) and from this many (row, value
# head) pairs. In the prologue every program rescans the earlier rows (O(B) loads each), a cost that grows
# with B; the separate launch costs about one launch under graph replay, a share that shrinks with B * HV.
# Chosen from benchmarks/guard_placement.py on an H200 (docs/performance-log.md, "Runtime guard").
SEPARATE_CHECK_MIN_PAIRS = 4096
CHECK_SCAN_MAX = 1024  # rows the one-program-per-row check compares in one vector load
_MAX_BATCH_SHAPES = 4096  # batch sizes whose check constants a CheckLaunch keeps
FAULT_CODES = {1: "GDR241", 2: "GDR242", 3: "GDR247"}
# The most flagged looks a buffer lets pass after a read that found faults before it reads again: a read
# synchronises the device, and a fault that repeats on every call (a bad slot table in warn or record mode, slot
# 0 in a direct call, which is a note) must not turn every decode call into a sync. Fewer pass when faults come
# faster: at the last read's rate, the records between two reads fill at most half the buffer, so a new fault
# among repeated ones is still itemised.
REPEAT_LOOK_INTERVAL = 64


def is_capturing() -> bool:
    """Whether the current CUDA stream is capturing a graph (then nothing may touch the host)."""
    try:
        return bool(torch.cuda.is_available() and torch.cuda.is_current_stream_capturing())
    except Exception:  # noqa: BLE001 - no CUDA runtime: nothing can be capturing
        return False


# A Triton kernel: its parameters take Triton's values, and Triton reads their annotations (tl.constexpr).
@triton.jit(do_not_specialize=["batch", "stride_index", "pool_slots", "tag"])  # type: ignore[untyped-decorator]
def slot_guard_kernel(slots, safe_slots, batch, stride_index, pool_slots, counter, records, flag, tag,  # type: ignore[no-untyped-def]
                      SKIP_AT_OR_BELOW: tl.constexpr, RESERVED_ZERO: tl.constexpr, SCAN_BLOCK: tl.constexpr,
                      SCAN_LOOP: tl.constexpr, MAX_RECORDS: tl.constexpr, RELEASE: tl.constexpr):
    """One program per row: check the row's slot, record a fault, and write the slot the engine's kernel may
    use (-1, "skip", for a faulty row; below every engine's skip sentinel). RELEASE: let a decode kernel
    launched programmatically after this one start at once (it waits for these writes before reading them)."""
    if RELEASE:
        release_dependents()
    i_n = tl.program_id(0).to(tl.int64)
    slot = tl.load(slots + i_n * stride_index).to(tl.int64)
    block = load_scan_block(slots, slot, i_n, batch, stride_index, SKIP_AT_OR_BELOW, RESERVED_ZERO, SCAN_BLOCK,
                            SCAN_LOOP)
    computed, fault = guard_row(slots, slot, i_n, batch, stride_index, pool_slots, block, SKIP_AT_OR_BELOW,
                                RESERVED_ZERO, SCAN_BLOCK, SCAN_LOOP)
    record_fault(counter, records, flag, fault, i_n, slot, tag, slots, stride_index, MAX_RECORDS, SCAN_BLOCK)
    live_input = slot > SKIP_AT_OR_BELOW
    safe = tl.where(computed | ~live_input, slot, -1)
    tl.store(safe_slots + i_n, safe.to(safe_slots.dtype.element_ty))


@dataclass(frozen=True)
class Fault:
    """One fault read back from the device: which rule, where, and the call site's label."""

    code: str
    row: int
    slot: int
    layer: str
    pool_slots: int | None = None
    first_row: int | None = None  # GDR242: the earlier row that named the slot first
    context: Context | None = None  # whose call recorded it (the call site's), when known


INITIAL_TAG_CELLS = 1024  # call sites (layer, pool size, context) before the tag table first grows: 16 KiB
OVERFLOW_TAG = -1  # in a record: a call site whose tag got no cell (read as "call -1")


def _tag_cells(count: int, device: torch.device) -> torch.Tensor:
    """`count` tags as int64 cells 16 bytes apart (row t holds t): a cell's address has the same alignment for
    every tag, so the kernels that read one compile to one binary."""
    return (torch.arange(2 * count, dtype=torch.int64, device=device) // 2).view(count, 2)


class FaultBuffer:
    """A device buffer of fault records: `counter` int64[2] holds the number of faults recorded (never reset) and
    the first fault number not to be kept; `records` int64[max_records, 5] holds (code, row, slot, tag, stamp) of
    the first `max_records` faults since the host's last read (fault i in row i % max_records, stamped i + 1 once
    written: `_triton_common.record_fault`); later ones are counted, not kept. `flag` int32[1], in host memory, is
    set by every kernel that records one. Tags name call sites (`tag_for`). The host remembers how many faults it
    has handed out (`take`)."""

    def __init__(self, device: Any, max_records: int = DEFAULT_MAX_RECORDS) -> None:
        self.max_records = checked("max_records", max_records)
        self.device = torch.device(device)
        self.counter = torch.tensor([0, self.max_records], dtype=torch.int64, device=self.device)
        self.records = torch.zeros(self.max_records, 5, dtype=torch.int64, device=self.device)
        self.tag_cells = _tag_cells(INITIAL_TAG_CELLS, self.device)
        self.overflow_cell = torch.full((2,), OVERFLOW_TAG, dtype=torch.int64, device=self.device)[:1]
        self._labels: list[tuple[str, int | None, Context | None]] = []
        self._tags: dict[tuple[str, int | None, Context | None], int] = {}
        self._lock = threading.Lock()
        self._read_lock = threading.Lock()  # one read at a time: each fault is handed to one reader
        self._faults_read = 0  # faults handed out (or counted as not kept) by `take` so far
        self._kept_until = self.max_records  # counter[1] as this host last set it
        # The count the last read saw: the kernels that numbered faults below it had run by the next read's
        # synchronisation, so a row of theirs unstamped then is one that was never kept.
        self._count_at_last_read = 0
        # The flag lives in host memory the kernels write through: pinned for CUDA, which unified addressing
        # maps into every device at the same address (a kernel's plain store lands in it over the bus). Read
        # through a NumPy view of that memory: a look is one host load, no tensor indexing, no CUDA call.
        self.flag = torch.zeros(1, dtype=torch.int32, pin_memory=self.device.type == "cuda")
        self.host_flag: Any = self.flag.numpy()
        self.looks_to_skip = 0  # flagged looks to let pass after a read that found faults (REPEAT_LOOK_INTERVAL)
        self.flagged_looks = 0  # flagged looks since the last read (the fault rate's denominator)
        self._launches: dict[tuple[Engine, Any], CheckLaunch] = {}
        self._guard_launches: dict[tuple[str, int, Context | None], GuardLaunch] = {}

    def check_launch(self, engine: Engine, device: Any) -> CheckLaunch:
        """The slot check that records into this buffer for `engine`'s calls on `device` (one per pair)."""
        key = (engine, device)
        launch = self._launches.get(key)
        if launch is None:
            launch = self._launches.setdefault(key, CheckLaunch(engine, self, device))
        return launch

    def guard_launch(self, label: str, pool_slots: int, context: Context | None = None) -> GuardLaunch:
        """What a guarded launch for the call site `label` passes to the kernel: this buffer's tensors and the
        site's tag (kept here, per buffer: a cache keyed by a buffer's id could hand a new buffer, given a dead
        one's id, the dead one's tensors)."""
        key = (label, pool_slots, context)
        launch = self._guard_launches.get(key)
        if launch is None:
            tag = self.tag_for(label, pool_slots, context)
            cell = self.tag_cell(tag)
            launch = GuardLaunch(self.counter, self.records, self.flag, self.max_records, tag, pool_slots, cell)
            if cell is not self.overflow_cell:  # (a site first seen during a capture gets its own cell later)
                launch = self._guard_launches.setdefault(key, launch)
        return launch

    def tag_cell(self, tag: int) -> torch.Tensor:
        """The device cell holding `tag` (16-byte aligned, as every cell: `tiling.GuardLaunch.tag_cell`). The table
        doubles when a tag outgrows it, except while a stream is capturing (nothing may be written to the device
        from the host then): that tag's cell is the overflow cell, whose faults name no call site."""
        with self._lock:
            if tag >= self.tag_cells.shape[0] and not is_capturing():
                cells = self.tag_cells.shape[0]
                while cells <= tag:
                    cells *= 2
                grown = _tag_cells(cells, self.device)  # earlier launches keep their views of the old table
                if self.device.type == "cuda":  # written on this thread's stream: done before any stream reads it
                    torch.cuda.synchronize(self.device)
                self.tag_cells = grown
            if tag >= self.tag_cells.shape[0]:
                return self.overflow_cell
            return self.tag_cells[tag, :1]

    def tag_for(self, label: str, pool_slots: int | None = None, context: Context | None = None) -> int:
        """The tag of a call site: its label, pool size and whose calls it makes (`context`: a fault's severity is
        the recording call's, whoever reads it)."""
        key = (label, pool_slots, context)
        tag = self._tags.get(key)
        if tag is None:
            with self._lock:
                tag = self._tags.setdefault(key, len(self._labels))
                if tag == len(self._labels):
                    self._labels.append(key)
        return tag

    def look(self, context: Context, engine: Engine) -> None:
        """Raise the faults of earlier calls if a kernel has flagged one, without waiting on the device when none
        has (one read of the host flag). Faults are read, and `PendingFaults` raised for errors, once the flag
        is seen: a kernel's flag lands when it runs, so a call notices the faults of calls whose kernels have
        run by then; after a read that found faults, up to REPEAT_LOOK_INTERVAL flagged looks pass (fewer when
        faults come faster). Nothing is read while a stream is capturing, nor when the device cannot be
        synchronised now (the flag stays set for a later look)."""
        if not self.host_flag[0]:
            return
        self.flagged_looks += 1
        if self.looks_to_skip > 0:
            self.looks_to_skip -= 1
            return
        looks = self.flagged_looks
        try:
            faults, total = self.take()
        except RuntimeError:  # e.g. another thread's stream is capturing: an explicit read raises, a look waits
            return
        if total:
            room = max(1, self.max_records // 2)
            self.looks_to_skip = max(0, min(REPEAT_LOOK_INTERVAL, room * looks // total - 1))
        raise_errors(faults, total, context, engine, earlier=True)

    def take(self) -> tuple[list[Fault], int]:
        """Read the faults recorded since the last read (synchronises the device): (faults, their count,
        including those not kept). Returns ([], 0) without touching the device while a stream is capturing.

        Nothing on the device is reset: a fault that a kernel of another host thread records while this runs
        gets a number past the count read here, and is read next time. A row is shown only when it holds the
        stamp of the fault expected there. An unstamped row of a fault numbered before the last read's count
        was never kept (its kernel has run by now) and is counted; one numbered later may be a kernel of
        another thread still storing it: this read ends there, and the next one takes it."""
        if is_capturing():
            return [], 0
        with self._read_lock:
            self.looks_to_skip = self.flagged_looks = 0  # a read restarts the spacing of looks (see `look`)
            # Cleared before the read: a fault recorded from here on sets it again (at worst one look finds nothing).
            self.host_flag[0] = 0
            try:
                if self.device.type == "cuda":  # every stream's kernels, not only the current one's
                    torch.cuda.synchronize(self.device)
                count = int(self.counter[0].item())
                if count < self._faults_read:  # the counter was set back by hand: start over
                    self._faults_read = self._count_at_last_read = 0
                settled, self._count_at_last_read = self._count_at_last_read, count
                if count == self._faults_read:
                    return [], 0
                first = self._faults_read
                rows = self._copy_rows(first, min(count, self._kept_until))
            except RuntimeError:  # e.g. another thread's stream is capturing: the faults stay flagged for later
                self.host_flag[0] = 1
                raise
            kept, end = [], count
            for number, row in enumerate(rows, start=first):
                if row[4] == number + 1:
                    kept.append(row)
                elif number >= settled:  # numbered after the last read: perhaps still being stored
                    end = number
                    self.host_flag[0] = 1  # for the next look
                    break
            total, self._faults_read = end - first, end
            if end + self.max_records != self._kept_until:
                self._kept_until = end + self.max_records
                self.counter[1:].fill_(self._kept_until)
        faults = []
        for code, row_index, slot, tag, _ in sorted(kept, key=lambda record: (record[3], record[1])):
            label, pool_slots, context = (self._labels[tag] if 0 <= tag < len(self._labels)
                                          else (f"call {tag}", None, None))
            kind, first_row = code & 255, (code >> 8) - 1
            if kind in FAULT_CODES:  # (always, for a stamped row)
                faults.append(Fault(FAULT_CODES[kind], int(row_index), int(slot), label, pool_slots,
                                    first_row if first_row >= 0 else None, context))
        return faults, total

    def _copy_rows(self, first: int, end: int) -> list[list[int]]:
        """The rows of faults first..end-1 (at most max_records, each row written by one fault since the last
        read), in that order: one or two slices. The stamps are copied before the fields (copies on one stream
        run in order): a stamp read as written means that its fields, read after it, are that fault's."""
        start = first % self.max_records
        stop = start + (end - first)
        slices = [slice(start, min(stop, self.max_records))] + ([slice(0, stop - self.max_records)]
                                                                if stop > self.max_records else [])
        stamps: list[int] = [stamp for rows in slices for stamp in self.records[rows, 4].tolist()]
        fields: list[list[int]] = [row for rows in slices for row in self.records[rows, :4].tolist()]
        return [row + [stamp] for row, stamp in zip(fields, stamps, strict=True)]


_BUFFERS: dict[Any, FaultBuffer] = {}


def _device_key(device: Any) -> torch.device:
    """`device` with its index ("cuda" is the current CUDA device), so that one device has one buffer."""
    key = torch.device(device)
    if key.type == "cuda" and key.index is None:
        key = torch.device("cuda", torch.cuda.current_device())
    return key


def default_buffer(device: Any) -> FaultBuffer:
    """The process-wide fault buffer of `device` (the checked kernels' direct calls use it)."""
    key = device if isinstance(device, torch.device) and device.index is not None else _device_key(device)
    buffer = _BUFFERS.get(key)
    if buffer is None:
        buffer = _BUFFERS.setdefault(key, FaultBuffer(key))
    return buffer


def fault_diagnostic(fault: Fault, context: Context, engine: Engine) -> Diagnostic:
    """The contract diagnostic of a device fault, built from the rule's registry entry (message, name, fixes).

    GDR247 is an error only for the engine's own calls (deployment, capture, a guard with an engine): the
    kernel accepts slot 0, only sglang's allocator reserves it, so a direct call gets a note. Whose call it was
    is the recording call site's (`Fault.context`), else the reader's `context`.
    """
    context = fault.context or context
    rule = RULES[fault.code]
    if fault.code == "GDR241":
        size = fault.pool_slots if fault.pool_slots is not None else "?"
        last = fault.pool_slots - 1 if fault.pool_slots else "?"
        values: dict[str, Any] = {"slot": fault.slot, "row": fault.row, "slots": counted(size, "slot"), "last": last}
        fixes = ["size the pool for every slot the allocator hands out, or fix the slot table"]
    elif fault.code == "GDR242":
        values = {"slot": fault.slot, "rows": f"{fault.first_row}, {fault.row}"}
        fixes = [f"give row {fault.row} its own slot"]
    else:
        values = {"row": fault.row}
        fixes = ["give this request a slot from 1..size, or mark a padding row with -1"]
    severity: Severity | None = None if context == "engine" or fault.code != "GDR247" else "info"
    computed = "the row was computed" if fault.code == "GDR247" else \
        "the row was skipped (its `out` row is zero, its state untouched)"
    notes = [f"in {fault.layer}", f"found on the device ({engine}); {computed}"]
    if severity == "info":
        notes.append("a direct call: only the engines' allocators reserve slot 0")
    finding = Finding(values, fixes, notes, argument="ssm_state_indices", severity=severity)
    diagnostic = rule.diagnostic_with(finding, values, {"layer": fault.layer, "row": fault.row, "slot": fault.slot})
    if severity is not None and diagnostic.severity != severity:
        diagnostic = replace(diagnostic, severity=severity)
    return diagnostic


# What a later call that finds an earlier call's faults says of itself: it raises before it launches anything.
EARLIER_CALL = "recorded by an earlier call; this call did not run"


class PendingFaults(ValueError):
    """Faults the device recorded, raised at a point the caller chose (`raise_pending`), or by a later checked
    call before it runs (`earlier`): the errors among those read, and `total`, every fault counted (errors
    read, and those not kept)."""

    def __init__(self, diagnostics: list[Diagnostic], total: int, earlier: bool = False) -> None:
        if diagnostics:
            first = diagnostics[0]
            more = f" (and {total - 1} more fault{'s' if total > 2 else ''})" if total > 1 else ""
            text = f"{first.code}: {first.message} [{first.notes[0]}]{more}"
        else:
            text = f"{counted(total, 'fault')} {UNLISTED_FAULTS}"
        super().__init__(f"{text} ({EARLIER_CALL})" if earlier else text)
        self.diagnostics = diagnostics
        self.total = total
        self.earlier = earlier


def raise_errors(faults: list[Fault], total: int, context: Context, engine: Engine, earlier: bool = False
                 ) -> list[Diagnostic]:
    """The diagnostics of `faults` (read by `take`, `total` counted); PendingFaults when one is an error, or, for
    the engine's calls (where every slot fault is one), when some of them were not kept. (A direct
    call's unlisted faults may be notes, GDR247 on slot 0: they do not raise alone.) `earlier`: a later call
    found them, and raises instead of running."""
    diagnostics = diagnostics_of(faults, context, engine)
    errors = [d for d in diagnostics if d.severity == "error"]
    if errors or (context == "engine" and total > len(faults)):
        raise PendingFaults(errors, total - (len(diagnostics) - len(errors)), earlier)
    return diagnostics


def diagnostics_of(faults: list[Fault], context: Context, engine: Engine) -> list[Diagnostic]:
    return [fault_diagnostic(f, context, engine) for f in faults]


def raise_pending(device: Any = None, *, context: Context = "direct", engine: Engine = "sglang") -> list[Diagnostic]:
    """Read the checked kernels' fault buffer of `device` (default: the current CUDA device, else CPU) and raise
    `PendingFaults` (a ValueError) if it holds an error; returns the diagnostics otherwise (notes only)."""
    if device is None:
        device = torch.device("cuda", torch.cuda.current_device()) if torch.cuda.is_available() else "cpu"
    if torch.device(device).type == "cuda" and not torch.cuda.is_available():
        return []  # no checked kernel can have run there
    buffer = _BUFFERS.get(_device_key(device))
    if buffer is None:
        return []
    faults, total = buffer.take()
    return raise_errors(faults, total, context, engine)


# -- shapes once ---------------------------------------------------------------------------------------------
TENSOR_POSITIONS = (0, 1, 2, 3, 4, 6, 7, 8)  # every tensor argument of the packed-decode API


_SCALAR_TYPES = (bool, int, float, type(None))


def _scalar_key(value: Any) -> Any:
    """A scalar argument in a signature: its value and type when it is a plain number (a NaN scale or bound is
    judged on its own), else its type (an unhashable list, a tensor)."""
    kind = type(value)
    if kind is float and value != value:  # NaN is not equal to itself: key it by name
        return (kind, "nan")
    if kind in _SCALAR_TYPES:
        return (kind, value)
    if isinstance(value, torch.Tensor):  # what it is, never its values (reading them would sync the device)
        return (kind, value.shape, value.dtype, value.device)
    # Anything else (a list, a string) by its bounded repr: a different value is judged again, so a refusal
    # names the value of this call.
    return (kind, reprlib.repr(value))


def signature_of(args: tuple[Any, ...]) -> tuple[Any, ...]:
    """What the shape-level verdict depends on: shapes, strides, dtypes and devices of the tensors, and the
    scalars (plain numbers by value; no index value is read)."""
    key: list[Any] = []
    for position in TENSOR_POSITIONS:
        t = args[position]
        if isinstance(t, torch.Tensor):
            try:
                key.append((t.shape, t.stride(), t.dtype, t.device))
            except (RuntimeError, NotImplementedError):  # sparse or nested: no strides (judged: GDR228)
                key.append((type(t), t.layout, t.dtype, t.device))
        else:
            key.append(type(t))
    key.extend(_scalar_key(a) for a in args[9:])
    key.append(_scalar_key(args[5]))
    return tuple(key)


@dataclass
class Verdict:
    """The shape-level result for one call signature: errors that refuse the call, and other diagnostics. The
    rules that depend on where the tensors lie (`address_rules`: `out` overlapping an input) are judged per call
    instead, from `extents` (`hotpath.byte_extents`; None where an argument is no strided tensor)."""

    errors: list[Diagnostic]
    others: list[Diagnostic]
    pool_slots: int | None  # None: no pool to check slots against (a refused call); 0 for an empty pool
    extents: tuple[int, ...] | None = None


def shape_verdict(variant: str, args: tuple[Any, ...], engine: Engine,
                  extra: Callable[[Any], list[Diagnostic]] | None = None, engine_kernel: bool = False) -> Verdict:
    """Run the contract without reading index values (no sync) and split its diagnostics. `engine_kernel`: the
    call goes to the engine's own kernel (the runtime guard), whose launch grid limits apply (GDR244, per the
    release's grid); else to ours, whose grid has no such limit."""
    check = CONTRACT_CHECKS[variant]
    # A call about to run cannot take a meta tensor (a shape-only stand-in for `check_packed_decode`): GDR228.
    report = meta_report(dict(zip(ARGUMENTS, args, strict=False))) or check(*args, engine=engine, read_values=False)
    per_call = address_rules()
    diagnostics = [d for d in report.diagnostics if (engine_kernel or d.code not in NOT_APPLICABLE_TO_OUR_KERNELS)
                   and d.code not in per_call]
    if extra is not None:
        diagnostics += extra(args)
    errors = [d for d in diagnostics if d.severity == "error"]
    others = [d for d in diagnostics if d.severity != "error"]
    state = args[6]
    pool_slots = int(state.shape[0]) if not errors and getattr(state, "ndim", 0) == 4 else None
    return Verdict(errors, others, pool_slots, byte_extents(args))


_CHECK_CONSTEXPRS = ("SKIP_AT_OR_BELOW", "RESERVED_ZERO", "SCAN_BLOCK", "SCAN_LOOP", "MAX_RECORDS", "RELEASE")


class CheckLaunch:
    """The device-side slot check of one (engine, device, fault buffer): launches `slot_guard_kernel` and
    returns the indices an engine's kernel may use (faulty rows set to -1).

    Built once per call signature; a call does one allocation and one launch. After the first launch of a
    variant on CUDA, launches go straight to the compiled kernel through `DirectLauncher` (the JIT's per-call
    binding and specialization were most of the guard's host time). The kernel's ints are not specialized
    (`do_not_specialize`), so a variant is fixed by the index dtype, the index pointer's 16-byte alignment and
    the batch (the grid and the scan's shape; `safe` is a fresh allocation: torch's CUDA allocator aligns every
    block to 512 bytes)."""

    __slots__ = ("buffer", "profile", "device_index", "launcher", "programmatic", "_shapes")

    def __init__(self, engine: Engine, buffer: FaultBuffer, device: Any) -> None:
        self.buffer = buffer
        self.profile = check_engine(engine)
        self.device_index = _device_key(device).index if torch.device(device).type == "cuda" else None
        # Whether a checked kernel can be launched programmatically after this check (PDL, sm_90+), the launch
        # between the two then hidden behind the check (checked_launch).
        self.programmatic = programmatic_launch_supported(_device_key(device))
        self.launcher = DirectLauncher(slot_guard_kernel)
        # (batch, release) -> (constants by name, warps): see `shape_for`
        self._shapes: dict[tuple[int, bool], tuple[dict[str, Any], int]] = {}

    def shape_for(self, batch: int, release: bool = False) -> tuple[dict[str, Any], int]:
        """The check's constants for `batch` rows: each program compares its slot with every earlier row's in one
        vector load up to CHECK_SCAN_MAX rows (a loop of such blocks beyond), so the slowest program waits for
        one load, not one per 128 rows (the decode kernel waits for the slowest). `release`: see `__call__`."""
        shape = self._shapes.get((batch, release))
        if shape is None:
            if len(self._shapes) >= _MAX_BATCH_SHAPES:  # eager engines with ever-new batch sizes: stay bounded
                self._shapes.clear()
            block, loop = scan_shape(batch, CHECK_SCAN_MAX)
            constants = (self.profile.skip_at_or_below, self.profile.reserved_slot_zero, block, loop,
                         self.buffer.max_records, release)
            shape = self._shapes[batch, release] = (dict(zip(_CHECK_CONSTEXPRS, constants, strict=True)),
                                                    4 if block >= 256 else 1)
        return shape

    def __call__(self, indices: torch.Tensor, batch: int, stride: int, pool_slots: int, tag: int,
                 release: bool = False) -> torch.Tensor:
        """Check `indices` (1-D, `batch` rows `stride` elements apart: known from the call signature).

        `release` (only where `programmatic`): let the next launch start at once, for a checked kernel launched
        programmatically after this one, which waits for the checked indices on the device before it reads
        them. Not for the engine guard's check: the engines launch their kernel plainly, so it starts after this
        grid ends whatever it releases (a release gains nothing there; it is safe before any successor, as
        `_triton_common.release_dependents` says)."""
        release = release and self.programmatic
        safe = torch.empty_like(indices)  # 1-D: dense, whatever the strides of `indices`
        if not batch:
            return safe
        buffer = self.buffer
        args = (indices, safe, batch, stride, pool_slots, buffer.counter, buffer.records, buffer.flag, tag)
        if self.device_index is None:  # not CUDA: no compiled launcher to go to (the Triton interpreter)
            constexprs, warps = self.shape_for(batch, release)
            self.launcher.kernel[(batch,)](*args, **constexprs, num_warps=warps)
            return safe
        key = (indices.dtype, indices.data_ptr() % 16 == 0, batch, release)
        if not self.launcher.run_cached(key, args):
            constexprs, warps = self.shape_for(batch, release)
            self.launcher.launch(key, batch, self.device_index, args, constexprs, {"num_warps": warps})
        return safe


# -- the checked kernels ---------------------------------------------------------------------------------------
_VERDICTS: dict[tuple[Any, ...], Verdict] = {}
_VERDICTS_LOCK = threading.Lock()
VERDICT_CACHE_SIZE = 4096  # distinct signatures kept; engines use a handful (one per batch size bucket)


def cached_verdict(variant: str, engine: Engine, args: tuple[Any, ...]) -> Verdict:
    """The shape verdict of this call's signature: one dictionary lookup after the first call."""
    key = (variant, engine, *signature_of(args))
    verdict = _VERDICTS.get(key)
    if verdict is None:
        verdict = shape_verdict(variant, args, engine)
        with _VERDICTS_LOCK:
            if len(_VERDICTS) >= VERDICT_CACHE_SIZE:
                _VERDICTS.clear()
            _VERDICTS[key] = verdict
    return verdict


def checked_launch(variant: str, launch: Callable[..., Any], args: tuple[Any, ...], engine: Engine, context: Context,
                   buffer: FaultBuffer | None, label: str | None) -> tuple[torch.Tensor, torch.Tensor]:
    """Shape errors raise at once (ValueError, the contract's first error); value faults are recorded on the
    device and raised by `raise_pending` or by the next eager call that finds them (no sync is forced)."""
    if context not in CONTEXTS:
        raise ValueError(f"unknown context {context!r}; expected one of: {', '.join(CONTEXTS)}")
    if buffer is not None and not isinstance(buffer, FaultBuffer):
        raise TypeError(f"faults is {described(buffer)}: must be a gdr_check.kernel.FaultBuffer, or None for the "
                        f"device's buffer")
    verdict = cached_verdict(variant, engine, args)
    if verdict.errors:
        raise ValueError(verdict.errors[0].message)
    if verdict.extents is not None and out_overlaps(args, verdict.extents):
        aliased = address_errors(variant, args, engine)
        if aliased:
            raise ValueError(aliased[0].message)
    state = args[6]
    if state.device.type == "cpu" and not INTERPRETED:  # Triton has no CPU driver: say so, not its traceback
        cpu = RULES["GDR251"].diagnostic(Finding({"device": "cpu"}, argument="mixed_qkv"))
        raise ValueError(f"{cpu.message} (set TRITON_INTERPRET=1 before triton is imported, or move them to the GPU)")
    buffer = buffer if buffer is not None else default_buffer(state.device)
    if buffer.host_flag[0] and not is_capturing():
        buffer.look(context, engine)
    # (a call the contract accepted has a 4-D pool: `pool_slots` is its size, 0 for an empty one)
    guard = buffer.guard_launch(label or f"{variant} packed decode", verdict.pool_slots or 0, context)
    indices = args[8]
    batch = indices.shape[0]
    if batch > GUARD_CHUNK and batch * args[6].shape[1] >= SEPARATE_CHECK_MIN_PAIRS:
        # Past one scan block, every program of a row would rescan all earlier rows (O(B) loads each): one
        # program per row checks instead, and the kernel runs on the sanitised indices (each inside the pool,
        # -1, or a skip value passed through as it was: the unguarded kernel reads and writes only live rows'
        # slots, so it is memory-safe on them). The cost is one more launch (docs/performance-log.md), whose gap
        # programmatic dependent launch hides where the device has it.
        check = buffer.check_launch(engine, indices.device)
        safe = check(indices, batch, indices.stride(0), guard.pool_slots, guard.tag, release=True)
        return launch(*args[:8], safe, *args[9:], engine=engine,  # type: ignore[no-any-return]
                      programmatic=check.programmatic)
    return launch(*args, engine=engine, guard=guard)  # type: ignore[no-any-return]  # launch: Callable[..., Any]
