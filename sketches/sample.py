"""EventSample: a deterministic, mergeable sample of a window's events for the deep tests.

Bottom-k sampling: every event gets a 63-bit key hashed from its coordinates and the window's seed
(``sketches.hashing.event_keys``), and the sample is the ``capacity`` events of smallest key with
the value of every configured feature. The keys are a pseudo-random permutation, so the sample
is uniform; they are a function of the event, so the sample is the same whatever the order of
the events, however they were split into partials, in Python and in the Java aggregate
(``sketches/FORMAT.md``, kind 26; kind 8 is still read). Merging two samples keeps the bottom ``capacity`` of the union,
which is also how windows merge into longer horizons.

A window summary samples its categorical features only (:func:`sampled_kinds`): a numeric
feature's deep tests read its histogram's exact counts, never a sample.

Example:
    >>> import numpy as np
    >>> kinds = {"x": "numeric", "c": "categorical"}
    >>> whole = EventSample(3, kinds).update(np.arange(6), {"x": np.arange(6.0), "c": list("abcdef")})
    >>> parts = [EventSample(3, kinds).update(np.arange(i, 6, 2), {"x": np.arange(i, 6, 2.0),
    ...                                                            "c": list("abcdef")[i::2]}) for i in (0, 1)]
    >>> merged = parts[0].merge(parts[1])
    >>> merged.serialize() == whole.serialize(), merged.feature("x").values.tolist()
    (True, [0.0, 1.0, 2.0])
"""

from __future__ import annotations

from functools import cached_property
from typing import Any, Callable, Mapping

import numpy as np
import pyarrow as pa

from driftwarden.core.errors import SerializationError, SketchError
from driftwarden.sketches.reservoir import ReservoirSample
from driftwarden.sketches.serialization import KIND_EVENT_SAMPLE, KIND_EVENT_SAMPLE_CODED, Reader, Writer

_KIND_CODES = {"numeric": 1, "categorical": 2}


def sampled_kinds(kinds: Mapping[str, str]) -> dict[str, str]:
    """The features a window summary samples: the categorical ones, in configured order.

    A numeric feature's deep tests read its histogram's exact counts, so its values in the sample
    had no reader (they were most of a segmented window's bytes).

    >>> sampled_kinds({"x": "numeric", "c": "categorical", "d": "categorical"})
    {'c': 'categorical', 'd': 'categorical'}
    """
    return {name: kind for name, kind in kinds.items() if kind == "categorical"}


def empty_feature_sample(name: str) -> ReservoirSample:
    """The deep-test sample of a feature the event sample leaves out: empty."""
    return ReservoirSample(1, 0, name)


