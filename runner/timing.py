"""Latency of a kernel call and the device's copy bandwidth, timed the same way (child process only).

On CUDA: a graph of `REPEAT` back-to-back launches, replayed and timed with CUDA events (the method of the
kernel-contract.md section 11 figures: warm, same slots every launch), falling back to events around eager
launches when capture fails. Under the interpreter nothing is timed here: the wall clock of the verified
steps is reported, marked as not a kernel time.
"""

from __future__ import annotations

import statistics
from typing import Callable

import torch

REPEAT = 10
SAMPLES = 15
COPY_BYTES = 1 << 30  # large enough to stream from HBM on any current GPU (H200 L2: 60 MB)


def _events_us(run: Callable[[], object], launches: int) -> float:
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(SAMPLES):
        start.record()
        run()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e3 / launches)
    return statistics.median(times)


def cuda_time_us(launch: Callable[[], object], repeat: int = REPEAT) -> tuple[float, str]:
    """Median microseconds per launch, and the method used."""
    launch()  # compile and warm up outside any capture
    torch.cuda.synchronize()
    try:
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            launch()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for _ in range(repeat):
                launch()
        graph.replay()
        torch.cuda.synchronize()
        return _events_us(graph.replay, repeat), "cuda-graph replay, CUDA events"
    except Exception:  # noqa: BLE001 - some wrappers cannot be captured; eager launches still time the kernel
        torch.cuda.synchronize()

        def eager() -> None:
            for _ in range(repeat):
                launch()

        return _events_us(eager, repeat), "eager launches, CUDA events"


def copy_bandwidth(device: torch.device, size_bytes: int = COPY_BYTES) -> dict[str, float | str]:
    """Device-to-device copy of `size_bytes`, timed like the kernel: bytes read + written per second."""
    source = torch.empty(size_bytes, dtype=torch.uint8, device=device).random_(0, 255)
    target = torch.empty_like(source)
    us, method = cuda_time_us(lambda: target.copy_(source), repeat=2)
    del source, target
    torch.cuda.empty_cache()
    return {"bytes": 2 * size_bytes, "median_us": us, "bandwidth_gbps": 2 * size_bytes / us / 1e3,
            "method": method}


def bytes_per_call(batch: int, live_rows: int, state_row_bytes: int, qkv_row_bytes: int, out_row_bytes: int) -> int:
    """kernel-contract.md section 11: B * (2 * state row + mixed_qkv row + out row), the state only for live rows."""
    return live_rows * 2 * state_row_bytes + batch * (qkv_row_bytes + out_row_bytes)
