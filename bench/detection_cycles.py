"""Daily cycles (``bench/bench_detection.py --cycles``): drift-free cyclic streams and small shifts.

Seeded streams of window summaries (histograms and exact category counts, as the live job's) of a
model whose features follow a daily cycle: in the mean (normal, amplitude 0.1, 0.3 and 1.0 sd), in
the spread (sd 1 +- 0.1 and 0.3) and in a category's share (0.4 +- 0.05 and 0.15), plus a
stationary numeric and categorical feature, at several cycle lengths (windows a day: 24 = hourly
windows, 96 = 15-minute windows). The reference holds two whole cycles; the stream is the next
four (drift-free), or a shift of 1/3 sd on the 0.1- and 0.3-sd mean-cycle features and on the
stationary one from one of four phases of a later day, followed for half a day.

Each stream is judged, under the production budget at its window length (``drift_policy`` of the
default thresholds), by ``pipeline.judging.analyze_summary`` (CUSUM carried window to window), in
three modes on the same data:

* ``today``: the whole-cycle reference without its windows' statistics: the rules as they were
  before over-dispersion (independent events: what a reference file built before reads as);
* ``whole``: the whole-cycle reference (``reference: {mode: file}``), every rule standardised by the
  reference windows' own between-window variance (``sketches/dispersion.py``);
* ``season``: ``reference: {season: 1d}`` with the default tolerance (one window each side): each
  window against its phase's reference windows (``pipeline.seasons.PhaseReferences``).

Baseline in the same run: per window and feature, two-sample KS (numeric) or chi-square (categorical)
against the whole reference data, drifted when p < 0.05 (``bench_detection.naive_pvalue``).
"""

from __future__ import annotations

import dataclasses
import time
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from bench.bench_detection import naive_pvalue
from driftwarden.pipeline.judging import analyze_summary, cusum_state, drift_policy
from driftwarden.pipeline.references import reference_from_summaries
from driftwarden.pipeline.seasons import PhaseReferences, Season
from driftwarden.pipeline.summary import WindowSummary
from driftwarden.schemas.config import ModelConfig, ThresholdConfig
from driftwarden.sketches import CategoricalSketch, HistogramSketch, Reference
from driftwarden.sketches.sample import EventSample

DAY_MS = 86_400_000
MODES = ("today", "whole", "season")
SEVERITIES = ("minor", "moderate", "major")
CATS = np.array(list("abcde"))
SHARES = np.array([0.4, 0.3, 0.15, 0.1, 0.05])
#: feature -> (what cycles, amplitude): the drift-free streams' features.
FEATURES = {"mean_0.1": ("mean", 0.1), "mean_0.3": ("mean", 0.3), "mean_1.0": ("mean", 1.0),
            "spread_0.1": ("spread", 0.1), "spread_0.3": ("spread", 0.3),
            "share_0.05": ("share", 0.05), "share_0.15": ("share", 0.15),
            "flat_x": ("mean", 0.0), "flat_c": ("share", 0.0)}
#: The detection streams' shift (sd) and the features it is applied to (two cyclic, one stationary).
SHIFT = 1.0 / 3.0
SHIFTED = ("mean_0.1", "mean_0.3", "flat_x")


def horizon(per_day: int) -> int:
    """Windows followed after a shift starts ("miss" beyond): half a day, by when any start has met the
    cycle's peak (the whole-day reference cannot tell a shift on a cyclic feature from the cycle itself
    until the cycle carries it past its own range)."""
    return per_day // 2


def kind(name: str) -> str:
    """A feature's kind: the share cycles (and flat_c) are categorical."""
    return "categorical" if FEATURES[name][0] == "share" else "numeric"


def values(rng: np.random.Generator, name: str, phase: float, size: int, shift: float = 0.0) -> np.ndarray:
    """One window's values of a feature at ``phase`` (fraction of the day), its mean moved by ``shift`` sd."""
    what, amplitude = FEATURES[name]
    wave = amplitude * np.sin(2 * np.pi * phase)
    if what == "mean":
        return rng.normal(wave + shift, 1.0, size)
    if what == "spread":
        return rng.normal(shift, 1.0 + wave, size)
    shares = SHARES.copy()
    shares[0] += wave
    shares[1:] *= (1.0 - shares[0]) / SHARES[1:].sum()
    return rng.choice(CATS, size, p=shares).astype(object)


def summary(model: str, start_ms: int, window_ms: int, columns: dict[str, np.ndarray]) -> WindowSummary:
    """The window summary of ``columns`` (the sketches the live job keeps; no sample: no deep test reads one here)."""
    sketches = {name: (HistogramSketch() if kind(name) == "numeric" else CategoricalSketch()).update(v)
                for name, v in columns.items()}
    return WindowSummary(model, start_ms, start_ms + window_ms, len(next(iter(columns.values()))), 0, sketches,
                         EventSample(0, {}))


def without_window_stats(reference: Reference) -> Reference:
    """``reference`` as a build before window statistics reads: every rule without over-dispersion (today's)."""
    return Reference({name: dataclasses.replace(f, window_stats=np.empty((0, 4)))
                      for name, f in reference.features.items()})


