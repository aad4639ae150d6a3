"""Scores held to oracles that share no code with the product: PSI computed by hand on a small case and by an
independent implementation (pandas' binning, scipy's relative entropy), the new-category share and the missing
rate recounted from the raw values with nulls, NaN and infinities present (from the sketches through the
pipeline to the replay report's entry), and the missing-rate test against a two-proportion z-test.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from driftwarden.pipeline.judging import analyze_summary
from driftwarden.pipeline.references import reference_from_summaries
from driftwarden.pipeline.summary import summarize_window
from driftwarden.replay.report import feature_entry
from driftwarden.schemas.config import ModelConfig
from driftwarden.sketches import CategoricalSketch, DriftPolicy, HistogramSketch, NumericSketch, ReservoirSample
from driftwarden.sketches import analyze_window, deep_test, gate_scores
from driftwarden.sketches.gate import psi_tolerance
from driftwarden.sketches.window_tests import category_tests
from tests.oracle_helpers import PSI_SMOOTHING as EPS, oracle_category_psi, oracle_psi, p_approx


def test_p_approx_has_no_absolute_floor() -> None:
    """Why the p-value comparisons use p_approx: pytest.approx calls any two p-values below 1e-12 equal."""
    assert 2.3e-68 == pytest.approx(1.2e-68, rel=1e-9)
    assert 2.3e-68 != p_approx(1.2e-68) and 2.3e-68 == p_approx(2.3e-68 * (1 + 1e-12))


# ------------------------------------------------------------------------------------------------ PSI
REF_1_TO_10 = np.arange(1.0, 11.0)
WINDOW_SMALL = np.array([1, 1, 2, 2, 2, 3, 4, 9, 10, 10], dtype=float)


def _smoothed(share: float, bins: int) -> float:
    return (share + EPS) / (1 + bins * EPS)


def _hand_psi(ref_shares: list[float], win_shares: list[float]) -> float:
    """sum (w - r) ln(w / r) over bins whose shares were counted by hand."""
    k = len(ref_shares)
    return sum((_smoothed(w, k) - _smoothed(r, k)) * math.log(_smoothed(w, k) / _smoothed(r, k))
               for r, w in zip(ref_shares, win_shares))


#: Reference 1..10 against the window 1, 1, 2, 2, 2, 3, 4, 9, 10, 10, counted by hand.
#: Five bins: the reference's quintiles are 2, 4, 6, 8, so the bins (-inf, 2], (2, 4], (4, 6], (6, 8], (8, inf)
#: hold 2 reference values each (0.2) and 5, 2, 0, 0, 3 of the window's (0.5, 0.2, 0, 0, 0.3):
#: PSI = 0.3 ln(2.5) + 0 + 2 * 0.2 ln(0.2 / eps) + 0.1 ln(1.5), smoothed: 3.35421.
#: Ten bins: edges 1..9, one reference value a bin (0.1); the window holds 2, 3, 1, 1, 0, 0, 0, 0, 1, 2 tenths:
#: PSI = 0.1 ln 2 + 0.2 ln 3 + 0 + 0 + 4 * 0.1 ln(0.1 / eps) + 0 + 0.1 ln 2, smoothed: 3.11850.
HAND_CASES = {
    5: ([0.2] * 5, [0.5, 0.2, 0.0, 0.0, 0.3], 3.35421),
    10: ([0.1] * 10, [0.2, 0.3, 0.1, 0.1, 0.0, 0.0, 0.0, 0.0, 0.1, 0.2], 3.11850),
}


@pytest.mark.parametrize("bins", sorted(HAND_CASES))
def test_psi_of_a_small_case_is_the_hand_computed_value(bins: int) -> None:
    ref_shares, win_shares, rounded = HAND_CASES[bins]
    expected = _hand_psi(ref_shares, win_shares)
    assert expected == pytest.approx(rounded, abs=5e-6)  # the arithmetic above, written out
    for make in (HistogramSketch, NumericSketch):  # the pipeline's sketch, and the quantile sketch (exact when small)
        gate = gate_scores(make().update(REF_1_TO_10), make().update(WINDOW_SMALL), bins)
        assert gate.psi == pytest.approx(expected, rel=1e-9), make.__name__
    deep = deep_test(ReservoirSample(100).update(REF_1_TO_10), ReservoirSample(100).update(WINDOW_SMALL), "numeric",
                     bins)
    assert deep.psi == pytest.approx(expected, rel=1e-9)


@pytest.mark.parametrize("shift, scale", [(0.0, 1.0), (0.3, 1.0), (0.0, 1.6), (1.0, 0.5)])
def test_psi_matches_an_independent_implementation(shift: float, scale: float) -> None:
    """Exact on the samples (deep test); the gate's sketch estimate within its documented tolerance."""
    rng = np.random.default_rng(5)
    ref, win = rng.gamma(2.0, size=20_000), rng.gamma(2.0, size=5_000) * scale + shift
    exact = oracle_psi(ref, win)
    deep = deep_test(ReservoirSample(50_000).update(ref), ReservoirSample(50_000).update(win), "numeric")
    assert deep.psi == pytest.approx(exact, rel=1e-9)
    gate = gate_scores(HistogramSketch().update(ref), HistogramSketch().update(win)).psi
    assert abs(gate - exact) <= psi_tolerance(exact), (gate, exact)


