"""Multivariate rows of ``bench/bench_detection.py --multivariate``: groups and vector features against naive
per-feature tests, on the same data, in the same run.

Judged as the live job and replay judge (``sketches.analyze_segments`` with the window's group moments,
BH across the single features and the groups); the reference is 20 windows (``--ref-size``) of the
drift-free law, live windows have ``--mv-events`` events (default 3,000).

* ``corr_flip``: 10 numeric features, x0 and x1 normal with correlation 0.8; the change makes it -0.8
  (every marginal unchanged). Cells: the 10 features and the default group.
* ``emb_orthogonal``, ``emb_spread``: a 384-dim embedding living near an 8-dim subspace (scales 1 .. 0.3,
  isotropic noise sd 0.05), projected to 16 coordinates (``core/projection.py``); the changes: a shift of
  ``--orth-shift`` along a dense direction orthogonal to the subspace (random signs over the 384
  coordinates less their part in the subspace: each coordinate moves about shift/√384, what a common
  offset of a new encoder looks like), or every vector's spread around the mean times 0.8. Cells: the 16 projected coordinates and the vector's group.

Delay: windows from the change to the first drifted cell of the changed entity ("miss" after
``--mv-changed`` changed windows), and in how many of the changed windows any cell drifted. Naive,
same data: per feature (per raw coordinate of the embedding: 384 of them) a two-sample KS test of the
window against all the reference data, Bonferroni over the entity's features at 0.05 (without the
correction the 384 coordinates would flag every window). Drift-free: the share of drifted cells over
all windows and entries, new ones included, with its Clopper-Pearson 95% interval and one-sided 95% upper
bound (no drifted cell in about 3,000 puts that bound under 0.1%); and the single
features' verdicts judged with the groups and without, on the same windows (how many differ).
"""

from __future__ import annotations

import time

import numpy as np
from scipy import stats

from driftwarden.core.projection import project_rows, projected_names
from driftwarden.schemas.config import DEFAULT_GROUP
from driftwarden.sketches import HistogramSketch, Reference, ReservoirSample, analyze_segments
from driftwarden.sketches.moments import GroupMoments
from driftwarden.sketches.multivariate import build_group_reference
from driftwarden.sketches.reference import reference_from_window_sketches

DIM, RANK, PROJECTIONS, NOISE = 384, 8, 16, 0.05
EMB = "emb"
MIN_COUNT = 200


class Scenario:
    """A drift-free law and its change, as named columns per window (and the raw data the naive test reads)."""

    def __init__(self, name: str, rng: np.random.Generator, orth_shift: float) -> None:
        self.name, self.rng, self.orth_shift = name, rng, orth_shift
        self.vector = name.startswith("emb")
        if self.vector:
            basis = np.linalg.qr(rng.normal(size=(DIM, RANK)))[0]
            self.basis = basis * np.linspace(1.0, 0.3, RANK)
            self.mean = rng.normal(0.0, 0.1, DIM)
            residual = rng.choice([-1.0, 1.0], size=DIM)  # dense: every coordinate moves a little
            residual -= basis @ (basis.T @ residual)
            self.orthogonal = residual / np.linalg.norm(residual)

    @property
    def features(self) -> tuple[str, ...]:
        """The scalar features judged one at a time (a vector's projected coordinates)."""
        return projected_names(EMB, PROJECTIONS) if self.vector else tuple(f"x{i}" for i in range(10))

    @property
    def group(self) -> str:
        """The group the scenario's change is for."""
        return EMB if self.vector else DEFAULT_GROUP

    def raw(self, size: int, drifted: bool) -> np.ndarray:
        """One window's raw rows (events x features; 384 columns for an embedding)."""
        rng = self.rng
        if not self.vector:
            rho = -0.8 if drifted else 0.8
            x = rng.normal(size=(size, 10))
            x[:, 1] = rho * x[:, 0] + np.sqrt(1 - rho ** 2) * x[:, 1]
            return x
        z = rng.normal(size=(size, RANK)) @ self.basis.T + NOISE * rng.normal(size=(size, DIM))
        if drifted and self.name == "emb_spread":
            z *= 0.8
        x = self.mean + z
        if drifted and self.name == "emb_orthogonal":
            x += self.orth_shift * self.orthogonal
        return x

    def columns(self, raw: np.ndarray) -> np.ndarray:
        """The judged features' values (the projection for an embedding)."""
        return project_rows(raw, PROJECTIONS) if self.vector else raw


def _window(scenario: Scenario, columns: np.ndarray) -> tuple[dict, dict]:
    sketches = {name: (HistogramSketch().update(columns[:, i]), ReservoirSample())
                for i, name in enumerate(scenario.features)}
    return sketches, {scenario.group: GroupMoments(scenario.features).update(columns)}


def _reference(scenario: Scenario, size: int, policy) -> tuple[Reference, np.ndarray]:
    raws = [scenario.raw(size, False) for _ in range(20)]
    windows = [_window(scenario, scenario.columns(r)) for r in raws]
    features = {name: reference_from_window_sketches(name, "numeric", [w[0][name][0] for w in windows],
                                                     ReservoirSample(), policy) for name in scenario.features}
    group = build_group_reference(scenario.group, [w[1][scenario.group] for w in windows], policy.min_windows,
                                  structure_only=not scenario.vector)
    return Reference(features, {scenario.group: group}), np.sort(np.concatenate(raws), axis=0)


