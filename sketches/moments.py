"""GroupMoments: count, sums and sums of cross-products of a group of numeric features, exactly mergeable.

What the multivariate tests (``sketches/multivariate.py``) read: per window, for a group of ``d``
features, the number of complete rows, each feature's sum and each pair's sum of products. O(d²)
state, no raw rows.

Determinism: float sums depend on the order of the additions, so the moments are kept as exact
integers instead (``sketches/FORMAT.md``, kind 23). Each value is first rounded to 31 significant
bits, ``x ≈ q·2^p`` (``q`` an integer, ``|q| <= 2^31``: a relative rounding of at most 2^-31,
the same in Java and Python); a product of two rounded values is then the exact integer ``q_i·q_j``
at position ``p_i + p_j``. Every sum is an exact integer multiple of ``2^-SCALE``, accumulated in
32-bit limbs (Java, per event) or in exact float64 bin sums of the same limbs (numpy, vectorised),
and kept as a Python integer. Addition of integers is associative and commutative: any order and
any split of the events into partials give the same bytes.

Missing values: a row enters the moments only when every value of the group is finite with
``|x| < 2^128`` (``|x| < 2^-128`` counts as 0.0); any other row (a null, NaN, ±inf, an invalid
value, a value out of range) is counted in :attr:`GroupMoments.incomplete` and left out (listwise
deletion, as a covariance of complete rows needs).

>>> import numpy as np
>>> rows = np.array([[1.0, 2.0], [3.0, -1.0], [np.nan, 0.0]])
>>> m = GroupMoments(("a", "b")).update(rows)
>>> m.n, m.incomplete, m.mean().tolist(), m.covariance(ddof=0).round(6).tolist()
(2, 1, [2.0, 0.5], [[1.0, -1.5], [-1.5, 2.25]])
>>> GroupMoments.deserialize(m.serialize()) == m
True
"""

from __future__ import annotations

import struct
from typing import Sequence

import numpy as np

from driftwarden.core.errors import SerializationError
from driftwarden.sketches.serialization import Reader, Writer, truncated_error

#: Frame kind of a serialized GroupMoments (``sketches/FORMAT.md``).
KIND_GROUP_MOMENTS = 23
#: Every sum is an integer multiple of 2^-SCALE.
SCALE = 320
#: Values at or above this magnitude make their row incomplete; below TINY they count as 0.0.
LIMIT = 2.0 ** 128
TINY = 2.0 ** -128
#: 32-bit limbs of one sum while accumulating (positions SCALE - 316 .. SCALE + 194 and the carries).
LIMBS = 20
#: Most rows folded into limb sums at once (each limb part < 2^32: float64 sums of 2^20 of them are exact).
_CHUNK = 1 << 20
_MASK = (1 << 32) - 1

__all__ = ["GroupMoments", "KIND_GROUP_MOMENTS", "complete_rows", "quantize", "term_pairs"]


def term_pairs(d: int) -> tuple[np.ndarray, np.ndarray]:
    """The (i, j), i <= j, of the d(d+1)/2 cross-products, row by row (the order of the terms after the sums)."""
    i, j = np.triu_indices(d)
    return i.astype(np.intp), j.astype(np.intp)


def complete_rows(values: np.ndarray) -> np.ndarray:
    """Which rows (of an n x d float array, NaN for a null) enter the moments: every value finite and < 2^128."""
    with np.errstate(invalid="ignore"):
        return np.all(np.abs(values) < LIMIT, axis=1)


