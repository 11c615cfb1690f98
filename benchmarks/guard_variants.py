"""What each part of the checked kernel costs: copies of the package with one part removed or changed, timed
side by side in one process under CUDA-graph replay with the state cold in L2 (the inputs and graph method of
`decode_vs_sglang.py`), interleaved rounds.

Each variant is the package's source (the working tree, or ``--base REV`` for a git revision) with the
string replacements of its entry in VARIANTS, imported under its own name (``gdr_check_<variant>``). Variants
that only remove work are experiments, not fixes: they show where the checked kernel's time goes (a variant
without the fault record records nothing). A replacement that no longer matches the source stops the run with
the variant's name.

    PYTHONPATH=src python benchmarks/guard_variants.py --variants tree no_record no_scan --base HEAD \\
        --points qwen3-next@4:1:bf16 kimi-linear@1:128:bf16        # JSON under $OUT

Columns: ``<variant>:ours`` (the unchecked launch; for ``tree`` and ``base``, and with ``--ours`` for every
variant: the kernel experiments) and ``<variant>:checked`` (`packed_decode` / `kda_packed_decode`,
context="engine"; left out with ``--no-checked``), each with its ratio to ``tree:ours``.
"""

from __future__ import annotations

import argparse
import importlib
import io
import json
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import decode_vs_sglang as bench
import torch
from decode_bandwidth import capture, replay_us

ROOT = Path(__file__).resolve().parent.parent
COMMON = "kernel/_triton_common.py"
KERNELS = ("kernel/gdn/fused.py", "kernel/kda/fused.py")
RECORD_BRANCH = """    if fault != 0:  # a branch, not a masked atomic: a clean row issues no atomic and waits on none
        code = fault.to(tl.int64)
        if SCAN_BLOCK != 0:
            if fault == FAULT_DUPLICATE:
                code += (first_row_with(slots, slot, i_n, stride_index, SCAN_BLOCK) + 1) * 256
        index = tl.atomic_add(counter, 1)"""
# A patch: (file under the package, old text, new text), or (file, a function of the file's text).
Patch = tuple[str, str, str] | tuple[str, Callable[[str], str]]


def record_out_of_line(text: str) -> str:
    """`record_fault` with its branch's body moved into a function of its own (`noinline`), called from the
    branch: the body taken from the source as it is."""
    start = text.index("@triton.jit\ndef record_fault(")
    end = text.index("\n\n\n", start)
    function = text[start:end]
    signature = function[len("@triton.jit\n"):function.index("):") + 2]
    names = ", ".join(part.split(":")[0].strip() for part in signature[signature.index("(") + 1:-2].split(","))
    branch = function.index("    if fault != 0:")
    body = "\n".join(line[4:] for line in function[branch:].split("\n")[1:])
    out_of_line = f"@triton.jit(noinline=True)\n{signature.replace('record_fault(', '_record_body(')}\n{body}"
    inline = f"{function[:branch]}    if fault != 0:\n        _record_body({names})"
    return f"{text[:start]}{out_of_line}\n\n\n{inline}{text[end:]}"


