"""A reference build's rows: a batch's valid events per configured model as columns, and their spill.

:func:`model_rows` turns validated events into each configured model's :class:`ModelRows` (the
values split by kind as :meth:`pipeline.summary.WindowRows.add` splits a raw event's, then one Arrow
column per monitored name, :func:`pipeline.columns.feature_columns`). :class:`RowSpill` keeps them
in a temporary file between the build's two passes, as Arrow IPC streams, so that the snapshot is
parsed once: the file is as large as the rows' columns (about a third of a JSONL snapshot), in
the system's temporary folder (``TMPDIR``), removed when the build ends. Without a config the kinds
are known only once the whole snapshot was read: :class:`EventSpill` keeps the valid events instead,
as compact JSON, and the second pass makes their rows with the inferred kinds. Both, and the build's
:class:`BlobFile` of window summaries, are a :class:`FramedFile`: length-prefixed frames in a temporary file.
"""

from __future__ import annotations

import struct
import tempfile
from dataclasses import dataclass, field
from typing import Iterable, Iterator, Mapping, Self

import numpy as np
import orjson
import pyarrow as pa

from driftwarden.pipeline.columns import configured_values, feature_columns, table_from_ipc, table_to_ipc
from driftwarden.schemas.config import MonitorConfig
from driftwarden.schemas.events import Event, FeatureKinds, InvalidValue, check_feature_kinds


@dataclass
class ModelRows:
    """One model's valid events of a batch, in file order, as columns: event times, each monitored name's
    Arrow column, each event's count of unconfigured features, and (row, name, value) of each wrong-typed
    value (a null in its column)."""

    event_ms: np.ndarray
    columns: dict[str, pa.Array]
    unknown: list[int]
    invalid: list[tuple[int, str, InvalidValue]] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.event_ms)


class _Gathered:
    """A model's valid events of a batch, row-major by kind, as validation hands them over."""

    __slots__ = ("kinds", "event_ms", "numbers", "labels", "unknown", "invalid")

    def __init__(self, kinds: FeatureKinds) -> None:
        self.kinds, self.event_ms, self.numbers, self.labels, self.unknown, self.invalid = kinds, [], [], [], [], []

    def add(self, event: Event, checked: bool) -> None:
        """Append one valid event's configured values (``checked``: validated with these kinds).

        Its values are checked against the kinds as :meth:`pipeline.summary.WindowRows.add` checks a raw
        event's: only features' wrong-typed values are tallied (a reference has never tallied predictions').
        """
        if checked and not event.invalid:
            by_kind, invalid = event.by_kind, None
        else:
            by_kind, invalid = check_feature_kinds(event.features, self.kinds)
        values, unknown = configured_values(event.features, self.kinds, by_kind, event.prediction, invalid)
        if invalid:
            self.invalid.extend((len(self.event_ms), name, value) for name, value in invalid.items())
        self.event_ms.append(event.event_ms)
        self.numbers.extend(values[0])
        self.labels.extend(values[1])
        self.unknown.append(unknown)

    def rows(self) -> ModelRows:
        """The gathered events as columns."""
        return ModelRows(np.asarray(self.event_ms, dtype=np.int64),
                         feature_columns(self.numbers, self.labels, self.kinds), self.unknown, self.invalid)


def model_rows(events: Iterable[Event], config: MonitorConfig, checked: bool = False) -> dict[str, ModelRows]:
    """Valid events as each configured model's rows (``checked``: validated with the config's kinds, so
    their split by kind is reused); events of other models are left out."""
    gathered: dict[str, _Gathered | None] = {}
    for event in events:
        into = gathered.get(event.model, False)
        if into is False:
            model = config.model(event.model)
            into = gathered[event.model] = _Gathered(model.kinds) if model is not None else None
        if into is not None:
            into.add(event, checked)
    return {name: into.rows() for name, into in gathered.items() if into is not None}


_LENGTH = struct.Struct("<Q")