class EventSample:
    """The ``capacity`` events of smallest key, with each configured feature's value.

    Args:
        capacity: most events kept (the model's ``sample_size``).
        kinds: feature name -> "numeric" | "categorical", in configured order.
    """

    def __init__(self, capacity: int, kinds: Mapping[str, str]) -> None:
        if capacity < 0:
            raise ValueError(f"capacity must be >= 0, got {capacity}")
        unknown = {k for k in kinds.values() if k not in _KIND_CODES}
        if unknown:
            raise ValueError(f"unknown feature kinds {sorted(unknown)}; valid kinds are {tuple(_KIND_CODES)}")
        self.capacity, self.kinds = int(capacity), dict(kinds)
        self.keys = np.empty(0, np.int64)
        self.columns: dict[str, np.ndarray] = {name: _empty(kind) for name, kind in self.kinds.items()}

    def update(self, keys: np.ndarray, columns: Mapping[str, Any]) -> EventSample:
        """Offer events: their keys and one column (numpy, Arrow or list) per configured feature."""
        keys = np.asarray(keys, dtype=np.int64)
        missing = [name for name in self.kinds if name not in columns]
        if missing:
            raise SketchError(f"event sample: no column for features {missing}")
        if keys.size:
            self._keep(keys, {name: _as_column(columns[name], kind, keys.size, name)
                              for name, kind in self.kinds.items()})
        return self

    def merge(self, other: EventSample) -> EventSample:
        """Fold ``other`` in (same features): the bottom ``capacity`` of the union, at the smaller of the two
        capacities (each side holds its own bottom-k, so the union's bottom at the smaller k is exact: a
        segment's sample cut to its ``segments.sample_size`` merges with one written before the cut)."""
        if not isinstance(other, EventSample) or other.kinds != self.kinds:
            raise SketchError(f"cannot merge {other!r} into {self!r}: settings differ")
        if other.capacity < self.capacity:
            self._cut(other.capacity)
        if other.keys.size:
            self._keep(other.keys, other.columns)
        return self

    def bottom(self, capacity: int) -> EventSample:
        """A copy holding the ``capacity`` events of smallest key (at most this sample's capacity): what a
        sample of that capacity would have kept of the same events.

        >>> sample = EventSample(4, {"c": "categorical"}).update([9, 3, 7, 1], {"c": list("abcd")})
        >>> cut = sample.bottom(2)
        >>> cut.capacity, cut.keys.tolist(), list(cut.feature("c").values)
        (2, [1, 3], ['d', 'b'])
        >>> sample.bottom(4).merge(EventSample(2, {"c": "categorical"})).keys.tolist()  # a merge cuts to the smaller
        [1, 3]
        """
        out = EventSample(min(self.capacity, capacity), self.kinds)
        out.keys, out.columns = self.keys, self.columns
        out._cut(out.capacity)
        return out

    def _cut(self, capacity: int) -> None:
        """Keep the bottom ``capacity`` events (the keys are ascending) and lower the capacity to it."""
        self.capacity = min(self.capacity, capacity)
        if self.keys.size > self.capacity:
            self.keys = self.keys[: self.capacity]
            self.columns = {name: self.columns[name][: self.capacity] for name in self.kinds}

    def _keep(self, keys: np.ndarray, columns: Mapping[str, np.ndarray]) -> None:
        all_keys = np.concatenate([self.keys, keys])
        order = np.argsort(all_keys, kind="stable")[: self.capacity]
        self.keys = all_keys[order]
        self.columns = {name: np.concatenate([self.columns[name], columns[name]])[order] for name in self.kinds}

    @property
    def size(self) -> int:
        """Events kept."""
        return int(self.keys.size)

    def feature(self, name: str) -> ReservoirSample:
        """One feature's sample for the deep tests: its finite / non-null values, in key order."""
        column = self.columns[name]
        if self.kinds[name] == "numeric":
            values: Any = column[np.isfinite(column)]
        else:
            values = [v for v in column.tolist() if v is not None]
        return ReservoirSample(max(len(values), 1), 0, name).update(values)

    def lazy_feature(self, name: str) -> LazyFeatureSample:
        """:meth:`feature`, built only when first read (:class:`LazyFeatureSample`); a feature this
        sample leaves out (a numeric one, :func:`sampled_kinds`) reads as an empty sample."""
        if name not in self.kinds:
            return LazyFeatureSample(lambda: empty_feature_sample(name))
        return LazyFeatureSample(lambda: self.feature(name))

    def categorical_only(self) -> EventSample:
        """This sample without its numeric features (itself when it has none): how a summary
        written before samples left numeric features out is read (:func:`sampled_kinds`)."""
        if all(kind == "categorical" for kind in self.kinds.values()):
            return self
        kept = EventSample(self.capacity, sampled_kinds(self.kinds))
        kept.keys, kept.columns = self.keys, {name: self.columns[name] for name in kept.kinds}
        return kept

    # ---------------------------------------------------------------- serialization
    def serialize(self) -> bytes:
        """Encode as versioned bytes (``sketches/FORMAT.md``, kind 26): a categorical column as its distinct
        values and one index per event."""
        w = Writer(KIND_EVENT_SAMPLE_CODED).pack("II", self.capacity, self.size).blob(self.keys.astype("<i8").tobytes())
        w.pack("I", len(self.kinds))
        for name, kind in self.kinds.items():
            w.text(name).pack("B", _KIND_CODES[kind])
            column = self.columns[name]
            if kind == "numeric":
                w.blob(column.astype("<f8").tobytes())
            else:
                values, codes = _coded(column)
                w.texts(values).packed(codes)
        return w.getvalue()

    @classmethod
    def deserialize(cls, data: bytes) -> EventSample:
        """Decode bytes written by :meth:`serialize` (or by the Java aggregate; kind 26, or 8 written before)."""
        r = Reader(data, (KIND_EVENT_SAMPLE_CODED, KIND_EVENT_SAMPLE))
        capacity, size = r.unpack("II")
        keys = np.frombuffer(r.blob(), dtype="<i8").astype(np.int64)
        (count,) = r.unpack("I")
        kinds, columns = {}, {}
        codes = {v: k for k, v in _KIND_CODES.items()}
        for _ in range(count):
            name, (code,) = r.text(), r.unpack("B")
            if code not in codes:
                raise SerializationError(f"event sample: unknown feature kind code {code} for {name!r}")
            kinds[name] = codes[code]
            columns[name] = _read_column(r, codes[code], size, r.kind == KIND_EVENT_SAMPLE_CODED)
        r.done()
        if keys.size != size:
            raise SerializationError(f"event sample: {keys.size} keys for {size} events")
        sample = cls(capacity, kinds)
        sample.keys, sample.columns = keys, _DecodedOnRead(columns)
        return sample

    def __repr__(self) -> str:
        return f"EventSample(capacity={self.capacity}, size={self.size}, features={list(self.kinds)})"