@dataclass
class Stream:
    """One model's cycle setting: windows a day, events a window, and its references."""

    seed: int
    per_day: int
    events: int
    model: ModelConfig = field(init=False)
    window_ms: int = field(init=False)

    def __post_init__(self) -> None:
        self.model = ModelConfig(name="m", features={n: kind(n) for n in FEATURES}, monitor_prediction=False)
        self.window_ms = DAY_MS // self.per_day
        self.policy = drift_policy(ThresholdConfig(), self.window_ms)
        self.rng = np.random.default_rng(self.seed * 1000 + self.per_day)
        self.seconds: Counter = Counter()  # CPU seconds: "phase references" (choosing and building), "judging"

    def window(self, index: int, shift: dict[str, float] | None = None) -> tuple[WindowSummary, dict]:
        """Window ``index`` (0 = midnight of day 0): its summary and its raw columns."""
        phase = (index % self.per_day) / self.per_day
        columns = {n: values(self.rng, n, phase, self.events, (shift or {}).get(n, 0.0)) for n in FEATURES}
        return summary("m", index * self.window_ms, self.window_ms, columns), columns

    def build(self) -> None:
        """The reference: two whole cycles; its three modes and the naive baseline's raw data (once)."""
        if hasattr(self, "whole"):
            return
        windows = [self.window(i) for i in range(2 * self.per_day)]
        summaries = [s for s, _ in windows]
        self.whole = reference_from_summaries(summaries, self.model.monitored, self.policy)
        self.today = without_window_stats(self.whole)
        self.phases = PhaseReferences(summaries, Season(DAY_MS, self.window_ms, 1), self.model, self.policy)
        self.raw = {n: _raw(np.concatenate([c[n] for _, c in windows]), kind(n)) for n in FEATURES}

    def reference(self, mode: str, start_ms: int) -> Reference:
        """The reference a window is judged against in ``mode``."""
        if mode == "season":
            started = time.process_time()
            reference = self.phases.reference_for(start_ms) or Reference()
            self.seconds["phase references"] += time.process_time() - started
            return reference
        return self.today if mode == "today" else self.whole

    def judge(self, mode: str, window: WindowSummary, state: dict) -> tuple[list, dict]:
        """``analyze_summary`` of a window in ``mode``: its feature outcomes and the CUSUM state after it."""
        reference = self.reference(mode, window.window_start_ms)
        started = time.process_time()
        report = analyze_summary(window, reference, self.policy, state)
        self.seconds["judging"] += time.process_time() - started
        return report.features, cusum_state(report)


def _raw(values: np.ndarray, feature_kind: str):
    if feature_kind == "numeric":
        return np.sort(values[np.isfinite(values)])
    cats, counts = np.unique(values.astype(str), return_counts=True)
    return dict(zip(cats.tolist(), counts.tolist()))


def null_counts(stream: Stream, cycles: int = 4, modes: tuple[str, ...] = MODES,
                naive: bool = True) -> dict[str, Counter]:
    """Drift-free: per mode (and ``naive``), per feature, cells and drifted cells by severity and by the CUSUM."""
    stream.build()
    counts = {mode: Counter() for mode in (*modes, "naive")}
    states: dict[str, dict] = {mode: {} for mode in modes}
    for index in range(2 * stream.per_day, (2 + cycles) * stream.per_day):
        window, columns = stream.window(index)
        for mode in modes:
            features, states[mode] = stream.judge(mode, window, states[mode])
            for f in features:
                counts[mode][(f.name, "cells")] += 1
                counts[mode][(f.name, f.severity)] += f.drifted
                counts[mode][(f.name, "cusum")] += bool(f.evidence and f.evidence.get("test") == "cusum")
        for name in FEATURES if naive else ():
            counts["naive"][(name, "cells")] += 1
            counts["naive"][(name, "minor")] += naive_pvalue(stream.raw[name], columns[name], kind(name)) < 0.05
    return counts


def delays(stream: Stream, start_phase: int, day: int = 2) -> dict[str, dict[str, int | None]]:
    """Shift of SHIFT sd on SHIFTED from window ``start_phase`` of ``day`` (2: the day after the reference):
    per mode (and naive), each shifted feature's windows to its first drifted verdict (None: not within
    :func:`horizon`), and the other cells drifted ("fp"); two drift-free windows before it."""
    stream.build()
    first = day * stream.per_day + start_phase
    found: dict[str, dict] = {mode: {"fp": 0} for mode in (*MODES, "naive")}
    states: dict[str, dict] = {mode: {} for mode in MODES}
    for index in range(first - 2, first + horizon(stream.per_day)):
        after = index - first
        window, columns = stream.window(index, {n: SHIFT for n in SHIFTED} if after >= 0 else None)
        verdicts = {}
        for mode in MODES:
            features, states[mode] = stream.judge(mode, window, states[mode])
            verdicts[mode] = {f.name: f.drifted for f in features}
        verdicts["naive"] = {n: naive_pvalue(stream.raw[n], columns[n], kind(n)) < 0.05 for n in FEATURES}
        for mode, drifted in verdicts.items():
            for name, flag in drifted.items():
                if name in SHIFTED and after >= 0:
                    if flag and found[mode].get(name) is None:
                        found[mode][name] = after
                else:
                    found[mode]["fp"] += flag
    return found
