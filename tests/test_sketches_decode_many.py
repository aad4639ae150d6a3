"""A segmented window's histograms decoded together (``HistogramSketch.deserialize_many``, the varints of all of
them in one pass: ``serialization.decode_varints_many``) give the sketches each one's own decoding gives, and
bytes that are not sound are refused with the error one-by-one decoding names."""

from __future__ import annotations

import numpy as np
import pytest

from driftwarden.core.errors import SerializationError
from driftwarden.sketches import CategoricalSketch
from driftwarden.sketches.feature import deserialize_sketch, deserialize_sketches
from driftwarden.sketches.histogram import HistogramSketch
from driftwarden.sketches.serialization import Writer, decode_varints, decode_varints_many, encode_varints
from tests.test_histogram_stack import tricky_histograms

RNG = np.random.default_rng(11)


def varint_blobs() -> tuple[list[bytes], list[int]]:
    """Blobs of every width from 1 to 10 bytes a value, mixed widths, one-byte values only, and empty blobs."""
    values = [RNG.integers(0, 2 ** 63, size=50, dtype=np.uint64) >> RNG.integers(0, 63, size=50).astype(np.uint64),
              np.array([0, 127, 128, 2 ** 64 - 1, 2 ** 63], dtype=np.uint64), np.array([], dtype=np.uint64),
              np.arange(100, dtype=np.uint64), np.array([300], dtype=np.uint64), np.array([], dtype=np.uint64)]
    return [encode_varints(v) for v in values], [v.size for v in values]


def test_varints_of_many_blobs_are_each_blobs_end_to_end() -> None:
    blobs, counts = varint_blobs()
    expected = np.concatenate([decode_varints(b, c) for b, c in zip(blobs, counts)])
    assert decode_varints_many(blobs, counts).tolist() == expected.tolist()
    assert decode_varints_many(blobs[3:4], counts[3:4]).tolist() == list(range(100))  # one byte each
    assert decode_varints_many([b"", b""], [0, 0]).size == 0


@pytest.mark.parametrize("corrupt, match", [
    (lambda b, c: (b[:1] + [b[1][:-1]] + b[2:], c), "complete values"),  # a value cut: runs on into the next blob
    (lambda b, c: (b, c[:1] + [c[1] + 1] + c[2:]), "complete values"),  # a blob one value short
    (lambda b, c: ([b"\x01\x81", b"\x01"], [1, 1]), "complete values"),  # its count right, its last value open
    (lambda b, c: (b[:1] + [b"\xff" * 10 + b"\x7f"] + b[2:], c[:1] + [1] + c[2:]), "over 64 bits"),
])
def test_bad_varints_among_many_are_refused_as_alone(corrupt, match: str) -> None:
    blobs, counts = corrupt(*varint_blobs())
    with pytest.raises(SerializationError, match=match):
        decode_varints_many(blobs, counts)


def test_histograms_decoded_together_are_each_decoded_alone() -> None:
    sketches = tricky_histograms() + [HistogramSketch().update([np.nan, None]), HistogramSketch()]
    blobs = [sk.serialize() for sk in sketches]
    together = HistogramSketch.deserialize_many(blobs)
    for blob, alone, sketch in zip(blobs, map(HistogramSketch.deserialize, blobs), together):
        assert sketch.serialize() == blob
        assert np.array_equal(sketch.bucket_counts()[0], alone.bucket_counts()[0])
        assert np.array_equal(sketch.bucket_counts()[1], alone.bucket_counts()[1])
        assert repr((sketch.n, sketch.count, sketch.min, sketch.max, sketch.shift)) == \
            repr((alone.n, alone.count, alone.min, alone.max, alone.shift))
    together[1].update([1e6])  # each sketch owns its buckets: changing one leaves its neighbours
    assert [sk.serialize() for i, sk in enumerate(together) if i != 1] == [b for i, b in enumerate(blobs) if i != 1]
    mixed = [blobs[0], CategoricalSketch().update(["a", "b"]).serialize(), blobs[2]]
    assert [sk.serialize() for sk in deserialize_sketches(mixed)] == mixed


def histogram_frame(steps: list[int], counts: list[int], n: int | None = None) -> bytes:
    """A kind 25 histogram frame with these key steps (after a first key 5) and counts."""
    w = Writer(25).pack("BIBQ", 52, 1024, 0, sum(counts) if n is None else n)
    w.pack("qqqqdd", 0, 0, 0, 0, 0.0, 1.0).pack("Iq", len(counts), 5)
    return w.varints(np.array(steps, dtype=np.uint64)).varints(np.array(counts, dtype=np.uint64)).getvalue()


@pytest.mark.parametrize("bad, match", [
    (histogram_frame([1, 0], [1, 1, 1]), "keys not ascending"),  # a step of 0
    (histogram_frame([1, 2 ** 64 - 2], [1, 1, 1]), "keys not ascending"),  # a step that wraps below the first
    (histogram_frame([1, 1], [1, 0, 1]), "count not positive"),
    (histogram_frame([1, 1], [1, 1, 1], n=4), "n=4"),
    (histogram_frame([1, 1], [1, 1, 1]) + b"\x00", "trailing"),
])
def test_a_bad_histogram_among_many_is_refused_as_alone(bad: bytes, match: str) -> None:
    good = [sk.serialize() for sk in tricky_histograms()[:5]]
    with pytest.raises(SerializationError, match=match) as alone:
        deserialize_sketch(bad)
    with pytest.raises(SerializationError, match=match) as together:
        deserialize_sketches(good[:2] + [bad] + good[2:])
    assert str(together.value) == str(alone.value)
    assert [sk.serialize() for sk in HistogramSketch.deserialize_many([histogram_frame([1, 1], [1, 2, 3])])] == \
        [histogram_frame([1, 1], [1, 2, 3])]


def test_a_histogram_frame_cut_or_mislabelled_among_many_is_refused_as_alone() -> None:
    """Each frame's header is read with one struct (``histogram._varint_frame``): a frame cut at any byte, or with
    another magic, version or kind byte, is refused with the error its own decoding names, and the sound frames
    around it are not needed to tell."""
    good = [sk.serialize() for sk in tricky_histograms()[:3]]
    frame = histogram_frame([1, 1, 7], [1, 2, 3, 4])
    mislabelled = [b"XWSK" + frame[4:], frame[:4] + b"\x02" + frame[5:], frame[:5] + b"\x07" + frame[6:]]
    for bad in [frame[:cut] for cut in range(len(frame))] + mislabelled:
        with pytest.raises(SerializationError) as alone:
            HistogramSketch.deserialize(bad)
        with pytest.raises(SerializationError) as together:
            HistogramSketch.deserialize_many(good[:1] + [bad] + good[1:])
        assert str(together.value) == str(alone.value), bad
