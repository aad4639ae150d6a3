"""CategoricalProfile: the reference side of a high-cardinality categorical feature.

A window's :class:`~sketches.categorical.CategoricalSketch` keeps at most ``max_exact`` values
(``FORMAT.md``, kind 7); past that a reference merged from such sketches cannot say whether a
value is new. The profile, built once per reference, can:

* ``membership``: a Bloom filter of every value the reference saw, ``bits`` sized from the
  reference's distinct count for a false-positive rate ``fpr`` (1% by default: 9.6 bits and 7
  probes per value). Probes use Kirsch-Mitzenmacher double hashing on two mixes of
  :func:`sketches.hashing.value_hash` with fixed seeds, so it is deterministic across runs and
  machines. Filters of equal size merge by OR (leave-one-out calibration).
* ``limit``: values hashing at or above it are not judged. A profile built from raw events saw
  every value (limit ``2^63 - 1``); one built from stored window summaries saw only each window's
  kept values, and is complete exactly for values below the smallest window threshold, which
  becomes its limit.
* ``head``: the reference's ``head_size`` most frequent values with their exact counts, and the
  total ``n``; the gate compares the window's shares of these (plus one "other" bucket) instead
  of every distinct value.

A window's unseen share is read from its sketch alone: its kept values are a uniform sample of
its distinct values chosen by value hash (exact counts), so the share of kept mass whose value
the filter never saw (among values below ``limit``) estimates the share of events with an unseen
value. A false positive (probability ``fpr`` per unseen value) makes an unseen value count as seen.
"""

from __future__ import annotations

import math
from typing import Mapping, Sequence

import numpy as np

from driftwarden.core.errors import SerializationError, SketchError
from driftwarden.sketches.categorical import UNCAPPED, CategoricalSketch
from driftwarden.sketches.hashing import mix64, value_hashes
from driftwarden.sketches.serialization import KIND_CATEGORICAL_PROFILE, Reader, Writer

#: Default false-positive rate of the membership filter.
DEFAULT_FPR = 0.01
#: Default number of head values compared by the gate.
DEFAULT_HEAD_SIZE = 20
_SEED_1, _SEED_2 = np.uint64(0x6A09E667F3BCC908), np.uint64(0xBB67AE8584CAA73B)


def bloom_size(distinct: int, fpr: float = DEFAULT_FPR) -> tuple[int, int]:
    """Bits and probes of a Bloom filter holding ``distinct`` values at false-positive rate ``fpr``."""
    if not 0 < fpr < 1:
        raise ValueError(f"fpr must lie strictly between 0 and 1, got {fpr}")
    bits = max(64, math.ceil(-max(distinct, 1) * math.log(fpr) / math.log(2) ** 2))
    return bits, max(1, round(bits / max(distinct, 1) * math.log(2)))


