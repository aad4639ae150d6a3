"""Segments on the data path: assignment, per-segment summaries, their bytes and their merge.

A segment's summary must be the summary of that segment's events alone (same bytes, its histograms
brought to its window's resolution: ``sketches.histogram.segment_shift``), whatever the order and the
split of the window's events; counts are checked against numpy on the raw values.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from driftwarden.core.errors import SerializationError
from driftwarden.pipeline.summary import KIND_WINDOW, KIND_WINDOW_SEGMENTED, WindowRows, WindowSummary, merge_summaries
from driftwarden.pipeline.segments import (MISSING, OTHER, fold_to_top, segment_codes, segment_keys, segment_members, segment_volumes,
                           top_segments)
from driftwarden.schemas.config import ModelConfig
from driftwarden.sketches.histogram import SEGMENT_MIN_BUCKETS, HistogramSketch, segment_shift

SEGMENTS = {"by": ["country", "os"], "top": 3}
CONFIG = ModelConfig(name="m", features={"x": "numeric", "country": "categorical", "os": "categorical"},
                     sample_size=40, segments=SEGMENTS)
COUNTRIES = np.array(["US", "FR", "DE", "BR", "JP"])
OSES = np.array(["ios", "web"])
TOP = (("US", "ios"), ("FR", "web"), ("DE", "ios"))


def _events(n: int, seed: int = 0) -> list[tuple[tuple, dict]]:
    """(coordinates, features) of ``n`` events; some countries missing, some events with an unknown feature."""
    rng = np.random.default_rng(seed)
    country = rng.choice(COUNTRIES, size=n, p=[0.4, 0.25, 0.15, 0.1, 0.1])
    os_ = rng.choice(OSES, size=n)
    events = []
    for i in range(n):
        features = {"x": float(rng.normal()), "country": None if i % 17 == 0 else str(country[i]), "os": str(os_[i])}
        if i % 5 == 0:
            features["extra"] = 1
        events.append((("t", i % 2, seed * 100_000 + i), features))
    return events


def _summary(events, segments=TOP, config: ModelConfig = CONFIG) -> WindowSummary:
    rows = WindowRows(config)
    for coordinates, features in events:
        rows.add(features, coordinates)
    return rows.summarize(config.name, 60_000, 60_000, segments)


def _key(features: dict) -> tuple[str, str]:
    raw = (features["country"] or MISSING, features["os"] or MISSING)
    return raw if raw in TOP else (OTHER, OTHER)


def test_segment_assignment_is_the_by_values_with_missing_and_other():
    columns = {"country": pa.array(["US", None, "FR", "US", ""]), "os": pa.array(["ios", "ios", None, "ios", "web"])}
    keys = segment_keys(columns, ("country", "os"))
    assert keys == [("US", "ios"), (MISSING, "ios"), ("FR", MISSING), ("US", "ios"), ("", "web")]
    o = (OTHER, OTHER)
    assert fold_to_top(keys, [("US", "ios")]) == [("US", "ios"), o, o, ("US", "ios"), o]
    members = segment_members(columns, ("country", "os"), [("US", "ios"), ("FR", MISSING)])
    assert {k: v.tolist() for k, v in members.items()} == {("US", "ios"): [0, 3], ("FR", MISSING): [2],
                                                           (OTHER, OTHER): [1, 4]}
    assert segment_volumes(columns, ("country",)) == {("US",): 2, (MISSING,): 1, ("FR",): 1, ("",): 1}
    assert top_segments({("b",): 5, ("a",): 5, ("c",): 9, ("d",): 1}, 3) == (("c",), ("a",), ("b",))


def test_a_segments_summary_is_the_summary_of_its_events_alone():
    events = _events(3000)
    summary = _summary(events)
    expected_keys = [_key(f) for _, f in events]
    keys, counts = np.unique(np.array(["|".join(k) for k in expected_keys]), return_counts=True)
    assert {"|".join(k): s.events for k, s in summary.segments.items()} == dict(zip(keys.tolist(), counts.tolist()))
    assert summary.segment_by == ("country", "os") and len(summary.segments) == 4
    coarsened = 0
    for key, segment in summary.segments.items():
        alone = _summary([e for e, k in zip(events, expected_keys) if k == key], segments=None)
        coarsened += alone.sketches["x"].shift < segment.sketches["x"].shift
        alone.sketches["x"].coarsen_to(segment_shift(alone.sketches["x"], summary.sketches["x"]))
        assert segment.serialize() == alone.serialize(), key
        assert segment.unknown_features == sum(1 for (_, f), k in zip(events, expected_keys) if k == key and "extra" in f)
    assert coarsened == 3  # all but the segment of 211 events, which fits SEGMENT_MIN_BUCKETS as it is
    global_only = _summary(events, segments=None)
    assert summary.segments and not global_only.segments
    assert WindowSummary.deserialize(summary.serialize()).serialize() == summary.serialize()
    reordered = WindowSummary.deserialize(summary.serialize())
    reordered.segments = dict(reversed(reordered.segments.items()))
    assert reordered.serialize() == summary.serialize()  # segments in key order, however the dict was filled
    # the global part is what it was without segments: the kind 17 frame leads the kind 18 one
    assert global_only.serialize()[5] == KIND_WINDOW and summary.serialize()[5] == KIND_WINDOW_SEGMENTED
    assert summary._serialize_window() == global_only.serialize()


def test_a_segments_histogram_keeps_its_windows_resolution_or_its_own_when_narrower():
    """Each segment's histogram is kept at its window's resolution (no finer: the bytes of a bucket per distinct
    value), but a segment narrower than its window keeps SEGMENT_MIN_BUCKETS buckets of its own; counts exact."""
    rng = np.random.default_rng(3)
    events = _events(6000, seed=3)
    for _, features in events:  # one segment's x lies in [1000, 1000.01], the rest spans orders of magnitude
        if (features["country"], features["os"]) == ("FR", "web"):
            features["x"] = 1000.0 + float(rng.uniform(0, 0.01))
        else:
            features["x"] *= 10.0 ** float(rng.integers(-3, 4))
    summary = _summary(events)
    whole, coarsened = summary.sketches["x"], []
    assert whole.buckets > 512 and whole.shift > 40  # coarsened to fit 1,024 buckets over many octaves
    for key, segment in summary.segments.items():
        x = segment.sketches["x"]
        values = np.array([f["x"] for _, f in events if _key(f) == key])
        fine = HistogramSketch().update(values)
        assert x.n == values.size and x.min == values.min() and x.max == values.max()
        assert np.array_equal(x.counts_at(x.shift)[1], fine.counts_at(x.shift)[1])  # the same counts, coarser keys
        if key == ("FR", "web"):
            assert fine.shift < x.shift < whole.shift and x.buckets <= SEGMENT_MIN_BUCKETS < fine.buckets
            assert fine.coarsen_to(x.shift - 1).buckets > SEGMENT_MIN_BUCKETS  # the finest that fits 256 buckets
        else:
            assert x.shift == whole.shift >= fine.shift
            coarsened.append(x.shift > fine.shift)
    assert sum(coarsened) == 2, coarsened  # the other segment, 3,783 events, is at its window's resolution of itself
    assert WindowSummary.deserialize(summary.serialize()).serialize() == summary.serialize()


#: the model of CONFIG sampling 2,000 events a window: more than a segment's sample keeps (segments.sample_size)
WIDE_SAMPLE = CONFIG.model_copy(update={"sample_size": 2000})
SEGMENT_SAMPLE_SIZE = WIDE_SAMPLE.segments.sample_size


def _uncut(events, start_ms: int = 60_000) -> WindowSummary:
    """A segmented summary as written before segments' samples were cut: each segment's frame built from its
    events alone with the model's sample_size, its histograms at the window's resolution."""
    rows = WindowRows(WIDE_SAMPLE)
    for coordinates, features in events:
        rows.add(features, coordinates)
    summary = rows.summarize("m", start_ms, 60_000, None)
    summary.segment_by = WIDE_SAMPLE.segments.by
    for key in TOP + ((OTHER, OTHER),):
        alone = WindowRows(WIDE_SAMPLE)
        for coordinates, features in events:
            if _key(features) == key:
                alone.add(features, coordinates)
        summary.segments[key] = alone.summarize("m", start_ms, 60_000, None)
        x = summary.segments[key].sketches["x"]
        x.coarsen_to(segment_shift(x, summary.sketches["x"]))
    return WindowSummary.deserialize(summary.serialize())


def test_a_segments_sample_is_the_bottom_of_its_events_cut_to_the_segment_sample_size():
    """A segment keeps the segments.sample_size (default 500) events of smallest key of its own (what a model
    sampling that many would keep of them), the window its sample_size; a summary written before the cut (each
    segment's sample at the model's size) still reads, and merges with today's into today's bytes."""
    assert SEGMENT_SAMPLE_SIZE == 500
    events = _events(6000, seed=5)
    summary = _summary(events, config=WIDE_SAMPLE)
    assert summary.sample.capacity == summary.sample.size == 2000
    assert summary._serialize_window() == _summary(events, segments=None, config=WIDE_SAMPLE).serialize()
    uncut = _uncut(events)
    for key, segment in summary.segments.items():
        before = uncut.segments[key].sample
        assert (segment.sample.capacity, segment.sample.size) == (SEGMENT_SAMPLE_SIZE, min(before.size, SEGMENT_SAMPLE_SIZE))
        assert np.array_equal(segment.sample.keys, np.sort(before.keys)[:SEGMENT_SAMPLE_SIZE])
        assert segment.sample.columns["country"].tolist() == before.columns["country"][:SEGMENT_SAMPLE_SIZE].tolist()
        assert segment.sample.serialize() == before.bottom(SEGMENT_SAMPLE_SIZE).serialize()
    assert sum(uncut.segments[key].sample.size > SEGMENT_SAMPLE_SIZE for key in summary.segments) == 3
    assert WindowSummary.deserialize(summary.serialize()).serialize() == summary.serialize()
    later = _events(3000, seed=6)
    today = [summary, _summary(later, config=WIDE_SAMPLE)]
    mixed = merge_summaries([uncut, today[1]])
    assert mixed.serialize() == merge_summaries(today).serialize() == merge_summaries(today[::-1]).serialize()
    assert merge_summaries([uncut]).serialize() == uncut.serialize()  # a merge cuts nothing: it keeps the smaller
    wider = _summary(events, config=WIDE_SAMPLE.model_copy(update={"segments": WIDE_SAMPLE.segments.model_copy(
        update={"sample_size": 1200})}))
    assert {k: s.sample.size for k, s in wider.segments.items()} == {
        k: min(1200, s.sample.size) for k, s in uncut.segments.items()}


def test_columns_added_in_batches_give_the_same_segments_as_events_one_by_one():
    events = _events(1200, seed=1)
    one_by_one = _summary(events)
    rows = WindowRows(CONFIG)
    for part in (events[:500], events[500:]):
        columns = {"x": pa.array([f["x"] for _, f in part], pa.float64()),
                   "country": pa.array([f["country"] for _, f in part], pa.string()),
                   "os": pa.array([f["os"] for _, f in part], pa.string()),
                   "prediction": pa.array([None] * len(part), pa.float64())}
        rows.add_columns(columns, [c for c, _ in part], [int("extra" in f) for _, f in part])
    assert rows.summarize("m", 60_000, 60_000, TOP).serialize() == one_by_one.serialize()


def test_no_top_segments_fold_everything_into_other_and_none_means_no_segments():
    events = _events(300, seed=2)
    everything = _summary(events, segments=())
    assert list(everything.segments) == [(OTHER, OTHER)] and everything.segments[(OTHER, OTHER)].events == 300
    unsegmented = ModelConfig(name="m", features=dict(CONFIG.features), sample_size=40)
    assert not _summary(events, config=unsegmented).segments  # a model without segments ignores the keys
    assert not WindowRows(CONFIG).summarize("m", 0, 60_000, TOP).segments  # no events, no segments


segmented_events = st.lists(st.tuples(st.sampled_from([None, "US", "FR", "DE", "日本"]), st.sampled_from(["ios", "web"]),
                                      st.floats(allow_nan=True, allow_infinity=True)), min_size=1, max_size=80)


@settings(max_examples=40, deadline=None)
@given(segmented_events, st.integers(1, 4), st.randoms(use_true_random=False))
def test_partials_of_a_segmented_window_merge_into_its_summary(values, parts, rnd):
    events = [(("t", i % 3, i), {"x": x, "country": c, "os": o}) for i, (c, o, x) in enumerate(values)]
    whole = _summary(events).serialize()
    rnd.shuffle(events)
    pieces = [_summary(events[i::parts]) for i in range(parts) if events[i::parts]]
    rnd.shuffle(pieces)
    assert merge_summaries(pieces).serialize() == whole


@pytest.mark.parametrize("parts", [2, 5])
def test_partials_of_a_large_segmented_window_merge_into_its_summary(parts: int):
    """Partials whose segments were brought to their own window's resolution merge into the window's summary,
    whose segments are at the whole window's (coarser) resolution: merging applies the rule again."""
    events = _events(8000, seed=4)
    whole = _summary(events)
    pieces = [_summary(events[i::parts]) for i in range(parts)]
    assert any(p.segments[k].sketches["x"].shift < s.sketches["x"].shift for p in pieces for k, s in whole.segments.items())
    assert merge_summaries(pieces).serialize() == whole.serialize()


