"""Read archived events from files: JSONL, gzip JSONL (``.gz``), Parquet or Avro object container files.

Each record comes back with its coordinates ``(path, line)`` (1-based line or row number) so that
a rejected record can be named and each event gets its sample key (sketches/FORMAT.md).
"""

from __future__ import annotations

import gzip
import math
from datetime import date, datetime, time, timedelta, timezone
from decimal import Decimal
from itertools import islice, repeat
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

import orjson

from driftwarden.core.errors import InvalidEventError, ReplayError
from driftwarden.schemas.events import DEFAULT_RULES, Event, EventRules, validate_event

JSONL_SUFFIXES = (".jsonl", ".json", ".ndjson")
AVRO_SUFFIXES = (".avro",)


def _no_kinds(_model: str) -> None:
    return None


#: Records per batch of :func:`iter_raw_batches`.
BATCH_RECORDS = 5000

RawBatch = list[tuple[tuple[str, int], bytes]]


def iter_raw_records(path: str | Path) -> Iterator[tuple[tuple[str, int], bytes]]:
    """Yield ``((path, line), raw JSON bytes)`` for every record of the file."""
    for batch in iter_raw_batches(path):
        yield from batch


def not_a_file(path: Path, what: str) -> str:
    """Why ``path`` (not a regular file) cannot be read, for an error message.

    >>> not_a_file(Path("/"), "input file"), not_a_file(Path("/no/such.jsonl"), "input file")
    ('input file / is a directory, not a file', 'input file /no/such.jsonl does not exist')
    """
    return f"{what} {path} is a directory, not a file" if path.is_dir() else f"{what} {path} does not exist"


def iter_raw_batches(path: str | Path, size: int = BATCH_RECORDS) -> Iterator[RawBatch]:
    """:func:`iter_raw_records` in lists of up to ``size`` records (lines are split in bulk)."""
    path = Path(path)
    if not path.is_file():
        raise ReplayError(not_a_file(path, "input file"))
    suffixes = "".join(path.suffixes[-2:]).lower()
    if path.suffix.lower() == ".parquet":
        yield from _batched(_parquet_records(path), size)
    elif path.suffix.lower() in AVRO_SUFFIXES:
        yield from _batched(_avro_records(path), size)
    elif suffixes.endswith(".gz"):
        yield from _jsonl_batches(path, gzip.open(path, "rb"), size)
    elif path.suffix.lower() in JSONL_SUFFIXES:
        yield from _jsonl_batches(path, open(path, "rb"), size)
    else:
        raise ReplayError(f"{path}: unknown file type; use .jsonl, .jsonl.gz, .parquet or .avro")


def load_events(path: str | Path, rules: EventRules = DEFAULT_RULES,
                kinds_of: Callable[[str], Mapping[str, str] | None] | None = None,
                ) -> tuple[list[Event], list[tuple[tuple[str, int], str]]]:
    """Parse a whole file under the config's ``rules`` (envelope, invalid values; ``kinds_of``: the monitored
    kinds by model): the valid events, and ``(coordinates, reason)`` of every rejected record."""
    events, rejected = [], []
    for coordinates, raw in iter_raw_records(path):
        try:
            events.append(validate_event(raw, kinds_of or _no_kinds, rules))
        except InvalidEventError as exc:
            rejected.append((coordinates, str(exc)))
    return events, rejected


def _jsonl_batches(path: Path, handle, size: int) -> Iterator[RawBatch]:
    name, first = str(path), 1
    try:
        with handle:
            while lines := list(islice(handle, size)):
                stripped = [line.strip() for line in lines]
                batch = list(zip(zip(repeat(name), range(first, first + len(lines))), stripped))
                first += len(lines)
                yield [record for record in batch if record[1]] if b"" in stripped else batch
    except (OSError, EOFError, gzip.BadGzipFile) as exc:
        raise ReplayError(f"{path}: cannot be read as {'gzip ' if path.suffix == '.gz' else ''}JSONL: {exc}") from exc


def _batched(records: Iterator[tuple[tuple[str, int], bytes]], size: int) -> Iterator[RawBatch]:
    while batch := list(islice(records, size)):
        yield batch


def _parquet_records(path: Path) -> Iterator[tuple[tuple[str, int], bytes]]:
    """The file's rows one record batch at a time (row groups are read as needed, never the whole table)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        batches = pq.ParquetFile(path).iter_batches(batch_size=BATCH_RECORDS)
        name, number = str(path), 1
        for batch in batches:
            for row in batch.to_pylist():
                yield (name, number), orjson.dumps(row_to_event(row), default=str)
                number += 1
    except (pa.ArrowInvalid, OSError) as exc:
        raise ReplayError(f"{path}: not a Parquet file: {exc}") from exc


def _avro_records(path: Path) -> Iterator[tuple[tuple[str, int], bytes]]:
    """An Avro object container file's records, each as the JSON object it reads as (``avro_as_json``)."""
    import fastavro

    name = str(path)
    try:
        with open(path, "rb") as handle:
            for number, record in enumerate(fastavro.reader(handle), start=1):
                yield (name, number), orjson.dumps(avro_as_json(record))
    except (ValueError, OSError, EOFError, StopIteration) as exc:
        raise ReplayError(f"{path}: not an Avro object container file: {exc}") from exc


def avro_as_json(value: Any) -> Any:
    """An Avro value (as fastavro decodes it) as JSON holds it: records and maps objects, enums, strings and
    uuids text, bytes and fixed text (ISO-8859-1), decimals numbers, timestamp-millis/micros (and local ones)
    epoch milliseconds, dates days since the epoch, time-millis/micros integers; a NaN or infinity, which
    JSON cannot hold, is null.

    >>> from datetime import datetime, timezone
    >>> avro_as_json({"ts": datetime(2026, 1, 1, 0, 0, 0, 123999, tzinfo=timezone.utc), "b": b"ab", "v": [1.5]})
    {'ts': 1767225600123, 'b': 'ab', 'v': [1.5]}
    """
    kind = type(value)
    if kind is dict:
        return {k: avro_as_json(v) for k, v in value.items()}
    if kind is list:
        return [avro_as_json(v) for v in value]
    if kind in (str, int, bool) or value is None:
        return value
    if kind is float:
        return value if math.isfinite(value) else None
    return _AVRO_LOGICAL.get(kind, str)(value)


def _epoch_ms(moment: datetime) -> int:
    """Epoch milliseconds of a datetime (naive: a local-timestamp, read as UTC), toward minus infinity."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return (moment - _EPOCH) // timedelta(milliseconds=1)


_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_AVRO_LOGICAL: dict[type, Callable[[Any], Any]] = {
    bytes: lambda v: v.decode("latin-1"),
    datetime: _epoch_ms,
    date: lambda v: (v - _EPOCH.date()).days,
    time: lambda v: ((v.hour * 60 + v.minute) * 60 + v.second) * 1_000_000 + v.microsecond,
    Decimal: float,
}


def row_to_event(row: dict) -> dict:
    """Parquet rows either hold a ``features`` struct/map, or one column per feature beside ``event_time``
    (put under ``features``), or are any other flat record, kept as it is (for ``source.envelope`` to map)."""
    if "features" not in row and "event_time" not in row:
        return row
    if "features" in row:
        features = row["features"]
        if isinstance(features, list):  # a map column arrives as [(key, value), ...]
            features = dict(features)
        return {**row, "features": features}
    envelope = {k: row[k] for k in ("event_time", "model", "prediction", "request_id") if k in row}
    envelope["features"] = {k: v for k, v in row.items() if k not in envelope}
    return envelope
