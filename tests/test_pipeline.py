"""The shared window pipeline and the reference modes, without Flink (SQLite store)."""

from __future__ import annotations

import numpy as np
import orjson
import pytest

from sqlalchemy import func, select

from driftwarden.errors import SerializationError
from driftwarden.store import make_engine
from jobs.pipeline import WindowSummary, analyze_summary, drift_policy, summarize_raw, summarize_window
from jobs.references import ReferenceSet, StoredReferences, is_reference_file
from jobs.source import kafka_source_ddl
from schemas.config import MonitorConfig, SourceConfig
from schemas.tables import window_summaries

WINDOW = 10_000
CONFIG = MonitorConfig.model_validate({
    "window": {"size": "10s"},
    "reference": {"mode": "warmup", "warmup_windows": 3},
    "thresholds": {"min_count": 30},
    "models": [{"name": "m", "features": {"x": "numeric", "c": "categorical"}}],
})
MODEL = CONFIG.models[0]


def _maps(n: int, shift: float = 0.0, seed: int = 0) -> list[dict]:
    rng = np.random.default_rng(seed)
    return [{"x": None if i % 40 == 0 else float(rng.normal(shift)), "c": str(rng.choice(["a", "b"])), "u": 1}
            for i in range(n)]


def test_arrow_and_python_paths_give_the_same_summary():
    maps = _maps(3000)
    values = [orjson.dumps({"event_time": 0, "model": "m", "features": m}) for m in maps]
    fast = summarize_raw("m", 0, WINDOW, values, [(0, i) for i in range(len(values))], MODEL)
    slow = summarize_window("m", 0, WINDOW, maps, MODEL)
    assert (fast.events, fast.unknown_features) == (slow.events, slow.unknown_features) == (3000, 3000)
    for name in MODEL.features:
        assert fast.features[name][0].count == slow.features[name][0].count
        assert np.array_equal(fast.features[name][1].values, slow.features[name][1].values)


def test_summary_is_independent_of_arrival_order():
    values = [orjson.dumps({"features": m}) for m in _maps(2500)]
    coords = [("t", i % 2, i) for i in range(len(values))]
    a = summarize_raw("m", 0, WINDOW, values, coords, MODEL)
    b = summarize_raw("m", 0, WINDOW, values[::-1], coords[::-1], MODEL)
    assert np.array_equal(a.features["x"][1].values, b.features["x"][1].values)


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
