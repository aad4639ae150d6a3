"""ReservoirSample: a bounded, mergeable uniform sample of raw values for the deep tests.

Scheme (weighted by the number of values each side has seen): a batch of m values is first
reduced to a uniform sample of at most ``capacity`` of them, then merged. Merging a sample of
``n_a`` values with one of ``n_b`` values draws how many survivors come from each side from the
hypergeometric law (``n_a`` "good", ``n_b`` "bad", ``capacity`` draws) and then picks that many
uniformly from each side. The result is a uniform sample without replacement of the union.

Randomness comes from the sample's own generator (PCG64) seeded with ``seed``; its state is
serialized, so a run is reproducible end to end. Give samples that will be merged with each other
different seeds when their inputs are not exchangeable (e.g. ``seed=partition_id``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from driftwarden.core.errors import SerializationError, SketchError
from driftwarden.sketches._values import as_float_array, count_strings, is_string_input
from driftwarden.sketches.serialization import KIND_RESERVOIR, Reader, Writer

_KIND_CODES = {None: 0, "float": 1, "str": 3}
_STR_ONE_BY_ONE = 2  # strings written one field each (read for older bytes; written as 3, packed, since)
_MASK64 = (1 << 64) - 1


class ReservoirSample:
    """Bounded uniform sample of a feature's finite floats or non-null strings.

    Nulls, NaN and infinities are not sampled (the sketches count them).

    Example:
        >>> a = ReservoirSample(capacity=3, seed=1).update([1.0, 2.0, 3.0, 4.0])
        >>> b = ReservoirSample(capacity=3, seed=2).update([5.0, None, 6.0])
        >>> merged = a.merge(b)
        >>> merged.n, len(merged.values), set(merged.values) <= {1.0, 2.0, 3.0, 4.0, 5.0, 6.0}
        (6, 3, True)
        >>> ReservoirSample.deserialize(merged.serialize()).values.tolist() == merged.values.tolist()
        True
    """

    def __init__(self, capacity: int = 2000, seed: int = 0, name: str | None = None) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be >= 1, got {capacity}")
        self.capacity, self.seed, self.name = int(capacity), int(seed), name
        self._rng = np.random.default_rng(self.seed)
        self._n = 0
        self._kind: str | None = None
        self._values = np.empty(0)

    def update(self, values: Any) -> ReservoirSample:
        """Add a batch of values (same inputs as the sketches); returns self."""
        batch = self._clean(values)
        if batch.size:
            keep = self._subsample(batch, min(self.capacity, batch.size))
            self._combine(keep, batch.size)
        return self

    def _clean(self, values: Any) -> np.ndarray:
        if isinstance(values, (pa.Array, pa.ChunkedArray)) and is_string_input(values):
            self._set_kind("str")  # a typed Arrow string column cannot mix types
            return np.asarray(values.drop_null().to_numpy(zero_copy_only=False), dtype=object)
        if is_string_input(values):
            count_strings(values, self.name)  # raises SketchError on mixed types
            self._set_kind("str")
            items = values.to_pylist() if hasattr(values, "to_pylist") else values
            return np.array([v for v in items if isinstance(v, str)], dtype=object)
        x, _ = as_float_array(values, self.name)
        x = x[np.isfinite(x)]
        if x.size:
            self._set_kind("float")
        return x

    def _set_kind(self, kind: str) -> None:
        if self._kind not in (None, kind):
            raise SketchError(f"{self._where()}sample holds {self._kind} values, got {kind} values (mixed types)")
        if self._kind is None:
            self._kind = kind
            self._values = np.empty(0, dtype=object if kind == "str" else np.float64)

    def _where(self) -> str:
        return f"feature {self.name!r}: " if self.name else ""

    def _subsample(self, arr: np.ndarray, size: int) -> np.ndarray:
        if size >= arr.size:
            return arr
        return arr[np.sort(self._rng.choice(arr.size, size=size, replace=False))]

    def _combine(self, other: np.ndarray, other_n: int) -> None:
        total = self._n + other_n
        size = min(self.capacity, total)
        from_self = int(self._rng.hypergeometric(self._n, other_n, size)) if self._n else 0
        mine = self._subsample(self._values, from_self)
        theirs = self._subsample(other, size - from_self)
        self._values = np.concatenate([mine, theirs])
        self._n = total

    def merge(self, other: ReservoirSample) -> ReservoirSample:
        """Fold ``other`` in: the result is a uniform sample of both inputs (in place, returns self)."""
        if not isinstance(other, ReservoirSample):
            raise SketchError(f"cannot merge {type(other).__name__} into a ReservoirSample")
        if other._kind is not None:
            self._set_kind(other._kind)
            self._combine(other._values, other._n)
        return self

    @property
    def values(self) -> np.ndarray:
        """The sampled values (float64 array, or object array of str)."""
        return self._values.copy()

    @property
    def n(self) -> int:
        """Number of values offered to the sample (nulls/NaN/inf excluded)."""
        return self._n

    @property
    def is_empty(self) -> bool:
        """True when no value was sampled."""
        return self._n == 0

    @property
    def kind(self) -> str | None:
        """``"float"``, ``"str"``, or None before the first value."""
        return self._kind

    def serialize(self) -> bytes:
        """Encode as versioned bytes, generator state included (never pickled)."""
        state = self._rng.bit_generator.state
        w = Writer(KIND_RESERVOIR).pack("QqQB", self.capacity, self.seed, self._n, _KIND_CODES[self._kind])
        w.pack("4QBI", *_split128(state["state"]["state"]), *_split128(state["state"]["inc"]),
               state["has_uint32"], state["uinteger"])
        if self._kind == "str":
            return w.texts(self._values.tolist()).getvalue()
        return w.array(self._values.astype(np.float64)).getvalue()

    @classmethod
    def deserialize(cls, data: bytes) -> ReservoirSample:
        """Decode bytes written by :meth:`serialize`."""
        r = Reader(data, (KIND_RESERVOIR,))
        capacity, seed, n, code = r.unpack("QqQB")
        s_hi, s_lo, i_hi, i_lo, has_uint32, uinteger = r.unpack("4QBI")
        sample = cls(capacity, seed)
        sample._n = n
        sample._rng.bit_generator.state = {"bit_generator": "PCG64", "has_uint32": has_uint32, "uinteger": uinteger,
                                           "state": {"state": (s_hi << 64) | s_lo, "inc": (i_hi << 64) | i_lo}}
        kinds = {v: k for k, v in _KIND_CODES.items()} | {_STR_ONE_BY_ONE: "str"}
        if code not in kinds:
            raise SerializationError(f"unknown reservoir value kind {code}")
        if kinds[code] is not None:
            sample._set_kind(kinds[code])
        if code == _STR_ONE_BY_ONE:
            (size,) = r.unpack("Q")
            sample._values = np.array([r.text() for _ in range(size)], dtype=object)
        elif kinds[code] == "str":
            sample._values = np.array(r.texts(), dtype=object)
        else:
            values = r.array()
            sample._values = values if kinds[code] else np.empty(0)
        r.done()
        return sample

    def __repr__(self) -> str:
        return f"ReservoirSample(capacity={self.capacity}, n={self._n}, kind={self._kind!r})"


def _split128(value: int) -> tuple[int, int]:
    return (value >> 64) & _MASK64, value & _MASK64
