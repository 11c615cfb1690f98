"""The runtime guard's steady state alone, per call, and where a host's time goes in it.

`gdr_check.guard` wraps a no-op that has sglang's GDN signature (so no sglang is needed: the engine wrapper's own
checks are timed beside the guard by `guard_host_cost.py` and `runtime_guard.py`). The calls are decode steps
of 36 layers, each layer with its own pool (a window of one backing tensor), all passing one indices tensor that
is a new object every step, as an eager engine decodes; the guard's slot check is launched once per step, its
kernel stubbed (so on CUDA its launch takes the launcher's first-call path every step, not the direct launch a
compiled check gets: the step's one check costs more than in an engine, the per-call figure a little more).
The figure is the guarded step's time minus the bare no-op's, per call, each the fastest of 61 rounds in which
the two take turns (other processes only ever add time).

Each package is timed in a child process of its own: the working tree's (`src`), `--base DIR` (a `gdr_check`
package folder's parent, e.g. an older commit's `src` exported with `git archive`), and with `--ablate` copies
of the working tree with one part of the steady state removed (experiments: their verdicts are wrong), the
packages taking turns `--repeats` times. A replacement that no longer matches the source stops the run.

    PYTHONPATH=src python benchmarks/guard_steady_state.py [--device cuda] [--base DIR] [--ablate] [--repeats 3]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import types
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
LAYERS, STEPS, ROUNDS = 36, 14, 61
H, HV, K, V = 16, 32, 128, 128
TARGET = "gdr_check_steady_state_target:fused_recurrent_gated_delta_rule_packed_decode"
# Parts of the steady state, removed one at a time (guard.py's wrapper as it is written now).
ABLATIONS: dict[str, tuple[tuple[str, str], ...]] = {
    "no_tensor_test": (("plan.matches(q, a, b, g, d, h, o, i)\n", "True\n"),),
    "no_overlap_test": (("elif (extents := plan.extents) is not None:", "elif False:"),),
    "no_fault_flag": (("if plan.host_flag[0]:", "if False:"),),
    "no_stream_query": (("and (last.stream is None or last.stream == plan.stream())", ""),),  # CUDA only
}


def fused_recurrent_gated_delta_rule_packed_decode(mixed_qkv: Any, a: Any, b: Any, A_log: Any, dt_bias: Any,
                                                  scale: float, initial_state: Any, out: Any,
                                                  ssm_state_indices: Any, use_qk_l2norm_in_kernel: bool = False
                                                  ) -> None:
    """The guarded target: sglang's signature, no work."""


def child(device_name: str, batches: list[int]) -> dict[str, float]:
    """Per-call guard cost (µs) at each B, in this process (the package on sys.path)."""
    import torch

    import gdr_check
    from gdr_check.kernel import _triton_common, device_guard

    class NoLaunch:
        def __getitem__(self, grid: Any) -> Any:
            return lambda *args, **kwargs: None

    device_guard.slot_guard_kernel = NoLaunch()  # type: ignore[assignment]
    device = torch.device(device_name)
    if device.type == "cpu":
        _triton_common.INTERPRETED = True  # the path of CUDA tensors (the check's launch is stubbed anyway)
    module = types.ModuleType(TARGET.split(":")[0])
    bare = fused_recurrent_gated_delta_rule_packed_decode
    module.fused_recurrent_gated_delta_rule_packed_decode = bare  # type: ignore[attr-defined]
    sys.modules[module.__name__] = module
    gc.disable()
    result = {}
    for B in batches:
        backing = torch.zeros(B + LAYERS, HV, V, K, device=device)
        base = {"mixed_qkv": torch.randn(B, 2 * H * K + HV * V, device=device).to(torch.bfloat16),
                "a": torch.randn(B, HV, device=device).to(torch.bfloat16),
                "b": torch.randn(B, HV, device=device).to(torch.bfloat16),
                "A_log": torch.randn(HV, device=device), "dt_bias": torch.randn(HV, device=device),
                "scale": K ** -0.5, "out": torch.empty(B, 1, HV, V, dtype=torch.bfloat16, device=device),
                "use_qk_l2norm_in_kernel": True}
        layers = [dict(base, initial_state=backing[layer:layer + B + 1]) for layer in range(LAYERS)]

        def steps(count: int, B: int = B) -> list[Any]:
            return [torch.arange(1, B + 1, dtype=torch.int32, device=device) for _ in range(count)]

        def run(fn: Any, indices: list[Any], layers: list[dict[str, Any]] = layers) -> float:
            start = time.perf_counter()
            for step in indices:
                for kwargs in layers:
                    fn(**kwargs, ssm_state_indices=step)
            return time.perf_counter() - start

        with gdr_check.guard(engine="sglang", mode="record", targets=[TARGET]) as guard:
            guarded = module.fused_recurrent_gated_delta_rule_packed_decode  # type: ignore[attr-defined]
            assert guarded is not bare, "the guard did not wrap the target"
            run(guarded, steps(3))
            best_guarded = best_bare = float("inf")
            for _ in range(ROUNDS):
                best_bare = min(best_bare, run(bare, steps(STEPS)))
                best_guarded = min(best_guarded, run(guarded, steps(STEPS)))
        errors = [d.code for d in guard.diagnostics if d.severity == "error"]
        assert not errors, errors
        result[str(B)] = round((best_guarded - best_bare) / (STEPS * LAYERS) * 1e6, 3)
    return result


