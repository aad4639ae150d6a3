"""Replay windowing without services: watermarks, late events, the deterministic partition merge."""

from __future__ import annotations

import numpy as np
import orjson
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from driftwarden.pipeline.summary import WindowRows
from driftwarden.pipeline.windowing import Windower
from driftwarden.replay.engine import Replayer
from driftwarden.replay.ordering import PartitionMerger
from driftwarden.replay.records import RawRecord
from driftwarden.schemas.config import ModelConfig, MonitorConfig

T0 = 1_767_225_600_000  # 2026-01-01T00:00:00Z, a window boundary
S = 1000


def test_an_event_for_a_fired_window_is_late_and_counted():
    w = Windower(60 * S, 5 * S, [0])
    assert w.add(0, T0 + 10 * S, "m") and w.add(0, T0 + 64 * S, "m")
    assert w.fired() == []  # watermark 59 s: the last ms of [0, 60 s) not reached yet
    assert w.add(0, T0 + 65 * S, "m")  # checked against the watermark before it advances
    assert [x.start_ms for x in w.fired()] == [T0]
    assert w.add(0, T0 + 59 * S, "m") is None
    assert w.late_by_window == {("m", T0): 1}
    assert [x.events for x in w.flush()] == [2]


def test_the_slowest_partition_holds_the_watermark_back_until_it_finishes():
    w = Windower(60 * S, 0, [0, 1])
    w.add(0, T0 + 1 * S, "m")
    w.add(0, T0 + 200 * S, "m")
    assert w.fired() == []
    assert w.add(1, T0 + 2 * S, "m")  # on time: partition 1 had not advanced
    w.drop_partition(1)
    assert [x.start_ms - T0 for x in w.fired()] == [0]


def test_lateness_is_judged_against_the_events_own_partition():
    w = Windower(60 * S, 0, [0, 1])
    w.add(1, T0 + 125 * S, "m")  # partition 1 has passed windows 0 and 1; the job's watermark has not
    assert w.watermark == -np.inf
    assert w.add(1, T0 + 70 * S, "m") is None and w.late_by_window == {("m", T0 + 60 * S): 1}
    assert w.add(0, T0 + 70 * S, "m")  # on time in partition 0: its window has not fired
    assert w.fired() == []


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 400), max_size=30), st.lists(st.integers(0, 400), max_size=30),
       st.lists(st.booleans(), min_size=60, max_size=60), st.lists(st.booleans(), min_size=60, max_size=60))
def test_late_events_do_not_depend_on_how_partitions_interleave(a, b, order_x, order_y):
    """Two runs of the same partitions interleaved two ways: the same events late, the same windows."""
    def run(order: list[bool]) -> tuple[set, list]:
        w, pos, late, fired = Windower(60 * S, 5 * S, [0, 1]), [0, 0], set(), []
        streams = [a, b]
        for pick in order + [True] * 30 + [False] * 30:
            p = int(pick) if pos[int(pick)] < len(streams[int(pick)]) else 1 - int(pick)
            if pos[p] >= len(streams[p]):
                break
            if w.add(p, T0 + streams[p][pos[p]] * S, "m") is None:
                late.add((p, pos[p]))
            pos[p] += 1
            fired += [(x.start_ms, x.events) for x in w.fired()]
        return late, sorted(fired + [(x.start_ms, x.events) for x in w.flush()])

    assert run(order_x) == run(order_y)


def test_an_event_not_kept_joins_no_window_but_moves_the_watermark():
    model = ModelConfig(name="m", features={"x": "numeric"})
    w = Windower(60 * S, 0, [0], lambda name: WindowRows(model))
    first = w.add(0, T0 + 1, "m")
    assert w.add(0, T0 + 2, "m") is first and first.events == 2 and isinstance(first.rows, WindowRows)
    assert w.add(0, T0 + 61 * S, "m", keep=False) is None
    assert [x.start_ms for x in w.fired()] == [T0] and w.late_by_window == {}


@settings(max_examples=50, deadline=None)
@given(st.lists(st.integers(0, 300), min_size=1, max_size=40), st.lists(st.integers(0, 300), max_size=40),
       st.integers(1, 7), st.integers(1, 7))
def test_merge_order_does_not_depend_on_how_batches_arrive(a, b, batch_a, batch_b):
    streams = {0: sorted(a), 1: sorted(b)}

    def run(chunk: dict[int, int]) -> list:
        merger, out = PartitionMerger([0, 1]), []
        pos = {0: 0, 1: 0}
        while any(pos[p] < len(streams[p]) for p in streams):
            for p in (1, 0):
                for v in streams[p][pos[p]:pos[p] + chunk[p]]:
                    merger.push(p, v, (p, v))
                pos[p] += chunk[p]
                if pos[p] >= len(streams[p]):
                    merger.finish(p)
                out += [item for _, item, _ in merger.pop_ready()]
        merger.finish_all()
        return out + [item for _, item, _ in merger.pop_ready()]

    first, second = run({0: batch_a, 1: batch_b}), run({0: batch_b, 1: batch_a})
    assert first == second
    assert [v for _, v in first] == sorted(a + b)


