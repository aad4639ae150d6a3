"""FeatureSketch: the sketch of one feature, numeric or categorical, and bytes -> sketch dispatch.

The pipeline's numeric sketch is :class:`HistogramSketch` (deterministic, exactly mergeable: what
the live job's Java aggregate builds too); :class:`NumericSketch` (DataSketches KLL / t-digest)
stays for offline use through the Python API, where a randomised sketch is acceptable.
"""

from __future__ import annotations

from typing import Sequence, Union

from driftwarden.sketches.categorical import CategoricalSketch
from driftwarden.sketches.histogram import HistogramSketch
from driftwarden.sketches.numeric import NumericSketch
from driftwarden.sketches.serialization import (KIND_CATEGORICAL_CAPPED, KIND_NUMERIC_HIST, KIND_NUMERIC_HIST_PACKED,
                                                KIND_NUMERIC_HIST_VARINT, KIND_NUMERIC_KLL, KIND_NUMERIC_TDIGEST, Reader)

#: The frame kinds of the numeric histogram: varints (written), packed and unpacked (written before, still read).
HISTOGRAM_KINDS = (KIND_NUMERIC_HIST_VARINT, KIND_NUMERIC_HIST_PACKED, KIND_NUMERIC_HIST)

FeatureSketch = Union[HistogramSketch, NumericSketch, CategoricalSketch]
#: The sketch classes of numeric features (the gate reads any of them through the same queries).
NUMERIC_SKETCHES = (HistogramSketch, NumericSketch)

#: The feature kinds a reference knows, and the sketch class of each.
FEATURE_KINDS = ("numeric", "categorical")


def deserialize_sketch(data: bytes) -> FeatureSketch:
    """Decode any feature sketch from its bytes, dispatching on the frame's kind byte.

    >>> deserialize_sketch(HistogramSketch().update([1.0]).serialize())
    HistogramSketch(precision=52, max_buckets=1024, n=1, count=1)
    """
    kind = Reader(data, (*HISTOGRAM_KINDS, KIND_NUMERIC_KLL, KIND_NUMERIC_TDIGEST, KIND_CATEGORICAL_CAPPED)).kind
    if kind == KIND_CATEGORICAL_CAPPED:
        return CategoricalSketch.deserialize(data)
    if kind in HISTOGRAM_KINDS:
        return HistogramSketch.deserialize(data)
    return NumericSketch.deserialize(data)


def deserialize_sketches(blobs: Sequence[bytes]) -> list[FeatureSketch]:
    """:func:`deserialize_sketch` of each of ``blobs`` (a window's features), the histograms among them decoded
    together (:meth:`HistogramSketch.deserialize_many`).

    >>> deserialize_sketches([HistogramSketch().update([1.0]).serialize(), CategoricalSketch().update(["a"]).serialize()])
    [HistogramSketch(precision=52, max_buckets=1024, n=1, count=1), CategoricalSketch(max_exact=1000, n=1, exact=True)]
    """
    out: list[FeatureSketch | None] = [None] * len(blobs)
    histograms = [i for i, blob in enumerate(blobs) if blob[5:6] == bytes([KIND_NUMERIC_HIST_VARINT])]
    for i, sketch in zip(histograms, HistogramSketch.deserialize_many([blobs[i] for i in histograms])):
        out[i] = sketch
    return [sketch if sketch is not None else deserialize_sketch(blob) for sketch, blob in zip(out, blobs)]


def new_sketch(kind: str, name: str | None = None, max_buckets: int = 1024, max_exact: int = 1000) -> FeatureSketch:
    """Return an empty pipeline sketch for a feature of ``kind`` ("numeric" or "categorical")."""
    if kind == "numeric":
        return HistogramSketch(max_buckets=max_buckets, name=name)
    if kind == "categorical":
        return CategoricalSketch(max_exact, name=name)
    raise ValueError(f"unknown feature kind {kind!r}; valid kinds are {FEATURE_KINDS}")


def is_numeric(sketch: FeatureSketch) -> bool:
    """True for the sketch of a numeric feature."""
    return isinstance(sketch, NUMERIC_SKETCHES)


def copy_sketch(sketch: FeatureSketch) -> FeatureSketch:
    """Return an independent copy, the same as decoding the sketch's bytes (the pipeline's sketches copy
    themselves; datasketches objects cannot be copied or pickled: a :class:`NumericSketch` goes through its
    bytes)."""
    if isinstance(sketch, (HistogramSketch, CategoricalSketch)):
        return sketch.copy()
    copy = type(sketch).deserialize(sketch.serialize())
    copy.name = sketch.name
    return copy
