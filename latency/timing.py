"""Timing one request: CUDA events on a GPU, ``perf_counter_ns`` on the CPU; chunks of requests
back to back or on Poisson arrivals; latency summaries.

A chunk runs until it has both ``min_count`` requests and ``min_ns`` of wall time, the
MLPerf LoadGen rule applied per round; the runner spreads an arm's minimums over its rounds.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable, Protocol, Sequence

import numpy as np

from driftwarden.latency.inputs import BatchPool

PERCENTILES = {"p50": 50.0, "p90": 90.0, "p95": 95.0, "p99": 99.0, "p99_9": 99.9}


class Timer(Protocol):
    """Times one synchronous call and returns its latency in nanoseconds."""

    name: str

    def time_call(self, fn: Callable[..., Any], args: Sequence[Any]) -> int:
        """Run ``fn(*args)`` once and return how long it took, in ns."""
        ...


class CpuTimer:
    """Wall-clock timing with ``time.perf_counter_ns``."""

    name = "perf_counter_ns"

    def time_call(self, fn: Callable[..., Any], args: Sequence[Any]) -> int:
        """Run ``fn(*args)`` once and return the elapsed ns."""
        start = time.perf_counter_ns()
        fn(*args)
        return time.perf_counter_ns() - start


class CudaTimer:
    """GPU timing with a pair of CUDA events, synchronised after every request."""

    name = "cuda_events"

    def __init__(self) -> None:
        import torch

        self._start = torch.cuda.Event(enable_timing=True)
        self._end = torch.cuda.Event(enable_timing=True)

    def time_call(self, fn: Callable[..., Any], args: Sequence[Any]) -> int:
        """Record events around ``fn(*args)`` on the current stream and return their distance in ns."""
        self._start.record()
        fn(*args)
        self._end.record()
        self._end.synchronize()
        return int(self._start.elapsed_time(self._end) * 1e6)


def make_timer(device: str) -> Timer:
    """Return the timer for ``device``: CUDA events on cuda, perf_counter_ns otherwise."""
    return CudaTimer() if device.startswith("cuda") else CpuTimer()


@dataclass
class Chunk:
    """The requests of one arm in one round."""

    latency_ns: np.ndarray
    buckets: list[str]
    elapsed_ns: int
    cursor: int


def run_chunk(
    fn: Callable[..., Any], pool: BatchPool, cursor: int, min_count: int, min_ns: int, timer: Timer,
    rate: float = 0.0, rng: np.random.Generator | None = None, settle: int = 1,
) -> Chunk:
    """Send requests from ``pool`` (starting at ``cursor``) until both minimums are met.

    The first ``settle`` requests are not timed: they refill caches another arm has just used.
    With ``rate`` > 0 requests arrive as a Poisson process of that many per second and the
    latency counts from the scheduled arrival (queueing included); otherwise back to back.
    """
    latencies, buckets = [], []
    for i in range(settle):
        timer.time_call(fn, pool.batches[(cursor + i) % len(pool)].tensors)
    start = arrival = time.perf_counter_ns()
    gaps = _Gaps(rate, rng)
    while len(latencies) < min_count or time.perf_counter_ns() - start < min_ns:
        batch = pool.batches[cursor % len(pool)]
        cursor += 1
        if rate > 0:
            arrival += gaps.next_ns()
            _wait_until(arrival)
            timer.time_call(fn, batch.tensors)
            latencies.append(time.perf_counter_ns() - arrival)
        else:
            latencies.append(timer.time_call(fn, batch.tensors))
        buckets.append(batch.bucket)
    return Chunk(np.asarray(latencies, dtype=np.int64), buckets, time.perf_counter_ns() - start, cursor)


def warm_up(fn: Callable[..., Any], pool: BatchPool, count: int, timer: Timer) -> None:
    """Run ``count`` untimed requests (JIT profiling, allocator and cache warm-up), and every batch shape once."""
    done, seen = 0, set()
    for batch in pool.batches:
        if done < count or batch.bucket not in seen:
            timer.time_call(fn, batch.tensors)
            done += 1
            seen.add(batch.bucket)
    while done < count:
        timer.time_call(fn, pool.batches[done % len(pool)].tensors)
        done += 1


def summarise(latency_ns: np.ndarray) -> dict[str, float]:
    """Percentiles (p50 ... p99.9), mean, min and max of latencies, in milliseconds."""
    ms = np.asarray(latency_ns, dtype=np.float64) / 1e6
    if ms.size == 0:
        return {**{k: float("nan") for k in PERCENTILES}, "mean": float("nan"), "min": float("nan"), "max": float("nan")}
    values = np.percentile(ms, list(PERCENTILES.values()))
    out = {k: float(v) for k, v in zip(PERCENTILES, values)}
    out.update(mean=float(ms.mean()), min=float(ms.min()), max=float(ms.max()))
    return out


class _Gaps:
    """Exponential inter-arrival gaps of a Poisson process, drawn in blocks."""

    def __init__(self, rate: float, rng: np.random.Generator | None) -> None:
        self._rate = rate
        self._rng = rng or np.random.default_rng()
        self._block: list[float] = []

    def next_ns(self) -> int:
        """The next gap, in ns."""
        if not self._block:
            self._block = list(self._rng.exponential(1e9 / self._rate, 256))
        return int(self._block.pop())


def _wait_until(t_ns: int) -> None:
    """Sleep most of the way, then spin, so that a request starts within microseconds of its arrival."""
    while True:
        left = t_ns - time.perf_counter_ns()
        if left <= 0:
            return
        if left > 2_000_000:
            time.sleep((left - 1_000_000) / 1e9)