# name -> its patches
VARIANTS: dict[str, list[Patch]] = {
    "tree": [],
    # no duplicate scan (still guarded: the range check, the record)
    "no_scan": [("kernel/tiling.py", "    block, loop = scan_shape(batch) if guard is not None else (0, False)",
                 "    block, loop = (0, False)")],
    # no fault record at all (the scan and the gated stores kept)
    "no_record": [(k, "        record_fault(fault_counter", "        if False:\n          record_fault(fault_counter")
                  for k in KERNELS],
    # stores not gated on the scan's verdict (the scan and the record kept)
    "ungated_stores": [p for k in KERNELS for p in (
        (k, "    stored_rows = tl.where(computed, V, 0)", "    stored_rows = tl.where(live, V, 0)"),
        (k, "tl.where(computed, o, 0.0)", "o"))],
    # the record without the duplicate's first row
    "record_without_first_row": [(COMMON, "        if SCAN_BLOCK != 0:\n            if fault == FAULT_DUPLICATE:",
                                  "        if False:\n            if fault == FAULT_DUPLICATE:")],
    # the record reads the slot again inside its branch (nothing but the fault code live across the main path)
    "record_reloads_slot": [(COMMON, "        code = fault.to(tl.int64)\n",
                             "        code = fault.to(tl.int64)\n"
                             "        slot = tl.load(slots + i_n * stride_index).to(tl.int64)\n")],
    # no branch: a masked atomic and masked stores (no first row)
    "masked_record": [
        (COMMON, RECORD_BRANCH, "    if True:\n        code = fault.to(tl.int64)\n"
                                "        index = tl.atomic_add(counter, 1, mask=fault != 0)"),
        (COMMON, "        tl.store(record + fields, values)\n",
         "        tl.store(record + fields, values, mask=fields < tl.where(fault != 0, 4, 0))\n"),
        (COMMON, '        tl.atomic_xchg(record + 4, index + 1, sem="release")\n',
         '        tl.atomic_xchg(record + 4, index + 1, sem="release", mask=fault != 0)\n'),
        (COMMON, "        tl.store(flag, 1)\n", "        tl.store(flag, 1, mask=fault != 0)\n")],
    # the record's body in a function of its own (a call, not inlined), the branch around it inline
    "record_out_of_line": [(COMMON, record_out_of_line)],
    # the record without the host flag's store
    "record_without_flag": [(COMMON, "        tl.store(flag, 1)\n", "")],
    # the record without its atomic (records at index 0)
    "record_without_atomic": [(COMMON, "        index = tl.atomic_add(counter, 1)\n", "        index = i_n * 0\n")],
    # the record's atomic without its stores (the fields, the stamp and the flag)
    "record_without_stores": [(
        COMMON,
        "        tl.store(record + fields, values)\n",
        "        tl.store(records + fields, values * 0, mask=fields < 0)\n"), (
        COMMON,
        '            tl.debug_barrier()\n            tl.atomic_xchg(record + 4, index + 1, sem="release")\n'
        "        tl.store(flag, 1)\n", "")],
    # the separate check from 4096 pairs at any batch above one (not only past one 128-row scan block)
    "separate_from_4096_pairs": [(
        "kernel/device_guard.py",
        "    if batch > GUARD_CHUNK and batch * args[6].shape[1] >= SEPARATE_CHECK_MIN_PAIRS:",
        "    if batch > 1 and batch * args[6].shape[1] >= SEPARATE_CHECK_MIN_PAIRS:")],
}
# Kernel experiments (time them with --ours): the small-batch dependent chain.
PREFETCH_LOAD = ("        next_tile = load_state_tile(head_state, v_start + tl.arange(0, BV), state_rows, K, BK, "
                 "STATE_EVICTION)\n")
# (the prefetched first tile is loaded in COMMON; the one loaded after the gates, in each kernel)
STATE_BARRIER = [(f, PREFETCH_LOAD, PREFETCH_LOAD + "        tl.debug_barrier()\n") for f in (COMMON, *KERNELS)]
GDN_DECAY_IN_TILE = [
    ("kernel/gdn/fused.py", "            S = next_tile.to(tl.float32)\n",
     "            S = next_tile.to(tl.float32) * decay\n"),
    ("kernel/gdn/fused.py", "STATE_EVICTION).to(tl.float32)\n        else:",
     "STATE_EVICTION).to(tl.float32) * decay\n        else:"),
    ("kernel/gdn/fused.py", "        u = beta * (v - decay * predicted)\n        o = decay * read + u * k_dot_q\n",
     "        u = beta * (v - predicted)\n        o = read + u * k_dot_q\n"),
    ("kernel/gdn/fused.py", "S * decay + u[:, None] * k[None, :]", "S + u[:, None] * k[None, :]")]


SCANNED_RULE = """    if scanned and config.tiles_per_program == 1 and not config.prefetch:
        return replace(config, prefetch=True)
"""
SCANNED_RULE_WITH = """    if scanned and config.tiles_per_program == 1:
        return replace(config, prefetch=True, {})
"""