def test_windows_merge_per_segment_over_the_longer_horizon():
    days = []
    for d in range(3):
        rows = WindowRows(CONFIG)
        for coordinates, features in _events(400, seed=d + 10):
            rows.add(features, coordinates)
        days.append(rows.summarize("m", d * 60_000, 60_000, TOP))
    week = merge_summaries(days)
    assert week.segment_by == ("country", "os") and set(week.segments) == {k for d in days for k in d.segments}
    for key, segment in week.segments.items():
        parts = [d.segments[key] for d in days if key in d.segments]
        assert segment.events == sum(p.events for p in parts)
        merged = merge_summaries(parts).sketches["x"]  # the horizon's segment, at the horizon's resolution
        assert segment.sketches["x"].serialize() == merged.coarsen_to(segment_shift(merged, week.sketches["x"])).serialize()
        assert (segment.window_start_ms, segment.window_end_ms) == (0, 180_000)
    assert sum(s.events for s in week.segments.values()) == week.events == 1200
    assert WindowSummary.deserialize(week.serialize()).serialize() == week.serialize()
    assert merge_summaries(days[::-1]).serialize() == week.serialize()
    plain = merge_summaries([_summary(_events(50), segments=None), days[0]])  # an unsegmented partial merges in
    assert plain.segments.keys() == days[0].segments.keys()
    other_by = WindowSummary.deserialize(days[1].serialize())
    other_by.segment_by = ("os", "country")
    with pytest.raises(ValueError, match="different features"):
        merge_summaries([days[0], other_by])


