"""`reference build` at training-set scale: window summaries merged as they come give today's bytes.

The oracle is the whole-window build (every event in memory, one summary per whole window, as
``reference build`` worked before it streamed): the streaming build, holding only a handful of
events at a time so that every window is merged from many partials, must give the same reference
bytes, with segments (top and other), a high-cardinality categorical feature (its membership
profile from every raw value), invalid values, predictions, and the few-windows slice fallback;
through the file path too (JSONL and Parquet, read in row groups).
"""

from __future__ import annotations

from collections import Counter, defaultdict

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from driftwarden.core.event_files import load_events
from driftwarden.pipeline import reference_build
from driftwarden.pipeline.judging import drift_policy
from driftwarden.pipeline.reference_build import build_reference_file, build_reference_set
from driftwarden.pipeline.references import ReferenceSet, reference_from_summaries
from driftwarden.pipeline.segments import fold_to_top, other_key, segment_keys, top_segments
from driftwarden.pipeline.event_time import window_start
from driftwarden.pipeline.summary import WindowRows, summarize_window
from driftwarden.schemas.config import MonitorConfig, feature_kinds_lookup
from driftwarden.schemas.events import EventRules, rfc3339
from driftwarden.sketches.reference import value_counts

WINDOW_MS = 60_000
T0 = 1_767_225_600_000  # 2026-01-01, window-aligned
CONFIG = MonitorConfig.model_validate({
    "window": {"size": "60s"},
    "models": [
        {"name": "m", "features": {"x": "numeric", "z": "numeric", "country": "categorical",
                                   "merchant": "categorical", "ok": "boolean"},
         "monitor_prediction": True, "segments": {"by": ["country"], "top": 2}},
        {"name": "few", "features": {"y": "numeric"}},  # 2 windows: the slice fallback
    ]})


def _records(n: int = 4000, seed: int = 48) -> list[dict]:
    """Events of two models in shuffled time order (windows interleave), some with invalid values (a text
    prediction among them)."""
    rng = np.random.default_rng(seed)
    countries = rng.choice(["US", "FR", "DE", "BR", "JP"], size=n, p=[0.4, 0.25, 0.15, 0.1, 0.1])
    times = rng.integers(0, 8 * WINDOW_MS, size=n)
    records = []
    for i in range(n):
        if i % 7 == 0:
            records.append({"event_time": T0 + int(times[i] % (2 * WINDOW_MS)), "model": "few",
                            "features": {"y": float(rng.normal())}})
            continue
        features = {"x": float(rng.normal()) if i % 23 else "bad", "country": str(countries[i]) if i % 13 else None,
                    "merchant": f"id{int(rng.integers(0, 30_000))}", "ok": bool(i % 3), "z": (i % 17) / 3}
        records.append({"event_time": T0 + int(times[i]), "model": "m", "features": features,
                        "prediction": ("high" if i % 29 == 0 else float(rng.random())) if i % 4 else None})
    return records


def _whole_window_reference_set(events, config: MonitorConfig, policy) -> ReferenceSet:
    """The oracle: every model's events in memory, one summary per whole window (the build before it streamed)."""
    by_model = defaultdict(list)
    for event in events:
        by_model[event.model].append(event)
    references = ReferenceSet()
    for name, model_events in by_model.items():
        model = config.model(name)
        groups = defaultdict(list)
        for event in model_events:
            groups[window_start(event.event_ms, config.window.size_ms)].append(event)
        if len(groups) < policy.min_windows:
            slices = policy.min_windows * 2
            groups = {i: model_events[i::slices] for i in range(slices) if model_events[i::slices]}
        groups = sorted(groups.items())
        keys = None
        if model.segments is not None:
            rows = WindowRows(model)
            for line, event in enumerate(model_events):
                rows.add(event.features, (line,))
            keys = segment_keys(rows.columns(), model.segments.by)
        top = top_segments(Counter(keys), model.segments.top) if keys is not None else None
        summaries = [summarize_window(name, start, config.window.size_ms, [e.features for e in group], model,
                                      [e.prediction for e in group], top) for start, group in groups]
        references.models[name] = _oracle_reference(summaries, groups, model, policy)
        if top is not None:
            references.segment_by[name] = model.segments.by
            folded = dict(zip(map(id, model_events), fold_to_top(keys, top)))
            references.segments[name] = {}
            for key in (*top, other_key(model.segments.by)):
                parts = [(s.segments[key], (start, [e for e in group if folded[id(e)] == key]))
                         for s, (start, group) in zip(summaries, groups) if key in s.segments]
                if parts:
                    references.segments[name][key] = _oracle_reference([p for p, _ in parts], [g for _, g in parts],
                                                                       model, policy)
    return references


def _oracle_reference(summaries, groups, model, policy):
    names = [n for n, kind in model.features.items() if kind == "categorical"]
    counts = {n: [value_counts([e.features.get(n) for e in group if isinstance(e.features.get(n), str)])
                  for _, group in groups] for n in names}
    return reference_from_summaries(summaries, model.sketch_kinds, policy, counts, prediction=model.monitor_prediction)


def _bytes(references: ReferenceSet, tmp_path, name: str) -> bytes:
    path = tmp_path / name
    references.save(path)
    return path.read_bytes()


@pytest.fixture(scope="module")
def jsonl(tmp_path_factory):
    path = tmp_path_factory.mktemp("snapshot") / "snapshot.jsonl"
    path.write_bytes(b"\n".join(orjson.dumps(r) for r in _records()) + b"\n{not json\n")
    return path


