"""Over-dispersion (sketches/dispersion.py): every rule respects the reference windows' own variation.

A reference whose windows hold a daily cycle differs from window to window by more than sampling
explains; the gate's rescaling, the deep tests and the slow-drift CUSUM add that between-window
variance, and a reference of independent windows is left as it was (the guard).
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from driftwarden.pipeline.judging import drift_policy
from driftwarden.schemas.config import ThresholdConfig
from driftwarden.sketches import (CategoricalSketch, GateThresholds, HistogramSketch, Reference, ReservoirSample,
                                  analyze_window)
from driftwarden.sketches.calibration import thresholds_for_count
from driftwarden.sketches.dispersion import DISPERSION_GUARD, NO_DISPERSION, Dispersion, guarded_excess, window_stats
from driftwarden.sketches.reference import reference_from_window_sketches
from driftwarden.sketches.window_tests import histogram_tests

PER_DAY, EVENTS = 24, 1000
POLICY = drift_policy(ThresholdConfig(), 3_600_000)  # the production budget at hourly windows


def _cycle(rng: np.random.Generator, amplitude: float, days: int, shift: float = 0.0) -> list[np.ndarray]:
    """Hourly windows of a normal feature whose mean follows a daily sine of ``amplitude`` sd."""
    return [rng.normal(amplitude * np.sin(2 * np.pi * (w % PER_DAY) / PER_DAY) + shift, 1.0, EVENTS)
            for w in range(days * PER_DAY)]


def _reference(windows: list[np.ndarray], kind: str = "numeric"):
    sketch = HistogramSketch if kind == "numeric" else CategoricalSketch
    return reference_from_window_sketches("x", kind, [sketch().update(w) for w in windows], ReservoirSample(), POLICY)


def test_window_stats_are_each_windows_counts_and_mean() -> None:
    rng = np.random.default_rng(1)
    windows = [np.where(rng.random(500) < 0.1, np.nan, rng.normal(i, 1.0, 500)) for i in range(4)]
    rows = window_stats([HistogramSketch().update(w) for w in windows], [0, 0, 1, 1])
    for row, values in zip(rows, windows):
        finite = values[np.isfinite(values)]
        assert row[0] == values.size and row[1] == finite.size
        assert row[2] == pytest.approx(np.mean(finite), abs=1e-9 + 1e-12 * abs(np.mean(finite)))
    assert rows[:, 3].tolist() == [0, 0, 1, 1]


def test_the_guard_takes_independent_windows_for_what_they_are() -> None:
    """chi2(1) ratios of 48 independent windows: the excess is 0 in 1 - guard of references (binomial 99.9%)."""
    rng, trials = np.random.default_rng(2), 4000
    excess = sum(guarded_excess(rng.chisquare(1, 48), 2 ** 0.5) > 0 for _ in range(trials))
    low, high = stats.binomtest(excess, trials).proportion_ci(0.999)
    assert low <= DISPERSION_GUARD <= high, (excess, trials)


def test_independent_windows_have_no_dispersion_in_most_references() -> None:
    """40 references of 24 independent windows: every family is 0 in at least 36 (guard 1% per family)."""
    rng, any_excess = np.random.default_rng(3), 0
    for _ in range(40):
        spread = _reference([rng.normal(size=EVENTS) for _ in range(24)]).dispersion()
        any_excess += spread != NO_DISPERSION
    assert any_excess <= 4


def test_a_daily_cycle_in_the_mean_is_measured() -> None:
    """Mean cycle of 0.3 sd: between-window variance of the mean about A^2 / 2 = 0.045 (sd^2) per window,
    about CUSUM_HORIZON times that over the horizon (a slow cycle keeps its sign), and the distribution tests'."""
    spread = _reference(_cycle(np.random.default_rng(4), 0.3, 2)).dispersion()
    assert 0.025 < spread.mean < 0.065, spread
    assert spread.horizon > 4 * spread.mean
    assert spread.ks > 0 and spread.psi > 0 and spread.missing == 0.0 and spread.chi2 == 0.0


def test_a_cycle_in_a_categorys_share_is_measured() -> None:
    rng = np.random.default_rng(5)
    windows = [rng.choice(list("abc"), EVENTS, p=[0.4 + s, 0.35 - s / 2, 0.25 - s / 2]).astype(object)
               for s in 0.1 * np.sin(2 * np.pi * np.arange(48) / PER_DAY)]
    spread = _reference(windows, "categorical").dispersion()
    assert spread.chi2 > 0 and spread.ks == spread.psi == spread.mean == 0.0


