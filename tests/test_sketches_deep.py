"""Deep tests on samples against scipy, Benjamini-Hochberg, and the verdict rule."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from driftwarden.sketches import DeepResult, DriftPolicy, ReservoirSample, benjamini_hochberg, deep_test, verdict
from driftwarden.sketches.deep import missing_rate_pvalue
from tests.oracle_helpers import p_approx

RNG = np.random.default_rng(7)


def sample(values) -> ReservoirSample:
    return ReservoirSample(capacity=2000).update(values)


def test_numeric_deep_test_matches_scipy() -> None:
    ref, win = RNG.normal(size=1500), RNG.normal(0.2, 1.0, size=800)
    result = deep_test(sample(ref), sample(win), "numeric")
    exact = stats.ks_2samp(ref, win, method="exact")
    assert (result.ks_stat, result.ks_pvalue) == p_approx((exact.statistic, exact.pvalue), rel=1e-9)
    q25, q75 = np.quantile(ref, [0.25, 0.75])
    assert result.emd == pytest.approx(stats.wasserstein_distance(ref, win) / (q75 - q25), rel=1e-9)
    assert result.pvalue == result.ks_pvalue and result.chi2_stat is None and result.psi > 0


def test_categorical_deep_test_matches_scipy() -> None:
    ref = ["a"] * 600 + ["b"] * 400
    win = ["a"] * 250 + ["b"] * 200 + ["c"] * 50
    result = deep_test(sample(ref), sample(win), "categorical")
    exact = stats.chi2_contingency([[600, 400, 0], [250, 200, 50]], correction=False)
    assert exact.pvalue < 1e-20 and (result.chi2_stat, result.chi2_pvalue) == p_approx((exact.statistic, exact.pvalue))
    assert result.pvalue == result.chi2_pvalue and result.ks_stat is None


def test_empty_or_constant_samples_do_not_crash() -> None:
    assert deep_test(sample([]), sample([1.0]), "numeric").pvalue == 1.0
    constant = deep_test(sample([3.0] * 100), sample([3.0] * 50), "numeric")
    assert constant.emd == 0.0 and constant.ks_stat == 0.0
    assert deep_test(sample(["a"] * 10), sample(["a"] * 5), "categorical").pvalue == 1.0
    with pytest.raises(ValueError, match="numeric"):
        deep_test(sample([1.0]), sample([1.0]), "ordinal")


def test_missing_rate_pvalue() -> None:
    assert missing_rate_pvalue(10, 1000, 300, 1000) < 1e-10
    assert missing_rate_pvalue(0, 1000, 0, 1000) == 1.0
    assert missing_rate_pvalue(50, 1000, 52, 1000) > 0.5


@settings(max_examples=50, deadline=None)
@given(st.lists(st.floats(min_value=0.0, max_value=1.0), min_size=1, max_size=40))
def test_benjamini_hochberg_matches_scipy(pvalues: list) -> None:
    np.testing.assert_allclose(benjamini_hochberg(pvalues), stats.false_discovery_control(pvalues), rtol=1e-12)


def test_verdict_severity_from_effect_sizes() -> None:
    policy = DriftPolicy()

    def deep(psi: float, ks: float, emd: float) -> DeepResult:
        return DeepResult(ks, 1e-6, psi, emd, None, None, 1e-6)

    assert verdict(deep(0.05, 0.05, 0.05), 0.01, policy).severity == "minor"
    assert verdict(deep(0.15, 0.05, 0.05), 0.01, policy).severity == "moderate"
    assert verdict(deep(0.05, 0.3, 0.05), 0.01, policy).severity == "major"
    assert verdict(deep(0.5, 0.5, 0.5), 0.2, policy).drifted is False
    assert verdict(deep(0.0, 0.0, 0.0), 0.01, policy, missing_delta=-0.3).severity == "major"
    with pytest.raises(ValueError):
        DriftPolicy(alpha=1.5)
