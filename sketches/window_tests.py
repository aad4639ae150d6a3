"""Full-window tests: two-sample tests on the exact counts of the whole window, not on a sample.

A :class:`HistogramSketch` counts every finite value of its window exactly, per log-linear bucket;
two histograms brought to the same resolution (the coarser of the two) have exact counts on the
same buckets, so a statistic of the bucketed data is exact for the whole window and the whole
reference. The same holds for two uncapped :class:`CategoricalSketch` (exact counts per value).
A deep test therefore keeps the power the gate had: a few percent of the mass moved far into a
tail is a few dozen events in a 1,000-event window, where a 2,000-value sample of a larger
window, or a KS test, would hardly see it.

Numeric (:func:`histogram_tests`), each p-value valid for independent draws from one law:

* ``ks``: two-sample Kolmogorov-Smirnov D at the common bucket edges - scipy ``ks_2samp`` on
  the data rounded to the buckets - with the asymptotic p-value scipy's ``method="asymp"`` uses
  (``kstwo`` at n = m n / (m + n)) up to n = ``KS_LIMIT_N``, Kolmogorov's limit distribution above
  it (:func:`ks_pvalue`); rounding to buckets only makes it conservative.
* ``chi2``: Pearson chi-square of homogeneity (scipy ``chi2_contingency``) on bins cut at the
  reference's quantiles: ``bins`` equal-probability bins, refined in each tail at cumulative
  probabilities t, 2t, 4t, ... with t = ``TAIL_EXPECTED`` / window count, so the outermost bins
  hold about 10 window values; bins are then merged, left to right, until each holds a pooled
  expected window count of at least ``MIN_EXPECTED``. Effect size: the total variation distance
  on those bins (the share of the window's mass that moved).
* ``beyond``: exact exceedance test. With k window values above the reference's maximum, the
  chance under exchangeability that the k largest pooled values all come from the window is
  prod_{i<k} (n_w - i) / (n_w + n_r - i); the same below the minimum; two-sided by doubling the
  smaller. Values sharing the reference maximum's bucket are not counted (conservative).

Categorical (:func:`category_tests`):

* ``chi2``: Pearson chi-square of homogeneity on the full counts; categories whose pooled
  expected window count is below ``MIN_EXPECTED`` are pooled into one "rare" column (the new
  categories of the window are tested separately). Effect size: total variation distance.
* ``new``: one-sided binomial test of the window's count of values in categories the reference
  never saw against the reference's own unseen share (``baseline``: the mean leave-one-out
  new-category share of its windows), floored at 1 / (n_r + 1). Effect size: the window's share.

``moved``: the regions whose share changed most against their noise (largest |w - r| / sqrt(r),
the Pearson residual), for the verdict's evidence: value ranges of the chi-square bins with the
reference quantiles they span, or categories.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats

from driftwarden.sketches import distances
from driftwarden.sketches.categorical import CategoricalSketch
from driftwarden.sketches.histogram import HistogramSketch, bucket_lower

#: Smallest pooled expected window count of a chi-square bin (bins are merged up to it).
MIN_EXPECTED = 5.0
#: Expected window values in each outermost tail bin of the numeric chi-square test.
TAIL_EXPECTED = 10.0
#: Regions reported in a verdict's evidence.
TOP_MOVED = 3
#: Effective sample size above which the KS p-value is Kolmogorov's limit distribution (:func:`ks_pvalue`).
KS_LIMIT_N = 10_000
#: Documented largest relative difference of that p-value from ``kstwo``'s, for p >= 1e-12, above KS_LIMIT_N.
KS_LIMIT_REL_ERROR = 0.035


@dataclass(frozen=True)
class TestResult:
    """One full-window test: its statistic, raw p-value and effect size (scale named by ``effect``)."""

    name: str
    statistic: float
    pvalue: float
    effect: str
    effect_size: float


@dataclass(frozen=True)
class Region:
    """A part of the distribution whose share moved: a value range (numeric) or a category."""

    ref_share: float
    win_share: float
    low: float | None = None
    high: float | None = None
    q_low: float | None = None
    q_high: float | None = None
    category: str | None = None

    def as_dict(self) -> dict:
        """The region as a JSON-ready dict (numeric: low/high/q_low/q_high; categorical: category)."""
        keys = ("category",) if self.category is not None else ("low", "high", "q_low", "q_high")
        out = {k: getattr(self, k) for k in keys}
        out.update(ref_share=self.ref_share, win_share=self.win_share)
        return out


@dataclass(frozen=True)
class WindowTests:
    """The full-window tests of one feature and the regions that moved most."""

    tests: tuple[TestResult, ...]
    moved: tuple[Region, ...]
    psi: float | None = None

    def get(self, name: str) -> TestResult | None:
        """The test called ``name``, or None."""
        return next((t for t in self.tests if t.name == name), None)


# ---------------------------------------------------------------------------------------- numeric
def aligned_counts(reference: HistogramSketch, window: HistogramSketch
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
    """Bucket lower and upper edges and both exact counts on common buckets; None if incomparable."""
    if reference.precision != window.precision or reference.n == 0 or window.n == 0:
        return None
    shift = max(reference.shift, window.shift)
    (rk, rc), (wk, wc) = reference.counts_at(shift), window.counts_at(shift)
    keys = np.union1d(rk, wk)
    r, w = np.zeros(keys.size, np.int64), np.zeros(keys.size, np.int64)
    r[np.searchsorted(keys, rk)] = rc
    w[np.searchsorted(keys, wk)] = wc
    lo, hi = min(reference.min, window.min), max(reference.max, window.max)
    lower = np.clip(bucket_lower(keys, shift, reference.precision), lo, hi)
    upper = np.clip(bucket_lower(keys + 1, shift, reference.precision), lo, hi)
    return lower, upper, r, w


def histogram_tests(reference: HistogramSketch, window: HistogramSketch, bins: int = 10,
                    tau2: float = 0.0) -> WindowTests | None:
    """KS, binned chi-square and exceedance tests of the whole window against the whole reference.

    ``tau2``: the reference windows' between-window variance of the distribution
    (``sketches.dispersion.Dispersion.distribution``, in units of 1 / events): the KS and chi-square
    nulls widen from v = 1 / n_w + 1 / n_r to v + tau2 (KS at the effective size 1 / (v + tau2), the
    chi-square statistic divided by (v + tau2) / v). 0.0: independent events, the tests as scipy has them.
    """
    aligned = aligned_counts(reference, window)
    if aligned is None:
        return None
    lower, upper, r, w = aligned
    n_r, n_w = int(r.sum()), int(w.sum())
    inflation = 1.0 + tau2 / (1.0 / n_r + 1.0 / n_w) if tau2 > 0 else 1.0
    ks = _ks(r, w, inflation)
    chi2, moved = _binned_chi2(r, w, chi2_cuts(r, w, bins), lower, upper, inflation)
    beyond = _beyond(reference, window, lower, w, n_r, n_w)
    return WindowTests((ks, chi2, beyond), moved)


def _ks(r: np.ndarray, w: np.ndarray, inflation: float = 1.0) -> TestResult:
    n_r, n_w = int(r.sum()), int(w.sum())
    d = float(np.max(np.abs(np.cumsum(r) / n_r - np.cumsum(w) / n_w)))
    m, n = sorted([float(n_r), float(n_w)], reverse=True)
    return TestResult("ks", d, ks_pvalue(d, np.round(m * n / (m + n) / inflation)), "ks", d)


def ks_pvalue(d: float, n: float) -> float:
    """P(D >= d) for a two-sample KS statistic at effective size ``n`` (m n / (m + n), rounded).

    Up to :data:`KS_LIMIT_N`: scipy's ``kstwo`` at n, what ``ks_2samp(method="asymp")`` gives. Above it:
    Kolmogorov's limit distribution at sqrt(n) d (``kstwobign``). ``kstwo`` at n is itself an
    approximation of the two-sample law, and its cost grows with n where p is small (its one-sided
    Smirnov sum): about 12 ms at n = 12,000 and 0.4-0.8 s at 450,000 (a window of 600,000 events
    against a reference of 1.8 million), per feature whose gate fired; the limit costs the same at
    any n. Above KS_LIMIT_N the two differ by at most :data:`KS_LIMIT_REL_ERROR` of kstwo's p-value
    for p >= 1e-12 (measured: 3.4% at n = 10,001, 2.0% for p >= 1e-6; 0.9% at n = 100,000), by far
    the most in the tail, where any alpha decides alike.

    >>> from scipy import stats
    >>> ks_pvalue(0.02, 3_000) == float(stats.kstwo.sf(0.02, 3_000))
    True
    >>> ks_pvalue(0.01, 450_000) == float(stats.kstwobign.sf(450_000 ** 0.5 * 0.01))
    True
    >>> ks_pvalue(1.0, 0)  # one value against one: round(1 * 1 / 2) = 0
    1.0
    """
    if n < 1:  # an effective size rounded to 0 (one value on each side): nothing to test
        return 1.0
    p = stats.kstwo.sf(d, n) if n <= KS_LIMIT_N else stats.kstwobign.sf(math.sqrt(n) * d)
    return float(np.clip(p, 0.0, 1.0))


def dispersed_chi2_pvalue(result, inflation: float = 1.0) -> float:
    """The p-value of a scipy chi-square test result, its statistic divided by ``inflation`` (>= 1; 1: scipy's own).

    >>> from scipy import stats
    >>> res = stats.chi2_contingency([[30, 70], [50, 50]], correction=False)
    >>> dispersed_chi2_pvalue(res) == float(res.pvalue), dispersed_chi2_pvalue(res, 4.0) > float(res.pvalue)
    (True, True)
    """
    if not inflation > 1.0:
        return float(result.pvalue)
    return float(stats.chi2.sf(result.statistic / inflation, result.dof))


def chi2_cuts(r: np.ndarray, w: np.ndarray, bins: int) -> np.ndarray:
    """Bucket indices after which a chi-square bin ends (reference quantiles, tails, merged)."""
    return _merge_small(r, w, quantile_cuts(r, int(w.sum()), bins))


def quantile_cuts(r: np.ndarray, n_window: int, bins: int) -> np.ndarray:
    """Bucket indices after which a bin ends: reference quantiles j / bins, refined in both tails."""
    probs = set((np.arange(1, bins) / bins).tolist())
    t = TAIL_EXPECTED / max(n_window, 1)
    while t < 1.0 / bins:
        probs.update((t, 1.0 - t))
        t *= 2
    cum = np.cumsum(r) / r.sum()
    cuts = np.searchsorted(cum, np.array(sorted(probs)) - 1e-12, side="left")
    return np.unique(cuts[cuts < r.size - 1])


def _merge_small(r: np.ndarray, w: np.ndarray, cuts: np.ndarray) -> np.ndarray:
    """Drop cuts, left to right, until every bin's pooled expected window count is >= MIN_EXPECTED."""
    share = w.sum() / (r.sum() + w.sum())
    pooled = np.add.reduceat(r + w, np.concatenate([[0], cuts + 1])) * share
    kept, acc = [], 0.0
    for cut, expected in zip(cuts.tolist(), pooled[:-1].tolist()):
        acc += expected
        if acc >= MIN_EXPECTED:
            kept.append(cut)
            acc = 0.0
    if kept and acc + pooled[-1] < MIN_EXPECTED:
        kept.pop()  # the last bin is too small: merge it into the one before
    return np.array(kept, dtype=np.int64)


def _binned_chi2(r: np.ndarray, w: np.ndarray, cuts: np.ndarray, lower: np.ndarray,
                 upper: np.ndarray, inflation: float = 1.0) -> tuple[TestResult, tuple[Region, ...]]:
    starts = np.concatenate([[0], cuts + 1])
    table = np.vstack([np.add.reduceat(r, starts), np.add.reduceat(w, starts)]).astype(np.float64)
    ref_p, win_p = table[0] / table[0].sum(), table[1] / table[1].sum()
    tv = float(0.5 * np.abs(win_p - ref_p).sum())
    if table.shape[1] < 2:
        return TestResult("chi2", 0.0, 1.0, "tv", tv), ()
    res = stats.chi2_contingency(table, correction=False)
    ends = np.concatenate([cuts, [r.size - 1]])
    q_hi = np.cumsum(table[0]) / table[0].sum()
    q_lo = np.concatenate([[0.0], q_hi[:-1]])
    order = np.argsort(-_residual(ref_p, win_p), kind="stable")[:TOP_MOVED]
    moved = tuple(Region(float(ref_p[i]), float(win_p[i]), float(lower[starts[i]]), float(upper[ends[i]]),
                         float(q_lo[i]), float(q_hi[i])) for i in order if win_p[i] != ref_p[i])
    return TestResult("chi2", float(res.statistic), dispersed_chi2_pvalue(res, inflation), "tv", tv), moved


def _residual(ref_share, win_share):
    """How far a region moved against its noise: |w - r| / sqrt(r), r floored at 1e-6 (a new region)."""
    return np.abs(np.asarray(win_share) - ref_share) / np.sqrt(np.maximum(ref_share, 1e-6))


def _beyond(reference: HistogramSketch, window: HistogramSketch, lower: np.ndarray, w: np.ndarray,
            n_r: int, n_w: int) -> TestResult:
    upper_edge = np.concatenate([lower[1:], [np.inf]])
    above = int(w[lower > reference.max].sum())
    below = int(w[upper_edge <= reference.min].sum()) if reference.min > window.min else 0
    p = min(1.0, 2.0 * min(exceedance_pvalue(above, n_w, n_r), exceedance_pvalue(below, n_w, n_r)))
    k = max(above, below)
    return TestResult("beyond", float(k), p, "beyond_share", (above + below) / n_w)


def exceedance_pvalue(k: int, n_window: int, n_reference: int) -> float:
    """P(the k largest of the pooled values all come from the window) under exchangeability.

    >>> round(exceedance_pvalue(2, 10, 10), 6) == round(10 / 20 * 9 / 19, 6)
    True
    """
    if k <= 0:
        return 1.0
    i = np.arange(k, dtype=np.float64)
    return float(math.exp(np.sum(np.log(n_window - i) - np.log(n_window + n_reference - i))))


# ---------------------------------------------------------------------------------------- categorical
def category_tests(reference: CategoricalSketch, window: CategoricalSketch, baseline: float,
                   tau2: float = 0.0) -> WindowTests | None:
    """Chi-square on the full category counts and a binomial test of new categories; None if capped.

    ``tau2``: the reference windows' between-window variance of the category shares
    (``sketches.dispersion.Dispersion.chi2``): the chi-square statistic is divided by (v + tau2) / v.
    """
    if not (reference.is_exact and window.is_exact) or reference.n == 0 or window.n == 0:
        return None
    ref, win = reference.frequencies(), window.frequencies()
    n_r, n_w = reference.n, window.n
    seen = sorted(ref, key=lambda c: c.encode("utf-8"))
    r = np.array([ref[c] for c in seen], dtype=np.float64)
    w = np.array([win.get(c, 0) for c in seen], dtype=np.float64)
    new = n_w - int(w.sum())
    chi2 = _category_chi2(r, w, new, 1.0 + tau2 / (1.0 / n_r + 1.0 / n_w) if tau2 > 0 else 1.0)
    p0 = min(max(baseline, 1.0 / (n_r + 1)), 1.0)
    new_p = float(stats.binom.sf(new - 1, n_w, p0)) if new else 1.0
    new_test = TestResult("new", float(new), new_p, "new_share", new / n_w)
    shares = {c: (ref.get(c, 0) / n_r, win.get(c, 0) / n_w) for c in set(ref) | set(win)}
    top = sorted(shares.items(), key=lambda kv: (-_residual(*kv[1]), kv[0].encode("utf-8")))[:TOP_MOVED]
    moved = tuple(Region(rs, ws, category=c) for c, (rs, ws) in top if rs != ws)
    ref_p, win_p = np.concatenate([r, [0.0]]) / n_r, np.concatenate([w, [new]]) / n_w
    return WindowTests((chi2, new_test), moved, distances.psi(ref_p, win_p))


def _category_chi2(r: np.ndarray, w: np.ndarray, new: int, inflation: float = 1.0) -> TestResult:
    """Chi-square over the reference's categories (rare ones pooled) plus the window's new values."""
    ref_p = np.concatenate([r, [0.0]]) / r.sum()
    win_p = np.concatenate([w, [new]]) / (w.sum() + new)
    tv = float(0.5 * np.abs(win_p - ref_p).sum())
    share = (w.sum() + new) / (r.sum() + w.sum() + new)
    rare = (r + w) * share < MIN_EXPECTED
    table = np.vstack([r[~rare], w[~rare]])
    if rare.any():
        table = np.hstack([table, [[r[rare].sum()], [w[rare].sum()]]])
        if table[:, -1].sum() * share < MIN_EXPECTED and table.shape[1] > 2:  # fold a small rare column
            smallest = int(np.argmin(table[:, :-1].sum(axis=0)))
            table[:, smallest] += table[:, -1]
            table = table[:, :-1]
    table = table[:, table.sum(axis=0) > 0]
    if table.shape[1] < 2 or not table.sum(axis=1).all():
        # one column, or a window with no value the reference saw (all new: the ``new`` test speaks)
        return TestResult("chi2", 0.0, 1.0, "tv", tv)
    res = stats.chi2_contingency(table, correction=False)
    return TestResult("chi2", float(res.statistic), dispersed_chi2_pvalue(res, inflation), "tv", tv)
