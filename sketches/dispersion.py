"""Over-dispersion: how much more a reference's windows differ from one another than sampling explains.

Every test of a window against a reference takes as its null that the window's events and the
reference's are independent draws of one law: a two-sample statistic then has a null scale set by
v = 1 / n_window + 1 / n_reference alone. Real traffic follows the clock (hours, weekdays), and the
windows of a reference that holds a cycle differ from one another by more than that, and by the
same amount whatever their size: a between-window variance tau^2 that adds to v. This module
measures tau^2 on the reference's own windows, each against the others (as the gate's calibration
scores them: ``sketches/calibration.py``), and every rule adds it:

* the gate's thresholds, rescaled to a live window's size (``calibration.thresholds_for_count``):
  v_live + tau^2 against v_calibration + tau^2 instead of v_live against v_calibration;
* the deep tests (``analysis``): a test's statistic is divided by (v + tau^2) / v (chi-square
  tests), or its effective size by it (KS);
* the slow-drift rule (``sequential``): the window mean's score is standardised by its
  between-window variance, per window and over the CUSUM's horizon (:data:`CUSUM_HORIZON`
  windows, where a slow cycle keeps one sign: there it counts as often as the sum adds it up), so
  a cycle present in the reference never accumulates into an alarm.

Per family, r_i is each reference window's score over what sampling alone gives it (mean 1 on
independent windows): KS: D^2 n_e / E[K^2] (Kolmogorov's K, E[K^2] = pi^2 / 12); PSI and
categorical chi-square per value: score n_e / dof; missing rate: delta^2 / (p (1 - p) v); window
mean: z^2, z = (mean_i - mean of the others) / (sd sqrt(v_i)); over the horizon: the squared sum of
H consecutive z over H (1 - H / W). V = mean r_i; tau^2 = (V_guarded - 1) * mean v_i.

The guard (:data:`DISPERSION_GUARD`): a reference of independent windows shows V above 1 half the
time by chance alone, and taking that for a cycle would cost a stationary feature power it has
today. V_guarded = 1 + max(0, V - q), q the (1 - guard) quantile of V on independent windows (a
gamma law with V's mean 1 and its coefficient of variation c / sqrt(W): c = sqrt(2 / dof) for the
chi-square-like ratios, 0.632 for K^2; the horizon's W - H + 1 overlapping sums are counted as the
W / H independent ones they hold at least):
a stationary feature is taken as such with probability 1 - guard, and a real cycle loses only the
q - 1 its estimate is docked. A horizon longer than half the reference is not measured: the
per-window variance is then assumed to persist over it (H tau^2, the safe side).

A reference without window statistics (built before them) has no dispersion: every rule is then
today's independent-events rule.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np
from scipy import stats

from driftwarden.sketches.feature import FeatureSketch, is_numeric
from driftwarden.sketches.gate import SCORE_NAMES

#: Columns of a reference's ``window_stats``: one row per reference window, in the order given
#: (time order): all values seen, values with a usable number / category, the mean of the numeric
#: ones (NaN otherwise), and the window's leave-out group (each window is scored against the windows
#: of other groups; by default every window is a group of its own).
WINDOW_STAT_NAMES = ("count", "n", "mean", "group")
#: Windows a CUSUM sum adds up before it crosses (about h / k + 1 at the budget's levels); see ``sequential``.
CUSUM_HORIZON = 8
#: Chance that a reference of independent windows is taken for an over-dispersed one (per family).
DISPERSION_GUARD = 0.01
#: Coefficient of variation of K^2 for Kolmogorov's limit law: sqrt(E[K^4] - E[K^2]^2) / E[K^2],
#: E[K^2] = pi^2 / 12, E[K^4] = 7 pi^4 / 720.
_KS_CV = math.sqrt(7 * math.pi ** 4 / 720 - (math.pi ** 2 / 12) ** 2) / (math.pi ** 2 / 12)
_KS_MEAN_SQUARE = math.pi ** 2 / 12
#: Fewest windows from which a dispersion is estimated.
MIN_WINDOWS = 3


@dataclass(frozen=True)
class Dispersion:
    """Between-window variances of one feature's reference (0.0: none beyond sampling).

    ``ks`` (KS and EMD), ``psi`` (PSI and the numeric chi-square bins), ``chi2`` (categorical
    chi-square and JS) and ``missing`` are in units of v (1 / events); ``mean`` and ``horizon`` in
    units of the reference's variance per event: the window mean's excess variance, per window and
    per window over the CUSUM horizon.
    """

    ks: float = 0.0
    psi: float = 0.0
    chi2: float = 0.0
    missing: float = 0.0
    mean: float = 0.0
    horizon: float = 0.0

    def score(self, name: str) -> float:
        """tau^2 of a gate score (``SCORE_NAMES``); 0.0 for the new-category share."""
        family = {"ks": self.ks, "emd": self.ks, "psi": self.psi, "chi2": self.chi2, "js": self.chi2,
                  "missing_delta": self.missing}
        return family.get(name, 0.0)

    def as_array(self) -> np.ndarray:
        """:meth:`score` of each gate score, in ``SCORE_NAMES`` order."""
        return np.array([self.score(name) for name in SCORE_NAMES], dtype=np.float64)

    @property
    def distribution(self) -> float:
        """tau^2 of a numeric feature's distribution tests (KS and binned chi-square): the larger of KS's and PSI's."""
        return max(self.ks, self.psi)

    def inflation(self, tau2: float, v: float) -> float:
        """(v + tau^2) / v: how much wider a test's null is at sampling variance ``v``; 1.0 without dispersion.

        >>> Dispersion().inflation(0.0, 1e-3), Dispersion(ks=1e-3).inflation(1e-3, 1e-3)
        (1.0, 2.0)
        """
        return 1.0 + tau2 / v if tau2 > 0 and v > 0 and math.isfinite(v) else 1.0


