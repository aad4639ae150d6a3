"""Detection quality: delay per change kind and false alarms on drift-free streams, next to a naive baseline.

    .venv/bin/python bench/bench_detection.py [--seed 0] [--windows 30] [--quick]
    .venv/bin/python bench/bench_detection.py --multivariate [--mv-events 3000] [--mv-windows 100]
    .venv/bin/python bench/bench_detection.py --multivariate --segments 4 [--mv-ref-windows 12 30]
    .venv/bin/python bench/bench_detection.py --segments 20 [--segment-windows 1000] [--segment-events 10000] [--segment-alpha A]
                                              [--segment-change-windows 50]
    .venv/bin/python bench/bench_detection.py --cycles [--cycle-seeds 3] [--cycle-days 4] [--cycle-lengths 24 96]

Seeded synthetic streams, judged by the decision the live job and replay make (``sketches.analyze_window``
on the window summaries: histograms and exact category counts; the deep tests of those sketches read
no sample, so none is built here). The reference is 20 windows of 6,000 events (``--ref-size``), and
live windows of other sizes are judged against it (calibration on 6,000-event windows, judged at
500..20,000). Window length for the budget: ``--window-minutes`` (default 5: 2,016 windows a week).

1. Detection delay: 10 numeric + 3 categorical features; 3 clean windows, then one change in one
   feature (mean +0.2 sd, variance x1.25, 3% of the mass +6 sd, missing rate 0 -> 5%, a category
   share 5% -> 12%, 2% new category); delay = windows from the change to its first drifted verdict
   in that feature ("miss" after 6); "fp" = other cells flagged before or after.
2. False alarms: drift-free streams (numeric features normal, lognormal and integer-valued; 1 in 5
   categorical), for window sizes x feature counts; share of cells reported drifted with a
   Clopper-Pearson 95% interval, share of windows with any drifted feature (-> alerts a week at
   the window rate, against the budget), and the gate's alarm share.

With ``--segments N``, instead: drift-free windows of 10 features + ``country`` (2N values, Zipf
volumes) judged without segments (``analyze_window``) and with them (``analyze_segments``: top N + other,
min_count 200, hierarchical FDR, each segment against its own reference from the same 20 reference
windows), on the same data, under the production budget (``false_alerts_per_week`` 1) at the default
window (60 s): drifted cells, windows with any drift and alert onsets (a (feature, segment) drifted after
a window where it was not) per week, each with its Clopper-Pearson 95% interval. ``--segment-alpha 0.05``
judges at that per-window level instead, where false alarms are frequent enough to compare on and off.
Segments on are judged twice on the same windows: each segment's histograms at its window's resolution
(``on``: ``sketches.histogram.segment_shift``, what the job and replay write) and at the segment's own
(``fine``: before that rule), and at the window's against references built before the rule (``old-ref``, a
reference file not rebuilt); the cells whose gate alarm or verdict differs from ``fine``'s are counted. Then windows with a
change confined to one segment's feature (``SEGMENT_CHANGES``, ``--segment-change-windows`` each): how often
each of the two catches it.

With ``--cycles``, instead: daily cycles (``bench/detection_cycles.py``): drift-free streams whose
reference holds two whole days of a cycle in the mean, the spread and a category's share (several
amplitudes, 24 or 96 windows a day), judged with the whole-day reference by the rules before
over-dispersion (``today``), by today's rules (``whole``) and with ``season: 1d`` (``season``):
drifted cells per severity with their Clopper-Pearson 95% intervals against the 0.1% target; then a
shift of 1/3 sd on two cyclic features and a stationary one, from four phases of the day: windows
to the first drifted verdict.

With ``--multivariate``, instead: groups and vector features (``bench/detection_multivariate.py``: a
correlation flip with unchanged marginals, an embedding shifted off its subspace or whose spread shrinks,
and drift-free streams of each) against naive per-feature tests, on the same data. With ``--multivariate
--segments N``: a correlation flip confined to one of N segments and drift-free segmented windows, the groups
judged per segment (``bench/detection_mv_segments.py``).

Baseline, same data, same run: per window and feature, two-sample KS (scipy's asymptotic p-value,
full window against the full reference data) for numeric features and chi-square of homogeneity for
categorical ones, drifted when p < 0.05 (no missing-rate test, as in common tools).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np
from scipy import stats

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from driftwarden.pipeline.judging import drift_policy  # noqa: E402
from driftwarden.pipeline.segments import other_key, top_segments  # noqa: E402
from driftwarden.schemas.config import ThresholdConfig, WindowConfig  # noqa: E402
from driftwarden.sketches import CategoricalSketch, HistogramSketch, Reference, ReservoirSample, analyze_segments, analyze_window  # noqa: E402
from driftwarden.sketches.analysis import segment_events  # noqa: E402
from driftwarden.sketches.histogram import segment_shift  # noqa: E402
from driftwarden.sketches.reference import reference_from_window_sketches  # noqa: E402

CATS = np.array(list("abcde"))
SHARES = np.array([0.4, 0.3, 0.15, 0.1, 0.05])
CHANGES = ("mean", "variance", "tail", "missing", "share", "new_category")
WEEK_MINUTES = 7 * 24 * 60
SEGMENT = "country"
OTHER = other_key([SEGMENT])
SEGMENT_MIN_COUNT = 200


def kinds(features: int) -> dict[str, str]:
    """Feature name -> kind: one in five categorical (at least one)."""
    n_cat = max(1, features // 5)
    return {**{f"x{i}": "numeric" for i in range(features - n_cat)}, **{f"c{i}": "categorical" for i in range(n_cat)}}


def clean(rng: np.random.Generator, name: str, kind: str, size: int) -> np.ndarray:
    """Drift-free values of one feature: normal, lognormal or integer-valued by feature index; 5 categories."""
    if kind == "categorical":
        return rng.choice(CATS, size, p=SHARES).astype(object)
    law = int(name[1:]) % 3
    if law == 0:
        return rng.normal(0.0, 1.0, size)
    if law == 1:
        return rng.lognormal(0.0, 0.7, size)
    return rng.poisson(20.0, size).astype(np.float64)


def changed(rng: np.random.Generator, change: str, size: int) -> np.ndarray:
    """Values of the changed feature (x0: normal; c0: categorical) under ``change``."""
    if change in ("share", "new_category"):
        if change == "share":
            return rng.choice(CATS, size, p=[0.33, 0.3, 0.15, 0.1, 0.12]).astype(object)
        values = rng.choice(CATS, size, p=SHARES).astype(object)
        values[rng.random(size) < 0.02] = "z"
        return values
    x = rng.normal(0.0, 1.0, size)
    if change == "mean":
        x += 0.2
    elif change == "variance":
        x *= 1.25
    elif change == "tail":
        x[rng.random(size) < 0.03] += 6.0
    elif change == "missing":
        x[rng.random(size) < 0.05] = np.nan
    return x


def sketch(kind: str, values: np.ndarray):
    """The window summary's sketch of one feature."""
    return (HistogramSketch() if kind == "numeric" else CategoricalSketch()).update(values)


