"""The live job's window summary (Java, WindowSummaryAgg) and replay's (Python) are the same bytes.

The live job aggregates in Java, one event at a time, on every subtask, and merges partials;
replay and ``reference build`` summarize in Python, vectorised. Verdicts can only be identical if
the summaries are: this runs both on the same records (tricky values, random values, several
models, windows past the histogram's bucket cap and the categorical cap, partials merged in Java)
and compares every window's bytes.
"""

from __future__ import annotations

import math
import os
import random
import subprocess

import numpy as np
import orjson
import pyarrow as pa
import pytest

from driftwarden.pipeline.columns import configured_values
from driftwarden.jobs.drift_job import segments_json
from driftwarden.jobs.feature_spec import FeatureColumnSpec
from driftwarden.jobs.java_summary import flink_classpath, java_summaries, udf_jar
from driftwarden.pipeline.event_time import window_start
from driftwarden.pipeline.summary import WindowRows, WindowSummary
from driftwarden.pipeline.segments import fold_to_top, other_key, segment_keys
from driftwarden.schemas.config import MonitorConfig, feature_kinds_lookup

CONFIG = MonitorConfig.model_validate({
    "window": {"size": "10s"},
    "models": [
        {"name": "m", "features": {"x": "numeric", "y": "numeric", "c": "categorical"}, "sample_size": 40,
         "sketch_buckets": 16},
        {"name": "n", "features": {"y": "categorical", "z": "numeric"}, "sample_size": 2000},
        {"name": "p", "features": {"z": "numeric"}, "monitor_prediction": False},
    ]})
SPEC = FeatureColumnSpec.from_config(CONFIG)
TRICKY = [0.0, -0.0, 1.0, -1.0, 5e-324, -5e-324, 1.7976931348623157e308, -1.7976931348623157e308, math.nan,
          math.inf, -math.inf, None, 1e-300, 123456789.123, 2.0 ** 53 + 1, 1e6 + 0.25, 3.0]
LABELS = ["a", "b", "ß", "日本", "\U0001F600", "\uff21", "", "a\x00b", None]  # U+FF21 sorts after U+1F600 in UTF-16


def _records(seed: int, n: int) -> list[dict]:
    rng = random.Random(seed)
    records = []
    for i in range(n):
        model = rng.choice(["m", "m", "n", "p", "unmonitored"])
        features = {"m": {"x": _number(rng), "y": _number(rng), "c": _label(rng)},
                    "n": {"y": _label(rng), "z": _number(rng)}, "p": {"z": _number(rng)}}.get(model, {})
        records.append({"model": model, "event_ms": 1_767_225_600_000 + rng.randrange(0, 35_000),
                        "topic": rng.choice(["t", "other-tøpic"]), "partition": rng.randrange(3), "offset": i,
                        "unknown": rng.randrange(2), "features": features, "prediction": _number(rng)})
    return records


def _number(rng: random.Random) -> float | None:
    roll = rng.random()
    if roll < 0.3:
        return rng.choice(TRICKY)
    if roll < 0.6:
        return rng.lognormvariate(0, 3) * rng.choice([1, -1])
    return round(rng.gauss(5, 2), rng.randrange(0, 6))


def _label(rng: random.Random) -> str | None:
    return rng.choice(LABELS) if rng.random() < 0.5 else f"id{rng.randrange(3000)}"


def _python(records: list[dict]) -> list[tuple[str, int, bytes]]:
    windows: dict[tuple[str, int], WindowRows | None] = {}
    counts: dict[tuple[str, int], tuple[int, int]] = {}
    for r in records:
        key = (r["model"], window_start(r["event_ms"], CONFIG.window.size_ms))
        model = CONFIG.model(r["model"])
        rows = windows.setdefault(key, WindowRows(model) if model else None)
        events, unknown = counts.get(key, (0, 0))
        counts[key] = (events + 1, unknown + r["unknown"])
        if rows is not None:
            rows.add(r["features"], (r["topic"], r["partition"], r["offset"]), prediction=r.get("prediction"))
            rows.unknown_features += r["unknown"]
    out = []
    for (model, start), rows in sorted(windows.items()):
        if rows is None:
            events, unknown = counts[(model, start)]
            summary = WindowSummary(model, start, start + CONFIG.window.size_ms, events, unknown)
        else:
            summary = rows.summarize(model, start, CONFIG.window.size_ms)
        out.append((model, start, summary.serialize()))
    return out


