"""Cost of a vector feature's projection per event, against validating the same event without the vector.

    .venv/bin/python bench/bench_projection.py [--events 2000]

Per event, as the live job's Python path and replay run it: ``schemas.events.validate_event`` of a JSON
event with one vector feature of d floats projected to k coordinates (``core/projection.py``), minus
the same event with a scalar in place of the vector (the baseline, same run); and ``project`` alone. Times
are this process's CPU time (best of 3), so other work on a shared machine counts less.
The integer matrix product is d·k multiply-adds: the rows for d = 96..384 at k = 16 and for k = 8..32
at d = 384 show how the cost grows (parsing the array, O(d), is in the event's figure too).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from driftwarden.core.projection import project  # noqa: E402
from driftwarden.schemas.config import MonitorConfig  # noqa: E402
from driftwarden.schemas.events import validate_event  # noqa: E402


def _per_event_us(fn, items: list) -> float:
    best = float("inf")
    for _ in range(3):
        started = time.process_time()  # CPU time: the machine is shared, wall time would count the others
        for item in items:
            fn(item)
        best = min(best, time.process_time() - started)
    return best / len(items) * 1e6


def row(d: int, k: int, events: int, rng: np.random.Generator) -> tuple[float, float, float]:
    """(validate with the vector, validate the baseline event, project alone), microseconds per event."""
    config = MonitorConfig.model_validate({"models": [
        {"name": "v", "features": {"emb": {"vector": d, "projections": k}, "x": "numeric"}},
        {"name": "s", "features": {"emb": "numeric", "x": "numeric"}}]})
    kinds = {m.name: m.kinds for m in config.models}
    vectors = [rng.normal(size=d).tolist() for _ in range(events)]
    with_vector = [orjson.dumps({"event_time": 1_767_225_600_000, "model": "v", "features": {"emb": v, "x": 1.0}})
                   for v in vectors]
    baseline = [orjson.dumps({"event_time": 1_767_225_600_000, "model": "s", "features": {"emb": v[0], "x": 1.0}})
                for v in vectors]
    return (_per_event_us(lambda raw: validate_event(raw, kinds.get), with_vector),
            _per_event_us(lambda raw: validate_event(raw, kinds.get), baseline),
            _per_event_us(lambda v: project(v, d, k), vectors))


def main(argv: list[str] | None = None) -> int:
    """Print one row per (d, k)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=2000, help="events timed per row (best of 3)")
    args = parser.parse_args(argv)
    rng = np.random.default_rng(0)
    print(f"{'d':>4} {'k':>3} {'d*k':>6} {'validate us':>12} {'baseline us':>12} {'extra us':>9} {'project us':>11}"
          f" {'events/s':>9}")
    for d, k in ((96, 16), (192, 16), (384, 16), (384, 8), (384, 32)):
        full, base, proj = row(d, k, args.events, rng)
        print(f"{d:>4} {k:>3} {d * k:>6} {full:>12.1f} {base:>12.1f} {full - base:>9.1f} {proj:>11.1f} "
              f"{1e6 / full:>9.0f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