def small_rows(bounds: tuple[int, ...], transform: Callable[[int, str], tuple[int, str]]) -> Callable[[str], str]:
    """A patch of tiling.py: in the table rows of both kernels whose bound is in `bounds`, each
    `TileConfig(rows, ...)` rewritten by `transform(rows, the rest of its arguments)`."""
    def tiling(match: re.Match[str]) -> str:
        rows, rest = transform(int(match.group(1)), match.group(2))
        return f"TileConfig({rows}{rest})"

    def patch(text: str) -> str:
        lines = text.split("\n")
        for number, line in enumerate(lines):
            bound = re.match(r"    \((\d+), TileConfig\(", line)
            if bound and int(bound.group(1)) in bounds:
                lines[number] = re.sub(r"TileConfig\((\d+)([^()]*)\)", tiling, line)
        return "\n".join(lines)
    return patch


VARIANTS.update({
    # a scheduling barrier right after the first state tile's load: nothing after it moves above it, so the
    # q/k loads and the gate arithmetic cannot push the state's load back
    "state_barrier": STATE_BARRIER,
    # GDN's decay applied to the loaded tile (as KDA applies its gate vector): the gate arithmetic must be done
    # before the tile's first use, instead of after it, on the critical path
    "gdn_decay_in_tile": GDN_DECAY_IN_TILE,
    "gdn_decay_in_tile_barrier": GDN_DECAY_IN_TILE + STATE_BARRIER,
    # the small-batch rows (up to 128 pairs) with every single tile prefetched (the table loads some of them after
    # the gate arithmetic)
    "small_prefetch": [("kernel/tiling.py", small_rows((16, 32, 128), lambda rows, rest: (
        rows, rest.replace(", prefetch=False", ""))))],
    # up to 32 pairs: four warps per program, as many rows per warp (a quarter of the programs)
    "small_multiwarp": [("kernel/tiling.py", small_rows((16, 32), lambda rows, rest: (
        rows * 4, f"{rest}, num_warps=4")))],
    # the l2 norm by the approximate reciprocal square root (MUFU.RSQ) instead of a square root and a division
    "fast_norm": [(COMMON, "        q = q / tl.sqrt(tl.sum(q * q) + 1e-6)\n"
                           "        k = k / tl.sqrt(tl.sum(k * k) + 1e-6)\n",
                   "        q = q * tl.math.rsqrt(tl.sum(q * q) + 1e-6)\n"
                   "        k = k * tl.math.rsqrt(tl.sum(k * k) + 1e-6)\n")],
    # softplus through the base-2 approximations (MUFU.EX2 and MUFU.LG2) instead of libdevice's log
    "fast_softplus": [(COMMON, "tl.log(1.0 + tl.exp(z))",
                       "tl.log2(1.0 + tl.exp2(z * 1.4426950408889634)) * 0.6931471805599453")],
    # the guarded kernel takes the table's tiling where it scans for duplicates (no tile first where the table
    # loads a single tile after the gate arithmetic)
    "np_guarded": [("kernel/tiling.py", "    if scanned and config.tiles_per_program == 1 and not config.prefetch:",
                    "    if False:")],
    # where the guarded kernel scans, its single tile in at most 8 rows / without the evict-first hint / with q, k
    # and the gate rows kept in L2 (the table's tilings were chosen for the unguarded kernel)
    **{name: [("kernel/tiling.py", SCANNED_RULE, SCANNED_RULE_WITH.format(change))] for name, change in (
        ("scanned_8_rows", "block_v=min(config.block_v, 8)"), ("scanned_no_evict", "evict_first=False"),
        ("scanned_keep_inputs", "keep_inputs=True"),
        ("scanned_8_rows_no_evict", "block_v=min(config.block_v, 8), evict_first=False"))},
    # What the small-batch chain's parts cost (experiments that remove work; their results are wrong): the q/k
    # l2 norm, the gate loads and arithmetic (decay = beta = 1), the two reductions over K (zero)
    "no_norm": [(COMMON, "    if USE_L2NORM:\n        # eps", "    if False:\n        # eps")],
    "no_gates": [(k, "    beta = tl.sigmoid(tl.load(b + i_n * stride_b + i_hv).to(tl.float32))\n",
                  "    beta = tl.sigmoid(tl.load(b + i_n * stride_b + i_hv).to(tl.float32))\n    beta = 1.0\n"
                  + ("    decay = 1.0\n" if k.endswith("gdn.py") else
                     "    decay = tl.full([BK], 1.0, tl.float32)\n    decayed_k = k\n    decayed_q = q\n"))
                 for k in KERNELS],
    "no_reductions": [
        ("kernel/gdn/fused.py", "        predicted = tl.sum(S * k[None, :], axis=1)\n"
                          "        read = tl.sum(S * q[None, :], axis=1)\n",
         "        predicted = v * 0.0\n        read = v * 0.0\n"),
        ("kernel/kda/fused.py", "        u = beta * (v - tl.sum(S * decayed_k[None, :], axis=1))\n"
                          "        o = tl.sum(S * decayed_q[None, :], axis=1) + u * k_dot_q\n",
         "        u = beta * v\n        o = u * k_dot_q\n")],
    # no input loads at all (q, k, v and the gates constant): what the inputs' loads cost the chain
    "no_inputs": [
        (COMMON, "    q = tl.load(row + i_h * K + o_k, mask=mask_k, other=0.0, eviction_policy=EVICTION)"
                 ".to(tl.float32)\n"
                 "    k = tl.load(row + H * K + i_h * K + o_k, mask=mask_k, other=0.0, eviction_policy=EVICTION)"
                 ".to(tl.float32)\n",
         "    q = tl.where(mask_k, 0.5, 0.0)\n    k = tl.where(mask_k, 0.25, 0.0)\n"),
        *[(k, "        v = tl.load(v_row + rows, mask=rows < V, other=0.0).to(tl.float32)\n",
           "        v = (rows * 0).to(tl.float32) + 1.0\n") for k in KERNELS],
        ("kernel/gdn/fused.py", "    z = tl.load(a + i_n * stride_a + i_hv).to(tl.float32) "
                          "+ tl.load(dt_bias + i_hv).to(tl.float32)\n"
                          "    decay = tl.exp(-tl.exp(tl.load(A_log + i_hv).to(tl.float32)) * softplus(z, 20.0))\n"
                          "    beta = tl.sigmoid(tl.load(b + i_n * stride_b + i_hv).to(tl.float32))\n",
         "    decay = 0.9\n    beta = 0.5\n"),
        ("kernel/kda/fused.py",
         lambda text: re.sub(r"    z = tl\.load\(a \+ .*?    beta = tl\.sigmoid\(tl\.load\(b [^\n]*\n",
                                              "    decay = tl.where(mask_k, 0.9, 0.0)\n    decayed_k = decay * k\n"
                                              "    decayed_q = decay * q\n    beta = 0.5\n", text, count=1,
                                              flags=re.S))],
    # up to 32 pairs: half the rows per program (twice the programs)
    "small_half_rows": [("kernel/tiling.py", small_rows((16, 32), lambda rows, rest: (max(1, rows // 2), rest)))],
})
# no `out` store (the state's still written)
VARIANTS["no_out"] = [(k, "        tl.store(out_row + rows, tl.where(computed, o, 0.0).to(out.dtype.element_ty), "
                          "mask=rows < V)\n", "") for k in KERNELS]
# the kernel's grid, slot load and state stream with neither inputs nor reductions: ours as a slot copy; and
# that without the `out` store
VARIANTS["bare"] = VARIANTS["no_inputs"] + VARIANTS["no_reductions"]
VARIANTS["bare_no_out"] = VARIANTS["bare"] + VARIANTS["no_out"]
# launched programmatically (PDL) but without the early release: the next grid launches as this one's programs
# exit; and not launched programmatically at all (the launch before PDL became the default)
VARIANTS["no_release"] = [(COMMON, "        slots += wait_for_previous_grid()\n        release_dependents()\n",
                           "        slots += wait_for_previous_grid()\n")]
VARIANTS["no_pdl"] = [(COMMON, "    if requested is False or (requested is None and pairs > PROGRAMMATIC_MAX_PAIRS):\n",
                       "    if True:\n")]  # (after the separate slot check too)
# programmatic at every size (the default stops at `tiling.PROGRAMMATIC_MAX_PAIRS`), with and without the release
VARIANTS["pdl_all_sizes"] = [("kernel/tiling.py", "PROGRAMMATIC_MAX_PAIRS = 256\n",
                               "PROGRAMMATIC_MAX_PAIRS = 1 << 62\n")]
VARIANTS["pdl_all_sizes_no_release"] = VARIANTS["pdl_all_sizes"] + VARIANTS["no_release"]
# the fault record issued right after the guard's verdict, before the tile loop, instead of last: where no scan
# runs (one row, or the separate check's launches) and everywhere
_VERDICT = "                                    RESERVED_ZERO, SCAN_BLOCK, SCAN_LOOP)\n    else:\n"
_EARLY_RECORD = ("{condition}            record_fault(fault_counter, fault_records, fault_flag, "
                 "tl.where((i_hv == 0) & (v_start == 0), fault, 0), i_n, given_slot, fault_tag_cell, slots, "
                 "stride_index, MAX_RECORDS, SCAN_BLOCK, True)\n")
VARIANTS["record_early_unscanned"] = [p for k in KERNELS for p in (
    (k, "        record_fault(fault_counter", "        if SCAN_BLOCK != 0:\n          record_fault(fault_counter"),
    (k, _VERDICT, _VERDICT.replace("    else:\n", _EARLY_RECORD.format(condition="        if SCAN_BLOCK == 0:\n")
                                   + "    else:\n")))]
VARIANTS["record_early"] = [p for k in KERNELS for p in (
    (k, "        record_fault(fault_counter", "        if False:\n          record_fault(fault_counter"),
    (k, _VERDICT, _VERDICT.replace("    else:\n", _EARLY_RECORD.format(condition="        if True:\n")
                                   + "    else:\n")))]

def record_body(body: str) -> Callable[[str], str]:
    """A patch of `record_fault`: its branch's body replaced by `body` (lines at the branch's indentation + 4)."""
    def patch(text: str) -> str:
        start = text.index("    if fault != 0:", text.index("def record_fault("))
        end = text.index("\n\n\n", start)
        return f"{text[:start]}    if fault != 0:\n{body}{text[end:]}"
    return patch


# What kind of instruction in the record's branch costs the clean path (experiments: the records are not usable):
# plain stores only (the fields at the row's place in the ring and the flag: no atomic, no barrier), the flag's
# store alone, the counter's atomic alone
VARIANTS["record_plain_stores"] = [(COMMON, record_body(
    "        fields = tl.arange(0, 4)\n"
    "        if TAG_IN_CELL:\n"
    "            site = tl.load(tag)\n"
    "        else:\n"
    "            site = tag\n"
    "        values = tl.where(fields == 0, fault.to(tl.int64), tl.where(fields == 1, i_n.to(tl.int64), "
    "tl.where(fields == 2, slot, site)))\n"
    "        tl.store(records + (i_n % MAX_RECORDS) * 5 + fields, values)\n"
    "        tl.store(flag, 1)\n"))]
VARIANTS["record_flag_only"] = [(COMMON, record_body("        tl.store(flag, 1)\n"))]
VARIANTS["record_atomic_only"] = [(COMMON, record_body("        tl.atomic_add(counter, 1)\n"))]

# the guarded kernel as compiled, without the register cap that keeps it as resident as the unguarded one
VARIANTS["no_register_cap"] = [(COMMON, '        if plain is not None and "maxnreg" not in options and '
                                        'residency_model_applies(device_index):\n',
                                '        if False:\n')]
# the guarded kernel's small grids compiled under ptxas's own register target, not the lifted cap
VARIANTS["no_register_lift"] = [(COMMON, "            lifted = one_wave_register_cap(",
                                 "            lifted = None and one_wave_register_cap(")]
# KDA's fp32 tile at 129-256 (row, value head) pairs under a 128-register cap: 16 resident one-warp programs per SM
# instead of 12 at ptxas's 168, so 2048 programs (Kimi-Linear tp 1 B = 8, tp 4 B = 32) fit in one wave
VARIANTS["kda_256_cap_128"] = [("kernel/tiling.py", "    (256, TileConfig(16, evict_first=_E, prefetch=False), ",
                                "    (256, TileConfig(16, evict_first=_E, prefetch=False, max_registers=128), ")]
# the guarded kernel's single tile where the table puts it, not forced ahead of the gates by the duplicate scan
VARIANTS["scan_tile_unforced"] = [("kernel/tiling.py",
                                   "    if scanned and config.tiles_per_program == 1 and not config.prefetch:",
                                   "    if False:")]
# KDA's fp32 state at 129-256 pairs in 8-row tiles (4096 programs of fewer registers) or two warps per 16 rows
KDA_256_FP32 = "    (256, TileConfig(16, evict_first=_E, prefetch=False), "
VARIANTS["kda_256_block8"] = [("kernel/tiling.py", KDA_256_FP32,
                               "    (256, TileConfig(8, evict_first=_E, prefetch=False), ")]
VARIANTS["kda_256_block8_prefetch"] = [("kernel/tiling.py", KDA_256_FP32, "    (256, TileConfig(8, evict_first=_E), ")]
VARIANTS["kda_256_two_warps"] = [("kernel/tiling.py", KDA_256_FP32,
                                  "    (256, TileConfig(16, num_warps=2, evict_first=_E, prefetch=False), ")]
# The duplicate scan's slots read for the whole batch, not masked by the row's own slot (a slot-0 row reads past
# itself under RESERVED_ZERO): a load that need not wait for the slot's, which ptxas may issue with it
VARIANTS["scan_whole_batch"] = [(COMMON, "        end = tl.where(slot == 0, batch, i_n) if RESERVED_ZERO else i_n\n"
                                         "        return tl.load(slots + offsets * stride_index, mask=offsets < end, ",
                                 "        return tl.load(slots + offsets * stride_index, mask=offsets < batch, ")]
_SCAN_LOAD = "                               SCAN_BLOCK, SCAN_LOOP)\n"
_LATE_VERDICT = ("    if GUARD:  # after the loads are issued: out-of-range and repeated slots store nothing\n"
                 "        computed, fault = guard_row(slots, given_slot, i_n, batch, stride_index, pool_slots, scan, "
                 "SKIP_AT_OR_BELOW,\n                                    RESERVED_ZERO, SCAN_BLOCK, SCAN_LOOP)\n"
                 "    else:\n")
# the guard's verdict right after the scan's load in program order (before the q/k loads and the gate arithmetic),
# so that the scan's load is issued with the state's; the stores still the only ones to wait for it
VARIANTS["verdict_early"] = [
    (COMMON, "    scan = live  # (a placeholder: read only by the guard)\n",
     "    scan = live  # (a placeholder: read only by the guard)\n    computed = live\n    fault = live\n"),
    (COMMON, _SCAN_LOAD, _SCAN_LOAD + "        computed, fault = guard_row(slots, given_slot, i_n, batch, "
                                      "stride_index, pool_slots, scan, SKIP_AT_OR_BELOW,\n"
                                      "                                    RESERVED_ZERO, SCAN_BLOCK, SCAN_LOOP)\n"),
    (COMMON, "scan, row, q, k, \\\n        k_dot_q\n", "scan, row, q, k, \\\n        k_dot_q, computed, fault\n"),
    *[p for k in KERNELS for p in (
        (k, "        k_dot_q = start_program(", "        k_dot_q, computed, fault = start_program("),
        (k, _LATE_VERDICT, "    if not GUARD:\n"))]]
VARIANTS["scan_whole_batch_verdict_early"] = VARIANTS["scan_whole_batch"] + VARIANTS["verdict_early"]
# guarded launches on the table's rows alone (no `_GUARDED_ROWS`): the guarded tilings' A/B
VARIANTS["no_guarded_rows"] = [("kernel/tiling.py", "_GUARDED_ROWS: dict[tuple[str, int, bool], TileConfig] = {\n",
                                "_GUARDED_ROWS: dict[tuple[str, int, bool], TileConfig] = {} and {\n")]
MODELS = {"qwen3-next": "Qwen/Qwen3-Next-80B-A3B-Instruct", "qwen3.5": "Qwen/Qwen3.5-397B-A17B",
          "kimi-linear": "moonshotai/Kimi-Linear-48B-A3B-Instruct"}


def copy_package(source: Path, dest: Path, name: str, patches: list[Patch], kernel_only: bool = False) -> None:
    """`source` (a gdr_check package folder) as the package `name` under `dest`, with `patches` applied.

    `kernel_only`: the copy holds `kernel/` alone and imports the other layers from `gdr_check` itself (the
    variants patch only the kernels and their launch; 15 modules to compile per copy, not 77)."""
    tree = dest / name
    if kernel_only:
        tree.mkdir(parents=True)
        (tree / "__init__.py").write_text(f'"""{name}: the kernels of gdr_check with a variant\'s patches."""\n')
        shutil.copytree(source / "kernel", tree / "kernel", ignore=shutil.ignore_patterns("__pycache__"))
    else:
        shutil.copytree(source, tree, ignore=shutil.ignore_patterns("__pycache__"))
    for patch in patches:
        if kernel_only and not patch[0].startswith("kernel/"):
            raise SystemExit(f"variant {name}: patches {patch[0]}, outside the kernels")
        path = tree / patch[0]
        text = path.read_text(encoding="utf-8")
        try:
            patched = patch[1](text) if len(patch) == 2 else text.replace(patch[1], patch[2]) if patch[1] in text \
                else None
        except ValueError:  # a transform that no longer finds what it moves
            patched = None
        if patched is None or patched == text:
            raise SystemExit(f"variant {name}: its replacement no longer matches {patch[0]}")
        path.write_text(patched, encoding="utf-8")
    for path in tree.rglob("*.py"):  # absolute imports of the package go to the copy
        text = path.read_text(encoding="utf-8")
        if kernel_only:  # ... of its kernels; a relative import above kernel/ goes to gdr_check itself
            depth = len(path.relative_to(tree).parts) - 1
            text = re.sub(rf"^(\s*from )\.{{{depth + 1}}}(\w)", r"\1gdr_check.\2", text, flags=re.M)
            text = re.sub(r"\bgdr_check\.kernel\b", f"{name}.kernel", text)
        else:
            text = re.sub(r"\bgdr_check\.", f"{name}.", text)
            text = re.sub(r"\b(from|import) gdr_check\b", rf"\1 {name}", text)
        path.write_text(text, encoding="utf-8")


def build(variants: list[str], base: str | None, dest: Path) -> list[str]:
    """The package copies to time; their names (`gdr_check_<variant>`, `gdr_check_base`)."""
    names = []
    for variant in variants:
        copy_package(ROOT / "src" / "gdr_check", dest, f"gdr_check_{variant}", VARIANTS[variant],
                     kernel_only=True)
        names.append(variant)
    if base and Path(base).is_dir():  # a package folder (where the repository's history is not at hand)
        if not (Path(base) / "__init__.py").is_file() or not (Path(base) / "kernel").is_dir():
            raise SystemExit(f"--base: {base} is a folder but not a gdr_check package (src/gdr_check of a copy)")
        copy_package(Path(base), dest, "gdr_check_base", [])
        names.append("base")
    elif base:
        archive = dest / "_base"
        tar = subprocess.run(["git", "-C", str(ROOT), "archive", base, "src/gdr_check"], capture_output=True,
                             check=True).stdout
        with tarfile.open(fileobj=io.BytesIO(tar)) as files:
            files.extractall(archive, filter="data")
        copy_package(archive / "src" / "gdr_check", dest, "gdr_check_base", [])
        names.append("base")
    return names


def parse_point(text: str) -> tuple[str, int, int, str]:
    """'qwen3-next@4:1:bf16' -> (model, tp, B, state)."""
    try:
        model, rest = text.split("@")
        tp, batch, state = rest.split(":")
        return MODELS[model], int(tp), int(batch), state
    except (KeyError, ValueError):
        raise SystemExit(f"--points: {text!r} is not MODEL@TP:B:STATE with MODEL one of {', '.join(MODELS)}") from None


def measure(point: tuple[str, int, int, str], modules: dict[str, Any], unchecked: list[str], rounds: int,
            checked: bool = True, step: int = 0) -> dict[str, Any]:
    """One point's figures. `step`: a graph of that many layers instead, as a decode step (runtime_guard.py's
    `*_step_graph_us`): every layer passes the same B indices (slots 1..B) into a pool of its own of B + 1
    slots, so each layer's state is cold and consecutive launches overlap as an engine's layers do."""
    model, tp, B, state = point
    g = bench.geometry(model, tp)
    itemsize = bench.STATE_DTYPES[state].itemsize
    sets = 1 if step else max(2, min(bench.MAX_SETS,
                                     math.ceil(bench.ROTATION_BYTES / (B * g.HV * g.V * g.K * itemsize))))
    x = bench.make_inputs(g, B, state, sets * B + 1, sets, seed=B * 1000 + g.HV)
    impls: dict[str, bench.Impl] = {}
    for name in unchecked:
        module = modules[name][0 if g.variant == "gdn" else 1]
        launch = module.launch_packed_decode if g.variant == "gdn" else module.launch_kda_packed_decode
        impls[f"{name}:ours"] = lambda x, i, p, o, launch=launch: (launch(*x.args(i, p, o), engine="sglang"), o)[1]
    for name, (_, _, checked_module) in modules.items() if checked else ():
        fn = checked_module.packed_decode if g.variant == "gdn" else checked_module.kda_packed_decode
        impls[f"{name}:checked"] = lambda x, i, p, o, fn=fn: (fn(*x.args(i, p, o), engine="sglang",
                                                                  context="engine"), o)[1]
    verified = {name: bench.verify(x, impl)["ok"] for name, impl in impls.items()}
    if step:  # capture() launches once per item of its list: here one pool per layer, the indices fixed
        pools = [x.pool.clone() for _ in range(step)]
        graphs = {name: capture(lambda pool, impl=impl: impl(x, x.index_sets[0], pool, x.out), pools)
                  for name, impl in impls.items()}
    else:
        graphs = {name: capture(lambda idx, impl=impl: impl(x, idx, x.pool, x.out), x.index_sets)
                  for name, impl in impls.items()}
    launches = step or len(x.index_sets)
    times: dict[str, list[float]] = {name: [] for name in graphs}
    for _ in range(rounds):  # interleaved, so drift hits every variant alike
        for name, graph in graphs.items():
            times[name].append(replay_us(graph, launches))
    median = {name: statistics.median(values) for name, values in times.items()}
    spread = {name: (max(values) - min(values)) / statistics.median(values) for name, values in times.items()}
    return {"model": model, "tp": tp, "variant": g.variant, "HV": g.HV, "B": B, "state": state, "step": step,
            "us": median, "spread": spread, "verified": verified}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--variants", nargs="+", default=["tree", "no_record"], choices=sorted(VARIANTS))
    parser.add_argument("--base", help="also time this git revision's package, or this gdr_check package folder "
                        "(as `base`)")
    parser.add_argument("--points", nargs="+", default=["qwen3-next@4:1:bf16", "kimi-linear@1:128:bf16"])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--ours", action="store_true", help="time every variant's unchecked launch too "
                        "(kernel experiments), not only tree's and base's")
    parser.add_argument("--no-checked", action="store_true", help="leave the checked launches out")
    parser.add_argument("--step", type=int, default=0, metavar="LAYERS",
                        help="time a decode step of LAYERS layers (a pool each, the same indices) instead of one "
                        "layer over rotating slot sets")
    parser.add_argument("--json", default=os.path.join(os.environ["OUT"], "guard_variants.json")
                        if os.environ.get("OUT") else None)
    args = parser.parse_args(argv)
    points = [parse_point(text) for text in args.points]
    warnings.filterwarnings("ignore", message=".*TRITON_DEFAULT_FP_FUSION.*")
    if "tree" not in args.variants:
        args.variants.insert(0, "tree")  # the reference every ratio is taken against
    dest = Path(tempfile.mkdtemp(prefix="gdr_check_variants_"))
    names = build(args.variants, args.base, dest)
    sys.path.insert(0, str(dest))
    modules = {name: tuple(importlib.import_module(f"gdr_check_{name}.kernel.{part}") for part in
                           ("gdn.fused", "kda.fused", "ops")) for name in names}
    unchecked = [name for name in names if args.ours or name in ("tree", "base")]
    results = []
    for point in points:
        row = measure(point, modules, unchecked, args.rounds, not args.no_checked, args.step)
        reference = row["us"]["tree:ours"]
        print(f"{row['variant']} tp{row['tp']} HV={row['HV']} B={row['B']} {row['state']}"
              + (f" step of {args.step}" if args.step else "") + ": " + "  ".join(
            f"{name} {us:.2f} ({us / reference:.3f})" for name, us in row["us"].items())
            + ("" if all(row["verified"].values()) else f"  NOT VERIFIED: {row['verified']}"), flush=True)
        results.append(row)
        torch.cuda.empty_cache()
    if args.json:
        environment = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "base": args.base,
                       "variants": {name: [patch if len(patch) == 3 else (patch[0], "(a function of the file)")
                                    for patch in VARIANTS.get(name, [])] for name in names}}
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump({"environment": environment, "points": results}, handle, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
