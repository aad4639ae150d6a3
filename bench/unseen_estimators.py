"""The unseen-value share of a window: read from the window sketch (the gate) or from the event sample.

Run: ``python bench/unseen_estimators.py`` (about a minute). A reference of 24 windows x 3,000
events (Zipf over 10^5 ids, built from raw events as ``reference build`` does), then 30 drift-free
windows: each estimator's mean, standard deviation over the windows and RMSE against the exact
share of the window's events whose id the reference's filter never saw.
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from driftwarden.pipeline.judging import drift_policy
from driftwarden.pipeline.summary import summarize_window  # noqa: E402
from driftwarden.pipeline.reference_build import build_reference_set  # noqa: E402
from driftwarden.replay.synthetic import zipf_ids  # noqa: E402
from driftwarden.schemas.config import MonitorConfig  # noqa: E402
from driftwarden.schemas.events import Event  # noqa: E402

PER_WINDOW, WINDOW_MS = 3000, 60_000
CONFIG = MonitorConfig.model_validate({"models": [{"name": "m", "features": {"merchant": "categorical"}}]})


def main() -> None:
    """Print both estimators' figures."""
    rng = np.random.default_rng(20)
    events = [Event("m", w * WINDOW_MS + i, {"merchant": v}) for w in range(24) for i, v in enumerate(zipf_ids(rng, PER_WINDOW))]
    profile = build_reference_set(events, CONFIG, drift_policy(CONFIG.thresholds)).models["m"].features["merchant"].profile
    rows = []
    for w in range(30):
        values = zipf_ids(rng, PER_WINDOW)
        summary = summarize_window("m", (100 + w) * WINDOW_MS, WINDOW_MS, [{"merchant": v} for v in values],
                                   CONFIG.model("m"))
        sample = summary.features["merchant"][1].values.tolist()
        rows.append((profile.unseen_share(summary.sketches["merchant"]), float((~profile.contains(sample)).mean()),
                     float((~profile.contains(values)).mean())))
    est = np.array(rows)
    for name, col in (("window sketch (gate)", 0), ("event sample (deep)", 1)):
        rmse = float(np.sqrt(np.mean((est[:, col] - est[:, 2]) ** 2)))
        print(f"{name:22s} mean {est[:, col].mean():.4f}  sd {est[:, col].std(ddof=1):.4f}  RMSE vs exact {rmse:.4f}")
    print(f"{'exact':22s} mean {est[:, 2].mean():.4f}  sd {est[:, 2].std(ddof=1):.4f}")


if __name__ == "__main__":
    main()
