"""The Java window summary (jobs/java WindowSummaryAgg, run by jobs/java_summary.py) against sketches/FORMAT.md.

The oracle here is written from FORMAT.md alone, small and brute force (no shared code with the
Java or with sketches/): it decodes Java's bytes field by field and recomputes every field from the
records. The byte-for-byte comparison with the Python implementation is the Python side's test.
"""

from __future__ import annotations

import json
import math
import random
import struct
import zlib
from collections import Counter

import pytest

from driftwarden.jobs.java_summary import java_summaries

MASK = (1 << 64) - 1
NAN_BITS = 0x7FF8000000000000
UNCAPPED = (1 << 63) - 1


# ---- hashing, from FORMAT.md ("Hashing")
def mix64(z: int) -> int:
    """SplitMix64's finaliser on a 64-bit unsigned value."""
    z &= MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return z ^ (z >> 31)


def fnv1a64(data: bytes) -> int:
    """FNV-1a 64."""
    h = 0xCBF29CE484222325
    for b in data:
        h = ((h ^ b) * 0x100000001B3) & MASK
    return h


def value_hash(value: str) -> int:
    """h(v) = mix64(fnv1a64(utf8(v))) >>> 1."""
    return mix64(fnv1a64(value.encode("utf-8"))) >> 1


def event_key(model: str, start: int, topic: str, partition: int, offset: int) -> int:
    """key = mix64(mix64(mix64(seed * golden + crc32(topic)) + partition) + offset) >>> 1."""
    seed = zlib.crc32(f"{model}|{start}".encode("utf-8"))
    z = mix64(seed * 0x9E3779B97F4A7C15 + zlib.crc32(topic.encode("utf-8")))
    return mix64(mix64(z + partition) + offset) >> 1


def base_key(x: float, precision: int) -> int:
    """The log-linear bucket of a finite value at shift 0 (-0.0 as +0.0)."""
    x = x + 0.0
    bits = struct.unpack("<Q", struct.pack("<d", x))[0]
    pos = (bits & ((1 << 63) - 1)) >> (52 - precision)
    return ~pos if bits >> 63 else pos


def f64_bits(x: float | None) -> int:
    return NAN_BITS if x is None else struct.unpack("<Q", struct.pack("<d", x))[0]


# ---- a frame reader, from FORMAT.md ("Frames")
class Frame:
    """Reads the fields of one DWSK frame; ``done`` checks nothing is left."""

    def __init__(self, data: bytes, kind: int | tuple[int, ...]) -> None:
        kinds = kind if isinstance(kind, tuple) else (kind,)
        assert data[:4] == b"DWSK" and data[4] == 1 and data[5] in kinds, data[:6]
        self.data, self.pos, self.kind = data, 6, data[5]

    def take(self, fmt: str):
        values = struct.unpack_from("<" + fmt, self.data, self.pos)
        self.pos += struct.calcsize("<" + fmt)
        return values if len(values) > 1 else values[0]

    def blob(self) -> bytes:
        size = self.take("I")
        self.pos += size
        assert self.pos <= len(self.data)
        return self.data[self.pos - size:self.pos]

    def text(self) -> str:
        return self.blob().decode("utf-8")

    def texts(self) -> list[str]:
        count = self.take("Q")
        lengths, data = struct.unpack(f"<{count}I", self.blob()), self.blob()
        assert sum(lengths) == len(data)
        out, pos = [], 0
        for n in lengths:
            out.append(data[pos:pos + n].decode("utf-8"))
            pos += n
        return out

    def packed(self, count: int) -> list[int]:
        """Unsigned integers at the narrowest width of 1, 2, 4, 8 bytes that holds the largest."""
        width = self.take("B")
        values = list(struct.unpack(f"<{count}{ {1: 'B', 2: 'H', 4: 'I', 8: 'Q'}[width]}", self.blob()))
        assert width == min(w for w in (1, 2, 4, 8) if max(values, default=0) < 1 << (8 * w)), (width, values[:5])
        return values

    def varints(self, count: int) -> list[int]:
        """A blob of unsigned LEB128 varints: 7 bits a byte, low first, the high bit on all but a value's last;
        each in its fewest bytes."""
        data, values, value, shift = self.blob(), [], 0, 0
        for byte in data:
            value |= (byte & 0x7F) << shift
            shift += 7
            if byte < 0x80:
                assert shift == 7 or byte != 0, "a varint not in its fewest bytes"
                values.append(value)
                value, shift = 0, 0
        assert shift == 0 and len(values) == count and all(v < 2**64 for v in values), (len(values), count)
        return values

    def done(self) -> None:
        assert self.pos == len(self.data), f"{len(self.data) - self.pos} trailing bytes"


