"""Segments through `reference build` and replay: top-N + other references, per-segment window summaries.

Expected counts come from numpy on the raw events, never from the code under test.
"""

from __future__ import annotations

import logging

import numpy as np
import orjson
import pytest
from typer.testing import CliRunner

from driftwarden.cli import app
from driftwarden.pipeline.summary import WindowSummary
from driftwarden.pipeline.reference_set import KIND_REFERENCE_SET, KIND_REFERENCE_SET_SEGMENTED, ReferenceSet
from driftwarden.replay.progress import ReplayProgress
from driftwarden.replay.run import replay_file
from driftwarden.replay.setup import load_setup

WINDOW_MS = 60_000
T0 = 1_767_225_600_000
COUNTRIES = np.array(["US", "FR", "DE", "BR", "JP", "IN", "MX"])
SHARES = [0.35, 0.2, 0.15, 0.1, 0.08, 0.07, 0.05]
TOP = 3
CONFIG = f"""window: {{size: 60s, out_of_orderness: 0s}}
reference: {{mode: file, path: unused.dwref}}
models:
  - name: m
    features: {{x: numeric, country: categorical, merchant: categorical}}
    segments: {{by: [country], top: {TOP}, min_count: 50}}
"""
PLAIN = CONFIG.replace(f"    segments: {{by: [country], top: {TOP}, min_count: 50}}\n", "")


def _events(n: int, start_ms: int, seed: int) -> list[dict]:
    """``n`` events over 10 windows in time order; about 3% without a country."""
    rng = np.random.default_rng(seed)
    country = rng.choice(COUNTRIES, size=n, p=SHARES)
    times = np.sort(rng.integers(start_ms, start_ms + 10 * WINDOW_MS, size=n))
    return [{"event_time": int(t), "model": "m", "prediction": float(rng.random()),
             "features": {"x": float(rng.normal()), "country": None if rng.random() < 0.03 else str(c),
                          "merchant": f"m{rng.integers(0, 5000)}"}}
            for t, c in zip(times, country)]


def _write(path, events):
    path.write_bytes(b"".join(orjson.dumps(e) + b"\n" for e in events))
    return path


def _countries(events) -> np.ndarray:
    return np.array([e["features"]["country"] or "(missing)" for e in events])


def _expected_top(events) -> list[tuple[str]]:
    """The top countries by count, ties by name, computed with numpy."""
    values, counts = np.unique(_countries(events), return_counts=True)
    order = np.lexsort((values, -counts))  # by count descending, then by value
    return [(str(values[i]),) for i in order[:TOP]]


@pytest.fixture(scope="module")
def archive(tmp_path_factory):
    folder = tmp_path_factory.mktemp("segments")
    reference_events = _events(8000, T0 - 3_600_000, seed=1)
    stream_events = _events(5000, T0, seed=2)
    config, plain = folder / "monitor.yaml", folder / "plain.yaml"
    config.write_text(CONFIG)
    plain.write_text(PLAIN)
    return {"folder": folder, "config": config, "plain": plain, "reference_events": reference_events,
            "reference": _write(folder / "ref.jsonl", reference_events), "events": stream_events,
            "stream": _write(folder / "stream.jsonl", stream_events)}


def _build(archive, out, config="config"):
    result = CliRunner().invoke(app, ["reference", "build", "--input", str(archive["reference"]),
                                      "--config", str(archive[config]), "--out", str(out)])
    assert result.exit_code == 0, result.output
    return result.output


def test_reference_build_makes_top_segments_and_other_deterministically(archive):
    folder = archive["folder"]
    output = _build(archive, folder / "a.dwref")
    _build(archive, folder / "b.dwref")
    data = (folder / "a.dwref").read_bytes()
    assert data == (folder / "b.dwref").read_bytes() and data[5] == KIND_REFERENCE_SET_SEGMENTED
    assert "m: segments by country: 3 top segments, 4 references" in output
    references = ReferenceSet.load(folder / "a.dwref")
    top = _expected_top(archive["reference_events"])
    assert list(references.segment_keys("m")) == top and references.segment_by == {"m": ("country",)}
    countries = _countries(archive["reference_events"])
    xs = np.array([e["features"]["x"] for e in archive["reference_events"]])
    profiled = 0
    for key in [*top, ("(other)",)]:
        chosen = np.isin(countries, [k[0] for k in top], invert=True) if key == ("(other)",) else countries == key[0]
        reference = references.segment_reference("m", key)
        assert reference.features["x"].sketch.count == int(chosen.sum()), key
        assert reference.features["x"].sketch.min == xs[chosen].min() and reference.features["x"].sketch.max == xs[chosen].max()
        assert reference.features["x"].thresholds.source == "calibrated"
        profile = reference.features["merchant"].profile  # past 1,000 values: from the segment's raw values
        merchants = np.array([e["features"]["merchant"] for e in archive["reference_events"]])[chosen]
        profiled += profile is not None
        if profile is not None:
            assert profile.n == chosen.sum()
            assert profile.head_counts.tolist() == [int((merchants == v).sum()) for v in profile.head]
    assert profiled >= 2  # the largest segments hold more merchants than a window sketch keeps exactly
    assert references.segment_reference("m", ("JP",)) is None  # folded into the other segment
    assert references.segment_reference("m", ("(missing)",)) is None