def quantize(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each (finite, in-range) value as ``q·2^p`` with ``q`` an int64 of at most 31 significant bits
    (round half to even), ``p`` its position (int64); values below 2^-128 give ``q = 0``."""
    x = np.where(np.abs(values) < TINY, 0.0, values)
    mantissa, exponent = np.frexp(x)
    q = np.rint(np.ldexp(mantissa, 31)).astype(np.int64)
    return q, exponent.astype(np.int64) - 31


class GroupMoments:
    """Count, sums and sums of cross-products of one group's complete rows (exact integers scaled by 2^-SCALE).

    ``sums[i]``: Σ x_i; ``products[t]``: Σ x_i·x_j for the t-th pair of :func:`term_pairs`. Treat
    as immutable except through :meth:`update` and :meth:`merge`.
    """

    def __init__(self, names: Sequence[str], n: int = 0, incomplete: int = 0,
                 sums: Sequence[int] | None = None, products: Sequence[int] | None = None) -> None:
        self.names = tuple(names)
        d = len(self.names)
        self.n = n
        self.incomplete = incomplete
        self.sums = list(sums) if sums is not None else [0] * d
        self.products = list(products) if products is not None else [0] * (d * (d + 1) // 2)
        if len(self.sums) != d or len(self.products) != d * (d + 1) // 2:
            raise ValueError(f"group of {d} features needs {d} sums and {d * (d + 1) // 2} products")

    @property
    def d(self) -> int:
        """Number of features of the group."""
        return len(self.names)

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, GroupMoments) and self.names == other.names and self.n == other.n
                and self.incomplete == other.incomplete and self.sums == other.sums and self.products == other.products)

    def __repr__(self) -> str:
        return f"GroupMoments({list(self.names)!r}, n={self.n}, incomplete={self.incomplete})"

    def update(self, values: np.ndarray) -> GroupMoments:
        """Add rows (an n x d float array in the group's order; NaN for a null or invalid value)."""
        values = np.asarray(values, dtype=np.float64).reshape(-1, self.d)
        keep = complete_rows(values)
        self.incomplete += int(values.shape[0] - keep.sum())
        rows = values[keep]
        self.n += rows.shape[0]
        for start in range(0, rows.shape[0], _CHUNK):
            self._add_exact(rows[start:start + _CHUNK])
        return self

    def _add_exact(self, rows: np.ndarray) -> None:
        """Add complete rows' rounded sums and products, exactly."""
        if not rows.size:
            return
        q, p = quantize(rows)
        i, j = term_pairs(self.d)
        for t, total in enumerate(_limb_totals(q, p + SCALE)):
            self.sums[t] += total
        for start in range(0, len(i), 64):  # bounded temporaries: 64 pairs x rows at a time
            a, b = i[start:start + 64], j[start:start + 64]
            totals = _limb_totals(q[:, a] * q[:, b], p[:, a] + p[:, b] + SCALE)
            for t, total in enumerate(totals, start):
                self.products[t] += total

    def merge(self, other: GroupMoments) -> GroupMoments:
        """Add another group's moments (same features, same order) into this one."""
        if other.names != self.names:
            raise ValueError(f"cannot merge moments of {list(other.names)} into {list(self.names)}")
        self.n += other.n
        self.incomplete += other.incomplete
        self.sums = [a + b for a, b in zip(self.sums, other.sums)]
        self.products = [a + b for a, b in zip(self.products, other.products)]
        return self

    def copy(self) -> GroupMoments:
        """An independent copy."""
        return GroupMoments(self.names, self.n, self.incomplete, self.sums, self.products)

    def mean(self) -> np.ndarray:
        """Mean of each feature over the complete rows (NaN when there are none)."""
        if self.n == 0:
            return np.full(self.d, np.nan)
        scale = self.n << SCALE
        return np.array([s / scale for s in self.sums])  # int / int: correctly rounded, as float(Fraction) is

    def covariance(self, ddof: int = 1) -> np.ndarray:
        """The d x d covariance of the complete rows, from the exact sums: (n·S_ij - S_i·S_j) / (n·(n - ddof)),
        computed in integers and rounded once (no cancellation: Python's int / int is correctly rounded, as
        ``float(Fraction(...))`` is, without its gcd); NaN when n <= ddof."""
        d = self.d
        if self.n <= ddof:
            return np.full((d, d), np.nan)
        cov = np.empty((d, d))
        scale = (self.n * (self.n - ddof)) << (2 * SCALE)
        for t, (i, j) in enumerate(zip(*term_pairs(d))):
            exact = self.n * (self.products[t] << SCALE) - self.sums[i] * self.sums[j]
            cov[i, j] = cov[j, i] = exact / scale
        return cov

    def serialize(self) -> bytes:
        """Versioned bytes (``sketches/FORMAT.md``, kind 23): names, counts, each sum as a canonical integer."""
        w = Writer(KIND_GROUP_MOMENTS).pack("I", self.d)
        for name in self.names:
            w.text(name)
        w.pack("qqI", self.n, self.incomplete, len(self.sums) + len(self.products))
        for value in self.sums + self.products:
            _write_integer(w, value)
        return w.getvalue()

    @classmethod
    def deserialize(cls, data: bytes) -> GroupMoments:
        """Decode bytes written by :meth:`serialize` or by Java ``GroupMoments``."""
        r = Reader(data, (KIND_GROUP_MOMENTS,))
        (d,) = r.unpack("I")
        if d > 100_000:
            raise SerializationError(f"corrupt group moments: {d} features")
        names = [r.text() for _ in range(d)]
        n, incomplete, terms = r.unpack("qqI")
        if terms != d + d * (d + 1) // 2 or n < 0 or incomplete < 0:
            raise SerializationError(f"corrupt group moments: {terms} sums for {d} features, n={n}")
        values = _read_integers(r, terms)
        r.done()
        return cls(names, n, incomplete, values[:d], values[d:])


def _limb_totals(v: np.ndarray, position: np.ndarray) -> list[int]:
    """Per column of ``v`` (n x T int64, |v| <= 2^62), the exact Σ v·2^(position - SCALE) scaled by 2^SCALE."""
    n, terms = v.shape
    limb, shift = position >> 5, position & 31
    low = ((v.view(np.uint64) << shift.astype(np.uint64)) & _MASK).view(np.int64)  # wraps: only its low bits are kept
    carry = v >> (32 - shift)
    middle, high = carry & _MASK, carry >> 32
    column = np.broadcast_to(np.arange(terms, dtype=np.int64) * (LIMBS + 2), v.shape)
    size = terms * (LIMBS + 2)
    limbs = np.zeros(size, dtype=np.int64)
    for part, offset in ((low, 0), (middle, 1), (high, 2)):  # each bin's float sum of < 2^20 parts < 2^32 is exact
        limbs += np.bincount((column + limb + offset).ravel(), weights=part.ravel().astype(np.float64),
                             minlength=size).astype(np.int64)
    limbs = limbs.reshape(terms, LIMBS + 2)
    return [_from_limbs(row) for row in limbs.tolist()]


def _from_limbs(limbs: list[int]) -> int:
    """Σ limbs[k]·2^(32k), exactly."""
    total = 0
    for k in range(len(limbs) - 1, -1, -1):
        total = (total << 32) + limbs[k]
    return total


def _write_integer(w: Writer, value: int) -> None:
    """``u32`` trailing zero bits ``z`` (0 for zero), ``blob`` of ``value >> z`` as minimal two's-complement
    little-endian bytes (empty for zero): one canonical form, as Java ``BigInteger.toByteArray`` reversed."""
    if value == 0:
        w.pack("I", 0).blob(b"")
        return
    zeros = (value & -value).bit_length() - 1
    odd = value >> zeros
    size = (odd.bit_length() if odd >= 0 else (~odd).bit_length()) // 8 + 1
    w.pack("I", zeros).blob(odd.to_bytes(size, "little", signed=True))


def _read_integers(r: Reader, count: int) -> list[int]:
    """``count`` integers written by :func:`_write_integer`: a ``u32`` shift, then a blob (``u32`` length, bytes).

    One loop over the frame's bytes (a group of 25 features has 350 of them in each segment of each window)."""
    data, start = r.rest()
    pos, end, values = start, len(data), []
    for _ in range(count):
        if pos + 8 > end:
            raise truncated_error(pos + 8 if pos + 4 <= end else pos + 4, end)
        zeros, size = _INTEGER_HEAD.unpack_from(data, pos)
        pos += 8
        if pos + size > end:
            raise truncated_error(pos + size, end)
        if zeros > 4096 or size > 512:
            raise SerializationError(f"corrupt group moments: an integer of {size} bytes shifted by {zeros}")
        values.append(int.from_bytes(data[pos:pos + size], "little", signed=True) << zeros)
        pos += size
    r.skip(pos - start)
    return values


#: An integer's head: its trailing zero bits and the length of its bytes.
_INTEGER_HEAD = struct.Struct("<II")
