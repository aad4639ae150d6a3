"""CategoricalSketch: a mergeable summary of one string feature over a window.

Counts are exact while the number of distinct values stays at or below ``max_exact``; past that,
the sketch switches for good to a DataSketches ``frequent_strings_sketch`` (error-bounded
heavy-hitter estimates, a map of at most ``2**lg_max_map_size`` entries).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import datasketches as ds

from driftwarden.errors import SketchError
from sketches._values import count_strings
from sketches.serialization import KIND_CATEGORICAL, Reader, Writer, wrap_native

_NO_FALSE_NEGATIVES = ds.frequent_items_error_type.NO_FALSE_NEGATIVES


class CategoricalSketch:
    """Mergeable sketch of a categorical (string) feature: exact counts, then frequent items.

    Args:
        max_exact: distinct values kept exactly before switching to frequent-items estimates.
        lg_max_map_size: log2 of the frequent-items map size (12 -> 4096 entries).
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

    def __init__(self, max_exact: int = 1000, lg_max_map_size: int = 12, name: str | None = None) -> None:
        if max_exact < 0:
            raise ValueError(f"max_exact must be >= 0, got {max_exact}")
        if not 3 <= lg_max_map_size <= 30:
            raise ValueError(f"lg_max_map_size must be between 3 and 30, got {lg_max_map_size}")
        self.max_exact, self.lg_max_map_size, self.name = int(max_exact), int(lg_max_map_size), name
        self._reset()

    def _reset(self) -> None:
        self._exact: Counter | None = Counter()
        self._fi: ds.frequent_strings_sketch | None = None
        self._n = 0
        self.nulls = 0

    # ---------------------------------------------------------------- update / merge
    def update(self, values: Any) -> CategoricalSketch:
        """Add a batch of values (sequence, numpy object array or Arrow array of str|None)."""
        counts, nulls = count_strings(values, self.name)
        self.nulls += nulls
        self._add_counts(counts)
        return self

    def update_nulls(self, count: int) -> CategoricalSketch:
        """Count ``count`` nulls without values."""
        if count < 0:
            raise SketchError(f"null count must be >= 0, got {count}")
        self.nulls += int(count)
        return self

    def _add_counts(self, counts: Counter) -> None:
        self._n += sum(counts.values())
        if self._exact is not None:
            self._exact.update(counts)
            if len(self._exact) > self.max_exact:
                self._to_frequent_items()
            return
        for item, weight in counts.items():
            self._fi.update(item, weight)

    def _to_frequent_items(self) -> None:
        self._fi = ds.frequent_strings_sketch(self.lg_max_map_size)
        for item, weight in self._exact.items():
            self._fi.update(item, weight)
        self._exact = None

    def merge(self, other: CategoricalSketch) -> CategoricalSketch:
        """Fold ``other`` into this sketch (in place) and return self."""
        if not isinstance(other, CategoricalSketch) or (
                other.max_exact, other.lg_max_map_size) != (self.max_exact, self.lg_max_map_size):
            raise SketchError(f"cannot merge {type(other).__name__} into {self!r}: settings differ")
        self.nulls += other.nulls
        if other._exact is not None:
            self._add_counts(other._exact)
            return self
        if self._exact is not None:
            self._to_frequent_items()
        self._fi.merge(other._fi)
        self._n += other._n
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
        """True while the counts are exact (distinct values <= ``max_exact``)."""
        return self._exact is not None

    def frequencies(self) -> dict[str, int]:
        """Count per value: exact, or frequent-items estimates (no false negatives) once past ``max_exact``."""
        if self._exact is not None:
            return dict(self._exact)
        rows = self._fi.get_frequent_items(_NO_FALSE_NEGATIVES)
        return {item: int(estimate) for item, estimate, _lower, _upper in rows}

    def estimate(self, item: str) -> int:
        """Count (or estimate) of one value; 0 if never seen (or evicted from the frequent-items map)."""
        if self._exact is not None:
            return self._exact.get(item, 0)
        return int(self._fi.get_estimate(item))

    def new_category_share(self, reference: CategoricalSketch) -> float:
        """Share of this sketch's non-null values whose category the reference never saw (NaN if none)."""
        if self._n == 0:
            return float("nan")
        new = sum(c for item, c in self.frequencies().items() if reference.estimate(item) == 0)
        return new / self._n

    # ---------------------------------------------------------------- serialization
    def serialize(self) -> bytes:
        """Encode as versioned bytes (our frame around the frequent-items bytes when approximate)."""
        w = Writer(KIND_CATEGORICAL).pack("QBQQ?", self.max_exact, self.lg_max_map_size,
                                          self._n, self.nulls, self.is_exact)
        if self._exact is None:
            return w.blob(self._fi.serialize()).getvalue()
        w.pack("Q", len(self._exact))
        for item, c in self._exact.items():
            w.text(item).pack("Q", c)
        return w.getvalue()

    @classmethod
    def deserialize(cls, data: bytes) -> CategoricalSketch:
        """Decode bytes written by :meth:`serialize`."""
        r = Reader(data, (KIND_CATEGORICAL,))
        max_exact, lg, n, nulls, exact = r.unpack("QBQQ?")
        sk = cls(max_exact, lg)
        sk._n, sk.nulls = n, nulls
        if exact:
            (size,) = r.unpack("Q")
            sk._exact = Counter({r.text(): r.unpack("Q")[0] for _ in range(size)})
        else:
            sk._exact = None
            sk._fi = wrap_native("frequent_strings", ds.frequent_strings_sketch.deserialize, r.blob())
        r.done()
        return sk

    def __repr__(self) -> str:
        return f"CategoricalSketch(max_exact={self.max_exact}, n={self._n}, exact={self.is_exact})"
