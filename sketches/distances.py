"""Distances between two distributions given as bin probabilities or quantile functions.

Shared by the gate (sketch estimates) and the deep tests (exact on samples), so that both
compute PSI, Jensen-Shannon and the EMD normalisation the same way.
"""

from __future__ import annotations

import numpy as np

#: Additive smoothing of bin probabilities before PSI / chi-square / JS:
#: ``p_i <- (p_i + PSI_EPSILON) / (1 + bins * PSI_EPSILON)``, so an empty bin costs a finite amount
#: (an empty reference bin with 10% of the window contributes about 0.1 * ln(0.1 / 1e-4) = 0.69).
PSI_EPSILON = 1e-4


def smooth(probs: np.ndarray, bins: int | np.ndarray | None = None) -> np.ndarray:
    """Apply the documented additive ``PSI_EPSILON`` smoothing to bin probabilities.

    ``bins``: the bin count of the distribution, ``probs.size`` by default; for the bins of several
    distributions end to end, each bin's own distribution's count.
    """
    probs = np.asarray(probs, dtype=np.float64)
    return (probs + PSI_EPSILON) / (1.0 + (probs.size if bins is None else bins) * PSI_EPSILON)


def psi(ref_probs: np.ndarray, win_probs: np.ndarray) -> float:
    """Population stability index, sum((w - r) * ln(w / r)), on smoothed bin probabilities.

    >>> round(psi(np.array([0.5, 0.5]), np.array([0.5, 0.5])), 6)
    0.0
    """
    return psi_smoothed(smooth(ref_probs), smooth(win_probs))


def psi_smoothed(ref_smoothed: np.ndarray, win_smoothed: np.ndarray) -> float:
    """:func:`psi` of probabilities already smoothed (:func:`smooth`): a reference's, smoothed once."""
    return float(np.sum(psi_terms(ref_smoothed, win_smoothed)))


def psi_terms(ref_smoothed: np.ndarray, win_smoothed: np.ndarray) -> np.ndarray:
    """Each bin's term of :func:`psi_smoothed`, ``(w - r) * ln(w / r)``."""
    return (win_smoothed - ref_smoothed) * np.log(win_smoothed / ref_smoothed)


def js_divergence(ref_probs: np.ndarray, win_probs: np.ndarray) -> float:
    """Jensen-Shannon divergence in bits (0 = same, 1 = disjoint), on raw probabilities."""
    r = np.asarray(ref_probs, dtype=np.float64)
    w = np.asarray(win_probs, dtype=np.float64)
    m = 0.5 * (r + w)
    return float(0.5 * _kl_bits(r, m) + 0.5 * _kl_bits(w, m))


def _kl_bits(p: np.ndarray, q: np.ndarray) -> float:
    mask = p > 0
    return float(np.sum(p[mask] * np.log2(p[mask] / q[mask])))


def chi2_per_value(ref_probs: np.ndarray, win_probs: np.ndarray) -> float:
    """Pearson chi-square of window counts against reference proportions, divided by the window size."""
    r, w = smooth(ref_probs), smooth(win_probs)
    return float(np.sum((w - r) ** 2 / r))


def probs_from_cdf(cdf_at_edges: np.ndarray) -> np.ndarray:
    """Bin probabilities of bins (-inf, e1], (e1, e2], ..., (e_last, inf) from the CDF at the edges."""
    return np.diff(np.concatenate([[0.0], np.clip(cdf_at_edges, 0.0, 1.0), [1.0]]))


def probs_from_cdfs(cdfs: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """:func:`probs_from_cdf` of several CDFs (each at one or more edges) in one pass: their bin
    probabilities end to end, and where each one's bins start.

    >>> probs, starts = probs_from_cdfs([np.array([0.25, 0.5]), np.array([1.0])])
    >>> probs.tolist(), starts.tolist()
    ([0.25, 0.25, 0.5, 1.0, 0.0], [0, 3])
    """
    return probs_from_cdf_rows(np.concatenate(cdfs), np.array([c.size for c in cdfs]))


def probs_from_cdf_rows(at: np.ndarray, sizes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`probs_from_cdfs` of CDFs given end to end: ``at`` holds each one's values at its ``sizes[i]`` edges.

    >>> probs, starts = probs_from_cdf_rows(np.array([0.25, 0.5, 1.0]), np.array([2, 1]))
    >>> probs.tolist(), starts.tolist()
    ([0.25, 0.25, 0.5, 1.0, 0.0], [0, 3])
    """
    firsts = np.cumsum(sizes) - sizes
    at = np.clip(at, 0.0, 1.0)
    steps = np.diff(at, prepend=0.0)
    steps[firsts] = at[firsts] - 0.0  # a CDF's first bin starts from 0, not from the CDF before it
    return np.insert(steps, firsts + sizes, 1.0 - at[firsts + sizes - 1]), firsts + np.arange(sizes.size)


def exact_bin_probs(values: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Exact bin probabilities of ``values`` on the same bins as :func:`probs_from_cdf`."""
    values = np.sort(np.asarray(values, dtype=np.float64))
    return probs_from_cdf(np.searchsorted(values, edges, side="right") / max(values.size, 1))


def spread(q25: float, q75: float, std: float) -> float:
    """Scale for the EMD: the IQR, else the std when the IQR is 0, else 1.0 (a constant feature)."""
    with np.errstate(over="ignore", invalid="ignore"):
        iqr = q75 - q25
    for scale in (iqr, std):
        if np.isfinite(scale) and scale > 0:
            return float(scale)
    return 1.0
