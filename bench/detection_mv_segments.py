"""Multivariate groups judged per segment (``bench_detection.py --multivariate --segments N``).

A model of ``--mv-features`` numeric features (its default group) segmented by ``country``: N top values of
unequal volume and the other segment (two more values). In every segment the features are N(0, 1); ``f0`` and
``f1`` correlate with a segment's own rho (0.7 in the flipped segment), the rest are independent. Windows are
summarized as replay and the reference build do (``WindowRows.summarize`` with the top keys), references built
with ``reference_from_summaries`` per segment, judged with ``analyze_summary`` at the production budget.

Prints, in one run:

* the detection delay of a correlation flip (rho to -rho, marginals unchanged) confined to one segment: the
  windows from the flip to that segment's group cell's first drift, over ``--segment-change-windows`` changed
  windows, and how many of the other segments' group cells drifted in them;
* drift-free windows: the share of drifted cells (every feature and group cell, global and per segment; 95%
  Clopper-Pearson interval) and the windows with any drifted group cell, at ``--mv-ref-windows`` reference
  windows (the group's null is fitted from that many scores).
"""

from __future__ import annotations

import time

import numpy as np
import pyarrow as pa
from scipy import stats

from driftwarden.pipeline.judging import analyze_summary
from driftwarden.pipeline.references import reference_from_summaries
from driftwarden.pipeline.segments import other_key
from driftwarden.pipeline.summary import WindowRows
from driftwarden.schemas.config import ModelConfig

GROUP = "group"  # the kind of a group's cell
FLIPPED = 1  # the flipped segment: the second largest


def _model(features: int, segments: int) -> ModelConfig:
    return ModelConfig.model_validate({
        "name": "m", "features": {**{f"f{i}": "numeric" for i in range(features)}, "country": "categorical"},
        "monitor_prediction": False, "segments": {"by": ["country"], "top": segments, "min_count": 200}})


class Generator:
    """Windows of the segmented stream: each value of ``country`` its share and its own rho of f0 and f1."""

    def __init__(self, features: int, segments: int, events: int, seed: int) -> None:
        self.features, self.events = features, events
        values = segments + 2
        shares = 0.7 ** np.arange(values)
        self.shares = shares / shares.sum()
        self.values = np.array([f"c{i}" for i in range(values)])
        self.rho = np.random.default_rng(1000 + seed).uniform(-0.6, 0.8, size=values)
        self.rho[FLIPPED] = 0.7
        self.rng = np.random.default_rng(seed)

    def columns(self, flipped: bool = False) -> dict[str, pa.Array]:
        """One window's columns (``flipped``: the flipped segment's rho is -0.7)."""
        index = self.rng.choice(len(self.values), size=self.events, p=self.shares)
        rho = self.rho[index]
        if flipped:
            rho = np.where(index == FLIPPED, -self.rho[FLIPPED], rho)
        z = self.rng.normal(size=(self.events, self.features))
        z[:, 1] = rho * z[:, 0] + np.sqrt(1 - rho ** 2) * z[:, 1]
        columns = {f"f{i}": pa.array(z[:, i]) for i in range(self.features)}
        columns["country"] = pa.array(self.values[index].tolist(), pa.string())
        return columns


def _summary(model: ModelConfig, columns: dict, start: int, top: tuple):
    rows = WindowRows(model)
    n = len(columns["country"])
    rows.add_columns(columns, [(start, i) for i in range(n)])
    return rows.summarize("m", start * 60_000, 60_000, top)


def _references(model: ModelConfig, generator: Generator, windows: int, top: tuple, policy):
    summaries = [_summary(model, generator.columns(), -1 - w, top) for w in range(windows)]
    kinds = model.sketch_kinds
    reference = reference_from_summaries(summaries, kinds, policy)
    keys = (*top, other_key(("country",)))
    return reference, {key: reference_from_summaries([s.segments[key] for s in summaries if key in s.segments],
                                                     kinds, policy) for key in keys}


def interval(k: int, n: int) -> tuple[float, float]:
    """Clopper-Pearson 95% interval of k successes in n trials."""
    lo = stats.beta.ppf(0.025, k, n - k + 1) if k else 0.0
    hi = stats.beta.ppf(0.975, k + 1, n - k) if k < n else 1.0
    return float(lo), float(hi)


