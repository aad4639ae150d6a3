"""Gate threshold calibration from a reference period cut into windows.

1. Null scores (leave-one-out): each reference window's sketch is scored against the merge of
   all the *other* windows, giving one row of gate scores per window (``SCORE_NAMES`` columns).
2. Rate split: an alarm fires when ANY applicable score exceeds its threshold, so the configured
   per-window false-alarm rate is split evenly (Bonferroni) over the scores that apply to the
   feature kind (numeric ks/psi/emd/missing_delta, categorical chi2/js/new_share/missing_delta)
   and vary over the reference windows (chi2 and JS count once: to second order JS is
   chi2 / (8 ln 2), so they fire together); a score that never varies (no nulls ever, no new
   categories ever) takes its floor and spends none of the rate. Bonferroni over correlated
   scores keeps the real rate at or somewhat below the target.
3. Thresholds: rate/m (0.25% for 1% and four scores) is beyond what a few dozen windows show
   empirically, so each score is modelled as ``scale * Z`` with Z of the score's known null
   shape (``null_shape``) and only the scale is estimated, robustly, from the median null score
   (the root mean square for |missing_delta|, whose values are too coarse for a median);
   the threshold is ``scale * Z.ppf(1 - rate/m)``. Shapes: KS -> Kolmogorov limit law; PSI,
   chi2 per value and JS -> chi-square with (bins or categories - 1) degrees of freedom;
   |missing_delta| -> half-normal; normalised EMD -> gamma(5) (measured on normal, gamma and
   uniform data: gamma(5) is at or above their 99.5% quantile); new-category share -> gamma
   fitted by moments (no stable shape).
4. Window size (:func:`thresholds_for_count`): a live window of another size than the reference's
   windows gets thresholds rescaled by its own sampling noise: the null scale of a two-sample
   score goes with v = 1/n_window + 1/n_reference (KS, EMD and the missing-rate difference with
   sqrt(v), PSI, chi2 per value and JS with v; the new-category share is not rescaled), so each
   threshold is multiplied by (v_live / v_calibration) to that power. Calibrate on 6,000-event
   windows, judge 1,000 or 20,000: ``bench/bench_detection.py``.
5. Floors keep a degenerate null (a constant feature, a feature that is never missing) from
   setting a zero threshold: ``THRESHOLD_FLOORS``.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
from scipy import stats

from driftwarden.sketches.dispersion import NO_DISPERSION, Dispersion
from driftwarden.sketches.feature import FeatureSketch, copy_sketch, is_numeric
from driftwarden.sketches.profile import CategoricalProfile
from driftwarden.sketches.histogram import merges_of_others
from driftwarden.sketches.gate import SCORE_NAMES, GateCell, GateThresholds, bin_edges, gate_scores_many, score_names

#: Scores that are the same test to second order share one slice of the rate: JS ~ chi2 / (8 ln 2).
SCORE_FAMILY = {"js": "chi2"}
#: Smallest calibrated threshold per score.
THRESHOLD_FLOORS = {"ks": 0.005, "psi": 0.001, "emd": 0.005, "chi2": 0.001, "js": 0.0005,
                    "new_share": 0.001, "missing_delta": 0.001}


def leave_one_out_scores(windows: list[FeatureSketch], bins: int = 10,
                         profiles: list[CategoricalProfile] | None = None,
                         groups: list[int] | None = None) -> np.ndarray:
    """Score each window against the merge of the others: a (windows, len(SCORE_NAMES)) matrix.

    Histograms' others are their total less each window (``sketches.histogram.merges_of_others``); other
    sketches' come from prefix and suffix merges, so it costs O(windows) merges rather than O(windows^2).
    ``profiles`` (one per window, from ``sketches.profile.window_profiles``) are left out the same way.
    ``groups`` (one per window): each window against the windows of the other groups (:func:`leave_group_out`).
    Each window's others are scored once: the gate reads them together (``once`` of :func:`gate_scores_many`).
    """
    others = (merges_of_others(windows) if groups is None else None) or leave_group_out(windows, _merged, groups)
    other_profiles = leave_group_out(profiles, merged_profile_or_none, groups) if profiles else [None] * len(windows)
    cells = [GateCell(o, w, p) for o, w, p in zip(others, windows, other_profiles)]
    rows = [scores.as_array() for scores in gate_scores_many(cells, bins, once=True)]
    return np.array(rows).reshape(len(windows), len(SCORE_NAMES))


def leave_one_out(items: list, merge) -> list:
    """For each position, the merge of every other item (prefix and suffix merges, each let go once used: at
    most two merged items a position are held at once, not three)."""
    prefix, suffix = _prefix_suffix(items, merge)
    others = []
    for i in range(len(items)):
        others.append(merge(prefix[i], suffix[i]))
        prefix[i] = suffix[i] = None
    return others


def leave_group_out(items: list, merge, groups: list[int] | None = None) -> list:
    """For each position, the merge of every item of another group (every other item when ``groups`` is None).

    >>> leave_group_out([{1}, {2}, {3}, {4}], lambda a, b: (a or set()) | (b or set()), [0, 1, 0, 1])
    [{2, 4}, {1, 3}, {2, 4}, {1, 3}]
    """
    if groups is None:
        return leave_one_out(items, merge)
    if len(groups) != len(items) or len(set(groups)) < 2:
        raise ValueError(f"leave one group out needs one group per window and two groups at least, "
                         f"got {len(set(groups))} groups for {len(items)} windows")
    order = list(dict.fromkeys(groups))
    merged: dict = {}
    for item, group in zip(items, groups):
        merged[group] = merge(merged.get(group), item)
    others = dict(zip(order, leave_one_out([merged[g] for g in order], merge)))
    return [others[g] for g in groups]


def leave_two_out(items: list, merge) -> list:
    """For each position i but the last, the merge of every item except i and i + 1.

    >>> leave_two_out([{1}, {2}, {3}, {4}], lambda a, b: (a or set()) | (b or set()))
    [{3, 4}, {1, 4}, {1, 2}]
    """
    prefix, suffix = _prefix_suffix(items, merge)
    return [merge(prefix[i], suffix[i + 1]) for i in range(len(items) - 1)]


def _prefix_suffix(items: list, merge) -> tuple[list, list]:
    """prefix[i]: merge of items[:i]; suffix[i]: merge of items[i + 1:] (None when empty)."""
    count = len(items)
    prefix, suffix = [None] * count, [None] * count
    for i in range(1, count):
        prefix[i] = merge(prefix[i - 1], items[i - 1])
        j = count - 1 - i
        suffix[j] = merge(suffix[j + 1], items[j + 1])
    return prefix, suffix


def _merged(base: FeatureSketch | None, extra: FeatureSketch | None) -> FeatureSketch | None:
    if base is None:
        return None if extra is None else copy_sketch(extra)
    return copy_sketch(base) if extra is None else copy_sketch(base).merge(extra)


def merged_profile_or_none(base: CategoricalProfile | None,
                           extra: CategoricalProfile | None) -> CategoricalProfile | None:
    """A new profile merging ``base`` and ``extra`` (either may be None; None if both are)."""
    if base is None:
        return None if extra is None else extra.copy()
    return base.copy() if extra is None else base.copy().merge(extra)


def calibrate_thresholds(null_scores: np.ndarray, kind: str, false_alarm_rate: float,
                         dof: int | None = None) -> GateThresholds:
    """Thresholds meeting ``false_alarm_rate`` per window, split Bonferroni-style over the scores.

    ``dof``: degrees of freedom of the chi-square-like scores; pass ``score_dof(merged_sketch, bins)``.
    When None it is estimated per score from the null scores by moments (2 mean^2 / var, 1..100).
    """
    columns = {name: _column(null_scores, name) for name in score_names(kind)}
    varying = {SCORE_FAMILY.get(name, name) for name, col in columns.items() if col.size > 1 and np.ptp(col) > 0}
    per_score = false_alarm_rate / max(len(varying), 1)
    values = {name: np.inf for name in SCORE_NAMES}
    for name, column in columns.items():
        values[name] = score_threshold(column, name, per_score, dof if dof is not None else _moment_dof(column))
    return GateThresholds(**values, source="calibrated")


#: Power of the variance ratio each score's threshold follows across window sizes (see step 4).
COUNT_SCALING = {"ks": 0.5, "emd": 0.5, "missing_delta": 0.5, "psi": 1.0, "chi2": 1.0, "js": 1.0, "new_share": 0.0}


def thresholds_for_count(thresholds: GateThresholds, windows: int, reference_count: int,
                         count: int, dispersion: Dispersion = NO_DISPERSION) -> GateThresholds:
    """Calibrated thresholds rescaled from the reference's windows (``windows`` of them) to a window of ``count``.

    The variance a score's null scale follows is v = 1 / count + 1 / reference_count, plus the
    reference windows' between-window variance of that score (``dispersion``, ``sketches/dispersion.py``),
    which does not shrink with the window's size: a cycle keeps a larger window's thresholds wide.
    One row of :func:`thresholds_for_counts`.

    >>> t = GateThresholds(ks=0.02, source="calibrated")
    >>> round(thresholds_for_count(t, 10, 60_000, 1_500).ks, 4)  # windows of 6,000 -> 1,500: about twice
    0.0384
    >>> round(thresholds_for_count(t, 10, 60_000, 1_500, Dispersion(ks=1e-3)).ks, 4)  # a cycle's share stays
    0.0238
    """
    if not _scaled(thresholds, windows, reference_count, count):
        return thresholds
    [row] = thresholds_for_counts(thresholds.as_array()[np.newaxis], dispersion.as_array()[np.newaxis],
                                  np.array([windows]), np.array([reference_count]), np.array([count]))
    return GateThresholds(**dict(zip(SCORE_NAMES, row.tolist())), source=thresholds.source)


def _scaled(thresholds: GateThresholds, windows: int, reference_count: int, count: int) -> bool:
    """Whether :func:`thresholds_for_count` rescales: calibrated thresholds and :func:`_scalable` counts."""
    return thresholds.source == "calibrated" and bool(_scalable(windows, reference_count, count))


def _scalable(windows: Any, reference_counts: Any, counts: Any) -> Any:
    """Where thresholds can be rescaled (numbers or arrays, element-wise): 2+ reference windows, more reference
    events than windows, a window count to scale to."""
    return (windows >= 2) & (reference_counts > windows) & (counts > 0)


def thresholds_for_counts(thresholds: np.ndarray, dispersions: np.ndarray, windows: np.ndarray,
                          reference_counts: np.ndarray, counts: np.ndarray,
                          calibrated: np.ndarray | None = None) -> np.ndarray:
    """:func:`thresholds_for_count` of many cells at once, bit for bit: one row per cell, ``SCORE_NAMES`` columns.

    ``thresholds`` and ``dispersions`` (``Dispersion.as_array``): each cell's, a row each; ``windows``,
    ``reference_counts``, ``counts``, ``calibrated`` (the thresholds' source is "calibrated"; None: all are):
    one value per cell. Rows that :func:`thresholds_for_count` leaves unscaled (not calibrated, fewer than 2
    windows, ...) come back as given. The powers are Python's (``**``
    on floats), not numpy's: numpy's differ from them in the last bit (a threshold must not move with the path).
    """
    rows = thresholds.shape[0]
    if rows == 0:
        return thresholds.copy()
    windows, reference_counts, counts = (np.asarray(a, dtype=np.float64) for a in (windows, reference_counts, counts))
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        calibration = reference_counts / windows
        live = 1.0 / counts + 1.0 / reference_counts
        at_calibration = 1.0 / calibration + 1.0 / (reference_counts - calibration)
        ratio = (live[:, np.newaxis] + dispersions) / (at_calibration[:, np.newaxis] + dispersions)
        scaled = thresholds * _python_powers(ratio, _COUNT_POWERS)
    scaled = np.where(_FLOORS > scaled, _FLOORS, scaled)  # Python's max(scaled, floor): NaN stays NaN
    usable = _scalable(windows, reference_counts, counts)
    if calibrated is not None:
        usable &= np.asarray(calibrated, dtype=bool)
    return np.where(usable[:, np.newaxis], scaled, thresholds)


#: :data:`COUNT_SCALING`'s powers and :data:`THRESHOLD_FLOORS` in ``SCORE_NAMES`` order.
_COUNT_POWERS = tuple(COUNT_SCALING[name] for name in SCORE_NAMES)
_FLOORS = np.array([THRESHOLD_FLOORS[name] for name in SCORE_NAMES])


def _python_powers(base: np.ndarray, powers: tuple[float, ...]) -> np.ndarray:
    """``base ** power`` column by column, as Python computes it on floats (1.0 for power 0, the base for 1)."""
    out = np.empty_like(base)
    for column, power in enumerate(powers):
        if power == 0.0:
            out[:, column] = 1.0
        elif power == 1.0:
            out[:, column] = base[:, column]
        else:
            out[:, column] = [float(value ** power) for value in base[:, column].tolist()]
    return out


def score_dof(sketch: FeatureSketch, bins: int = 10, profile: CategoricalProfile | None = None) -> int:
    """Degrees of freedom of the chi-square-like scores: bins - 1, categories - 1, or head values (+ other - 1)."""
    if is_numeric(sketch):
        return max(len(bin_edges(sketch, bins)), 1)
    if profile is not None:
        return max(len(profile.head), 1)
    return max(len(sketch.frequencies()) - 1, 1)


def _moment_dof(column: np.ndarray) -> int:
    if column.size < 2 or not np.var(column) > 0:
        return 1
    return int(np.clip(round(2 * np.mean(column) ** 2 / np.var(column, ddof=1)), 1, 100))


def _column(null_scores: np.ndarray, name: str) -> np.ndarray:
    column = np.abs(null_scores[:, SCORE_NAMES.index(name)])
    return column[np.isfinite(column)]


def null_shape(name: str, dof: int = 9):
    """The standardised null law of a gate score (a frozen scipy distribution), or None."""
    return _null_shape(name, max(int(dof), 1)) if name in _SHAPES else None


#: Each score's null law (by its degrees of freedom where it has them).
_SHAPES = {"ks": lambda dof: stats.kstwobign(), "emd": lambda dof: stats.gamma(5.0),
           "missing_delta": lambda dof: stats.halfnorm(), "psi": stats.chi2, "chi2": stats.chi2, "js": stats.chi2}


@functools.lru_cache(maxsize=512)
def _null_shape(name: str, dof: int):
    """:func:`null_shape`, frozen once per (score, dof): freezing a scipy law costs milliseconds, and a
    seasonal reference is calibrated for every window (``pipeline/seasons.py``)."""
    return _SHAPES[name](dof)


def score_threshold(scores: np.ndarray, name: str, tail: float, dof: int = 9) -> float:
    """The (1 - tail) quantile of ``scale * Z`` fitted to the null ``scores``, floored."""
    floor = THRESHOLD_FLOORS[name]
    if scores.size == 0 or not np.max(scores) > 0:
        return floor
    shape = null_shape(name, dof)
    if shape is None:
        return max(_gamma_moments_quantile(scores, tail), floor)
    median = float(np.median(scores))
    if name == "missing_delta":  # counts are coarse: the RMS is a steadier half-normal scale than the median
        scale = float(np.sqrt(np.mean(scores ** 2)))
    elif median > 0:
        scale = median / shape.median()
    else:
        scale = float(np.mean(scores)) / shape.mean()
    return max(scale * float(shape.ppf(1.0 - tail)), floor)


def _gamma_moments_quantile(scores: np.ndarray, tail: float) -> float:
    mean, var = float(np.mean(scores)), float(np.var(scores, ddof=1)) if scores.size > 1 else 0.0
    if var <= 0:
        return float(np.max(scores))
    return float(stats.gamma.ppf(1.0 - tail, mean * mean / var, scale=var / mean))
