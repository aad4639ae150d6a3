"""Validated events' features as Arrow columns: one column per configured feature (and the prediction).

Validation (:class:`schemas.events.FeatureKinds`) hands over each event's configured values split
by kind, in the config's order; these functions turn many events' values into columns without
parsing anything again. Kept light (pyarrow and schemas only) so replay's validating worker
processes start fast.
"""

from __future__ import annotations

from typing import Mapping

import pyarrow as pa

from driftwarden.schemas.events import BOOLEAN, CATEGORICAL, NUMERIC, FeatureKinds

#: The Arrow type of each feature kind's column (a boolean feature's values are the texts "true" / "false").
ARROW_TYPES = {NUMERIC: pa.float64(), CATEGORICAL: pa.string(), BOOLEAN: pa.string()}


def configured_values(features: Mapping[str, object], kinds: FeatureKinds,
                      by_kind: tuple[tuple, tuple] | None = None,
                      prediction: float | None = None,
                      invalid: Mapping[str, object] | None = None) -> tuple[tuple[tuple, tuple], int]:
    """A validated event's monitored values split by kind (absent ones as nulls), and how many
    non-null values it holds for features not in ``kinds`` (counted, not sketched).

    The numeric values end with the event's ``prediction`` when ``kinds`` monitors it
    (:attr:`FeatureKinds.numeric_columns`): the one place where the prediction becomes a column.
    ``by_kind`` is :attr:`schemas.events.Event.by_kind` when validation already split the event
    with these kinds: the common shape, which has no other features. A name in ``invalid``
    (:attr:`schemas.events.Event.invalid`) gets a null: its value had the wrong type.

    >>> kinds = FeatureKinds({"x": "numeric", "c": "categorical"}, prediction=True)
    >>> configured_values({"x": 1, "c": "a", "z": 2}, kinds, prediction=0.75)
    (((1, 0.75), ('a',)), 1)
    """
    split = by_kind or kinds.split(features)
    unknown = 0
    if split is None:
        unknown = sum(1 for name, value in features.items() if value is not None and name not in kinds)
        split = kinds.values_in_order(features, invalid)
    if kinds.prediction:
        split = (split[0] + (prediction,), split[1])
    return split, unknown


def feature_columns(numbers: list, labels: list, kinds: FeatureKinds) -> dict[str, pa.Array]:
    """One Arrow column per feature out of row-major values split by kind (see FeatureKinds)."""
    return {**_columns(numbers, kinds.numeric_columns, ARROW_TYPES[NUMERIC]),
            **_columns(labels, kinds.categorical, ARROW_TYPES[CATEGORICAL])}


def _columns(flat: list, names: tuple[str, ...], arrow_type: pa.DataType) -> dict[str, pa.Array]:
    """Each name's Arrow column out of row-major ``flat`` values."""
    columns = {}
    for j, name in enumerate(names):
        values = flat[j::len(names)]
        try:
            columns[name] = pa.array(values, type=arrow_type)
        except pa.ArrowInvalid:  # a JSON integer beyond int64 (validated as a number): as a double
            if not pa.types.is_floating(arrow_type):
                raise
            columns[name] = pa.array([None if v is None else float(v) for v in values], type=arrow_type)
    return columns


def table_to_ipc(table: pa.Table) -> bytes:
    """A table as the bytes of one Arrow IPC stream (how validated columns cross a process or a temporary file)."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


def table_from_ipc(blob: bytes) -> pa.Table:
    """The table of the Arrow IPC stream :func:`table_to_ipc` wrote."""
    return pa.ipc.open_stream(pa.py_buffer(blob)).read_all()
