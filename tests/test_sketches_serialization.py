"""Versioned framing: round trips for every sketch kind, and clear errors on bad bytes."""

from __future__ import annotations

import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from driftwarden.core.errors import SerializationError
from driftwarden.sketches import CategoricalSketch, NumericSketch, ReservoirSample, deserialize_sketch
from driftwarden.sketches.histogram import HistogramSketch
from driftwarden.sketches.serialization import FORMAT_VERSION, MAGIC

NUMERIC = np.random.default_rng(0).normal(size=3000)
STRINGS = [f"c{i % 37}" for i in range(3000)]

# (factory, data) for every kind of sketch: the house rules below run over all of them.
KINDS = {
    "kll": (lambda: NumericSketch(), NUMERIC),
    "tdigest": (lambda: NumericSketch(kind="tdigest"), NUMERIC),
    "categorical-exact": (lambda: CategoricalSketch(), STRINGS),
    "categorical-capped": (lambda: CategoricalSketch(max_exact=5), STRINGS),
    "histogram": (lambda: HistogramSketch(), NUMERIC),
    "histogram-coarse": (lambda: HistogramSketch(max_buckets=16), NUMERIC),
    "reservoir-float": (lambda: ReservoirSample(capacity=100), NUMERIC),
    "reservoir-str": (lambda: ReservoirSample(capacity=100), STRINGS),
}


def _state(sk) -> str:
    """Everything observable about a sketch, as text (so NaN compares equal to NaN)."""
    if isinstance(sk, ReservoirSample):
        return repr((sk.n, sk.kind, sk.values.tolist()))
    if isinstance(sk, CategoricalSketch):
        return repr((sk.n, sk.nulls, sk.is_exact, sorted(sk.frequencies().items())))
    if isinstance(sk, HistogramSketch):
        return repr((sk.n, sk.count, sk.nulls, sk.min, sk.max, sk.buckets, sk.std, sk.quantiles([0.1, 0.5, 0.9]).tolist()))
    return repr((sk.n, sk.count, sk.nulls, sk.min, sk.max, sk.sum, sk.sum_sq, sk.std,
                 sk.quantiles([0.1, 0.5, 0.9]).tolist()))


@pytest.mark.parametrize("kind", list(KINDS))
def test_house_rules(kind: str) -> None:
    """update / merge / serialize / deserialize / empty, the same for every sketch kind."""
    make, data = KINDS[kind]
    empty = make()
    assert empty.is_empty and empty.n == 0
    again = type(empty).deserialize(empty.serialize())
    assert again.is_empty and _state(again) == _state(empty)
    a, b = make().update(data[:1000]), make().update(data[1000:])
    assert a.update([]) is a and a.merge(make()) is a  # empty updates and merges change nothing
    merged = a.merge(b)
    assert merged.n == len(data) and not merged.is_empty
    restored = type(merged).deserialize(merged.serialize())
    assert _state(restored) == _state(merged)
    assert _state(type(merged).deserialize(restored.serialize())) == _state(merged)


def test_deserialize_sketch_dispatches_on_kind_byte() -> None:
    assert isinstance(deserialize_sketch(NumericSketch().serialize()), NumericSketch)
    assert isinstance(deserialize_sketch(CategoricalSketch().serialize()), CategoricalSketch)
    with pytest.raises(SerializationError, match="kind"):
        deserialize_sketch(ReservoirSample().serialize())


