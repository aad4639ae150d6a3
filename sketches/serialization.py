"""Our binary framing around datasketches bytes: never pickle, always versioned.

Every serialized object starts with::

    b"DWSK"  magic (4 bytes)
    version  1 byte  (FORMAT_VERSION)
    kind     1 byte  (KIND_* below)

followed by fixed-width little-endian fields (``struct``) and length-prefixed blobs
(``uint32`` length, then bytes). A wrong magic, an unknown version or kind, and truncated
or trailing bytes raise :class:`core.errors.SerializationError`.
"""

from __future__ import annotations

import struct
from typing import Sequence

import numpy as np

from driftwarden.core.errors import SerializationError

MAGIC = b"DWSK"
FORMAT_VERSION = 1
KIND_NUMERIC_KLL = 1
KIND_NUMERIC_TDIGEST = 2
KIND_CATEGORICAL = 3
KIND_RESERVOIR = 4
KIND_REFERENCE = 5
KIND_NUMERIC_HIST = 6
KIND_CATEGORICAL_CAPPED = 7
KIND_EVENT_SAMPLE = 8
KIND_CATEGORICAL_PROFILE = 9
#: A reference whose features may carry a categorical profile (kind 5 references have none).
KIND_REFERENCE_PROFILED = 10
#: A kind 10 reference whose features also carry their windows' statistics (``sketches/dispersion.py``).
KIND_REFERENCE_WINDOWED = 11
#: A kind 11 reference followed by its multivariate groups' references (``sketches/multivariate.py``).
KIND_REFERENCE_GROUPS = 12
#: The numeric histogram with its keys and counts packed (kind 6 is still read).
KIND_NUMERIC_HIST_PACKED = 20
#: The numeric histogram with its key steps and counts as varints (kinds 20 and 6 are still read).
KIND_NUMERIC_HIST_VARINT = 25
#: The event sample with each categorical column as its distinct values and one index per event (kind 8 is still read).
KIND_EVENT_SAMPLE_CODED = 26
#: Most bytes one unsigned LEB128 varint of 64 bits takes (``Writer.varints``).
VARINT_MAX_BYTES = 10
#: Byte widths a packed integer blob may use (``Writer.packed``).
PACKED_WIDTHS = (1, 2, 4, 8)
#: The ``struct`` format of every frame's first fields: the magic, the format version and the kind.
FRAME_HEAD = "4sBB"
#: A blob's length prefix (``Writer.blob``, ``Reader.blob``).
BLOB_SIZE = struct.Struct("<I")


class Writer:
    """Append fields to a frame; ``getvalue()`` returns the bytes."""

    def __init__(self, kind: int) -> None:
        self._parts = [struct.pack("<" + FRAME_HEAD, MAGIC, FORMAT_VERSION, kind)]

    def pack(self, fmt: str, *values: object) -> Writer:
        """Append fixed-width fields in ``struct`` format ``fmt`` (little-endian)."""
        self._parts.append(struct.pack("<" + fmt, *values))
        return self

    def blob(self, data: bytes) -> Writer:
        """Append a length-prefixed byte string."""
        self._parts += [BLOB_SIZE.pack(len(data)), data]
        return self

    def text(self, value: str) -> Writer:
        """Append a length-prefixed UTF-8 string."""
        return self.blob(value.encode("utf-8"))

    def texts(self, values: Sequence[str]) -> Writer:
        """Append many UTF-8 strings at once: count, their byte lengths, then their bytes."""
        encoded = [v.encode("utf-8") for v in values]
        lengths = np.fromiter(map(len, encoded), dtype="<u4", count=len(encoded))
        return self.pack("Q", len(encoded)).blob(lengths.tobytes()).blob(b"".join(encoded))

    def packed(self, values: np.ndarray) -> Writer:
        """Append unsigned 64-bit integers at the narrowest width of ``PACKED_WIDTHS`` that holds
        the largest: ``u8`` width, then a blob of the values at that width (little-endian)."""
        values = np.asarray(values, dtype=np.uint64)
        largest = int(values.max()) if values.size else 0
        width = next(w for w in PACKED_WIDTHS if largest < 1 << (8 * w))
        return self.pack("B", width).blob(values.astype(f"<u{width}").tobytes())

    def varints(self, values: np.ndarray) -> Writer:
        """Append unsigned 64-bit integers as a blob of unsigned LEB128 varints (7 bits a byte, low bits first,
        the high bit set on every byte but a value's last), each in its fewest bytes."""
        return self.blob(encode_varints(values))

    def array(self, arr: np.ndarray) -> Writer:
        """Append a float64 array of any shape (ndim, shape, values)."""
        arr = np.ascontiguousarray(arr, dtype="<f8")
        self.pack("B", arr.ndim).pack(f"{arr.ndim}Q", *arr.shape)
        return self.blob(arr.tobytes())

    def getvalue(self) -> bytes:
        """Return the whole frame."""
        return b"".join(self._parts)


