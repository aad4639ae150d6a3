"""HistogramSketch: a deterministic, exactly mergeable summary of one numeric feature.

Finite values are counted in log-linear buckets fixed by their IEEE-754 bits (the top bits of the
magnitude: with ``P`` mantissa bits kept, 2^P buckets per power of two, each 2^-P wide relative to
its value), coarsened uniformly, one bit at a time, while more than ``max_buckets`` buckets are
occupied. ``P`` defaults to 52, i.e. every distinct value starts in a bucket of its own: the data's
spread decides the resolution (a feature with 50 distinct integers stays exact; N(1e6, 1) keeps
about 2^-10-wide buckets; N(0, 1) settles near 2^-5 relative width). The result
depends only on the set of values: not on their order, not on how they were split into partials
and merged. That is what lets the live job (Java, many subtasks), replay and a rerun reach
bit-identical decisions; the byte format is ``sketches/FORMAT.md`` (kind 25; kinds 20 and 6 are still read).

Error: counts are exact per bucket, so the CDF is exact at every bucket edge and, inside a
bucket, off by at most that bucket's mass (``rank_error``: the largest bucket's share). Quantiles
are within one bucket.
Null, NaN, +inf and -inf are counted exactly; min and max are exact.
"""

from __future__ import annotations

import math
import struct
from typing import Any, Callable, Hashable, Sequence

import numpy as np
from numpy.typing import ArrayLike

from driftwarden.core.errors import SerializationError, SketchError
from driftwarden.sketches._values import as_float_array
from driftwarden.sketches.serialization import (BLOB_SIZE, FORMAT_VERSION, FRAME_HEAD, KIND_NUMERIC_HIST,
                                                KIND_NUMERIC_HIST_PACKED, KIND_NUMERIC_HIST_VARINT, MAGIC, Reader,
                                                Writer, decode_varints_many)

_INF_BITS = 0x7FF0000000000000
#: Mantissa bits kept before any coarsening: 52, every distinct value starts in its own bucket.
DEFAULT_PRECISION = 52
#: Occupied buckets a segment's histogram keeps at least when it is brought to its whole window's
#: resolution (:func:`segment_shift`), so a segment narrower than the window keeps resolution of its own.
SEGMENT_MIN_BUCKETS = 256


