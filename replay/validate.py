"""Validate a batch of replayed records with the live job's validator, then apply the clock rule.

Each record goes through :func:`pipeline.validation.validate_record`, the one validator the live
job calls too. Events of models that are not monitored are valid (counted, windowed, not
sketched), as in the live job.

:func:`validate_batch` validates a batch of raw values and keeps, per monitored model, its valid
events' configured features as Arrow columns (built from validation's own parse), so nothing is
parsed twice; its result crosses between processes as Arrow IPC (see replay/workers.py).
:func:`reject_future` then applies the future-clock rule (``pipeline/event_time.py``) with each
record's Kafka timestamp and says which records move their partition's lateness mark.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import pyarrow as pa

from driftwarden.core.errors import InvalidEventError
from driftwarden.pipeline.columns import feature_columns, table_from_ipc, table_to_ipc
from driftwarden.pipeline.event_time import is_future
from driftwarden.pipeline.validation import FUTURE, future_detail, readable_event_time, validate_record
from driftwarden.replay.records import RawRecord
from driftwarden.schemas.config import MonitorConfig, feature_kinds_lookup
from driftwarden.schemas.events import EventRules, FeatureKinds, InvalidValue

#: Longest detail kept per rejected record in a report.
DETAIL_CHARS = 300


@dataclass(frozen=True, slots=True)
class Rejection:
    """A record that failed validation, with where it was and why."""

    record: RawRecord
    reason: str
    detail: str

    def as_dict(self) -> dict:
        """The report's entry: coordinates, reason code and detail."""
        return {**self.record.where(), "reason": self.reason, "detail": self.detail[:DETAIL_CHARS]}


_ENVELOPE = pa.schema([("event_ms", pa.int64()), ("model", pa.string()), ("reason", pa.string()),
                       ("detail", pa.string()), ("unknown", pa.int32()), ("row", pa.int32()),
                       ("mark_ms", pa.int64())])
_INVALID = pa.schema([("index", pa.int32()), ("name", pa.string()), ("reason", pa.string()), ("value", pa.string())])


@dataclass
class ValidatedBatch:
    """What validation made of a batch of raw values: one entry per value, in the batch's order.

    ``reasons[i]`` is None for a valid value. For a valid event of a monitored model, ``rows[i]``
    is its row in ``columns[model]`` (that model's valid events' configured features, one Arrow
    column per feature) and ``unknown[i]`` counts its non-null values of features not configured.
    ``event_ms[i]`` is a valid event's time (None for a rejected value); ``mark_ms[i]`` the time the
    record moves its partition's lateness mark by: any record's readable event time, valid or not,
    unless :func:`reject_future` finds it a bad clock (None: it moves no mark).
    ``invalid``: (value's index in the batch, monitored name, its :class:`InvalidValue`) of each
    wrong-typed value of a valid event (a null in its column).
    """

    event_ms: list[int | None]
    models: list[str | None]
    reasons: list[str | None]
    details: list[str | None]
    unknown: list[int]
    rows: list[int]
    mark_ms: list[int | None]
    columns: dict[str, dict[str, pa.Array]] = field(default_factory=dict)
    invalid: list[tuple[int, str, InvalidValue]] = field(default_factory=list)

    def to_ipc(self) -> tuple[bytes, ...]:
        """Arrow IPC streams: the per-value table, the invalid values, then one table per monitored model."""
        envelope = pa.table([self.event_ms, self.models, self.reasons, self.details, self.unknown, self.rows,
                             self.mark_ms], schema=_ENVELOPE)
        invalid = pa.table([[i for i, _, _ in self.invalid], [n for _, n, _ in self.invalid],
                            [v.reason for _, _, v in self.invalid], [v.value for _, _, v in self.invalid]],
                           schema=_INVALID)
        blobs = [table_to_ipc(envelope), table_to_ipc(invalid)]
        for model, columns in self.columns.items():
            blobs.append(table_to_ipc(pa.table(columns).replace_schema_metadata({"model": model})))
        return tuple(blobs)

    @classmethod
    def from_ipc(cls, blobs: Sequence[bytes]) -> "ValidatedBatch":
        """Decode what :meth:`to_ipc` wrote."""
        envelope = table_from_ipc(blobs[0])
        batch = cls(*(_as_list(envelope.column(name)) for name in _ENVELOPE.names))
        invalid = table_from_ipc(blobs[1]).to_pydict()
        batch.invalid = [(i, n, InvalidValue(r, v)) for i, n, r, v in zip(*(invalid[c] for c in _INVALID.names))]
        for blob in blobs[2:]:
            table = table_from_ipc(blob)
            model = table.schema.metadata[b"model"].decode()
            batch.columns[model] = {name: table.column(name).combine_chunks() for name in table.column_names}
        return batch