_PACKED_DTYPES = {width: np.dtype(f"<u{width}") for width in PACKED_WIDTHS}

#: Compiled ``struct`` layouts of the formats readers ask for (a few dozen).
_LAYOUTS: dict[str, struct.Struct] = {}


class Reader:
    """Read fields back from a frame, raising ``SerializationError`` on any inconsistency."""

    def __init__(self, data: bytes, expected_kinds: tuple[int, ...]) -> None:
        self._data = memoryview(data if isinstance(data, bytes) else bytes(data))  # bytes: read in place
        self._pos = 0
        magic = self._take(4)
        if magic != MAGIC:
            raise SerializationError(f"not a driftwarden sketch: bad magic {bytes(magic)!r}, want {MAGIC!r}")
        version, self.kind = self.unpack("BB")
        if version != FORMAT_VERSION:
            raise SerializationError(f"unknown sketch format version {version} (this build reads {FORMAT_VERSION})")
        if self.kind not in expected_kinds:
            raise SerializationError(f"unexpected sketch kind byte {self.kind}, want one of {expected_kinds}")

    def _advance(self, size: int) -> int:
        """Move past the next ``size`` bytes and return where they start; a truncation error when the frame ends
        before them."""
        start = self._pos
        end = start + size
        if end > len(self._data):
            raise truncated_error(end, len(self._data))
        self._pos = end
        return start

    def _take(self, size: int) -> memoryview:
        return self._data[self._advance(size):self._pos]

    def unpack(self, fmt: str) -> tuple:
        """Read fixed-width fields in ``struct`` format ``fmt``."""
        layout = _LAYOUTS.get(fmt) or _LAYOUTS.setdefault(fmt, struct.Struct("<" + fmt))
        return layout.unpack_from(self._data, self._advance(layout.size))

    def blob(self) -> bytes:
        """Read a length-prefixed byte string."""
        (size,) = BLOB_SIZE.unpack_from(self._data, self._advance(BLOB_SIZE.size))
        return bytes(self._take(size))

    def text(self) -> str:
        """Read a length-prefixed UTF-8 string."""
        try:
            return self.blob().decode("utf-8")
        except UnicodeDecodeError as exc:
            raise SerializationError(f"corrupt text field: {exc}") from exc

    def texts(self) -> list[str]:
        """Read strings written by :meth:`Writer.texts`."""
        return self.text_list().decode()

    def text_list(self) -> TextList:
        """Read strings written by :meth:`Writer.texts`, their framing checked, decoded later (:meth:`TextList.decode`)."""
        (count,) = self.unpack("Q")
        lengths, data = self.blob(), self.blob()
        if len(lengths) != 4 * count:
            raise SerializationError(f"corrupt text list: {len(lengths)} length bytes for {count} strings")
        ends = np.cumsum(np.frombuffer(lengths, dtype="<u4"), dtype=np.int64)
        if (int(ends[-1]) if count else 0) != len(data):
            raise SerializationError(f"corrupt text list: lengths add up to {int(ends[-1]) if count else 0}, "
                                     f"data has {len(data)} bytes")
        return TextList(ends, data)

    def packed(self, count: int) -> np.ndarray:
        """Read ``count`` integers written by :meth:`Writer.packed`, as uint64."""
        width, size = self.unpack("BI")
        if width not in PACKED_WIDTHS:
            raise SerializationError(f"corrupt packed integers: width {width}, want one of {PACKED_WIDTHS}")
        if size != width * count:
            raise SerializationError(f"corrupt packed integers: {size} bytes for {count} of width {width}")
        return np.frombuffer(self._take(size), dtype=_PACKED_DTYPES[width]).astype(np.uint64)

    def varints(self, count: int) -> np.ndarray:
        """Read ``count`` integers written by :meth:`Writer.varints`, as uint64."""
        return decode_varints(self.blob(), count)

    def array(self) -> np.ndarray:
        """Read a float64 array written by ``Writer.array``."""
        (ndim,) = self.unpack("B")
        shape = self.unpack(f"{ndim}Q")
        raw = self.blob()
        if len(raw) != 8 * int(np.prod(shape, dtype=np.int64)):
            raise SerializationError(f"corrupt array field: {len(raw)} bytes for shape {shape}")
        return np.frombuffer(raw, dtype="<f8").reshape(shape).copy()

    def rest(self) -> tuple[memoryview, int]:
        """The frame's bytes and the position of the first unread one: for a reader of many small fields that
        parses them itself, then calls :meth:`skip` with how many bytes it read."""
        return self._data, self._pos

    def skip(self, size: int) -> None:
        """Pass over ``size`` bytes (read by the caller from :meth:`rest`)."""
        self._take(size)

    def at_end(self) -> bool:
        """Whether every byte has been read (an optional trailing section is absent)."""
        return self._pos == len(self._data)

    def done(self) -> None:
        """Check that every byte was consumed."""
        if self._pos != len(self._data):
            raise SerializationError(f"{len(self._data) - self._pos} unexpected trailing bytes after sketch")


