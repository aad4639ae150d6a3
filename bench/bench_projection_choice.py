"""Seeded random projection vs a PCA projection of a vector feature: detection of each change and cost per event.

    .venv/bin/python bench/bench_projection_choice.py [--windows 8] [--free-windows 20]

The embedding of ``bench/detection_multivariate.py`` (d = 384 near a rank-8 subspace, k = 16), judged the
same way (histograms per projected coordinate and the group's moments on the projection, BH with the
budget) through two projections: the shipped seeded ±1 projection (``core/projection.py``: needs no
reference, the same in Java and Python), and a PCA projection onto the top 16 principal components of
the reference law (fitted on 20 x ``--ref-size`` rows drawn from it, centred on its mean). Changes: a
shift orthogonal to the subspace (``--orth-shift`` lengths), a shift inside it (along its weakest axis),
the spread times 0.8; per change the delay (windows from the change to the first drifted cell of the
vector), changed windows flagged of ``--windows``, and drift-free windows flagged (``--free-windows``).

Cost per event at d = 384, k = 16 (this process's CPU time, best of 3, batches of 3,000 rows as replay
projects them, and one event at a time as the live job's Python path does): the seeded projection's
exact integer product (``project_rows`` / ``project``) against the PCA projection, as a float product and
as the same exact integer product with its basis rounded to 2^-20 (what live = replay bit for bit needs).
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.detection_multivariate import DIM, PROJECTIONS, Scenario, _judge, _reference, _window  # noqa: E402
from driftwarden.core.projection import FRACTION_BITS, project, project_rows  # noqa: E402


class PcaScenario(Scenario):
    """The same law and change, projected onto the reference law's top PROJECTIONS principal components."""

    def __init__(self, name: str, rng: np.random.Generator, orth_shift: float, ref_size: int) -> None:
        super().__init__(name, rng, orth_shift)
        sample = np.concatenate([self.raw(ref_size, False) for _ in range(20)])
        self.center = sample.mean(axis=0)
        eigenvalues, vectors = np.linalg.eigh(np.cov(sample, rowvar=False))
        self.components = vectors[:, np.argsort(eigenvalues)[::-1][:PROJECTIONS]]

    def columns(self, raw: np.ndarray) -> np.ndarray:
        """The rows' coordinates on the reference's principal components."""
        return (raw - self.center) @ self.components


class InSubspace(Scenario):
    """A mean shift inside the subspace, along its weakest axis (``orth_shift`` long)."""

    def raw(self, size: int, drifted: bool) -> np.ndarray:
        x = super().raw(size, False)
        if drifted:
            axis = self.basis[:, -1] / np.linalg.norm(self.basis[:, -1])
            x += self.orth_shift * axis
        return x


class PcaInSubspace(InSubspace, PcaScenario):
    """:class:`InSubspace` through the PCA projection."""


def detection(scenario: Scenario, policy, args) -> tuple[str, int, int]:
    """Delay, changed windows flagged, drift-free windows flagged of the vector's cells (a projected
    coordinate or its group)."""
    reference, _ = _reference(scenario, args.ref_size, policy)
    delay, hits = None, 0
    for w in range(args.windows):
        flagged = any(_judge(reference, _window(scenario, scenario.columns(scenario.raw(args.events, True))),
                             policy).values())
        hits += flagged
        delay = w if delay is None and flagged else delay
    free = sum(any(_judge(reference, _window(scenario, scenario.columns(scenario.raw(args.events, False))),
                          policy).values()) for _ in range(args.free_windows))
    return ("miss" if delay is None else str(delay)), hits, free


def _cpu_us(fn, items: list, repeat: int = 3) -> float:
    best = float("inf")
    for _ in range(repeat):
        started = time.process_time()
        for item in items:
            fn(item)
        best = min(best, time.process_time() - started)
    return best * 1e6


