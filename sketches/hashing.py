"""The hash functions of the window summary, identical in Python and Java (see ``sketches/FORMAT.md``).

Everything here is 64-bit wrapping arithmetic on numpy ``uint64`` (vectorised for the per-event
keys); the Java twins live in ``jobs/java`` and a test compares the two on random input.

>>> int(mix64(np.array([1], dtype=np.uint64))[0])
6238072747940578789
>>> window_seed("m", 0) == zlib.crc32(b"m|0")
True
>>> value_hash("a") < 2 ** 63
True
"""

from __future__ import annotations

import zlib
from pathlib import PurePath
from typing import Sequence

import numpy as np
import pyarrow as pa

_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_FNV_OFFSET = 0xCBF29CE484222325
_FNV_PRIME = 0x100000001B3
_MASK64 = (1 << 64) - 1


def mix64(z: np.ndarray) -> np.ndarray:
    """SplitMix64's finalizer on a ``uint64`` array (wrapping)."""
    z = (z ^ (z >> np.uint64(30))) * _M1
    z = (z ^ (z >> np.uint64(27))) * _M2
    return z ^ (z >> np.uint64(31))


def _mix64_int(z: int) -> int:
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK64
    return z ^ (z >> 31)


def crc32(text: str) -> int:
    """CRC-32 of the UTF-8 bytes, unsigned (``java.util.zip.CRC32``)."""
    return zlib.crc32(text.encode("utf-8"))


def window_seed(model: str, start_ms: int) -> int:
    """The seed of one (model, window): every draw of its sample derives from it."""
    return crc32(f"{model}|{start_ms}")


