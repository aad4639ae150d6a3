"""What the front door reads: DataFrames or event files, as the raw records the job would read.

A DataFrame (or a flat JSONL / Parquet table) has one row per event: the columns ``event_time``,
``model``, ``prediction`` and ``request_id`` are the event's envelope (as a Parquet archive's, see
``core/event_files.py``), a ``features`` column of mappings or else every other column is a feature.
Rows without ``event_time`` take :data:`NO_TIME_MS` and rows without ``model`` the front door's
model name. Each row becomes the JSON value a producer would send (NaN, None and NaT as null,
datetimes as epoch milliseconds, naive ones read as UTC), so that every row then goes through the
job's own validation. A JSONL file already in the event contract's shape is read as replay reads it,
record by record with its ``(path, line)`` coordinates; a flat JSONL table line by line too, each
value as JSON wrote it (pandas' type inference would turn a label ``"1"`` into a number).
"""

from __future__ import annotations

import math
from os import PathLike
from pathlib import Path
from typing import Any, Union

import orjson
import pandas as pd

from driftwarden.core.errors import ConfigError
from driftwarden.core.event_files import iter_raw_records, not_a_file, row_to_event
from driftwarden.pipeline.reference_set import is_reference_file
from driftwarden.replay.records import RawRecord

#: What the front door judges: a pandas DataFrame, or the path of a JSONL (``.gz``) or Parquet file.
Source = Union[pd.DataFrame, str, PathLike]

#: The event time of a row without one (2000-01-01T00:00:00Z, the contract's earliest).
NO_TIME_MS = 946_684_800_000
ENVELOPE_COLUMNS = ("event_time", "model", "prediction", "request_id")


def is_reference_path(source: Any) -> bool:
    """Whether ``source`` is the path of a reference file built by ``driftwarden reference build``."""
    return isinstance(source, (str, PathLike)) and Path(source).is_file() and is_reference_file(source)


def read_records(source: Source, name: str, model: str) -> list[RawRecord]:
    """The raw records of a DataFrame or a file, each with its coordinates ``(name or path, row)``."""
    if isinstance(source, pd.DataFrame):
        return frame_records(source, name, model)
    path = Path(source)
    if not path.is_file():
        raise ConfigError(not_a_file(path, f"{name} file"))
    if path.suffix.lower() == ".parquet":
        return frame_records(pd.read_parquet(path), str(path), model)
    if _holds_events(path):
        return [RawRecord(coordinates, 0, raw) for coordinates, raw in iter_raw_records(path)]
    return table_records(path, model)


def has_event_time(source: Source) -> bool:
    """Whether the rows of ``source`` carry their own event time."""
    if isinstance(source, pd.DataFrame):
        return "event_time" in source.columns
    path = Path(source)
    if path.suffix.lower() == ".parquet":
        import pyarrow.parquet as pq

        return "event_time" in pq.read_schema(path).names
    return _holds_events(path) or "event_time" in _first_record(path)


def frame_records(frame: pd.DataFrame, name: str, model: str) -> list[RawRecord]:
    """One raw JSON record per row of ``frame``, numbered from 1 like a file's lines."""
    frame = frame.copy()
    if "event_time" in frame.columns and pd.api.types.is_datetime64_any_dtype(frame["event_time"]):
        frame["event_time"] = _epoch_ms(frame["event_time"])
    if "event_time" not in frame.columns:
        frame["event_time"] = NO_TIME_MS
    if "model" not in frame.columns:
        frame["model"] = model
    records = []
    for number, row in enumerate(frame.to_dict("records"), start=1):
        event = row_to_event({key: _json_value(value) for key, value in row.items()})
        if isinstance(event.get("features"), dict):
            event["features"] = {str(k): _json_value(v) for k, v in event["features"].items()}
        records.append(RawRecord((name, number), 0, orjson.dumps(event, default=_json_default)))
    return records


def table_records(path: Path, model: str) -> list[RawRecord]:
    """One raw JSON record per line of a flat JSONL table, with its ``(path, line)``: each line's values
    as JSON wrote them (no pandas type inference: a label ``"1"`` stays text, a float keeps every digit),
    the envelope columns kept, every other column a feature. A line that is not a JSON object goes to
    the validator as it is, to be rejected with its reason."""
    records = []
    for coordinates, raw in iter_raw_records(path):
        try:
            row = orjson.loads(raw)
        except orjson.JSONDecodeError:
            row = None
        if not isinstance(row, dict):
            records.append(RawRecord(coordinates, 0, raw))
            continue
        row.setdefault("event_time", NO_TIME_MS)
        row.setdefault("model", model)
        records.append(RawRecord(coordinates, 0, orjson.dumps(row_to_event(row))))
    return records


def _epoch_ms(column: pd.Series) -> pd.Series:
    """A datetime column as epoch milliseconds (naive times read as UTC); NaT stays missing."""
    utc = column.dt.tz_localize("UTC") if column.dt.tz is None else column.dt.tz_convert("UTC")
    return pd.Series([None if pd.isna(t) else int(t.value // 1_000_000) for t in utc], index=column.index,
                     dtype=object)


def _json_value(value: Any) -> Any:
    """A cell as JSON takes it: NaN, None, NA and NaT as null, numpy scalars as Python's."""
    if value is None or value is pd.NaT or value is pd.NA:
        return None
    if isinstance(value, float) and math.isnan(value):
        return None
    if hasattr(value, "item") and not isinstance(value, (list, dict, str)):  # numpy scalars
        item = value.item()
        return None if isinstance(item, float) and math.isnan(item) else item
    return value


def _json_default(value: Any) -> Any:
    """What orjson cannot write by itself: timestamps as epoch ms, anything else as its text."""
    if isinstance(value, pd.Timestamp):
        stamp = value.tz_localize("UTC") if value.tzinfo is None else value
        return int(stamp.value // 1_000_000)
    if hasattr(value, "tolist"):
        return value.tolist()
    return str(value)


def _first_record(path: Path) -> dict:
    """The first record of a JSONL file ({} when it has none or the first is not a JSON object)."""
    for _, raw in iter_raw_records(path):
        try:
            first = orjson.loads(raw)
        except orjson.JSONDecodeError:
            return {}
        return first if isinstance(first, dict) else {}
    return {}


def _holds_events(path: Path) -> bool:
    """Whether a JSONL file holds events in the contract's shape (its first record has ``features``)."""
    for _, raw in iter_raw_records(path):
        try:
            first = orjson.loads(raw)
        except orjson.JSONDecodeError:
            return True  # not a table either: replay's reader names the bad lines
        return isinstance(first, dict) and "features" in first
    return True
