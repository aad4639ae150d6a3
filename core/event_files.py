"""Read archived events from files: JSONL, gzip JSONL (``.gz``) or Parquet.

Each record comes back with its coordinates ``(path, line)`` (1-based line or row number) so that
a rejected record can be named and each event gets its sample key (sketches/FORMAT.md).
"""

from __future__ import annotations

import gzip
from itertools import islice, repeat
from pathlib import Path
from typing import Iterator

import orjson

from driftwarden.core.errors import InvalidEventError, ReplayError
from driftwarden.schemas.events import Event, parse_event

JSONL_SUFFIXES = (".jsonl", ".json", ".ndjson")


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
    elif suffixes.endswith(".gz"):
        yield from _jsonl_batches(path, gzip.open(path, "rb"), size)
    elif path.suffix.lower() in JSONL_SUFFIXES:
        yield from _jsonl_batches(path, open(path, "rb"), size)
    else:
        raise ReplayError(f"{path}: unknown file type; use .jsonl, .jsonl.gz or .parquet")


def load_events(path: str | Path) -> tuple[list[Event], list[tuple[tuple[str, int], str]]]:
    """Parse a whole file: the valid events, and ``(coordinates, reason)`` of every rejected record."""
    events, rejected = [], []
    for coordinates, raw in iter_raw_records(path):
        try:
            events.append(parse_event(raw))
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
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(path)
    except (pa.ArrowInvalid, OSError) as exc:
        raise ReplayError(f"{path}: not a Parquet file: {exc}") from exc
    name = str(path)
    for number, row in enumerate(table.to_pylist(), start=1):
        yield (name, number), orjson.dumps(_row_to_event(row), default=str)


def _row_to_event(row: dict) -> dict:
    """Parquet rows either hold a ``features`` struct/map or one column per feature."""
    if "features" in row:
        features = row["features"]
        if isinstance(features, list):  # a map column arrives as [(key, value), ...]
            features = dict(features)
        return {**row, "features": features}
    envelope = {k: row[k] for k in ("event_time", "model", "prediction", "request_id") if k in row}
    envelope["features"] = {k: v for k, v in row.items() if k not in envelope}
    return envelope