def _configured(record: dict) -> tuple[tuple, tuple] | None:
    """The record's monitored values as validation hands them over (None: a model not monitored)."""
    model = CONFIG.model(record["model"])
    return configured_values(record["features"], model.kinds, prediction=record.get("prediction"))[0] if model else None


def _java(records: list[dict], partials: int) -> list[tuple[str, int, bytes]]:
    rows = [{**{k: r[k] for k in ("model", "event_ms", "topic", "partition", "offset", "unknown")},
             "values": SPEC.row_values(r["model"], _configured(r))} for r in records]
    return java_summaries(SPEC.aggregate_spec(CONFIG), rows, partials)


@pytest.mark.parametrize("seed,n,partials", [(1, 400, 1), (2, 3000, 3), (3, 20_000, 2)])
def test_java_and_python_summaries_are_the_same_bytes(seed: int, n: int, partials: int) -> None:
    records = _records(seed, n)
    python, java = _python(records), _java(records, partials)
    assert [(m, s) for m, s, _ in java] == [(m, s) for m, s, _ in python]
    for (model, start, got), (_, _, expected) in zip(java, python):
        if got != expected:  # say which part differs before failing
            j, p = WindowSummary.deserialize(got), WindowSummary.deserialize(expected)
            diffs = [name for name in p.sketches if j.sketches[name].serialize() != p.sketches[name].serialize()]
            sample = j.sample.serialize() == p.sample.serialize()
            pytest.fail(f"{model}@{start}: sketches differ {diffs}, sample equal {sample}, "
                        f"events {j.events}/{p.events}, unknown {j.unknown_features}/{p.unknown_features}")
    capped = [WindowSummary.deserialize(b) for m, _, b in python if m == "m"]
    assert any(s.sketches["x"].shift > 0 for s in capped)  # the bucket cap was exercised
    assert all(s.sketches["prediction"].n > 0 for s in capped)  # the prediction was summarized, in both
    assert all(s.groups["(numeric)"].n > 0 and s.groups["(numeric)"].incomplete > 0 for s in capped)  # x, y moments
    assert all("prediction" not in WindowSummary.deserialize(b).sketches for m, _, b in python if m == "p")


# 40,000 ids nearly all distinct in one window: Python hashes them and bounds the cap from a sample of hashes
@pytest.mark.parametrize("events,flat", [(8000, False), (40_000, True)])
def test_a_categorical_past_its_cap_is_the_same_bytes(events: int, flat: bool) -> None:
    rng = np.random.default_rng(5)
    ids = rng.integers(0, 1_000_000, size=events) if flat else rng.zipf(1.3, size=events) % 50_000
    records = [{"model": "n", "event_ms": 1_767_225_600_000 + i * 8000 // events, "topic": "t", "partition": 0,
                "offset": i, "unknown": 0, "features": {"y": f"v{k}", "z": float(i)}} for i, k in enumerate(ids.tolist())]
    python, java = _python(records), _java(records, 4)
    assert java == python
    assert not WindowSummary.deserialize(python[0][2]).sketches["y"].is_exact


SEGMENTED = MonitorConfig.model_validate({
    "window": {"size": "10s"},
    "models": [{"name": "s", "features": {"x": "numeric", "c": "categorical", "g": "categorical"}, "sample_size": 50,
                "segments": {"by": ["g"], "top": 3, "min_count": 1}}]})
SEGMENTED_SPEC = FeatureColumnSpec.from_config(SEGMENTED)
#: the top segments (as a reference names them) and the other one, last
SEGMENT_KEYS = (("(missing)",), ("a",), ("((other))",), other_key(("g",)))


def _segment_indices(values: list[str | None]) -> list[int]:
    """Each record's segment as an index into SEGMENT_KEYS, by replay's rule (pipeline/segments.py)."""
    keys = fold_to_top(segment_keys({"g": pa.array(values, pa.string())}, ("g",)), SEGMENT_KEYS[:-1])
    return [SEGMENT_KEYS.index(key) for key in keys]


