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

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import special, stats

from driftwarden.sketches import distances
from driftwarden.sketches.categorical import CategoricalSketch
from driftwarden.sketches.hashing import value_hashes
from driftwarden.sketches.profile import CategoricalProfile
from driftwarden.sketches.reservoir import ReservoirSample
from driftwarden.sketches.window_tests import Region, TestResult, dispersed_chi2_pvalue


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


@dataclass(frozen=True)
class UnseenEstimate:
    """A window's share of events whose value the reference never saw, and its effective size.

    ``share`` estimates the share over the whole window (NaN when nothing could be judged);
    ``n_eff`` is the number of independent events a plain binomial share would need for the
    same variance.
    """

    share: float
    n_eff: float


def unseen_estimate(profile: CategoricalProfile, sketch: CategoricalSketch, sample: ReservoirSample) -> UnseenEstimate:
    """The window's unseen share from its exact kept counts, completed by its event sample.

    Stratified by value hash: the values the window sketch kept (hash below its threshold) are
    counted exactly (K_A events, U_A unseen); the other judged values' mass N_B (exact total,
    times the sample's share of it that the profile judges) gets the unseen share u_B of the
    sample's events there (n_B of them). share = (U_A + N_B u_B) / (K_A + N_B); under a
    binomial law of rate p its variance is p (1 - p) (K_A + N_B^2 / n_B) / (K_A + N_B)^2, hence
    ``n_eff``. An exact (uncapped) window sketch gives the whole window's share exactly.
    """
    counts = sketch.frequencies()
    values = list(counts)
    weights = np.array([counts[v] for v in values], dtype=np.float64)
    judged = profile.judged(values) if values else np.zeros(0, dtype=bool)
    k_a = float(weights[judged].sum())
    u_a = float(weights[judged & ~profile.contains(values)].sum()) if values else 0.0
    n_b, u_b, mass_b = 0, 0.0, 0.0
    rest = float(sketch.n - weights.sum())
    if rest > 0 and not sample.is_empty:
        seen = sample.values.tolist()
        hashes = value_hashes(seen)
        outside = hashes >= np.uint64(sketch.threshold)
        inside_b = outside & (hashes < np.uint64(profile.limit))
        n_b = int(inside_b.sum())
        if n_b:
            mass_b = rest * n_b / int(outside.sum())
            u_b = float((~profile.contains([v for v, b in zip(seen, inside_b.tolist()) if b])).mean())
    total = k_a + mass_b
    if total <= 0:
        return UnseenEstimate(float("nan"), 0.0)
    share = (u_a + mass_b * u_b) / total
    return UnseenEstimate(share, total * total / (k_a + (mass_b * mass_b / n_b if n_b else 0.0)))


def unseen_pvalue(estimate: UnseenEstimate, null: np.ndarray | None, baseline: float) -> float:
    """One-sided p-value that the window's unseen share rose above the reference's own.

    ``null``: one row per reference window (``sketches.reference.unseen_null``): its
    :func:`unseen_estimate` (share, n_eff) against the merge of the other k - 1 windows, and its
    share against k - 2 of them. The baseline m is what a new window should show against all k:
    the mean leave-one-out share minus the drop from one more window, extrapolated from the
    drop between k - 2 and k - 1 windows times ((k - 1.5) / (k - 0.5))^2 (the unseen share of a
    power-law tail falls like N^-a, a <= 1: this under-corrects, so m errs high). The windows'
    dispersion phi (their variance over the binomial one, at least 1: traffic burstier than
    independent events widens the test) and m's own standard error lower the effective size:
    1 / n_test = phi / n_eff + var(m) / (m (1 - m)). The p-value is the binomial upper tail
    P(X >= share n_test) at rate m, continued to non-integer counts (regularised incomplete
    beta). Without ``null`` (a reference built before it was stored), m is ``baseline``, phi 1.

    >>> round(unseen_pvalue(UnseenEstimate(0.12, 2000.0), None, 0.10), 4)  # binom.sf(239, 2000, 0.1)
    0.002
    """
    if not estimate.n_eff > 0 or not math.isfinite(estimate.share):
        return 1.0
    m, phi, var_m = _unseen_baseline(null, baseline)
    n_test = 1.0 / (phi / estimate.n_eff + var_m / (m * (1 - m)))
    x = estimate.share * n_test
    if x <= 0:
        return 1.0
    return float(np.clip(special.betainc(x, n_test - x + 1, m), 0.0, 1.0)) if x < n_test + 1 else 0.0


