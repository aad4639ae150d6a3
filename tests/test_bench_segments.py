"""The segment feature of `bench/bench_job.py --segments N`: 2N values of unequal (Zipf) volume, seeded,
drawn with their shares; the other features are the bench's usual ones, so only segments differ."""

from __future__ import annotations

from collections import Counter
from itertools import islice

import numpy as np
import pytest
from scipy import stats

from tests.conftest import load_bench




BENCH = load_bench("bench_job")


def test_segment_values_follow_their_zipf_shares():
    shares = BENCH.segment_shares(20)
    assert len(shares) == 40 and np.isclose(shares.sum(), 1.0)
    assert np.allclose(shares[0] / shares, np.arange(1, 41))  # value j ~ 1 / (j + 1): unequal volumes
    values = BENCH.segment_values(np.random.default_rng(3), 200_000, 20)
    counts = Counter(values)
    observed = [counts.get(f"k{j:02d}", 0) for j in range(40)]
    assert sum(observed) == 200_000  # every value is one of the 40 names
    assert stats.chisquare(observed, np.asarray(shares) * 200_000).pvalue > 1e-4


def test_bench_events_carry_the_segment_feature_only_when_asked_and_are_seeded():
    plain = list(islice(BENCH.bench_features(1000), 1000))
    segmented = list(islice(BENCH.bench_features(1000, segments=5), 1000))
    assert all(BENCH.SEGMENT_FEATURE not in f for f in plain)
    assert [{k: v for k, v in f.items() if k != BENCH.SEGMENT_FEATURE} for f in segmented] == plain
    assert {f[BENCH.SEGMENT_FEATURE] for f in segmented} <= {f"k{j:02d}" for j in range(10)}
    assert segmented == list(BENCH.bench_features(1000, segments=5))  # seeded: the same events every run
    training = [f[BENCH.SEGMENT_FEATURE] for f in BENCH.bench_features(1000, segments=5, seed=1)]
    assert training != [f[BENCH.SEGMENT_FEATURE] for f in segmented]  # the training snapshot is other draws


def test_the_sinks_judging_figure_judges_the_segments_as_the_sink_does(tmp_path, monkeypatch):
    """`--segments` prints the sink's judging time per window and the cells the gate scored: the global
    view's 26 features, and with segments each segment's too. With 2 segments of 1,000-event windows the
    shares are 48% (k00), 24% (k01) and 28% (other): all three reach min_count 200 and are judged."""
    monkeypatch.setattr(BENCH, "WINDOW_SECONDS", 1)
    reference = tmp_path / "bench.dwref"
    BENCH.build_segment_reference(reference, 2, 4)
    features = len(BENCH.NUMERIC) + len(BENCH.CATEGORICAL) + 1  # and the segment feature
    for segmented, judged in ((False, 1), (True, 1 + 3)):
        config = BENCH.config_for("t", 2, segmented, str(reference))
        summaries = BENCH.bench_summaries(config, reference, 3_000, 2)
        ms, cells = BENCH.sink_judging(config, reference, summaries, repeats=1)
        assert cells == features * judged and ms > 0


def test_where_a_segmented_windows_bytes_go_adds_up_to_its_bytes_part_by_part(tmp_path, monkeypatch, capsys):
    """`--segment-bytes`'s table: the parts of the whole window's frame and of its segments' add up to the
    summary's bytes, each part read from the sketches themselves (8 bytes a kept event's key)."""
    from driftwarden.pipeline.summary import WindowSummary
    from driftwarden.sketches.histogram import HistogramSketch

    monkeypatch.setattr(BENCH, "WINDOW_SECONDS", 2)
    reference = tmp_path / "bench.dwref"
    BENCH.build_segment_reference(reference, 2, 3)
    summaries = BENCH.bench_summaries(BENCH.config_for("t", 2, True, str(reference)), reference, 6_000, 2)
    parts = BENCH.summary_parts(summaries)
    assert sum(map(sum, (p.values() for p in parts.values()))) == pytest.approx(np.mean([len(d) for d in summaries]))
    decoded = [WindowSummary.deserialize(d) for d in summaries]
    frames = {"global": [[s] for s in decoded], "segments": [list(s.segments.values()) for s in decoded]}
    for scope, windows in frames.items():
        histograms = np.mean([sum(len(k.serialize()) for f in w for k in f.sketches.values()
                                  if isinstance(k, HistogramSketch)) for w in windows])
        keys = np.mean([sum(8 * f.sample.size for f in w) for w in windows])
        moments = np.mean([sum(len(m.serialize()) for f in w for m in f.groups.values()) for w in windows])
        assert (parts[scope]["numeric histograms"], parts[scope]["event sample: keys"],
                parts[scope]["group moments"]) == pytest.approx((histograms, keys, moments)), scope
    assert len(decoded[0].segments) == 3 and parts["segments"]["event sample: keys"] > 0
    assert parts["global"]["names, counts, framing"] < parts["segments"]["names, counts, framing"]  # 3 frames, keys
    BENCH.print_summary_parts(parts)
    table = capsys.readouterr().out
    assert all(part in table for part in BENCH.SUMMARY_PARTS) and "total" in table


def test_each_segmented_run_is_judged_against_the_mean_cost_of_its_two_neighbours():
    """A segmented run's ratio averages its unsegmented neighbours' time per event (10 and 30 us: 20 us, the rate
    over their events together), not their rates (which would make it 15 us), for wall time as for CPU."""
    assert BENCH.segment_ratios([10.0, 30.0, 20.0], [25.0, 20.0]) == pytest.approx([0.8, 1.25])
    with pytest.raises(ValueError, match="need 3 unsegmented"):
        BENCH.segment_ratios([10.0, 30.0], [25.0, 20.0])


def test_the_start_up_subtracted_is_one_run_the_median_of_three():
    """The start-up each job's figure has subtracted is the empty-topic run of median wall time (one slow run
    does not move it), its CPU that same run's."""
    runs = [(9.0, "cpu of the slow run"), (7.0, "cpu of the fast run"), (8.0, "cpu of the median run")]
    assert BENCH.median_startup(runs) == (8.0, "cpu of the median run")
    assert BENCH.STARTUP_RUNS % 2 == 1 and BENCH.STARTUP_RUNS >= 3