def truncated_error(end: int, size: int) -> SerializationError:
    """The error for a frame of ``size`` bytes that ends before byte ``end`` (every reader of frames raises it)."""
    return SerializationError(f"truncated sketch bytes: need {end} bytes, have {size}")


_VARINT_SHIFTS = np.arange(VARINT_MAX_BYTES, dtype=np.uint64) * np.uint64(7)


def encode_varints(values: np.ndarray) -> bytes:
    """Unsigned LEB128 bytes of ``values`` (uint64), each value in its fewest bytes.

    >>> encode_varints(np.array([0, 1, 127, 128, 300], dtype=np.uint64)).hex()
    '00017f8001ac02'
    """
    values = np.asarray(values, dtype=np.uint64)
    if not values.size:
        return b""
    groups = (values[:, None] >> _VARINT_SHIFTS) & np.uint64(0x7F)
    nonzero = groups != 0
    lengths = np.where(nonzero.any(axis=1), VARINT_MAX_BYTES - np.argmax(nonzero[:, ::-1], axis=1), 1)
    column = np.arange(VARINT_MAX_BYTES)
    more = column < (lengths - 1)[:, None]
    data = groups.astype(np.uint8) | np.where(more, 0x80, 0).astype(np.uint8)
    return data[column < lengths[:, None]].tobytes()