#: Summary bytes kept in memory (reference_build.HELD_SUMMARY_BYTES), and the most features calibrated at once
#: for model ``m`` (6 sketches and the numeric group, ~410 kB of window summaries): all in memory, 3 groups from the
#: file, one by one.
HELD_BYTES = {"in memory": (None, 6), "groups": (150_000, 2), "one feature": (0, 1)}


@pytest.mark.parametrize("held", list(HELD_BYTES))
def test_merged_partials_give_the_whole_window_bytes(jsonl, tmp_path, monkeypatch, held):
    """Held events capped at 37: every window of the file is built from many partial summaries; whole summaries
    kept in memory, or written to the file and calibrated a group of features at a time, give the same bytes."""
    policy = drift_policy(CONFIG.thresholds)
    events, rejected = load_events(jsonl, EventRules.of(CONFIG.source), feature_kinds_lookup(CONFIG))
    assert len(rejected) == 1 and any(e.invalid for e in events)
    expected = _bytes(_whole_window_reference_set(events, CONFIG, policy), tmp_path, "oracle")
    monkeypatch.setattr(reference_build, "HELD_EVENTS", 37)
    monkeypatch.setattr(reference_build, "_LIST_BATCH", 50)
    budget, widest = HELD_BYTES[held]
    if budget is not None:
        monkeypatch.setattr(reference_build, "HELD_SUMMARY_BYTES", budget)
    groups, cut = [], reference_build._feature_groups
    monkeypatch.setattr(reference_build, "_feature_groups", lambda names, size: groups.append(cut(names, size)) or
                        groups[-1])
    streamed = build_reference_set(events, CONFIG, policy)
    assert max(len([n for n in g if n is not None]) for g in groups[-1]) == widest  # model m's groups
    assert len(streamed.segments["m"]) == 3  # two top segments and the other one
    assert streamed.models["m"].features["merchant"].profile is not None  # high cardinality: every value seen
    assert _bytes(streamed, tmp_path, "streamed") == expected
    seen = []
    built = build_reference_file(jsonl, CONFIG, None, lambda c: drift_policy(c.thresholds),
                                 lambda phase, read, total: seen.append((phase, read, total)))
    assert (built.read, built.rejected) == (len(events) + 1, 1)
    assert _bytes(built.references, tmp_path, "file") == expected
    assert seen[-1] == ("build", len(events), len(events)) and seen[0][0] == "scan"


def test_parquet_is_read_in_row_groups_with_the_same_bytes(jsonl, tmp_path, monkeypatch):
    """A Parquet snapshot of many small row groups, read a batch at a time, gives the JSONL's reference."""
    policy = drift_policy(CONFIG.thresholds)
    records = _records()
    for r in records:
        r["event_time"] = rfc3339(r["event_time"])
    path = tmp_path / "snapshot.parquet"
    pq.write_table(pa.Table.from_pylist([{"event_time": r["event_time"], "model": r["model"],
                                          "features": {k: (str(v) if k == "x" else v) for k, v in r["features"].items()},
                                          "prediction": r.get("prediction") if r.get("prediction") != "high" else None}
                                         for r in records]), path, row_group_size=300)
    assert pq.ParquetFile(path).num_row_groups > 10
    events, _ = load_events(path, EventRules.of(CONFIG.source), feature_kinds_lookup(CONFIG))
    expected = _bytes(_whole_window_reference_set(events, CONFIG, policy), tmp_path, "oracle")
    monkeypatch.setattr(reference_build, "HELD_EVENTS", 101)
    built = build_reference_file(path, CONFIG, None, lambda c: drift_policy(c.thresholds))
    assert _bytes(built.references, tmp_path, "parquet") == expected


def test_the_command_shows_progress_and_infers_kinds_as_before(jsonl, tmp_path):
    """Without a config: kinds inferred in the scan; the reference equals the oracle's over the inferred config."""
    from driftwarden.cli import app

    out = tmp_path / "ref.dwref"
    result = CliRunner().invoke(app, ["reference", "build", "-i", str(jsonl), "-o", str(out)], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "reference build" in result.output and "(1 rejected)" in result.output
    events, _ = load_events(jsonl)
    kinds = reference_build.infer_feature_kinds(events)
    config = MonitorConfig.model_validate({"models": [
        {"name": m, "features": k, "monitor_prediction": "prediction" not in k} for m, k in kinds.items()]})
    oracle = _whole_window_reference_set(events, config, drift_policy(config.thresholds))
    assert out.read_bytes() == _bytes(oracle, tmp_path, "oracle")


def test_kinds_are_inferred_from_each_features_first_typed_value_in_the_order_they_first_come():
    """A feature's kind is its first typed value's (a null or a list first tells nothing); features and models
    in the order they first come, also when an event brings no new feature name but one still unknown."""
    from driftwarden.schemas.events import Event

    events = [Event("m", T0, {"b": None, "a": 1.0}), Event("n", T0, {"z": [1]}), Event("m", T0, {"a": 2, "c": "x"}),
              Event("m", T0 + 1, {"c": "y", "b": True}), Event("n", T0, {"z": 3})]
    kinds = reference_build.infer_feature_kinds(events)
    assert [(model, list(features.items())) for model, features in kinds.items()] == [
        ("m", [("a", "numeric"), ("c", "categorical"), ("b", "boolean")]), ("n", [("z", "numeric")])]
