"""Synthetic incident traffic for tests, demos and the replay benchmark (seeded, reproducible).

``incident_events`` yields events of one model, evenly spaced in event time, with ``numeric``
normal features ``x0..`` and ``categorical`` features ``c0..`` (values ``a``..``e``); from
``drift_ms`` on, ``x0`` shifts by two standard deviations and ``c0`` moves most mass to ``e``.
"""

from __future__ import annotations

from typing import Iterator

import numpy as np

CATEGORIES = np.array(["a", "b", "c", "d", "e"])
NORMAL_SHARES = np.array([0.4, 0.3, 0.15, 0.1, 0.05])
DRIFTED_SHARES = np.array([0.1, 0.1, 0.1, 0.1, 0.6])


def incident_events(n: int, start_ms: int, step_ms: float, drift_ms: int | None = None, numeric: int = 2,
                    categorical: int = 1, model: str = "fraud-v3", seed: int = 0,
                    chunk: int = 50_000) -> Iterator[dict]:
    """``n`` events from ``start_ms``, ``step_ms`` apart; drifted from ``drift_ms`` (None: never)."""
    rng = np.random.default_rng(seed)
    for first in range(0, n, chunk):
        size = min(chunk, n - first)
        times = start_ms + (np.arange(first, first + size) * step_ms).astype(np.int64)
        drifted = times >= drift_ms if drift_ms is not None else np.zeros(size, dtype=bool)
        columns = _columns(rng, size, drifted, numeric, categorical)
        names = list(columns)
        rows = zip(*(columns[name] for name in names))
        for t, row in zip(times.tolist(), rows):
            yield {"event_time": t, "model": model, "features": dict(zip(names, row))}


def _columns(rng: np.random.Generator, size: int, drifted: np.ndarray, numeric: int,
             categorical: int) -> dict[str, list]:
    columns: dict[str, list] = {}
    for i in range(numeric):
        values = rng.normal(0.0, 1.0, size) + (2.0 * drifted if i == 0 else 0.0)
        columns[f"x{i}"] = np.round(values, 4).tolist()
    for i in range(categorical):
        normal = rng.choice(CATEGORIES, size, p=NORMAL_SHARES)
        if i == 0:
            normal = np.where(drifted, rng.choice(CATEGORIES, size, p=DRIFTED_SHARES), normal)
        columns[f"c{i}"] = normal.tolist()
    return columns


def zipf_ids(rng: np.random.Generator, size: int, ids: int = 100_000, exponent: float = 1.0, new_share: float = 0.0,
             new_ids: int = 2000, reverse_head: int = 0) -> list[str]:
    """``size`` ids ``m<k>`` drawn from a Zipf-like law over ``ids`` values (rank r has weight r^-exponent).

    ``new_share`` of the draws move to ``new_ids`` ids ``new<j>`` never drawn otherwise (a new partner);
    ``reverse_head`` > 0 reverses the shares of the top ``reverse_head`` ranks (a shift among the head).
    Rank r is id ``m<(r * 7919) % ids>``, so names carry no rank order.
    """
    weights = 1.0 / np.arange(1, ids + 1) ** exponent
    if reverse_head:
        weights[:reverse_head] = weights[:reverse_head][::-1].copy()
    ranks = rng.choice(ids, size=size, p=weights / weights.sum())
    names = np.char.add("m", ((ranks * 7919) % ids).astype(str)).astype(object)
    moved = rng.random(size) < new_share
    names[moved] = np.char.add("new", rng.integers(0, new_ids, int(moved.sum())).astype(str))
    return names.tolist()
