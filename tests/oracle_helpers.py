"""Comparisons that hold a statistic to an independent oracle at its own scale.

``pytest.approx`` adds an absolute tolerance of 1e-12 to the relative one, so a p-value of 2e-68
"equals" any other p-value below 1e-12, and 7e-11 equals anything within 1.5% of it: compare
p-values with :func:`p_approx` (relative tolerance only). PSI: :func:`oracle_psi` and
:func:`oracle_category_psi`, written from the definition with pandas and scipy, no product code.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import special

#: The smoothing every PSI of the product documents (``sketches/distances.py``): p -> (p + eps) / (1 + bins * eps).
PSI_SMOOTHING = 1e-4


def p_approx(expected, rel: float = 1e-9):
    """``pytest.approx`` with a relative tolerance only (no absolute floor): for p-values and other
    numbers that may be tiny. Works on scalars and sequences, like ``pytest.approx``."""
    return pytest.approx(expected, rel=rel, abs=0)


def oracle_psi(ref: np.ndarray, win: np.ndarray, bins: int = 10) -> float:
    """PSI by its definition, with pandas' binning and scipy's relative entropy (no product code).

    Bins (-inf, e_1], ..., (e_k, inf) at the reference's quantiles j / bins (the smallest value with at least
    that share at or below it), shares smoothed by PSI_SMOOTHING, PSI = KL(w || r) + KL(r || w) = sum (w - r) ln(w / r).
    """
    edges = np.unique(np.quantile(ref, np.arange(1, bins) / bins, method="inverted_cdf"))
    cuts = np.concatenate([[-np.inf], edges, [np.inf]])
    k = cuts.size - 1
    r, w = ((pd.cut(pd.Series(v), cuts, right=True).value_counts(normalize=True, sort=False).to_numpy() + PSI_SMOOTHING)
            / (1 + k * PSI_SMOOTHING) for v in (ref, win))
    return float(np.sum(special.rel_entr(w, r) + special.rel_entr(r, w)))


def oracle_category_psi(ref: list, win: list) -> float:
    """PSI over the categories either side saw, from pandas' value counts and scipy's relative entropy."""
    cats = sorted(set(ref) | set(win))
    r, w = ((pd.Series(v).value_counts(normalize=True).reindex(cats, fill_value=0.0).to_numpy() + PSI_SMOOTHING)
            / (1 + len(cats) * PSI_SMOOTHING) for v in (ref, win))
    return float(np.sum(special.rel_entr(w, r) + special.rel_entr(r, w)))
