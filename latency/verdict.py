"""The verdict: candidate/baseline latency ratios with distribution-free confidence intervals.

Arms run interleaved in rounds, so each round gives one ratio measured under the same machine
conditions. The p50 estimate is the median of the per-round ratios, and its interval is the exact
order-statistic interval of a median (``scipy.stats.quantile_test``): it holds its level for rounds
that are independent, whatever the shape of their ratios. (A percentile bootstrap of the median
does not: on 20 rounds it missed the true ratio 1.4 to 2.4 times as often as its level allows, and
a copy of a model was called a regression.) Slow drift of the machine (thermal, a noisy neighbour)
moves both arms of a round together and cancels in the ratio, where pooling all requests would let
it leak into the comparison. A p99 needs more requests than a short round may hold, so consecutive
rounds are grouped until each holds enough, and the median is taken over the groups' ratios (see
:func:`grouped_ratio`). Pooling every round instead would let the one round hit by a burst of load
set the pooled p99 of one arm.

The run's verdict says "changed" when any interval of any cell clears the tolerance, so each
interval is built at the Bonferroni level that keeps the whole run's false-alarm rate within
``1 - confidence`` (:func:`interval_level`).

>>> import numpy as np
>>> rng = np.random.default_rng(0)
>>> classify(*median_interval(np.full(12, 2.0) * rng.normal(1, 0.02, 12), 0.95)[1:], 0.05)
'regression'
>>> classify(0.97, 1.08, 0.05)
'no significant change'
"""

from __future__ import annotations

import math
from typing import Mapping, Sequence

import numpy as np
from scipy import stats

REGRESSION = "regression"
IMPROVEMENT = "improvement"
NO_CHANGE = "no significant change"
VERDICTS = (REGRESSION, IMPROVEMENT, NO_CHANGE)
STATS = {"p50": 50.0, "p99": 99.0}
P99_MIN_SAMPLES = 200  # requests per arm in a group of rounds before its p99 means more than its maximum


def median_interval(ratios: np.ndarray, confidence: float) -> tuple[float, float, float]:
    """Median of per-round ratios and its exact distribution-free interval at ``confidence``.

    The interval is a pair of order statistics chosen by the binomial distribution, so it covers the
    true median at least ``confidence`` of the time for independent rounds; with too few rounds for
    that level both ends are NaN (the verdict then claims nothing).
    """
    ratios = np.asarray(ratios, dtype=np.float64)
    ratios = ratios[np.isfinite(ratios) & (ratios > 0)]
    if ratios.size == 0:
        return float("nan"), float("nan"), float("nan")
    median = float(np.median(ratios))
    interval = stats.quantile_test(ratios, q=median, p=0.5).confidence_interval(confidence)
    return median, float(interval.low), float(interval.high)


def min_rounds(level: float) -> int:
    """The fewest rounds whose median has an interval at ``level`` (both ends the extremes: 2 / 2**n <= 1 - level).

    >>> min_rounds(0.975), min_rounds(1 - 0.05 / 6)
    (7, 8)
    """
    return max(1, math.ceil(math.log2(2.0 / (1.0 - level)) - 1e-12))


def classify(ci_low: float, ci_high: float, tolerance: float) -> str:
    """"regression" when the whole interval is above 1+tolerance, "improvement" below 1-tolerance."""
    if ci_low > 1.0 + tolerance:
        return REGRESSION
    if ci_high < 1.0 - tolerance:
        return IMPROVEMENT
    return NO_CHANGE


def combine(verdicts: Sequence[str]) -> str:
    """One verdict from several: any regression wins, then any improvement, else no change."""
    if REGRESSION in verdicts:
        return REGRESSION
    if IMPROVEMENT in verdicts:
        return IMPROVEMENT
    return NO_CHANGE


def round_stats(chunks: Sequence[np.ndarray], q: float) -> np.ndarray:
    """The ``q``-th percentile of each round's latencies (one value per round)."""
    return np.array([np.percentile(c, q) if len(c) else np.nan for c in chunks], dtype=np.float64)