def build_reference(rng, feature_kinds, size, windows, policy) -> tuple[Reference, dict]:
    """Reference from ``windows`` drift-free windows; also each feature's raw reference data (baseline)."""
    data = {name: [clean(rng, name, kind, size) for _ in range(windows)] for name, kind in feature_kinds.items()}
    features = {name: reference_from_window_sketches(name, kind, [sketch(kind, v) for v in data[name]],
                                                     ReservoirSample(), policy)
                for name, kind in feature_kinds.items()}
    raw = {name: _baseline_reference(np.concatenate(parts), feature_kinds[name]) for name, parts in data.items()}
    return Reference(features), raw


def _baseline_reference(values: np.ndarray, kind: str):
    if kind == "numeric":
        return np.sort(values[np.isfinite(values)])
    cats, counts = np.unique(values.astype(str), return_counts=True)
    return dict(zip(cats.tolist(), counts.tolist()))


def naive_pvalue(ref, values: np.ndarray, kind: str) -> float:
    """Baseline: KS (scipy asymptotic p-value, full data) or chi-square of homogeneity on counts."""
    if kind == "numeric":
        win = np.sort(values[np.isfinite(values)])
        points = np.concatenate([ref, win])
        d = float(np.max(np.abs(np.searchsorted(ref, points, "right") / ref.size
                                - np.searchsorted(win, points, "right") / win.size)))
        m, n = sorted([float(ref.size), float(win.size)], reverse=True)
        return float(stats.kstwo.sf(d, np.round(m * n / (m + n))))
    cats, counts = np.unique(values.astype(str), return_counts=True)
    win = dict(zip(cats.tolist(), counts.tolist()))
    keys = sorted(set(ref) | set(win))
    return float(stats.chi2_contingency([[ref.get(k, 0) for k in keys], [win.get(k, 0) for k in keys]]).pvalue)


def judge(reference: Reference, columns: dict, feature_kinds: dict, policy, state: dict | None = None) -> dict:
    """Each feature's verdict (drifted, gate alarm) for one window; ``state`` (the CUSUMs) is updated in place."""
    window = {name: (sketch(feature_kinds[name], v), ReservoirSample()) for name, v in columns.items()}
    verdicts = analyze_window(window, reference, policy, state)
    if state is not None:
        state.update({v.name: v.cusum for v in verdicts if v.cusum is not None})
    return {v.name: (v.drifted, v.alarm) for v in verdicts}


def delays(args, policy) -> list[tuple]:
    """Detection delay of each change kind at each window size, ours and the baseline's."""
    rng = np.random.default_rng(args.seed)
    fk = {**{f"x{i}": "numeric" for i in range(10)}, **{f"c{i}": "categorical" for i in range(3)}}
    reference, raw = build_reference(rng, fk, args.ref_size, 20, policy)
    rows = []
    for size in args.delay_sizes:
        for change in CHANGES:
            target = "c0" if change in ("share", "new_category") else "x0"
            ours = base = None
            fp = base_fp = 0
            state: dict = {}
            for w in range(3 + 6):
                columns = {name: clean(rng, name, kind, size) for name, kind in fk.items()}
                if w >= 3:
                    columns[target] = changed(rng, change, size)
                verdicts = judge(reference, columns, fk, policy, state)
                for name, (drifted, _) in verdicts.items():
                    naive = naive_pvalue(raw[name], columns[name], fk[name]) < 0.05
                    if name == target and w >= 3:
                        ours = w - 3 if ours is None and drifted else ours
                        base = w - 3 if base is None and naive else base
                    else:
                        fp, base_fp = fp + drifted, base_fp + naive
            rows.append((size, change, ours, fp, base, base_fp))
    return rows