def decode_histogram(data: bytes) -> dict:
    f = Frame(data, (25, 20))  # kind 25: steps and counts as varints; kind 20 (written before): packed
    integers = f.varints if f.kind == 25 else f.packed
    out = dict(zip(["P", "M", "s", "n", "nulls", "nans", "pos_inf", "neg_inf"], f.take("BIBQqqqq")))
    out["min"], out["max"] = f.take("QQ")  # bits
    size, first = f.take("Iq")
    keys = [first] if size else []
    for step in integers(max(size - 1, 0)):  # 64-bit wrapping steps
        keys.append((keys[-1] + step + 2**63) % 2**64 - 2**63)
    counts = integers(size)
    out["buckets"] = dict(zip(keys, counts))
    out["keys"] = keys
    f.done()
    return out


def decode_counts(data: bytes) -> dict:
    f = Frame(data, 7)
    out = dict(zip(["C", "n", "nulls", "T"], f.take("IQQq")))
    values, counts = f.texts(), f.blob()
    out["values"] = values
    out["counts"] = dict(zip(values, struct.unpack(f"<{len(counts) // 8}q", counts)))
    f.done()
    return out


def decode_sample(data: bytes) -> dict:
    f = Frame(data, (26, 8))  # kind 26: a categorical column coded; kind 8 (written before): presence and strings
    k, m = f.take("II")
    keys = list(struct.unpack(f"<{m}q", f.blob()))
    features = {}
    for _ in range(f.take("I")):
        name, kind = f.text(), f.take("B")
        if kind == 1:
            features[name] = list(struct.unpack(f"<{m}Q", f.blob()))
        elif f.kind == 26:
            values, codes = f.texts(), f.packed(m)
            assert values == sorted(set(values), key=lambda v: v.encode("utf-8")), values
            assert set(codes) - {0} == set(range(1, len(values) + 1)), "every distinct value is used"
            features[name] = [values[c - 1] if c else None for c in codes]
        else:
            present, values = f.blob(), iter(f.texts())
            features[name] = [next(values) if p else None for p in present]
    f.done()
    return {"k": k, "keys": keys, "features": features}


def decode_summary(data: bytes) -> dict:
    f = Frame(data, 17)
    out = {"model": f.text()}
    out.update(zip(["start", "end", "events", "unknown"], f.take("qqqq")))
    out["features"] = {}
    for _ in range(f.take("I")):
        name, sketch = f.text(), f.blob()
        out["features"][name] = decode_histogram(sketch) if sketch[5] in (25, 20) else decode_counts(sketch)
    out["sample"] = decode_sample(f.blob())
    f.done()
    return out


# ---- brute-force expectations, from FORMAT.md
def expected_histogram(values: list, precision: int, max_buckets: int) -> dict:
    finite = [v for v in values if v is not None and math.isfinite(v)]
    keys = [base_key(v, precision) for v in finite]
    shift = 0
    while len({k >> shift for k in keys}) > max_buckets:
        shift += 1
    buckets = dict(Counter(k >> shift for k in keys))
    return {"P": precision, "M": max_buckets, "s": shift, "n": len(finite), "nulls": values.count(None),
            "nans": sum(v is not None and math.isnan(v) for v in values),
            "pos_inf": sum(v == math.inf for v in values), "neg_inf": sum(v == -math.inf for v in values),
            "min": f64_bits(min(v + 0.0 for v in finite)) if finite else NAN_BITS,
            "max": f64_bits(max(v + 0.0 for v in finite)) if finite else NAN_BITS,
            "buckets": buckets, "keys": sorted(buckets)}


