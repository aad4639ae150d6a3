"""Archived traffic: JSONL, gzip JSONL or Parquet files, checked to be what their name says.

Reading itself is :func:`core.event_files.iter_raw_batches` (shared with
``driftwarden reference build``); this module adds the content check, so that a ``.parquet``
that is not Parquet or a ``.gz`` that is not gzip fails with a clear message before any work.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

from driftwarden.core.errors import ReplayError
from driftwarden.core.event_files import JSONL_SUFFIXES, iter_raw_batches, not_a_file
from driftwarden.replay.records import RawRecord

_MAGIC = {b"PAR1": "Parquet", b"\x1f\x8b": "gzip", b"DWSK": "a driftwarden reference file",
          b"Obj\x01": "Avro"}


def sniff(path: Path) -> str:
    """What the file's first bytes say it is: "Parquet", "gzip", "text" or another known kind."""
    with open(path, "rb") as handle:
        head = handle.read(4)
    for magic, kind in _MAGIC.items():
        if head.startswith(magic):
            return kind
    return "text"


def expected_kind(path: Path) -> str:
    """What the file's name says it is; ReplayError for an unknown extension."""
    suffix = path.suffix.lower()
    if suffix == ".parquet":
        return "Parquet"
    if suffix == ".gz":
        return "gzip"
    if suffix == ".avro":
        return "Avro"
    if suffix in JSONL_SUFFIXES:
        return "text"
    raise ReplayError(f"{path}: unknown file type {suffix or '(none)'}; use .jsonl, .jsonl.gz, .parquet or .avro")


def check_file(path: str | Path) -> Path:
    """The path, once it exists and its content matches its extension; ReplayError otherwise."""
    path = Path(path)
    if not path.is_file():
        raise ReplayError(not_a_file(path, "input file"))
    expected = expected_kind(path)
    if path.stat().st_size == 0:
        raise ReplayError(f"{path} is empty: nothing to replay")
    actual = sniff(path)
    if actual != expected:
        shown = {"text": "JSONL text"}.get(actual, actual)
        wanted = {"text": "JSONL text"}.get(expected, expected)
        raise ReplayError(f"{path} is named like {wanted} but its content is {shown}; rename it or pass the right file")
    return path


def read_file(path: str | Path) -> Iterator[RawRecord]:
    """Every record of a checked file as a RawRecord with ``(path, line)`` coordinates."""
    for batch in read_batches(path):
        yield from batch


def read_batches(path: str | Path) -> Iterator[list[RawRecord]]:
    """:func:`read_file` in lists of up to :data:`core.event_files.BATCH_RECORDS` records."""
    path = check_file(path)
    for batch in iter_raw_batches(path):
        yield [RawRecord(coordinates, 0, raw) for coordinates, raw in batch]
