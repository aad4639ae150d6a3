"""Gate threshold calibration from a reference period cut into windows.

1. Null scores (leave-one-out): each reference window's sketch is scored against the merge of
   all the *other* windows, giving one row of gate scores per window (``SCORE_NAMES`` columns).
2. Thresholds: an alarm fires when ANY applicable score exceeds its threshold, so the configured
   per-window false-alarm rate is split evenly (Bonferroni) over the m scores that apply to the
   feature kind (numeric ks/psi/emd/missing_delta, categorical chi2/js/new_share/missing_delta)
   and vary over the reference windows; a score that never varies (no nulls ever, no new
   categories ever) takes its floor and spends none of the rate. Each threshold is the (1 - rate/m) quantile of a gamma law fitted by moments
   to the null scores raised to a power that makes the tail roughly exponential: squared for
   ks, emd and |missing_delta| (Gaussian-like tails), as is for psi, chi2, js and new_share
   (chi-square-like). A fit is needed because rate/m (0.25%) is beyond what a few dozen windows
   can show empirically. Bonferroni over correlated scores makes the real rate at most the target.
3. Floors keep a degenerate null (e.g. a feature that never has nulls, a constant feature) from
   setting a zero threshold: ``THRESHOLD_FLOORS``.
"""

from __future__ import annotations

import numpy as np
from scipy import stats

from sketches.feature import FeatureSketch, copy_sketch
from sketches.gate import SCORE_NAMES, GateThresholds, gate_scores, score_names

#: Power applied to each score before the gamma fit (see module docstring).
SCORE_POWERS = {"ks": 2.0, "emd": 2.0, "missing_delta": 2.0, "psi": 1.0, "chi2": 1.0, "js": 1.0, "new_share": 1.0}
#: Smallest calibrated threshold per score.
THRESHOLD_FLOORS = {"ks": 0.005, "psi": 0.001, "emd": 0.005, "chi2": 0.001, "js": 0.0005,
                    "new_share": 0.001, "missing_delta": 0.001}


def leave_one_out_scores(windows: list[FeatureSketch], bins: int = 10) -> np.ndarray:
    """Score each window against the merge of the others: a (windows, len(SCORE_NAMES)) matrix.

    Uses prefix and suffix merges, so it costs O(windows) merges rather than O(windows^2).
    """
    count = len(windows)
    prefix, suffix = [None] * count, [None] * count
    for i in range(1, count):
        prefix[i] = _merged(prefix[i - 1], windows[i - 1])
        j = count - 1 - i
        suffix[j] = _merged(suffix[j + 1], windows[j + 1])
    rows = []
    for i in range(count):
        others = _merged(prefix[i], suffix[i]) if prefix[i] is not None else suffix[i]
        rows.append(gate_scores(others, windows[i], bins).as_array())
    return np.array(rows).reshape(count, len(SCORE_NAMES))


def _merged(base: FeatureSketch | None, extra: FeatureSketch | None) -> FeatureSketch | None:
    if base is None:
        return None if extra is None else copy_sketch(extra)
    return copy_sketch(base) if extra is None else copy_sketch(base).merge(extra)


def calibrate_thresholds(null_scores: np.ndarray, kind: str, false_alarm_rate: float) -> GateThresholds:
    """Thresholds meeting ``false_alarm_rate`` per window, split Bonferroni-style over the scores."""
    columns = {name: _column(null_scores, name) for name in score_names(kind)}
    varying = [name for name, col in columns.items() if col.size > 1 and np.ptp(col) > 0]
    per_score = false_alarm_rate / max(len(varying), 1)
    values = {name: np.inf for name in SCORE_NAMES}
    for name, column in columns.items():
        values[name] = score_threshold(column, name, per_score)
    return GateThresholds(**values, source="calibrated")


def _column(null_scores: np.ndarray, name: str) -> np.ndarray:
    column = np.abs(null_scores[:, SCORE_NAMES.index(name)])
    return column[np.isfinite(column)]


def score_threshold(scores: np.ndarray, name: str, tail: float) -> float:
    """The (1 - tail) quantile of a gamma fitted to ``scores ** SCORE_POWERS[name]``, floored."""
    floor = THRESHOLD_FLOORS[name]
    if scores.size == 0:
        return floor
    power = SCORE_POWERS[name]
    y = scores ** power
    mean, var = float(np.mean(y)), float(np.var(y, ddof=1)) if y.size > 1 else 0.0
    if mean <= 0 or var <= 0:
        return max(float(np.max(scores)), floor)
    quantile = stats.gamma.ppf(1.0 - tail, mean * mean / var, scale=var / mean)
    return max(float(quantile) ** (1.0 / power), floor)