def expected_counts(values: list, cap: int) -> dict:
    present = [v for v in values if v is not None]
    counts = Counter(present)
    threshold = UNCAPPED
    if len(counts) > cap:
        threshold = sorted(value_hash(v) for v in counts)[cap]
        counts = Counter({v: c for v, c in counts.items() if value_hash(v) < threshold})
    kept = sorted(counts, key=lambda v: v.encode("utf-8"))
    return {"C": cap, "n": len(present), "nulls": len(values) - len(present), "T": threshold,
            "values": kept, "counts": dict(counts)}


def expected_summary(spec: dict, model: str, start: int, records: list[dict]) -> dict:
    config = spec["models"].get(model)
    features = config["features"] if config else []
    out = {"model": model, "start": start, "end": start + spec["window_ms"], "events": len(records),
           "unknown": sum(r["unknown"] for r in records), "features": {}}
    for name, column in features:
        values = [r["values"][column] for r in records]
        if spec["columns"][column] == "numeric":
            out["features"][name] = expected_histogram(values, config.get("precision", 52), config.get("max_buckets", 1024))
        else:
            out["features"][name] = expected_counts(values, config.get("max_exact", 1000))
    k = config.get("sample_size", 2000) if config else 0
    keyed = sorted((event_key(model, start, r["topic"], r["partition"], r["offset"]), r) for r in records)[:k]
    sample = {}  # the categorical features only (FORMAT.md: a numeric feature's deep tests read its histogram)
    for name, column in features:
        if spec["columns"][column] == "categorical":
            sample[name] = [r["values"][column] for _, r in keyed]
    out["sample"] = {"k": k, "keys": [key for key, _ in keyed], "features": sample}
    return out


# ---- data
SPEC = {
    "window_ms": 10_000,
    "columns": ["numeric", "categorical", "numeric", "categorical"],
    "models": {
        "small": {"features": [["x", 0], ["c", 1], ["y", 2]], "sample_size": 7, "precision": 3,
                  "max_buckets": 16, "max_exact": 5},
        "défaut|π": {"features": [["c", 3], ["x", 0]]},  # FORMAT.md's defaults (P = 52)
    },
}
TRICKY_NUMBERS = [0.0, -0.0, 1.0, -1.0, math.nan, math.inf, -math.inf, None, 5e-324, -5e-324, 2.2250738585072014e-308,
                  1.7976931348623157e308, -1.7976931348623157e308, 1e-300, 0.1, 3.0, 2**53 + 1.0, -7.25]
TRICKY_TEXTS = [None, "", "a", "b", "é", "😀", "\ue000", "\uffff", "a\x00b", "tab\there", "é" * 40, "Z", "z"]


def make_records(rng: random.Random, count: int) -> list[dict]:
    """Records of three models (one unconfigured) over several windows, negative event times included."""
    records = []
    for i in range(count):
        model = rng.choice(["small", "défaut|π", "unconfigured"])
        numbers = [rng.choice(TRICKY_NUMBERS) if rng.random() < 0.3 else rng.gauss(0, 10 ** rng.randint(-3, 6))
                   for _ in range(2)]
        texts = [rng.choice(TRICKY_TEXTS) if rng.random() < 0.3 else f"v{rng.randint(0, 40)}" for _ in range(2)]
        records.append({"model": model, "event_ms": rng.randint(-25_000, 35_000), "topic": rng.choice(["t", "events-é"]),
                        "partition": rng.randint(0, 3), "offset": i * 7 + rng.randint(0, 6), "unknown": rng.randint(0, 2),
                        "values": [numbers[0], texts[0], numbers[1], texts[1]]})
    return records


def window_start(event_ms: int, window_ms: int) -> int:
    return event_ms - event_ms % window_ms  # Python's % is a floor modulo, as FORMAT.md's floorMod


@pytest.fixture(scope="module")
def records() -> list[dict]:
    return make_records(random.Random(13), 1500)


@pytest.fixture(scope="module")
def one_partial(records) -> list[tuple[str, int, bytes]]:
    return java_summaries(json.dumps(SPEC), records, 1)


