"""Slow drift: a CUSUM over per-window standardised scores, within the monitor's false-alarm budget.

A shift too small for one window (0.1 sd at 1,000 events: a window-mean z of about 3, short of
the ~4 one window needs at the budget's level) adds up over windows. Per feature and window
(:func:`window_z`), a score that is N(0, 1) on a drift-free window:

* numeric: the window mean against the reference mean, z = (mean_w - mean_r) / (sd_r sqrt(1/n_w
  + 1/n_r)), watched both ways (a rise and a fall);
* high-cardinality categorical: the whole-window unseen share against the reference windows'
  own (``sketches.deep.unseen_estimate`` and its null), a rise only;
* other features: none (their per-window tests already use every count).

Two one-sided CUSUMs, S_t = min(cap, max(0, S_{t-1} + z_t - k)) upward and the same on -z_t,
with reference value ``CUSUM_K`` = 1 (best for shifts of about 2 standard errors a window) and
``cap`` = h + k: a finished drift (z about 0) takes k off a capped sum, so the feature reads
drifted no longer than the first window without it and its alert can resolve (a cap of 2 h kept
a feature "drifted" for about h windows after the change ended). The cap does not change when a
sum first crosses h, so the false-alarm rate is the same. The feature has drifted
in window t when S_t > h. h comes from the budget share ``alpha`` per side, feature and window
through Siegmund's approximation of the in-control run length, ARL0 = (exp(2 k b) - 2 k b - 1)
/ (2 k^2) with b = h + 1.166, solved for ARL0 = 1 / alpha (:func:`cusum_threshold`).
The numeric score is standardised by what the reference's own windows show, not by the events'
variance alone (``sketches/dispersion.py``): a reference with a daily cycle has window means that
differ by more than sampling explains, per window and, where the cycle is slow, over the whole
horizon a sum adds up (the same sign for hours on end); that between-window variance joins the
score's, per window or over the horizon, whichever is larger, so a cycle present in the reference
never accumulates into an alarm, and a reference of independent windows (its excess within chance:
the guard) leaves the score as it was.

The state (two floats per feature) is what the previous window left: replay keeps it in memory,
the live job reads it back from the previous window's stored result (``window_results``), so a
restart resumes the same sums.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import optimize

from driftwarden.sketches.categorical import CategoricalSketch
from driftwarden.sketches.deep import _unseen_baseline, unseen_estimate
from driftwarden.sketches.dispersion import CUSUM_HORIZON
from driftwarden.sketches.feature import FeatureSketch, is_numeric
from driftwarden.sketches.reference import FeatureReference, baseline_unseen_share, unseen_null
from driftwarden.sketches.reservoir import ReservoirSample

#: Reference value k of the CUSUM (in standard errors of one window's score).
CUSUM_K = 1.0
#: Siegmund's correction to the threshold for a normal CUSUM.
_SIEGMUND = 1.166


@dataclass(frozen=True)
class CusumState:
    """Upward and downward CUSUM sums of one feature after a window."""

    up: float = 0.0
    down: float = 0.0

    def step(self, z: float, h: float, k: float = CUSUM_K) -> CusumState:
        """The sums after one more window's score ``z`` (capped at h + k)."""
        return CusumState(min(h + k, max(0.0, self.up + z - k)), min(h + k, max(0.0, self.down - z - k)))

    def alarm(self, h: float) -> bool:
        """True when either sum exceeds ``h``."""
        return self.up > h or self.down > h


def cusum_threshold(alpha: float, k: float = CUSUM_K) -> float:
    """CUSUM threshold h whose in-control run length is 1 / ``alpha`` windows (Siegmund).

    >>> round(cusum_threshold(1 / 40_000), 2)
    4.48
    """
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must lie strictly between 0 and 1, got {alpha}")
    target = 1.0 / alpha

    def arl(h: float) -> float:
        b = 2 * k * (h + _SIEGMUND)
        return (math.expm1(b) - b) / (2 * k * k) - target

    return float(optimize.brentq(arl, 0.0, 200.0))


# CUSUM_HORIZON (``sketches.dispersion``): windows a sum adds up before it crosses (about h / k + 1 at
# the budget's levels). The reference's own estimate error is the same in every one of them, so it
# counts this many times in a score's variance: without it, 200 drift-free features at 20,000 events
# per window against a 120,000-event reference drifted in 61 of 15,000 cells (0.41%;
# bench/bench_detection.py --windows 1500).


def window_z(ref: FeatureReference, sketch: FeatureSketch, sample: ReservoirSample,
             bins: int = 10) -> tuple[float | None, bool]:
    """The window's standardised score and whether both directions count; (None, _) when none applies.

    The reference's error is shared by every window of a sum: its variance counts
    :data:`CUSUM_HORIZON` times, not once as in a single window's test. A numeric score's variance
    also holds the reference windows' own between-window variance of the mean
    (:meth:`FeatureReference.dispersion`): per window (its share of the reference's error counted
    :data:`CUSUM_HORIZON` times too) or over the horizon, whichever is larger.
    """
    if is_numeric(ref.sketch) and is_numeric(sketch):
        n_w, n_r, sd = sketch.n, ref.sketch.n, ref.sketch.std
        if n_w < 2 or n_r < 2 or not sd > 0 or not math.isfinite(sd):
            return None, True
        spread = ref.dispersion(bins)
        windows = max(len(ref.window_stats), 1)
        between = max(spread.mean * (1.0 + CUSUM_HORIZON / windows), spread.horizon)
        z = (sketch.mean - ref.sketch.mean) / (sd * math.sqrt(1.0 / n_w + CUSUM_HORIZON / n_r + between))
        return (float(z), True) if math.isfinite(z) else (None, True)
    if ref.profile is not None and isinstance(sketch, CategoricalSketch):
        estimate = unseen_estimate(ref.profile, sketch, sample)
        if not estimate.n_eff > 0 or not math.isfinite(estimate.share):
            return None, False
        m, phi, var_m = _unseen_baseline(unseen_null(ref), baseline_unseen_share(ref))
        sd = math.sqrt(m * (1 - m) * phi / estimate.n_eff + CUSUM_HORIZON * var_m)
        return float((estimate.share - m) / sd), False
    return None, False


def next_state(state: CusumState | None, z: float | None, two_sided: bool, h: float) -> CusumState | None:
    """The feature's CUSUM after this window: unchanged without a score; the downward sum only if two-sided."""
    if z is None:
        return state
    after = (state or CusumState()).step(float(np.clip(z, -50.0, 50.0)), h)
    return after if two_sided else CusumState(after.up, 0.0)
