"""The runtime guard's cost and its fault detection on a CUDA GPU, side by side with sglang 0.5.23.

For GDN (H=16, HV=32) and KDA (H=HV=32), K = V = 128, bf16 activations, fp32 state, B = 1, 8, 32, 128, 512:

- eager: the checked kernel (`gdr_check.kernel.packed_decode`: shape verdict cached per signature, slot checks
  in the kernel's prologue) vs the unchecked launch vs sglang's wrapper; wall time per call in a loop of
  back-to-back calls (host and device overlapped, as an engine's eager decode runs), the fastest of 9 rounds
  in which the three take turns;
- host cost: the guard's steady-state per-call cost (`gdr_check.guard` around sglang's wrapper: bind, cached
  verdict, the check kernel's launch) vs the wrapper's own Python checks, both with sglang's kernel launch
  replaced by a no-op so that only host work is timed. Two figures: *guard host* (`guard_host_us`), one pool
  and one indices tensor called over and over, so every call is a new step and launches the check (the worst
  case); and *guard host per step* (`guard_host_step_us`), decode steps of STEP_LAYERS layers, each layer with
  its own pool, all passing one indices tensor that is a new object every step (eager decode): one check per
  step, the other layers reuse its sanitised indices; the step's guard cost divided by its calls;
- CUDA-graph replay: graphs of 16 calls: the unchecked launch and the checked kernel, each as 16 calls on one
  pool (one slot set, hot in L2, every call reading the previous call's write: `*_graph_us`) and as a decode
  step (16 layers, each with its own pool, one indices tensor: `*_step_graph_us`, as an engine calls them);
  sglang's wrapper and sglang's wrapper under the guard as that decode step (the guard captures one check and
  16 engine kernels). The six graphs take turns
  over 7 rounds of 20 replays; time per call is the median of the rounds' medians, with the spread (`*_spread`:
  half the rounds' range, relative) and every round's figure. `guarded_graph_every_call_us` is the same step
  under a guard without graph hooks (`hook_graphs=False`: no reuse, a check per layer), the guard's cost
  before it checked once per step;
- faults: a graph of the checked kernel, one of the guarded sglang wrapper, and one of a guarded decode step
  (4 layers with canaried pools of their own sharing the indices, the graph hooks on: one captured check) are
  replayed with slot tables holding every bad-index class (past the pool, far past it, a repeated slot, a live
  row in slot 0); the faults read back must be exactly the expected (rule, row, slot), found once and in the
  first layer for the guarded paths, and the canary slots on both sides of every pool must stay bitwise equal.

    GDR_CHECK_SGLANG_PATH=<wheel or unpacked tree> python benchmarks/runtime_guard.py   # JSON under $OUT
"""

from __future__ import annotations

import functools
import json
import os
import statistics
import sys
import time
import warnings
from collections.abc import Callable
from typing import Any

import torch

import gdr_check
from gdr_check.kernel import device_guard, kda_packed_decode, packed_decode
from gdr_check.kernel.engine_kernels import _load_module, _stand_ins_installed, find_sglang_source
from gdr_check.kernel.gdn.fused import launch_packed_decode
from gdr_check.kernel.kda.fused import launch_kda_packed_decode

K = V = 128
HEADS = {"gdn": (16, 32), "kda": (32, 32)}
BATCHES = (1, 8, 32, 128, 512)
EAGER_CALLS = 200
GRAPH_CALLS = 16  # calls per graph; the sglang graphs: layers of one decode step, each with its own pool
STEP_LAYERS = 36  # layers per decode step in the per-step host cost (e.g. Qwen3-Next's linear-attention layers)
REPLAYS = 20
SGLANG = {"gdn": "fused_recurrent_gated_delta_rule_packed_decode", "kda": "fused_recurrent_kda_packed_decode"}
SGLANG_KERNEL = {"gdn": "fused_recurrent_gated_delta_rule_packed_decode_kernel",
                 "kda": "fused_recurrent_kda_packed_decode_kernel"}