@pytest.mark.parametrize("kind", list(KINDS))
def test_bad_bytes_raise_serialization_error(kind: str) -> None:
    make, data = KINDS[kind]
    good = make().update(data).serialize()
    cls = type(make())
    with pytest.raises(SerializationError, match="magic"):
        cls.deserialize(b"XXXX" + good[4:])
    with pytest.raises(SerializationError, match="version 99"):
        cls.deserialize(MAGIC + struct.pack("<B", 99) + good[5:])
    with pytest.raises(SerializationError, match="truncated|corrupt"):
        cls.deserialize(good[: len(good) // 2])
    with pytest.raises(SerializationError, match="trailing"):
        cls.deserialize(good + b"\0")
    with pytest.raises(SerializationError):
        cls.deserialize(b"")
    assert good[4] == FORMAT_VERSION


def test_corrupt_native_bytes_raise_serialization_error() -> None:
    good = bytearray(NumericSketch().update(NUMERIC).serialize())
    header = 4 + 2 + 2 + 8 + 4 * 8 + 6 * 8 + 4  # magic, version/kind, k, n, counts, moments, blob length
    good[header:header + 8] = b"\xff" * 8
    with pytest.raises(SerializationError, match="corrupt kll"):
        NumericSketch.deserialize(bytes(good))


@settings(max_examples=40, deadline=None)
@given(st.lists(st.one_of(st.none(), st.floats(allow_nan=True, allow_infinity=True)), max_size=300),
       st.sampled_from(["kll", "tdigest"]))
def test_numeric_round_trip_any_floats(values: list, kind: str) -> None:
    sk = NumericSketch(kind=kind).update(values)
    again = NumericSketch.deserialize(sk.serialize())
    assert again.serialize() == sk.serialize()
    assert (again.n, again.nulls, again.nans, again.pos_inf, again.neg_inf) == \
        (sk.n, sk.nulls, sk.nans, sk.pos_inf, sk.neg_inf)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.one_of(st.none(), st.text(max_size=8)), max_size=200), st.sampled_from([2, 1000]))
def test_categorical_round_trip_any_text(values: list, max_exact: int) -> None:
    sk = CategoricalSketch(max_exact=max_exact).update(values)
    again = CategoricalSketch.deserialize(sk.serialize())
    assert again.frequencies() == sk.frequencies() and again.count == sk.count
    assert again.serialize() == sk.serialize()


def _attributes(sketch) -> dict:
    """A sketch's attributes (not a categorical's hash cache): arrays as lists, floats by their repr (NaN, -0.0), a
    categorical's counts as (value, count) pairs in their order."""
    def plain(name, value):
        if isinstance(value, np.ndarray):
            return value.tolist()
        if isinstance(value, float):
            return repr(value)
        return list(value.items()) if isinstance(sketch, CategoricalSketch) and name == "_counts" else value
    return {name: plain(name, value) for name, value in vars(sketch).items() if name != "_hashes"}


@settings(max_examples=40, deadline=None)
@given(st.lists(st.one_of(st.none(), st.text(max_size=3)), max_size=200), st.sampled_from([2, 1000]),
       st.lists(st.one_of(st.none(), st.floats(allow_nan=True, allow_infinity=True)), max_size=300),
       st.sampled_from([16, 1024]))
def test_a_copy_is_the_sketch_its_bytes_decode_to_and_independent(texts, max_exact, floats, max_buckets) -> None:
    """copy_sketch (each pipeline sketch's own copy) gives what decoding the sketch's bytes gives: every
    attribute, a categorical's values in the same (byte) order; merging into the copy leaves the original."""
    from driftwarden.sketches import copy_sketch

    for sketch in (CategoricalSketch(max_exact=max_exact, name="c").update(texts[::-1]),
                   HistogramSketch(max_buckets=max_buckets, name="x").update(floats)):
        decoded = type(sketch).deserialize(sketch.serialize())
        decoded.name = sketch.name
        before, copy = sketch.serialize(), copy_sketch(sketch)
        assert _attributes(copy) == _attributes(decoded)
        copy.merge(type(sketch).deserialize(before)).update([None])
        assert sketch.serialize() == before


def test_reservoir_round_trip_keeps_the_random_stream() -> None:
    a = ReservoirSample(capacity=50, seed=7).update(NUMERIC[:500])
    b = ReservoirSample.deserialize(a.serialize())
    a.update(NUMERIC[500:])
    b.update(NUMERIC[500:])
    assert a.values.tolist() == b.values.tolist()


