"""Several histograms side by side: their CDF curves and quantiles computed in one pass.

A segmented window asks the gate for up to (segments + 1) x features (reference, window) cells,
and each cell's scores are a few small array operations: one cell at a time, the cost is numpy's
call overhead, not arithmetic. :func:`stack` lays the buckets of many :class:`HistogramSketch`
end to end and derives what the gate reads of each (bucket edges, the CDF curve of
:meth:`HistogramSketch.cdf`, quantiles) with one array operation for all of them, by the rules a single
sketch uses (``sketches.histogram``: :func:`bucket_edges`, :func:`cdf_curves`, :func:`quantiles_at`, which
take buckets of several histograms end to end): the values each sketch's own methods give, bit for bit
(tests/test_histogram_stack.py).

Example:
    >>> a, b = HistogramSketch().update([1.0, 2.0, 3.0]), HistogramSketch().update([10.0])
    >>> both = stack([a, b])
    >>> both.quantiles([0.0, 1.0]).tolist()
    [[1.0, 3.0], [10.0, 10.0]]
    >>> knots, ranks = both.curve(0)
    >>> float(np.interp(2.5, knots, ranks)) == float(a.cdf([2.5])[0]), bool((both.support(0) == a.support()).all())
    (True, True)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
from numpy.typing import ArrayLike

from driftwarden.core.errors import SketchError
from driftwarden.sketches.histogram import HistogramSketch, bucket_edges, cdf_curves, quantiles_at


@dataclass(frozen=True)
class StackedHistograms:
    """The buckets of K non-empty histograms end to end: histogram i has bucket rows
    ``rows[i]:rows[i + 1]``, CDF-curve knots ``2 * rows[i]:2 * rows[i + 1]`` (each bucket's lower,
    then upper edge, as :meth:`HistogramSketch.cdf` interpolates) and distinct knots
    ``support_rows[i]:support_rows[i + 1]`` (:meth:`HistogramSketch.support`)."""

    rows: np.ndarray
    counts: np.ndarray
    cum: np.ndarray  # counts accumulated within each histogram
    n: np.ndarray  # finite values of each histogram
    lower: np.ndarray
    upper: np.ndarray
    knots: np.ndarray
    ranks: np.ndarray
    support_rows: np.ndarray
    support_knots: np.ndarray
    support_ranks: np.ndarray  # the CDF at each distinct knot

    def __len__(self) -> int:
        return self.n.size

    def curve(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        """Histogram ``i``'s CDF as (knots, ranks): ``histogram.curve_at(x, knots, ranks)`` is its CDF at x."""
        a, b = 2 * self.rows[i], 2 * self.rows[i + 1]
        return self.knots[a:b], self.ranks[a:b]

    def support(self, i: int) -> np.ndarray:
        """Histogram ``i``'s distinct knots, where its CDF's slope can change."""
        return self.support_knots[self.support_rows[i]:self.support_rows[i + 1]]

    def rank_errors(self) -> np.ndarray:
        """Each histogram's :attr:`HistogramSketch.rank_error` (its largest bucket's share)."""
        return np.maximum.reduceat(self.counts, self.rows[:-1]) / self.n

    def quantiles(self, qs: ArrayLike) -> np.ndarray:
        """A (K, len(qs)) array: row i is histogram i's :meth:`HistogramSketch.quantiles` at ``qs``."""
        q = np.clip(np.asarray(qs, dtype=np.float64).ravel(), 0.0, 1.0)
        return quantiles_at(q, self.lower, self.upper, self.counts, self.cum, self.rows)


def stack(sketches: Sequence[HistogramSketch]) -> StackedHistograms:
    """The histograms ``sketches`` (each with at least one finite value) side by side."""
    if not sketches:
        raise SketchError("stack needs at least one histogram")
    parts = [sk.bucket_counts() for sk in sketches]
    sizes = np.array([keys.size for keys, _ in parts])
    if not sizes.all():
        raise SketchError("stack: a histogram without finite values has no CDF")
    rows = np.concatenate([[0], np.cumsum(sizes)])
    keys, counts = np.concatenate([k for k, _ in parts]), np.concatenate([c for _, c in parts])

    def per_bucket(values: list) -> np.ndarray:
        return np.repeat(np.array(values), sizes)

    shift, precision = per_bucket([sk.shift for sk in sketches]), per_bucket([sk.precision for sk in sketches])
    low, high = per_bucket([sk.min for sk in sketches]), per_bucket([sk.max for sk in sketches])
    lower, upper = bucket_edges(keys, shift, precision, low, high)
    total = np.cumsum(counts)
    before = np.concatenate([[0], total[rows[1:-1] - 1]])
    cum = total - np.repeat(before, sizes)
    knots, ranks, last = cdf_curves(lower, upper, counts, cum, rows)
    support_rows = np.concatenate([[0], np.cumsum(np.add.reduceat(last, 2 * rows[:-1]))])
    return StackedHistograms(rows, counts, cum, cum[rows[1:] - 1], lower, upper, knots, ranks, support_rows,
                             knots[last], ranks[last])
