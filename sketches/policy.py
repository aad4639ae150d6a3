"""DriftPolicy (every knob with its documented default) and the verdict rule.

Verdict rule: a deep-tested feature has drifted when its BH-adjusted p-value is <= ``alpha``.
Its severity then comes from the effect sizes of the deep tests: "major" if any effect reaches
its ``*_major`` cut-off, "moderate" if any reaches its ``*_minor`` cut-off, else "minor"
(significant but small). PSI cut-offs follow the industry convention (0.1 / 0.25); KS and EMD
(in reference-spread units) have cut-offs of the same spirit. Not drifted -> severity "none".
"""

from __future__ import annotations

from dataclasses import dataclass

from driftwarden.sketches.deep import DeepResult

SEVERITIES = ("none", "minor", "moderate", "major")
WEEK_MS = 7 * 24 * 3600 * 1000
#: The derived per-window level never exceeds this (a monitor with day-long windows).
MAX_ALPHA = 0.05


def budget_alpha(false_alerts_per_week: float, window_ms: int) -> float:
    """Per-window Benjamini-Hochberg level that spends ``false_alerts_per_week`` at one window per ``window_ms``.

    Under the complete null, BH at level q rejects anything in a window with probability <= q
    (independent or positively dependent tests), so q * windows per week false alerts at most.

    >>> budget_alpha(1.0, 5 * 60_000)  # 2,016 five-minute windows a week
    0.000496031746031746
    """
    if false_alerts_per_week <= 0 or window_ms <= 0:
        raise ValueError(f"false_alerts_per_week and window_ms must be > 0, got {false_alerts_per_week}, {window_ms}")
    return min(MAX_ALPHA, false_alerts_per_week * window_ms / WEEK_MS)


@dataclass(frozen=True)
class DriftPolicy:
    """Settings of the gate, the deep tests and the verdict, with documented defaults.

    ``min_count``: a window with fewer values than this (nulls included) never alarms; distribution
    scores need at least this many finite/non-null values (the missing-rate gate still applies).
    ``false_alarm_rate``: target probability, per feature and window, that the calibrated gate fires
    on a window without drift. ``min_windows``: fewer reference windows -> fixed thresholds.
    ``head_size`` and ``membership_fpr``: the head values the gate compares and the Bloom filter's
    false-positive rate of a high-cardinality categorical reference (``sketches/profile.py``).
    ``sequential_alpha``: per-window false-alarm probability spent by the slow-drift CUSUM across all
    features and both directions (``sketches/sequential.py``); 0 turns it off (the default here;
    ``pipeline.judging.drift_policy`` gives it half the monitor's budget).
    ``segment_group_min_windows``: a segment's multivariate group is tested only when its reference
    group was calibrated on at least this many windows (its null is fitted on one score per window; a
    segment's smaller windows fitted on fewer gave 100x the false-alarm budget, docs/multivariate.md).
    """

    alpha: float = 0.05
    psi_minor: float = 0.1
    psi_major: float = 0.25
    ks_minor: float = 0.1
    ks_major: float = 0.25
    emd_minor: float = 0.1
    emd_major: float = 0.5
    missing_minor: float = 0.05
    missing_major: float = 0.2
    bins: int = 10
    false_alarm_rate: float = 0.01
    min_count: int = 100
    min_windows: int = 5
    max_exact: int = 1000
    head_size: int = 20
    membership_fpr: float = 0.01
    sequential_alpha: float = 0.0
    segment_group_min_windows: int = 30

    def __post_init__(self) -> None:
        if not 0 < self.alpha < 1 or not 0 < self.false_alarm_rate < 1:
            raise ValueError("alpha and false_alarm_rate must lie strictly between 0 and 1")
        if not 0 <= self.sequential_alpha < 1:
            raise ValueError(f"sequential_alpha must lie in [0, 1), got {self.sequential_alpha}")
        if self.bins < 2:
            raise ValueError(f"bins must be >= 2, got {self.bins}")
        if self.head_size < 1 or not 0 < self.membership_fpr < 1:
            raise ValueError(f"head_size must be >= 1 and membership_fpr strictly between 0 and 1, "
                             f"got {self.head_size} and {self.membership_fpr}")


@dataclass(frozen=True)
class Verdict:
    """Whether a feature drifted in a window, and how badly."""

    drifted: bool
    severity: str


def verdict(deep: DeepResult | None, p_adjusted: float | None, policy: DriftPolicy,
            missing_delta: float | None = None) -> Verdict:
    """Decide drift and severity from the deep result and its BH-adjusted p-value.

    >>> verdict(DeepResult(0.3, 1e-9, 0.4, 0.6, None, None, 1e-9), 1e-8, DriftPolicy())
    Verdict(drifted=True, severity='major')
    >>> verdict(None, None, DriftPolicy())
    Verdict(drifted=False, severity='none')
    """
    if deep is None or p_adjusted is None or not p_adjusted <= policy.alpha:
        return Verdict(False, "none")
    effects = [(deep.psi, policy.psi_minor, policy.psi_major), (deep.ks_stat, policy.ks_minor, policy.ks_major),
               (deep.emd, policy.emd_minor, policy.emd_major)]
    if missing_delta is not None:
        effects.append((abs(missing_delta), policy.missing_minor, policy.missing_major))
    level = max(((2 if v >= major else 1 if v >= minor else 0) for v, minor, major in effects if v is not None),
                default=0)
    return Verdict(True, SEVERITIES[1 + level])
