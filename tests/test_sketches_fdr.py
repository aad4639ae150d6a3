"""Hierarchical FDR (sketches/fdr.py): plain BH with families of one, and the budget under simulation.

Figures (seeded; printed with ``-s``): the complete null (25 features x 21 members, 20,000 trials)
and one true signal in one segment of one feature, each checked with a 95% Clopper-Pearson
interval (``scipy.stats.binomtest``).
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from driftwarden.sketches.deep import benjamini_hochberg
from driftwarden.sketches.fdr import hierarchical_adjusted, hierarchical_bh, simes
from tests.oracle_helpers import p_approx

Q = 0.05
FEATURES, MEMBERS, TRIALS = 25, 21, 20_000


def random_pvalues(rng: np.random.Generator, size: int) -> np.ndarray:
    """Uniform p-values mixed with some small ones (signals), so that BH rejects some and not others."""
    p = rng.uniform(size=size)
    signal = rng.uniform(size=size) < 0.3
    p[signal] = rng.uniform(size=int(signal.sum())) ** 4 * 0.01
    return p


def test_families_of_one_are_plain_bh_as_scipy_computes_it() -> None:
    rng = np.random.default_rng(11)
    for _ in range(500):
        p = random_pvalues(rng, int(rng.integers(1, 40)))
        scipy_adjusted = stats.false_discovery_control(p, method="bh")
        assert [r[0] for r in hierarchical_bh([[x] for x in p], Q)] == (scipy_adjusted <= Q).tolist()
        adjusted = [a[0] for a in hierarchical_adjusted([[x] for x in p], Q)]
        assert adjusted == benjamini_hochberg(p).tolist()  # exactly today's numbers
        np.testing.assert_allclose(adjusted, scipy_adjusted, rtol=1e-12)


def test_simes_is_the_smallest_bh_adjusted_p_value() -> None:
    rng = np.random.default_rng(12)
    for _ in range(200):
        p = random_pvalues(rng, int(rng.integers(1, 30)))
        assert simes(p) == p_approx(float(np.min(np.sort(p) * p.size / np.arange(1, p.size + 1))), rel=1e-12)
        assert simes(p) == p_approx(float(stats.false_discovery_control(p).min()), rel=1e-12)


def test_adjusted_p_values_decide_as_the_procedure_does() -> None:
    rng = np.random.default_rng(13)
    for _ in range(2_000):
        families = [random_pvalues(rng, int(rng.integers(1, 8))).tolist() for _ in range(int(rng.integers(1, 12)))]
        decided = hierarchical_bh(families, Q)
        adjusted = hierarchical_adjusted(families, Q)
        assert [[a <= Q for a in fam] for fam in adjusted] == decided


def test_the_second_stage_runs_at_the_selected_share_of_q() -> None:
    # feature 0 selected (R = 1 of m = 2): its members face BH at q * 1/2, so 0.03 (> 0.025 * 2/2) is not found
    families = [[1e-6, 0.03], [0.9]]
    assert hierarchical_bh(families, Q) == [[True, False], [False]]
    assert hierarchical_bh([[1e-6, 0.03]], Q) == [[True, True]]  # alone (R = m = 1): found
    assert hierarchical_adjusted(families, Q)[0][1] == pytest.approx(0.03 * 2 / 1)


def test_complete_null_any_rejection_stays_within_q() -> None:
    rng = np.random.default_rng(2026)
    any_rejection = 0
    for _ in range(TRIALS):
        p = rng.uniform(size=(FEATURES, MEMBERS))
        any_rejection += any(any(f) for f in hierarchical_bh(p.tolist(), Q))
    test = stats.binomtest(any_rejection, TRIALS)
    ci = test.proportion_ci(0.95)
    print(f"\ncomplete null, {FEATURES}x{MEMBERS}, q={Q}: P(any rejection) = {any_rejection / TRIALS:.4f} "
          f"(95% CI {ci.low:.4f}..{ci.high:.4f}) over {TRIALS} trials")
    assert ci.low <= Q


def test_one_segment_signal_is_found_and_false_discoveries_stay_within_q() -> None:
    rng = np.random.default_rng(2027)
    trials, shift = 5_000, 6.0
    found, fdp, any_false = 0, [], 0
    for _ in range(trials):
        z = rng.normal(size=(FEATURES, MEMBERS))
        z[3, 7] += shift  # feature 3, segment 7 (member 0 is the global view)
        p = stats.norm.sf(z)
        rejected = np.array(hierarchical_bh(p.tolist(), Q))
        found += bool(rejected[3, 7])
        false = int(rejected.sum()) - int(rejected[3, 7])
        any_false += false > 0
        fdp.append(false / max(int(rejected.sum()), 1))
    power = stats.binomtest(found, trials).proportion_ci(0.95)
    mean_fdp = float(np.mean(fdp))
    fdp_ci = stats.ttest_1samp(fdp, Q).confidence_interval(0.95)
    false_ci = stats.binomtest(any_false, trials).proportion_ci(0.95)
    print(f"\none signal (z + {shift}) in 1 of {FEATURES}x{MEMBERS}: power {found / trials:.4f} "
          f"(95% CI {power.low:.4f}..{power.high:.4f}); mean FDP {mean_fdp:.4f} (95% CI {fdp_ci.low:.4f}.."
          f"{fdp_ci.high:.4f}); P(any false discovery) {any_false / trials:.4f} "
          f"(95% CI {false_ci.low:.4f}..{false_ci.high:.4f})")
    assert power.low >= 0.9
    assert fdp_ci.low <= Q  # FDR, not the family-wise rate: P(any false discovery) is reported only
