"""What `gdr-check check` pays to import, per stage of the package (one folder each), against `import torch`.

Runs `python -X importtime -c "import gdr_check.cli.check"` (what `gdr-check <target>` imports before it reads a
byte) in fresh processes, sums each module's own import time by the folder it lives in (the package's layers:
base, engines, sources, models, deployment, call, checks, kernel, pipeline, cli) and by third-party package,
and reports the median over the runs, beside the median of `python -c "import torch"` wall time measured in
the same loop (interleaved, so a busy machine slows both alike).

    python benchmarks/import_budget.py              # table on stdout
    python benchmarks/import_budget.py --runs 15 --markdown
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
import time
from collections import defaultdict

LINE = re.compile(r"^import time:\s+(\d+) \|\s+(\d+) \|(\s*)(\S+)$")
TARGET = "gdr_check.cli.check"


def stage_of(module: str) -> str:
    parts = module.split(".")
    if parts[0] == "gdr_check":
        return "gdr_check/" + (parts[1] if len(parts) > 1 else "__init__")
    return parts[0]


def one_run() -> tuple[dict[str, float], float]:
    """Own import time (ms) per stage or package, and the total (ms), of one fresh process."""
    done = subprocess.run([sys.executable, "-X", "importtime", "-c", f"import {TARGET}"],
                          capture_output=True, text=True, check=True)
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
    args = parser.parse_args(argv)
    stages: dict[str, list[float]] = defaultdict(list)
    totals, torch_times = [], []
    for _ in range(args.runs):
        by_stage, total = one_run()
        for stage, ms in by_stage.items():
            stages[stage].append(ms)
        totals.append(total)
        torch_times.append(torch_wall())
    rows = sorted(((statistics.median(v + [0.0] * (args.runs - len(v))), k) for k, v in stages.items()), reverse=True)
    torch_ms = statistics.median(torch_times)
    total_ms = statistics.median(totals)
    if args.markdown:
        print("| stage or package | own import time (ms, median) |")
        print("|---|---:|")
        for ms, stage in rows:
            if ms >= 0.5:
                print(f"| `{stage}` | {ms:.1f} |")
        print(f"| **all imports of `{TARGET}`** | **{total_ms:.1f}** |")
        print(f"| `import torch` (wall, same loop) | {torch_ms:.0f} |")
    else:
        for ms, stage in rows:
            if ms >= 0.5:
                print(f"{stage:40s} {ms:8.1f} ms")
        print(f"{'all imports of ' + TARGET:40s} {total_ms:8.1f} ms   ({total_ms / torch_ms:.2f}x import torch, "
              f"{torch_ms:.0f} ms wall)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