def test_string_samples_written_one_field_each_still_read():
    """Reference files and stored summaries from before the packed string list stay readable."""
    sample = ReservoirSample(capacity=50, seed=3).update(["a", "ß", "c"] * 30)
    packed = sample.serialize()
    code_at, state_size = 4 + 2 + struct.calcsize("<QqQ"), struct.calcsize("<4QBI")
    assert packed[code_at] == 3  # strings, packed
    values = sample.values.tolist()
    older = (packed[:code_at] + bytes([2]) + packed[code_at + 1:code_at + 1 + state_size]
             + struct.pack("<Q", len(values)) + b"".join(struct.pack("<I", len(v.encode())) + v.encode()
                                                          for v in values))
    again = ReservoirSample.deserialize(older)
    assert again.values.tolist() == values and again.n == sample.n


def test_a_corrupt_packed_string_list_is_refused():
    data = bytearray(ReservoirSample(capacity=20, seed=1).update(["x", "yy"] * 10).serialize())
    data[-3] ^= 0xFF  # inside the string bytes: no longer UTF-8 or the lengths disagree
    with pytest.raises(SerializationError):
        ReservoirSample.deserialize(bytes(data[:-1]))
    with pytest.raises(SerializationError, match="corrupt"):
        ReservoirSample.deserialize(bytes(data))


def test_an_event_samples_strings_are_decoded_when_read_and_corrupt_ones_refused_then():
    """A deserialized EventSample decodes a categorical column when it is first read (a window's
    analysis reads few): the same values and bytes as before, and bytes that are not UTF-8 are a
    SerializationError at that read, naming the corruption."""
    from driftwarden.sketches.sample import EventSample

    kinds = {"x": "numeric", "c": "categorical"}
    sample = EventSample(8, kinds).update(np.arange(8), {"x": np.arange(8.0), "c": ["a", "ß", None, "d"] * 2})
    again = EventSample.deserialize(sample.serialize())
    assert "c" not in dict.keys(again.columns)  # not decoded yet
    assert again.columns["c"].tolist() == sample.columns["c"].tolist() and again.serialize() == sample.serialize()
    assert again.feature("c").values.tolist() == ["a", "ß", "d", "a", "ß", "d"]
    data = bytearray(sample.serialize())
    data[data.index("ß".encode())] = 0xFF  # same length, no longer UTF-8
    corrupt = EventSample.deserialize(bytes(data))
    with pytest.raises(SerializationError, match="corrupt text"):
        corrupt.feature("c")


def kind8_frame(sample) -> bytes:
    """The event sample frame written before categorical columns were coded (FORMAT.md, kind 8): per categorical
    column a presence byte per event, then the present values' strings."""
    from driftwarden.sketches.serialization import KIND_EVENT_SAMPLE, Writer

    w = Writer(KIND_EVENT_SAMPLE).pack("II", sample.capacity, sample.size).blob(sample.keys.astype("<i8").tobytes())
    w.pack("I", len(sample.kinds))
    for name, kind in sample.kinds.items():
        column = sample.columns[name]
        w.text(name).pack("B", 1 if kind == "numeric" else 2)
        if kind == "numeric":
            w.blob(column.astype("<f8").tobytes())
        else:
            w.blob(bytes(v is not None for v in column.tolist())).texts([v for v in column.tolist() if v is not None])
    return w.getvalue()


def test_an_event_samples_categorical_columns_are_coded_and_kind8_still_reads() -> None:
    """Kind 26: a categorical column is its distinct values (sorted by UTF-8 bytes) and one packed index per
    event (0 a null), one byte an event below 256 values instead of a presence byte and every string; a kind 8
    frame of the same sample (state or stored rows from before) reads as the same sample; an index past the
    values is refused."""
    from driftwarden.sketches.sample import EventSample

    rng = np.random.default_rng(5)
    values = [None, "b", "a", "ß", "\U0001F600", "\ufb01"]
    column = [values[i] for i in rng.integers(0, len(values), 2000)]
    sample = EventSample(2000, {"c": "categorical"}).update(rng.permutation(2000), {"c": column})
    data = sample.serialize()
    assert data[5] == 26 and len(data) < 8 * 2000 + 2000 + 200  # keys, one byte an event, the few values
    assert len(kind8_frame(sample)) > len(data) + 4 * 2000  # kind 8: a length and the bytes of every string
    for older in (data, kind8_frame(sample)):
        again = EventSample.deserialize(older)
        assert again.columns["c"].tolist() == sample.columns["c"].tolist() and again.serialize() == data
    bad = bytearray(data)
    bad[-1] = len(set(column) - {None}) + 1  # the last event's index past the values
    with pytest.raises(SerializationError, match="index"):
        EventSample.deserialize(bytes(bad))


