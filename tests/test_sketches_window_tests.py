"""Full-window tests on exact counts: checked against scipy on the full data, and first-window detection."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from driftwarden.pipeline.judging import analyze_summary
from driftwarden.pipeline.summary import summarize_window
from driftwarden.pipeline.references import reference_from_summaries
from driftwarden.schemas.config import ModelConfig
from driftwarden.sketches import CategoricalSketch, DriftPolicy, HistogramSketch
from tests.oracle_helpers import p_approx
from driftwarden.sketches.window_tests import (KS_LIMIT_N, KS_LIMIT_REL_ERROR, aligned_counts, category_tests, chi2_cuts,
                                   exceedance_pvalue, histogram_tests)

CATS = np.array(list("abcde"))
SHARES = np.array([0.4, 0.3, 0.15, 0.1, 0.05])
CONFIG = ModelConfig(name="m", features={"x": "numeric", "c": "categorical"})


def _integers(rng: np.random.Generator, size: int, shift: float = 0.0) -> np.ndarray:
    """Integer-valued data (few hundred distinct values): every value has a bucket of its own."""
    return np.round(rng.normal(shift, 30.0, size))


def test_full_window_ks_is_scipy_ks_on_the_whole_data() -> None:
    rng = np.random.default_rng(0)
    ref, win = _integers(rng, 20_000), _integers(rng, 3_000, 2.0)
    ks = histogram_tests(HistogramSketch().update(ref), HistogramSketch().update(win)).get("ks")
    exact = stats.ks_2samp(ref, win, method="asymp")
    assert ks.statistic == pytest.approx(exact.statistic, abs=1e-12)
    assert ks.pvalue == p_approx(exact.pvalue, rel=1e-9)


@pytest.mark.parametrize("n_ref, n_win, shift", [(40_000, 14_000, 1.6), (200_000, 60_000, 0.9)])
def test_full_window_ks_of_large_windows_is_within_its_bound_of_scipy(n_ref: int, n_win: int, shift: float) -> None:
    """Above KS_LIMIT_N effective events the p-value is Kolmogorov's limit distribution: within the documented
    KS_LIMIT_REL_ERROR of scipy's (kstwo at that n, whose cost grows with n); the statistic stays exact."""
    rng = np.random.default_rng(3)
    ref, win = _integers(rng, n_ref), _integers(rng, n_win, shift)
    assert n_ref * n_win / (n_ref + n_win) > KS_LIMIT_N
    ks = histogram_tests(HistogramSketch().update(ref), HistogramSketch().update(win)).get("ks")
    exact = stats.ks_2samp(ref, win, method="asymp")
    assert ks.statistic == pytest.approx(exact.statistic, abs=1e-12)
    assert 1e-12 < exact.pvalue < 0.05  # where kstwo is slow and the limit differs most from it
    assert ks.pvalue == p_approx(exact.pvalue, rel=KS_LIMIT_REL_ERROR)
    assert ks.pvalue != exact.pvalue  # the limit distribution, not kstwo


def test_binned_chi2_is_scipy_chi2_on_the_whole_data() -> None:
    rng = np.random.default_rng(1)
    ref, win = _integers(rng, 20_000), _integers(rng, 1_000)
    win[:40] = 400.0  # a few percent far beyond the reference's range
    rh, wh = HistogramSketch().update(ref), HistogramSketch().update(win)
    lower, upper, r, w = aligned_counts(rh, wh)
    cuts = chi2_cuts(r, w, 10)
    edges = lower[cuts + 1]  # each bin starts at its first bucket's lower edge: [edge_i, edge_i+1)
    table = np.vstack([np.bincount(np.searchsorted(edges, v, side="right"), minlength=edges.size + 1)
                       for v in (ref, win)])
    assert table.shape[1] > 12  # deciles refined in both tails
    assert (table.sum(axis=0) * 1_000 / 21_000 >= 5).all()
    exact = stats.chi2_contingency(table, correction=False)
    chi2 = histogram_tests(rh, wh).get("chi2")
    assert chi2.statistic == pytest.approx(exact.statistic, rel=1e-9)
    assert exact.pvalue < 1e-20 and chi2.pvalue == p_approx(exact.pvalue, rel=1e-6)


