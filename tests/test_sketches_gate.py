"""Gate scores from sketches, against the exact values on the full data, and the bad-input cases."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from driftwarden.core.errors import SketchError
from driftwarden.sketches import CategoricalSketch, GateScores, GateThresholds, NumericSketch, gate_alarm, gate_scores
from driftwarden.sketches import distances
from driftwarden.sketches.histogram import HistogramSketch
from driftwarden.sketches.gate import EMD_TOLERANCE, category_probs, psi_tolerance
from tests.oracle_helpers import oracle_psi

RNG = np.random.default_rng(42)
CASES = {  # reference size, window size, window generator
    "same": lambda n: RNG.normal(size=n),
    "shift-small": lambda n: RNG.normal(0.05, 1.0, size=n),
    "shift": lambda n: RNG.normal(0.3, 1.0, size=n),
    "scale": lambda n: RNG.normal(0.0, 1.5, size=n),
    "skewed": lambda n: RNG.lognormal(0.0, 0.5, size=n) - 1.0,
}


@pytest.fixture(scope="module")
def reference_data() -> np.ndarray:
    return RNG.normal(size=200_000)


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("kind", ["kll", "tdigest"])
def test_ks_within_stated_bound_of_scipy(reference_data: np.ndarray, case: str, kind: str) -> None:
    window = CASES[case](50_000)
    scores = gate_scores(NumericSketch(kind=kind).update(reference_data), NumericSketch(kind=kind).update(window))
    exact = stats.ks_2samp(reference_data, window).statistic
    assert scores.ks_bound > 0
    assert abs(scores.ks - exact) <= scores.ks_bound


@pytest.mark.parametrize("case", list(CASES))
def test_psi_and_emd_within_documented_tolerance(reference_data: np.ndarray, case: str) -> None:
    window = CASES[case](50_000)
    ref_sk, win_sk = NumericSketch().update(reference_data), NumericSketch().update(window)
    scores = gate_scores(ref_sk, win_sk)
    exact_psi = oracle_psi(reference_data, window)  # the data's own quantile bins and the definition: no product code
    assert abs(scores.psi - exact_psi) <= psi_tolerance(exact_psi)
    q25, q75 = np.quantile(reference_data, [0.25, 0.75])
    exact_emd = stats.wasserstein_distance(reference_data, window) / distances.spread(q25, q75, 1.0)
    assert abs(scores.emd - exact_emd) <= EMD_TOLERANCE + 0.1 * exact_emd


def test_scores_grow_with_drift(reference_data: np.ndarray) -> None:
    ref = NumericSketch().update(reference_data)
    same = gate_scores(ref, NumericSketch().update(CASES["same"](50_000)))
    shifted = gate_scores(ref, NumericSketch().update(CASES["shift"](50_000)))
    for name in ("ks", "psi", "emd"):
        assert getattr(shifted, name) > 3 * getattr(same, name)


def test_constant_feature_has_finite_scores() -> None:
    ref = NumericSketch().update(np.full(1000, 7.0))
    same = gate_scores(ref, NumericSketch().update(np.full(500, 7.0)))
    assert (same.ks, same.psi, same.emd) == (0.0, 0.0, 0.0)
    moved = gate_scores(ref, NumericSketch().update(np.full(500, 9.0)))
    assert moved.ks == 1.0 and moved.emd == 2.0 and math.isfinite(moved.psi) and moved.psi > 5  # spread 1.0


def test_huge_values_and_infinities() -> None:
    ref = NumericSketch().update(RNG.normal(size=5000) * 1e300)
    win = NumericSketch().update(np.concatenate([RNG.normal(size=5000) * 1e300, [np.inf, -np.inf]]))
    scores = gate_scores(ref, win)
    assert all(math.isfinite(v) for v in (scores.ks, scores.psi, scores.emd))
    assert scores.emd < 0.2 and scores.missing_delta == pytest.approx(2 / 5002)  # infinities count as missing


@pytest.mark.parametrize("window", [[], [None] * 50, [np.nan] * 50, [np.inf, -np.inf] * 25])
def test_empty_all_null_all_nan_windows_have_no_distances(window: list) -> None:
    ref = NumericSketch().update(RNG.normal(size=1000))
    scores = gate_scores(ref, NumericSketch().update(window))
    assert (scores.ks, scores.psi, scores.emd) == (None, None, None)
    assert scores.missing_delta == (0.0 if not window else 1.0)


def test_missing_delta_is_signed_and_counts_nan_as_missing() -> None:
    ref = NumericSketch().update([1.0, 2.0, None, np.nan])
    assert gate_scores(ref, NumericSketch().update([1.0, 2.0, 3.0, 4.0])).missing_delta == -0.5


def test_categorical_scores() -> None:
    ref = CategoricalSketch().update(["a"] * 500 + ["b"] * 500)
    same = gate_scores(ref, CategoricalSketch().update(["a"] * 50 + ["b"] * 50))
    new = gate_scores(ref, CategoricalSketch().update(["a"] * 50 + ["b"] * 30 + ["c"] * 20))
    assert same.chi2 == pytest.approx(0.0, abs=1e-9) and same.js == pytest.approx(0.0) and same.new_share == 0.0
    assert new.new_share == pytest.approx(0.2) and new.js > 0.05 and new.chi2 > 1.0
    assert new.ks is None and new.psi is None


def test_categorical_js_and_chi2_match_scipy() -> None:
    ref = CategoricalSketch().update(list(RNG.choice(list("abcd"), 3000, p=[0.4, 0.3, 0.2, 0.1])))
    win = CategoricalSketch().update(list(RNG.choice(list("abcd"), 1000, p=[0.25, 0.25, 0.25, 0.25])))
    r, w = category_probs(ref, win)
    scores = gate_scores(ref, win)
    assert scores.js == pytest.approx(_scipy_js(r, w), rel=1e-9)
    expected = stats.chisquare(w * win.n, distances.smooth(r) * win.n).statistic / win.n
    assert scores.chi2 == pytest.approx(expected, rel=0.01)


def _scipy_js(r: np.ndarray, w: np.ndarray) -> float:
    from scipy.spatial.distance import jensenshannon
    return float(jensenshannon(r, w, base=2) ** 2)


def test_mixing_kinds_raises() -> None:
    with pytest.raises(SketchError, match="feature kind changed"):
        gate_scores(NumericSketch().update([1.0]), CategoricalSketch().update(["a"]))


def test_gate_alarm_any_score_and_abs_missing() -> None:
    t = GateThresholds.fixed()
    assert t.psi == 0.1 and t.source == "fixed"
    assert not gate_alarm(GateScores(ks=0.05, psi=0.05, emd=0.05, missing_delta=-0.01), t)
    assert gate_alarm(GateScores(ks=0.05, psi=0.2, emd=0.05), t)
    assert gate_alarm(GateScores(missing_delta=-0.5), t)
    assert not gate_alarm(GateScores(ks=float("nan")), t)



@pytest.mark.parametrize("make", [lambda: NumericSketch(kind="kll"), lambda: NumericSketch(kind="tdigest"),
                                  lambda: HistogramSketch()], ids=["kll", "tdigest", "histogram"])
def test_a_reference_that_changes_is_judged_by_its_new_values(make) -> None:
    """The gate remembers a reference's bins and quantiles across windows, but never past a change."""
    rng = np.random.default_rng(3)
    reference, window = make().update(rng.normal(size=5_000)), make().update(rng.normal(0.5, 1.0, size=2_000))
    before = gate_scores(reference, window)
    assert gate_scores(reference, window) == before
    reference.update(rng.normal(0.5, 1.0, size=20_000))
    after = gate_scores(reference, window)
    assert after.psi < before.psi and after.emd < before.emd
    # the same as a copy that never judged a window (nothing remembered)
    assert after == gate_scores(type(reference).deserialize(reference.serialize()), window)