def false_alarms(args, policy) -> list[tuple]:
    """Drift-free streams: drifted cells, windows with any drifted feature, gate alarms, baseline."""
    rows = []
    for features in args.features:
        rng = np.random.default_rng(args.seed + features)
        fk = kinds(features)
        reference, raw = build_reference(rng, fk, args.ref_size, 20, policy)
        for size in args.sizes:
            windows = max(5, int(args.windows * 10 / features)) if features > 10 else args.windows
            cells = drifted = alarms = any_windows = naive = onsets = 0
            state: dict = {}
            before: dict = {}
            for _ in range(windows):
                columns = {name: clean(rng, name, kind, size) for name, kind in fk.items()}
                verdicts = judge(reference, columns, fk, policy, state)
                onsets += sum(d and not before.get(n, False) for n, (d, _) in verdicts.items())
                before = {n: d for n, (d, _) in verdicts.items()}
                flagged = sum(d for d, _ in verdicts.values())
                cells += len(verdicts)
                drifted += flagged
                any_windows += flagged > 0
                alarms += sum(a for _, a in verdicts.values())
                naive += sum(naive_pvalue(raw[n], columns[n], fk[n]) < 0.05 for n in fk)
            rows.append((features, size, windows, cells, drifted, any_windows, alarms, naive, onsets))
    return rows


def slow_delays(args, policy) -> list[tuple]:
    """Windows to the first drifted verdict of x0 under a persistent small mean shift or a ramp (13 features),
    by today's rules and, on the same windows, by the rules before over-dispersion (the reference without
    its windows' statistics)."""
    from bench.detection_cycles import without_window_stats

    fk = {**{f"x{i}": "numeric" for i in range(10)}, **{f"c{i}": "categorical" for i in range(3)}}
    reference, _ = build_reference(np.random.default_rng(args.seed + 7), fk, args.ref_size, 20, policy)
    before = without_window_stats(reference)
    rows = []
    for size in args.slow_sizes:
        for label, shift_at in [(f"{d:g} sd", (lambda d: lambda w: d)(d)) for d in (0.05, 0.1, 0.2)] + \
                [("ramp 0.01 sd/win", lambda w: 0.01 * (w + 1))]:
            found, found_before = [], []
            for run in range(args.slow_runs):
                rng, states, first = np.random.default_rng(args.seed + 1000 * run + size), ({}, {}), [None, None]
                for w in range(args.slow_horizon):
                    columns = {name: clean(rng, name, kind, size) for name, kind in fk.items()}
                    columns["x0"] = columns["x0"] + shift_at(w)  # x0 is normal(0, 1)
                    for i, ref in enumerate((reference, before)):
                        if first[i] is None and judge(ref, columns, fk, policy, states[i])["x0"][0]:
                            first[i] = w
                    if None not in first:
                        break
                found.append(first[0])
                found_before.append(first[1])
            rows.append((size, label, found, found_before))
    return rows


def segment_values(rng: np.random.Generator, size: int, segments: int) -> np.ndarray:
    """Values of the segment feature ``country``: ``2 * segments`` values ``k00``.., Zipf (value j ~ 1 / (j + 1))."""
    weights = 1.0 / np.arange(1, 2 * segments + 1)
    names = np.array([f"k{j:02d}" for j in range(2 * segments)], dtype=object)
    return names[rng.choice(2 * segments, size=size, p=weights / weights.sum())]


def _segment_windows(columns: dict, fk: dict, top: tuple, fine: bool = False) -> dict:
    """Each segment's window (the top keys, then the other segment: pipeline/segments.py's rule) of one window's
    columns, each numeric histogram at its window's resolution (``sketches.histogram.segment_shift``, the rule
    every segmented summary follows, live and in replay) or, with ``fine``, at its own (as before that rule)."""
    values = columns[SEGMENT].astype(str)
    masks = {key: values == key[0] for key in top}
    masks[OTHER] = ~np.isin(values, [key[0] for key in top])
    whole = {name: sketch(fk[name], v) for name, v in columns.items() if fk[name] == "numeric"}
    return {key: {name: (_segment_sketch(sketch(fk[name], v[mask]), whole.get(name), fine), ReservoirSample())
                  for name, v in columns.items()}
            for key, mask in masks.items() if mask.any()}


def _segment_sketch(segment, whole, fine: bool):
    """A segment's sketch as a segmented summary keeps it: a histogram at its window's resolution unless ``fine``."""
    if fine or whole is None:
        return segment
    return segment.coarsen_to(segment_shift(segment, whole))