def _naive_drifted(reference_raw: np.ndarray, raw: np.ndarray) -> bool:
    """Per-feature KS of the window against the reference data, Bonferroni at 0.05 over the features."""
    level = 0.05 / raw.shape[1]
    m = reference_raw.shape[0]
    for j in range(raw.shape[1]):
        ref, win = reference_raw[:, j], np.sort(raw[:, j])
        points = np.concatenate([ref, win])
        d = float(np.max(np.abs(np.searchsorted(ref, points, "right") / m
                                - np.searchsorted(win, points, "right") / win.size)))
        if stats.kstwo.sf(d, round(m * win.size / (m + win.size))) < level:
            return True
    return False


def _judge(reference: Reference, window: tuple[dict, dict], policy, with_groups: bool = True) -> dict[str, bool]:
    verdicts, _ = analyze_segments(window[0], {}, reference, {}, policy, MIN_COUNT, None,
                                   window[1] if with_groups else None)
    return {v.name: v.drifted for v in verdicts}


def run(args, policy) -> None:
    """Print the delay rows and the drift-free rows."""
    started = time.perf_counter()
    size = args.mv_events
    print(f"\n3. multivariate: {size} events a window, reference 20 x {args.ref_size}; embedding d={DIM} near a "
          f"rank-{RANK} subspace (noise sd {NOISE}), k={PROJECTIONS} projections; 3 clean windows, then "
          f"{args.mv_changed} changed ones: delay (windows) and how many of them were flagged")
    print(f"{'change':<22} {'ours':>5} {'hits':>6} {'by (first)':<20} {'ours fp':>8} {'naive':>6} {'hits':>6} "
          f"{'naive fp':>9}")
    free = {}
    cases = [("corr_flip", 0.0)] + [("emb_orthogonal", shift) for shift in args.orth_shift] + [("emb_spread", 0.0)]
    for name, shift in cases:
        scenario = Scenario(name, np.random.default_rng(args.seed + len(name)), shift)
        reference, reference_raw = _reference(scenario, args.ref_size, policy)
        ours = base = None
        by, fp, base_fp, hits, base_hits = "", 0, 0, 0, 0
        for w in range(3 + args.mv_changed):
            raw = scenario.raw(size, w >= 3)
            verdicts = _judge(reference, _window(scenario, scenario.columns(raw)), policy)
            naive = _naive_drifted(reference_raw, raw)
            if w >= 3:
                hits, base_hits = hits + any(verdicts.values()), base_hits + naive
                if ours is None and any(verdicts.values()):
                    ours, by = w - 3, ",".join(sorted(n for n, d in verdicts.items() if d))[:20]
                base = w - 3 if base is None and naive else base
            else:
                fp, base_fp = fp + sum(verdicts.values()), base_fp + naive
        fmt = lambda d: "miss" if d is None else str(d)  # noqa: E731
        label = f"{name} {shift:g}" if shift else name
        print(f"{label:<22} {fmt(ours):>5} {hits:>3}/{args.mv_changed:<2} {by:<20} {fp:>8} {fmt(base):>6} "
              f"{base_hits:>3}/{args.mv_changed:<2} {base_fp:>9}")
        if name != "emb_orthogonal":  # one drift-free stream per law (the spread scenario's for the embedding)
            free[name.split("_")[0]] = (scenario, reference, reference_raw)
    print(f"\n   drift-free streams ({args.mv_windows} windows each): drifted cells, 95% interval; naive windows "
          "flagged; single-feature verdicts that differ with the groups on vs off")
    print(f"{'law':<6} {'cells':>6} {'drifted':>7} {'share':>8} {'95% interval':>19} {'group':>6} {'naive':>6} "
          f"{'differ':>6}")
    total = [0, 0]
    for law, (scenario, reference, reference_raw) in free.items():
        cells = drifted = group = naive = differ = 0
        for _ in range(args.mv_windows):
            raw = scenario.raw(size, False)
            window = _window(scenario, scenario.columns(raw))
            on, off = _judge(reference, window, policy), _judge(reference, window, policy, with_groups=False)
            cells += len(on)
            drifted += sum(on.values())
            group += on[scenario.group]
            differ += sum(on[n] != off[n] for n in scenario.features)
            naive += _naive_drifted(reference_raw, raw)
        total[0] += cells
        total[1] += drifted
        lo, hi = _interval(drifted, cells)
        print(f"{law:<6} {cells:>6} {drifted:>7} {drifted / cells:>8.4%} [{lo:.4%}, {hi:.4%}] {group:>6} {naive:>6} "
              f"{differ:>6}")
    lo, hi = _interval(total[1], total[0])
    upper = float(stats.beta.ppf(0.95, total[1] + 1, total[0] - total[1])) if total[1] < total[0] else 1.0
    print(f"all multivariate drift-free cells: {total[1]} of {total[0]} = {total[1] / total[0]:.4%} (95% interval "
          f"[{lo:.4%}, {hi:.4%}]; one-sided 95% upper bound {upper:.4%}); target <= 0.1%; "
          f"{time.perf_counter() - started:.0f} s")


def _interval(k: int, n: int) -> tuple[float, float]:
    lo = stats.beta.ppf(0.025, k, n - k + 1) if k else 0.0
    hi = stats.beta.ppf(0.975, k + 1, n - k) if k < n else 1.0
    return float(lo), float(hi)
