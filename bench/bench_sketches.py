"""Benchmark of sketches/: every figure printed next to a baseline measured in the same run.

Run: ``python bench/bench_sketches.py`` (about a minute on one core). Figures:

1. ``NumericSketch.update`` values/s against the raw ``datasketches.kll_doubles_sketch.update`` on
   the same array (target: ratio >= 0.8).
2. Serialized bytes of a numeric sketch at k=200 after 10 M values (target <= 4 KB), and the raw
   datasketches bytes inside it.
3. Merging 1,000 numeric sketches: our ``merge`` against raw KLL merges of the same sketches.
4. Gate scoring of one window for 100 features against the deep tests on the full raw data.
5. A categorical feature of 10^6 distinct values: the window sketch's update rate against a
   5-value feature of the same length (target: within 2x), its serialized state per window, and
   the reference's size with its membership filter (``sketches/profile.py``).
   ``python bench/bench_sketches.py --cardinality`` runs only this one.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import datasketches as ds
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import pyarrow as pa  # noqa: E402

from driftwarden.replay.synthetic import zipf_ids  # noqa: E402
from driftwarden.sketches import CategoricalSketch, DriftPolicy, NumericSketch, ReservoirSample, deep_test, gate_scores  # noqa: E402
from driftwarden.sketches.reference import Reference, reference_from_window_sketches, value_counts  # noqa: E402


def best_of(repeats: int, fn) -> float:
    """Smallest wall time of ``repeats`` calls of ``fn`` (seconds)."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def interleaved(repeats: int, baseline, candidate) -> tuple[float, float]:
    """Best times of ``baseline`` and ``candidate`` run alternately, so a busy machine hurts both alike."""
    pairs = [(best_of(1, baseline), best_of(1, candidate)) for _ in range(repeats)]
    return min(p[0] for p in pairs), min(p[1] for p in pairs)


def bench_update(values: np.ndarray) -> None:
    raw, ours = interleaved(5, lambda: ds.kll_doubles_sketch(200).update(values),
                            lambda: NumericSketch(200).update(values))
    print(f"update  raw kll_doubles_sketch: {values.size / raw / 1e6:7.1f} M values/s")
    print(f"update  NumericSketch:          {values.size / ours / 1e6:7.1f} M values/s"
          f"   ratio {raw / ours:.2f} (target >= 0.80)")


def bench_size(values: np.ndarray) -> None:
    sketch = NumericSketch(200).update(values)
    raw = len(sketch._sk.serialize())
    print(f"bytes   NumericSketch k=200, {values.size / 1e6:.0f} M values: {len(sketch.serialize())} B"
          f" (raw datasketches {raw} B; target <= 4096 B)")
    for k in (100, 128, 150):
        size = len(NumericSketch(k).update(values).serialize())
        print(f"bytes   NumericSketch k={k}: {size} B, rank error {NumericSketch(k).update(values).rank_error:.4f}")


def bench_merge(rng: np.random.Generator) -> None:
    parts = [NumericSketch(200).update(rng.normal(size=10_000)) for _ in range(1000)]
    raws = [p._sk for p in parts]

    def ours() -> None:
        total = NumericSketch(200)
        for p in parts:
            total.merge(p)

    def raw() -> None:
        total = ds.kll_doubles_sketch(200)
        for r in raws:
            total.merge(r)

    t_raw, t_ours = interleaved(3, raw, ours)
    print(f"merge   1,000 sketches: {t_ours * 1e3:.1f} ms (raw KLL merges {t_raw * 1e3:.1f} ms, ratio {t_raw / t_ours:.2f})")


def bench_gate_vs_deep(rng: np.random.Generator, features: int = 100) -> None:
    ref_raw = [rng.normal(size=100_000) for _ in range(features)]
    win_raw = [rng.normal(0.02 * (i % 5), 1.0, size=10_000) for i in range(features)]
    refs = [NumericSketch().update(x) for x in ref_raw]
    wins = [NumericSketch().update(x) for x in win_raw]
    ref_full = [ReservoirSample(x.size).update(x) for x in ref_raw]
    win_full = [ReservoirSample(x.size).update(x) for x in win_raw]
    gate = best_of(3, lambda: [gate_scores(r, w) for r, w in zip(refs, wins)])
    deep = best_of(1, lambda: [deep_test(r, w, "numeric") for r, w in zip(ref_full, win_full)])
    print(f"gate    {features} features, one window: {gate * 1e3:.1f} ms ({gate / features * 1e3:.2f} ms/feature)")
    print(f"deep    same features on full raw data (100k ref, 10k window): {deep * 1e3:.0f} ms"
          f"   ratio deep/gate {deep / gate:.1f}x")


def bench_cardinality(rng: np.random.Generator, events: int = 200_000, ids: int = 1_000_000,
                      windows: int = 10) -> None:
    high = pa.array(zipf_ids(rng, events, ids=ids, exponent=0.5))
    low = pa.array(np.array(["a", "b", "c", "d", "e"])[rng.integers(0, 5, events)].tolist())
    t_low, t_high = interleaved(5, lambda: CategoricalSketch().update(low), lambda: CategoricalSketch().update(high))
    sketch = CategoricalSketch().update(high)
    print(f"categ.  update 5 values: {events / t_low / 1e6:.2f} M values/s; {len(set(high.to_pylist())):,} distinct "
          f"of 10^6: {events / t_high / 1e6:.2f} M values/s   ratio {t_high / t_low:.2f} (target <= 2.0)")
    print(f"categ.  state per window: {len(sketch.serialize()):,} B at 10^6 cardinality "
          f"({len(CategoricalSketch().update(low).serialize())} B at 5 values)")
    columns = [zipf_ids(rng, events, ids=ids, exponent=0.5) for _ in range(windows)]
    start = time.perf_counter()
    sketches = [CategoricalSketch(name="id").update(pa.array(c)) for c in columns]
    ref = reference_from_window_sketches("id", "categorical", sketches, ReservoirSample(2000).update(columns[0]),
                                         DriftPolicy(), [value_counts(c) for c in columns])
    built = time.perf_counter() - start
    size = len(Reference({"id": ref}).serialize())
    print(f"categ.  reference of {windows} x {events:,} events, {ref.profile.n:,} values: {size:,} B on disk, "
          f"filter {ref.profile.bits:,} bits / {ref.profile.probes} probes, profile {ref.profile.nbytes:,} B in memory, "
          f"built and calibrated in {built:.1f} s")


def main() -> None:
    """Run every benchmark and print its figures."""
    rng = np.random.default_rng(0)
    if "--cardinality" in sys.argv[1:]:
        bench_cardinality(rng)
        return
    values = rng.normal(size=10_000_000)
    bench_update(values)
    bench_size(values)
    bench_merge(rng)
    bench_gate_vs_deep(rng)
    bench_cardinality(rng)


if __name__ == "__main__":
    main()