# ---- tests
def test_hash_oracles_match_known_values() -> None:
    """The test's own hash functions agree with published values before judging Java with them."""
    assert fnv1a64(b"") == 0xCBF29CE484222325 and fnv1a64(b"a") == 0xAF63DC4C8601EC8C
    assert mix64(0x9E3779B97F4A7C15) == 0xE220A8397B1DCDAF  # splitmix64(0)'s first output
    assert base_key(1.0, 7) == 1023 << 7 == 130944 and base_key(-1.0, 7) == ~130944
    assert base_key(0.0, 7) == base_key(-0.0, 7) == 0


def test_summaries_match_format_md(records, one_partial) -> None:
    """Every field of every window equals the brute-force expectation computed from FORMAT.md."""
    windows: dict[tuple[str, int], list[dict]] = {}
    for r in records:
        windows.setdefault((r["model"], window_start(r["event_ms"], SPEC["window_ms"])), []).append(r)
    assert [(m, s) for m, s, _ in one_partial] == sorted(windows)
    for model, start, data in one_partial:
        got = decode_summary(data)
        assert got == expected_summary(SPEC, model, start, windows[(model, start)]), (model, start)
    decoded = [decode_summary(d) for _, _, d in one_partial]
    small = [d["features"]["x"] for d in decoded if d["model"] == "small"]
    assert any(h["s"] > 0 for h in small), "the data should make some histogram collapse"
    assert any(d["features"]["c"]["T"] != UNCAPPED for d in decoded if d["model"] == "small"), "and cap some counts"
    for d in decoded:
        for sketch in d["features"].values():
            if "keys" in sketch:
                assert sketch["keys"] == sorted(sketch["keys"]) and len(sketch["keys"]) <= sketch["M"]
    assert all(d["sample"]["k"] == 0 and not d["features"] for d in decoded if d["model"] == "unconfigured")


@pytest.mark.parametrize("partials", [2, 5])
def test_partials_merge_to_the_same_bytes(records, one_partial, partials) -> None:
    """Split into partials (each through the state serializer), merged, in another record order: same bytes."""
    shuffled = records[:]
    random.Random(partials).shuffle(shuffled)
    assert java_summaries(json.dumps(SPEC), shuffled, partials) == one_partial


def test_spot_values() -> None:
    """1.0 / -1.0 / 0.0 / -0.0 keys, NaN/inf/null counts, the seed of "m|0", an empty string kept as a value."""
    spec = {"window_ms": 10_000, "columns": ["numeric", "categorical"],
            "models": {"m": {"features": [["x", 0], ["c", 1]], "precision": 7}}}
    values = [1.0, -1.0, 0.0, -0.0, math.nan, math.inf, -math.inf, None, 1.0]
    texts = ["", None, "é", "", "a", "a", None, "b", "😀"]
    records = [{"model": "m", "event_ms": i, "topic": "t", "partition": 0, "offset": i, "unknown": 0,
                "values": [v, c]} for i, (v, c) in enumerate(zip(values, texts))]
    [(model, start, data)] = java_summaries(json.dumps(spec), records, 2)
    got = decode_summary(data)
    x, c = got["features"]["x"], got["features"]["c"]
    assert (model, start, got["end"], got["events"]) == ("m", 0, 10_000, 9)
    assert x["buckets"] == {~130944: 1, 0: 2, 130944: 2}
    assert (x["n"], x["nulls"], x["nans"], x["pos_inf"], x["neg_inf"]) == (5, 1, 1, 1, 1)
    assert (x["min"], x["max"]) == (f64_bits(-1.0), f64_bits(1.0))
    assert c["counts"] == {"": 2, "é": 1, "a": 2, "b": 1, "😀": 1} and c["values"] == ["", "a", "b", "é", "😀"]
    assert (c["n"], c["nulls"], c["T"]) == (7, 2, UNCAPPED)
    seed = zlib.crc32(b"m|0")
    expected = sorted((mix64(mix64(mix64(seed * 0x9E3779B97F4A7C15 + zlib.crc32(b"t")) + 0) + i) >> 1)
                      for i in range(len(values)))
    assert got["sample"]["keys"] == expected
    [(_, _, zero)] = java_summaries(json.dumps(spec), [{**records[3], "values": [-0.0, None]}], 1)
    assert decode_summary(zero)["features"]["x"]["min"] == 0  # -0.0 read as +0.0


