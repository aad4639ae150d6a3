"""Slowly growing cardinality: Zipf over 100,000 + G*t ids (new ids join the tail), 3,000 events/window.

Run: ``python bench/growth_cardinality.py [G]`` (G new ids per window, default 1000; a few minutes).
Prints, every 10th window, the unseen share and verdict against a fixed reference (the first 24
windows, built from raw events) and against a rolling one (the 24 windows before, lag 1, built
from the stored summaries as the live job builds it).
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np
from tests.test_sketches_cardinality import CONFIG, POLICY, PER_WINDOW, WINDOW_MS, summary
from jobs.pipeline import analyze_summary
from jobs.references import reference_from_summaries
from jobs.reference_build import build_reference_set
from schemas.events import Event

G = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
rng = np.random.default_rng(9)
def ids_at(t):
    n = 100_000 + G * t
    w = 1.0 / np.arange(1, n + 1)
    # new ids join the population at the tail and climb: rank of id k fixed, weights by rank
    r = rng.choice(n, size=PER_WINDOW, p=w / w.sum())
    return [f"m{x}" for x in r.tolist()]
windows = [ids_at(t) for t in range(110)]
sums = [summary(v, t) for t, v in enumerate(windows)]
events = [Event("m", t * WINDOW_MS + i, {"merchant": v}) for t in range(24) for i, v in enumerate(windows[t])]
file_ref = build_reference_set(events, CONFIG, POLICY).models["m"]
print("file ref threshold new_share %.4f" % file_ref.features["merchant"].thresholds.new_share)
for t in range(30, 110, 10):
    f = analyze_summary(sums[t], file_ref, POLICY).features[0]
    roll = reference_from_summaries(sums[t - 25:t - 1][::-1], {"merchant": "categorical"}, POLICY)
    r = analyze_summary(sums[t], roll, POLICY).features[0]
    print(f"t={t} ids={100_000 + G * t}: file ref new_share {f.gate_new_share:.4f} drifted {f.drifted} | "
          f"rolling new_share {r.gate_new_share:.4f} thr {roll.features['merchant'].thresholds.new_share:.4f} drifted {r.drifted}")