def test_thresholds_keep_a_cycles_width_at_another_window_size() -> None:
    """Calibrated at 1,000 events, judged at 20,000: without dispersion KS's threshold shrinks by about
    sqrt(20) (sampling alone); a cycle's share does not shrink."""
    t = GateThresholds(ks=0.08, psi=0.05, source="calibrated")
    plain = thresholds_for_count(t, 48, 48_000, 20_000)
    cyclic = thresholds_for_count(t, 48, 48_000, 20_000, Dispersion(ks=2e-3, psi=2e-3))
    assert plain.ks == pytest.approx(0.08 * np.sqrt((1 / 20_000 + 1 / 48_000) / (1 / 1000 + 1 / 47_000)))
    assert cyclic.ks > 2.5 * plain.ks and cyclic.psi > 8 * plain.psi
    assert thresholds_for_count(t, 48, 48_000, 1000, Dispersion(ks=2e-3)).ks == pytest.approx(
        thresholds_for_count(t, 48, 48_000, 1000).ks, rel=0.03)


def test_deep_tests_widen_by_the_dispersion_as_scipy_computes_them() -> None:
    """KS at the effective size 1 / (v + tau2) (kstwo, as ks_2samp's asymptotic p-value); chi-square's statistic
    divided by the inflation."""
    rng = np.random.default_rng(6)
    ref, win = HistogramSketch().update(rng.normal(size=20_000)), HistogramSketch().update(rng.normal(0.1, 1, 2000))
    plain, wide = histogram_tests(ref, win), histogram_tests(ref, win, tau2=1e-3)
    v = 1 / ref.n + 1 / win.n
    d = plain.get("ks").statistic
    assert plain.get("ks").pvalue == pytest.approx(float(stats.kstwo.sf(d, round(1 / v))), rel=1e-12)
    assert wide.get("ks").pvalue == pytest.approx(float(stats.kstwo.sf(d, round(1 / v / (1 + 1e-3 / v)))), rel=1e-12)
    assert wide.get("ks").pvalue > 100 * plain.get("ks").pvalue
    chi2 = plain.get("chi2")
    dof = next(k for k in range(1, 200) if stats.chi2.sf(chi2.statistic, k) == pytest.approx(chi2.pvalue, rel=1e-9))
    assert wide.get("chi2").pvalue == pytest.approx(stats.chi2.sf(chi2.statistic / (1 + 1e-3 / v), dof), rel=1e-9)
    assert wide.get("beyond").pvalue == plain.get("beyond").pvalue  # exceedance: exchangeability, untouched


def _drifted_cells(reference: Reference, windows: list[np.ndarray]) -> list[tuple[int, str]]:
    state, out = {}, []
    for i, values in enumerate(windows):
        window = {"x": (HistogramSketch().update(values), ReservoirSample())}
        verdicts = analyze_window(window, reference, POLICY, state)
        state.update({v.name: v.cusum for v in verdicts if v.cusum is not None})
        out += [(i, v.severity) for v in verdicts if v.drifted]
    return out


@pytest.mark.parametrize("amplitude", [0.1, 0.3, 1.0])
def test_a_cycle_in_the_reference_never_drifts_a_drift_free_stream(amplitude: float) -> None:
    """Two days of hourly windows as the reference, four more days drift-free: no cell drifted. Without the
    windows' statistics (the rules before over-dispersion) most cells drift (the CUSUM, 'minor')."""
    rng = np.random.default_rng(7)
    reference = Reference({"x": _reference(_cycle(rng, amplitude, 2))})
    stream = _cycle(rng, amplitude, 4)
    assert _drifted_cells(reference, stream) == []
    before = Reference({"x": _reference_without_stats(reference.features["x"])})
    assert len(_drifted_cells(before, stream)) > 30


def _reference_without_stats(feature):
    import dataclasses

    return dataclasses.replace(feature, window_stats=np.empty((0, 4)))


def test_a_stationary_feature_keeps_its_power() -> None:
    """Independent reference windows: no dispersion; a persistent 0.1 sd shift is still caught within 6 windows."""
    rng = np.random.default_rng(8)
    reference = Reference({"x": _reference([rng.normal(size=EVENTS) for _ in range(48)])})
    assert reference.features["x"].dispersion() == NO_DISPERSION
    cells = _drifted_cells(reference, [rng.normal(0.1, 1.0, EVENTS) for _ in range(10)])
    assert cells and cells[0][0] <= 5