def costs(events: int) -> list[tuple[str, float, float]]:
    """(name, us per event in batches of ``events`` rows, us per event one at a time) of each projection."""
    rng = np.random.default_rng(5)
    rows = rng.normal(size=(events, DIM)).round(5)
    basis = np.linalg.qr(rng.normal(size=(DIM, PROJECTIONS)))[0]
    center = rows.mean(axis=0)
    fixed_basis = np.rint(np.ldexp(basis, FRACTION_BITS)).astype(np.int64)
    scale = math.ldexp(1.0, 2 * FRACTION_BITS)

    def pca_exact(batch: np.ndarray) -> np.ndarray:
        return (np.rint(np.ldexp(batch - center, FRACTION_BITS)).astype(np.int64) @ fixed_basis) / scale

    lists = rows[:1000].tolist()
    out = []
    for name, batch_fn, one_fn in (
            ("seeded, exact integers", lambda b: project_rows(b, PROJECTIONS), lambda r: project(r, DIM, PROJECTIONS)),
            ("PCA, float product", lambda b: (b - center) @ basis, lambda r: (np.asarray(r) - center) @ basis),
            ("PCA, exact integers", pca_exact, lambda r: pca_exact(np.asarray(r)[None, :]))):
        batch_us = _cpu_us(batch_fn, [rows]) / events
        one_us = _cpu_us(one_fn, lists) / len(lists)
        out.append((name, batch_us, one_us))
    return out


def main() -> None:
    """Print the detection rows of both projections and their costs."""
    from driftwarden.pipeline.judging import drift_policy
    from driftwarden.schemas.config import ThresholdConfig

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--events", type=int, default=3000, help="events per window")
    parser.add_argument("--ref-size", type=int, default=3000, help="events per reference window (20 of them)")
    parser.add_argument("--windows", type=int, default=8, help="changed windows per change")
    parser.add_argument("--free-windows", type=int, default=20, help="drift-free windows per change")
    parser.add_argument("--orth-shift", type=float, nargs="+", default=[0.03, 0.05, 0.1],
                        help="lengths of the shift orthogonal to the subspace")
    parser.add_argument("--in-shift", type=float, default=0.05, help="length of the shift inside the subspace")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    policy = drift_policy(ThresholdConfig(), window_ms=5 * 60_000)  # bench_detection's default 5-minute window
    started = time.perf_counter()
    print(f"d={DIM}, k={PROJECTIONS}, {args.events} events a window, reference 20 x {args.ref_size}; "
          f"{args.windows} changed windows, {args.free_windows} drift-free windows per change")
    print(f"{'change':<22} {'seeded delay':>12} {'hits':>6} {'free fp':>7}   {'PCA delay':>9} {'hits':>6} {'free fp':>7}")
    cases = ([("emb_orthogonal", s, Scenario, PcaScenario) for s in args.orth_shift]
             + [("emb_in_subspace", args.in_shift, InSubspace, PcaInSubspace), ("emb_spread", 0.0, Scenario, PcaScenario)])
    for name, shift, seeded_cls, pca_cls in cases:
        seed = args.seed + len(name)
        seeded = detection(seeded_cls(name, np.random.default_rng(seed), shift), policy, args)
        pca = detection(pca_cls(name, np.random.default_rng(seed), shift, args.ref_size), policy, args)
        label = f"{name} {shift:g}" if shift else name
        print(f"{label:<22} {seeded[0]:>12} {seeded[1]:>3}/{args.windows:<2} {seeded[2]:>7}   {pca[0]:>9} "
              f"{pca[1]:>3}/{args.windows:<2} {pca[2]:>7}")
    print(f"\ncost per event at d={DIM}, k={PROJECTIONS} (CPU us, best of 3): batch of {args.events} rows, one event")
    for name, batch_us, one_us in costs(args.events):
        print(f"  {name:<24} {batch_us:8.2f} {one_us:8.2f}")
    print(f"{time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