#: The segment modes judged on the same windows: segments off; on, each segment's histograms at its window's
#: resolution (what the job and replay write); on with each at its own resolution (before that rule); "old-ref":
#: windows at the window's resolution against segment references built before the rule (at their own).
SEGMENT_MODES = ("off", "on", "fine", "old-ref")
#: Per segment mode: its windows' segments at their own resolution, its references' segments at theirs.
_FINE = {"on": (False, False), "fine": (True, True), "old-ref": (False, True)}


def _segment_references(ref_windows: list[dict], fk: dict, top: tuple, policy, fine: bool) -> dict:
    """Each segment's reference from the reference windows' segments (as ``reference build`` makes them)."""
    split = [_segment_windows(w, fk, top, fine) for w in ref_windows]
    return {key: Reference({name: reference_from_window_sketches(
        name, kind, [s[key][name][0] for s in split if key in s], ReservoirSample(), policy) for name, kind in fk.items()})
        for key in (*top, OTHER)}


def _segment_setup(args, policy, rng: np.random.Generator) -> tuple[dict, tuple, Reference, dict]:
    """The features' kinds, the top segments, the whole reference and each mode's segment references, from 20
    drift-free reference windows."""
    fk = {**kinds(10), SEGMENT: "categorical"}
    size = args.segment_events
    ref_windows = [{name: clean(rng, name, kind, size) for name, kind in fk.items() if name != SEGMENT}
                   | {SEGMENT: segment_values(rng, size, args.segments)} for _ in range(20)]
    volumes = {(c,): int(n) for c, n in zip(*np.unique(np.concatenate([w[SEGMENT] for w in ref_windows]).astype(str),
                                                        return_counts=True))}
    top = top_segments(volumes, args.segments)
    reference = Reference({name: reference_from_window_sketches(name, kind, [sketch(kind, w[name]) for w in ref_windows],
                                                                ReservoirSample(), policy) for name, kind in fk.items()})
    fine_refs = {fine: _segment_references(ref_windows, fk, top, policy, fine) for fine in (False, True)}
    segment_refs = {mode: fine_refs[ref_fine] for mode, (_, ref_fine) in _FINE.items()}
    return fk, top, reference, segment_refs


#: Changes confined to one segment (its rank among the top, by volume), to one numeric feature (x0 normal,
#: x1 lognormal, x2 integer-valued): (label, rank, feature, change of the segment's values).
SEGMENT_CHANGES = (
    ("mean +0.25 sd, segment 3", 2, "x0", lambda rng, v: v + 0.25),
    ("mean +0.5 sd, segment 10", 9, "x0", lambda rng, v: v + 0.5),
    ("scale x1.2, segment 5", 4, "x1", lambda rng, v: v * 1.2),
    ("3% +6 sd, segment 5", 4, "x0", lambda rng, v: np.where(rng.random(v.size) < 0.03, v + 6.0, v)),
    ("+1 on integers, segment 3", 2, "x2", lambda rng, v: v + 1.0),
)


def segment_changes(args, policy) -> dict[str, dict[str, int]]:
    """Windows with a change in one segment's feature (:data:`SEGMENT_CHANGES`), judged with segments on (each
    segment's histograms at its window's resolution) and "fine" (at its own), on the same data: per change and
    mode, the windows whose changed (segment, feature) cell drifted; and the windows where the two disagree."""
    rng = np.random.default_rng(args.seed + 29)
    fk, top, reference, segment_refs = _segment_setup(args, policy, rng)
    found: dict[str, dict[str, int]] = {}
    for label, rank, feature, change in SEGMENT_CHANGES:
        key, counts = top[rank], {"on": 0, "fine": 0, "old-ref": 0, "differ": 0, "events": 0}
        for _ in range(args.segment_change_windows):
            columns = {name: clean(rng, name, kind, args.segment_events) for name, kind in fk.items() if name != SEGMENT}
            columns[SEGMENT] = segment_values(rng, args.segment_events, args.segments)
            rows = columns[SEGMENT].astype(str) == key[0]
            columns[feature] = columns[feature].copy()
            columns[feature][rows] = change(rng, columns[feature][rows])
            window = {name: (sketch(fk[name], v), ReservoirSample()) for name, v in columns.items()}
            drifted = {}
            for mode, (fine, _) in _FINE.items():
                segments = _segment_windows(columns, fk, top, fine)
                _, by_segment = analyze_segments(window, segments, reference, segment_refs[mode], policy,
                                                 SEGMENT_MIN_COUNT, {})
                drifted[mode] = any(v.drifted for v in by_segment.get(key, []) if v.name == feature)
                counts[mode] += drifted[mode]
            counts["differ"] += len(set(drifted.values())) > 1
            counts["events"] += int(rows.sum())
        found[label] = counts
    return found