# 30,000 events: the windows' histograms of x coarsen (over 1,024 distinct values), so do the segments' (their rule);
# sample_size 2,000: each segment's sample (about 2,000 events a window) is cut to segments.sample_size (its rule:
# the default, 500, that Java keeps when the segments spec does not say, or 1,000 given in the spec)
@pytest.mark.parametrize("partials,events,sample_size,segment_sample", [
    (1, 3000, 50, None), (3, 3000, 50, None), (3, 30_000, 50, None), (3, 30_000, 2000, None), (2, 30_000, 2000, 1000),
    (2, 3000, 2000, None)])  # the last: segments of fewer events than 500 keep them all, their k lowered to 500
def test_the_merge_of_segment_partials_is_pythons_segmented_summary(partials: int, events: int, sample_size: int,
                                                                    segment_sample: int | None) -> None:
    """The job's per-segment partials, merged by Java MergeSegments (its accumulator through its state
    serializer part way and at the end, as after a restore), are the bytes of Python's segmented summary,
    each segment's histograms brought to its window's resolution (``sketches.histogram.segment_shift``) and its
    sample cut to its bottom ``SEGMENT_SAMPLE_SIZE`` events when the model samples more."""
    segmenting = SEGMENTED.model("s").segments.model_dump() | ({"sample_size": segment_sample} if segment_sample else {})
    config = MonitorConfig.model_validate(SEGMENTED.model_dump() | {"models": [
        SEGMENTED.model("s").model_dump() | {"sample_size": sample_size, "segments": segmenting}]})
    rng = random.Random(11)
    records = [{"model": "s", "event_ms": 1_767_225_600_000 + rng.randrange(0, 25_000), "topic": "t",
                "partition": rng.randrange(2), "offset": i, "unknown": 0,
                "features": {"x": _number(rng), "c": _label(rng), "g": rng.choice(["a", "b", "(other)", None, "z"])}}
               for i in range(events)]
    model = config.model("s")
    python = []
    for start in sorted({window_start(r["event_ms"], 10_000) for r in records}):
        rows = WindowRows(model)
        for r in (r for r in records if window_start(r["event_ms"], 10_000) == start):
            rows.add(r["features"], (r["topic"], r["partition"], r["offset"]), prediction=None)
        python.append(("s", start, rows.summarize("s", start, 10_000, SEGMENT_KEYS[:-1]).serialize()))
    segments = _segment_indices([r["features"]["g"] for r in records])
    java = java_summaries(SEGMENTED_SPEC.aggregate_spec(config), [
        {**{k: r[k] for k in ("model", "event_ms", "topic", "partition", "offset", "unknown")},
         "values": SEGMENTED_SPEC.row_values("s", configured_values(r["features"], model.kinds)[0]),
         "segment": segment} for r, segment in zip(records, segments)],
        partials, segments_json=segments_json({"s": (("g",), SEGMENT_KEYS)}, config if segment_sample else None))
    assert len(java) == len(python) == 3
    assert java == python
    assert all(len(WindowSummary.deserialize(data).segments) == 4 for _, _, data in python)  # every segment had events
    coarsened = [(summary.sketches["x"].shift, [s.sketches["x"].shift for s in summary.segments.values()])
                 for summary in (WindowSummary.deserialize(data) for _, _, data in python)]
    assert all(0 < whole == min(segments) for whole, segments in coarsened) == (events > 3000), coarsened
    cut = min(sample_size, segment_sample or 500)
    for summary in (WindowSummary.deserialize(data) for _, _, data in python):
        assert (summary.sample.capacity, summary.sample.size) == (sample_size, min(sample_size, summary.events))
        assert [(s.sample.capacity, s.sample.size) for s in summary.segments.values()] == [
            (cut, min(cut, s.events)) for s in summary.segments.values()]
    assert any(s.events > cut for _, _, data in python for s in WindowSummary.deserialize(data).segments.values()) \
        == (events > 3000 or sample_size < 500)


VALUES_CONFIG = MonitorConfig.model_validate({"window": {"size": "10s"}, "models": [
    {"name": "b", "features": {"x": "numeric", "flag": "boolean", "c": "categorical"}, "sample_size": 30}]})
VALUES_SPEC = FeatureColumnSpec.from_config(VALUES_CONFIG)
WRONG = ["oops", "1.5", True, False, [1, 2], {"k": 1}, 3, 2.5, -0.0, 2 ** 60, "日本語のテキスト" * 6]


