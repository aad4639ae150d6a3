"""The shared window pipeline and the reference modes, without Flink (SQLite store)."""

from __future__ import annotations

import numpy as np
import orjson
import pytest

from sqlalchemy import func, select

from driftwarden.core.errors import SerializationError
from driftwarden.core.store import make_engine
from driftwarden.core.errors import InvalidEventError
from driftwarden.pipeline.judging import analyze_summary, drift_policy
from driftwarden.pipeline.summary import WindowRows, WindowSummary, summarize_window
from driftwarden.pipeline.references import ReferenceSet, StoredReferences, is_reference_file
from driftwarden.jobs.source import kafka_source_ddl
from driftwarden.schemas.config import MonitorConfig, SourceConfig, feature_kinds_lookup
from driftwarden.schemas.events import EventRules, InvalidValue, validate_event
from driftwarden.schemas.tables import window_summaries

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


def test_warmup_reference_judges_only_windows_after_the_first_n(tmp_path):
    engine = make_engine(f"sqlite:///{tmp_path}/s.db")
    refs = StoredReferences(CONFIG, drift_policy(CONFIG.thresholds))
    with engine.begin() as conn:
        for w in range(3):
            assert refs.reference_for(conn, "m", w * WINDOW) is None
            refs.remember(conn, summarize_window("m", w * WINDOW, WINDOW, _maps(800, seed=w), MODEL))
        reference = refs.reference_for(conn, "m", 3 * WINDOW)
        refs.remember(conn, summarize_window("m", 3 * WINDOW, WINDOW, _maps(800, seed=3), MODEL))
        assert refs.reference_for(conn, "m", 0) is None  # a warm-up window is never judged
        # once warmed up, later windows are not kept: the table stays at the warm-up windows
        assert conn.execute(select(func.count()).select_from(window_summaries)).scalar_one() == 3
    assert reference.features["x"].sketch.n == sum(1 for w in range(3) for m in _maps(800, seed=w) if m["x"] is not None)
    shifted = summarize_window("m", 4 * WINDOW, WINDOW, _maps(800, shift=1.0, seed=4), MODEL)
    verdicts = {f.name: f for f in analyze_summary(shifted, reference, drift_policy(CONFIG.thresholds)).features}
    assert verdicts["x"].drifted and not verdicts["c"].drifted


def test_rolling_reference_uses_the_last_m_windows_before_the_lag(tmp_path):
    config = CONFIG.model_copy(update={"reference": CONFIG.reference.model_copy(
        update={"mode": "rolling", "rolling_windows": 2, "lag_windows": 1})})
    engine = make_engine(f"sqlite:///{tmp_path}/s.db")
    refs = StoredReferences(config, drift_policy(config.thresholds))
    with engine.begin() as conn:
        for w in range(5):
            refs.remember(conn, summarize_window("m", w * WINDOW, WINDOW, _maps(100 * (w + 1), seed=w), MODEL))
        reference = refs.reference_for(conn, "m", 5 * WINDOW)  # lag 1: windows 2 and 3, not 4
        assert refs.reference_for(conn, "m", 2 * WINDOW) is None  # only one window before the lag
    assert reference.features["c"].sketch.count == 300 + 400


def test_a_stored_reference_is_built_once_per_set_of_windows(tmp_path, monkeypatch):
    """Windows judged against the same stored windows reuse the reference; a new set rebuilds it."""
    import driftwarden.pipeline.references as references

    builds = []
    real = references.reference_from_summaries
    monkeypatch.setattr(references, "reference_from_summaries",
                        lambda summaries, *rest, **options: builds.append([s.window_start_ms for s in summaries])
                        or real(summaries, *rest, **options))
    config = CONFIG.model_copy(update={"reference": CONFIG.reference.model_copy(
        update={"mode": "rolling", "rolling_windows": 2, "lag_windows": 0})})
    for cfg in (CONFIG, config):
        engine = make_engine(f"sqlite:///{tmp_path}/{cfg.reference.mode}.db")
        refs = StoredReferences(cfg, drift_policy(cfg.thresholds))
        with engine.begin() as conn:
            for w in range(4):
                refs.remember(conn, summarize_window("m", w * WINDOW, WINDOW, _maps(200, seed=w), MODEL))
            first = refs.reference_for(conn, "m", 4 * WINDOW)
            assert refs.reference_for(conn, "m", 4 * WINDOW) is first
            if cfg.reference.mode == "warmup":
                assert refs.reference_for(conn, "m", 9 * WINDOW) is first  # after the warm-up: always the same
            else:
                assert refs.reference_for(conn, "m", 3 * WINDOW) is not first  # windows 1 and 2 now
    assert builds == [[0, WINDOW, 2 * WINDOW], [3 * WINDOW, 2 * WINDOW], [2 * WINDOW, WINDOW]]  # rolling: newest first


def test_reference_set_round_trip_and_detection(tmp_path):
    refs = StoredReferences(CONFIG, drift_policy(CONFIG.thresholds))
    engine = make_engine(f"sqlite:///{tmp_path}/s.db")
    with engine.begin() as conn:
        for w in range(4):
            refs.remember(conn, summarize_window("m", w * WINDOW, WINDOW, _maps(300, seed=w), MODEL))
        reference = refs.reference_for(conn, "m", 4 * WINDOW)
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
