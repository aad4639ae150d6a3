#!/usr/bin/env python
"""The sink's Python work on one segmented window, in process: decode, judge, store (CPU per window).

Builds bench_job's segmented reference (``--train-windows`` windows of its generator, 20 segments by
``country``) and the summaries of the first ``--windows`` windows of its topic (the bytes the live job's
Java aggregate emits: tests/test_segments_attribution.py), then times, each the fastest of ``--repeats``
passes in CPU seconds: ``WindowSummary.deserialize``; decode and ``analyze_summary`` (as
``jobs.udfs.AnalyzeWindow`` judges, the references frozen out of the collector's scans as it freezes them;
``--no-freeze``: not), and the same with the segments' references stripped of their groups
(the segments' groups not judged: the cost of judging them, in the same run); ``store_window`` of the
reports into a fresh SQLite store. The baseline, in the same run: the same events' unsegmented summaries (the
bytes the job emits for the model without ``segments``), decoded, judged against the same reference's global
view and stored the same way; the segments' extra is printed per window, per event and per extra result row.

A ratio, not a figure: run it from two checkouts in turns (the same sizes) and compare, e.g.
``for c in /path/to/other .; do (cd $c && .venv/bin/python $OLDPWD/bench/bench_segment_judging.py); done``. With ``--digest``
it also prints a digest of the reports' repr (every verdict, p-value and score): equal digests from two
checkouts mean the same decisions.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_job  # noqa: E402  (the bench's generator, config and reference)

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

    from driftwarden.pipeline.reference_set import ReferenceSet
    from driftwarden.schemas.config import MonitorConfig
    from driftwarden.sketches.policy import DriftPolicy


def fastest_ms(step: Callable[[], object], windows: int, repeats: int) -> float:
    """The fastest of ``repeats`` runs of ``step``, in ms of process CPU per window."""
    best = float("inf")
    for _ in range(repeats):
        started = time.process_time()
        step()
        best = min(best, time.process_time() - started)
    return 1000 * best / windows


def main() -> None:
    """Print decode, decode + judge and store CPU per segmented window (and the reports' digest)."""
    args = parse_args()
    bench_job.WINDOW_SECONDS = args.window_seconds
    with tempfile.TemporaryDirectory(prefix="dw-segjudge-") as folder:  # the reference and the store, removed after
        bench(args, Path(folder))


def parse_args() -> argparse.Namespace:
    """The command line's options."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--window-seconds", type=int, default=60, help="1,000 events a second of event time")
    parser.add_argument("--segments", type=int, default=20, help="top segments (of 2N values of the segment feature)")
    parser.add_argument("--train-windows", type=int, default=3, help="windows of the reference's training snapshot")
    parser.add_argument("--windows", type=int, default=3, help="windows judged")
    parser.add_argument("--repeats", type=int, default=5, help="passes timed; the fastest counts")
    parser.add_argument("--digest", action="store_true", help="print a digest of the reports")
    parser.add_argument("--no-freeze", action="store_true",
                        help="leave the loaded references and summaries in the collector's scans (the live sink "
                             "freezes its references: core.gc_pause.freeze_loaded)")
    return parser.parse_args()


def bench(args: argparse.Namespace, folder: Path) -> None:
    """Build the reference and summaries in ``folder``, time the sink's parts on them and print the figures."""
    from driftwarden.core.gc_pause import freeze_loaded
    from driftwarden.pipeline.judging import analyze_summary, drift_policy, segment_references
    from driftwarden.pipeline.reference_set import ReferenceSet
    from driftwarden.pipeline.summary import WindowSummary
    from driftwarden.sketches import Reference

    reference = folder / "segments.dwref"
    bench_job.build_segment_reference(reference, args.segments, args.train_windows)
    config = bench_job.config_for("bench", args.segments, True, str(reference))
    blobs = window_summaries(args, config, reference)
    references = ReferenceSet.load(reference)
    if not args.no_freeze:
        freeze_loaded()  # as the live sink does after loading its references (jobs.udfs.AnalyzeWindow.open)
    model, policy = config.model("bench"), drift_policy(config.thresholds, config.window.size_ms)

    def judge(data: bytes, segment_groups: bool = True):
        summary = WindowSummary.deserialize(data)
        segments, min_count = segment_references(summary, references.segment_reference, model)
        if not segment_groups:  # the segments' references without their groups: groups judged globally only
            segments = {key: Reference(ref.features) for key, ref in segments.items()}
        return summary, analyze_summary(summary, references.models["bench"], policy, None, segments, min_count)

    judged, both, stored = judged_and_timed(judge, blobs, folder / "store.db", args.repeats)
    decode = fastest_ms(lambda: [WindowSummary.deserialize(data) for data in blobs], len(blobs), args.repeats)
    without = fastest_ms(lambda: [judge(data, False) for data in blobs], len(blobs), args.repeats)
    rows = len(judged[0][1].features)
    checkout = Path(analyze_summary.__code__.co_filename).resolve().parents[1]  # whose driftwarden was timed
    print(f"{checkout}: {args.window_seconds} s windows of "
          f"{1000 * args.window_seconds:,} events, {len(judged[0][0].segments)} segments, {rows} result rows a window: "
          f"decode {decode:.1f} ms, decode + judge {both:.1f} ms (segments' groups left out: {without:.1f} ms), "
          f"store {stored:.1f} ms CPU per window")
    baseline(args, reference, references, policy, folder, (both + stored, rows))
    if args.digest:
        print("reports digest", hashlib.sha256("\n".join(repr(r) for _, r in judged).encode()).hexdigest()[:16])


def window_summaries(args: argparse.Namespace, config: MonitorConfig, reference: Path) -> list[bytes]:
    """The summaries of the bench topic's first ``--windows`` windows under ``config``, as the job emits them."""
    return bench_job.bench_summaries(config, reference, args.windows * 1000 * args.window_seconds, args.segments,
                                     args.windows)


def judged_and_timed(judge: Callable[[bytes], tuple], blobs: list[bytes], store_path: Path,
                     repeats: int) -> tuple[list, float, float]:
    """Each window's (summary, report) by ``judge``, then the fastest decode + judge and store (into a fresh SQLite
    store at ``store_path``) of them all, in ms of CPU per window."""
    from driftwarden.core.store import make_engine

    judged = [judge(data) for data in blobs]
    both = fastest_ms(lambda: [judge(data) for data in blobs], len(blobs), repeats)
    engine = make_engine(f"sqlite:///{store_path}", create=True)
    return judged, both, fastest_ms(lambda: store(engine, judged), len(blobs), repeats)


def store(engine: Engine, judged: list) -> None:
    """``store_window`` of each (summary, report) of ``judged``, a transaction each, as the live sink stores."""
    from driftwarden.pipeline.results import store_window

    for summary, report in judged:
        with engine.begin() as conn:
            store_window(conn, report, summary.events, 0, None)


def baseline(args: argparse.Namespace, reference: Path, references: ReferenceSet, policy: DriftPolicy, folder: Path,
             segmented: tuple[float, int]) -> None:
    """Time the same events unsegmented (decode + judge against the reference's global view, then store, as the
    job judges a model without ``segments``) and print the segments' extra beside it; ``segmented``: the
    segmented window's decode + judge + store CPU (ms) and its result rows."""
    from driftwarden.pipeline.judging import analyze_summary
    from driftwarden.pipeline.summary import WindowSummary

    blobs = window_summaries(args, bench_job.config_for("bench", args.segments, False, str(reference)), reference)
    model_reference = references.models["bench"]

    def judge(data: bytes):
        summary = WindowSummary.deserialize(data)
        return summary, analyze_summary(summary, model_reference, policy)

    if WindowSummary.deserialize(blobs[0]).segments:
        raise SystemExit("the baseline's summaries must be unsegmented: bench_job.config_for gave a segmented model")
    judged, both, stored = judged_and_timed(judge, blobs, folder / "baseline.db", args.repeats)
    rows = len(judged[0][1].features)
    extra_ms, extra_rows = segmented[0] - (both + stored), segmented[1] - rows
    events = 1000 * args.window_seconds
    per_row = f"{1000 * extra_ms / extra_rows:.0f} us per extra result row ({extra_rows})" if extra_rows > 0 \
        else "no extra result rows"
    print(f"baseline, the same events unsegmented: {rows} result rows a window, decode + judge {both:.1f} ms, "
          f"store {stored:.1f} ms CPU per window; the segments' extra {extra_ms:.1f} ms a window = "
          f"{1000 * extra_ms / events:.2f} us an event at {events:,} events a window, {per_row}")


if __name__ == "__main__":
    main()