def test_exceedance_is_the_hypergeometric_chance_the_top_k_are_all_window_values() -> None:
    for k, n_w, n_r in [(1, 10, 30), (3, 1000, 30_000), (12, 1000, 6000)]:
        assert exceedance_pvalue(k, n_w, n_r) == p_approx(stats.hypergeom.pmf(k, n_w + n_r, n_w, k), rel=1e-9)
    rng = np.random.default_rng(2)
    ref, win = rng.normal(size=30_000), rng.normal(size=1000)
    win[:7] = ref.max() + 1 + np.arange(7)
    beyond = histogram_tests(HistogramSketch().update(ref), HistogramSketch().update(win)).get("beyond")
    assert beyond.statistic == 7 and beyond.pvalue == p_approx(2 * stats.hypergeom.pmf(7, 31_000, 1000, 7), rel=1e-9)


def test_category_chi2_and_new_categories_on_full_counts() -> None:
    rng = np.random.default_rng(3)
    ref = rng.choice(CATS, 30_000, p=SHARES).tolist()
    win = rng.choice(CATS, 2_000, p=[0.3, 0.3, 0.15, 0.1, 0.15]).tolist() + ["z"] * 30
    result = category_tests(CategoricalSketch().update(ref), CategoricalSketch().update(win), 0.0)
    table = [[ref.count(c) for c in CATS], [win.count(c) for c in CATS]]
    exact = stats.chi2_contingency(table, correction=False)
    assert result.get("chi2").statistic == pytest.approx(exact.statistic, rel=1e-9)
    new = result.get("new")
    assert new.statistic == 30 and new.pvalue == p_approx(stats.binom.sf(29, 2030, 1 / 30_001), rel=1e-9)
    assert [m.category for m in result.moved][:2] == ["z", "e"] and result.moved[0].as_dict()["ref_share"] == 0.0


def _window(rng: np.random.Generator, size: int, change: str | None) -> list[dict]:
    x, c = rng.normal(size=size), rng.choice(CATS, size, p=SHARES).astype(object)
    if change == "mean":
        x += 0.5
    elif change == "variance":
        x *= 1.5
    elif change == "tail":  # 3% of the mass moved six standard deviations up
        x[rng.random(size) < 0.03] += 6.0
    elif change == "missing":
        x[rng.random(size) < 0.1] = np.nan
    elif change == "share":
        c = rng.choice(CATS, size, p=[0.3, 0.3, 0.15, 0.1, 0.15]).astype(object)
    elif change == "new_category":
        c[rng.random(size) < 0.03] = "z"
    return [{"x": None if np.isnan(a) else float(a), "c": b} for a, b in zip(x, c)]


@pytest.fixture(scope="module")
def reference():
    rng = np.random.default_rng(10)
    summaries = [summarize_window("m", i * 1000, 1000, _window(rng, 1000, None), CONFIG) for i in range(30)]
    return reference_from_summaries(summaries, dict(CONFIG.features), DriftPolicy())


@pytest.mark.parametrize("change, feature", [("mean", "x"), ("variance", "x"), ("tail", "x"), ("missing", "x"),
                                             ("share", "c"), ("new_category", "c")])
def test_every_change_is_caught_in_its_first_1000_event_window(reference, change: str, feature: str) -> None:
    caught = 0
    for seed in range(5):
        rng = np.random.default_rng(100 + seed)
        summary = summarize_window("m", 40_000, 1000, _window(rng, 1000, change), CONFIG)
        outcome = {f.name: f for f in analyze_summary(summary, reference, DriftPolicy()).features}[feature]
        caught += outcome.drifted
    assert caught == 5


def test_the_tail_is_decided_by_a_full_window_test_and_says_where(reference) -> None:
    from driftwarden.sketches import analyze_window
    summary = summarize_window("m", 40_000, 1000, _window(np.random.default_rng(7), 1000, "tail"), CONFIG)
    verdict = {v.name: v for v in analyze_window(summary.features, reference, DriftPolicy())}["x"]
    assert verdict.drifted and verdict.deep.decided_by.name in ("beyond", "chi2")
    top = verdict.deep.moved[0]
    assert top.q_high == pytest.approx(1.0) and top.win_share > top.ref_share  # the top tail gained mass
