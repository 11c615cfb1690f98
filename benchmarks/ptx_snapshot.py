"""The decode kernels' PTX for sm_90 over a matrix of their constants, compiled on any machine (Triton's NVIDIA
backend needs no GPU): to show that a change of the kernels' source leaves the compiled kernels as they were.

    python benchmarks/ptx_snapshot.py before.json            # on the old tree (PYTHONPATH=<old>/src)
    python benchmarks/ptx_snapshot.py after.json             # on the new tree
    python benchmarks/ptx_snapshot.py --compare before.json after.json

Debug lines (`.loc`, `.file`, comments, the debug sections and the labels that only they use) are dropped: they
follow the source's line numbers. Run without TRITON_INTERPRET (an interpreted kernel does not compile).
`--all` adds the l2-norm-off, flag-off and 4096-row cells (five times the compile time)."""

from __future__ import annotations

import argparse
import itertools
import json
import re
import sys
from typing import Any

POINTERS = {"mixed_qkv": "*bf16", "a": "*bf16", "b": "*bf16", "A_log": "*fp32", "dt_bias": "*fp32",
            "out": "*bf16", "state": "*fp32", "slots": "*i32", "fault_counter": "*i64", "fault_records": "*i64",
            "fault_flag": "*i32", "fault_tag_cell": "*i64"}
_DEBUG_LINE = re.compile(r"\s*(\.loc|\.file|//)|\s*\$L__tmp\d+:$")


def ptx(kernel: Any, constants: dict[str, Any], warps: int) -> str:
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler.compiler import ASTSource

    names = kernel.arg_names
    signature = {n: "constexpr" if n in constants else POINTERS.get(n, "fp32" if n in ("scale", "lower_bound")
                                                                     else "i32") for n in names}
    attrs = {(i,): [["tt.divisibility", 16]] for i, n in enumerate(names) if signature[n].startswith("*")}
    source = ASTSource(kernel, signature, constexprs={(names.index(k),): v for k, v in constants.items()},
                       attrs=attrs)
    text = triton.compile(source, target=GPUTarget("cuda", 90, 32), options={"num_warps": warps}).asm["ptx"]
    code = "\n".join(line for line in text.splitlines() if not _DEBUG_LINE.match(line))
    return code.split(".section\t.debug", 1)[0]


def snapshot(every_cell: bool) -> dict[str, str]:
    from gdr_check.kernel.gdn import fused as gdn
    from gdr_check.kernel.kda import fused as kda
    from gdr_check.kernel.tiling import TileConfig, guard_constants

    profile = type("Profile", (), {"reserved_slot_zero": True})
    guard = type("Guard", (), {"max_records": 64})  # what `guard_constants` reads of a GuardLaunch
    tilings = [TileConfig(16), TileConfig(4, prefetch=False), TileConfig(8, 2), TileConfig(8, 2, prefetch=False),
               TileConfig(32, 4, evict_first=True, keep_inputs=True), TileConfig(16, 2, loop_stages=2)]
    result = {}
    for variant, kernel in (("gdn", gdn.gdn_packed_decode_kernel), ("kda", kda.kda_packed_decode_kernel)):
        for programmatic, (guarded, batch), tiling, l2norm, flag in itertools.product(
                (True, False), ((False, 8), (True, 1), (True, 8), (True, 512), (True, 4096)), tilings, (True, False),
                (True, False)):
            if not every_cell and (not l2norm or not flag or batch == 4096):
                continue
            constants = {**tiling.constexprs(128, 128), "H": 4, "HV": 8, "USE_L2NORM": l2norm,
                         "SKIP_AT_OR_BELOW": -1, "PROGRAMMATIC": programmatic,
                         **guard_constants(guard if guarded else None, profile, batch)}
            constants["ROUND_BETA" if variant == "gdn" else "USE_LOWER_BOUND"] = flag
            cell = f"{variant}/programmatic={programmatic}/guard={guarded}/batch={batch}/{tiling}/l2={l2norm}/{flag}"
            result[cell] = ptx(kernel, constants, tiling.num_warps)
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="+", help="where to write the snapshot, or the two to compare")
    parser.add_argument("--compare", action="store_true")
    parser.add_argument("--all", action="store_true")
    args = parser.parse_args()
    if args.compare:
        if len(args.files) != 2:
            parser.error("--compare takes two snapshots: BEFORE AFTER")
        before, after = (json.loads(open(path, encoding="utf-8").read()) for path in args.files)
        cells = before.keys() | after.keys()  # a cell only one side has differs
        differ = sorted(cell for cell in cells if before.get(cell) != after.get(cell))
        print(f"{len(cells) - len(differ)} of {len(cells)} cells identical" + "".join(f"\n  differs: {c}"
                                                                                    for c in differ))
        return 1 if differ else 0
    if len(args.files) != 1:
        parser.error("a snapshot is written to one file")
    snapshot_cells = snapshot(args.all)
    with open(args.files[0], "w", encoding="utf-8") as out:
        json.dump(snapshot_cells, out)
    print(f"{len(snapshot_cells)} cells, {sum(text.count(chr(10)) for text in snapshot_cells.values())} PTX lines")
    return 0


if __name__ == "__main__":
    sys.exit(main())