def decode_varints(raw: bytes, count: int) -> np.ndarray:
    """The ``count`` uint64 values of :func:`encode_varints` bytes (a :class:`SerializationError` for any other bytes).

    >>> decode_varints(bytes.fromhex("00017f8001ac02"), 5).tolist()
    [0, 1, 127, 128, 300]
    """
    data = np.frombuffer(raw, dtype=np.uint8)
    ends = np.flatnonzero(data < 0x80)
    if ends.size != count or (data.size and ends[-1] != data.size - 1):
        raise SerializationError(f"corrupt varints: {ends.size} complete values in {data.size} bytes, want {count}")
    if not count:
        return np.empty(0, np.uint64)
    if data.size == count:  # every value one byte (most counts and a coarsened histogram's steps)
        return data.astype(np.uint64)
    width = data.size // count
    if width <= VARINT_MAX_BYTES and data.size == width * count and (ends[0] == width - 1) and np.all(np.diff(ends) == width):
        if width == VARINT_MAX_BYTES and np.any(data[ends] > 1):
            raise SerializationError("corrupt varints: a value over 64 bits")
        groups = (data.reshape(count, width) & np.uint8(0x7F)).astype(np.uint64)  # all values of one length
        return np.bitwise_or.reduce(groups << _VARINT_SHIFTS[:width], axis=1)
    starts = np.concatenate(([0], ends[:-1] + 1))
    lengths = ends - starts + 1
    if int(lengths.max()) > VARINT_MAX_BYTES or np.any((lengths == VARINT_MAX_BYTES) & (data[ends] > 1)):
        raise SerializationError("corrupt varints: a value over 64 bits")
    position = np.arange(data.size) - np.repeat(starts, lengths)
    parts = (data & np.uint8(0x7F)).astype(np.uint64) << _VARINT_SHIFTS[position]
    return np.bitwise_or.reduceat(parts, starts)


def decode_varints_many(raws: Sequence[bytes], counts: Sequence[int]) -> np.ndarray:
    """:func:`decode_varints` of each of ``raws`` (``counts[i]`` values in ``raws[i]``), end to end, in one pass
    over their bytes joined (the many small blobs of a segmented window's histograms); the first bad one's
    :class:`SerializationError` for bytes that are not exactly that.

    >>> decode_varints_many([bytes.fromhex("00017f"), b"", bytes.fromhex("8001ac02")], [3, 0, 2]).tolist()
    [0, 1, 127, 128, 300]
    """
    joined = b"".join(raws)
    ends = np.flatnonzero(np.frombuffer(joined, dtype=np.uint8) < 0x80)
    bounds = np.cumsum(np.fromiter(map(len, raws), np.int64, len(raws)))
    found = np.diff(np.searchsorted(ends, bounds, side="left"), prepend=0)  # complete values in each blob
    closed = all(not raw or raw[-1] < 0x80 for raw in raws)  # no value runs on past its blob
    if not (closed and np.array_equal(found, np.asarray(counts, dtype=np.int64))):
        return np.concatenate([decode_varints(raw, count) for raw, count in zip(raws, counts)] or [np.empty(0, np.uint64)])
    return decode_varints(joined, int(found.sum()))  # each blob holds its own values: they decode as one


def wrap_native(what: str, loader, data: bytes):
    """Decode datasketches bytes with ``loader``, turning its errors into ``SerializationError``."""
    try:
        return loader(data)
    except Exception as exc:  # datasketches raises RuntimeError/ValueError on corrupt bytes
        raise SerializationError(f"corrupt {what} bytes: {exc}") from exc


class TextList:
    """Strings read by :meth:`Reader.text_list`: their UTF-8 bytes and end offsets, decoded on demand."""

    def __init__(self, ends: np.ndarray, data: bytes) -> None:
        self.ends, self.data = ends, data

    def __len__(self) -> int:
        return int(self.ends.size)

    def decode(self) -> list[str]:
        """The strings (a :class:`SerializationError` for bytes that are not UTF-8)."""
        ends = self.ends.tolist()
        try:
            return [self.data[start:end].decode("utf-8") for start, end in zip([0, *ends[:-1]], ends)]
        except UnicodeDecodeError as exc:
            raise SerializationError(f"corrupt text field: {exc}") from exc