def test_categorical_psi_matches_an_independent_implementation() -> None:
    rng = np.random.default_rng(6)
    ref = rng.choice(list("abcde"), 3_000, p=[0.4, 0.3, 0.15, 0.1, 0.05]).tolist()
    win = rng.choice(list("abcdf"), 1_000, p=[0.2, 0.3, 0.2, 0.2, 0.1]).tolist()
    deep = deep_test(ReservoirSample(10_000).update(ref), ReservoirSample(10_000).update(win), "categorical")
    assert deep.psi == pytest.approx(oracle_category_psi(ref, win), rel=1e-9)


# ------------------------------------------------------------------------- new categories and missing values
CONFIG = ModelConfig(name="m", features={"x": "numeric", "c": "categorical"})
CATS = ["a", "b", "c", "d"]


def _rows(rng: np.random.Generator, n: int, missing: float, new: float = 0.0) -> list[dict]:
    """Events whose numeric x is null, NaN, +inf or -inf (a quarter each) at rate ``missing``, and whose
    categorical c is null at rate ``missing`` and a new value 'zz' at rate ``new``."""
    x = rng.normal(size=n).astype(object)
    c = rng.choice(CATS, n).astype(object)
    u = rng.random(n)
    for i, bad in enumerate((None, math.nan, math.inf, -math.inf)):
        x[(u >= missing * i / 4) & (u < missing * (i + 1) / 4)] = bad
    c[rng.random(n) < new] = "zz"
    c[rng.random(n) < missing] = None
    return [{"x": a, "c": b} for a, b in zip(x.tolist(), c.tolist())]


def _is_missing_number(v) -> bool:
    return v is None or not math.isfinite(v)


def _is_missing_category(v) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v))


def _with_nans(values: list) -> list:
    """Every other null as NaN, as a pandas column of strings holds them."""
    as_nan = set([i for i, v in enumerate(values) if v is None][::2])
    return [math.nan if i in as_nan else v for i, v in enumerate(values)]


def _oracle(ref_rows: list[dict], win_rows: list[dict]) -> dict:
    """Count, missing, missing rate change and new-category share recounted from the raw values."""
    out = {}
    for name, missing in (("x", _is_missing_number), ("c", _is_missing_category)):
        ref, win = [r[name] for r in ref_rows], [r[name] for r in win_rows]
        out[name] = {"count": len(win), "missing": sum(map(missing, win)),
                     "missing_delta": sum(map(missing, win)) / len(win) - sum(map(missing, ref)) / len(ref)}
    seen = {v for v in (r["c"] for r in ref_rows) if not _is_missing_category(v)}
    present = [v for v in (r["c"] for r in win_rows) if not _is_missing_category(v)]
    out["c"]["new_share"] = sum(v not in seen for v in present) / len(present)
    out["c"]["new"], out["c"]["present"] = sum(v not in seen for v in present), len(present)
    return out


@pytest.fixture(scope="module")
def nulls_case() -> dict:
    """A reference of 20 windows with 4% missing, a window with 30% missing and 10% new categories."""
    rng = np.random.default_rng(8)
    ref_windows = [_rows(rng, 500, 0.04) for _ in range(20)]
    win = _rows(rng, 2_000, 0.30, new=0.10)
    ref_rows = [r for w in ref_windows for r in w]
    summaries = [summarize_window("m", i * 1000, 1000, rows, CONFIG) for i, rows in enumerate(ref_windows)]
    reference = reference_from_summaries(summaries, dict(CONFIG.features), DriftPolicy())
    summary = summarize_window("m", 50_000, 1000, win, CONFIG)
    return {"ref_rows": ref_rows, "win": win, "reference": reference, "summary": summary,
            "oracle": _oracle(ref_rows, win)}


def test_new_category_share_and_missing_rate_with_nulls_at_the_gate(nulls_case: dict) -> None:
    ref_rows, win, oracle = nulls_case["ref_rows"], nulls_case["win"], nulls_case["oracle"]
    ref_c = CategoricalSketch().update(_with_nans([r["c"] for r in ref_rows]))
    win_c = CategoricalSketch().update(_with_nans([r["c"] for r in win]))
    assert win_c.nulls == oracle["c"]["missing"]
    assert win_c.new_category_share(ref_c) == pytest.approx(oracle["c"]["new_share"], rel=1e-12)
    categorical = gate_scores(ref_c, win_c)
    assert categorical.new_share == pytest.approx(oracle["c"]["new_share"], rel=1e-12)
    assert categorical.missing_delta == pytest.approx(oracle["c"]["missing_delta"], rel=1e-12)
    numeric = gate_scores(HistogramSketch().update([r["x"] for r in ref_rows]),
                          HistogramSketch().update([r["x"] for r in win]))
    assert numeric.missing_delta == pytest.approx(oracle["x"]["missing_delta"], rel=1e-12)
    assert oracle["c"]["missing"] > 500 and oracle["x"]["missing"] > 500 and 0.05 < oracle["c"]["new_share"] < 0.2


