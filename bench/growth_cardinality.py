"""Slowly growing cardinality: Zipf over 100,000 + G*t ids (new ids join the tail), 3,000 events/window.

Run: ``python bench/growth_cardinality.py [G]`` (G new ids per window, default 1000; a few minutes).
Prints, every 10th window, the unseen share and verdict against a fixed reference (the first 24
windows, built from raw events) and against a rolling one (the 24 windows before, lag 1, built
from the stored summaries as the live job builds it).
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
from driftwarden.pipeline.judging import analyze_summary, drift_policy
from driftwarden.pipeline.summary import summarize_window  # noqa: E402
from driftwarden.schemas.config import MonitorConfig  # noqa: E402
from driftwarden.pipeline.references import reference_from_summaries  # noqa: E402
from driftwarden.pipeline.reference_build import build_reference_set  # noqa: E402
from driftwarden.schemas.events import Event  # noqa: E402

PER_WINDOW, WINDOW_MS = 3000, 60_000
CONFIG = MonitorConfig.model_validate({"models": [{"name": "m", "features": {"merchant": "categorical"}}]})
POLICY = drift_policy(CONFIG.thresholds)


def summary(values: list[str], index: int):
    """One window's summary (WindowRows, the real path)."""
    return summarize_window("m", index * WINDOW_MS, WINDOW_MS, [{"merchant": v} for v in values], CONFIG.model("m"))


def ids_at(rng: np.random.Generator, t: int, growth: int) -> list[str]:
    """One window's ids: Zipf over the 100,000 + growth * t ids alive at window t (id k has rank k)."""
    n = 100_000 + growth * t
    weights = 1.0 / np.arange(1, n + 1)
    return [f"m{x}" for x in rng.choice(n, size=PER_WINDOW, p=weights / weights.sum()).tolist()]


def main() -> None:
    """Judge every 10th window against a fixed and a rolling reference; print the figures."""
    growth = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    rng = np.random.default_rng(9)
    windows = [ids_at(rng, t, growth) for t in range(110)]
    sums = [summary(v, t) for t, v in enumerate(windows)]
    events = [Event("m", t * WINDOW_MS + i, {"merchant": v}) for t in range(24) for i, v in enumerate(windows[t])]
    file_ref = build_reference_set(events, CONFIG, POLICY).models["m"]
    print("file ref threshold new_share %.4f" % file_ref.features["merchant"].thresholds.new_share)
    for t in range(30, 110, 10):
        f = analyze_summary(sums[t], file_ref, POLICY).features[0]
        roll = reference_from_summaries(sums[t - 25:t - 1][::-1], {"merchant": "categorical"}, POLICY)
        r = analyze_summary(sums[t], roll, POLICY).features[0]
        print(f"t={t} ids={100_000 + growth * t}: file ref new_share {f.gate_new_share:.4f} drifted {f.drifted} | "
              f"rolling new_share {r.gate_new_share:.4f} thr {roll.features['merchant'].thresholds.new_share:.4f} "
              f"drifted {r.drifted}")


if __name__ == "__main__":
    main()
