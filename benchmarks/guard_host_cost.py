"""The runtime guard's steady-state host cost against sglang 0.5.23's own Python checks, on the CPU.

Both sides run on CPU tensors with their Triton launches replaced by the same no-op (`kernel[grid](...)` does
nothing), so that only host-side Python is timed:

(a) sglang's `fused_recurrent_gated_delta_rule_packed_decode` / `fused_recurrent_kda_packed_decode`, the real
    wrapper from the 0.5.23 wheel (its `fused_recurrent.py`, loaded by `gdr_check.kernel.engine_kernels`): its argument
    checks and grid arithmetic;
(b) the same wrapper inside `gdr_check.guard(engine="sglang")`, minus (a): what the guard adds per call once the
    call signature has been seen (the signature's comparison with the last plan's, the reuse test, the read of
    the fault flag, and on a step's first call the sanitised-indices allocation and the preparation of the
    device-side slot check, whose launch is the stubbed part).

Two figures for (b):
- *every call checks*: one pool and one indices tensor, called over and over; each call comes back to the
  pool the previous check served, so each call is a new step and launches the check (the worst case);
- *per step*: a decode step as sglang runs it: L layers (`--layers`, default 36), each with its own pool (a
  view of one backing tensor at its own address, as sglang slices its pool per layer), all passing the same
  indices tensor, which is a new object every step (eager decode). The guard checks once per step and hands
  the other layers the same sanitised indices; the figure is the step's guard cost divided by its L calls.
  That one check per step is verified (the check launches of a step are counted before timing).

`--device cuda` runs the same on CUDA tensors (launches still stubbed; the fault buffer is real), so the
figures are this host's with the tensors an engine passes. `--pieces` also times parts of the guard's work one
by one on the same tensors, to tell where a host's time goes: the attribute reads of the eight tensors that
the signature compares, the full signature tuple and its lookup (the path taken when another signature came
last), the pool's address, the indices' version, the stream query and the read of the fault flag.

Shapes: K = V = 128; GDN H = 16, HV = 32; KDA H = HV = 8; B = 1, 8, 32, 128, 512; bf16 activations, fp32 state,
int32 slots 1..B of a pool of B + 1 slots, `use_qk_l2norm_in_kernel=True`, passed by keyword as sglang's
backends pass them. Rounds interleave (a) and (b) so that a busy machine slows both alike; each figure is the
fastest round's mean per call (the least disturbed round: other processes only ever add time), and the
medians are kept in the JSON.

    python benchmarks/guard_host_cost.py --sglang /path/to/sglang-0.5.23-*.whl [--rounds 41] [--layers 36] [--markdown]
        [--device cuda] [--pieces]
    GDR_CHECK_SGLANG_PATH=/path/to/wheel python benchmarks/guard_host_cost.py
"""

from __future__ import annotations

import argparse
import functools
import gc
import json
import statistics
import sys
import time
import timeit
import warnings
from collections.abc import Callable
from typing import Any

import torch

import gdr_check
from gdr_check.kernel import _triton_common as triton_common
from gdr_check.kernel import device_guard
from gdr_check.kernel.engine_kernels import _load_module, _stand_ins_installed, find_sglang_source
from gdr_check.pipeline.guard import _signature

K = V = 128
HEADS = {"gdn": (16, 32), "kda": (8, 8)}
BATCHES = (1, 8, 32, 128, 512)
TARGET = 0.5
FUNCTIONS = {"gdn": "fused_recurrent_gated_delta_rule_packed_decode", "kda": "fused_recurrent_kda_packed_decode"}
KERNELS = {"gdn": "fused_recurrent_gated_delta_rule_packed_decode_kernel",
           "kda": "fused_recurrent_kda_packed_decode_kernel"}
# The registered name of the loaded kernel module: the guard finds the wrapper there, as in a live engine.
MODULE = "sglang.kernels.ops.attention.fla.fused_recurrent"


class NoLaunch:
    """Stands in for a Triton kernel object: `kernel[grid](...)` returns at once (host-only timing)."""

    def __getitem__(self, grid: Any) -> Callable[..., None]:
        return _no_launch


def _no_launch(*args: Any, **kwargs: Any) -> None:
    return None


DEVICE = torch.device("cpu")  # --device


def make_call(variant: str, B: int) -> dict[str, Any]:
    return {name: value.to(DEVICE) if isinstance(value, torch.Tensor) else value
            for name, value in _cpu_call(variant, B).items()}