def test_old_reference_files_still_load_and_the_global_reference_is_unchanged(archive):
    folder = archive["folder"]
    _build(archive, folder / "plain.dwref", "plain")
    _build(archive, folder / "seg.dwref")
    plain_bytes = (folder / "plain.dwref").read_bytes()
    assert plain_bytes[5] == KIND_REFERENCE_SET  # a model without segments: the frame it always had
    old = ReferenceSet.load(folder / "plain.dwref")
    assert old.segments == {} and old.segment_keys("m") == () and old.segment_reference("m", ("US",)) is None
    segmented = ReferenceSet.load(folder / "seg.dwref")
    assert ReferenceSet(segmented.models).serialize() == plain_bytes  # segments leave the global reference alone
    assert ReferenceSet.deserialize(segmented.serialize()).serialize() == segmented.serialize()


def _replay_summaries(archive, reference) -> list[WindowSummary]:
    setup = load_setup(archive["config"], reference, None, None)
    summaries = []
    remember = setup.references.remember
    setup.references.remember = lambda summary, windows: (summaries.append(summary), remember(summary, windows))
    outcome, _ = replay_file(archive["stream"], setup, ReplayProgress(enabled=False), workers=0)
    assert outcome.counts["late"] == 0
    return summaries


def test_replay_fills_each_windows_segments_with_numpy_counts(archive, caplog):
    folder = archive["folder"]
    _build(archive, folder / "replay.dwref")
    top = _expected_top(archive["reference_events"])
    with caplog.at_level(logging.WARNING, logger="driftwarden.replay.engine"):
        summaries = _replay_summaries(archive, folder / "replay.dwref")
    assert not caplog.records
    events = archive["events"]
    starts = np.array([e["event_time"] for e in events]) // WINDOW_MS * WINDOW_MS
    folded = np.where(np.isin(_countries(events), [k[0] for k in top]), _countries(events), "(other)")
    assert len(summaries) == len(np.unique(starts)) == 10
    for summary in summaries:
        in_window = starts == summary.window_start_ms
        values, counts = np.unique(folded[in_window], return_counts=True)
        assert {k[0]: s.events for k, s in summary.segments.items()} == dict(zip(values.tolist(), counts.tolist()))
        assert summary.segment_by == ("country",) and summary.events == int(in_window.sum())
        for key, segment in summary.segments.items():
            assert segment.sketches["x"].count == int((in_window & (folded == key[0])).sum())


def test_replay_with_a_reference_without_segments_says_so_once(archive, caplog):
    folder = archive["folder"]
    _build(archive, folder / "old.dwref", "plain")
    with caplog.at_level(logging.WARNING, logger="driftwarden.replay.engine"):
        summaries = _replay_summaries(archive, folder / "old.dwref")
    assert len(summaries) == 10 and not any(s.segments for s in summaries)
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 1 and "model m: segments by country configured" in messages[0], messages


def test_two_partitions_give_each_segment_the_summary_of_its_events(archive):
    """The per-record path (several partitions) summarizes segments as WindowRows does on the same records."""
    from driftwarden.pipeline.summary import WindowRows
    from driftwarden.replay.engine import Replayer
    from driftwarden.replay.records import RawRecord

    folder = archive["folder"]
    _build(archive, folder / "parts.dwref")
    setup = load_setup(archive["config"], folder / "parts.dwref", None, None)
    summaries = []
    setup.references.remember = lambda summary, windows: summaries.append(summary)
    records = [RawRecord(("t", i % 2, i // 2), i % 2, orjson.dumps(e)) for i, e in enumerate(archive["events"])]
    replayer = Replayer(setup, [0, 1])
    for start in range(0, len(records), 700):
        replayer.feed(records[start:start + 700])
    replayer.finish()
    top = setup.references.segment_keys("m", ("country",))
    assert len(summaries) == 10 and replayer.outcome.counts["late"] == 0
    for summary in summaries:
        rows = WindowRows(setup.config.model("m"))
        for record, event in zip(records, archive["events"]):
            if event["event_time"] // WINDOW_MS * WINDOW_MS == summary.window_start_ms:
                rows.add(event["features"], record.coordinates, prediction=event["prediction"])
        assert summary.serialize() == rows.summarize("m", summary.window_start_ms, WINDOW_MS, top).serialize()