def make_call(variant: str, B: int, seed: int = 0) -> dict[str, Any]:
    """Arguments by name; the pool is a view of a backing with one canary slot on each side."""
    H, HV = HEADS[variant]
    gen = torch.Generator(device="cuda").manual_seed(seed)
    S = B + 1  # slots 1..B, slot 0 reserved (sglang's allocator)

    def randn(*shape: int, scale: float = 1.0, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        return (torch.randn(*shape, generator=gen, device="cuda") * scale).to(dtype)

    gate = HV * K if variant == "kda" else HV
    backing = randn(S + 2, HV, V, K, scale=0.1)
    slots = torch.randperm(B, generator=torch.Generator().manual_seed(seed)) + 1
    return {
        "mixed_qkv": randn(B, 2 * H * K + HV * V, dtype=torch.bfloat16),
        "a": randn(B, gate, dtype=torch.bfloat16), "b": randn(B, HV, dtype=torch.bfloat16),
        "A_log": randn(HV, scale=0.5), "dt_bias": randn(gate, scale=0.5), "scale": K ** -0.5,
        "initial_state": backing[1:S + 1], "out": torch.empty(B, 1, HV, V, dtype=torch.bfloat16, device="cuda"),
        "ssm_state_indices": slots.to(torch.int32).cuda(), "use_qk_l2norm_in_kernel": True, "backing": backing,
    }


def positional(call: dict[str, Any], variant: str) -> tuple:
    names = ("mixed_qkv", "a", "b", "A_log", "dt_bias", "scale", "initial_state", "out", "ssm_state_indices",
             "use_qk_l2norm_in_kernel")
    return tuple(call[n] for n in names) + ((None,) if variant == "kda" else ())


def keywords(call: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in call.items() if k != "backing"}


EAGER_ROUNDS = 9  # interleaved rounds of EAGER_CALLS back-to-back calls per side


def eager_round_us(fn: Callable[[], Any], calls: int = EAGER_CALLS) -> float:
    """One round's wall time per call of `calls` back-to-back calls, device work included (synchronised)."""
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - start) / calls * 1e6


def eager_us(*fns: Callable[[], Any]) -> list[float]:
    """Each function's eager time per call: the fastest of EAGER_ROUNDS rounds in which the functions take
    turns (after five warm-up calls each), as the host figures are taken: a host's slow spell lands on every
    side alike, and only ever adds time."""
    for fn in fns:
        for _ in range(5):
            fn()
    best = [float("inf")] * len(fns)
    for _ in range(EAGER_ROUNDS):
        for position, fn in enumerate(fns):
            best[position] = min(best[position], eager_round_us(fn))
    return best


HOST_ROUNDS = 41  # as guard_host_cost.py: the fastest of many rounds, on a host shared with other work


def host_round_us(fn: Callable[[], Any], calls: int = EAGER_CALLS) -> float:
    """One round's host time per call (the device work is a no-op or asynchronous)."""
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    elapsed = (time.perf_counter() - start) / calls * 1e6
    torch.cuda.synchronize()
    return elapsed


def fastest_interleaved(*rounds: Callable[[], float]) -> list[float]:
    """Each round function's fastest of HOST_ROUNDS rounds, the functions taking turns round by round: other
    processes only add time, and taking turns puts a slow spell of the host on every side alike."""
    best = [float("inf")] * len(rounds)
    for _ in range(HOST_ROUNDS):
        for position, run in enumerate(rounds):
            best[position] = min(best[position], run())
    return best


def host_us(fn: Callable[[], Any], calls: int = EAGER_CALLS) -> float:
    """The fastest of HOST_ROUNDS rounds of the host time per call."""
    return fastest_interleaved(lambda: host_round_us(fn, calls))[0]


def layer_calls(kwargs: dict[str, Any], layers: int, disjoint: bool) -> list[dict[str, Any]]:
    """One call's arguments per layer of a decode step: the same shapes, each layer's pool at its own address.
    `disjoint`: a pool of its own per layer (the kernels run and write them); else overlapping windows of one
    backing (sglang's kernel stubbed, host timing: only the addresses matter, and memory stays small)."""
    pool = kwargs["initial_state"]
    if disjoint:
        return [dict(kwargs, initial_state=pool.clone()) for _ in range(layers)]
    backing = torch.zeros(pool.shape[0] + layers - 1, *pool.shape[1:], dtype=pool.dtype, device=pool.device)
    return [dict(kwargs, initial_state=backing[layer:layer + pool.shape[0]]) for layer in range(layers)]


def run_step(fn: Callable[..., Any], calls: list[dict[str, Any]], indices: torch.Tensor) -> None:
    """One decode step: every layer's call passes the same indices tensor."""
    for kwargs in calls:
        kwargs["ssm_state_indices"] = indices
        fn(**kwargs)