def _cpu_call(variant: str, B: int) -> dict[str, Any]:
    H, HV = HEADS[variant]
    gate = HV * K if variant == "kda" else HV
    gen = torch.Generator().manual_seed(B)
    call: dict[str, Any] = {
        "mixed_qkv": torch.randn(B, 2 * H * K + HV * V, generator=gen).to(torch.bfloat16),
        "a": torch.randn(B, gate, generator=gen).to(torch.bfloat16),
        "b": torch.randn(B, HV, generator=gen).to(torch.bfloat16),
        "A_log": torch.randn(HV, generator=gen), "dt_bias": torch.randn(gate, generator=gen), "scale": K ** -0.5,
        "initial_state": torch.zeros(B + 1, HV, V, K), "out": torch.empty(B, 1, HV, V, dtype=torch.bfloat16),
        "ssm_state_indices": torch.arange(1, B + 1, dtype=torch.int32), "use_qk_l2norm_in_kernel": True,
    }
    if variant == "kda":
        call["lower_bound"] = None
    return call


def per_call_us(fn: Callable[[], Any], calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - start) / calls * 1e6


def measure(module: Any, variant: str, B: int, rounds: int, calls: int) -> dict[str, Any]:
    wrapper = getattr(module, FUNCTIONS[variant])
    kwargs = make_call(variant, B)
    # The graph hooks on (the default), so that each call pays the reuse test and keeps its check for the next.
    guard = gdr_check.guard(engine="sglang", mode="record", targets=[f"{MODULE}:{FUNCTIONS[variant]}"])
    with guard:
        guarded = getattr(module, FUNCTIONS[variant])
        assert guarded is not wrapper, "the guard did not install its wrapper"
        for _ in range(50):  # first call of the signature (shape verdict), then warm
            guarded(**kwargs)
            wrapper(**kwargs)
        plain, checked = [], []
        for _ in range(rounds):
            plain.append(per_call_us(lambda: wrapper(**kwargs), calls))
            checked.append(per_call_us(lambda: guarded(**kwargs), calls))
    errors = [d.code for d in guard.diagnostics if d.severity == "error"]
    sglang_us = min(plain)
    guard_us = min(checked) - sglang_us
    median_guard = statistics.median(checked) - statistics.median(plain)
    return {"variant": variant, "B": B, "sglang_checks_us": round(sglang_us, 2), "guard_host_us": round(guard_us, 2),
            "ratio": round(guard_us / sglang_us, 3), "guarded_total_us": round(min(checked), 2),
            "median_sglang_checks_us": round(statistics.median(plain), 2),
            "median_guard_host_us": round(median_guard, 2),
            "median_ratio": round(median_guard / statistics.median(plain), 3),
            "guard_errors": errors, "guard_calls": guard.calls}


def layer_calls(variant: str, B: int, layers: int) -> list[dict[str, Any]]:
    """One call's arguments per layer: the same shapes, each layer's pool at its own address. The pools are
    overlapping windows of one backing (the kernels are stubbed: only the addresses and strides matter, and
    L disjoint pools of B + 1 slots would not fit in memory at B = 512)."""
    kwargs = make_call(variant, B)
    pool = kwargs["initial_state"]
    backing = torch.zeros(pool.shape[0] + layers - 1, *pool.shape[1:], dtype=pool.dtype, device=pool.device)
    return [dict(kwargs, initial_state=backing[layer:layer + pool.shape[0]]) for layer in range(layers)]


def run_steps(fn: Callable[..., Any], calls: list[dict[str, Any]], steps: list[torch.Tensor]) -> None:
    """Decode steps: each step's indices tensor passed by every layer's call."""
    for indices in steps:
        for kwargs in calls:
            kwargs["ssm_state_indices"] = indices
            fn(**kwargs)


def fresh_steps(B: int, count: int) -> list[torch.Tensor]:
    """`count` steps' indices: a new tensor object per step (slots 1..B), as an eager engine builds them."""
    return [torch.arange(1, B + 1, dtype=torch.int32, device=DEVICE) for _ in range(count)]


