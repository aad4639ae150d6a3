"""Replay windowing without services: watermarks, late events, the deterministic partition merge."""

from __future__ import annotations

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jobs.pipeline import WindowRows
from replay.engine import Replayer
from replay.ordering import PartitionMerger
from replay.records import RawRecord
from replay.windowing import Windower
from schemas.config import ModelConfig, MonitorConfig
from schemas.events import Event

T0 = 1_767_225_600_000  # 2026-01-01T00:00:00Z, a window boundary
S = 1000


def ev(ms: int, model: str = "m") -> Event:
    return Event(model, T0 + ms, {"x": 1.0})


def test_an_event_for_a_fired_window_is_late_and_counted():
    w = Windower(60 * S, 5 * S, [0])
    assert w.add(0, (0,), ev(10 * S)) and w.add(0, (1,), ev(64 * S))
    assert w.fired() == []  # watermark 59 s: the last ms of [0, 60 s) not reached yet
    assert w.add(0, (2,), ev(65 * S))  # checked against the watermark before it advances
    assert [x.start_ms for x in w.fired()] == [T0]
    assert not w.add(0, (3,), ev(59 * S))
    assert w.late_by_window == {("m", T0): 1}
    assert [x.events for x in w.flush()] == [2]


def test_the_slowest_partition_holds_the_watermark_back_until_it_finishes():
    w = Windower(60 * S, 0, [0, 1])
    w.add(0, ("t", 0, 0), ev(1 * S))
    w.add(0, ("t", 0, 1), ev(200 * S))
    assert w.fired() == []
    assert w.add(1, ("t", 1, 0), ev(2 * S))  # on time: partition 1 had not advanced
    w.drop_partition(1)
    assert [x.start_ms - T0 for x in w.fired()] == [0]


def test_a_window_keeps_each_kept_events_features_with_its_coordinates():
    model = ModelConfig(name="m", features={"x": "numeric"})
    w = Windower(60 * S, 0, [0, 1], lambda name: WindowRows(model))
    w.add(1, ("t", 1, 0), Event("m", T0 + 1, {"x": 1.0}))
    w.add(0, ("t", 0, 5), Event("m", T0 + 2, {"x": 2.0}))
    w.add(0, ("t", 0, 6), Event("m", T0 + 3, {"x": 3.0}), keep=False)
    (window,) = w.flush()
    assert window.events == 2
    assert (window.rows.coordinates, window.rows.numbers) == ([("t", 1, 0), ("t", 0, 5)], [1.0, 2.0])


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


def test_counts_hold_the_invariants_on_out_of_order_input():
    from replay.references import WindowReferences
    from replay.setup import ReplaySetup
    from jobs.pipeline import drift_policy

    config = MonitorConfig.model_validate({"window": {"size": "60s", "out_of_orderness": "5s"},
                                           "models": [{"name": "m", "features": {"x": "numeric"}}]})
    setup = ReplaySetup(config, drift_policy(config.thresholds), WindowReferences(config, drift_policy(
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


@pytest.mark.parametrize("text, ok", [("2026-01-01T00:00:00Z", True), ("1767225600000", True),
                                      ("2026-01-01 00:00", False), ("soon", False)])
def test_times_accept_rfc3339_and_epoch_ms_only(text, ok):
    from driftwarden.errors import ConfigError
    from replay.times import parse_time

    if ok:
        assert parse_time(text, "--from") == T0
    else:
        with pytest.raises(ConfigError, match="--from"):
            parse_time(text, "--from")
