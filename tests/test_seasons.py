"""Seasonal references (pipeline/seasons.py): each window against the reference windows of its phase.

A reference file built with ``reference.season`` keeps its windows; a live window is judged against
those at its phase (give or take the tolerance) in every season, calibrated each season against the
others; a ``rolling`` one reads the same phase of the last seasons from the stored summaries. Live
(the store) and replay (memory) choose the same windows and judge bit for bit alike.
"""

from __future__ import annotations

from datetime import datetime, timezone

import numpy as np
import orjson
import pytest
from typer.testing import CliRunner

from driftwarden.cli import app
from driftwarden.core.errors import ConfigError
from driftwarden.core.store import make_engine
from driftwarden.pipeline.judging import analyze_summary, cusum_state, drift_policy
from driftwarden.pipeline.reference_build import build_reference_set
from driftwarden.pipeline.reference_set import ReferenceSet
from driftwarden.pipeline.results import previous_cusum, store_window
from driftwarden.pipeline.references import References
from driftwarden.pipeline.seasons import FileReferenceSource, PhaseReferences, Season
from driftwarden.pipeline.summary import summarize_window
from driftwarden.pipeline.window_store import MemoryWindows, SqlWindows
from driftwarden.schemas.config import PHASE_WINDOWS_NEEDED, MonitorConfig
from driftwarden.schemas.events import Event
from driftwarden.sketches import DriftPolicy

HOUR = 3_600_000
DAY = 24 * HOUR
T0 = 20_000 * DAY  # a UTC midnight
PER_WINDOW = 300
MODEL = {"name": "m", "features": {"x": "numeric", "c": "categorical"}, "monitor_prediction": False}


def _config(reference: dict) -> MonitorConfig:
    return MonitorConfig.model_validate({"window": {"size": "1h"}, "reference": reference, "models": [MODEL]})


SEASONAL = _config({"mode": "file", "path": "r.dwref", "season": "1d"})
WHOLE = _config({"mode": "file", "path": "r.dwref"})
POLICY = drift_policy(SEASONAL.thresholds, SEASONAL.window.size_ms)