def event_keys(seed: int, topics: Sequence[str] | str, partitions: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Each record's 63-bit sample key (int64) from its coordinates: topic, partition, offset."""
    with np.errstate(over="ignore"):
        if isinstance(topics, str):
            topic_hash = np.uint64(crc32(topics))
        else:
            unique = {t: crc32(t) for t in set(topics)}
            topic_hash = np.fromiter((unique[t] for t in topics), dtype=np.uint64, count=len(topics))
        z = mix64(np.uint64(seed) * _GOLDEN + topic_hash)
        z = mix64(z + np.asarray(partitions, dtype=np.int64).astype(np.uint64))
        z = mix64(z + np.asarray(offsets, dtype=np.int64).astype(np.uint64))
    return np.atleast_1d(z >> np.uint64(1)).astype(np.int64)


def value_hash(value: str) -> int:
    """63-bit hash of a category value: FNV-1a over its UTF-8 bytes, then mixed."""
    h = _FNV_OFFSET
    for byte in value.encode("utf-8"):
        h = ((h ^ byte) * _FNV_PRIME) & _MASK64
    return _mix64_int(h) >> 1


#: Values hashed together by :func:`value_hashes`: a block's arrays stay in the CPU cache.
_BLOCK = 32768


def value_hashes(values: Sequence[str] | pa.Array) -> np.ndarray:
    """:func:`value_hash` of many values at once (a list of str or an Arrow string array) as ``uint64``.

    Vectorised over byte positions on the Arrow buffers, one block of values at a time (its arrays
    stay in the CPU cache): no Python string is touched.
    """
    arr = values if isinstance(values, pa.Array) else pa.array(values, pa.large_string())
    out = np.empty(len(arr), dtype=np.uint64)
    if len(arr) == 0:
        return out
    if not pa.types.is_string(arr.type):
        arr = arr.cast(pa.large_string())
    buffers = arr.buffers()
    width = np.int32 if pa.types.is_string(arr.type) else np.int64
    offsets = np.frombuffer(buffers[1], dtype=width)[arr.offset:arr.offset + len(arr) + 1]
    data = np.frombuffer(buffers[2], dtype=np.uint8) if buffers[2] is not None else np.zeros(1, np.uint8)
    for first in range(0, len(arr), _BLOCK):
        bounds = offsets[first:first + _BLOCK + 1]
        _finish(_fnv_block(data, bounds[:-1].astype(np.int64), np.diff(bounds), out[first:first + _BLOCK]))
    return out


def _fnv_block(data: np.ndarray, starts: np.ndarray, lengths: np.ndarray, h: np.ndarray) -> np.ndarray:
    """FNV-1a of the byte strings data[start:start+length] into ``h``."""
    longest = int(lengths.max())
    if lengths.size * longest <= 2 * int(lengths.sum(dtype=np.int64)) + lengths.size:  # ids: lengths near the longest
        return _fnv_together(data, starts, lengths, h)
    sizes = np.flatnonzero(np.bincount(lengths)) if longest < 4096 else np.unique(lengths)
    if sizes.size <= 16:  # a few lengths far apart: hash each length's values together, no masking
        for size in sizes.tolist():
            rows = np.flatnonzero(lengths == size)
            h[rows] = _fnv_columns(data, starts[rows], size, np.ones(rows.size, dtype=bool))
    else:
        h[:] = _fnv_columns(data, starts, int(sizes[-1]), lengths)
    return h


def _finish(z: np.ndarray) -> np.ndarray:
    """:func:`mix64` then ``>> 1``, overwriting ``z`` (one scratch array, no other temporaries)."""
    scratch = np.empty_like(z)
    with np.errstate(over="ignore"):
        for shift, factor in ((30, _M1), (27, _M2), (31, None)):
            np.right_shift(z, np.uint64(shift), out=scratch)
            np.bitwise_xor(z, scratch, out=z)
            if factor is not None:
                np.multiply(z, factor, out=z)
    return np.right_shift(z, np.uint64(1), out=z)


def _fnv_together(data: np.ndarray, starts: np.ndarray, lengths: np.ndarray, h: np.ndarray) -> np.ndarray:
    """FNV-1a of every string into ``h``, all stepping through the longest one's byte positions together.

    A shorter string's hash is set aside when its bytes end (the bytes read past its end, from the
    next value or the buffer's last byte, then only touch a hash that is thrown away).
    """
    longest = int(lengths.max())
    short = np.flatnonzero(lengths < longest)
    short_lengths = lengths[short].astype(np.uint8 if longest < 256 else np.int64)  # narrow: argsort by radix
    short = short[np.argsort(short_lengths, kind="stable")]
    ends = np.searchsorted(lengths[short], np.arange(longest + 1))  # short[ends[j]:ends[j + 1]] have length j
    saved = np.empty(short.size, dtype=np.uint64)
    byte, prime = np.empty(starts.size, dtype=np.uint8), np.uint64(_FNV_PRIME)
    h.fill(_FNV_OFFSET)
    with np.errstate(over="ignore"):
        for j in range(longest):
            if ends[j + 1] > ends[j]:
                saved[ends[j]:ends[j + 1]] = h[short[ends[j]:ends[j + 1]]]
            np.take(data[j:], starts, out=byte, mode="clip")  # clipped: past the buffer, a row has ended
            np.bitwise_xor(h, byte, out=h)
            np.multiply(h, prime, out=h)
    h[short] = saved
    return h


def _fnv_columns(data: np.ndarray, starts: np.ndarray, width: int, lengths: np.ndarray) -> np.ndarray:
    """FNV-1a of the byte strings data[start:start+length], byte position by byte position."""
    h, prime, last = np.full(starts.size, _FNV_OFFSET, dtype=np.uint64), np.uint64(_FNV_PRIME), max(data.size - 1, 0)
    index = starts.copy()
    with np.errstate(over="ignore"):
        for j in range(width):
            live = lengths > j if lengths.dtype != bool else None
            if live is None or live.all():
                np.bitwise_xor(h, data[index], out=h)
                np.multiply(h, prime, out=h)
            else:
                h = np.where(live, (h ^ data[np.minimum(index, last)]) * prime, h)
            index += 1
    return h


def split_coordinates(coordinates: Sequence[tuple]) -> tuple[list[str], np.ndarray, np.ndarray]:
    """Topics, partitions and offsets of record coordinates: (topic, partition, offset), (path, line) or (line,).

    A file's topic is its name without the folder: the same file replayed from anywhere keys alike.

    >>> split_coordinates([("/tmp/a/events.jsonl", 7)])[0]
    ['events.jsonl']
    """
    if not coordinates:
        return [], np.empty(0, np.int64), np.empty(0, np.int64)
    width = len(coordinates[0])
    if width == 3:
        topics, partitions, offsets = zip(*coordinates)
    elif width == 2:
        paths, offsets = zip(*coordinates)
        names = {path: PurePath(str(path)).name for path in set(paths)}
        topics = [names[path] for path in paths]
        partitions = (0,) * len(coordinates)
    else:
        topics, partitions, offsets = ("",) * len(coordinates), (0,) * len(coordinates), [c[0] for c in coordinates]
    return list(topics), np.asarray(partitions, dtype=np.int64), np.asarray(offsets, dtype=np.int64)
