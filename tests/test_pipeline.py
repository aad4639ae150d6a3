"""The shared window pipeline without Flink: validation, window summaries, reference files (the reference
choice: tests/test_references.py)."""

from __future__ import annotations

import numpy as np
import orjson
import pytest

from driftwarden.core.errors import SerializationError
from driftwarden.core.errors import InvalidEventError
from driftwarden.pipeline.judging import analyze_summary, drift_policy
from driftwarden.pipeline.summary import WindowRows, WindowSummary, summarize_window
from driftwarden.pipeline.reference_set import ReferenceSet, is_reference_file
from driftwarden.pipeline.references import reference_from_summaries
from driftwarden.jobs.source import kafka_source_ddl
from driftwarden.schemas.config import MonitorConfig, SourceConfig, feature_kinds_lookup
from driftwarden.schemas.events import EventRules, InvalidValue, validate_event

WINDOW = 10_000
CONFIG = MonitorConfig.model_validate({
    "window": {"size": "10s"},
    "reference": {"mode": "warmup", "warmup_windows": 3},
    "thresholds": {"min_count": 30},
    "models": [{"name": "m", "features": {"x": "numeric", "c": "categorical"}}],
})
MODEL = CONFIG.models[0]
T_EVENT = 1_767_225_600_000


def _maps(n: int, shift: float = 0.0, seed: int = 0) -> list[dict]:
    rng = np.random.default_rng(seed)
    return [{"x": None if i % 40 == 0 else float(rng.normal(shift)), "c": str(rng.choice(["a", "b"])), "u": 1}
            for i in range(n)]


def test_validated_events_summarize_like_their_feature_maps():
    """The fast path (validation's split values) and the general one give the same summary."""
    maps = _maps(3000)
    kinds = feature_kinds_lookup(CONFIG)
    rows = WindowRows(MODEL)
    for line, m in enumerate(maps):
        event = validate_event(orjson.dumps({"event_time": T_EVENT, "model": "m", "features": m}), kinds)
        rows.add(event.features, (line,), event.by_kind)
    fast = rows.summarize("m", 0, WINDOW)
    slow = summarize_window("m", 0, WINDOW, maps, MODEL)
    assert (fast.events, fast.unknown_features) == (slow.events, slow.unknown_features) == (3000, 3000)
    for name in MODEL.features:
        assert fast.features[name][0].count == slow.features[name][0].count
        assert np.array_equal(fast.features[name][1].values, slow.features[name][1].values)
    assert fast.features["x"][0].nulls == sum(m["x"] is None for m in maps) > 0


def test_the_common_shape_is_split_by_validation_and_others_are_not():
    kinds = feature_kinds_lookup(CONFIG)
    common = validate_event(b'{"event_time": 1767225600000, "model": "m", "features": {"c": "a", "x": 2}}', kinds)
    extra = validate_event(b'{"event_time": 1767225600000, "model": "m", "features": {"x": 2, "u": 1}}', kinds)
    assert (common.by_kind, extra.by_kind) == (((2,), ("a",)), None)
    text = validate_event(b'{"event_time": 1767225600000, "model": "m", "features": {"x": "2", "c": "a"}}', kinds)
    flag = validate_event(b'{"event_time": 1767225600000, "model": "m", "features": {"x": true, "c": "a"}}', kinds)
    assert (text.by_kind, dict(text.invalid)) == (None, {"x": InvalidValue("wrong_type:string", "2")})
    assert dict(flag.invalid) == {"x": InvalidValue("wrong_type:boolean", "true")}
    strict = EventRules(reject_invalid=True)  # source.on_invalid_value: reject_event
    with pytest.raises(InvalidEventError, match="type_mismatch:x"):
        validate_event(b'{"event_time": 1767225600000, "model": "m", "features": {"x": "2", "c": "a"}}', kinds, strict)
    assert validate_event(b'{"event_time": 1767225600000, "model": "m", "features": {"x": 2, "u": [1]}}', kinds,
                          strict).invalid is None  # an unmonitored list is ignored, strict or not


def test_summary_is_independent_of_arrival_order():
    maps = _maps(2500)
    coords = [("t", i % 2, i) for i in range(len(maps))]
    a, b = WindowRows(MODEL), WindowRows(MODEL)
    for m, where in zip(maps, coords):
        a.add(m, where)
    for m, where in zip(maps[::-1], coords[::-1]):
        b.add(m, where)
    first, second = a.summarize("m", 0, WINDOW), b.summarize("m", 0, WINDOW)
    for name in MODEL.features:
        assert np.array_equal(first.features[name][1].values, second.features[name][1].values)


def test_integers_beyond_int64_take_the_python_path():
    rows = WindowRows(MODEL)
    for line, x in enumerate([2**63 + 1, 1.5, None]):
        rows.add({"x": x, "c": "a"}, (line,))
    sketch = rows.summarize("m", 0, WINDOW).features["x"][0]
    assert (sketch.count, sketch.nulls, sketch.max) == (3, 1, float(2**63 + 1))


def test_summary_round_trips_and_rejects_corrupt_bytes():
    summary = summarize_window("m", 0, WINDOW, _maps(500), MODEL)
    back = WindowSummary.deserialize(summary.serialize())
    assert (back.model, back.window_start_ms, back.events) == ("m", 0, 500)
    assert back.features["c"][0].frequencies() == summary.features["c"][0].frequencies()
    with pytest.raises(SerializationError):
        WindowSummary.deserialize(summary.serialize()[:-7])


def test_reference_set_round_trip_and_detection(tmp_path):
    summaries = [summarize_window("m", w * WINDOW, WINDOW, _maps(300, seed=w), MODEL) for w in range(4)]
    reference = reference_from_summaries(summaries, MODEL.monitored, drift_policy(CONFIG.thresholds), prediction=True)
    path = tmp_path / "ref.dwref"
    ReferenceSet({"m": reference}).save(path)
    assert is_reference_file(path)
    assert set(ReferenceSet.load(path).models["m"].features) == {"x", "c"}
    events = tmp_path / "events.jsonl"
    events.write_text('{"event_time": 0}\n')
    assert not is_reference_file(events)


@pytest.mark.parametrize("start, expected", [
    ("earliest", "'scan.startup.mode' = 'earliest-offset'"),
    ("committed", "'scan.startup.mode' = 'group-offsets'"),
    ("2026-01-01T00:00:00Z", "'scan.startup.timestamp-millis' = '1767225600000'"),
])
def test_source_start_positions(start, expected):
    ddl = kafka_source_ddl("events", SourceConfig(topics=["a", "b"], start=start), 5000)
    assert expected in ddl and "'topic' = 'a;b'" in ddl and "scan.bounded.mode" not in ddl


def test_topic_pattern_source():
    ddl = kafka_source_ddl("events", SourceConfig(topic_pattern="features-.*"), 5000, bounded=True)
    assert "'topic-pattern' = 'features-.*'" in ddl and "'scan.bounded.mode' = 'latest-offset'" in ddl