def test_bad_spec_is_named() -> None:
    """A bad spec fails with a message naming the field."""
    spec = {"window_ms": 10_000, "columns": ["numeric"], "models": {"m": {"features": [["x", 0]], "max_buckets": 4}}}
    with pytest.raises(RuntimeError, match="max_buckets"):
        java_summaries(json.dumps(spec), [], 1)


def test_flink_two_phase_window_aggregate_matches_harness(tmp_path, records) -> None:
    """The aggregate registered from PyFlink (py4j instance) in a TUMBLE window TVF, local-global at
    parallelism 2: the plan has local and global window aggregates, and the bytes equal the harness's."""
    from pyflink.common import Configuration
    from pyflink.datastream import StreamExecutionEnvironment
    from pyflink.java_gateway import get_gateway
    from pyflink.table import EnvironmentSettings, StreamTableEnvironment

    from driftwarden.jobs.java_summary import udf_jar

    rows = [r for r in records if r["event_ms"] >= 0 and all(v is None or isinstance(v, str) or math.isfinite(v)
                                                              for v in r["values"])]
    source = tmp_path / "events"  # two files: two splits, so each subtask's local aggregate sees part of a window
    source.mkdir()
    for part in range(2):
        (source / f"part-{part}.jsonl").write_text("".join(
            json.dumps({**r, "values": None, **{f"c{i}": v for i, v in enumerate(r["values"])}}, ensure_ascii=False)
            + "\n" for r in rows[part::2]), encoding="utf-8")
    config = Configuration()
    config.set_string("pipeline.jars", udf_jar().resolve().as_uri())
    config.set_string("table.local-time-zone", "UTC")
    config.set_string("table.optimizer.agg-phase-strategy", "TWO_PHASE")
    env = StreamExecutionEnvironment.get_execution_environment(config)
    env.set_parallelism(2)
    t_env = StreamTableEnvironment.create(env, environment_settings=EnvironmentSettings.in_streaming_mode())
    agg = get_gateway().jvm.dev.driftwarden.flink.WindowSummaryAgg(json.dumps(SPEC))
    t_env._j_tenv.createTemporarySystemFunction("DW_WINDOW_SUMMARY", agg)
    t_env.execute_sql(f"""
        CREATE TABLE src (model STRING, event_ms BIGINT, topic STRING, `partition` INT, `offset` BIGINT,
                          `unknown` INT, `invalid` STRING, c0 DOUBLE, c1 STRING, c2 DOUBLE, c3 STRING,
                          ts AS TO_TIMESTAMP_LTZ(event_ms, 3), WATERMARK FOR ts AS ts - INTERVAL '1' MINUTE)
        WITH ('connector' = 'filesystem', 'path' = '{source}', 'format' = 'json')""")
    query = """
        SELECT DW_WINDOW_SUMMARY(model, event_ms, topic, `partition`, `offset`, `unknown`, `invalid`, c0, c1, c2, c3)
               AS summary
        FROM TABLE(TUMBLE(TABLE src, DESCRIPTOR(ts), INTERVAL '10' SECOND))
        GROUP BY model, window_start, window_end"""
    plan = t_env.explain_sql(query)
    assert "LocalWindowAggregate" in plan and "GlobalWindowAggregate" in plan, plan
    with t_env.execute_sql(query).collect() as results:
        got = sorted(bytes(row[0]) for row in results)
    want = sorted(data for _, _, data in java_summaries(json.dumps(SPEC), rows, 1))
    assert [decode_summary(d) for d in got] == [decode_summary(d) for d in want]
    assert got == want


