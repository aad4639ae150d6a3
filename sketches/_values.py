"""Turn the inputs a caller may pass (numpy, Arrow, Python sequences) into clean arrays.

Every sketch and sample accepts the same shapes of input; this module is the one place that
decides what a null is and what a type error looks like, without a Python loop per value
for numeric data.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from driftwarden.core.errors import SketchError


def _where(name: str | None) -> str:
    return f"feature {name!r}: " if name else ""


def as_float_array(values: Any, name: str | None = None) -> tuple[np.ndarray, int]:
    """Return ``(float64 array without nulls, null count)``; strings raise ``SketchError``."""
    if isinstance(values, (pa.Array, pa.ChunkedArray)):
        return _from_arrow(values, name)
    arr = values if isinstance(values, np.ndarray) else np.asarray(values)
    if arr.dtype.kind in "fiub":
        return np.require(arr, np.float64, ["C", "W"]).ravel(), 0
    if arr.dtype.kind == "O":
        try:
            return _from_arrow(pa.array(arr.ravel(), type=pa.float64()), name)
        except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
            raise SketchError(f"{_where(name)}numeric feature got a non-numeric value ({exc})") from exc
    raise SketchError(f"{_where(name)}numeric feature got values of dtype {arr.dtype} (strings?)")


def _from_arrow(arr: pa.Array | pa.ChunkedArray, name: str | None) -> tuple[np.ndarray, int]:
    t = arr.type
    if not (pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_null(t)
            or pa.types.is_boolean(t) or pa.types.is_decimal(t)):
        raise SketchError(f"{_where(name)}numeric feature got an Arrow column of type {t}")
    nulls = arr.null_count
    clean = arr.drop_null().cast(pa.float64()) if len(arr) else pa.array([], pa.float64())
    # datasketches' vector update needs a writable C-contiguous array; Arrow buffers are read-only
    return np.require(clean.to_numpy(zero_copy_only=False), np.float64, ["C", "W"]), nulls


def count_strings(values: Any, name: str | None = None) -> tuple[Counter, int]:
    """Return ``(Counter of non-null strings, null count)``; None and float NaN are nulls."""
    if isinstance(values, (pa.Array, pa.ChunkedArray)):
        return _count_arrow_strings(values, name)
    counts = Counter(values.ravel().tolist() if isinstance(values, np.ndarray) else values)
    nulls = counts.pop(None, 0)
    for key in [k for k in counts if not isinstance(k, str)]:
        if isinstance(key, float) and key != key:
            nulls += counts.pop(key)
        else:
            raise SketchError(
                f"{_where(name)}categorical feature got a {type(key).__name__} value {key!r}; "
                "expected str or None (mixed types in one feature)")
    return counts, nulls


def check_string_column(arr: pa.Array | pa.ChunkedArray, name: str | None = None) -> None:
    """Raise SketchError unless ``arr`` is an Arrow string (or all-null) column."""
    if not (pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type) or pa.types.is_null(arr.type)):
        raise SketchError(f"{_where(name)}categorical feature got an Arrow column of type {arr.type}")


def _count_arrow_strings(arr: pa.Array | pa.ChunkedArray, name: str | None) -> tuple[Counter, int]:
    check_string_column(arr, name)
    counted = pc.value_counts(arr.drop_null()) if len(arr) else pa.array([], pa.struct([]))
    if not len(counted):
        return Counter(), arr.null_count
    items = counted.field("values").to_pylist()
    return Counter(dict(zip(items, counted.field("counts").to_pylist()))), arr.null_count


def is_string_input(values: Any) -> bool:
    """Tell whether ``values`` looks like categorical data: its first non-null value is a str."""
    if isinstance(values, (pa.Array, pa.ChunkedArray)):
        return pa.types.is_string(values.type) or pa.types.is_large_string(values.type)
    arr = values if isinstance(values, np.ndarray) else np.asarray(values, dtype=object)
    if arr.dtype.kind in "US":
        return True
    if arr.dtype.kind != "O":
        return False
    return isinstance(next((v for v in arr.ravel() if v is not None), None), str)