def _values_records(seed: int, n: int) -> list[dict]:
    """Events of a model with a boolean feature, a fifth of them with one or more values of the wrong type."""
    rng = random.Random(seed)
    records = []
    for i in range(n):
        features = {"x": _number(rng), "flag": rng.choice([True, False, None]), "c": _label(rng)}
        for name in features:
            if rng.random() < 0.07:
                features[name] = rng.choice(WRONG)
        records.append({"model": "b", "event_ms": 1_767_225_600_000 + rng.randrange(0, 25_000),
                        "topic": rng.choice(["t", "u"]), "partition": rng.randrange(2), "offset": i, "unknown": 0,
                        "features": features, "prediction": rng.choice([None, 0.5, "high"])})
    return records


@pytest.mark.parametrize("partials", [1, 3])
def test_booleans_and_invalid_values_are_the_same_bytes_in_java_and_python(partials: int) -> None:
    """A boolean feature (its true/false counts) and wrong-typed values (each feature's count and five examples
    of smallest event key, kept out of the sketches) give the same window summaries in the Java aggregate, fed
    as the live job's Python path feeds it (ValidateRecord's invalid column), and in replay's WindowRows."""
    from driftwarden.schemas.events import validate_document

    kinds_of = feature_kinds_lookup(VALUES_CONFIG)
    records, java_rows, windows = _values_records(11, 4000), [], {}
    for r in records:
        event = validate_document({"event_time": r["event_ms"], "model": "b", "features": r["features"],
                                   "prediction": r["prediction"]}, kinds_of)
        values, _ = configured_values(event.features, kinds_of("b"), event.by_kind, event.prediction, event.invalid)
        java_rows.append({**{k: r[k] for k in ("model", "event_ms", "topic", "partition", "offset", "unknown")},
                          "values": VALUES_SPEC.row_values("b", values),
                          "invalid": orjson.loads(VALUES_SPEC.invalid_json("b", event.invalid) or "null")})
        start = window_start(r["event_ms"], VALUES_CONFIG.window.size_ms)
        rows = windows.setdefault(start, WindowRows(VALUES_CONFIG.model("b")))
        rows.add(event.features, (r["topic"], r["partition"], r["offset"]), event.by_kind, event.prediction,
                 event.invalid)
    python = [("b", start, rows.summarize("b", start, 10_000).serialize()) for start, rows in sorted(windows.items())]
    java = java_summaries(VALUES_SPEC.aggregate_spec(VALUES_CONFIG), java_rows, partials)
    assert [(m, s) for m, s, _ in java] == [(m, s) for m, s, _ in python]
    for (_, start, got), (_, _, expected) in zip(java, python):
        j, p = WindowSummary.deserialize(got), WindowSummary.deserialize(expected)
        assert {n: t.count for n, t in j.invalid.items()} == {n: t.count for n, t in p.invalid.items()}, start
        assert j.invalid == p.invalid, start
        assert got == expected, start
    summaries = [WindowSummary.deserialize(b) for _, _, b in python]
    assert all(s.booleans == {"flag"} for s in summaries)
    assert all(set(s.invalid) == {"x", "flag", "c", "prediction"} for s in summaries)
    assert all(len(t.examples) == 5 for s in summaries for t in s.invalid.values())
    assert all(s.sketches["flag"].frequencies().keys() <= {"true", "false"} for s in summaries)


GROUP_CONFIG = MonitorConfig.model_validate({
    "window": {"size": "10s"},
    "models": [{"name": "g", "features": {f"g{k}": "numeric" for k in range(6)}, "sample_size": 10}]})
GROUP_SPEC = FeatureColumnSpec.from_config(GROUP_CONFIG)