def test_the_windows_verdict_and_report_entry_count_nulls_as_the_raw_values_do(nulls_case: dict) -> None:
    """Through the pipeline (events -> summary -> judged window -> report entry): counts, missing and new share."""
    oracle = nulls_case["oracle"]
    report = analyze_summary(nulls_case["summary"], nulls_case["reference"], DriftPolicy())
    outcomes = {f.name: f for f in report.features}
    for name in ("x", "c"):
        f, want = outcomes[name], oracle[name]
        entry = feature_entry(f)
        assert (f.count, f.missing, entry["count"], entry["missing"]) == (want["count"], want["missing"]) * 2, name
        assert f.gate_missing_delta == pytest.approx(want["missing_delta"], rel=1e-12), name
        assert f.drifted and f.severity == "major", name  # 4% -> 30% missing
    assert outcomes["c"].gate_new_share == pytest.approx(oracle["c"]["new_share"], rel=1e-12)
    assert feature_entry(outcomes["c"])["gate"]["new_share"] == pytest.approx(oracle["c"]["new_share"], rel=1e-12)


def test_the_new_category_test_counts_only_non_null_values(nulls_case: dict) -> None:
    """The full-window binomial test of new values: k new of the window's non-null values, rate 1 / (n_ref + 1)."""
    ref_rows, win, oracle = nulls_case["ref_rows"], nulls_case["win"], nulls_case["oracle"]["c"]
    tests = category_tests(CategoricalSketch().update([r["c"] for r in ref_rows]),
                           CategoricalSketch().update([r["c"] for r in win]), 0.0)
    new = next(t for t in tests.tests if t.name == "new")
    ref_present = sum(not _is_missing_category(r["c"]) for r in ref_rows)
    assert new.statistic == oracle["new"] and new.effect_size == pytest.approx(oracle["new_share"], rel=1e-12)
    assert new.pvalue == p_approx(stats.binom.sf(oracle["new"] - 1, oracle["present"], 1 / (ref_present + 1)), rel=1e-9)


def _oracle_missing_tau2(flags: np.ndarray, windows: int, guard: float = 0.01) -> float:
    """The reference windows' between-window variance of the missing rate (docs/detection.md, daily cycles),
    recounted from the raw values: each window's rate against the other windows' has the ratio
    delta^2 / (p (1 - p) v), mean 1 by sampling alone (chi-square, 1 dof); its mean over the windows
    beyond the (1 - guard) quantile of that mean (gamma, shape W / 2), times the mean v; else 0."""
    per_window = flags.reshape(windows, -1)
    n, k = per_window.shape[1], per_window.sum(axis=1)
    others_n, others_k = n * (windows - 1), k.sum() - k
    p, v = k.sum() / flags.size, 1 / n + 1 / others_n
    ratios = (k / n - others_k / others_n) ** 2 / (p * (1 - p) * v)
    excess = ratios.mean() - stats.gamma.ppf(1 - guard, windows / 2, scale=2 / windows)
    return max(0.0, excess) * v


def test_the_missing_rate_test_is_a_two_proportion_z_test_on_all_values(nulls_case: dict) -> None:
    """The deep missing-rate p-value: Pearson's chi-square on the 2x2 table is the two-sided z-test of two proportions,
    each rate over every value of its side (nulls, NaN and infinities included in the denominator), its variance
    widened by what the reference windows' own missing rates vary beyond sampling (tau^2; the guard takes a
    reference of independent windows for a varying one 1% of the time: here c's, P = 0.7%)."""
    ref_rows, win = nulls_case["ref_rows"], nulls_case["win"]
    judged = analyze_window(nulls_case["summary"].features, nulls_case["reference"], DriftPolicy())
    verdicts = {v.name: v for v in judged}
    for name, missing in (("x", _is_missing_number), ("c", _is_missing_category)):
        flags = np.array([missing(r[name]) for r in ref_rows])
        k1, n1 = int(flags.sum()), len(ref_rows)
        k2, n2 = sum(missing(r[name]) for r in win), len(win)
        tau2 = _oracle_missing_tau2(flags, 20)
        assert nulls_case["reference"].features[name].dispersion().missing == pytest.approx(tau2, rel=1e-9, abs=1e-15)
        pooled = (k1 + k2) / (n1 + n2)
        v = 1 / n1 + 1 / n2
        z = (k2 / n2 - k1 / n1) / math.sqrt(pooled * (1 - pooled) * v * (1 + tau2 / v))
        assert verdicts[name].deep.missing_pvalue == p_approx(2 * stats.norm.sf(abs(z)), rel=1e-6), name