class FramedFile:
    """Byte strings written as length-prefixed frames (an 8-byte little-endian length, then the bytes) to a
    temporary file in the system's temporary folder (``TMPDIR``), and read back: in order (:meth:`frames`) or
    one at a time by its offset (:meth:`frame_at`). A context manager: the file is removed on exit.

    >>> with FramedFile() as framed:
    ...     first, second = framed.append(b"one"), framed.append(b"")
    ...     list(framed.frames()), framed.frame_at(first), framed.bytes
    ([b'one', b''], b'one', 19)
    """

    def __init__(self) -> None:
        self._file = tempfile.TemporaryFile(prefix="driftwarden-reference-")
        #: bytes written so far (the next frame's offset)
        self.bytes = 0
        self._at_end = True

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *_exc) -> None:
        self._file.close()

    def append(self, blob: bytes) -> int:
        """Write ``blob`` as the last frame; its offset (for :meth:`frame_at`)."""
        if not self._at_end:
            self._file.seek(self.bytes)
            self._at_end = True
        offset = self.bytes
        self._file.write(_LENGTH.pack(len(blob)) + blob)
        self.bytes += _LENGTH.size + len(blob)
        return offset

    def frames(self) -> Iterator[bytes]:
        """Every frame written, in order (no frame may be appended while they are read)."""
        self._file.flush()
        self._file.seek(0)
        self._at_end = False
        while header := self._file.read(_LENGTH.size):
            (length,) = _LENGTH.unpack(header)
            yield self._file.read(length)

    def frame_at(self, offset: int) -> bytes:
        """The frame written at ``offset``."""
        self._file.seek(offset)
        self._at_end = False
        (length,) = _LENGTH.unpack(self._file.read(_LENGTH.size))
        return self._file.read(length)


class RowSpill(FramedFile):
    """Batches of rows written to a temporary file, then read back in the same order (a context manager:
    the file is removed on exit). Each model's rows are one frame, an Arrow IPC stream: event times, unknown
    counts, then the monitored names' columns (their names and the invalid values in the schema's metadata,
    JSON); an empty frame ends each batch."""

    def write(self, rows: Mapping[str, ModelRows]) -> None:
        """Append one batch's rows."""
        for model, batch in rows.items():
            self.append(_rows_to_ipc(model, batch))
        self.append(b"")  # end of the batch

    def read(self) -> Iterator[dict[str, ModelRows]]:
        """Every batch written, in order."""
        batch: dict[str, ModelRows] = {}
        for frame in self.frames():
            if not frame:
                yield batch
                batch = {}
                continue
            model, rows = _rows_from_ipc(frame)
            batch[model] = rows


def _rows_to_ipc(model: str, rows: ModelRows) -> bytes:
    names = list(rows.columns)
    meta = {"model": model, "names": names, "invalid": [(i, n, v.reason, v.value) for i, n, v in rows.invalid]}
    arrays = [pa.array(rows.event_ms, type=pa.int64()), pa.array(rows.unknown, type=pa.int64()),
              *(rows.columns[name] for name in names)]
    return table_to_ipc(pa.table(arrays, names=[str(i) for i in range(len(arrays))]).replace_schema_metadata(
        {"rows": orjson.dumps(meta)}))


def _rows_from_ipc(blob: bytes) -> tuple[str, ModelRows]:
    table = table_from_ipc(blob)
    meta = orjson.loads(table.schema.metadata[b"rows"])
    arrays = [table.column(i).combine_chunks() for i in range(table.num_columns)]
    invalid = [(i, n, InvalidValue(r, v)) for i, n, r, v in meta["invalid"]]
    return meta["model"], ModelRows(arrays[0].to_numpy(), dict(zip(meta["names"], arrays[2:])),
                                    arrays[1].to_numpy().tolist(), invalid)


class EventSpill(FramedFile):
    """Batches of valid events (validated without kinds) written to a temporary file, then read back in the same
    order (a context manager: the file is removed on exit): each batch one frame, a JSON array of [model, event
    time, features, prediction], so that reading them back needs no validation. Their values came from JSON
    (every snapshot format is read as JSON records, ``core/event_files.py``), so they read back the same."""

    def write(self, events: Iterable[Event]) -> None:
        """Append one batch of events."""
        self.append(orjson.dumps([[e.model, e.event_ms, e.features, e.prediction] for e in events]))

    def read(self) -> Iterator[list[Event]]:
        """Every batch written, in order (request ids left out: a reference does not use them)."""
        for frame in self.frames():
            yield [Event(*fields) for fields in orjson.loads(frame)]


class BlobFile(FramedFile):
    """Byte strings kept in a temporary file instead of memory: :meth:`put` gives a handle, :meth:`get` the
    bytes back (a context manager: the file is removed on exit). Written once, read any number of times.

    >>> with BlobFile() as blobs:
    ...     handle = blobs.put(b"summary")
    ...     handle, blobs.put(b"next"), blobs.get(handle)
    ((0, 7), (15, 4), b'summary')
    """

    def put(self, blob: bytes) -> tuple[int, int]:
        """Keep ``blob``; its handle (its frame's offset, its length)."""
        return self.append(blob), len(blob)

    def get(self, handle: tuple[int, int]) -> bytes:
        """The bytes kept under ``handle``."""
        return self.frame_at(handle[0])
