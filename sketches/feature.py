"""FeatureSketch: the sketch of one feature, numeric or categorical, and bytes -> sketch dispatch."""

from __future__ import annotations

from typing import Union

from sketches.categorical import CategoricalSketch
from sketches.numeric import NumericSketch
from sketches.serialization import KIND_CATEGORICAL, KIND_NUMERIC_KLL, KIND_NUMERIC_TDIGEST, Reader

FeatureSketch = Union[NumericSketch, CategoricalSketch]

#: The feature kinds a reference knows, and the sketch class of each.
FEATURE_KINDS = ("numeric", "categorical")


def deserialize_sketch(data: bytes) -> FeatureSketch:
    """Decode any feature sketch from its bytes, dispatching on the frame's kind byte.

    >>> deserialize_sketch(NumericSketch().update([1.0]).serialize())
    NumericSketch(kind='kll', k=200, n=1, count=1)
    """
    kind = Reader(data, (KIND_NUMERIC_KLL, KIND_NUMERIC_TDIGEST, KIND_CATEGORICAL)).kind
    if kind == KIND_CATEGORICAL:
        return CategoricalSketch.deserialize(data)
    return NumericSketch.deserialize(data)


def new_sketch(kind: str, k: int = 200, max_exact: int = 1000, name: str | None = None) -> FeatureSketch:
    """Return an empty sketch for a feature of ``kind`` ("numeric" or "categorical")."""
    if kind == "numeric":
        return NumericSketch(k, name=name)
    if kind == "categorical":
        return CategoricalSketch(max_exact, name=name)
    raise ValueError(f"unknown feature kind {kind!r}; valid kinds are {FEATURE_KINDS}")


def copy_sketch(sketch: FeatureSketch) -> FeatureSketch:
    """Return an independent copy (datasketches objects cannot be copied or pickled)."""
    copy = type(sketch).deserialize(sketch.serialize())
    copy.name = sketch.name
    return copy
