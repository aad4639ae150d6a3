"""Calibrated gate thresholds meet the configured false-alarm rate on streams without drift."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from driftwarden.sketches import (CategoricalSketch, DriftPolicy, NumericSketch, Reference, build_feature_reference,
                      calibrate_thresholds, gate_alarm, gate_scores, score_dof)

WINDOW = 1000
CATS, PROBS = list("abcdefgh"), [0.3, 0.2, 0.1, 0.1, 0.1, 0.1, 0.05, 0.05]


def _numeric(rng: np.random.Generator) -> np.ndarray:
    x = rng.gamma(2.0, size=WINDOW)
    x[rng.random(WINDOW) < 0.02] = np.nan  # a steady 2% missing
    return x


def _categorical(rng: np.random.Generator) -> list:
    return rng.choice(CATS, p=PROBS, size=WINDOW).tolist()


@pytest.mark.parametrize("kind, make, sketch", [("numeric", _numeric, NumericSketch),
                                                ("categorical", _categorical, CategoricalSketch)])
def test_false_alarm_rate_within_binomial_interval(kind: str, make, sketch) -> None:
    """Pooled over 10 independent references (each calibrated on 100 windows), 200 fresh windows each.

    Pooling matters: every window of one stream is scored against the same reference, so one
    reference's sketch error and scale estimate shift all its windows together.
    """
    policy = DriftPolicy(false_alarm_rate=0.02)
    references, per_reference, alarms = 10, 200, 0
    for seed in range(references):
        rng = np.random.default_rng(seed)
        ref = build_feature_reference("f", kind, [make(rng) for _ in range(100)], policy)
        assert ref.thresholds.source == "calibrated" and ref.null_scores.shape == (100, 7)
        alarms += sum(gate_alarm(gate_scores(ref.sketch, sketch().update(make(rng))), ref.thresholds)
                      for _ in range(per_reference))
    trials = references * per_reference
    low, high = stats.binom.interval(0.9999, trials, policy.false_alarm_rate)
    assert low <= alarms <= high, f"{alarms} alarms in {trials} windows, want {low}..{high}"


def test_degrees_of_freedom_are_estimated_when_not_given() -> None:
    rng = np.random.default_rng(0)
    policy = DriftPolicy()
    for kind, make, dof in [("numeric", lambda: rng.normal(size=1000), 9),
                            ("categorical", lambda: rng.choice(list("abc"), 1000).tolist(), 2)]:
        ref = build_feature_reference("f", kind, [make() for _ in range(100)], policy)
        assert score_dof(ref.sketch, policy.bins) == dof
        guessed = calibrate_thresholds(ref.null_scores, kind, policy.false_alarm_rate)
        for name in ("psi", "chi2", "js"):
            assert getattr(guessed, name) == pytest.approx(getattr(ref.thresholds, name), rel=0.25)


def test_few_windows_fall_back_to_fixed_thresholds() -> None:
    rng = np.random.default_rng(1)
    ref = build_feature_reference("f", "numeric", [rng.normal(size=100) for _ in range(4)], DriftPolicy())
    assert ref.thresholds.source == "fixed" and ref.thresholds.psi == 0.1 and ref.null_scores.shape[0] == 0


def test_constant_and_never_missing_feature_gets_floor_thresholds() -> None:
    ref = build_feature_reference("f", "numeric", [np.full(200, 3.0) for _ in range(10)], DriftPolicy())
    assert 0 < ref.thresholds.ks <= 0.01 and 0 < ref.thresholds.missing_delta <= 0.01
    assert not np.isinf(ref.thresholds.emd) and np.isinf(ref.thresholds.chi2)


def test_reference_save_load_round_trip(tmp_path) -> None:
    rng = np.random.default_rng(2)
    policy = DriftPolicy()
    features = {"x": build_feature_reference("x", "numeric", [rng.normal(size=300) for _ in range(6)], policy),
                "c": build_feature_reference("c", "categorical", [_categorical(rng) for _ in range(6)], policy)}
    Reference(features).save(tmp_path / "ref.dwsk")
    loaded = Reference.load(tmp_path / "ref.dwsk")
    for name, fr in features.items():
        got = loaded.features[name]
        assert (got.name, got.kind, got.thresholds) == (fr.name, fr.kind, fr.thresholds)
        np.testing.assert_array_equal(got.null_scores, fr.null_scores)
        assert got.sketch.serialize() == fr.sketch.serialize()
        assert got.sample.values.tolist() == fr.sample.values.tolist()


def test_unknown_kind_names_the_valid_ones() -> None:
    with pytest.raises(ValueError, match="numeric"):
        build_feature_reference("f", "ordinal", [[1.0]], DriftPolicy())


def test_thresholds_follow_the_live_windows_count() -> None:
    """Calibrated on 6,000-event windows, judged at 1,000 and 20,000: the gate keeps its 1% rate."""
    from driftwarden.sketches import HistogramSketch, ReservoirSample, gate_alarm, gate_scores
    from driftwarden.sketches.calibration import thresholds_for_count
    from driftwarden.sketches.reference import reference_from_window_sketches

    rng = np.random.default_rng(0)
    ref = reference_from_window_sketches("x", "numeric", [HistogramSketch().update(rng.normal(size=6000))
                                                          for _ in range(20)], ReservoirSample(), DriftPolicy())
    for n in (1000, 20_000):
        scaled = unscaled = 0
        for _ in range(100):
            scores = gate_scores(ref.sketch, HistogramSketch().update(rng.normal(size=n)), 10)
            unscaled += gate_alarm(scores, ref.thresholds)
            scaled += gate_alarm(scores, thresholds_for_count(ref.thresholds, 20, ref.sketch.count, n))
        assert scaled <= 5  # P(>= 5 of 100 | 1%) = 0.003
        if n == 1000:
            assert unscaled >= 50  # the 6,000-event thresholds alarm on most 1,000-event windows
