"""Deep tests: exact statistics on the raw samples of a window and of the reference.

Run only for features whose gate fired. Numeric: two-sample KS (scipy ``ks_2samp``, exact
p-value when both samples have at most 10,000 values, asymptotic above), PSI on the reference
sample's quantile bins, Wasserstein-1 (scipy ``wasserstein_distance``) divided by the reference
sample's spread. Categorical: chi-square test of homogeneity (``chi2_contingency``) and PSI over
categories. ``pvalue`` is the one Benjamini-Hochberg adjusts: KS for numeric, chi-square for
categorical; 1.0 when either sample is empty (nothing to test). A high-cardinality categorical
feature (a reference with a ``CategoricalProfile``) is tested by :func:`profile_test` instead.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

from sketches import distances
from sketches.profile import CategoricalProfile
from sketches.reservoir import ReservoirSample
from sketches.window_tests import Region, TestResult


@dataclass(frozen=True)
class DeepResult:
    """Exact statistics of one feature's window sample against its reference sample."""

    ks_stat: float | None
    ks_pvalue: float | None
    psi: float | None
    emd: float | None
    chi2_stat: float | None
    chi2_pvalue: float | None
    pvalue: float
    missing_pvalue: float | None = None
    tests: tuple[TestResult, ...] = ()
    moved: tuple[Region, ...] = ()

    @property
    def decided_by(self) -> TestResult | None:
        """The test with the smallest raw p-value: the one the Bonferroni combination rests on."""
        return min(self.tests, key=lambda t: t.pvalue) if self.tests else None


def deep_test(reference: ReservoirSample, window: ReservoirSample, kind: str, bins: int = 10) -> DeepResult:
    """Run the exact tests for a feature of ``kind`` ("numeric" or "categorical") on the two samples."""
    if kind not in ("numeric", "categorical"):
        raise ValueError(f"unknown feature kind {kind!r}; valid kinds are ('numeric', 'categorical')")
    ref, win = reference.values, window.values
    if ref.size == 0 or win.size == 0:
        return DeepResult(None, None, None, None, None, None, pvalue=1.0)
    if kind == "numeric":
        return _numeric(ref.astype(np.float64), win.astype(np.float64), bins)
    return _categorical(ref, win)


def _numeric(ref: np.ndarray, win: np.ndarray, bins: int) -> DeepResult:
    ks = stats.ks_2samp(ref, win, method="auto")
    edges = np.unique(np.quantile(ref, np.arange(1, bins) / bins, method="inverted_cdf"))
    psi = distances.psi(distances.exact_bin_probs(ref, edges), distances.exact_bin_probs(win, edges))
    q25, q75 = np.quantile(ref, [0.25, 0.75])
    scale = distances.spread(q25, q75, float(np.std(ref)))
    emd = float(stats.wasserstein_distance(ref / scale, win / scale))
    return DeepResult(float(ks.statistic), float(ks.pvalue), psi, emd, None, None, pvalue=float(ks.pvalue))


def _categorical(ref: np.ndarray, win: np.ndarray) -> DeepResult:
    rc, wc = Counter(ref.tolist()), Counter(win.tolist())
    cats = sorted(set(rc) | set(wc))
    table = np.array([[rc[c] for c in cats], [wc[c] for c in cats]], dtype=np.float64)
    psi = distances.psi(table[0] / table[0].sum(), table[1] / table[1].sum())
    if len(cats) < 2:
        return DeepResult(None, None, psi, None, 0.0, 1.0, pvalue=1.0)
    chi2 = stats.chi2_contingency(table, correction=False)
    return DeepResult(None, None, psi, None, float(chi2.statistic), float(chi2.pvalue), pvalue=float(chi2.pvalue))


def profile_test(profile: CategoricalProfile, baseline: float, reference: ReservoirSample,
                 window: ReservoirSample) -> DeepResult:
    """Exact tests of a high-cardinality window sample against the reference's profile.

    Unseen values: one-sided binomial test of the window sample's unseen count (values the
    profile judges) against ``baseline``, the reference's own unseen share (the mean null score).
    Head: chi-square test of homogeneity of the two samples over the profile's head values plus
    "other". ``pvalue`` is their Bonferroni combination.
    """
    win, ref = window.values.tolist(), reference.values.tolist()
    judged = profile.judged(win)
    unseen, total = int((judged & ~profile.contains(win)).sum()), int(judged.sum())
    p0 = float(np.clip(baseline, 1e-6, 1 - 1e-6))
    unseen_p = float(stats.binomtest(unseen, total, p0, alternative="greater").pvalue) if total else 1.0
    head = {v: i for i, v in enumerate(profile.head)}
    table = np.zeros((2, len(head) + 1))
    for row, values in enumerate((ref, win)):
        for value in values:
            table[row, head.get(value, len(head))] += 1
    if not table[0].sum() or not table[1].sum():
        return DeepResult(None, None, None, None, None, None, pvalue=min(1.0, 2 * unseen_p))
    table = table[:, table.sum(axis=0) > 0]
    psi = distances.psi(table[0] / table[0].sum(), table[1] / table[1].sum())
    chi2 = stats.chi2_contingency(table, correction=False) if table.shape[1] > 1 else None
    head_p = float(chi2.pvalue) if chi2 is not None else 1.0
    return DeepResult(None, None, psi, None, float(chi2.statistic) if chi2 is not None else 0.0, head_p,
                      pvalue=min(1.0, 2 * min(unseen_p, head_p)))


def missing_rate_pvalue(ref_missing: int, ref_count: int, win_missing: int, win_count: int) -> float:
    """p-value of a chi-square test that the window's missing rate equals the reference's."""
    table = np.array([[ref_missing, ref_count - ref_missing], [win_missing, win_count - win_missing]], float)
    if ref_count == 0 or win_count == 0 or (table.sum(axis=0) == 0).any():
        return 1.0
    return float(stats.chi2_contingency(table, correction=False).pvalue)


def benjamini_hochberg(pvalues: Sequence[float]) -> np.ndarray:
    """Benjamini-Hochberg adjusted p-values (step-up, monotone, capped at 1), in input order.

    >>> benjamini_hochberg([0.01, 0.04, 0.03]).round(3).tolist()
    [0.03, 0.04, 0.04]
    """
    p = np.asarray(pvalues, dtype=np.float64)
    if p.size == 0:
        return p
    order = np.argsort(p)
    ranked = p[order] * p.size / np.arange(1, p.size + 1)
    adjusted = np.minimum.accumulate(ranked[::-1])[::-1]
    out = np.empty_like(p)
    out[order] = np.minimum(adjusted, 1.0)
    return out
