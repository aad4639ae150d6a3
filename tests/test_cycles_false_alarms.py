"""Drift-free traffic with daily cycles stays within the false-alarm target, with and without a season.

The streams of ``bench/bench_detection.py --cycles`` (``bench/detection_cycles.py``): a model whose
features follow a daily cycle in the mean (0.1, 0.3 and 1.0 sd), the spread (+-0.1, 0.3) and a
category's share (+-0.05, 0.15), plus two stationary ones; a reference of two whole days of 15-minute
windows, then four drift-free days, judged by ``analyze_summary`` (the CUSUM carried on) under the
production thresholds (``false_alerts_per_week`` 1, gate rate 1%) at that window length, once against
the whole-day reference and once with ``season: 1d``. Target (the issue's): at most 0.1% of
(feature, window) cells drifted at any severity; checked with a Clopper-Pearson 95% interval. The rules
before over-dispersion drifted about four cells in five of the mean-cycle features.

At 15-minute windows the budget itself spends about 0.03% of these cells (the per-window tests' half,
1 / 1,344 a window for 9 features, and the CUSUM's, whose alarms last two or three windows); at hourly
windows it would spend about 0.1%, the target itself, so the target is checked where it is stricter
than the budget.
"""

from __future__ import annotations

from scipy import stats

from bench.detection_cycles import FEATURES, SEVERITIES, Stream, null_counts

TARGET = 0.001


def test_drift_free_cycles_stay_within_the_target_with_and_without_season() -> None:
    counts = null_counts(Stream(seed=11, per_day=96, events=1000), cycles=4, modes=("whole", "season"), naive=False)
    for mode in ("whole", "season"):
        cells = sum(counts[mode][(name, "cells")] for name in FEATURES)
        drifted = sum(counts[mode][(name, s)] for name in FEATURES for s in SEVERITIES)
        ci = stats.binomtest(drifted, cells).proportion_ci(0.95)
        print(f"\n{mode}: {drifted} of {cells} cells drifted (95% interval {ci.low:.4%}..{ci.high:.4%}); "
              f"target {TARGET:.1%}")
        assert cells == 4 * 96 * len(FEATURES)
        assert ci.low <= TARGET, (mode, drifted, cells)