def _values(rng: np.random.Generator, hour: int, shift: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """One hourly window: x's mean follows a daily sine of 0.5 sd, category a's share one of 0.15."""
    wave = np.sin(2 * np.pi * (hour % 24) / 24)
    x = rng.normal(0.5 * wave + shift, 1.0, PER_WINDOW)
    c = rng.choice(list("abc"), PER_WINDOW, p=[0.5 + 0.15 * wave, 0.3, 0.2 - 0.15 * wave])
    return x, c


def _events(rng: np.random.Generator, first_hour: int, hours: int) -> list[Event]:
    events = []
    for hour in range(first_hour, first_hour + hours):
        x, c = _values(rng, hour)
        events += [Event("m", T0 + hour * HOUR + i * 1000, {"x": float(a), "c": str(b)})
                   for i, (a, b) in enumerate(zip(x, c))]
    return events


def _summary(rng: np.random.Generator, hour: int, shift: float = 0.0):
    x, c = _values(rng, hour, shift)
    return summarize_window("m", T0 + hour * HOUR, HOUR, [{"x": float(a), "c": str(b)} for a, b in zip(x, c)],
                            SEASONAL.model("m"))


@pytest.fixture(scope="module")
def references() -> ReferenceSet:
    """Two days of hourly reference windows, built with the season (the file keeps its 48 windows)."""
    return build_reference_set(_events(np.random.default_rng(1), 0, 48), SEASONAL, POLICY)


def test_phase_windows_needed_is_what_calibration_needs() -> None:
    assert PHASE_WINDOWS_NEEDED == DriftPolicy().min_windows


def test_a_seasonal_file_keeps_its_windows_and_reads_them_back(references) -> None:
    assert [w.window_start_ms for w in references.windows["m"]] == [T0 + h * HOUR for h in range(48)]
    back = ReferenceSet.deserialize(references.serialize())
    assert back.window_ms == {"m": HOUR}
    assert [w.serialize() for w in back.windows["m"]] == [w.serialize() for w in references.windows["m"]]
    assert back.models["m"].serialize() == references.models["m"].serialize()
    plain = build_reference_set(_events(np.random.default_rng(1), 0, 48), WHOLE, POLICY)
    assert plain.windows == {} and plain.serialize()[5] == 17  # without a season: the file as before


def test_each_window_is_judged_against_its_phase_in_every_season(references) -> None:
    """Window 14:00 of day 3: the reference windows 13:00-15:00 of days 1 and 2, each day a leave-out group."""
    phases = PhaseReferences(references.windows["m"], Season.of(SEASONAL), SEASONAL.model("m"), POLICY)
    start = T0 + (2 * 24 + 14) * HOUR
    chosen = [w.window_start_ms for w in phases.chosen(start)]
    assert chosen == [T0 + h * HOUR for h in (13, 14, 15, 37, 38, 39)]
    reference = phases.reference_for(start)
    assert reference.features["x"].sketch.n == 6 * PER_WINDOW
    assert reference.features["x"].window_stats[:, 3].tolist() == [0, 0, 0, 1, 1, 1]
    assert reference.features["x"].thresholds.source == "calibrated"
    midnight = [w.window_start_ms for w in phases.chosen(T0 + 2 * DAY)]  # the tolerance wraps around the day
    assert midnight == [T0 + h * HOUR for h in (0, 1, 23, 24, 25, 47)]
    assert phases.reference_for(start) is reference  # built once


def test_a_shift_on_a_cyclic_feature_is_caught_in_its_first_window_with_season(references) -> None:
    """0.4 sd up from 17:00 of day 3 (where the cycle runs down): the phase's reference sees it at once;
    the whole-day reference, whose null holds the cycle, does not in its first window. The drift-free
    windows before it drift in neither."""
    rng = np.random.default_rng(2)
    seasonal = FileReferenceSource(references, SEASONAL, POLICY, "ref.dwref")
    whole = FileReferenceSource(references, WHOLE, POLICY, "ref.dwref")
    found = {"season": [], "whole": []}
    for mode, source in (("season", seasonal), ("whole", whole)):
        state = {}
        for hour in range(48, 48 + 20):
            summary = _summary(np.random.default_rng(1000 + hour), hour, 0.4 if hour >= 48 + 17 else 0.0)
            report = analyze_summary(summary, source.reference_for("m", summary.window_start_ms), POLICY, state)
            state = cusum_state(report)
            found[mode] += [(hour - 48, f.name) for f in report.features if f.drifted]
    del rng
    assert found["season"] and found["season"][0] == (17, "x")
    assert all(hour >= 17 and name == "x" for hour, name in found["season"])
    assert (17, "x") not in found["whole"] and all(hour >= 17 for hour, _ in found["whole"])


def test_a_file_without_the_phases_windows_is_refused_naming_the_file_and_field(references) -> None:
    plain = ReferenceSet(models=references.models)
    with pytest.raises(ConfigError, match=r"^ref\.dwref: reference\.season is set, and the reference of model 'm' "
                                          "keeps no reference windows"):
        FileReferenceSource(plain, SEASONAL, POLICY, "ref.dwref")
    short = ReferenceSet(models=references.models, windows={"m": references.windows["m"][:36]}, window_ms={"m": HOUR})
    with pytest.raises(ConfigError, match=r"ref\.dwref: reference\.season 1d with phase_tolerance 1 window\(s\) each "
                                          r"side needs reference windows of at least 2 seasons at every phase"):
        FileReferenceSource(short, SEASONAL, POLICY, "ref.dwref")
    narrow = _config({"mode": "file", "path": "r.dwref", "season": "1d", "phase_tolerance": 0})
    with pytest.raises(ConfigError, match="at least 5 seasons at every phase"):  # 1 window a season: 5 seasons
        FileReferenceSource(references, narrow, POLICY, "ref.dwref")


def test_reference_build_refuses_too_few_seasons(tmp_path) -> None:
    """30 hours of events for a 1d season: the error names the events, the config and the field; no file written."""
    events, config = tmp_path / "train.jsonl", tmp_path / "monitor.yaml"
    events.write_bytes(b"".join(orjson.dumps({"event_time": e.event_ms, "model": "m", "features": e.features}) + b"\n"
                                for e in _events(np.random.default_rng(3), 0, 30)))
    config.write_text("window: {size: 1h}\nreference: {mode: file, path: r.dwref, season: 1d}\n"
                      "models: [{name: m, features: {x: numeric, c: categorical}, monitor_prediction: false}]\n")
    result = CliRunner().invoke(app, ["reference", "build", "--input", str(events), "--config", str(config),
                                      "--out", str(tmp_path / "r.dwref")])
    message = str(result.exception)
    assert isinstance(result.exception, ConfigError) and result.exit_code == 1
    assert message.startswith(f"{events} (config {config}): reference.season 1d"), message
    assert "at least 2 seasons" in message and "span 1.25 seasons" in message
    assert not (tmp_path / "r.dwref").exists()


def test_replay_with_a_seasonal_file_finds_the_shift_where_it_starts(references, tmp_path) -> None:
    """driftwarden replay with the seasonal config and file: the shifted feature from its first window on."""
    path, config = tmp_path / "r.dwref", tmp_path / "monitor.yaml"
    references.save(path)
    config.write_text(f"window: {{size: 1h}}\nreference: {{mode: file, path: '{path}', season: 1d}}\n"
                      "models: [{name: m, features: {x: numeric, c: categorical}, monitor_prediction: false}]\n")
    rng, lines = np.random.default_rng(4), []
    for hour in range(48, 60):
        x, c = _values(rng, hour, 0.5 if hour >= 54 else 0.0)
        lines += [orjson.dumps({"event_time": T0 + hour * HOUR + i, "model": "m", "features": {"x": a, "c": b}})
                  for i, (a, b) in enumerate(zip(x.tolist(), c.tolist()))]
    stream, out = tmp_path / "stream.jsonl", tmp_path / "report.json"
    stream.write_bytes(b"\n".join(lines) + b"\n")
    result = CliRunner().invoke(app, ["replay", "--no-progress", "--input", str(stream), "--config", str(config),
                                      "--report-json", str(out)])
    assert result.exit_code == 0, result.output
    drifted = [(i, f["name"]) for i, w in enumerate(orjson.loads(out.read_bytes())["windows"]) for f in w["features"]
               if f["drifted"]]
    assert drifted == [(i, "x") for i in range(6, 12)]


def test_rolling_seasonal_references_are_the_same_live_and_in_replay(store_url) -> None:
    """Three days of hourly windows, the third with a shift from 10:00. Live: the stored summaries (and the
    CUSUM read back from the store); replay: the windows in memory. Every report equal, bit for bit; the
    first two days counted only (warming up), the shift caught in its first window."""
    config = _config({"mode": "rolling", "season": "1d"})
    policy = drift_policy(config.thresholds, config.window.size_ms)
    live, replayed, memory = References(config, policy), References(config, policy), MemoryWindows()
    engine, state = make_engine(store_url), None
    found = []
    for hour in range(72):
        summary = _summary(np.random.default_rng(hour), hour, 0.5 if hour >= 58 else 0.0)
        start = datetime.fromtimestamp(summary.window_start_ms / 1000, timezone.utc)
        with engine.begin() as conn:
            reference = live.reference_for("m", summary.window_start_ms, SqlWindows(conn))
            live.remember(summary, SqlWindows(conn))
            stored = previous_cusum(conn, "m", start)
            report = analyze_summary(summary, reference, policy, stored)
            store_window(conn, report, summary.events, 0, None)
        other = analyze_summary(summary, replayed.reference_for("m", summary.window_start_ms, memory), policy, state)
        replayed.remember(summary, memory)
        state = cusum_state(other)
        assert report == other, hour
        assert (not reference.features) == (hour < 48), hour  # empty: counted, not judged
        found += [(hour, f.name) for f in report.features if f.drifted]
    engine.dispose()
    assert found and found[0] == (58, "x") and all(h >= 58 for h, _ in found)


def test_a_segments_reference_is_its_part_of_the_phases_windows() -> None:
    """Segments by c with a season: segment a's reference at 14:00 of day 3 holds the a-events of the
    phase's six windows, calibrated season against season; the segments' top keys are the file's."""
    from driftwarden.pipeline.judging import segment_references
    from driftwarden.pipeline.segments import other_key

    config = MonitorConfig.model_validate({"window": {"size": "1h"}, "reference": {"mode": "file", "path": "r",
                                                                                   "season": "1d"},
                                           "models": [{**MODEL, "segments": {"by": ["c"], "top": 2, "min_count": 20}}]})
    events = _events(np.random.default_rng(5), 0, 48)
    references = build_reference_set(events, config, POLICY)
    source = FileReferenceSource(references, config, POLICY, "r")
    start = T0 + (2 * 24 + 14) * HOUR
    in_phase = [e for e in events if (e.event_ms - T0) // HOUR in (13, 14, 15, 37, 38, 39)]
    segment = source.segment_reference("m", ("a",), start)
    assert segment.features["x"].sketch.n == sum(e.features["c"] == "a" for e in in_phase)
    assert segment.features["x"].window_stats[:, 3].tolist() == [0, 0, 0, 1, 1, 1]
    keys = references.segment_keys("m")
    x, c = _values(np.random.default_rng(6), 2 * 24 + 14)
    rows = [{"x": float(a), "c": str(b)} for a, b in zip(x, c)]
    summary = summarize_window("m", start, HOUR, rows, config.model("m"), None, keys)
    segments, min_count = segment_references(summary, lambda m, key: source.segment_reference(m, key, start),
                                             config.model("m"))
    assert set(segments) == set(summary.segments) and min_count == 20
    report = analyze_summary(summary, source.reference_for("m", start), POLICY, None, segments, min_count)
    assert {tuple(f.segment.values()) for f in report.features if f.segment} == {k for k in summary.segments}
    assert not any(f.drifted for f in report.features)
    assert set(summary.segments) == {*keys, other_key(("c",))}