def print_segment_changes(args, policy) -> None:
    """Run :func:`segment_changes` and print, per change, how often each mode caught it."""
    started = time.perf_counter()
    print(f"segment changes: {args.segment_change_windows} windows per change, each changed in one segment's feature; "
          f"windows whose changed cell drifted, with segment histograms at the window's resolution ('on', the rule), "
          f"at their own ('fine', before it), and at the window's against references built before it ('old-ref')")
    print(f"{'change':>28} {'events in segment':>17} {'on':>9} {'fine':>9} {'old-ref':>9} {'differ':>6}")
    for label, c in segment_changes(args, policy).items():
        n = args.segment_change_windows
        print(f"{label:>28} {c['events'] / n:>17,.0f} {c['on']:>4}/{n:<4} {c['fine']:>4}/{n:<4} {c['old-ref']:>4}/{n:<4} "
              f"{c['differ']:>6}")
    print(f"finished in {time.perf_counter() - started:.0f} s")


def segment_false_alarms(args, policy) -> dict[str, list[int]]:
    """Drift-free windows judged without segments (analyze_window) and with them (analyze_segments, top
    ``args.segments`` + other, min_count ``SEGMENT_MIN_COUNT``; :data:`SEGMENT_MODES`) on the same data: per mode
    [windows, cells, drifted cells, windows with any drift, onsets of a (feature, segment) drifted after a window where
    it was not, segment cells whose gate alarm differs from mode "fine"'s, those whose verdict (drifted) differs]."""
    rng = np.random.default_rng(args.seed + 17)
    fk, top, reference, segment_refs = _segment_setup(args, policy, rng)
    size = args.segment_events
    totals = {mode: [0] * 7 for mode in SEGMENT_MODES}
    states: dict = {mode: {} for mode in SEGMENT_MODES}
    before: dict = {mode: set() for mode in SEGMENT_MODES}
    for _ in range(args.segment_windows):
        columns = {name: clean(rng, name, kind, size) for name, kind in fk.items() if name != SEGMENT}
        columns[SEGMENT] = segment_values(rng, size, args.segments)
        window = {name: (sketch(fk[name], v), ReservoirSample()) for name, v in columns.items()}
        cells = {"off": [(None, v) for v in analyze_window(window, reference, policy, states["off"])]}
        for mode, (fine, _) in _FINE.items():
            segments = _segment_windows(columns, fk, top, fine)
            on, by_segment = analyze_segments(window, segments, reference, segment_refs[mode], policy, SEGMENT_MIN_COUNT,
                                              states[mode])
            cells[mode] = [(None, v) for v in on] + [(key, v) for key, verdicts in by_segment.items() for v in verdicts
                                                     if segment_events(segments[key]) >= SEGMENT_MIN_COUNT]
        fine = {(key, v.name): (v.alarm, v.drifted) for key, v in cells["fine"]}
        for mode in SEGMENT_MODES:
            states[mode].update({v.name: v.cusum for _, v in cells[mode] if v.cusum is not None})
            drifted = {(key, v.name) for key, v in cells[mode] if v.drifted}
            segment_cells = [((key, v.name), v) for key, v in cells[mode] if key is not None and mode != "off"]
            alarms = sum(fine[cell][0] != v.alarm for cell, v in segment_cells)
            verdicts = sum(fine[cell][1] != v.drifted for cell, v in segment_cells)
            for i, add in enumerate((1, len(cells[mode]), len(drifted), bool(drifted), len(drifted - before[mode]),
                                     alarms, verdicts)):
                totals[mode][i] += add
            before[mode] = drifted
    return totals


def interval(k: int, n: int) -> tuple[float, float]:
    """Clopper-Pearson 95% interval of a binomial proportion."""
    lo = stats.beta.ppf(0.025, k, n - k + 1) if k else 0.0
    hi = stats.beta.ppf(0.975, k + 1, n - k) if k < n else 1.0
    return float(lo), float(hi)