def _wide(rng: random.Random, row: int) -> float | None:
    """A value for the group moments' fast path and its edges: zeros, anywhere in 2^-140 .. 2^127, ties of the
    31-bit rounding, the range's edges, runs whose magnitude grows with the row (anchors moving up) then drops."""
    sign = rng.choice([1.0, -1.0])
    roll = rng.randrange(12)
    if roll == 0:
        return rng.choice([0.0, -0.0])
    if roll == 1:
        return sign * math.ldexp(1.0 + rng.random(), rng.randrange(-140, 128))
    if roll == 2:  # a tie: significand bit 22 set, the bits below it clear
        return sign * math.ldexp((1 << 52) | (rng.getrandbits(31) << 22) | (1 << 21), rng.randrange(-72, -32))
    if roll == 3:
        return sign * math.ldexp(1.0 + rng.random(), rng.choice([126, -128]))
    if roll == 4 and rng.random() < 0.05:
        return rng.choice([None, math.nan, 2.0 ** 128])  # an incomplete row
    return sign * round((1.0 + rng.random()) * 2.0 ** ((row // 997) % 90 - 45), rng.randrange(0, 12))


@pytest.mark.parametrize("partials", [1, 3])
def test_group_moments_of_wide_values_are_the_same_bytes_in_java_and_python(partials: int) -> None:
    """The Java moments' fast path (values at per-feature anchors, flushed into the limbs every 2^13 rows, anchors
    moved up, rows below the window going to the limbs) sums exactly what Python sums: 30,000 rows of 6 features
    in one window, over many flushes, anchor moves and slow rows."""
    rng = random.Random(23)
    records = [{"model": "g", "event_ms": 1_767_225_600_000 + i % 10_000, "topic": "t", "partition": 0, "offset": i,
                "unknown": 0, "features": {f"g{k}": _wide(rng, i) for k in range(6)}} for i in range(30_000)]
    rows = WindowRows(GROUP_CONFIG.model("g"))
    for r in records:
        rows.add(r["features"], (r["topic"], r["partition"], r["offset"]))
    expected = rows.summarize("g", 1_767_225_600_000, 10_000)
    kinds = GROUP_CONFIG.model("g").kinds
    java_rows = [{**{k: r[k] for k in ("model", "event_ms", "topic", "partition", "offset", "unknown")},
                  "values": GROUP_SPEC.row_values("g", configured_values(r["features"], kinds)[0])} for r in records]
    [(_, _, got)] = java_summaries(GROUP_SPEC.aggregate_spec(GROUP_CONFIG), java_rows, partials)
    moments = expected.groups["(numeric)"]
    assert moments.n > 25_000 and moments.incomplete > 0
    assert WindowSummary.deserialize(got).groups["(numeric)"].serialize() == moments.serialize()
    assert got == expected.serialize()


@pytest.mark.parametrize("seed,fused", [(1, True), (2, False)])
def test_group_moments_fast_path_sums_what_the_plain_limbs_sum(seed: int, fused: bool) -> None:
    """Java's GroupMomentsCheck: 100,000 rows of wide values through the fast path (as configured, flushed every
    1,000 rows and normalised every 5,000, flushed and normalised every row, and in 3 partials through their bytes)
    against the plain limb path it replaced (kept in the check): every sum identical. Then 100,000 rows at the fast
    path's bounds (each of a batch's double accumulators within 2^30 of 2^53, odd: one row more rounds), and 100,000
    normal rows (5 decimals: the fast path's usual rows); each frame's bytes and read-back sums those of the BigInteger
    encoding it replaced (kept in the check), and 20,000 random integers through the sums' encoding and back. With the
    batch sums by fused multiply-adds (this machine's JVM has FMA) and, turned off, by multiplies and adds."""
    classpath = os.pathsep.join(str(p) for p in [udf_jar(), *flink_classpath()])
    done = subprocess.run(["java", f"-Ddriftwarden.group.fma={str(fused).lower()}", "-cp", classpath,
                           "dev.driftwarden.flink.GroupMomentsCheck", "--check", "100000",
                           str(seed)], capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    wide, bounds, normal, integers, sums = done.stdout.splitlines()
    assert wide.startswith("identical: 100000 rows, 35 sums, 4 ways")
    assert bounds.startswith("identical at the fast path's bounds: 100000 rows, 35 sums, 4 ways")
    assert normal.startswith("identical of normal values: 100000 rows, 35 sums, 4 ways")
    assert integers.startswith("identical integers: 20000 written and read as BigInteger's")
    if fused and sums == "batch sums by multiplies and adds":
        pytest.skip("this JVM has no FMA instruction (UseFMA false): the fused batch sums are not used here")
    assert sums == ("batch sums by fused multiply-adds" if fused else "batch sums by multiplies and adds")