class HistogramSketch:
    """Log-linear histogram of a numeric feature plus exact null/NaN/inf counts, min and max.

    Args:
        precision: mantissa bits kept before any coarsening (0..52; 52 = exact values).
        max_buckets: most occupied buckets before coarsening by one bit (>= 16).
        name: optional feature name, quoted in error messages.

    Example:
        >>> sk = HistogramSketch().update(np.array([1.0, 2.0, np.nan, np.inf])).update([3.0, None])
        >>> sk.n, sk.count, sk.nulls, sk.nans, sk.pos_inf
        (3, 6, 1, 1, 1)
        >>> float(sk.cdf([2.5])[0]), float(sk.quantiles([0.0, 1.0])[1])
        (0.6666666666666666, 3.0)
        >>> a, b = HistogramSketch().update([5.0, 1.0]), HistogramSketch().update([3.0])
        >>> a.merge(b).serialize() == HistogramSketch().update([3.0, 1.0, 5.0]).serialize()
        True
    """

    def __init__(self, precision: int = DEFAULT_PRECISION, max_buckets: int = 1024, name: str | None = None) -> None:
        if not 0 <= int(precision) <= 52:
            raise ValueError(f"precision must be between 0 and 52, got {precision}")
        if int(max_buckets) < 16:
            raise ValueError(f"max_buckets must be >= 16, got {max_buckets}")
        self.precision, self.max_buckets, self.name = int(precision), int(max_buckets), name
        self._reset()

    def _reset(self) -> None:
        self.shift = 0
        self._keys = np.empty(0, np.int64)
        self._counts = np.empty(0, np.int64)
        self.nulls = self.nans = self.pos_inf = self.neg_inf = 0
        self.min = self.max = np.nan
        self._forget()

    def _forget(self) -> None:
        """Drop what is derived from the buckets (edges, CDF curve, n, std, what :meth:`remember` kept): they changed."""
        self._edges: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
        self._curve: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None = None
        self._std: float | None = None
        self._derived: dict = {}  # remember()
        self._n: int | None = None

    # ---------------------------------------------------------------- update / merge
    def update(self, values: Any) -> HistogramSketch:
        """Add a batch of values (numpy array, Arrow array or sequence of float|None)."""
        x, nulls = as_float_array(values, self.name)
        self.nulls += nulls
        finite = np.isfinite(x)
        if not finite.all():
            self.nans += int(np.isnan(x).sum())
            self.pos_inf += int((x == np.inf).sum())
            self.neg_inf += int((x == -np.inf).sum())
            x = x[finite]
        if x.size:
            keys, counts = np.unique(bucket_keys(x, self.precision) >> self.shift, return_counts=True)
            self._add(keys, counts.astype(np.int64), float(x.min()) + 0.0, float(x.max()) + 0.0)
        return self

    def update_nulls(self, count: int) -> HistogramSketch:
        """Count ``count`` nulls without values."""
        if count < 0:
            raise SketchError(f"null count must be >= 0, got {count}")
        self.nulls += int(count)
        return self

    def merge(self, other: HistogramSketch) -> HistogramSketch:
        """Fold ``other`` into this sketch (in place) and return self; exact and order-independent."""
        if not isinstance(other, HistogramSketch) or other.precision != self.precision \
                or other.max_buckets != self.max_buckets:
            raise SketchError(f"cannot merge {other!r} into {self!r}: settings differ")
        self.nulls += other.nulls
        self.nans += other.nans
        self.pos_inf += other.pos_inf
        self.neg_inf += other.neg_inf
        if other._keys.size:
            if other.shift > self.shift:
                self._coarsen(other.shift - self.shift)
            self._add(other._keys >> (self.shift - other.shift), other._counts, other.min, other.max)
        return self

    def _add(self, keys: np.ndarray, counts: np.ndarray, lo: float, hi: float) -> None:
        self._keys, self._counts = _combine(np.concatenate([self._keys, keys]), np.concatenate([self._counts, counts]))
        self.min = lo if np.isnan(self.min) else min(self.min, lo)
        self.max = hi if np.isnan(self.max) else max(self.max, hi)
        self._coarsen(steps_to_fit(self._keys, self.max_buckets))
        self._forget()

    def coarsen_to(self, shift: int) -> HistogramSketch:
        """Bring the buckets to resolution ``shift`` (>= :attr:`shift`: each bucket's count goes to its key
        ``>> (shift - self.shift)``, counts stay exact) in place and return self."""
        if shift < self.shift:
            raise SketchError(f"cannot refine a histogram at shift {self.shift} to shift {shift}")
        self._coarsen(shift - self.shift)
        return self

    def _coarsen(self, bits: int) -> None:
        if bits > 0:
            self.shift += bits
            self._keys, self._counts = _sum_runs(self._keys >> bits, self._counts)  # >> keeps sorted keys sorted
            self._forget()

    # ---------------------------------------------------------------- counts
    @property
    def is_empty(self) -> bool:
        """True when nothing at all (not even a null) was seen."""
        return self.count == 0

    @property
    def n(self) -> int:
        """Number of finite values in the histogram."""
        if self._n is None:
            self._n = int(self._counts.sum())
        return self._n

    @property
    def count(self) -> int:
        """All values seen: finite, nulls, NaN and infinities."""
        return self.n + self.missing

    @property
    def missing(self) -> int:
        """Values without a usable number (null, NaN, +inf, -inf)."""
        return self.nulls + self.nans + self.pos_inf + self.neg_inf

    @property
    def buckets(self) -> int:
        """Occupied buckets."""
        return int(self._keys.size)

    @property
    def mean(self) -> float:
        """Mean of the finite values from bucket mid-points (within one bucket width); NaN if none."""
        if not self._keys.size:
            return np.nan
        mid = self._midpoints()
        with np.errstate(over="ignore"):
            mean = float(np.dot(self._counts, mid) / self.n)
        return mean if math.isfinite(mean) else float(np.dot(self._counts / self.n, mid))  # values near 1e308

    @property
    def std(self) -> float:
        """Population standard deviation from bucket mid-points; NaN when there are no values."""
        if not self._keys.size:
            return np.nan
        if self._std is None:
            with np.errstate(over="ignore"):  # values near 1e308: an infinite spread, never NaN
                variance = np.dot(self._counts, (self._midpoints() - self.mean) ** 2) / self.n
            self._std = float(np.sqrt(max(variance, 0.0)))
        return self._std

    def _midpoints(self) -> np.ndarray:
        """Each occupied bucket's mid-point (finite also for buckets near the largest floats)."""
        lower, upper, _ = self._bucket_edges()
        with np.errstate(over="ignore"):
            mid = (lower + upper) / 2
        overflow = ~np.isfinite(mid)
        if overflow.any():
            mid[overflow] = lower[overflow] / 2 + upper[overflow] / 2
        return mid

    @property
    def rank_error(self) -> float:
        """Largest bucket's share of the values: the CDF's error inside a bucket (exact at the edges)."""
        n = self.n
        return float(self._counts.max() / n) if n else 0.0

    def bucket_counts(self) -> tuple[np.ndarray, np.ndarray]:
        """The occupied buckets' sorted keys (at :attr:`shift`) and their counts, read-only."""
        keys, counts = self._keys.view(), self._counts.view()
        keys.flags.writeable = counts.flags.writeable = False
        return keys, counts

    def counts_at(self, shift: int) -> tuple[np.ndarray, np.ndarray]:
        """Sorted bucket keys and exact counts at a resolution ``shift`` >= :attr:`shift` (coarser or same)."""
        if shift < self.shift:
            raise SketchError(f"cannot refine a histogram at shift {self.shift} to shift {shift}")
        return _sum_runs(self._keys >> (shift - self.shift), self._counts)  # >> keeps sorted keys sorted

    # ---------------------------------------------------------------- distribution queries
    def cdf(self, xs: ArrayLike) -> np.ndarray:
        """Fraction of the finite values <= each x (linear inside a bucket); NaN if empty or x is NaN."""
        x = np.asarray(xs, dtype=np.float64).ravel()
        if not self._keys.size:
            return np.full(x.shape, np.nan)
        knots, ranks, distinct, at_distinct = self._cdf_curve()
        if xs is distinct:  # at its own support (gate.ks_estimate of a reference): part of the curve
            return at_distinct.copy()
        out = curve_at(x, knots, ranks)
        out[np.isnan(x)] = np.nan
        return out

    def quantiles(self, qs: ArrayLike) -> np.ndarray:
        """Values at normalised ranks ``qs`` in [0, 1] (linear inside a bucket); NaN if empty.

        (What a caller asks again and again of an unchanged sketch, it keeps with :meth:`remember`:
        the gate keeps a reference's PSI bins and EMD quantiles so.)
        """
        q = np.clip(np.asarray(qs, dtype=np.float64).ravel(), 0.0, 1.0)
        if not self._keys.size:
            return np.full(q.shape, np.nan)
        lower, upper, cum = self._bucket_edges()
        return quantiles_at(q, lower, upper, self._counts, cum, np.array([0, cum.size]))[0]

    def support(self) -> np.ndarray:
        """Sorted points where the CDF's slope can change: every bucket's edges."""
        if not self._keys.size:
            return np.empty(0)
        return self._cdf_curve()[2]

    def curve(self) -> tuple[np.ndarray, np.ndarray]:
        """The CDF as (knots, ranks), read-only: ``curve_at(x, knots, ranks)`` is :meth:`cdf` at x (but at NaN);
        computed once per sketch state. Needs at least one finite value."""
        knots, ranks, _, _ = self._cdf_curve()
        return knots, ranks

    def _cdf_curve(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The CDF as a piecewise-linear curve through (knot, rank) points (:func:`cdf_curves`), the
        distinct knots and the CDF at each (the rank after the last of its repeats, what ``np.interp``
        gives there). Computed once per sketch state: a reference's curve serves every window it judges.
        """
        if self._curve is None:
            lower, upper, cum = self._bucket_edges()
            knots, ranks, last = cdf_curves(lower, upper, self._counts, cum, np.array([0, cum.size]))
            self._curve = (knots, ranks, knots[last], ranks[last])
            for part in self._curve:
                part.flags.writeable = False
        return self._curve

    def _bucket_edges(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Each bucket's value range (clipped to [min, max]) and cumulative counts."""
        if self._edges is None:
            self._edges = (*bucket_edges(self._keys, self.shift, self.precision, self.min, self.max),
                           np.cumsum(self._counts))
            for part in self._edges:
                part.flags.writeable = False
        return self._edges

    def remember(self, key: Hashable, compute: Callable[[], Any]) -> Any:
        """``compute()``, computed once per ``key`` until the sketch changes.

        For what a caller derives from a sketch that is queried again and again unchanged: the gate
        remembers a reference's PSI bins and EMD scale, which every window it judges shares.

        >>> sk = HistogramSketch().update([1.0, 2.0])
        >>> sk.remember("spread", lambda: sk.max - sk.min), sk.remember("spread", lambda: -1.0)
        (1.0, 1.0)
        >>> sk.update([5.0]).remember("spread", lambda: sk.max - sk.min)
        4.0
        """
        if key not in self._derived:
            self._derived[key] = compute()
        return self._derived[key]

    def copy(self) -> HistogramSketch:
        """An independent copy, the same as ``deserialize(serialize())`` without encoding the buckets.

        >>> sk = HistogramSketch(name="x").update([1.0, 2.0, None])
        >>> sk.copy().serialize() == sk.serialize(), sk.copy().name
        (True, 'x')
        """
        copy = type(self)(self.precision, self.max_buckets, self.name)
        copy.shift, copy._keys, copy._counts = self.shift, self._keys.copy(), self._counts.copy()
        copy.nulls, copy.nans, copy.pos_inf, copy.neg_inf = self.nulls, self.nans, self.pos_inf, self.neg_inf
        copy.min, copy.max = self.min, self.max
        return copy

    # ---------------------------------------------------------------- serialization
    def serialize(self) -> bytes:
        """Encode as versioned bytes (``sketches/FORMAT.md``, kind 25): the keys as their first and
        the steps between them, and the counts, each as varints."""
        w = Writer(KIND_NUMERIC_HIST_VARINT).pack(_SETTINGS, self.precision, self.max_buckets, self.shift, self.n)
        w.pack(_TALLIES, self.nulls, self.nans, self.pos_inf, self.neg_inf, self.min, self.max)
        keys = self._keys.view(np.uint64)  # steps in 64-bit wrapping arithmetic, as the reader adds them back
        w.pack(_BUCKETS, keys.size, int(self._keys[0]) if keys.size else 0)
        return w.varints(np.diff(keys)).varints(self._counts.view(np.uint64)).getvalue()

    @classmethod
    def deserialize(cls, data: bytes) -> HistogramSketch:
        """Decode bytes written by :meth:`serialize` (or by the Java aggregate; kind 25, or 20 or 6 written before)."""
        r = Reader(data, (KIND_NUMERIC_HIST_VARINT, KIND_NUMERIC_HIST_PACKED, KIND_NUMERIC_HIST))
        precision, max_buckets, shift, n = r.unpack(_SETTINGS)
        sk = cls(precision, max_buckets)
        sk.shift = shift
        sk.nulls, sk.nans, sk.pos_inf, sk.neg_inf, sk.min, sk.max = r.unpack(_TALLIES)
        if r.kind == KIND_NUMERIC_HIST:
            sk._keys = np.frombuffer(r.blob(), dtype="<i8").astype(np.int64)
            sk._counts = np.frombuffer(r.blob(), dtype="<i8").astype(np.int64)
        else:
            sk._keys, sk._counts = _read_buckets(r, r.varints if r.kind == KIND_NUMERIC_HIST_VARINT else r.packed)
        sk._forget()
        r.done()
        if sk._keys.size != sk._counts.size or int(sk._counts.sum()) != n:
            raise SerializationError(f"corrupt histogram: {sk._keys.size} keys, {sk._counts.size} counts, n={n}")
        return sk

    @classmethod
    def deserialize_many(cls, blobs: Sequence[bytes]) -> list[HistogramSketch]:
        """:meth:`deserialize` of each of ``blobs``, the same sketches, with the varints of all of them (kind 25)
        decoded in one pass (:func:`serialization.decode_varints_many`): a segmented window has hundreds of
        small histograms. Any other kind, or bytes that are not a sound histogram, are decoded one by one
        (and refused with :meth:`deserialize`'s error)."""
        heads, steps, counts = [], [], []
        for data in blobs:
            parts = _varint_frame(data)
            if parts is None:  # another kind, or not a sound frame: each decoded (or refused) alone
                return [cls.deserialize(data) for data in blobs]
            heads.append(parts[0])
            steps.append(parts[1])
            counts.append(parts[2])
        sizes = np.array([head[-2] for head in heads], dtype=np.int64)
        try:
            keys, all_counts = _buckets_of_many(sizes, np.array([head[-1] for head in heads], dtype=np.int64),
                                                decode_varints_many(steps, np.maximum(sizes - 1, 0).tolist()),
                                                decode_varints_many(counts, sizes.tolist()).view(np.int64))
        except SerializationError:
            keys = None
        rows = np.concatenate(([0], np.cumsum(sizes)))
        if keys is None:
            return [cls.deserialize(data) for data in blobs]
        running = np.concatenate(([0], np.cumsum(all_counts)))
        if (running[rows[1:]] - running[rows[:-1]]).tolist() != [head[3] for head in heads]:  # each one's n
            return [cls.deserialize(data) for data in blobs]
        out = []
        for (precision, max_buckets, shift, _, *fields, _, _), a, b in zip(heads, rows[:-1], rows[1:]):
            sk = cls(precision, max_buckets)
            sk.shift = shift
            sk.nulls, sk.nans, sk.pos_inf, sk.neg_inf, sk.min, sk.max = fields
            sk._keys, sk._counts = keys[a:b].copy(), all_counts[a:b].copy()
            sk._forget()
            out.append(sk)
        return out

    def __repr__(self) -> str:
        return f"HistogramSketch(precision={self.precision}, max_buckets={self.max_buckets}, n={self.n}, " \
               f"count={self.count})"


#: A numeric histogram's fields after its frame's head (sketches/FORMAT.md, kinds 25, 20 and 6), in ``struct``
#: formats: its settings and value count (precision, max_buckets, shift, n), its tallies and range (nulls, NaNs,
#: +inf, -inf, min, max), and in kinds 25 and 20 its bucket count and first key. :meth:`HistogramSketch.serialize`
#: writes them, :meth:`HistogramSketch.deserialize` and :func:`_varint_frame` read them.
_SETTINGS, _TALLIES, _BUCKETS = "BIBQ", "qqqqdd", "Iq"
#: A kind 25 frame up to its steps: the frame's head, the three above and the steps' length.
_VARINT_HEAD = struct.Struct("<" + FRAME_HEAD + _SETTINGS + _TALLIES + _BUCKETS + "I")


def _varint_frame(data: bytes) -> tuple[tuple, bytes, bytes] | None:
    """A kind 25 frame's header fields (``_SETTINGS``, ``_TALLIES``, ``_BUCKETS``), its steps' and its counts' varint bytes, read
    as :meth:`HistogramSketch.deserialize` reads them; None when the bytes are not exactly such a frame (another
    kind, a bad magic or version, truncated, or bytes left over)."""
    if len(data) < _VARINT_HEAD.size:
        return None
    head = _VARINT_HEAD.unpack_from(data)
    if head[0] != MAGIC or head[1] != FORMAT_VERSION or head[2] != KIND_NUMERIC_HIST_VARINT:
        return None
    steps_end = _VARINT_HEAD.size + head[-1]
    if steps_end + BLOB_SIZE.size > len(data):
        return None
    counts_end = steps_end + BLOB_SIZE.size + BLOB_SIZE.unpack_from(data, steps_end)[0]
    if counts_end != len(data):
        return None
    return head[3:-1], data[_VARINT_HEAD.size:steps_end], data[steps_end + BLOB_SIZE.size:counts_end]


def _read_buckets(r: Reader, integers: Callable[[int], np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """The sorted keys and counts of a kind 25 or 20 frame (the fields after the header), their steps and counts
    read by ``integers`` (``Reader.varints`` or ``Reader.packed``)."""
    size, first = r.unpack(_BUCKETS)
    steps = integers(max(size - 1, 0))
    counts = integers(size).view(np.int64)
    if not size:
        return np.empty(0, np.int64), counts
    keys = np.cumsum(np.concatenate((np.array([first]).view(np.uint64), steps))).view(np.int64)  # wraps as written
    if (keys[1:] <= keys[:-1]).any() or (counts <= 0).any():  # a step of 0, or one that wraps past the first
        raise SerializationError("corrupt histogram: keys not ascending or a count not positive")
    return keys, counts


def _buckets_of_many(sizes: np.ndarray, firsts: np.ndarray, steps: np.ndarray,
                     counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`_read_buckets` of several histograms at once: their keys (each the running sum of its first key
    and its steps, in 64-bit wrapping arithmetic) and counts end to end; a :class:`SerializationError` when
    any histogram's keys are not ascending or a count is not positive."""
    total = int(sizes.sum())
    starts = (np.cumsum(sizes) - sizes)[sizes > 0]
    increments = np.empty(total, np.uint64)
    is_first = np.zeros(total, dtype=bool)
    is_first[starts] = True
    increments[is_first] = firsts[sizes > 0].view(np.uint64)
    increments[~is_first] = steps
    running = np.cumsum(increments)  # wraps: each histogram's keys are this less the sum before its first
    before = np.repeat(running[starts] - increments[starts], sizes[sizes > 0])
    keys = (running - before).view(np.int64)
    ascending = keys[1:] > keys[:-1]
    if not (ascending | is_first[1:]).all() or (counts <= 0).any():
        raise SerializationError("corrupt histogram: keys not ascending or a count not positive")
    return keys, counts


def bucket_keys(x: np.ndarray, precision: int) -> np.ndarray:
    """Base bucket key of each finite value: its magnitude's top bits, sign-folded so keys sort like values."""
    magnitude = np.abs(x).view(np.int64) >> (52 - precision)  # |-0.0| is +0.0: one zero bucket
    return np.where(x < 0, ~magnitude, magnitude)


def bucket_lower(keys: np.ndarray, shift: int | np.ndarray, precision: int | np.ndarray) -> np.ndarray:
    """Lowest value of each bucket ``keys`` at ``shift`` (the next key's lower is a bucket's upper edge).

    ``shift`` and ``precision`` are one histogram's, or arrays of one per key (the buckets of several
    histograms side by side, as the gate judges many windows at once).
    """
    k = keys.astype(np.int64, copy=False)
    negative = k < 0
    drop = (52 - np.asarray(precision, dtype=np.int64)).astype(np.uint64)  # mantissa bits below the kept ones
    # bucket k >= 0 starts at base key k << shift; bucket ~p (< 0) covers -x for x up to base key p + 1
    magnitude = np.where(negative, -k, k).astype(np.uint64) << np.asarray(shift, dtype=np.uint64)
    magnitude = np.minimum(magnitude, np.uint64(_INF_BITS) >> drop)
    value = (magnitude << drop).view(np.float64)
    return np.where(negative, -value, value)


def bucket_edges(keys: np.ndarray, shift: int | np.ndarray, precision: int | np.ndarray,
                 low: float | np.ndarray, high: float | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each bucket's value range, clipped to its histogram's [min, max] (``shift``, ``precision``,
    ``low``, ``high``: one histogram's, or one per key for the buckets of several end to end)."""
    return (np.clip(bucket_lower(keys, shift, precision), low, high),
            np.clip(bucket_lower(keys + 1, shift, precision), low, high))  # the upper edge: the next key's lower


def cdf_curves(lower: np.ndarray, upper: np.ndarray, counts: np.ndarray, cum: np.ndarray,
               rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The CDF of each histogram whose buckets lie end to end (histogram i: bucket rows ``rows[i]:rows[i + 1]``,
    ``cum`` the counts accumulated within each) as a piecewise-linear curve: (knots, ranks) and a mask of
    the last knot of each run of equal knots within a histogram (where ``np.interp`` gives the curve's value).

    Each bucket adds two points: its lower edge at the fraction of values before it, its upper edge at
    the fraction up to it; between buckets the CDF is flat, and a bucket of no width is a jump (its
    repeated knot: ``np.interp`` takes the value after the jump, as x <= value counts it).
    """
    knots, ranks = np.empty(2 * lower.size), np.empty(2 * lower.size)
    knots[0::2], knots[1::2] = lower, upper
    ranks[0::2], ranks[1::2] = cum - counts, cum
    ranks /= np.repeat(cum[rows[1:] - 1], 2 * np.diff(rows))
    last = np.empty(knots.size, dtype=bool)  # knots are sorted within a histogram: the last of each run
    np.not_equal(knots[1:], knots[:-1], out=last[:-1])
    last[2 * rows[1:] - 1] = True
    return knots, ranks, last


def curve_at(x: np.ndarray, knots: np.ndarray, ranks: np.ndarray) -> np.ndarray:
    """A CDF curve (:func:`cdf_curves`' knots and ranks) at each x: ``np.interp(x, knots, ranks, 0, 1)``,
    also inside a bucket narrower than about 1e-308 (subnormal values), where np.interp's slope overflows
    and its value is infinite or NaN: such an x gets the rank at its fraction of the bucket's width.

    >>> curve_at(np.array([2e-310, 1.5]), np.array([0.0, 3e-310, 1.0, 2.0]), np.array([0.0, 0.5, 0.5, 1.0]))
    array([0.33333333, 0.75      ])
    """
    with np.errstate(over="ignore", invalid="ignore"):
        out = np.interp(x, knots, ranks, left=0.0, right=1.0)
    bad = ~np.isfinite(out) & ~np.isnan(x)
    if bad.any():
        j = np.clip(np.searchsorted(knots, x[bad], side="right") - 1, 0, knots.size - 2)
        width = knots[j + 1] - knots[j]
        fraction = np.clip((x[bad] - knots[j]) / np.where(width > 0, width, 1.0), 0.0, 1.0)
        out[bad] = ranks[j] + fraction * (ranks[j + 1] - ranks[j])
    return out


def curves_at(queries: Sequence[tuple[np.ndarray, np.ndarray, np.ndarray]]) -> np.ndarray:
    """:func:`curve_at` of each (x, knots, ranks) of ``queries``, end to end in one array: the same values, with
    np.interp's per-call work done once (its error state, and the check for a bucket too narrow for its slope,
    which :func:`curve_at` then redoes for the few curves that need it).

    >>> a = (np.array([0.5, 2e-310]), np.array([0.0, 3e-310, 1.0]), np.array([0.0, 0.5, 1.0]))
    >>> curves_at([a, a]).tolist() == np.concatenate([curve_at(*a), curve_at(*a)]).tolist()
    True
    """
    if not queries:
        return np.empty(0)
    with np.errstate(over="ignore", invalid="ignore"):
        parts = [np.interp(x, knots, ranks, left=0.0, right=1.0) for x, knots, ranks in queries]
    out = np.concatenate(parts)
    bad = ~np.isfinite(out)
    if bad.any():
        starts = np.cumsum([0] + [part.size for part in parts])
        for i in np.unique(np.searchsorted(starts, np.flatnonzero(bad), side="right") - 1).tolist():
            out[starts[i]:starts[i + 1]] = curve_at(*queries[i])
    return out


def quantiles_at(q: np.ndarray, lower: np.ndarray, upper: np.ndarray, counts: np.ndarray, cum: np.ndarray,
                 rows: np.ndarray) -> np.ndarray:
    """A (histograms, len(q)) array of each histogram's values at normalised ranks ``q`` (clipped to [0, 1]),
    linear inside a bucket; the buckets laid out as for :func:`cdf_curves`."""
    rank = q[np.newaxis, :] * cum[rows[1:] - 1, np.newaxis]
    j = np.stack([np.searchsorted(cum[a:b], r, side="left") for a, b, r in zip(rows[:-1], rows[1:], rank)])
    j = np.minimum(j + rows[:-1, np.newaxis], (rows[1:] - 1)[:, np.newaxis])
    before = cum[j] - counts[j]
    fraction = np.clip((rank - before) / counts[j], 0.0, 1.0)
    return lower[j] + fraction * (upper[j] - lower[j])


def segment_shift(segment: HistogramSketch, whole: HistogramSketch, min_buckets: int = SEGMENT_MIN_BUCKETS) -> int:
    """The resolution (shift) a segment's histogram is kept at in its window's summary: its whole window's
    (``whole``: the same feature over all the window's segments), but never coarser than the finest shift at
    which the segment fits ``min_buckets`` buckets, and never finer than it is. The live job's Java applies the
    same rule (``LogLinearHistogram.segmentShift``).

    A segment's buckets are then the window's, the resolution its global view is judged at (a bucket's relative
    width at most ``2 ** -(precision - whole.shift)``), unless the segment is narrow enough to fit fewer than
    ``min_buckets`` of them: it then stops at the finest resolution with at most ``min_buckets`` buckets (one with
    at most that many distinct values keeps them all). Most segments hold fewer events than ``max_buckets``, so
    without this every distinct value would keep a bucket of its own at full precision.

    >>> whole = HistogramSketch(max_buckets=64).update(np.arange(1.0, 10001.0))
    >>> wide = HistogramSketch(max_buckets=64).update(np.arange(1.0, 101.0))
    >>> narrow = HistogramSketch(max_buckets=64).update(np.linspace(500.0, 501.0, 101))
    >>> whole.shift, (wide.shift, segment_shift(wide, whole, 16)), (narrow.shift, segment_shift(narrow, whole, 16))
    (50, (48, 50), (39, 41))
    """
    if segment.precision != whole.precision or segment.max_buckets != whole.max_buckets:
        return segment.shift
    own_fit = segment.shift + steps_to_fit(segment._keys, min_buckets)
    return max(segment.shift, min(whole.shift, own_fit))


def merged_at_once(sketches: Sequence[HistogramSketch]) -> HistogramSketch | None:
    """The merge of ``sketches``: the state merging them one by one into a copy of the first gives, in one pass
    (their buckets added at the largest shift among them, then coarsened to fit); None when this does not apply
    (settings that differ, a sketch without finite values).

    >>> a, b, c = (HistogramSketch(max_buckets=16).update(np.arange(lo, lo + 40.0)) for lo in (0.0, 30.0, 500.0))
    >>> merged_at_once([a, b, c]).serialize() == a.copy().merge(b).merge(c).serialize()
    True
    """
    if not _mergeable(sketches):
        return None
    top, _at_top, keys, counts = _buckets_at_top(sketches)
    missing = _missing_counts(sketches).sum(axis=0)
    return _histogram_of(sketches[0], top, keys, counts, missing.tolist(),
                         float(min(s.min for s in sketches)), float(max(s.max for s in sketches)))


def merges_of_others(sketches: Sequence[HistogramSketch]) -> list[HistogramSketch] | None:
    """For each sketch, the merge of every other one: the state merging them one by one gives (a merge depends
    only on its sketches' values and resolutions), from their total instead of a merge per sketch; None when
    this does not apply (fewer than two sketches, settings that differ, a sketch without finite values).

    The merge of some histograms is their buckets added at the finest resolution at least as coarse as each
    (the largest shift among them), coarsened until at most ``max_buckets`` are occupied. So each sketch's
    others are the total's buckets at the largest shift less its own there, coarsened to fit; a sketch whose
    shift alone is the largest (its others may be finer) gets the others' merge made afresh.

    >>> a, b, c = (HistogramSketch(max_buckets=16).update(np.arange(lo, lo + 40.0)) for lo in (0.0, 30.0, 500.0))
    >>> others = merges_of_others([a, b, c])
    >>> others[0].serialize() == b.copy().merge(c).serialize(), others[2].serialize() == a.copy().merge(b).serialize()
    (True, True)
    """
    if len(sketches) < 2 or not _mergeable(sketches):
        return None
    top, at_top, keys, counts = _buckets_at_top(sketches)
    lows = _others_extreme(np.array([s.min for s in sketches]), np.minimum)
    highs = _others_extreme(np.array([s.max for s in sketches]), np.maximum)
    missing = _missing_counts(sketches)
    missing = missing.sum(axis=0) - missing
    shifts = np.array([s.shift for s in sketches])
    alone_on_top = np.count_nonzero(shifts == top) == 1
    others = []
    for i in range(len(sketches)):
        if alone_on_top and shifts[i] == top:
            others.append(merged_at_once([s for j, s in enumerate(sketches) if j != i]))
            continue
        own_keys, own_counts = at_top[i]
        left = counts.copy()
        left[np.searchsorted(keys, own_keys)] -= own_counts
        kept = np.flatnonzero(left)
        others.append(_histogram_of(sketches[-1 if i == 0 else 0], top, keys[kept], left[kept], missing[i].tolist(),
                                    lows[i], highs[i]))
    return others


def _mergeable(sketches: Sequence[HistogramSketch]) -> bool:
    """At least one sketch, all histograms of the same settings, each with finite values."""
    return bool(sketches) and all(type(s) is HistogramSketch and s._keys.size and s.precision == sketches[0].precision
                                  and s.max_buckets == sketches[0].max_buckets for s in sketches)


def _missing_counts(sketches: Sequence[HistogramSketch]) -> np.ndarray:
    """Each sketch's (nulls, NaN, +inf, -inf) counts, one row a sketch."""
    return np.array([(s.nulls, s.nans, s.pos_inf, s.neg_inf) for s in sketches], dtype=np.int64)


def _buckets_at_top(sketches: Sequence[HistogramSketch]) -> tuple[int, list, np.ndarray, np.ndarray]:
    """The largest shift among ``sketches``, each one's (keys, counts) at it, and their sum (sorted keys, counts)."""
    top = max(s.shift for s in sketches)
    at_top = [s.counts_at(top) if s.shift < top else (s._keys, s._counts) for s in sketches]
    keys, counts = _combine(np.concatenate([k for k, _ in at_top]), np.concatenate([c for _, c in at_top]))
    return top, at_top, keys, counts


def _histogram_of(like: HistogramSketch, shift: int, keys: np.ndarray, counts: np.ndarray, missing: list[int],
                  low: float, high: float) -> HistogramSketch:
    """A histogram of ``like``'s settings and name with these buckets at ``shift`` (coarsened to fit), missing
    counts (nulls, NaN, +inf, -inf), min and max."""
    sketch = HistogramSketch(like.precision, like.max_buckets, like.name)
    sketch.shift, sketch._keys, sketch._counts = shift, keys, counts
    sketch._coarsen(steps_to_fit(keys, sketch.max_buckets))
    sketch.nulls, sketch.nans, sketch.pos_inf, sketch.neg_inf = missing
    sketch.min, sketch.max = low, high
    return sketch


def _others_extreme(values: np.ndarray, extreme: np.ufunc) -> list[float]:
    """For each position, ``extreme`` (np.minimum or np.maximum) of every other value (at least two values)."""
    before = extreme.accumulate(values)
    after = extreme.accumulate(values[::-1])[::-1]
    others = np.concatenate([[after[1]], extreme(before[:-2], after[2:]), [before[-2]]])
    return [float(v) for v in others.tolist()]


def steps_to_fit(keys: np.ndarray, max_buckets: int) -> int:
    """The fewest shifts ``e`` that leave at most ``max_buckets`` distinct ``keys >> e`` (``keys`` sorted, distinct).

    The same shift as stepping one bit at a time while over ``max_buckets``, found in one pass (as the
    Java histogram does): neighbours ``a < b`` stay apart after ``>> e`` exactly when ``e <=`` the
    highest set bit of ``a ^ b``, so ``keys >> e`` has ``1 + #{neighbours whose highest differing bit
    >= e}`` distinct values.

    >>> steps_to_fit(np.array([0, 1, 2, 3, 8]), 2), steps_to_fit(np.array([0, 1, 2, 3, 8]), 5)
    (2, 0)
    """
    if keys.size <= max_buckets:
        return 0
    apart = highest_bit((keys[1:] ^ keys[:-1]).view(np.uint64))
    return min(int(np.partition(apart, apart.size - max_buckets)[apart.size - max_buckets]) + 1, 63)


def highest_bit(x: np.ndarray) -> np.ndarray:
    """Index of the highest set bit of each (non-zero) uint64, exactly (halves of 32 bits are exact as floats).

    >>> highest_bit(np.array([1, 2, 3, 2**53 - 1, 2**64 - 1], dtype=np.uint64)).tolist()
    [0, 1, 1, 52, 63]
    """
    high, low = x >> np.uint64(32), x & np.uint64(0xFFFFFFFF)
    in_half = np.frexp(np.where(high > 0, high, low).astype(np.float64))[1] - 1
    return np.where(high > 0, in_half + 32, in_half)


def _combine(keys: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sorted unique keys with the counts of equal keys added."""
    order = np.argsort(keys, kind="stable")
    return _sum_runs(keys[order], counts[order])


def _sum_runs(keys: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sorted ``keys`` made unique, the counts of each run of equal keys added."""
    if keys.size == 0:
        return keys.astype(np.int64), counts.astype(np.int64)
    starts = np.flatnonzero(np.concatenate([[True], keys[1:] != keys[:-1]]))
    return keys[starts], np.add.reduceat(counts, starts).astype(np.int64)