NO_DISPERSION = Dispersion()


def window_stats(sketches: Sequence[FeatureSketch], groups: Sequence[int] | None = None) -> np.ndarray:
    """The ``WINDOW_STAT_NAMES`` rows of a reference's windows (``groups``: each window's leave-out group)."""
    rows = [(s.count, s.n, float(s.mean) if is_numeric(s) and s.n > 0 else np.nan,
             i if groups is None else groups[i]) for i, s in enumerate(sketches)]
    return np.array(rows, dtype=np.float64).reshape(len(rows), len(WINDOW_STAT_NAMES))


def estimate_dispersion(null_scores: np.ndarray, stats_rows: np.ndarray, kind: str, dof: int, sd: float,
                        horizon: int = CUSUM_HORIZON, guard: float = DISPERSION_GUARD) -> Dispersion:
    """The :class:`Dispersion` of a reference from its windows' leave-out gate scores and ``window_stats``.

    ``dof``: degrees of freedom of the PSI / chi-square scores (``calibration.score_dof``); ``sd``: the
    reference's standard deviation (numeric).
    """
    if stats_rows.ndim != 2 or stats_rows.shape[0] < MIN_WINDOWS or stats_rows.shape[0] != null_scores.shape[0]:
        return NO_DISPERSION
    count, n, groups = stats_rows[:, 0], stats_rows[:, 1], stats_rows[:, 3]
    v_n = _pair_variance(n, groups)
    out = {"missing": _missing(null_scores[:, SCORE_NAMES.index("missing_delta")], count, n, groups, guard)}
    if kind == "numeric":
        out["ks"] = _family(null_scores[:, SCORE_NAMES.index("ks")] ** 2 / _KS_MEAN_SQUARE, v_n, _KS_CV, guard)
        out["psi"] = _family(null_scores[:, SCORE_NAMES.index("psi")] / max(dof, 1), v_n,
                             math.sqrt(2 / max(dof, 1)), guard)
        out["mean"], out["horizon"] = _mean(stats_rows[:, 2], n, groups, v_n, sd, horizon, guard)
    else:
        out["chi2"] = _family(null_scores[:, SCORE_NAMES.index("chi2")] / max(dof, 1), v_n,
                              math.sqrt(2 / max(dof, 1)), guard)
    return Dispersion(**out)