def host_step_round_us(fn: Callable[..., Any], calls: list[dict[str, Any]], indices: torch.Tensor,
                       total: int = EAGER_CALLS) -> float:
    """One round's host time per call over decode steps, each step with a new indices object (built before the
    round's timing starts)."""
    count = max(1, total // len(calls))
    steps = [indices.clone() for _ in range(count)]
    start = time.perf_counter()
    for step in steps:
        run_step(fn, calls, step)
    elapsed = (time.perf_counter() - start) / (count * len(calls)) * 1e6
    torch.cuda.synchronize()
    return elapsed


def counted_checks(run: Callable[[], Any]) -> int:
    """How many slot checks the guard launches (a host-side count) while `run()` runs."""
    launch = device_guard.CheckLaunch.__call__
    count = [0]

    def counted(check: Any, *args: Any, **options: Any) -> Any:  # (the separate check passes release=...)
        count[0] += 1
        return launch(check, *args, **options)

    device_guard.CheckLaunch.__call__ = counted  # type: ignore[method-assign]
    try:
        run()
    finally:
        device_guard.CheckLaunch.__call__ = launch  # type: ignore[method-assign]
    return count[0]


def checks_per_step(fn: Callable[..., Any], calls: list[dict[str, Any]], indices: torch.Tensor) -> float:
    """How many slot checks a guarded decode step launches (counted on two steps, outside the timings)."""
    count = counted_checks(lambda: [run_step(fn, calls, indices.clone()) for _ in range(2)])
    torch.cuda.synchronize()
    return count / 2


GRAPH_ROUNDS = 7  # interleaved rounds of REPLAYS replays per graph


def capture_graph(fn: Callable[[], Any], repeat: int = GRAPH_CALLS) -> torch.cuda.CUDAGraph:
    """A graph of GRAPH_CALLS calls: `fn` captured `repeat` times (a call, or with repeat=1 a decode step of
    GRAPH_CALLS layers), after three eager warm-up calls."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.stream(stream), torch.cuda.graph(graph, stream=stream):
        for _ in range(repeat):
            fn()
    torch.cuda.synchronize()
    return graph


def replay_round_us(graph: torch.cuda.CUDAGraph) -> float:
    """The median of REPLAYS replays' time per call (µs), each replay timed by events."""
    times = []
    for _ in range(REPLAYS):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e3 / GRAPH_CALLS)
    return statistics.median(times)


def graphs_us(*graphs: torch.cuda.CUDAGraph) -> list[dict[str, Any]]:
    """Each graph's replay time per call over GRAPH_ROUNDS rounds in which the graphs take turns (a clock or
    a neighbour's slow spell lands on every side alike): the median of the rounds' medians, and the spread
    (half the range of the rounds, relative to that median)."""
    rounds: list[list[float]] = [[] for _ in graphs]
    for _ in range(GRAPH_ROUNDS):
        for position, graph in enumerate(graphs):
            rounds[position].append(replay_round_us(graph))
    summary = []
    for times in rounds:
        middle = statistics.median(times)
        summary.append({"us": middle, "spread": (max(times) - min(times)) / 2 / middle, "rounds": times})
    return summary


class _NoLaunch:
    """Stands in for sglang's Triton kernel object: `kernel[grid](...)` does nothing (host-only timing)."""

    def __getitem__(self, grid: Any) -> Callable[..., None]:
        return lambda *args, **kwargs: None


def profile_calls(title: str, fn: Callable[[], Any], calls: int = 500) -> None:
    """Where the host time of steady-state calls goes (cProfile, by own time)."""
    import cProfile
    import pstats

    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(calls):
        fn()
    profiler.disable()
    torch.cuda.synchronize()
    print(f"-- profile: {title}, {calls} calls")
    pstats.Stats(profiler, stream=sys.stdout).sort_stats("tottime").print_stats(14)


def bad_slots(B: int, S: int) -> tuple[list[int], list[tuple[str, int, int]]]:
    """A slot table with every bad-index class that fits in B rows, and the faults it must produce."""
    slots = list(range(1, B + 1))
    expected: list[tuple[str, int, int]] = []
    if B == 1:
        return [S], [("GDR241", 0, S)]
    slots[1] = S  # one past the pool
    expected.append(("GDR241", 1, S))
    if B >= 8:
        slots[2] = 1 << 30  # far past it
        expected.append(("GDR241", 2, 1 << 30))
        slots[4] = slots[3]  # a repeated slot: the later row is skipped
        expected.append(("GDR242", 4, slots[3]))
        slots[0] = 0  # a live request in the reserved slot, rows after it live
        expected.append(("GDR247", 0, 0))
    return slots, sorted(expected, key=lambda e: e[1])