def kind6_frame(sk: HistogramSketch) -> bytes:
    """The histogram frame written before keys and counts were packed (FORMAT.md, kind 6)."""
    from driftwarden.sketches.serialization import KIND_NUMERIC_HIST, Writer

    w = Writer(KIND_NUMERIC_HIST).pack("BIBQ", sk.precision, sk.max_buckets, sk.shift, sk.n)
    w.pack("qqqqdd", sk.nulls, sk.nans, sk.pos_inf, sk.neg_inf, sk.min, sk.max)
    keys, counts = sk.counts_at(sk.shift)
    return w.blob(keys.astype("<i8").tobytes()).blob(counts.astype("<i8").tobytes()).getvalue()


def kind20_frame(sk: HistogramSketch) -> bytes:
    """The histogram frame written before steps and counts were varints (FORMAT.md, kind 20: each packed)."""
    from driftwarden.sketches.serialization import KIND_NUMERIC_HIST_PACKED, Writer

    w = Writer(KIND_NUMERIC_HIST_PACKED).pack("BIBQ", sk.precision, sk.max_buckets, sk.shift, sk.n)
    w.pack("qqqqdd", sk.nulls, sk.nans, sk.pos_inf, sk.neg_inf, sk.min, sk.max)
    keys, counts = sk.counts_at(sk.shift)
    w.pack("Iq", keys.size, int(keys[0]) if keys.size else 0)
    return w.packed(np.diff(keys.view(np.uint64))).packed(counts.astype(np.uint64)).getvalue()


HISTOGRAM_CASES = [
    (np.random.default_rng(1).normal(size=500), 8.1),  # exact keys of distinct values: wide steps (7 bytes), counts 1
    (np.random.default_rng(2).normal(size=200_000), 2.5),  # coarsened: dense keys, counts up to thousands
    (np.array([-1.7976931348623157e308, -5e-324, 0.0, 5e-324, 1.7976931348623157e308] * 300), 12.0),  # wrapping steps
    (np.full(70_000, 3.0), 3.0),  # one bucket: no steps
    (np.array([]), 0.0),  # no bucket
]


@pytest.mark.parametrize("values, bytes_per_bucket", HISTOGRAM_CASES)
def test_histogram_keys_and_counts_are_varints_and_read_back(values, bytes_per_bucket: float) -> None:
    """Kind 25: the keys as the first and the steps between them, then the counts, each as LEB128 varints in
    their fewest bytes (a coarsened histogram about 2 bytes a bucket); read back exactly, and kind 20 and kind 6
    frames of the same histogram (written before) read as the same histogram."""
    from driftwarden.sketches.serialization import decode_varints

    sk = HistogramSketch().update(values)
    data = sk.serialize()
    header = 6 + struct.calcsize("<BIBQqqqqdd")
    size = struct.unpack_from("<I", data, header)[0]
    keys, counts = sk.counts_at(sk.shift)
    steps_at = header + 4 + 8
    steps_size = struct.unpack_from("<I", data, steps_at)[0]
    counts_size = struct.unpack_from("<I", data, steps_at + 4 + steps_size)[0]
    assert data[5] == 25 and size == sk.buckets and len(data) == steps_at + 8 + steps_size + counts_size
    steps = decode_varints(data[steps_at + 4:steps_at + 4 + steps_size], max(size - 1, 0))
    assert steps.tolist() == np.diff(keys.view(np.uint64)).tolist()
    assert decode_varints(data[steps_at + 8 + steps_size:], size).tolist() == counts.tolist()
    assert steps_size + counts_size <= bytes_per_bucket * size
    for older in (data, kind20_frame(sk), kind6_frame(sk)):
        again = deserialize_sketch(older)
        assert again.counts_at(again.shift)[0].tolist() == keys.tolist()
        assert again.counts_at(again.shift)[1].tolist() == counts.tolist()
        assert again.serialize() == data