def _as_list(column: pa.ChunkedArray) -> list:
    """A column as a Python list, by the fastest route for its content (this runs per batch)."""
    if column.null_count == len(column):  # reasons and details of a clean batch
        return [None] * len(column)
    if pa.types.is_integer(column.type) and column.null_count == 0:
        return column.to_numpy().tolist()
    if pa.types.is_string(column.type):  # model names: few distinct values
        encoded = column.combine_chunks().dictionary_encode()
        names = encoded.dictionary.to_pylist() + [None]
        return [names[i] for i in encoded.indices.fill_null(len(names) - 1).to_numpy().tolist()]
    return column.to_pylist()


def validate_batch(values: Sequence[bytes], config: MonitorConfig) -> ValidatedBatch:
    """Validate every value (:func:`pipeline.validation.validate_record`) and gather each monitored
    model's features.

    The loop runs once per record of a replay, so it appends to local lists rather than calling
    :meth:`ValidatedBatch.append` (measured: a sixth of the batch's time).
    """
    kinds_of = feature_kinds_lookup(config)
    rules = EventRules.of(config.source)
    batch = ValidatedBatch([], [], [None] * len(values), [None] * len(values), [], [], [])
    event_ms, models, unknown, rows = batch.event_ms, batch.models, batch.unknown, batch.rows
    gathered: dict[str, _Gathered | None] = {}
    for i, value in enumerate(values):
        try:
            event, values_by_kind, unknown_values = validate_record(value, kinds_of, rules)
        except InvalidEventError as exc:
            batch.reasons[i], batch.details[i] = exc.reason, exc.detail
            event_ms.append(None), models.append(None), unknown.append(0), rows.append(-1)
            continue
        model = event.model
        event_ms.append(event.event_ms), models.append(model), unknown.append(unknown_values)
        into = gathered[model] if model in gathered else gathered.setdefault(model, _Gathered.of(kinds_of(model)))
        if into is None:  # a model the config does not monitor: counted, not sketched
            rows.append(-1)
            continue
        if event.invalid:
            batch.invalid.extend((i, name, why) for name, why in event.invalid.items())
        into.numbers.extend(values_by_kind[0])
        into.labels.extend(values_by_kind[1])
        rows.append(into.rows)
        into.rows += 1
    batch.mark_ms = ([ms if reason is None else readable_event_time(values[i], rules)
                      for i, (ms, reason) in enumerate(zip(event_ms, batch.reasons))]
                     if any(batch.reasons) else list(event_ms))
    batch.columns = {model: feature_columns(into.numbers, into.labels, into.kinds)
                     for model, into in gathered.items() if into is not None}
    return batch


def reject_future(records: Sequence[RawRecord], validated: ValidatedBatch, config: MonitorConfig) -> int:
    """Apply the future-clock rule (:func:`pipeline.event_time.is_future`) with each record's timestamp:
    a valid event too far ahead is rejected (reason ``future``), and no bad clock, valid or not, moves
    its partition's mark; return how many valid events were rejected."""
    skew = config.window.max_future_skew_ms
    mark_ms, reasons, found = validated.mark_ms, validated.reasons, 0
    for i, record in enumerate(records):
        ts, ms = record.timestamp_ms, mark_ms[i]
        if ts is not None and ms is not None and is_future(ms, ts, skew):
            mark_ms[i] = None
            if reasons[i] is None:
                reasons[i] = FUTURE
                validated.details[i] = future_detail(config.window.max_future_skew)
                found += 1
    return found


class _Gathered:
    """One monitored model's valid events of a batch: their values by kind, and how many."""

    __slots__ = ("kinds", "numbers", "labels", "rows")

    def __init__(self, kinds: FeatureKinds) -> None:
        self.kinds, self.numbers, self.labels, self.rows = kinds, [], [], 0

    @classmethod
    def of(cls, kinds: FeatureKinds | None) -> "_Gathered | None":
        """A gatherer for a monitored model's kinds; None for a model that is not monitored."""
        return cls(kinds) if kinds is not None else None