def measure_row(module: Any, variant: str, B: int) -> dict[str, Any]:
    """One table row: eager, host and graph-replay times of the checked, unchecked, sglang and guarded calls."""
    checked = packed_decode if variant == "gdn" else kda_packed_decode
    unchecked = launch_packed_decode if variant == "gdn" else launch_kda_packed_decode
    sglang = getattr(module, SGLANG[variant])
    call = make_call(variant, B)
    args = positional(call, variant)
    kwargs = keywords(call)
    row: dict[str, Any] = {"variant": variant, "B": B}
    row["checked_eager_us"], row["unchecked_eager_us"], row["sglang_eager_us"] = eager_us(
        lambda: checked(*args, context="engine"), lambda: unchecked(*args), lambda: sglang(**kwargs))
    # The graph hooks on (the default): the guard checks once per decode step (see the module docstring).
    guard = gdr_check.guard(engine="sglang", mode="record", targets=[f"{module.__name__}:{SGLANG[variant]}"])
    hosts = layer_calls(kwargs, STEP_LAYERS, disjoint=False)
    layers = layer_calls(kwargs, GRAPH_CALLS, disjoint=True)
    indices = kwargs["ssm_state_indices"]
    with guard:
        guarded = getattr(module, SGLANG[variant])
        row["guarded_eager_us"] = eager_us(lambda: guarded(**kwargs))[0]
        # Whether the guard's slot check went straight to its compiled kernel after the first launch.
        launches = [launch for buffer in guard._buffers.values() for launch in buffer._launches.values()]
        row["check_direct_launch"] = bool(launches) and all(
            launch.launcher.enabled and launch.launcher.variants for launch in launches)
        kernel = getattr(module, SGLANG_KERNEL[variant])
        setattr(module, SGLANG_KERNEL[variant], _NoLaunch())
        try:
            guarded_us, sglang_us = fastest_interleaved(lambda: host_round_us(lambda: guarded(**kwargs)),
                                                        lambda: host_round_us(lambda: sglang(**kwargs)))
            row["guard_host_us"], row["sglang_checks_us"] = guarded_us - sglang_us, sglang_us
            for _ in range(2):  # each layer's first call (its pool's tag), then warm
                run_step(guarded, hosts, indices.clone())
            row["step_layers"] = STEP_LAYERS
            row["checks_per_step"] = checks_per_step(guarded, hosts, indices)
            guarded_us, sglang_us = fastest_interleaved(lambda: host_step_round_us(guarded, hosts, indices),
                                                        lambda: host_step_round_us(sglang, hosts, indices))
            row["guard_host_step_us"], row["sglang_checks_step_us"] = guarded_us - sglang_us, sglang_us
        finally:
            setattr(module, SGLANG_KERNEL[variant], kernel)
        row["checked_host_us"] = host_us(lambda: checked(*args, context="engine"))
        # The six graphs replayed in turn: the unchecked and checked launches as GRAPH_CALLS calls on one pool
        # (one slot set, its state hot in L2, each call reading the previous call's write) and as a decode
        # step of GRAPH_CALLS layers with pools of their own (as an engine calls them), then sglang's wrapper
        # and the guarded wrapper, each as that decode step.
        checked_engine = functools.partial(checked, context="engine")
        graphs = [capture_graph(lambda: unchecked(*args)), capture_graph(lambda: checked(*args, context="engine")),
                  capture_graph(lambda: run_step(unchecked, layers, indices), repeat=1),
                  capture_graph(lambda: run_step(checked_engine, layers, indices), repeat=1),
                  capture_graph(lambda: run_step(sglang, layers, indices), repeat=1),
                  capture_graph(lambda: run_step(guarded, layers, indices), repeat=1)]
        names = ("unchecked_graph", "checked_graph", "unchecked_step_graph", "checked_step_graph", "sglang_graph",
                 "guarded_graph")
        for name, timing in zip(names, graphs_us(*graphs), strict=True):
            row[f"{name}_us"], row[f"{name}_spread"], row[f"{name}_rounds_us"] = (
                timing["us"], timing["spread"], timing["rounds"])
        row["graph_layers"] = GRAPH_CALLS
        del graphs
        if B == 32 and os.environ.get("RUNTIME_GUARD_PROFILE"):
            profile_calls(f"{variant} B={B} guarded sglang wrapper", lambda: guarded(**kwargs))
            profile_calls(f"{variant} B={B} checked kernel", lambda: checked(*args, context="engine"))
    every_call = gdr_check.guard(engine="sglang", mode="record", targets=[f"{module.__name__}:{SGLANG[variant]}"],
                                 hook_graphs=False)  # no capture hooks: no reuse, a check per layer
    with every_call:
        guarded = getattr(module, SGLANG[variant])
        row["guarded_graph_every_call_us"] = graphs_us(
            capture_graph(lambda: run_step(guarded, layers, indices), repeat=1))[0]["us"]
    errors = [d for d in guard.diagnostics + every_call.diagnostics if d.severity == "error"]
    row["guard_errors_on_valid_calls"] = len(errors)
    print(f"{variant:4} {B:>4} | {row['checked_eager_us']:9.1f} {row['sglang_eager_us']:9.1f} "
          f"{row['checked_eager_us'] / row['sglang_eager_us']:6.2f} | {row['guard_host_us']:10.1f} "
          f"{row['sglang_checks_us']:10.1f} {row['guard_host_us'] / row['sglang_checks_us']:6.2f} | "
          f"{row['guard_host_step_us']:10.1f} {row['sglang_checks_step_us']:10.1f} "
          f"{row['guard_host_step_us'] / row['sglang_checks_step_us']:6.2f} {row['checks_per_step']:6g} | "
          f"{row['unchecked_graph_us']:11.2f} {row['checked_graph_us']:9.2f} "
          f"{row['checked_graph_us'] / row['unchecked_graph_us']:6.3f} | {row['unchecked_step_graph_us']:9.2f} "
          f"{row['checked_step_graph_us']:9.2f} {row['checked_step_graph_us'] / row['unchecked_step_graph_us']:6.3f} | "
          f"{row['sglang_graph_us']:9.2f} "
          f"{row['guarded_graph_us']:9.2f} {row['guarded_graph_us'] / row['sglang_graph_us']:6.3f} "
          f"{row['guarded_graph_every_call_us']:9.2f}",
          flush=True)
    device_guard.default_buffer(call["initial_state"].device).take()
    torch.cuda.empty_cache()
    return row


