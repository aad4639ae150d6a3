"""Vector features: a JSON array of floats per event, projected to ``k`` numeric coordinates.

The projection is a seeded random sign matrix ``S`` (``k x d``, entries ±1, the same for every
process: drawn from splitmix64 of a fixed seed, ``d`` and ``k``), ``y = S·x / √d``. It needs no
reference (the live job, replay, a rolling reference all project alike) and preserves distances
in expectation (Johnson-Lindenstrauss), so a move of the embedding's mean, of its spread or off
its subspace stays visible in the ``k`` coordinates. To be bit-identical wherever it runs, the
sum is exact: each value is rounded to a multiple of 2^-FRACTION_BITS as an int64, the product
with the sign matrix is integer arithmetic (order-free), and one division gives each float. The
cost per event is ``d·k`` integer multiply-adds.

A value that is not an array of ``d`` finite numbers, each below 2^LIMIT_BITS in magnitude, is
an invalid value of the feature (:func:`project` returns its reason).

>>> y = project([0.5] * 8, 8, 4)
>>> len(y), project([0.5] * 7, 8, 4), project([0.5, "x"] + [0.0] * 6, 8, 4)
(4, 'wrong_length:7', 'not_numeric')
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Any

import numpy as np

#: Values are rounded to multiples of 2^-FRACTION_BITS (about 1e-6 absolute).
FRACTION_BITS = 20
#: Values at or above 2^LIMIT_BITS in magnitude are invalid (the integer sums stay exact).
LIMIT_BITS = 30
#: The projection matrix's fixed seed.
SEED = 0x5EED_D81F_7A4D_E401
_MASK64 = (1 << 64) - 1

__all__ = ["FRACTION_BITS", "project", "project_rows", "projected_names", "projection_matrix", "is_projection_group"]


def projected_names(name: str, k: int) -> tuple[str, ...]:
    """The names of a vector feature's ``k`` projected coordinates: ``name[0]`` .. ``name[k-1]``."""
    return tuple(f"{name}[{i}]" for i in range(k))


def is_projection_group(name: str, members: tuple[str, ...]) -> bool:
    """Whether a multivariate group is a vector feature's projection (its members are :func:`projected_names`)."""
    return tuple(members) == projected_names(name, len(members))


@lru_cache(maxsize=64)
def projection_matrix(d: int, k: int) -> np.ndarray:
    """The ``k x d`` int64 matrix of ±1 signs (splitmix64 of SEED, d, k, then of each entry's index)."""
    state = _splitmix(SEED ^ _splitmix(d) ^ _splitmix(k << 32))
    bits = np.array([_splitmix(state + i) >> 63 for i in range(k * d)], dtype=np.int64)
    return (1 - 2 * bits).reshape(k, d)


def _splitmix(z: int) -> int:
    z = (z + 0x9E3779B97F4A7C15) & _MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK64
    return z ^ (z >> 31)


def project(value: Any, d: int, k: int) -> tuple[float, ...] | str:
    """The ``k`` projected coordinates of one event's array, or why it is invalid (``wrong_length:<n>``,
    ``not_numeric``, ``out_of_range``)."""
    if type(value) is not list:
        return "not_array"
    if len(value) != d:
        return f"wrong_length:{len(value)}"
    if not all(type(v) in (int, float) for v in value):  # bool is not a number here, as in the other kinds
        return "not_numeric"
    x = np.array(value, dtype=np.float64)
    if not np.all(np.abs(x) < 2.0 ** LIMIT_BITS):
        return "out_of_range"
    return tuple(project_rows(x[None, :], k)[0].tolist())


def project_rows(rows: np.ndarray, k: int) -> np.ndarray:
    """The ``n x k`` projected coordinates of ``n`` valid arrays (an ``n x d`` float array, every value finite
    and below 2^LIMIT_BITS in magnitude): what :func:`project` gives each row, bit for bit."""
    d = rows.shape[1]
    fixed = np.rint(np.ldexp(rows, FRACTION_BITS)).astype(np.int64)
    sums = fixed @ projection_matrix(d, k).T  # exact: |sum| < d·2^(LIMIT_BITS + FRACTION_BITS) < 2^63
    return sums / math.ldexp(math.sqrt(d), FRACTION_BITS)