class LazyFeatureSample:
    """One feature's deep-test sample of an :class:`EventSample`, built on first read.

    A window's analysis reads few of its features' samples: most features pass the gate, and a
    histogram feature's deep test uses the window's full counts. A segmented window has hundreds of
    (segment, feature) samples, mostly never read. Any attribute read (``values``, ``n``,
    ``is_empty``, ``kind``...) builds the :class:`ReservoirSample` once and reads it there.

    Example:
        >>> sample = EventSample(3, {"x": "numeric"}).update([5, 6], {"x": [1.0, float("nan")]})
        >>> lazy = sample.lazy_feature("x")
        >>> "built" in vars(lazy), lazy.n, lazy.values.tolist(), "built" in vars(lazy)
        (False, 1, [1.0], True)
    """

    def __init__(self, build: Callable[[], ReservoirSample]) -> None:
        self._build = build

    @cached_property
    def built(self) -> ReservoirSample:
        """The feature's sample (:meth:`EventSample.feature`)."""
        return self._build()

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__"):
            raise AttributeError(attr)
        return getattr(self.built, attr)


def _empty(kind: str) -> np.ndarray:
    return np.empty(0, np.float64 if kind == "numeric" else object)


def _as_column(values: Any, kind: str, size: int, name: str) -> np.ndarray:
    """A feature column as float64 (null -> NaN) or object (null -> None), checked for length."""
    if isinstance(values, (pa.Array, pa.ChunkedArray)):
        values = values.to_numpy(zero_copy_only=False)
    column = np.asarray(values, dtype=np.float64) if kind == "numeric" else _objects(values)
    if column.size != size:
        raise SketchError(f"event sample: feature {name!r} has {column.size} values for {size} keys")
    return column


def _objects(values: Any) -> np.ndarray:
    items = values.tolist() if isinstance(values, np.ndarray) else list(values)
    column = np.empty(len(items), dtype=object)
    column[:] = [v if isinstance(v, str) else None for v in items]
    return column


def _coded(column: np.ndarray) -> tuple[list[str], np.ndarray]:
    """A categorical column's distinct values (sorted by their UTF-8 bytes, as code points sort) and, per event,
    0 for a null or 1 + its value's index.

    >>> _coded(np.array(["b", None, "a", "b"], dtype=object))
    (['a', 'b'], array([2, 0, 1, 2], dtype=uint64))
    """
    items = column.tolist()
    values = sorted({v for v in items if v is not None})
    index = {v: i for i, v in enumerate(values, start=1)}
    return values, np.fromiter((0 if v is None else index[v] for v in items), dtype=np.uint64, count=len(items))


def _read_column(r: Reader, kind: str, size: int, coded: bool) -> np.ndarray | Callable[[], np.ndarray]:
    """A numeric column, or a function that builds a categorical one (its strings decoded then); ``coded``: a kind
    26 frame's categorical column (distinct values, then an index per event), else kind 8's (presence, strings)."""
    if kind == "numeric":
        column = np.frombuffer(r.blob(), dtype="<f8").astype(np.float64)
        if column.size != size:
            raise SerializationError(f"event sample: {column.size} numeric values for {size} events")
        return column
    if coded:
        return _read_coded_column(r, size)
    present = np.frombuffer(r.blob(), dtype=np.uint8).astype(bool)
    texts = r.text_list()
    if present.size != size or int(present.sum()) != len(texts):
        raise SerializationError(f"event sample: {len(texts)} strings for {present.size} events")

    def build() -> np.ndarray:
        column = np.full(size, None, dtype=object)
        column[present] = texts.decode()
        return column
    return build


def _read_coded_column(r: Reader, size: int) -> Callable[[], np.ndarray]:
    """A function that builds a kind 26 categorical column (its distinct values decoded then)."""
    texts, codes = r.text_list(), r.packed(size)
    if codes.size and int(codes.max()) > len(texts):
        raise SerializationError(f"event sample: index {int(codes.max())} for {len(texts)} distinct values")

    def build() -> np.ndarray:
        lookup = np.empty(len(texts) + 1, dtype=object)
        lookup[1:] = texts.decode()
        return lookup[codes.astype(np.intp)]
    return build


class _DecodedOnRead(dict):
    """A deserialized sample's columns: a categorical one is built the first time it is read.

    A window's analysis reads few samples (:class:`LazyFeatureSample`); decoding every string of
    every (segment, feature) sample cost more than the rest of reading the window.
    """

    def __init__(self, columns: Mapping[str, np.ndarray | Callable[[], np.ndarray]]) -> None:
        super().__init__({name: c for name, c in columns.items() if isinstance(c, np.ndarray)})
        self._pending = {name: c for name, c in columns.items() if not isinstance(c, np.ndarray)}

    def __missing__(self, name: str) -> np.ndarray:
        if name not in self._pending:
            raise KeyError(name)
        column = self[name] = self._pending.pop(name)()
        return column