def main() -> int:
    source = find_sglang_source()
    if source is None:
        print("set GDR_CHECK_SGLANG_PATH to the sglang 0.5.23 wheel or tree", file=sys.stderr)
        return 2
    module = _load_module(source.resolve())
    # Keep the loader's light stand-ins for sglang's packages installed (the KDA wrapper imports its CUDA
    # fast-path module at call time) and register the kernel module under its real name, so that the guard
    # finds it where it finds sglang's own.
    stand_ins = _stand_ins_installed()  # kept referenced: a collected generator would undo it
    stand_ins.__enter__()
    sys.modules["sglang.kernels.ops.attention.fla.fused_recurrent"] = module
    sys.modules[module.__name__] = module
    results: dict[str, Any] = {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                               "sglang_source": str(source), "rows": [], "faults": []}
    print(f"{'var':4} {'B':>4} | {'chk eager':>9} {'sgl eager':>9} {'ratio':>6} | {'guard host':>10} "
          f"{'sgl checks':>10} {'ratio':>6} | {'guard/step':>10} {'sgl checks':>10} {'ratio':>6} {'checks':>6} | "
          f"{'unchk graph':>11} {'chk graph':>9} {'ratio':>6} | {'unchk step':>9} {'chk step':>9} {'ratio':>6} | "
          f"{'sgl graph':>9} {'guarded':>9} {'ratio':>6} "
          f"{'every call':>9}")
    print(f"guard/step: per call over decode steps of {STEP_LAYERS} layers (pools of their own, one indices tensor "
          f"per step, a new object each step); 'checks' per step; sgl/guarded graph: a step of {GRAPH_CALLS} "
          f"layers; unchk/chk graph: {GRAPH_CALLS} calls on one pool; unchk/chk step: that decode step; "
          f"'every call': the guarded graph without reuse (hook_graphs=False)")
    for variant in ("gdn", "kda"):
        for B in BATCHES:
            results["rows"].append(measure_row(module, variant, B))
        for B in BATCHES:
            results["faults"] += fault_cases(variant, B, module)
    for case in results["faults"]:
        print(f"faults {case['variant']} B={case['B']:>3} {case['path']:8}: found {case['found']} "
              f"expected {case['expected']} match={case['match']} canaries_equal={case['canaries_equal']} "
              f"layers={case['layers']} checks captured={case['checks_captured']} labels={case['labels']}")
    results["check_kernel_fast_launch"] = all(row["check_direct_launch"] for row in results["rows"])
    print(f"check kernel launched directly (not through the JIT): {results['check_kernel_fast_launch']}")
    out = os.environ.get("OUT")
    if out:
        with open(os.path.join(out, "runtime_guard.json"), "w") as handle:
            json.dump(results, handle, indent=1)
    ok = all(case["match"] and case["canaries_equal"] for case in results["faults"])
    return 0 if ok else 1