@pytest.mark.parametrize("values", [np.array([0, 1, 127, 128, 16_383, 16_384, 2**63 - 1, 2**63, 2**64 - 1]),
                                    np.random.default_rng(3).integers(0, 2**63, 1000, dtype=np.uint64)
                                    >> np.random.default_rng(4).integers(0, 63, 1000).astype(np.uint64)])
def test_varints_are_leb128_in_fewest_bytes_and_read_back(values) -> None:
    """Each value's bytes are its 7-bit groups, low first, the high bit on all but its last (the protobuf / DWARF
    LEB128 encoding), as many as its highest set bit needs: the Java writer writes the same bytes."""
    from driftwarden.sketches.serialization import decode_varints, encode_varints

    values = np.asarray(values, dtype=np.uint64)
    data = encode_varints(values)
    expected = []
    for value in values.tolist():
        while value >= 0x80:
            expected.append(value & 0x7F | 0x80)
            value >>= 7
        expected.append(value)
    assert data == bytes(expected)
    assert decode_varints(data, values.size).tolist() == values.tolist()


def test_a_corrupt_histogram_is_refused() -> None:
    """Kind 25 frames whose varints are truncated, run past 64 bits, leave bytes over, or make a step of zero or a
    count of zero are refused, naming what was wrong; so is a kind 20 frame of a bad width."""
    sk = HistogramSketch().update([1.0, 2.0, 2.0, 5.0])
    data = sk.serialize()
    steps_at = 6 + struct.calcsize("<BIBQqqqqdd") + 4 + 8
    steps_size = struct.unpack_from("<I", data, steps_at)[0]
    counts_at = steps_at + 4 + steps_size

    def with_steps(raw: bytes) -> bytes:
        return data[:steps_at] + struct.pack("<I", len(raw)) + raw + data[counts_at:]

    with pytest.raises(SerializationError, match="varints"):
        HistogramSketch.deserialize(with_steps(b"\x01\x81"))  # the second step's last byte missing
    with pytest.raises(SerializationError, match="varints"):
        HistogramSketch.deserialize(with_steps(b"\x01\x01\x01"))  # a byte over
    with pytest.raises(SerializationError, match="over 64 bits"):
        HistogramSketch.deserialize(with_steps(b"\x01" + b"\xff" * 9 + b"\x02"))
    with pytest.raises(SerializationError, match="ascending"):
        HistogramSketch.deserialize(with_steps(b"\x00\x01"))
    zero_count = bytearray(data)
    zero_count[counts_at + 4] = 0  # the first count
    with pytest.raises(SerializationError, match="corrupt histogram"):
        HistogramSketch.deserialize(bytes(zero_count))
    bad_width = bytearray(kind20_frame(sk))
    bad_width[steps_at] = 3
    with pytest.raises(SerializationError, match="width 3"):
        HistogramSketch.deserialize(bytes(bad_width))


def test_a_frame_cut_anywhere_is_refused_naming_the_bytes_its_next_field_needs() -> None:
    """Reader.unpack and Reader.blob check the frame's end before reading: a frame cut at any byte raises
    "truncated" with the end the field needed (never a struct error, never a short blob read as whole)."""
    from driftwarden.sketches.serialization import Reader, Writer

    frame = Writer(17).pack("qI", -5, 3).blob(b"abcdef").text("naïve").pack("B", 7).getvalue()
    header = len(MAGIC) + 2
    ends = [header + 12, header + 16, header + 22, header + 26, header + 32, header + 33]  # each field's last byte

    def read(data: bytes) -> tuple:
        r = Reader(data, (17,))
        out = (r.unpack("qI"), r.blob(), r.text(), r.unpack("B"))
        r.done()
        return out

    assert read(frame) == ((-5, 3), b"abcdef", "naïve", (7,))
    for cut in range(header, len(frame)):
        need = next(end for end in ends if end > cut)
        with pytest.raises(SerializationError, match=f"^truncated sketch bytes: need {need} bytes, have {cut}$"):
            read(frame[:cut])
