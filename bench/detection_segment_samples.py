"""What cutting a segment's event sample to 500 events does to the tests that read it.

Run: ``python bench/detection_segment_samples.py [--windows 20] [--events 4000] [--sizes 2000 500]`` (a few minutes).

Only a capped categorical feature reads a segment's sample (its profile test and unseen share,
``sketches/deep.py``). A model with such a feature (``merchant``: Zipf over 10^5 ids, capped at 1,000 kept
values) and ``country`` segments (top 3: US 50%, DE 30%, FR 10%; IT and ES the other segment): the reference is
built by ``reference build``'s function from 20 drift-free windows, then drift-free windows and windows with a
change in DE's merchants (a tenth or 3% of them new ids; the shares of the 20 or 5 head ids reversed) are summarized as
replay does and judged by ``pipeline.judging.analyze_summary``, once with each segment's sample at 2,000 events
(as before the cut, in the windows and in the reference) and once at 500 (``segments.sample_size``, its default),
on the same events. Prints, per case and sample size, the windows whose merchant cell of a segment drifted
(any segment when drift-free, DE under a change), and the windows where the two sizes decide differently.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from driftwarden.pipeline.judging import analyze_summary, drift_policy, segment_references  # noqa: E402
from driftwarden.pipeline.reference_build import build_reference_set  # noqa: E402
from driftwarden.pipeline.summary import summarize_window  # noqa: E402
from driftwarden.replay.synthetic import zipf_ids  # noqa: E402
from driftwarden.schemas.config import MonitorConfig  # noqa: E402
from driftwarden.schemas.events import Event  # noqa: E402

WINDOW_MS, T0 = 60_000, 1_767_225_600_000
COUNTRIES, SHARES = np.array(["US", "DE", "FR", "IT", "ES"]), [0.5, 0.3, 0.1, 0.05, 0.05]


def config_for(segment_sample: int) -> MonitorConfig:
    """The model: sample_size 2,000 (the default), its segments' samples of ``segment_sample`` events."""
    return MonitorConfig.model_validate({
        "window": {"size": "60s"}, "reference": {"mode": "file", "path": "unused.dwref"},
        "models": [{"name": "m", "features": {"merchant": "categorical", "amount": "numeric", "country": "categorical"},
                    "segments": {"by": ["country"], "top": 3, "min_count": 200, "sample_size": segment_sample}}]})


#: (label, the changed segment's merchants: zipf_ids keyword arguments)
CASES = (("drift-free", None), ("DE: 10% new merchants", {"new_share": 0.1}),
         ("DE: 3% new merchants", {"new_share": 0.03}), ("DE: head of 20 reversed", {"reverse_head": 20}),
         ("DE: head of 5 reversed", {"reverse_head": 5}))


def window_features(rng: np.random.Generator, events: int, change: dict | None) -> list[dict]:
    """One window's feature maps; ``change``: DE's merchants drawn with these ``zipf_ids`` arguments."""
    country = rng.choice(COUNTRIES, size=events, p=SHARES)
    merchant = np.array(zipf_ids(rng, events), dtype=object)
    if change is not None:
        de = country == "DE"
        merchant[de] = zipf_ids(rng, int(de.sum()), **change)
    amount = rng.normal(size=events)
    return [{"merchant": m, "amount": float(a), "country": str(c)} for m, a, c in zip(merchant, amount, country)]


def judge_all(windows: list[tuple[int, list[dict]]], training: list[Event], segment_sample: int) -> list[set]:
    """Each window's drifted (merchant, segment) cells, with segments' samples of ``segment_sample`` events."""
    config = config_for(segment_sample)
    policy = drift_policy(config.thresholds, WINDOW_MS)
    references = build_reference_set(training, config, policy)
    model = config.model("m")
    top = references.segment_keys("m")
    drifted = []
    for start, features in windows:
        summary = summarize_window("m", start, WINDOW_MS, features, model, None, top)
        segments = segment_references(summary, references.segment_reference, model)
        report = analyze_summary(summary, references.models["m"], policy, None, *segments)
        drifted.append({f.segment["country"] for f in report.features
                        if f.name == "merchant" and f.segment is not None and f.drifted})
    return drifted


def main() -> None:
    """Print the drifted windows per case and segment sample size, and where the two sizes differ."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--windows", type=int, default=20, help="windows per case")
    parser.add_argument("--events", type=int, default=4000, help="events per window")
    parser.add_argument("--sizes", type=int, nargs="+", default=[2000, 500],
                        help="segment sample sizes judged, the first the baseline the others are compared with")
    args = parser.parse_args()
    rng = np.random.default_rng(48)
    training = [Event("m", T0 - (w + 1) * WINDOW_MS + i * WINDOW_MS // args.events, f)
                for w in range(20) for i, f in enumerate(window_features(rng, args.events, None))]
    windows = {label: [(T0 + w * WINDOW_MS, window_features(rng, args.events, change)) for w in range(args.windows)]
               for label, change in CASES}
    flat = [w for label, _ in CASES for w in windows[label]]
    verdicts = {size: judge_all(flat, training, size) for size in args.sizes}
    base = args.sizes[0]
    print(f"{args.windows} windows a case, {args.events:,} events a window (DE about {0.3 * args.events:,.0f}), "
          f"reference 20 windows; windows whose merchant cell drifted (drift-free: any segment; else DE), per "
          f"segment sample size, and the windows decided differently from {base:,}:")
    for i, (label, _) in enumerate(CASES):
        part = slice(i * args.windows, (i + 1) * args.windows)
        cells = []
        for size in args.sizes:
            hits = sum(("DE" in d) if i else bool(d) for d in verdicts[size][part])
            differ = sum(a != b for a, b in zip(verdicts[base][part], verdicts[size][part]))
            cells.append(f"{size:,}: {hits:>2} / {args.windows}" + (f" ({differ} differ)" if size != base else ""))
        print(f"  {label:<26} " + "   ".join(cells))

if __name__ == "__main__":
    main()