FAULT_STEP_LAYERS = 4  # layers of the guarded decode step replayed on bad slots (path "step")


def fault_cases(variant: str, B: int, module: Any) -> list[dict[str, Any]]:
    """Replay graphs holding bad slot tables; compare the faults read back and the canaries. Paths: the checked
    kernel; the guarded sglang wrapper (one call, no graph hooks); and a guarded decode step ("step": the graph
    hooks on, FAULT_STEP_LAYERS layers with pools of their own sharing the indices, so one captured check serves
    them all): its faults must be found once, in the first layer, with every layer's canaries unchanged."""
    cases = []
    for path in ("checked", "guarded", "step"):
        cases.append(fault_case(variant, B, module, path))
        torch.cuda.empty_cache()  # the case's graph and tensors were freed when it returned
    return cases


def fault_case(variant: str, B: int, module: Any, path: str) -> dict[str, Any]:
    """One graph (the checked kernel, or the guarded sglang wrapper) replayed on a bad slot table."""
    checked = packed_decode if variant == "gdn" else kda_packed_decode
    call = make_call(variant, B, seed=1)
    S = call["initial_state"].shape[0]
    valid = call["ssm_state_indices"].clone()
    slots, expected = bad_slots(B, S)
    buffer = device_guard.FaultBuffer(call["initial_state"].device)
    guard = gdr_check.guard(engine="sglang", mode="record", targets=[f"{module.__name__}:{SGLANG[variant]}"],
                            hook_graphs=path == "step")
    backings = [call["backing"]]
    if path == "checked":
        def step() -> Any:
            return checked(*positional(call, variant), context="engine", faults=buffer, label="layer 0")
    else:
        guard.__enter__()
        guarded = getattr(module, SGLANG[variant])
        kwargs = keywords(call)
        layers = [kwargs]
        if path == "step":  # more layers, each with a canaried pool of its own, all passing the same indices
            others = [make_call(variant, B, seed=2 + n) for n in range(FAULT_STEP_LAYERS - 1)]
            layers += [dict(kwargs, initial_state=other["initial_state"]) for other in others]
            backings += [other["backing"] for other in others]

        def step() -> Any:
            return run_step(guarded, layers, kwargs["ssm_state_indices"])
    try:
        step()  # compile and cache the verdict eagerly, on valid slots
        torch.cuda.synchronize()
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.stream(stream), torch.cuda.graph(graph, stream=stream):
            checks = counted_checks(step)
        torch.cuda.synchronize()
        buffer.take()
        guard.raise_pending() if path != "checked" else None
        guard.diagnostics.clear()
        canaries = [(backing[0].clone(), backing[S + 1].clone()) for backing in backings]
        call["ssm_state_indices"].copy_(torch.tensor(slots, dtype=torch.int32))
        graph.replay()
        torch.cuda.synchronize()
        labels: list[str] = []
        if path == "checked":
            found = [(f.code, f.row, f.slot) for f in buffer.take()[0]]
        else:
            guard.raise_pending()
            faults = [d for d in guard.diagnostics if d.code in device_guard.FAULT_CODES.values()]
            found = sorted(((d.code, d.bindings["row"], d.bindings.get("slot", 0)) for d in faults),
                           key=lambda e: e[1])
            labels = sorted({d.notes[0] for d in faults})
    finally:
        if path != "checked":
            guard.__exit__(None, None, None)
    equal = all(torch.equal(before[0], backing[0]) and torch.equal(before[1], backing[S + 1])
                for before, backing in zip(canaries, backings, strict=True))
    call["ssm_state_indices"].copy_(valid)
    # The guarded paths capture one check: the only call, or the step's first layer (the others reuse it).
    match = found == expected and (path == "checked" or (checks == 1 and labels == ["in pool #0"]))
    return {"variant": variant, "B": B, "path": path, "found": found, "expected": expected, "match": match,
            "canaries_equal": equal, "layers": len(backings), "checks_captured": checks, "labels": labels}


if __name__ == "__main__":
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sys.exit(main())