class CategoricalProfile:
    """Bloom membership of every reference value, plus the head's exact counts (see module docstring).

    Example:
        >>> p = CategoricalProfile(*bloom_size(3), head=["a"]).add_counts({"a": 5, "b": 1, "c": 1})
        >>> p.contains(["a", "b", "zz"]).tolist(), p.n, p.head_counts.tolist()
        ([True, True, False], 7, [5])
        >>> CategoricalProfile.deserialize(p.serialize()).contains(["c"]).tolist()
        [True]
    """

    def __init__(self, bits: int, probes: int, head: Sequence[str] = (), limit: int = UNCAPPED) -> None:
        if bits < 8 or probes < 1:
            raise ValueError(f"a profile needs bits >= 8 and probes >= 1, got {bits} and {probes}")
        self.bits, self.probes, self.limit = int(bits), int(probes), int(limit)
        self.head = list(head)
        self._index = {v: i for i, v in enumerate(self.head)}
        self._filter = np.zeros((self.bits + 7) // 8, dtype=np.uint8)
        self.head_counts = np.zeros(len(self.head), dtype=np.int64)
        self.n = 0

    def add_counts(self, counts: Mapping[str, int]) -> CategoricalProfile:
        """Add values with their event counts (only values below ``limit`` enter the filter)."""
        values = list(counts)
        if values:
            hashes = value_hashes(values)
            kept = hashes < np.uint64(self.limit)
            positions = self._positions(hashes[kept]).ravel()
            np.bitwise_or.at(self._filter, positions >> np.uint64(3),
                             np.left_shift(1, (positions & np.uint64(7)).astype(np.uint8)).astype(np.uint8))
        for value, count in counts.items():
            i = self._index.get(value)
            if i is not None:
                self.head_counts[i] += count
        self.n += int(sum(counts.values()))
        return self

    def _positions(self, hashes: np.ndarray) -> np.ndarray:
        with np.errstate(over="ignore"):
            h1, h2 = mix64(hashes ^ _SEED_1), mix64(hashes ^ _SEED_2) | np.uint64(1)
            steps = np.arange(self.probes, dtype=np.uint64)
            return (h1[:, None] + steps[None, :] * h2[:, None]) % np.uint64(self.bits)

    def contains(self, values: Sequence[str]) -> np.ndarray:
        """Per value: True if the reference may have seen it (false positives at rate ~fpr)."""
        if not len(values):
            return np.zeros(0, dtype=bool)
        positions = self._positions(value_hashes(values))
        bits = (self._filter[positions >> np.uint64(3)] >> (positions & np.uint64(7)).astype(np.uint8)) & 1
        return bits.all(axis=1)

    def judged(self, values: Sequence[str]) -> np.ndarray:
        """Per value: True if the profile can tell whether it was seen (its hash is below ``limit``)."""
        return value_hashes(values) < np.uint64(self.limit) if len(values) else np.zeros(0, dtype=bool)

    def merge(self, other: CategoricalProfile) -> CategoricalProfile:
        """Fold ``other`` (same size, probes and head) into this profile: OR filters, add counts."""
        if (other.bits, other.probes, other.head) != (self.bits, self.probes, self.head):
            raise SketchError("cannot merge categorical profiles of different sizes or heads")
        self._filter |= other._filter
        self.head_counts += other.head_counts
        self.n += other.n
        self.limit = min(self.limit, other.limit)
        return self

    def copy(self) -> CategoricalProfile:
        """An independent copy."""
        return CategoricalProfile.deserialize(self.serialize())

    # ---------------------------------------------------------------- gate queries
    def unseen_share(self, window: CategoricalSketch) -> float:
        """Share of the window's judged kept mass whose value the reference never saw (NaN if none)."""
        counts = window.frequencies()
        values = list(counts)
        if not values:
            return float("nan")
        weights = np.array([counts[v] for v in values], dtype=np.float64)
        judged = self.judged(values)
        total = weights[judged].sum()
        if total == 0:
            return float("nan")
        return float(weights[judged & ~self.contains(values)].sum() / total)

    def head_labels(self, window: CategoricalSketch) -> list[str]:
        """The head values the window's sketch covers (its counts of them are exact), in head order."""
        return [v for v in self.head if window.covers(v)]

    def head_probs(self, window: CategoricalSketch) -> tuple[np.ndarray, np.ndarray]:
        """Aligned shares of the head values the window covers, plus one "other" bucket, on both sides."""
        judged = [i for i, v in enumerate(self.head) if window.covers(v)]
        r = np.array([self.head_counts[i] for i in judged] + [0], dtype=np.float64)
        w = np.array([window.estimate(self.head[i]) for i in judged] + [0], dtype=np.float64)
        r[-1], w[-1] = max(self.n - r.sum(), 0.0), max(window.n - w.sum(), 0.0)
        return r / max(r.sum(), 1.0), w / max(w.sum(), 1.0)

    def moved(self, window: CategoricalSketch, top: int = 10) -> list[tuple[str | None, float, float]]:
        """The ``top`` head values whose share moved most: ``(value, reference share, window share)``.

        ``None`` stands for every value outside the head (the "other" bucket); largest move first,
        ties in head order. Empty when the window has no values.

        >>> p = CategoricalProfile(*bloom_size(3), head=["a", "b"]).add_counts({"a": 6, "b": 2, "c": 2})
        >>> p.moved(CategoricalSketch().update(["a", "b", "b", "b"]), top=2)
        [('b', 0.2, 0.75), ('a', 0.6, 0.25)]
        """
        if window.n == 0:
            return []
        r, w = self.head_probs(window)
        rows = list(zip(self.head_labels(window) + [None], r.tolist(), w.tolist()))
        return sorted(rows, key=lambda row: -abs(row[2] - row[1]))[:top]

    @property
    def nbytes(self) -> int:
        """Bytes held: the filter, the head values and their counts."""
        return int(self._filter.nbytes + self.head_counts.nbytes + sum(len(v.encode("utf-8")) for v in self.head))

    # ---------------------------------------------------------------- serialization
    def serialize(self) -> bytes:
        """Versioned bytes: ``u64 bits, u32 probes, i64 limit, u64 n``, head texts, counts, filter."""
        w = Writer(KIND_CATEGORICAL_PROFILE).pack("QIqQ", self.bits, self.probes, self.limit, self.n)
        return w.texts(self.head).blob(self.head_counts.astype("<i8").tobytes()).blob(self._filter.tobytes()).getvalue()

    @classmethod
    def deserialize(cls, data: bytes) -> CategoricalProfile:
        """Decode bytes written by :meth:`serialize`."""
        r = Reader(data, (KIND_CATEGORICAL_PROFILE,))
        bits, probes, limit, n = r.unpack("QIqQ")
        head, counts, filt = r.texts(), r.blob(), r.blob()
        r.done()
        if len(counts) != 8 * len(head) or len(filt) != (bits + 7) // 8:
            raise SerializationError(f"corrupt categorical profile: {len(counts)} count bytes for {len(head)} head "
                                     f"values, {len(filt)} filter bytes for {bits} bits")
        profile = cls(bits, probes, head, limit)
        profile.head_counts = np.frombuffer(counts, dtype="<i8").astype(np.int64)
        profile._filter = np.frombuffer(filt, dtype=np.uint8).copy()
        profile.n = n
        return profile

    def __repr__(self) -> str:
        return f"CategoricalProfile(bits={self.bits}, probes={self.probes}, head={len(self.head)}, n={self.n})"


def window_profiles(window_counts: Sequence[Mapping[str, int]], head_size: int = DEFAULT_HEAD_SIZE,
                    fpr: float = DEFAULT_FPR, limit: int = UNCAPPED) -> list[CategoricalProfile]:
    """One profile per reference window, all sized for the windows' union and sharing one head.

    The head is the ``head_size`` values of largest total count below ``limit`` (ties by value);
    merging the returned profiles gives the whole reference's profile.
    """
    totals: dict[str, int] = {}
    for counts in window_counts:
        for value, count in counts.items():
            totals[value] = totals.get(value, 0) + count
    values = list(totals)
    below = set(np.asarray(values, dtype=object)[value_hashes(values) < np.uint64(limit)].tolist()) if values else set()
    head = sorted((v for v in values if v in below), key=lambda v: (-totals[v], v))[:head_size]
    bits, probes = bloom_size(len(below), fpr)
    return [CategoricalProfile(bits, probes, head, limit).add_counts(counts) for counts in window_counts]


def merged_profile(profiles: Sequence[CategoricalProfile]) -> CategoricalProfile:
    """The merge of several window profiles (a new object)."""
    merged = profiles[0].copy()
    for profile in profiles[1:]:
        merged.merge(profile)
    return merged
