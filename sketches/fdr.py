"""Hierarchical false discovery rate: features first, then the members (global view, segments) of each.

The procedure (Benjamini & Bogomolov 2014, "Selective inference on multiple families of hypotheses"):

1. each feature's family (its global test and its judged segments) gets one p-value, the Simes
   combination ``min_j k * p_(j) / j`` (= the smallest Benjamini-Hochberg adjusted p-value of the family);
2. Benjamini-Hochberg across the m features at level q selects R of them;
3. within each selected feature, Benjamini-Hochberg over its family at level ``q * R / m`` decides
   which members are discoveries.

Under the complete null the probability of any discovery is at most q (step 2 is BH on valid
p-values); the expected share of false discoveries among the selected families is at most q
(independent families). A family of one member is never worse off than under plain BH, and with
every family of size one the procedure *is* plain BH.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from driftwarden.sketches.deep import benjamini_hochberg


def simes(p_values: Sequence[float]) -> float:
    """The Simes combination of one family's p-values (1.0 for an empty family).

    >>> simes([0.01, 0.04, 0.03])
    0.03
    """
    return float(benjamini_hochberg(p_values).min()) if len(p_values) else 1.0


def hierarchical_bh(p_values: Sequence[Sequence[float]], q: float) -> list[list[bool]]:
    """Which members of each family are discoveries at level ``q`` (one family per feature).

    Two features, each a global test and two segments: the first feature's second segment drifted.

    >>> hierarchical_bh([[0.2, 0.5, 1e-6], [0.3, 0.9, 0.04]], 0.05)
    [[False, False, True], [False, False, False]]
    >>> hierarchical_bh([[0.01], [0.04], [0.03]], 0.05)  # families of one: plain BH
    [[True], [True], [True]]
    """
    if not 0 < q < 1:
        raise ValueError(f"q must lie strictly between 0 and 1, got {q}")
    m = len(p_values)
    selected = _bh_reject([simes(family) for family in p_values], q)
    level = q * int(selected.sum()) / m if m else 0.0
    return [_bh_reject(family, level).tolist() if chosen else [False] * len(family)
            for family, chosen in zip(p_values, selected.tolist())]


def hierarchical_adjusted(p_values: Sequence[Sequence[float]], q: float) -> list[list[float]]:
    """Per member, a p-value that is <= ``q`` exactly when :func:`hierarchical_bh` finds it at level ``q``.

    ``max(F, min(1, B * m / R))`` for a member of a selected feature (F: the feature's BH-adjusted
    Simes p-value across features; B: the member's BH-adjusted p-value within its family; R of m
    features selected), ``max(F, B)`` otherwise; a family of one member gets F, its plain
    Benjamini-Hochberg adjusted p-value, so with every family of size one this is plain BH.

    >>> hierarchical_adjusted([[0.01], [0.04], [0.03]], 0.05)
    [[0.03], [0.04], [0.04]]
    """
    m = len(p_values)
    features = benjamini_hochberg([simes(family) for family in p_values]).tolist()
    selected = sum(f <= q for f in features)
    out = []
    for family, f in zip(p_values, features):
        if len(family) == 1:
            out.append([f])
            continue
        within = benjamini_hochberg(family).tolist()
        if f <= q:
            out.append([max(f, min(1.0, b * m / selected)) for b in within])
        else:
            out.append([max(f, b) for b in within])
    return out


def _bh_reject(p_values: Sequence[float], level: float) -> np.ndarray:
    """Benjamini-Hochberg step-up at ``level``: reject the k smallest, k the largest with p_(k) <= level * k / n."""
    p = np.asarray(p_values, dtype=np.float64)
    reject = np.zeros(p.size, dtype=bool)
    if p.size == 0 or level <= 0:
        return reject
    order = np.argsort(p, kind="stable")
    below = np.nonzero(p[order] <= level * np.arange(1, p.size + 1) / p.size)[0]
    if below.size:
        reject[order[: below[-1] + 1]] = True
    return reject