def _unseen_baseline(null: np.ndarray | None, baseline: float) -> tuple[float, float, float]:
    """(m, phi, var(m)) of :func:`unseen_pvalue` from the reference windows' estimates."""
    rows = null[np.isfinite(null[:, :2]).all(axis=1) & (null[:, 1] > 0)] if null is not None and null.size else None
    if rows is None or len(rows) < 3:
        return float(np.clip(baseline, 1e-6, 1 - 1e-6)), 1.0, 0.0
    k = len(rows)
    m = float(np.mean(rows[:, 0]))
    drops = rows[np.isfinite(rows[:, 2]), 2] - rows[np.isfinite(rows[:, 2]), 0]
    shrink = ((k - 1.5) / (k - 0.5)) ** 2
    drop = max(0.0, float(np.mean(drops)) * shrink) if drops.size else 0.0
    binomial = max(m * (1 - m), 1e-12) / rows[:, 1]
    phi = max(1.0, float(np.sum((rows[:, 0] - m) ** 2) / np.sum(binomial) * k / (k - 1)))
    var_m = phi * float(np.mean(binomial)) / k + (shrink ** 2 * float(np.var(drops, ddof=1)) / drops.size
                                                  if drops.size > 1 else 0.0)
    return float(np.clip(m - drop, 1e-6, 1 - 1e-6)), phi, var_m


def profile_test(profile: CategoricalProfile, reference: ReservoirSample, sketch: CategoricalSketch,
                 window: ReservoirSample, null: np.ndarray | None, baseline: float) -> DeepResult:
    """Exact tests of a high-cardinality window against the reference's profile.

    Unseen values: :func:`unseen_pvalue` on the window's :func:`unseen_estimate` (its sketch's
    exact kept counts completed by its sample), one-sided (only a rise is drift), against the reference windows' own estimates ``null``.
    Head: chi-square test of homogeneity of the two samples over the profile's head values plus
    "other". ``pvalue`` is their Bonferroni combination.
    """
    win, ref = window.values.tolist(), reference.values.tolist()
    estimate = unseen_estimate(profile, sketch, window)
    unseen_p = unseen_pvalue(estimate, null, baseline)
    head = {v: i for i, v in enumerate(profile.head)}
    table = np.zeros((2, len(head) + 1))
    for row, values in enumerate((ref, win)):
        for value in values:
            table[row, head.get(value, len(head))] += 1
    if not table[0].sum() or not table[1].sum():
        return DeepResult(None, None, None, None, None, None, pvalue=min(1.0, 2 * unseen_p),
                          tests=(TestResult("unseen", estimate.share, unseen_p, "new_share", estimate.share),))
    table = table[:, table.sum(axis=0) > 0]
    psi = distances.psi(table[0] / table[0].sum(), table[1] / table[1].sum())
    chi2 = stats.chi2_contingency(table, correction=False) if table.shape[1] > 1 else None
    head_p = float(chi2.pvalue) if chi2 is not None else 1.0
    chi2_stat = float(chi2.statistic) if chi2 is not None else 0.0
    tests = (TestResult("unseen", estimate.share, unseen_p, "new_share", estimate.share),
             TestResult("head_chi2", chi2_stat, head_p, "psi", psi))
    return DeepResult(None, None, psi, None, chi2_stat, head_p, pvalue=min(1.0, 2 * min(unseen_p, head_p)),
                      tests=tests)


def missing_rate_pvalue(ref_missing: int, ref_count: int, win_missing: int, win_count: int,
                        inflation: float = 1.0) -> float:
    """p-value of a chi-square test that the window's missing rate equals the reference's.

    ``inflation``: how much wider than sampling alone the reference windows' missing rates vary
    (``sketches.dispersion``): the statistic is divided by it.
    """
    table = np.array([[ref_missing, ref_count - ref_missing], [win_missing, win_count - win_missing]], float)
    if ref_count == 0 or win_count == 0 or (table.sum(axis=0) == 0).any():
        return 1.0
    return dispersed_chi2_pvalue(stats.chi2_contingency(table, correction=False), inflation)


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
