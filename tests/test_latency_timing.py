"""Timing loop rules (minimum count AND duration, Poisson arrivals) and the input adapter's bucketing.

Rules only: what a chunk must at least do. How fast this machine serves requests is bench/bench_latency.py's.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest
from scipy import stats
import torch  # a declared dependency (the bench extra, installed by make setup): fail, never skip

from driftwarden.latency import samples
from driftwarden.latency.adapter import AdapterConfig, InputSpec, bucket_for, build_batch, parse_sequence
from driftwarden.latency.inputs import build_pool, read_events
from driftwarden.latency.errors import BenchInputError
from driftwarden.latency.timing import CpuTimer, _Gaps, run_chunk, summarise


@pytest.fixture(scope="module")
def events(tmp_path_factory: pytest.TempPathFactory):
    """64 events with sequences of 10..40 tokens."""
    return read_events(samples.write_events(tmp_path_factory.mktemp("t") / "e.jsonl", 64, seq_len=(10, 40))).events


def _sleepy_pool(events, seconds: float) -> tuple:
    pool = build_pool("reference", events, AdapterConfig(inputs=[InputSpec(name="x", features=["f0"])]), 1,
                      torch.float32, "cpu")
    return (lambda x: time.sleep(seconds)), pool


def test_chunk_runs_until_both_the_count_and_the_duration_are_met(events) -> None:
    fn, pool = _sleepy_pool(events, 0.0)
    by_count = run_chunk(fn, pool, 0, 500, 0, CpuTimer())
    by_time = run_chunk(fn, pool, 0, 1, 50_000_000, CpuTimer())
    assert by_count.latency_ns.size == 500
    assert by_time.elapsed_ns >= 50_000_000 and by_time.latency_ns.size > 1


def test_poisson_arrivals_are_scheduled_at_the_target_rate() -> None:
    """The schedule, not the clock: exponential gaps of mean 1 / rate (the mean of 20,000 within 4 standard errors)."""
    gaps = _Gaps(2000.0, np.random.default_rng(0))
    drawn = np.array([gaps.next_ns() for _ in range(20_000)], dtype=np.float64)
    assert abs(drawn.mean() - 500_000) <= 4 * 500_000 / np.sqrt(drawn.size)
    assert stats.kstest(drawn, stats.expon(scale=500_000).cdf).pvalue > 1e-3


def test_latency_counts_from_the_scheduled_arrival(events) -> None:
    """A request's latency includes its wait in the queue: at 1000/s offered to a 500/s service (each call sleeps
    at least 2 ms, so a slower machine only lengthens the queue) the median latency is many service times.
    Whether a fast service keeps up with the offered rate is a wall-clock claim: bench/bench_latency.py cpu."""
    slow, pool = _sleepy_pool(events, 0.002)
    queued = run_chunk(slow, pool, 0, 60, 0, CpuTimer(), rate=1000.0, rng=np.random.default_rng(0))
    assert np.median(queued.latency_ns) > 5 * 2_000_000


def test_sequences_pad_to_the_smallest_bucket_and_truncation_is_counted(events) -> None:
    spec = InputSpec(name="t", sequence="tokens", buckets=[16, 32], dtype="long")
    batch = build_batch(AdapterConfig(inputs=[spec]), events[:8], torch.float32, "cpu")
    longest = max(len(parse_sequence(e.features["tokens"])) for e in events[:8])
    assert batch.tensors[0].dtype == torch.long
    assert batch.tensors[0].shape == (8, bucket_for(longest, [16, 32]))
    assert batch.truncated == sum(len(parse_sequence(e.features["tokens"])) > 32 for e in events[:8])
    assert parse_sequence("[3, 1,4]") == [3.0, 1.0, 4.0] and bucket_for(17, [16, 32]) == 32


def test_summary_percentiles_match_numpy() -> None:
    lat = np.random.default_rng(0).integers(1_000, 1_000_000, 5000)
    s = summarise(lat)
    assert s["p99_9"] == pytest.approx(np.percentile(lat, 99.9) / 1e6)
    assert s["p50"] == pytest.approx(np.median(lat) / 1e6) and s["max"] == lat.max() / 1e6


def test_event_file_without_valid_events_is_refused(tmp_path: Path) -> None:
    (tmp_path / "bad.jsonl").write_text('{"model": "m"}\nnot json\n')
    with pytest.raises(BenchInputError, match="no valid event"):
        read_events(tmp_path / "bad.jsonl")