def test_old_kind_17_bytes_still_read_and_corrupt_segment_frames_are_refused():
    old = _summary(_events(200), segments=None).serialize()
    assert old[5] == 17 and WindowSummary.deserialize(old).serialize() == old
    segmented = _summary(_events(200)).serialize()
    with pytest.raises(SerializationError):
        WindowSummary.deserialize(segmented[:-3])
    with pytest.raises(SerializationError):
        WindowSummary.deserialize(segmented + b"\0")


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.one_of(st.none(), st.text(max_size=3)), st.one_of(st.none(), st.sampled_from(["a", "b"]))),
                max_size=60), st.integers(0, 4))
def test_vectorised_assignment_equals_the_rule_written_plainly(rows, top):
    """segment_keys / segment_members against the rule in plain Python: by values, None as (missing)."""
    columns = {"c": pa.array([r[0] for r in rows], pa.string()), "o": pa.array([r[1] for r in rows], pa.string())}
    plain = [tuple(MISSING if v is None else v for v in r) for r in rows]
    assert segment_keys(columns, ("c", "o")) == plain
    counts: dict = {}
    for key in plain:
        counts[key] = counts.get(key, 0) + 1
    top_keys = sorted(counts, key=lambda k: (-counts[k], k))[:top]
    assert top_segments(segment_volumes(columns, ("c", "o")), top) == tuple(top_keys)
    folded = [k if k in top_keys else (OTHER, OTHER) for k in plain]
    members = segment_members(columns, ("c", "o"), top_keys)
    assert {k: v.tolist() for k, v in members.items()} == {
        k: [i for i, f in enumerate(folded) if f == k] for k in sorted(set(folded))}
    assert list(members) == sorted(set(folded)) and segment_codes(columns, ("c", "o"))[1] == sorted(set(plain))