def guarded_excess(ratios: np.ndarray, cv: float, guard: float = DISPERSION_GUARD,
                   independent: float | None = None) -> float:
    """max(0, mean(ratios) - q): what of the mean ratio chance cannot explain (q: its (1 - guard) quantile
    when each ratio has mean 1 and coefficient of variation ``cv``, and ``independent`` of them, by default
    all, are independent); 0.0 for fewer than MIN_WINDOWS finite ratios.

    >>> guarded_excess(np.ones(48), 2 ** 0.5), round(guarded_excess(np.full(48, 5.0), 2 ** 0.5), 2)
    (0.0, 3.46)
    """
    ratios = ratios[np.isfinite(ratios)]
    if ratios.size < MIN_WINDOWS:
        return 0.0
    shape = (ratios.size if independent is None else independent) / (cv * cv)
    return max(0.0, float(np.mean(ratios)) - float(stats.gamma.ppf(1.0 - guard, shape, scale=1.0 / shape)))


def _pair_variance(n: np.ndarray, groups: np.ndarray) -> np.ndarray:
    """Each window's v = 1 / n_i + 1 / (values of the windows outside its group); NaN where either is 0."""
    others = n.sum() - _group_totals(n, groups)
    with np.errstate(divide="ignore", invalid="ignore"):
        v = 1.0 / n + 1.0 / others
    return np.where((n > 0) & (others > 0), v, np.nan)


def _group_totals(values: np.ndarray, groups: np.ndarray) -> np.ndarray:
    """Each window's group's total of ``values``."""
    _, index = np.unique(groups, return_inverse=True)
    return np.bincount(index, weights=values)[index]


def _family(score_over_unit: np.ndarray, v: np.ndarray, cv: float, guard: float) -> float:
    """tau^2 of one gate score family: ``score_over_unit`` / v is each window's ratio r_i."""
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = np.abs(score_over_unit) / v
    excess = guarded_excess(ratios, cv, guard)
    return excess * float(np.nanmean(v)) if excess > 0 else 0.0


def _missing(delta: np.ndarray, count: np.ndarray, n: np.ndarray, groups: np.ndarray, guard: float) -> float:
    """tau^2 of the missing-rate difference, in units of v (of all values seen)."""
    total = count.sum()
    rate = float((count - n).sum() / total) if total > 0 else 0.0
    if not 0.0 < rate < 1.0:
        return 0.0
    return _family(delta ** 2 / (rate * (1 - rate)), _pair_variance(count, groups), math.sqrt(2), guard)


def _mean(means: np.ndarray, n: np.ndarray, groups: np.ndarray, v: np.ndarray, sd: float, horizon: int,
          guard: float) -> tuple[float, float]:
    """tau^2 of the window mean (units of sd^2), per window and per window over ``horizon`` windows."""
    ok = np.isfinite(means) & (n >= 2) & np.isfinite(v)
    if not sd > 0 or not math.isfinite(sd) or ok.sum() < MIN_WINDOWS:
        return 0.0, 0.0
    means, n, groups, v = means[ok], n[ok], groups[ok], v[ok]
    weighted = means * n
    others = (weighted.sum() - _group_totals(weighted, groups)) / (n.sum() - _group_totals(n, groups))
    z = (means - others) / (sd * np.sqrt(v))
    per_window = guarded_excess(z ** 2, math.sqrt(2), guard) * float(np.mean(v))
    windows = z.size
    if windows < 2 * horizon:  # too few windows to see a horizon's sums: assume the excess persists over it
        return per_window, horizon * per_window
    sums = np.convolve(z, np.ones(horizon), mode="valid")
    ratios = sums ** 2 / (horizon * (1.0 - horizon / windows))
    # overlapping sums: counted as the W / H independent ones they hold (they vary like about 3 W / 2 H)
    excess = guarded_excess(ratios, math.sqrt(2.0), guard, windows / horizon)
    return per_window, max(excess * float(np.mean(v)), per_window)