def print_segment_false_alarms(args) -> None:
    """Run :func:`segment_false_alarms` under the production budget and window size and print both modes."""
    window_ms = WindowConfig().size_ms
    thresholds = ThresholdConfig()
    policy = drift_policy(thresholds, window_ms=window_ms)
    budget = f"budget false_alerts_per_week={thresholds.false_alerts_per_week:g}"
    if args.segment_alpha is not None:  # a looser level, where a difference between on and off can show in fewer windows
        policy = dataclasses.replace(policy, alpha=args.segment_alpha)
        budget = f"--segment-alpha {args.segment_alpha:g} instead of the {budget}"
    per_week = WEEK_MINUTES * 60_000 / window_ms
    print(f"segments: drift-free windows, 10 features + {SEGMENT} ({2 * args.segments} values, Zipf volumes; top "
          f"{args.segments} + (other), min_count {SEGMENT_MIN_COUNT}), {args.segment_events:,} events per window, reference "
          f"20 windows of the same size; {budget} at the default "
          f"window {window_ms / 1000:g} s -> {per_week:,.0f} windows/week, alpha (per window) {policy.alpha:.3g}")
    started = time.perf_counter()
    totals = segment_false_alarms(args, policy)
    print(f"{'segments':>8} {'windows':>7} {'cells':>8} {'drifted':>7} {'95% interval (share of cells)':>30} "
          f"{'win>0':>5} {'95% interval (windows)':>23} {'onsets':>6} {'alerts/wk':>9} {'95% interval':>16}")
    for mode in SEGMENT_MODES:
        windows, cells, drifted, any_w, onsets, _, _ = totals[mode]
        label = mode
        cells_ci = stats.binomtest(drifted, cells).proportion_ci(method="exact")
        win_ci = stats.binomtest(any_w, windows).proportion_ci(method="exact")
        on_ci = stats.binomtest(onsets, windows).proportion_ci(method="exact")
        print(f"{label:>8} {windows:>7} {cells:>8} {drifted:>7} {f'[{cells_ci.low:.4%}, {cells_ci.high:.4%}]':>30} "
              f"{any_w:>5} {f'[{win_ci.low:.4%}, {win_ci.high:.4%}]':>23} {onsets:>6} {onsets / windows * per_week:>9.1f} "
              f"{f'[{on_ci.low * per_week:.1f}, {on_ci.high * per_week:.1f}]':>16}")
    print(f"budget: {thresholds.false_alerts_per_week:g} alert a week = {thresholds.false_alerts_per_week / per_week:.3g} "
          f"onsets per window; segments on judged {totals['on'][1] / totals['on'][0]:.0f} cells per window, off "
          f"{totals['off'][1] / totals['off'][0]:.0f}; finished in {time.perf_counter() - started:.0f} s")
    if args.segment_change_windows:
        print_segment_changes(args, policy)
    print(f"segment histograms: 'on' at each window's resolution (the job's and replay's rule), 'fine' at each "
          f"segment's own (before it), 'old-ref' at the window's against references built before it: of "
          f"{totals['on'][1] - totals['off'][1]:,} segment cells, against 'fine' gate alarms differ in {totals['on'][5]} "
          f"('old-ref' {totals['old-ref'][5]}), verdicts in {totals['on'][6]} ('old-ref' {totals['old-ref'][6]})")


def _median(found: list[int | None]) -> str:
    """The median delay of seeded runs ('miss' when fewer than half found the change)."""
    if sum(f is not None for f in found) * 2 <= len(found):
        return "miss"
    return str(int(np.median([f if f is not None else 10 ** 6 for f in found])))


def _runs(found: list[int | None]) -> list:
    return ["miss" if f is None else f for f in found]


def print_cycles(args) -> None:
    """Daily cycles (``bench/detection_cycles.py``): drift-free cells by mode, then detection delays."""
    from bench import detection_cycles as cycles

    started = time.perf_counter()
    print(f"daily cycles: reference 2 days, events {args.cycle_events:,} a window, seeds {args.cycle_seeds}; "
          f"target: <= 0.1% of drifted cells at every severity")
    for per_day in args.cycle_lengths:
        totals = {mode: Counter() for mode in (*cycles.MODES, "naive")}
        seconds = Counter()
        for seed in range(args.cycle_seeds):
            stream = cycles.Stream(seed, per_day, args.cycle_events)
            for mode, counts in cycles.null_counts(stream, args.cycle_days).items():
                totals[mode].update(counts)
            seconds.update(stream.seconds)
        window_min = 24 * 60 / per_day
        policy = drift_policy(ThresholdConfig(), int(window_min * 60_000))
        print(f"\n3. drift-free, {per_day} windows a day ({window_min:g} min; alpha {policy.alpha:.3g}), "
              f"{args.cycle_days} days after the reference x {args.cycle_seeds} seeds")
        _print_cycle_nulls(totals, cycles)
        judged = args.cycle_seeds * args.cycle_days * per_day * len(cycles.MODES)
        built = args.cycle_seeds * per_day  # one phase reference per phase (reused each day after)
        print(f"   CPU: {per_day} phase references built a seed, {seconds['phase references'] / built * 1000:.0f} ms each "
              f"({len(cycles.FEATURES)} features, {2 * 3} reference windows); judging a window "
              f"{seconds['judging'] / judged * 1000:.0f} ms: a phase reference costs "
              f"{seconds['phase references'] / built / (seconds['judging'] / judged):.1f}x judging the window")
        _print_cycle_delays(args, per_day, cycles)
    print(f"\nfinished in {time.perf_counter() - started:.0f} s")


def _print_cycle_nulls(totals: dict, cycles) -> None:
    print(f"{'mode':<7} {'cells':>6} {'minor':>6} {'moder.':>6} {'major':>6} {'share':>8} {'95% interval':>19}  "
          "drifted cells by feature (in parentheses: by the CUSUM)")
    for mode, counts in totals.items():
        cells = sum(counts[(n, "cells")] for n in cycles.FEATURES)
        by = [sum(counts[(n, s)] for n in cycles.FEATURES) for s in cycles.SEVERITIES]
        lo, hi = interval(sum(by), cells)
        per_feature = {n: sum(counts[(n, s)] for s in cycles.SEVERITIES) for n in cycles.FEATURES}
        detail = ", ".join(f"{n} {k}" + (f" ({counts[(n, 'cusum')]})" if counts[(n, 'cusum')] else "")
                           for n, k in per_feature.items() if k)
        print(f"{mode:<7} {cells:>6} {by[0]:>6} {by[1]:>6} {by[2]:>6} {sum(by) / cells:>8.3%} "
              f"[{lo:.3%}, {hi:.3%}]  {detail or '-'}")


