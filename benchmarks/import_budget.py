"""What `gdr-check <checkpoint>` pays to import, per stage of the package (one folder each), against `import torch`,
checked against the budget per stage in docs/performance.md.

Runs `python -X importtime -c "import gdr_check.cli.entry, gdr_check.cli.check, gdr_check.cli.formats.full"`
(what the console script imports for a check in the default `full` format: the command, then the renderer) in
fresh processes, sums each module's own import time by the folder it lives in (the package's layers: base,
engines, sources, models, deployment, call, checks, kernel, pipeline, cli) and by third-party package, and
reports the median over the runs, beside the median of `python -c "import torch"` wall time measured in the
same loop (interleaved, so a busy machine slows both alike). The package's bytecode is cached in a temporary
folder (`PYTHONPYCACHEPREFIX`, filled by an untimed first run), as an installed wheel has it: under
`PYTHONDONTWRITEBYTECODE=1` an editable install would compile every module on every run, and the stages would
measure the compiler.

The budget is the table under "Import-time budget per stage" in docs/performance.md (one place for the
numbers): each stage's median, as a share of the `import torch` median, must stay within its row; so must the
stages without a row together ("everything else") and the total. A share, not milliseconds: a busy or slower
machine slows both sides alike. Exit status 1 when a stage is over budget.

    python benchmarks/import_budget.py              # table and verdicts on stdout
    python benchmarks/import_budget.py --runs 15 --markdown
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

LINE = re.compile(r"^import time:\s+(\d+) \|\s+(\d+) \|(\s*)(\S+)$")
TARGET = "gdr_check.cli.entry, gdr_check.cli.check, gdr_check.cli.formats.full"
DOCS = Path(__file__).resolve().parent.parent / "docs" / "performance.md"
BUDGET_HEADING = "Import-time budget per stage"
OTHER, TOTAL = "everything else", "total"
# A budget row: | `stage` | ... | share of import torch, in per cent | (the last cell is the budget)
BUDGET_ROW = re.compile(r"^\|\s*(?:`([^`]+)`|\*\*(everything else|total)\*\*)\s*\|.*\|\s*([0-9.]+)\s*%\s*\|\s*$")


def read_budget(path: Path = DOCS) -> dict[str, float]:
    """Stage -> its budget, a share of `import torch` (0.02 for 2 %), from the table under BUDGET_HEADING."""
    budget: dict[str, float] = {}
    inside = False
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("#"):
            inside = line.lstrip("#").strip() == BUDGET_HEADING
            continue
        match = BUDGET_ROW.match(line) if inside else None
        if match:
            budget[match[1] or match[2]] = float(match[3]) / 100
    if TOTAL not in budget or OTHER not in budget:
        raise SystemExit(f"{path}: no budget table under `{BUDGET_HEADING}` (with `{OTHER}` and `{TOTAL}` rows)")
    return budget


def verdicts(stages: dict[str, float], total: float, torch_ms: float,
             budget: dict[str, float]) -> list[tuple[str, float, float, bool]]:
    """(stage, share of import torch, budget, within) for each budgeted stage, everything else, and the total."""
    listed = {stage: ms for stage, ms in stages.items() if stage in budget}
    rows = [(stage, listed.get(stage, 0.0) / torch_ms, share) for stage, share in budget.items()
            if stage not in (OTHER, TOTAL)]
    rows.append((OTHER, (total - sum(listed.values())) / torch_ms, budget[OTHER]))
    rows.append((TOTAL, total / torch_ms, budget[TOTAL]))
    return [(stage, used, share, used <= share) for stage, used, share in rows]


def stage_of(module: str) -> str:
    parts = module.split(".")
    if parts[0] == "gdr_check":
        return "gdr_check/" + (parts[1] if len(parts) > 1 else "__init__")
    return parts[0]


def one_run(pycache: str) -> tuple[dict[str, float], float]:
    """Own import time (ms) per stage or package, and the total (ms), of one fresh process, with bytecode cached
    under `pycache`."""
    env = {k: v for k, v in os.environ.items() if k not in ("TRITON_INTERPRET", "PYTHONDONTWRITEBYTECODE")}
    env["PYTHONPYCACHEPREFIX"] = pycache
    done = subprocess.run([sys.executable, "-X", "importtime", "-c", f"import {TARGET}"],
                          capture_output=True, text=True, check=True, env=env)
    # What the interpreter's start-up imports (site, .pth files of the environment) is not the package's: it
    # is paid by `import torch` too. The start-up's modules are those of an empty command.
    baseline = subprocess.run([sys.executable, "-X", "importtime", "-c", "pass"], capture_output=True, text=True,
                              check=True)
    startup = {match[4] for line in baseline.stderr.splitlines() if (match := LINE.match(line))}
    by_stage: dict[str, float] = defaultdict(float)
    total = 0.0
    for line in done.stderr.splitlines():
        match = LINE.match(line)
        if match is None:
            continue
        own_us, module = int(match[1]), match[4]
        if module in startup:
            continue
        by_stage[stage_of(module)] += own_us / 1000
        total += own_us / 1000
    return dict(by_stage), total


def torch_wall() -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import torch"], check=True)
    return (time.perf_counter() - started) * 1000


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--markdown", action="store_true", help="print a docs/performance.md table")
    parser.add_argument("--budget", type=Path, default=DOCS, help="the file holding the budget table")
    args = parser.parse_args(argv)
    budget = read_budget(args.budget)
    stages: dict[str, list[float]] = defaultdict(list)
    totals, torch_times = [], []
    with tempfile.TemporaryDirectory(prefix="gdr-check-pycache-") as pycache:
        one_run(pycache)  # untimed: compiles and caches the bytecode
        for _ in range(args.runs):
            by_stage, total = one_run(pycache)
            for stage, ms in by_stage.items():
                stages[stage].append(ms)
            totals.append(total)
            torch_times.append(torch_wall())
    medians = {k: statistics.median(v + [0.0] * (args.runs - len(v))) for k, v in stages.items()}
    rows = sorted(((ms, k) for k, ms in medians.items()), reverse=True)
    torch_ms = statistics.median(torch_times)
    total_ms = statistics.median(totals)
    checked = verdicts(medians, total_ms, torch_ms, budget)
    load = os.getloadavg()[0]
    if args.markdown:
        print("| stage or package | own import time (ms, median) |")
        print("|---|---:|")
        for ms, stage in rows:
            if ms >= 0.5:
                print(f"| `{stage}` | {ms:.1f} |")
        print(f"| **all imports of `{TARGET}`** | **{total_ms:.1f}** |")
        print(f"| `import torch` (wall, same loop) | {torch_ms:.0f} |")
        print()
        print("| stage | share of `import torch` | budget | result |")
        print("|---|---:|---:|---|")
        for stage, used, share, within in checked:
            print(f"| {stage} | {used * 100:.1f} % | {share * 100:.1f} % | {'pass' if within else 'OVER'} |")
    else:
        for ms, stage in rows:
            if ms >= 0.5:
                print(f"{stage:40s} {ms:8.1f} ms")
        print(f"{'all imports of the check':40s} {total_ms:8.1f} ms   ({total_ms / torch_ms:.2f}x import torch, "
              f"{torch_ms:.0f} ms wall)")
        print(f"\nbudget ({args.budget.name}, share of import torch), median of {args.runs} runs, load {load:.2f}:")
        for stage, used, share, within in checked:
            print(f"  {stage:30s} {used * 100:5.1f} % (budget {share * 100:4.1f} %) {'pass' if within else 'OVER'}")
    return 0 if all(within for *_, within in checked) else 1


if __name__ == "__main__":
    sys.exit(main())