def test_a_summary_written_before_samples_left_numeric_features_out_reads_without_them(records, one_partial) -> None:
    """A summary whose sample still carries numeric columns (state or stored rows from before the
    change) is read by Java and by Python as the same window without them: the bytes of today's format."""
    from dataclasses import replace

    from pyflink.java_gateway import get_gateway
    from pyflink.util.java_utils import add_jars_to_context_class_loader

    from driftwarden.jobs.flink_env import job_jars
    from driftwarden.pipeline.summary import WindowSummary, merge_summaries
    from driftwarden.sketches.sample import EventSample
    from tests.test_sketches_serialization import kind8_frame

    model, start, new = next(p for p in one_partial if p[0] == "small")
    summary = WindowSummary.deserialize(new)
    config = SPEC["models"]["small"]
    kinds = {name: SPEC["columns"][column] for name, column in config["features"]}
    by_key = {event_key(r["model"], start, r["topic"], r["partition"], r["offset"]): r for r in records
              if r["model"] == model and window_start(r["event_ms"], SPEC["window_ms"]) == start}
    kept = [by_key[int(key)] for key in summary.sample.keys]
    columns = {name: [r["values"][column] for r in kept] for name, column in config["features"]}
    old = replace(summary, sample=EventSample(config["sample_size"], kinds).update(summary.sample.keys, columns))
    assert set(decode_sample(old.sample.serialize())["features"]) == {"x", "c", "y"}
    today = old.sample.serialize()  # kind 26; the summaries of then carried kind 8 samples
    old_bytes = old.serialize().replace(struct.pack("<I", len(today)) + today,
                                        struct.pack("<I", len(kind8_frame(old.sample))) + kind8_frame(old.sample))
    assert kind8_frame(old.sample) in old_bytes and old_bytes != new

    assert WindowSummary.deserialize(old_bytes).serialize() == new
    assert merge_summaries([WindowSummary.deserialize(old_bytes), summary]).sample.kinds == {"c": "categorical"}
    add_jars_to_context_class_loader(job_jars())
    java = get_gateway().jvm.dev.driftwarden.flink.WindowSummary
    assert bytes(java.fromBytes(old_bytes).toBytes()) == new


@pytest.mark.parametrize("seed, size, max_buckets", [(1, 500, 1024), (2, 50_000, 1024), (3, 5_000, 16)])
def test_java_reads_varint_histograms_and_the_packed_and_unpacked_ones_written_before(seed: int, size: int,
                                                                                      max_buckets: int) -> None:
    """Java reads Python's kind 25 histogram and writes the same bytes; it reads kind 20 and kind 6 frames of
    the same histogram (state or stored rows from before) as the same histogram; corrupt varints and a corrupt
    width are refused with their reason."""
    import numpy as np
    from py4j.protocol import Py4JJavaError
    from pyflink.java_gateway import get_gateway
    from pyflink.util.java_utils import add_jars_to_context_class_loader

    from driftwarden.jobs.flink_env import job_jars
    from driftwarden.sketches.histogram import HistogramSketch
    from tests.test_sketches_serialization import kind6_frame, kind20_frame

    rng = np.random.default_rng(seed)
    values = np.concatenate([rng.normal(size=size), -rng.lognormal(size=size // 10), [0.0, -0.0, 5e-324]])
    sk = HistogramSketch(max_buckets=max_buckets).update(values)
    add_jars_to_context_class_loader(job_jars())
    java = get_gateway().jvm.dev.driftwarden.flink.LogLinearHistogram
    assert sk.serialize()[5] == 25 and bytes(java.fromBytes(sk.serialize()).toBytes()) == sk.serialize()
    assert bytes(java.fromBytes(kind20_frame(sk)).toBytes()) == sk.serialize()
    assert bytes(java.fromBytes(kind6_frame(sk)).toBytes()) == sk.serialize()
    steps_at = 6 + struct.calcsize("<BIBQqqqqdd") + 4 + 8
    truncated = bytearray(sk.serialize())
    truncated[steps_at + 4 + struct.unpack_from("<I", truncated, steps_at)[0] - 1] |= 0x80  # the last step runs on
    with pytest.raises(Py4JJavaError, match="corrupt varints"):
        java.fromBytes(bytes(truncated))
    corrupt = bytearray(kind20_frame(sk))
    corrupt[steps_at] = 3  # the steps' width
    with pytest.raises(Py4JJavaError, match="width 3"):
        java.fromBytes(bytes(corrupt))