# event times (ms) on half-second marks and one ms before them: window ends and watermarks meet exactly
_MS = st.integers(0, 800).map(lambda k: k * 500) | st.integers(1, 800).map(lambda k: k * 500 - 1)


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(_MS, st.sampled_from("mn"), st.booleans()), max_size=60),
       st.integers(1, 25), st.sampled_from([0, 500, 5000]))
@example([(59_999, "m", True), (60_499, "n", False), (100, "m", True), (60_000, "m", True)], 4, 500)  # edges
def test_a_vectorised_batch_windows_events_as_one_by_one_adds_do(events, batch, lateness):
    """add_batch (the replay's fast path) against add (per event) on random out-of-order input."""
    one, many = Windower(60 * S, lateness, [0]), Windower(60 * S, lateness, [0])
    expected, got = [], []
    for t, model, keep in events:
        window = one.add(0, T0 + t, model, keep)
        expected.append((window.start_ms, window.model) if window else ("late" if keep else "dropped"))
    for first in range(0, len(events), batch):
        part = events[first:first + batch]
        ms = np.array([T0 + t for t, _, _ in part], dtype=np.int64)
        groups, late = many.add_batch(0, ms, [m for _, m, _ in part], np.array([k for _, _, k in part], dtype=bool))
        placed = {int(i): (w.start_ms, w.model) for w, members in groups for i in members}
        got += [placed.get(i, "late" if i in late.tolist() else "dropped") for i in range(len(part))]
        assert many.watermark == max(T0 + t for t, _, _ in events[:first + len(part)]) - lateness
    assert got == expected
    assert many.late_by_window == one.late_by_window and many.watermark == one.watermark
    assert [(w.start_ms, w.model, w.events) for w in many.flush()] == [(w.start_ms, w.model, w.events)
                                                                       for w in one.flush()]


def test_counts_hold_the_invariants_on_out_of_order_input():
    from driftwarden.pipeline.judging import drift_policy
    from driftwarden.pipeline.references import References
    from driftwarden.replay.setup import ReplaySetup

    config = MonitorConfig.model_validate({"window": {"size": "60s", "out_of_orderness": "5s"},
                                           "models": [{"name": "m", "features": {"x": "numeric"}}]})
    setup = ReplaySetup(config, drift_policy(config.thresholds), References(config, drift_policy(
        config.thresholds)), "warmup")
    times = [0, 30, 70, 20, 130, 66, 200, 119]  # seconds; 20, 66 and 119 arrive after their window fired
    records = [RawRecord(("f", i + 1), 0, orjson.dumps({"event_time": T0 + t * S, "model": "m",
                                                        "features": {"x": float(t)}})) for i, t in enumerate(times)]
    records.append(RawRecord(("f", 99), 0, b"{"))
    replayer = Replayer(setup, [0])
    replayer.feed(records)
    outcome = replayer.finish()
    c = outcome.counts
    assert (c["read"], c["valid"], c["rejected"], c["late"], c["windowed"]) == (9, 8, 1, 3, 5)
    assert c["read"] == c["valid"] + c["rejected"] and c["valid"] == c["windowed"] + c["late"]
    assert [r.coordinates[1] for r, _ in outcome.late] == [4, 6, 8]
    assert [(w.events, w.late) for w in outcome.windows] == [(2, 1), (1, 2), (1, 0), (1, 0)]
    sent = []  # with a sink the records take the per-record path: the same outcome
    replayer = Replayer(setup, [0], sink=lambda record, ms: sent.append((record.coordinates[1], ms)))
    replayer.feed(records)
    again = replayer.finish()
    assert again.counts == outcome.counts and [r.coordinates for r, _ in again.late] == [r.coordinates for r, _ in
                                                                                         outcome.late]
    assert [(w.events, w.late, w.report) for w in again.windows] == [(w.events, w.late, w.report)
                                                                     for w in outcome.windows]
    assert [line for line, _ in sent] == [1, 2, 3, 4, 5, 6, 7, 8, 99]
    # a topic whose only partition with records in the range is partition 1 (one ordered stream)
    replayer = Replayer(setup, [1])
    replayer.feed([RawRecord(("t", 1, i), 1, r.value) for i, r in enumerate(records)])
    assert replayer.finish().counts == outcome.counts


@pytest.mark.parametrize("text, ok", [("2026-01-01T00:00:00Z", True), ("1767225600000", True),
                                      ("2026-01-01 00:00", False), ("soon", False)])
def test_times_accept_rfc3339_and_epoch_ms_only(text, ok):
    from driftwarden.core.errors import ConfigError
    from driftwarden.replay.times import parse_time

    if ok:
        assert parse_time(text, "--from") == T0
    else:
        with pytest.raises(ConfigError, match="--from"):
            parse_time(text, "--from")
