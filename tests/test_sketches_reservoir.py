"""ReservoirSample: bounded, deterministic under a seed, and the merge is a uniform sample of the union."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from driftwarden.core.errors import SketchError
from driftwarden.sketches import ReservoirSample


def test_keeps_everything_until_full_then_stays_bounded() -> None:
    s = ReservoirSample(capacity=5).update([1.0, None, np.nan, np.inf, 2.0])
    assert s.values.tolist() == [1.0, 2.0] and s.n == 2
    s.update(np.arange(100.0))
    assert len(s.values) == 5 and s.n == 102


def test_same_seed_same_sample() -> None:
    data = np.arange(1000.0)
    a = ReservoirSample(capacity=10, seed=3).update(data[:600]).update(data[600:])
    b = ReservoirSample(capacity=10, seed=3).update(data[:600]).update(data[600:])
    c = ReservoirSample(capacity=10, seed=4).update(data[:600]).update(data[600:])
    assert a.values.tolist() == b.values.tolist() != c.values.tolist()


def test_strings_after_many_nulls_are_strings() -> None:
    s = ReservoirSample().update([None] * 100 + ["a", "b"])
    assert s.kind == "str" and sorted(s.values.tolist()) == ["a", "b"]


def test_mixed_types_raise_naming_the_feature() -> None:
    s = ReservoirSample(name="city").update(["a", None])
    with pytest.raises(SketchError, match="'city'.*mixed"):
        s.update([1.0])
    with pytest.raises(SketchError, match="'city'"):
        ReservoirSample(name="city").update(["a", 2.0])


def test_merge_is_uniform_over_the_union() -> None:
    """Chi-square over many seeded runs: every item of unequal parts is kept equally often."""
    capacity, sizes, runs = 10, (15, 40, 5), 3000
    counts = np.zeros(sum(sizes))
    for run in range(runs):
        parts, start = [], 0
        for i, size in enumerate(sizes):
            parts.append(ReservoirSample(capacity, seed=run * 10 + i).update(np.arange(start, start + size, dtype=float)))
            start += size
        merged = parts[0].merge(parts[1]).merge(parts[2])
        assert len(merged.values) == capacity and len(set(merged.values)) == capacity
        counts[merged.values.astype(int)] += 1
    expected = np.full(counts.size, runs * capacity / counts.size)
    assert stats.chisquare(counts, expected).pvalue > 0.001


def test_batch_update_is_uniform() -> None:
    counts = np.zeros(30)
    for run in range(2000):
        s = ReservoirSample(5, seed=run).update(np.arange(10.0)).update(np.arange(10.0, 30.0))
        counts[s.values.astype(int)] += 1
    assert stats.chisquare(counts).pvalue > 0.001