def copy_with(source: Path, dest: Path, replacements: tuple[tuple[str, str], ...], name: str) -> None:
    shutil.copytree(source, dest / "gdr_check")
    guard = dest / "gdr_check" / "guard.py"
    text = guard.read_text(encoding="utf-8")
    for old, new in replacements:
        if old not in text:
            raise SystemExit(f"{name}: {old.strip()!r} is no longer in guard.py")
        text = text.replace(old, new, 1)
    guard.write_text(text, encoding="utf-8")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 32])
    parser.add_argument("--base", type=Path, help="a folder holding another gdr_check package to time beside")
    parser.add_argument("--ablate", action="store_true", help="also time the working tree without each part")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.child:
        print(json.dumps(child(options.device, options.batches)))
        return 0
    tree = ROOT / "src" / "gdr_check"
    with tempfile.TemporaryDirectory() as scratch:
        packages = {"tree": ROOT / "src"}
        if options.base is not None:
            if not (options.base / "gdr_check").is_dir():
                print(f"--base {options.base}: no gdr_check package in it", file=sys.stderr)
                return 2
            packages["base"] = options.base
        if options.ablate:
            for name, replacements in ABLATIONS.items():
                copy_with(tree, Path(scratch) / name, replacements, name)
                packages[name] = Path(scratch) / name
        figures: dict[str, list[dict[str, float]]] = {name: [] for name in packages}
        for _ in range(options.repeats):
            for name, path in packages.items():
                environment = dict(os.environ, PYTHONPATH=str(path))
                output = subprocess.run(
                    [sys.executable, __file__, "--child", "--device", options.device, "--batches",
                     *map(str, options.batches)], env=environment, capture_output=True, text=True, check=False)
                if output.returncode != 0:
                    print(f"{name}: the child process failed:\n{output.stderr}", file=sys.stderr)
                    return 1
                figures[name].append(json.loads(output.stdout.splitlines()[-1]))
    print(f"guard per call over steps of {LAYERS} layers, µs, fastest of {ROUNDS} rounds; per package the "
          f"fastest of {options.repeats} processes")
    for name, runs in figures.items():
        best = {B: min(run[B] for run in runs) for B in runs[0]}
        print(f"{name:16} " + "  ".join(f"B={B}: {value:6.3f}" for B, value in best.items())
              + "   (" + "; ".join(" ".join(f"{value:.2f}" for value in run.values()) for run in runs) + ")")
    out = os.environ.get("OUT")
    if out:
        with open(os.path.join(out, "guard_steady_state.json"), "w", encoding="utf-8") as handle:
            json.dump({"device": options.device, "figures": figures}, handle, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
