"""Memory across iterations: steady, cache growth or leak, from a slope test on samples.

On CUDA, ``memory_allocated`` (live tensors) and ``memory_reserved`` (the caching allocator's
pool) are sampled after every request: allocated growing is a leak; reserved growing while
allocated is flat is cache growth. On the CPU the resident set size (``/proc/self/statm``) is
the only signal, so growth there is reported as a leak.

A series is *growing* when, after a warm-up fifth is dropped, the least-squares slope is positive
and significant both over the whole window and over its second half (a one-off step up, such as
a new allocator arena, flattens in the second half), and the fitted growth exceeds a floor.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
from scipy import stats

from driftwarden.latency.inputs import BatchPool

STEADY = "steady"
CACHE_GROWTH = "cache growth"
LEAK = "leak"
UNAVAILABLE = "unavailable"
MIN_GROWTH_BYTES = {"cpu": 4 << 20, "cuda": 1 << 20}
P_VALUE = 1e-3


@dataclass
class MemoryTrace:
    """Memory samples (bytes) after each request; ``reserved`` only on CUDA."""

    device: str
    allocated: np.ndarray
    reserved: np.ndarray | None
    peak_allocated: int | None = None
    peak_reserved: int | None = None


def rss_bytes() -> int | None:
    """Resident set size of this process, from /proc/self/statm (None where /proc is absent)."""
    try:
        with open("/proc/self/statm") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


def release_free_heap() -> bool:
    """Give the C heap's free pages back to the system (glibc's ``malloc_trim``); False where there is none.

    Memory that earlier work (the latency chunks, other models) freed stays in the process's heap, and new
    allocations reuse it without the resident set growing: a model keeping 256 KiB a call showed a flat RSS
    for 200 calls after 750 MiB had been freed. Trimmed first, growth shows in the RSS again.
    """
    try:
        import ctypes

        return bool(ctypes.CDLL("libc.so.6").malloc_trim(0))
    except (OSError, AttributeError):
        return False


def probe(fn: Callable[..., Any], pool: BatchPool, iterations: int, device: str) -> MemoryTrace | None:
    """Run ``iterations`` requests after one warm-up pass, sampling memory after each; None if unmeasurable."""
    for batch in pool.batches:
        fn(*batch.tensors)
    if device.startswith("cuda"):
        return _probe_cuda(fn, pool, iterations, device)
    if rss_bytes() is None:
        return None
    release_free_heap()
    samples = []
    for i in range(iterations):
        fn(*pool.batches[i % len(pool)].tensors)
        samples.append(rss_bytes())
    return MemoryTrace("cpu", np.asarray(samples, dtype=np.float64), None, peak_allocated=int(max(samples)))


def growth(samples: np.ndarray, floor_bytes: float) -> dict:
    """Slope test of one series: bytes per iteration, p-value, fitted growth and whether it grows."""
    y = np.asarray(samples, dtype=np.float64)[len(samples) // 5:]
    if y.size < 8 or np.ptp(y) == 0:
        return {"slope_bytes_per_iter": 0.0, "p_value": 1.0, "growth_bytes": 0.0, "growing": False}
    whole = stats.linregress(np.arange(y.size), y)
    half = y[y.size // 2:]
    late = stats.linregress(np.arange(half.size), half) if np.ptp(half) > 0 else None
    fitted = float(whole.slope * (y.size - 1))
    growing = bool(
        whole.slope > 0 and whole.pvalue < P_VALUE and fitted >= floor_bytes
        and late is not None and late.slope > 0 and late.pvalue < P_VALUE
    )
    return {"slope_bytes_per_iter": float(whole.slope), "p_value": float(whole.pvalue),
            "growth_bytes": fitted, "growing": growing}


def classify(trace: MemoryTrace | None) -> dict:
    """Classify a trace as steady, cache growth or leak, with the slope tests and peaks behind it."""
    if trace is None:
        return {"status": UNAVAILABLE, "reason": "no memory counter on this platform (/proc/self/statm missing)"}
    floor = MIN_GROWTH_BYTES["cuda" if trace.device.startswith("cuda") else "cpu"]
    allocated = growth(trace.allocated, floor)
    reserved = growth(trace.reserved, floor) if trace.reserved is not None else None
    if allocated["growing"]:
        status = LEAK
    elif reserved and reserved["growing"]:
        status = CACHE_GROWTH
    else:
        status = STEADY
    return {
        "status": status, "signal": "rss" if trace.reserved is None else "cuda_allocator",
        "iterations": int(trace.allocated.size), "allocated": allocated, "reserved": reserved,
        "start_bytes": float(trace.allocated[0]), "end_bytes": float(trace.allocated[-1]),
        "peak_allocated_bytes": trace.peak_allocated, "peak_reserved_bytes": trace.peak_reserved,
    }


def _probe_cuda(fn: Callable[..., Any], pool: BatchPool, iterations: int, device: str) -> MemoryTrace:
    import torch

    torch.cuda.synchronize(device)
    torch.cuda.reset_peak_memory_stats(device)
    allocated, reserved = [], []
    for i in range(iterations):
        fn(*pool.batches[i % len(pool)].tensors)
        torch.cuda.synchronize(device)
        allocated.append(torch.cuda.memory_allocated(device))
        reserved.append(torch.cuda.memory_reserved(device))
    return MemoryTrace(
        device, np.asarray(allocated, dtype=np.float64), np.asarray(reserved, dtype=np.float64),
        int(torch.cuda.max_memory_allocated(device)), int(torch.cuda.max_memory_reserved(device)),
    )
