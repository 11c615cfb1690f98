"""Latency of a kernel call and the device's copy bandwidth, timed the same way (child process only).

On CUDA each sample is one eager launch between two CUDA events, after an L2 flush (a 512 MiB memset on the
same stream). The state is then read from HBM as in serving, where a layer's slots are not in L2 from the
previous launch; and the flush keeps the GPU busy while the host enqueues the launch, so the events time the
kernel, not the Python wrapper. The copy roofline is a device-to-device copy of 2 GiB timed the same way.
Under the interpreter nothing is timed here: the wall clock of the verified steps is reported, marked as not a
kernel time.
"""

from __future__ import annotations

import functools
import statistics
from collections.abc import Callable

import torch

from .messages import CopyBandwidth

SAMPLES = 30
FLUSH_BYTES = 512 << 20  # well over the L2 of current GPUs (H200: 60 MB)
COPY_BYTES = 2 << 30
METHOD = "eager launches after an L2 flush, CUDA events, median of 30"


def cold_time_us(launch: Callable[[], object], samples: int = SAMPLES) -> float:
    """Median microseconds of one launch with a cold L2."""
    launch()  # compile and warm up the launch path
    torch.cuda.synchronize()
    flush = torch.empty(FLUSH_BYTES, dtype=torch.uint8, device="cuda")
    events = []
    for _ in range(samples):
        flush.zero_()
        # torch leaves `torch.cuda.Event.__init__` unannotated.
        start = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
        end = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
        start.record()
        launch()
        end.record()
        events.append((start, end))
    torch.cuda.synchronize()
    del flush
    return float(statistics.median(start.elapsed_time(end) * 1e3 for start, end in events))


def copy_bandwidth(device: torch.device, size_bytes: int = COPY_BYTES) -> CopyBandwidth:
    """Device-to-device copy of `size_bytes`, timed like the kernel: bytes read + written per second."""
    source = torch.empty(size_bytes, dtype=torch.uint8, device=device).random_(0, 255)
    target = torch.empty_like(source)
    copy = functools.partial(target.copy_, source)
    us = cold_time_us(copy, samples=10)
    del source, target, copy
    torch.cuda.empty_cache()
    return {"bytes": 2 * size_bytes, "median_us": us, "bandwidth_gbps": 2 * size_bytes / us / 1e3, "method": METHOD}


def bytes_per_call(batch: int, live_rows: int, state_row_bytes: int, qkv_row_bytes: int, out_row_bytes: int) -> int:
    """docs/kernel-contract.md §11: B * (2 * state row + mixed_qkv row + out row), the state only for live rows."""
    return live_rows * 2 * state_row_bytes + batch * (qkv_row_bytes + out_row_bytes)