def _print_cycle_delays(args, per_day: int, cycles) -> None:
    phases = [0, per_day // 4, per_day // 2, 3 * per_day // 4]
    found = {mode: {n: [] for n in cycles.SHIFTED} for mode in (*cycles.MODES, "naive")}
    fp = Counter()
    for seed in range(args.cycle_seeds):
        stream = cycles.Stream(seed, per_day, args.cycle_events)
        for day, phase in enumerate(phases):
            result = cycles.delays(stream, phase, 2 + day)
            for mode, got in result.items():
                fp[mode] += got["fp"]
                for name in cycles.SHIFTED:
                    found[mode][name].append(got.get(name))
    print(f"   shift {cycles.SHIFT:.2f} sd from phases {phases} (one a day after the reference) x {args.cycle_seeds} "
          f"seeds: windows to the first drifted verdict ('miss' after {cycles.horizon(per_day)}); first window: share caught "
          "at once, 95% interval")
    print(f"   {'mode':<7} {'feature':<9} {'median':>6} {'worst':>5} {'first window':>13} {'95% interval':>17}  runs")
    for mode, by_feature in found.items():
        for name, runs in by_feature.items():
            at_once = sum(r == 0 for r in runs)
            lo, hi = interval(at_once, len(runs))
            worst = "miss" if None in runs else str(max(runs))
            print(f"   {mode:<7} {name:<9} {_median(runs):>6} {worst:>5} {at_once:>6}/{len(runs):<6} "
                  f"[{lo:>5.0%}, {hi:>5.0%}]  {_runs(runs)}")
        print(f"   {mode:<7} other cells drifted in those streams: {fp[mode]}")


def main(argv: list[str] | None = None) -> int:
    """Run both parts and print their tables."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--windows", type=int, default=30, help="drift-free windows judged per size at 10 features")
    parser.add_argument("--ref-size", type=int, default=6000, help="events per reference window (calibration)")
    parser.add_argument("--window-minutes", type=float, default=5.0, help="window length (sets the budget's alpha)")
    parser.add_argument("--quick", action="store_true", help="fewer sizes and windows (a smoke run)")
    parser.add_argument("--segments", type=int, default=0,
                        help="instead: drift-free windows judged with N segments on (by a feature of 2N values of "
                             "unequal volume, min_count 200) and off, on the same data, under the production budget and "
                             "window size")
    parser.add_argument("--segment-windows", type=int, default=1000, help="drift-free windows with --segments")
    parser.add_argument("--segment-events", type=int, default=10000, help="events per window with --segments")
    parser.add_argument("--segment-change-windows", type=int, default=50,
                        help="windows per change confined to one segment with --segments (0: none)")
    parser.add_argument("--cycles", action="store_true",
                        help="instead: daily cycles: drift-free cyclic streams and small shifts, whole-day reference "
                             "(before and after over-dispersion) and season")
    parser.add_argument("--cycle-seeds", type=int, default=3, help="seeds with --cycles")
    parser.add_argument("--cycle-days", type=int, default=4, help="drift-free days after the reference with --cycles")
    parser.add_argument("--cycle-lengths", type=int, nargs="+", default=[24, 96], help="windows a day with --cycles")
    parser.add_argument("--cycle-events", type=int, default=1000, help="events a window with --cycles")
    parser.add_argument("--segment-alpha", type=float, default=None,
                        help="per-window level with --segments instead of the budget's (e.g. 0.05: false alarms "
                             "frequent enough to compare on and off in a few hundred windows)")
    parser.add_argument("--multivariate", action="store_true",
                        help="instead: the multivariate rows (groups, vector features) against naive per-feature tests")
    parser.add_argument("--mv-events", type=int, default=3000, help="events per live window with --multivariate")
    parser.add_argument("--mv-ref-size", type=int, default=3000, help="events per reference window with --multivariate")
    parser.add_argument("--mv-windows", type=int, default=100, help="drift-free windows per law with --multivariate")
    parser.add_argument("--orth-shift", type=float, nargs="+", default=[0.03, 0.05],
                        help="lengths of the embedding's shift orthogonal to its subspace with --multivariate")
    parser.add_argument("--mv-changed", type=int, default=8, help="changed windows per change with --multivariate")
    parser.add_argument("--mv-features", type=int, default=5,
                        help="numeric features of the group with --multivariate --segments")
    parser.add_argument("--mv-ref-windows", type=int, nargs="+", default=[12, 30],
                        help="reference windows with --multivariate --segments (one run each)")
    parser.add_argument("--mv-ref-seeds", type=int, default=5,
                        help="references of each length (other draws of the same law) with --multivariate --segments")
    args = parser.parse_args(argv)
    if args.multivariate and args.segments > 0:
        policy = drift_policy(ThresholdConfig(), window_ms=int(args.window_minutes * 60_000))
        print(f"policy: alpha (BH, per window) {policy.alpha:.3g} at a {args.window_minutes:g}-minute window")
        from bench import detection_mv_segments

        detection_mv_segments.run(args, policy)
        return 0
    if args.multivariate:
        policy = drift_policy(ThresholdConfig(), window_ms=int(args.window_minutes * 60_000))
        print(f"policy: alpha (BH, per window) {policy.alpha:.3g} at a {args.window_minutes:g}-minute window")
        from bench import detection_multivariate

        detection_multivariate.run(argparse.Namespace(**{**vars(args), "ref_size": args.mv_ref_size}), policy)
        return 0
    if args.segments > 0:
        print_segment_false_alarms(args)
        return 0
    if args.cycles:
        print_cycles(args)
        return 0
    args.sizes = [1000, 6000] if args.quick else [500, 1000, 6000, 20000]
    args.features = [10] if args.quick else [10, 200]
    args.delay_sizes = [1000] if args.quick else [1000, 6000]
    args.windows = 10 if args.quick else args.windows
    args.slow_sizes = [1000] if args.quick else [1000, 6000]
    args.slow_runs, args.slow_horizon = (2, 20) if args.quick else (5, 40)
    thresholds = ThresholdConfig()
    policy = drift_policy(thresholds, window_ms=int(args.window_minutes * 60_000))
    print(f"policy: false_alerts_per_week={thresholds.false_alerts_per_week:g}, window {args.window_minutes:g} min "
          f"-> {WEEK_MINUTES / args.window_minutes:.0f} windows/week, alpha (BH, per window) {policy.alpha:.3g}; "
          f"gate rate {policy.false_alarm_rate:g}; reference 20 x {args.ref_size} events")
    started = time.perf_counter()
    print("\n1. detection delay (windows after the change; 0 = its first window)")
    print(f"{'events':>7} {'change':<13} {'ours':>5} {'ours fp':>8} {'naive':>6} {'naive fp':>9}")
    for size, change, ours, fp, base, base_fp in delays(args, policy):
        fmt = lambda d: "miss" if d is None else str(d)  # noqa: E731
        print(f"{size:>7} {change:<13} {fmt(ours):>5} {fp:>8} {fmt(base):>6} {base_fp:>9}")
    print("\n1b. slow drift (CUSUM): windows from the start of a persistent shift of x0 (normal, sd 1) to its first "
          f"drifted verdict, {args.slow_runs} seeded runs each (median, runs; 'miss' after {args.slow_horizon});\n"
          "    baseline in the same run, on the same windows: the rules before over-dispersion")
    print(f"{'events':>7} {'shift':<17} {'median':>6}  {'runs':<24} {'before':>6}  runs")
    for size, label, found, found_before in slow_delays(args, policy):
        print(f"{size:>7} {label:<17} {_median(found):>6}  {str(_runs(found)):<24} {_median(found_before):>6}  "
              f"{_runs(found_before)}")
    print("\n2. drift-free streams: share of cells drifted (95% interval), windows with any drift, gate alarms,\n"
          "   alert onsets (a feature drifted after a window where it was not: what routing opens) with the rate a\n"
          "   week its 95% interval allows (Clopper-Pearson on onsets per window x windows a week)")
    print(f"{'feat':>5} {'events':>7} {'windows':>7} {'cells':>6} {'drifted':>7} {'share':>8} {'95% interval':>19} "
          f"{'win>0':>6} {'gate':>7} {'naive':>7} {'onsets':>6} {'alerts/wk 95% interval':>24}")
    totals = [0, 0, 0, 0]
    for features, size, windows, cells, drifted, any_w, alarms, naive, onsets in false_alarms(args, policy):
        lo, hi = interval(drifted, cells)
        lo_w, hi_w = interval(any_w, windows)
        per_week = WEEK_MINUTES / args.window_minutes
        totals[0] += cells
        totals[1] += drifted
        totals[2] += windows
        totals[3] += onsets
        lo_a, hi_a = interval(onsets, windows)
        print(f"{features:>5} {size:>7} {windows:>7} {cells:>6} {drifted:>7} {drifted / cells:>8.4%} "
              f"[{lo:.4%}, {hi:.4%}] {any_w:>6} {alarms / cells:>7.2%} "
              f"{naive / cells:>7.2%} {onsets:>6} [{lo_a * per_week:>8.1f}, {hi_a * per_week:>8.1f}]")
    lo, hi = interval(totals[1], totals[0])
    print(f"all: {totals[1]} of {totals[0]} cells drifted = {totals[1] / totals[0]:.4%} (95% interval "
          f"[{lo:.4%}, {hi:.4%}]); target <= 0.1%")
    lo_a, hi_a = interval(totals[3], totals[2])
    per_week = WEEK_MINUTES / args.window_minutes
    print(f"routed alerts (onsets), all drift-free windows pooled: {totals[3]} in {totals[2]} windows -> "
          f"{totals[3] / totals[2] * per_week:.1f} a week, 95% interval [{lo_a * per_week:.1f}, {hi_a * per_week:.1f}] "
          f"against a budget of {ThresholdConfig().false_alerts_per_week:g}; the interval covers the budget only when "
          f"it spans it: bounding a rate near 1 a week needs about 3 x {per_week:.0f} drift-free windows "
          f"(--windows); persistence: none beyond the CUSUM (a single confirmed window alarms)")
    print(f"\nfinished in {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
