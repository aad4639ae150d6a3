"""Decisions are reproducible: the same records give the same bytes, scores and verdicts.

A window summary must depend only on the set of its records (never on their order, on how they
were split across subtasks, or on a random draw), so the live job at any parallelism, replay and
a rerun decide alike. Checked here on the Python side: summaries of permuted and split inputs,
merged back, are byte-identical; two replays and two reference builds of one archive are equal.
The Java aggregate is compared with these bytes in tests/test_window_summary_java.py.
"""

from __future__ import annotations

import time

import numpy as np
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from driftwarden.cli import app
from driftwarden.pipeline.summary import WindowRows, WindowSummary, merge_summaries
from driftwarden.replay.synthetic import incident_events
from driftwarden.schemas.config import ModelConfig
from driftwarden.sketches import HistogramSketch

CONFIG = ModelConfig(name="m", features={"x": "numeric", "y": "numeric", "c": "categorical"}, sample_size=50)
TRICKY = [0.0, -0.0, 1.0, -1.0, 5e-324, -5e-324, 1.7976931348623157e308, -1.7976931348623157e308,
          float("nan"), float("inf"), float("-inf"), None, 1e-300, 123456789.123, 2.0 ** 53 + 1]

numbers = st.one_of(st.sampled_from(TRICKY), st.floats(allow_nan=True, allow_infinity=True), st.integers(-100, 100))
labels = st.one_of(st.none(), st.sampled_from(["a", "b", "ß", "日本", "\U0001F600", ""]), st.text(max_size=4))
events = st.lists(st.fixed_dictionaries({"x": numbers, "y": numbers, "c": labels}), min_size=1, max_size=120)


def _summary(rows: list[tuple[tuple, dict]], config: ModelConfig = CONFIG) -> WindowSummary:
    window = WindowRows(config)
    for coordinates, features in rows:
        window.add(features, coordinates)
    return window.summarize(config.name, 60_000, 60_000)


@settings(max_examples=60, deadline=None)
@given(events, st.integers(1, 5), st.randoms(use_true_random=False))
def test_a_window_summary_depends_only_on_the_set_of_its_records(feats: list[dict], parts: int, rnd) -> None:
    rows = [(("topic", i % 3, i), f) for i, f in enumerate(feats)]
    whole = _summary(rows).serialize()
    shuffled = rows[:]
    rnd.shuffle(shuffled)
    assert _summary(shuffled).serialize() == whole
    pieces = [_summary(shuffled[i::parts]) for i in range(parts) if shuffled[i::parts]]
    rnd.shuffle(pieces)
    assert merge_summaries(pieces).serialize() == whole  # partials of one window: same span, same bytes


def test_sample_keeps_the_bottom_k_events_by_key_and_round_trips() -> None:
    rng = np.random.default_rng(3)
    rows = [(("t", 0, i), {"x": float(v), "y": None, "c": f"c{i}"}) for i, v in enumerate(rng.normal(size=500))]
    summary = _summary(rows)
    again = WindowSummary.deserialize(summary.serialize())
    assert again.sample.size == 50 and np.all(np.diff(again.sample.keys) >= 0)
    assert len(set(again.features["c"][1].values)) == 50  # 50 distinct events
    # numeric features are not sampled (their deep tests read the histogram): their samples are empty
    assert list(again.sample.kinds) == ["c"] and again.features["x"][1].is_empty and again.features["y"][1].is_empty
    assert again.serialize() == summary.serialize()


def test_windows_merge_into_a_longer_horizon_exactly() -> None:
    rng = np.random.default_rng(4)
    values = rng.lognormal(size=(6, 400))
    days = []
    for d in range(6):
        window = WindowRows(CONFIG)
        for i, v in enumerate(values[d]):
            window.add({"x": float(v), "y": float(d), "c": f"c{i % 7}"}, ("t", 0, d * 1000 + i))
        days.append(window.summarize("m", d * 60_000, 60_000))
    week = merge_summaries(days)
    assert (week.window_start_ms, week.window_end_ms, week.events) == (0, 360_000, 2400)
    assert week.sketches["x"].serialize() == HistogramSketch(max_buckets=CONFIG.sketch_buckets).update(
        values.ravel()).serialize()
    assert week.sketches["c"].frequencies() == {f"c{i}": sum(1 for j in range(400) if j % 7 == i) * 6
                                                for i in range(7)}
    assert week.sample.size == 50 and set(week.sample.keys) == set(np.sort(np.concatenate(
        [d.sample.keys for d in days]))[:50])
    assert merge_summaries(days[::-1]).serialize() == week.serialize()  # order of windows does not matter
    with pytest.raises(ValueError, match="several models"):
        merge_summaries([days[0], WindowRows(ModelConfig(name="n", features={"x": "numeric"})).summarize("n", 0, 1)])


NOW_MIN = int(time.time() * 1000) // 60_000 * 60_000
T0 = NOW_MIN - 3 * 3_600_000


@pytest.fixture(scope="module")
def archive(tmp_path_factory):
    """A reference archive and a stream with a change, windows larger than the sample (3,000 events)."""
    folder = tmp_path_factory.mktemp("determinism")
    ref = folder / "ref.jsonl"
    ref.write_bytes(b"".join(orjson.dumps(e) + b"\n" for e in incident_events(12_000, T0 - 3_600_000, 20, seed=1)))
    stream = folder / "stream.jsonl"
    stream.write_bytes(b"".join(orjson.dumps(e) + b"\n"
                                for e in incident_events(12_000, T0, 20, T0 + 120_000, numeric=4, seed=2)))
    return folder, ref, stream


def _run(*args: object) -> None:
    result = CliRunner().invoke(app, [*map(str, args)])
    assert result.exit_code == 0, result.output


def _copy_into(folder, path, name: str):
    """``path`` copied into a new sub-folder ``name`` of ``folder`` (a rerun from another place)."""
    (folder / name).mkdir(exist_ok=True)
    copy = folder / name / path.name
    copy.write_bytes(path.read_bytes())
    return copy


def test_two_reference_builds_and_two_replays_of_one_archive_are_identical(archive) -> None:
    """Reruns agree even from other folders: a record read from a file is keyed by the file's name, not its path."""
    folder, ref, stream = archive
    built = []
    for i in range(2):
        _run("reference", "build", "--input", _copy_into(folder, ref, f"run{i}"), "--out", folder / f"ref{i}.dwref")
        built.append((folder / f"ref{i}.dwref").read_bytes())
    assert built[0] == built[1]
    reports = []
    for i in range(2):
        out = folder / f"report{i}.json"
        _run("replay", "--no-progress", "--input", _copy_into(folder, stream, f"run{i}"),
             "--reference", folder / "ref0.dwref", "--report-json", out)
        doc = orjson.loads(out.read_bytes())
        for varies in ("generated_at", "source"):
            doc.pop(varies)
        reports.append(doc)
    assert reports[0] == reports[1]
    assert any(f["drifted"] for w in reports[0]["windows"] for f in w["features"])  # the change was judged