def _flip_delay(args, model, generator, top, reference, segments, policy) -> None:
    """Print the changed windows until the flipped segment's group drifts, and the other segments' drifted groups."""
    flipped_key = top[FLIPPED]
    caught, others, first = 0, 0, None
    for w in range(args.segment_change_windows):
        report = analyze_summary(_summary(model, generator.columns(flipped=True), w, top), reference, policy,
                                 None, segments, 200)
        groups = {tuple((f.segment or {}).values()) or None: f for f in report.features if f.kind == GROUP}
        caught += groups[flipped_key].drifted
        others += sum(f.drifted for key, f in groups.items() if key not in (flipped_key, None))
        first = w if first is None and groups[flipped_key].drifted else first
    print(f"  flip: first caught in changed window {'never' if first is None else first} (0 = its first); caught in "
          f"{caught} of {args.segment_change_windows} changed windows; other segments' group cells drifted: {others}")


def _drift_free(args, model, generator, top, reference, segments, policy) -> tuple[int, int, int, int, int, int]:
    """(cells, drifted cells, group cells judged, drifted group cells, windows with a drifted group cell, drifted
    global group cells)."""
    cells = drifted = group_cells = group_drifted = windows_any = global_drifted = 0
    for w in range(args.mv_windows):
        report = analyze_summary(_summary(model, generator.columns(), 10_000 + w, top), reference, policy,
                                 None, segments, 200)
        judged = [f for f in report.features if f.error is None and f.count]
        cells += len(judged)
        drifted += sum(f.drifted for f in judged)
        group_cells += sum(f.kind == GROUP and f.p_adjusted is not None for f in judged)
        group_drifted += sum(f.kind == GROUP and f.drifted for f in judged)
        windows_any += any(f.kind == GROUP and f.drifted for f in judged)
        global_drifted += sum(f.kind == GROUP and f.drifted and f.segment is None for f in judged)
    return cells, drifted, group_cells, group_drifted, windows_any, global_drifted


def run(args, policy) -> None:
    """Print the flip's detection delay and the drift-free share of drifted cells (see the module docstring),
    for each reference length and ``--mv-ref-seeds`` references of it (the same law, other draws)."""
    started = time.process_time()
    model = _model(args.mv_features, args.segments)
    generator = Generator(args.mv_features, args.segments, args.mv_events, args.seed)
    top = tuple((str(v),) for v in generator.values[:args.segments])
    share = generator.shares[FLIPPED]
    print(f"{args.segments} top segments + other; {args.mv_features} features, {args.mv_events} events a window; "
          f"flipped segment {top[FLIPPED][0]} ({share:.0%} of events, about {share * args.mv_events:.0f} rows a "
          f"window), rho 0.7 -> -0.7; {args.mv_windows} drift-free windows per reference")
    for ref_windows in args.mv_ref_windows:
        totals = np.zeros(6, dtype=np.int64)
        for ref_seed in range(args.mv_ref_seeds):
            generator.rng = np.random.default_rng((args.seed, ref_windows, ref_seed))
            reference, segments = _references(model, generator, ref_windows, top, policy)
            print(f"reference {ref_windows} windows, draw {ref_seed}:")
            _flip_delay(args, model, generator, top, reference, segments, policy)
            counts = _drift_free(args, model, generator, top, reference, segments, policy)
            totals += counts
            print(f"  drift-free: {counts[1]} of {counts[0]} cells drifted; group cells judged {counts[2]}, drifted "
                  f"{counts[3]} ({counts[5]} global); windows with a drifted group cell {counts[4]} of {args.mv_windows}")
        cells, drifted, _, group_drifted, windows_any, global_drifted = (int(v) for v in totals)
        n = args.mv_windows * args.mv_ref_seeds
        lo, hi = interval(drifted, cells)
        lo_w, hi_w = interval(windows_any, n)
        print(f"reference {ref_windows} windows, {args.mv_ref_seeds} draws pooled: {drifted} of {cells} cells drifted "
              f"({drifted / cells:.4%}, 95% [{lo:.4%}, {hi:.4%}]), {group_drifted} of them group cells ({global_drifted} "
              f"global); windows with "
              f"a drifted group cell {windows_any} of {n} (95% [{lo_w:.4%}, {hi_w:.4%}]) against alpha "
              f"{policy.alpha:.3g}")
    print(f"\nfinished in {time.process_time() - started:.0f} s CPU")