def grouped_ratio(
    numerators: Sequence[Sequence[np.ndarray]], denominators: Sequence[Sequence[np.ndarray]], q: float,
    min_samples: int, confidence: float,
) -> tuple[float, float, float]:
    """Median over groups of consecutive rounds of the ``q``-th percentile ratio, with its interval.

    A tail percentile needs more requests than a short round may hold, so consecutive rounds are
    merged until every arm has ``min_samples`` in the group; the ratio is still taken within a
    group, so a burst of machine load that spoils one group moves one ratio, not the estimate.
    """
    arms = (*numerators, *denominators)
    groups = _groups([min(len(arm[r]) for arm in arms) for r in range(len(numerators[0]))], min_samples)
    if len(groups) < min_rounds(confidence):  # too few requests for an interval: the estimate, no claim
        return _ratio_of(numerators, denominators, q, [sum(groups, [])])[0], float("nan"), float("nan")
    return median_interval(np.asarray(_ratio_of(numerators, denominators, q, groups)), confidence)


def _groups(counts: Sequence[int], min_samples: int) -> list[list[int]]:
    """Consecutive round indices merged until each group holds ``min_samples`` (a short tail joins the last)."""
    groups: list[list[int]] = [[]]
    total = 0
    for r, n in enumerate(counts):
        groups[-1].append(r)
        total += n
        if total >= min_samples:
            groups.append([])
            total = 0
    if not groups[-1]:
        groups.pop()
    elif len(groups) > 1:
        groups[-2].extend(groups.pop())
    return groups


def _ratio_of(numerators, denominators, q: float, groups: list[list[int]]) -> list[float]:
    """Geometric mean over pairs of the q-th percentile ratio, one value per group of rounds."""
    out = []
    for group in groups:
        logs = [np.log(np.percentile(np.concatenate([n[r] for r in group]), q)
                       / np.percentile(np.concatenate([d[r] for r in group]), q))
                for n, d in zip(numerators, denominators)]
        out.append(float(np.exp(np.mean(logs))))
    return out


def effect(
    numerators: Sequence[Sequence[np.ndarray]], denominators: Sequence[Sequence[np.ndarray]],
    tolerance: float, confidence: float, cells: int = 1,
) -> dict:
    """Ratio numerator/denominator of p50 (median of per-round ratios) and p99 (grouped rounds).

    Each interval is built at :func:`interval_level`, so that a run of ``cells`` cells, each judged
    on p50 and p99, keeps its false-alarm rate within ``1 - confidence``.

    ``numerators[k]`` and ``denominators[k]`` are the per-round latency chunks of two arms that
    differ only in the factor under test (e.g. candidate vs baseline, both on reference inputs);
    several pairs are combined by the geometric mean of their ratios.
    """
    level = interval_level(confidence, cells)
    logs = [np.log(round_stats(n, 50.0) / round_stats(d, 50.0)) for n, d in zip(numerators, denominators)]
    intervals = {
        "p50": median_interval(np.exp(np.mean(logs, axis=0)), level),
        "p99": grouped_ratio(numerators, denominators, 99.0, P99_MIN_SAMPLES, level),
    }
    out: dict = {name: {"ratio": est, "ci_low": low, "ci_high": high, "verdict": classify(low, high, tolerance)}
                 for name, (est, low, high) in intervals.items()}
    out["verdict"] = combine([out[name]["verdict"] for name in STATS])
    out["ci_level"] = level
    out["rounds"] = int(len(numerators[0])) if numerators else 0
    return out


def interval_level(confidence: float, cells: int) -> float:
    """The level of each interval of a run of ``cells`` cells, each judged on p50 and p99 (Bonferroni).

    >>> interval_level(0.95, 2)
    0.9875
    """
    return family_level(confidence, cells * len(STATS))


def family_level(confidence: float, tests: int) -> float:
    """Bonferroni: the level of each of ``tests`` intervals so that their joint verdict keeps ``confidence``.

    >>> family_level(0.95, 2)
    0.975
    """
    return 1.0 - (1.0 - confidence) / tests


def attribute(model_verdict: str, input_verdict: str | None) -> str:
    """Say where a latency change comes from: "model", "inputs", "model and inputs" or "none"."""
    parts = [name for name, v in (("model", model_verdict), ("inputs", input_verdict)) if v and v != NO_CHANGE]
    return " and ".join(parts) or "none"


def overall(cells: Sequence[Mapping]) -> str:
    """The run's verdict: the combined model verdicts of every measured (batch size, dtype) cell."""
    return combine([c["model_effect"]["verdict"] for c in cells if c.get("status") == "ok"])
