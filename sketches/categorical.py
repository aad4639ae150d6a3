"""CategoricalSketch: a deterministic, exactly mergeable summary of one string feature over a window.

Counts are exact while at most ``max_exact`` distinct values are seen. Past that, the sketch keeps
the ``max_exact`` values with the smallest value hash (``sketches.hashing.value_hash``) and their
exact counts: a uniform sample of the distinct values, chosen by the values themselves, so the
result depends only on the set of events, never on their order or on how partials were merged
(``sketches/FORMAT.md``, kind 7; the Java aggregate writes the same bytes). The mass of the other
values is known exactly in total (``n`` minus the kept counts).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from driftwarden.core.errors import SerializationError, SketchError
from driftwarden.sketches._values import check_string_column, count_strings
from driftwarden.sketches.hashing import value_hash, value_hashes
from driftwarden.sketches.serialization import KIND_CATEGORICAL_CAPPED, Reader, Writer

#: ``threshold`` while nothing was dropped: every 63-bit value hash is below it.
UNCAPPED = 2 ** 63 - 1
#: Distinct values kept with exact counts by default.
DEFAULT_MAX_EXACT = 1000


class CategoricalSketch:
    """Mergeable sketch of a categorical (string) feature: exact counts, capped by value hash.

    Args:
        max_exact: most distinct values kept with their exact counts.
        name: optional feature name, quoted in error messages.

    Example:
        >>> ref = CategoricalSketch().update(["a", "b", "a", None])
        >>> win = CategoricalSketch().update(["a", "c", "c", "b"])
        >>> ref.frequencies(), ref.nulls, ref.count, ref.is_exact
        ({'a': 2, 'b': 1}, 1, 4, True)
        >>> win.new_category_share(ref)
        0.5
        >>> CategoricalSketch.deserialize(win.serialize()).frequencies() == win.frequencies()
        True
    """

    def __init__(self, max_exact: int = DEFAULT_MAX_EXACT, name: str | None = None) -> None:
        if max_exact < 1:
            raise ValueError(f"max_exact must be >= 1, got {max_exact}")
        self.max_exact, self.name = int(max_exact), name
        self._reset()

    def _reset(self) -> None:
        self._counts: Counter = Counter()
        self._n = 0
        self.nulls = 0
        self.threshold = UNCAPPED  # values hashing at or above it are not kept
        self._hashes: dict[str, int] = {}  # value -> hash, filled once capped

    # ---------------------------------------------------------------- update / merge
    def update(self, values: Any) -> CategoricalSketch:
        """Add a batch of values (sequence, numpy object array or Arrow array of str|None)."""
        if isinstance(values, (pa.Array, pa.ChunkedArray)) and self._many_distinct(values):
            return self._update_arrow(values)
        counts, nulls = count_strings(values, self.name)
        self.nulls += nulls
        self._add_counts(counts)
        return self

    def _many_distinct(self, values: pa.Array | pa.ChunkedArray) -> bool:
        """Whether a large batch's first values already hold more than half ``max_exact`` distinct ones.

        Only picks the faster of two paths that give the same state: counting every distinct value
        (few of them) or hashing every value (many).
        """
        if len(values) <= 2 * self.max_exact or not pa.types.is_string(values.type):
            return False
        return pc.count_distinct(values.slice(0, self.max_exact)).as_py() > self.max_exact // 2

    def _update_arrow(self, values: pa.Array | pa.ChunkedArray) -> CategoricalSketch:
        """Arrow batch: hash every value on the Arrow buffers and count only the candidates as str.

        Only values among the ``max_exact + 1`` smallest distinct hashes below the threshold can
        survive the cap, so the rest is counted in ``n`` without being materialised or counted one
        by one: the same state as the plain path, at a cost that does not grow with the cardinality.
        """
        check_string_column(values, self.name)
        self.nulls += values.null_count
        present = values.drop_null()
        if isinstance(present, pa.ChunkedArray):
            present = present.combine_chunks()
        if not len(present) or pa.types.is_null(present.type):
            return self
        rows, hashes = self._candidates(present)
        self._n += len(present) - rows.size
        if rows.size:
            names, counts, own = self._count_rows(present.take(pa.array(rows)), hashes)
            if not self._counts and self.is_exact and len(names) > self.max_exact:  # _add_counts's result, sooner
                self._n += int(counts.sum())
                self._keep_smallest(names, counts, own)
            else:
                self._add_counts(dict(zip(names, counts.tolist())))
        return self

    def _candidates(self, present: pa.Array) -> tuple[np.ndarray, np.ndarray]:
        """Rows (and their hashes) at or below the (max_exact + 1)-th smallest distinct hash under the threshold."""
        hashes = value_hashes(present).view(np.int64)  # 63-bit: the same numbers as int64
        rows = None if self.is_exact else np.flatnonzero(hashes < self.threshold)
        pool = hashes if rows is None else hashes[rows]
        want = 4 * (self.max_exact + 1)  # rows that hold max_exact + 1 distinct values unless values repeat a lot
        step, chosen = pool.size // (4 * want), None
        if step > 1:  # a bound from every step-th hash, about ``want`` rows at or below it: no full partition
            near = np.flatnonzero(pool <= np.partition(pool[::step], want // step)[want // step])
            kth = self._kth(pool[near])
            if kth is not None:
                chosen = near[pool[near] <= kth]
        if chosen is None:
            chosen = np.flatnonzero(pool <= self._cut(pool)) if pool.size else np.empty(0, dtype=np.int64)
        chosen = chosen if rows is None else rows[chosen]
        return chosen, hashes[chosen]

    def _count_rows(self, taken: pa.Array, hashes: np.ndarray) -> tuple[list[str], np.ndarray, np.ndarray]:
        """The distinct values among ``taken`` (whose row hashes are ``hashes``), their counts and hashes."""
        encoded = pc.dictionary_encode(taken)
        codes, names = encoded.indices.to_numpy(), encoded.dictionary
        own = np.empty(len(names), dtype=np.int64)
        own[codes] = hashes  # equal values hash alike: any row of a value gives its hash
        return names.to_numpy(zero_copy_only=False).tolist(), np.bincount(codes, minlength=len(names)), own

    def _kth(self, hashes: np.ndarray) -> int | None:
        """The (max_exact + 1)-th smallest distinct hash; None when there are fewer distinct hashes."""
        smallest = 4 * (self.max_exact + 1)
        if hashes.size > smallest:  # the smallest few thousand hold it unless values repeat a lot
            distinct = np.unique(np.partition(hashes, smallest - 1)[:smallest])
            if distinct.size > self.max_exact:
                return int(distinct[self.max_exact])
        distinct = np.unique(hashes)
        return int(distinct[self.max_exact]) if distinct.size > self.max_exact else None

    def _cut(self, hashes: np.ndarray) -> int:
        """The (max_exact + 1)-th smallest distinct hash (the largest one when there are fewer)."""
        kth = self._kth(hashes)
        return int(hashes.max()) if kth is None else kth

    def update_nulls(self, count: int) -> CategoricalSketch:
        """Count ``count`` nulls without values."""
        if count < 0:
            raise SketchError(f"null count must be >= 0, got {count}")
        self.nulls += int(count)
        return self

    def _add_counts(self, counts: Counter | dict, threshold: int = UNCAPPED) -> None:
        self._n += sum(counts.values())
        if threshold < self.threshold:  # the other side dropped every value hashing at or above it
            self.threshold = threshold
            self._counts = Counter(self._below(self._counts, threshold))
        if self.threshold == UNCAPPED:
            self._counts.update(counts)
        else:
            self._counts.update(self._below(counts, self.threshold))
        if len(self._counts) > self.max_exact:
            self._cap()

    def _hashes_of(self, values: list[str]) -> np.ndarray:
        """Value hashes of ``values`` (int64), vectorised (the cache holds only kept values)."""
        if len(values) <= 64:
            return np.fromiter(map(self._hash, values), dtype=np.int64, count=len(values))
        return value_hashes(values).view(np.int64)

    def _below(self, counts: Counter | dict, threshold: int) -> dict[str, int]:
        values = list(counts)
        keep = self._hashes_of(values) < threshold
        return {v: counts[v] for v, k in zip(values, keep.tolist()) if k}

    def _hash(self, value: str) -> int:
        h = self._hashes.get(value)
        if h is None:
            h = self._hashes[value] = value_hash(value)
        return h

    def _cap(self) -> None:
        """Keep the values hashing below the (max_exact + 1)-th smallest hash, which becomes the threshold."""
        values = list(self._counts)
        self._keep_smallest(values, np.fromiter(self._counts.values(), np.int64, len(values)), self._hashes_of(values))

    def _keep_smallest(self, values: list[str], counts: np.ndarray, hashes: np.ndarray) -> None:
        """Hold, of ``values`` (more than max_exact), those hashing below the (max_exact + 1)-th smallest hash."""
        order = np.argsort(hashes, kind="stable")
        self.threshold = int(hashes[order[self.max_exact]])
        # strictly below: on a (63-bit) hash tie at the threshold every tied value goes, as in FORMAT.md
        kept = order[: self.max_exact][hashes[order[: self.max_exact]] < self.threshold]
        names = [values[i] for i in kept.tolist()]
        self._counts = Counter(dict(zip(names, counts[kept].tolist())))
        self._hashes = dict(zip(names, hashes[kept].tolist()))

    def merge(self, other: CategoricalSketch) -> CategoricalSketch:
        """Fold ``other`` into this sketch (in place) and return self; exact and order-independent."""
        if not isinstance(other, CategoricalSketch) or other.max_exact != self.max_exact:
            raise SketchError(f"cannot merge {type(other).__name__} into {self!r}: settings differ")
        self.nulls += other.nulls
        self._add_counts(other._counts, other.threshold)
        self._n += other._n - sum(other._counts.values())  # the values other did not keep
        return self

    # ---------------------------------------------------------------- queries
    @property
    def is_empty(self) -> bool:
        """True when nothing at all (not even a null) was seen."""
        return self.count == 0

    @property
    def n(self) -> int:
        """Number of non-null values."""
        return self._n

    @property
    def count(self) -> int:
        """All values seen, nulls included."""
        return self._n + self.nulls

    @property
    def missing(self) -> int:
        """Nulls: the count the missing rate is computed from."""
        return self.nulls

    @property
    def is_exact(self) -> bool:
        """True while every distinct value is kept (at most ``max_exact`` seen)."""
        return self.threshold == UNCAPPED

    def frequencies(self) -> dict[str, int]:
        """Exact count per kept value (every value while :attr:`is_exact`)."""
        return dict(self._counts)

    def estimate(self, item: str) -> int:
        """Exact count of one value; 0 if never seen or not kept."""
        return self._counts.get(item, 0)

    def covers(self, item: str) -> bool:
        """True when this sketch would have kept ``item`` had it been seen (its hash is below the cap)."""
        return self.is_exact or self._hash(item) < self.threshold

    def new_category_share(self, reference: CategoricalSketch) -> float:
        """Share of this sketch's non-null values whose category the reference never saw (NaN if none).

        Once either side is capped, the share is measured on the values both sides would keep.
        """
        if self._n == 0:
            return float("nan")
        if self.is_exact and reference.is_exact:
            return sum(c for item, c in self._counts.items() if item not in reference._counts) / self._n
        judged = {item: c for item, c in self._counts.items() if reference.covers(item)}
        total = sum(judged.values())
        if total == 0:
            return float("nan")
        return sum(c for item, c in judged.items() if item not in reference._counts) / total

    def copy(self) -> CategoricalSketch:
        """An independent copy, the same as ``deserialize(serialize())`` (values in the order their bytes
        sort, as decoding gives them) without encoding them.

        >>> sk = CategoricalSketch(name="c").update(["b", "a", "b", None])
        >>> sk.copy().serialize() == sk.serialize(), list(sk.copy().frequencies())
        (True, ['a', 'b'])
        """
        copy = type(self)(self.max_exact, self.name)
        copy._n, copy.nulls, copy.threshold = self._n, self.nulls, self.threshold
        copy._counts = Counter({value: self._counts[value] for value in _by_bytes(self._counts)})
        return copy

    # ---------------------------------------------------------------- serialization
    def serialize(self) -> bytes:
        """Encode as versioned bytes (``sketches/FORMAT.md``, kind 7)."""
        items = _by_bytes(self._counts)
        w = Writer(KIND_CATEGORICAL_CAPPED).pack("IQQq", self.max_exact, self._n, self.nulls, self.threshold)
        counts = b"".join(int(self._counts[v]).to_bytes(8, "little", signed=True) for v in items)
        return w.texts(items).blob(counts).getvalue()

    @classmethod
    def deserialize(cls, data: bytes) -> CategoricalSketch:
        """Decode bytes written by :meth:`serialize` (or by the Java aggregate)."""
        r = Reader(data, (KIND_CATEGORICAL_CAPPED,))
        max_exact, n, nulls, threshold = r.unpack("IQQq")
        sk = cls(max_exact)
        sk._n, sk.nulls, sk.threshold = n, nulls, threshold
        items, raw = r.texts(), r.blob()
        r.done()
        if len(raw) != 8 * len(items):
            raise SerializationError(f"corrupt category counts: {len(raw)} bytes for {len(items)} values")
        counts = np.frombuffer(raw, dtype="<i8").tolist()  # Python ints, as int.from_bytes(..., signed=True)
        sk._counts = Counter(dict(zip(items, counts)))
        return sk

    def __repr__(self) -> str:
        return f"CategoricalSketch(max_exact={self.max_exact}, n={self._n}, exact={self.is_exact})"


def _by_bytes(values) -> list[str]:
    """``values`` sorted by their UTF-8 bytes (the order the frame stores them in)."""
    return sorted(values, key=lambda v: v.encode("utf-8"))