def measure_step(module: Any, variant: str, B: int, rounds: int, calls: int, layers: int) -> dict[str, Any]:
    """The guard's cost per call averaged over decode steps of `layers` layers (one check per step)."""
    wrapper = getattr(module, FUNCTIONS[variant])
    per_layer = layer_calls(variant, B, layers)
    count = max(1, calls // layers)  # steps per round
    guard = gdr_check.guard(engine="sglang", mode="record", targets=[f"{MODULE}:{FUNCTIONS[variant]}"])
    with guard:
        guarded = getattr(module, FUNCTIONS[variant])
        assert guarded is not wrapper, "the guard did not install its wrapper"
        for _ in range(3):  # every layer's first call (the plan, each pool's tag), then warm
            run_steps(guarded, per_layer, fresh_steps(B, 1))
            run_steps(wrapper, per_layer, fresh_steps(B, 1))
        launch, launches = device_guard.CheckLaunch.__call__, [0]

        def counted(check: Any, *args: Any) -> Any:  # count one step's check launches
            launches[0] += 1
            return launch(check, *args)

        device_guard.CheckLaunch.__call__ = counted  # type: ignore[method-assign]
        try:
            run_steps(guarded, per_layer, fresh_steps(B, 2))
        finally:
            device_guard.CheckLaunch.__call__ = launch  # type: ignore[method-assign]
        plain, checked = [], []
        for _ in range(rounds):
            steps = fresh_steps(B, count)
            start = time.perf_counter()
            run_steps(wrapper, per_layer, steps)
            plain.append((time.perf_counter() - start) / (count * layers) * 1e6)
            steps = fresh_steps(B, count)
            start = time.perf_counter()
            run_steps(guarded, per_layer, steps)
            checked.append((time.perf_counter() - start) / (count * layers) * 1e6)
    errors = [d.code for d in guard.diagnostics if d.severity == "error"]
    sglang_us = min(plain)
    guard_us = min(checked) - sglang_us
    median_guard = statistics.median(checked) - statistics.median(plain)
    return {"step_layers": layers, "step_checks": launches[0] / 2, "step_sglang_checks_us": round(sglang_us, 2),
            "step_guard_host_us": round(guard_us, 2), "step_ratio": round(guard_us / sglang_us, 3),
            "median_step_guard_host_us": round(median_guard, 2),
            "median_step_ratio": round(median_guard / statistics.median(plain), 3), "step_guard_errors": errors}


def pieces(variant: str, B: int, number: int = 20000) -> dict[str, float]:
    """The guard's steady-state parts one by one on one call's tensors, µs per call (fastest of 7 rounds)."""
    call = make_call(variant, B)
    tensors = [call[name] for name in ("mixed_qkv", "a", "b", "A_log", "dt_bias", "initial_state", "out",
                                       "ssm_state_indices")]
    values = dict(call, use_qk_l2norm_in_kernel=True)
    key = _signature(values)
    plans = {key: None}
    indices, pool = call["ssm_state_indices"], call["initial_state"]
    parts: dict[str, Callable[[], Any]] = {
        "shape x8": lambda: [t.shape for t in tensors],
        "stride() x8": lambda: [t.stride() for t in tensors],
        "dtype x8": lambda: [t.dtype for t in tensors],
        "device x8": lambda: [t.device for t in tensors],
        "get_device() x8": lambda: [t.get_device() for t in tensors],
        "list of 8 (loop alone)": lambda: [t for t in tensors],
        "signature tuple": lambda: _signature(values),
        "signature tuple + lookup": lambda: plans[_signature(values)],
        "pool data_ptr()": pool.data_ptr,
        "indices _version": lambda: indices._version,
    }
    if DEVICE.type == "cuda":
        stream = functools.partial(torch._C._cuda_getCurrentRawStream, DEVICE.index or 0)
        parts["raw stream query"] = stream
        parts["is_current_stream_capturing()"] = torch.cuda.is_current_stream_capturing
        buffer = device_guard.FaultBuffer(DEVICE, 64)
        parts["fault flag look"] = lambda: buffer.look("engine", "sglang")
    return {name: min(timeit.repeat(part, number=number, repeat=7)) / number * 1e6 for name, part in parts.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sglang", help="the sglang 0.5.23 wheel, an unpacked tree or its fused_recurrent.py "
                                         "(default: $GDR_CHECK_SGLANG_PATH, else an installed sglang)")
    parser.add_argument("--rounds", type=int, default=41)
    parser.add_argument("--calls", type=int, default=500, help="calls per round")
    parser.add_argument("--layers", type=int, default=36, help="layers per decode step (per-step figure)")
    parser.add_argument("--markdown", action="store_true")
    parser.add_argument("--json", help="also write the rows to this file")
    parser.add_argument("--device", default="cpu", help="where the tensors live: cpu (default) or cuda[:N]")
    parser.add_argument("--pieces", action="store_true", help="also time the guard's steady-state parts")
    options = parser.parse_args(argv)
    if options.layers < 1 or options.rounds < 1 or options.calls < 1:
        print("--layers, --rounds and --calls must be at least 1", file=sys.stderr)
        return 2
    global DEVICE
    try:
        DEVICE = torch.device(options.device)
        torch.empty(1, device=DEVICE)
    except (RuntimeError, AssertionError) as error:
        print(f"--device {options.device}: {str(error).splitlines()[0]}", file=sys.stderr)
        return 2
    source = find_sglang_source(options.sglang)
    if source is None:
        print("no sglang source: pass --sglang or set GDR_CHECK_SGLANG_PATH", file=sys.stderr)
        return 2
    module = _load_module(source.resolve())
    # The KDA wrapper imports its CUDA fast-path module at call time: keep the loader's stand-ins installed
    # (the stand-in declines every call, as on a machine without that extension).
    stand_ins = _stand_ins_installed()
    stand_ins.__enter__()
    sys.modules[MODULE] = module
    for variant in KERNELS:
        setattr(module, KERNELS[variant], NoLaunch())
    device_guard.slot_guard_kernel = NoLaunch()  # type: ignore[assignment]  # the guard's check kernel, stubbed alike
    if DEVICE.type == "cpu":
        # Where Triton cannot run CPU tensors (no interpreter), the guard checks their slots on the host, reading
        # every index; this benchmark times the path of CUDA tensors, whose check launch is stubbed above, so
        # it tells the guard that Triton can run them.
        triton_common.INTERPRETED = True
    gc.disable()  # neither side allocates cycles; a collection in one round would land on one side only
    rows = []
    for variant in ("gdn", "kda"):
        for B in BATCHES:
            row = measure(module, variant, B, options.rounds, options.calls)
            row.update(measure_step(module, variant, B, options.rounds, options.calls, options.layers))
            rows.append(row)
    gc.enable()
    header = (f"torch {torch.__version__}, python {sys.version.split()[0]}, sglang source {source.name}, "
              f"tensors on {DEVICE}")
    parts = {variant: pieces(variant, 32) for variant in ("gdn", "kda")} if options.pieces else {}
    layers = options.layers
    if options.markdown:
        print(f"<!-- {header} -->")
        print(f"| kernel | B | sglang checks (µs) | guard, every call checks (µs) | ratio (≤ 0.5) | "
              f"guard per call, step of {layers} layers (µs) | ratio (≤ 0.5) | checks per step |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|")
        for row in rows:
            print(f"| {row['variant'].upper()} | {row['B']} | {row['sglang_checks_us']:.2f} | "
                  f"{row['guard_host_us']:.2f} | {row['ratio']:.2f} | {row['step_guard_host_us']:.2f} | "
                  f"{row['step_ratio']:.2f} | {row['step_checks']:g} |")
    else:
        print(header)
        print(f"{'kernel':6} {'B':>4} {'sglang checks':>14} {'guard':>8} {'ratio':>6} "
              f"{f'per step/{layers}':>14} {'ratio':>6} {'checks':>6}  errors")
        for row in rows:
            print(f"{row['variant']:6} {row['B']:>4} {row['sglang_checks_us']:>11.2f} us "
                  f"{row['guard_host_us']:>5.2f} us {row['ratio']:>6.2f} "
                  f"{row['step_guard_host_us']:>11.2f} us {row['step_ratio']:>6.2f} {row['step_checks']:>6g}  "
                  f"{(row['guard_errors'] + row['step_guard_errors']) or '-'}")
    for variant, timed in parts.items():
        print(f"\n{variant.upper()} B = 32, the guard's parts (µs per call):")
        for name, us in timed.items():
            print(f"  {name:32} {us:7.3f}")
    if options.json:
        with open(options.json, "w", encoding="utf-8") as handle:
            json.dump({"header": header, "rows": rows, "pieces": parts}, handle, indent=1)
    worst = max(max(row["ratio"], row["step_ratio"]) for row in rows)
    clean = not any(row["guard_errors"] or row["step_guard_errors"] for row in rows)
    return 0 if worst <= TARGET and clean and all(row["step_checks"] == 1 for row in rows) else 1


if __name__ == "__main__":
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sys.exit(main())
