"""The verdict: candidate/baseline latency ratios with bootstrap confidence intervals.

Arms run interleaved in rounds, so each round gives one ratio measured under the same machine
conditions. The p50 estimate is the median of the per-round ratios, and the bootstrap resamples
those rounds: slow drift of the machine (thermal, a noisy neighbour) moves both arms of a round
together and cancels in the ratio, where pooling all requests would let it leak into the comparison.
A p99 needs more requests than a round may hold, so its ratio pools the rounds and its bootstrap
resamples whole rounds, the same rounds for both arms (see :func:`pooled_ratio`).

>>> import numpy as np
>>> rng = np.random.default_rng(0)
>>> classify(*bootstrap_ratio(np.full(12, 2.0) * rng.normal(1, 0.02, 12), 2000, 0.95, rng)[1:], 0.05)
'regression'
>>> classify(0.97, 1.08, 0.05)
'no significant change'
"""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

REGRESSION = "regression"
IMPROVEMENT = "improvement"
NO_CHANGE = "no significant change"
VERDICTS = (REGRESSION, IMPROVEMENT, NO_CHANGE)
STATS = {"p50": 50.0, "p99": 99.0}


def bootstrap_ratio(
    ratios: np.ndarray, n_boot: int, confidence: float, rng: np.random.Generator
) -> tuple[float, float, float]:
    """Median of per-round ratios and its percentile bootstrap interval (rounds resampled, vectorised)."""
    ratios = np.asarray(ratios, dtype=np.float64)
    ratios = ratios[np.isfinite(ratios) & (ratios > 0)]
    if ratios.size == 0:
        return float("nan"), float("nan"), float("nan")
    idx = rng.integers(0, ratios.size, size=(n_boot, ratios.size))
    medians = np.median(ratios[idx], axis=1)
    alpha = (1.0 - confidence) / 2.0
    low, high = np.quantile(medians, [alpha, 1.0 - alpha])
    return float(np.median(ratios)), float(low), float(high)


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


def pooled_ratio(
    numerators: Sequence[Sequence[np.ndarray]], denominators: Sequence[Sequence[np.ndarray]], q: float,
    n_boot: int, confidence: float, rng: np.random.Generator, bins: int = 1024,
) -> tuple[float, float, float]:
    """Ratio of the ``q``-th percentiles of all rounds pooled, with a round-block bootstrap interval.

    A tail percentile needs many requests, more than a round may hold, so rounds are pooled; the
    bootstrap resamples whole rounds, the same rounds for both arms of a pair, which keeps the
    interleaving's pairing. Resampled percentiles come from per-round histograms on a shared
    log-spaced grid (a weight matrix times the histograms), so it is vectorised.
    """
    rounds = len(numerators[0])
    everything = np.concatenate([c for arm in (*numerators, *denominators) for c in arm]).astype(np.float64)
    edges = np.geomspace(max(everything.min(), 1.0), everything.max() * 1.000001 + 1.0, bins + 1)
    idx = rng.integers(0, rounds, size=(n_boot, rounds))
    weights = (idx[:, :, None] == np.arange(rounds)).sum(axis=1)
    est_logs, boot_logs = [], []
    for num, den in zip(numerators, denominators):
        est_logs.append(np.log(np.percentile(np.concatenate(num), q) / np.percentile(np.concatenate(den), q)))
        boot_logs.append(np.log(_hist_quantile(weights, num, edges, q) / _hist_quantile(weights, den, edges, q)))
    boot = np.exp(np.mean(boot_logs, axis=0))
    alpha = (1.0 - confidence) / 2.0
    low, high = np.quantile(boot, [alpha, 1.0 - alpha])
    return float(np.exp(np.mean(est_logs))), float(low), float(high)


def _hist_quantile(weights: np.ndarray, chunks: Sequence[np.ndarray], edges: np.ndarray, q: float) -> np.ndarray:
    """The q-th percentile of each resample (rows of ``weights``: how often each round was drawn)."""
    hist = np.stack([np.histogram(np.clip(c, edges[0], edges[-1]), edges)[0] for c in chunks]).astype(np.float64)
    cum = np.cumsum(weights @ hist, axis=1)
    pos = np.argmax(cum >= cum[:, -1:] * (q / 100.0), axis=1)
    return np.sqrt(edges[pos] * edges[pos + 1])


def effect(
    numerators: Sequence[Sequence[np.ndarray]], denominators: Sequence[Sequence[np.ndarray]],
    tolerance: float, n_boot: int, confidence: float, rng: np.random.Generator,
) -> dict:
    """Ratio numerator/denominator of p50 (median of per-round ratios) and p99 (pooled rounds).

    ``numerators[k]`` and ``denominators[k]`` are the per-round latency chunks of two arms that
    differ only in the factor under test (e.g. candidate vs baseline, both on reference inputs);
    several pairs are combined by the geometric mean of their ratios.
    """
    logs = [np.log(round_stats(n, 50.0) / round_stats(d, 50.0)) for n, d in zip(numerators, denominators)]
    intervals = {
        "p50": bootstrap_ratio(np.exp(np.mean(logs, axis=0)), n_boot, confidence, rng),
        "p99": pooled_ratio(numerators, denominators, 99.0, n_boot, confidence, rng),
    }
    out: dict = {name: {"ratio": est, "ci_low": low, "ci_high": high, "verdict": classify(low, high, tolerance)}
                 for name, (est, low, high) in intervals.items()}
    out["verdict"] = combine([out[name]["verdict"] for name in STATS])
    out["rounds"] = int(len(numerators[0])) if numerators else 0
    return out


def attribute(model_verdict: str, input_verdict: str | None) -> str:
    """Say where a latency change comes from: "model", "inputs", "model and inputs" or "none"."""
    parts = [name for name, v in (("model", model_verdict), ("inputs", input_verdict)) if v and v != NO_CHANGE]
    return " and ".join(parts) or "none"


def overall(cells: Sequence[Mapping]) -> str:
    """The run's verdict: the combined model verdicts of every measured (batch size, dtype) cell."""
    return combine([c["model_effect"]["verdict"] for c in cells if c.get("status") == "ok"])
