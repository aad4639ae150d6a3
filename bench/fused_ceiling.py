"""How fast is the drift job's source task alone? Its ceiling next to the whole job and plain Flink SQL.

    bench/fused_ceiling.py [--events 1000000] [--rounds 3] [--window-seconds 10]

The drift job (jobs/drift_job.py) does its per-event work in one Java operator chained to the Kafka
source (``SourceSummaries``: envelope, lateness mark, features, the window's partial summary). This
bench runs that source task alone (bench/java/.../FusedCeiling.java builds it from the job's own
classes and settings; its partials collected, nothing after them), ``parse`` (the same source,
reading each record's envelope and features and stopping there: the floor), the drift job itself
and plain Flink SQL's TUMBLE COUNT + AVG as bench_job.py runs them, each pipeline's first run in a
JVM of its own, the pipelines in turns, over bench_job.py's topic. It also prints the ceiling with
the job's Python work per window (decode, judge, store) added.

Before timing, the source task's window summaries over a small one-partition topic are checked equal,
byte for byte, to Python's (``pipeline.summary.WindowRows``) for the same records: the job's operator and
replay summarize alike.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import bench_job  # noqa: E402 - the bench's topic, generator and ratio helpers
from bench_job import each_round, fill_topic, round_ratios  # noqa: E402

JAVA_SOURCE = Path(__file__).resolve().parent / "java" / "dev" / "driftwarden" / "flink" / "FusedCeiling.java"
MAIN_CLASS = "dev.driftwarden.flink.FusedCeiling"
#: The pipelines, in the order each round runs them: FusedCeiling's two, then the drift job and plain Flink
#: SQL as bench_job.py runs them (its first runs, each in a process of its own): the job beside its ceiling.
PIPELINES = ("fused", "parse", "driftwarden", "plain")
#: The line of FusedCeiling's output that carries its figures (JSON after it).
FIGURES_MARK = "figures: "


def classpath(classes: Path) -> str:
    """The compiled bench class, Flink's own jars (PyFlink's lib), the Kafka connector and the job's UDF jar."""
    import pyflink

    from driftwarden.jobs.flink_env import job_jars

    jars = [url.removeprefix("file://") for url in job_jars()]
    return ":".join([str(classes), str(Path(pyflink.__file__).parent / "lib" / "*"), *jars])


def jdk_tool(name: str) -> str:
    """``name`` (java, javac) of the JDK PyFlink runs on: ``$JAVA_HOME/bin``, else the PATH's."""
    home = os.environ.get("JAVA_HOME")
    found = str(Path(home) / "bin" / name) if home and (Path(home) / "bin" / name).is_file() else shutil.which(name)
    if found is None:
        raise SystemExit(f"{name} not found (JAVA_HOME unset and none on the PATH): "
                         "the bench needs the JDK the job runs on")
    return found


def compile_ceiling(folder: Path) -> Path:
    """Compile FusedCeiling.java against the job's jars into ``folder``; return ``folder``."""
    done = subprocess.run([jdk_tool("javac"), "-nowarn", "-d", str(folder), "-cp", classpath(folder), str(JAVA_SOURCE)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"compiling {JAVA_SOURCE.name} failed:\n{done.stderr[-4000:]}")
    return folder


def write_settings(topic: str, folder: Path) -> Path:
    """The job's source settings (jobs/drift_job.py ``source_settings``, bounded) for bench_job.py's config over
    ``topic``, written to ``folder/<topic>.json``."""
    from driftwarden.jobs.drift_job import source_settings
    from driftwarden.jobs.feature_spec import FeatureColumnSpec

    config = bench_job.config_for(topic)
    path = folder / f"{topic}.json"
    path.write_text(source_settings(config, FeatureColumnSpec.from_config(config), True, {}))
    return path


def run_pipeline(pipeline: str, classes: Path, full: Path, empty: Path, dump: Path | None = None,
                 jvm_args: list[str] | None = None) -> dict:
    """One pipeline's first run over the ``full`` settings' topic in a JVM of its own (the JVM started on ``empty``'s,
    the start-up timed on it again): wall and CPU seconds of the JVM, and the events summarized (or read);
    ``jvm_args``: more options of that JVM (a flight recording, say). The JVM's temporary folder is one of its own,
    removed after: its MiniCluster unpacks Flink's RPC jar (21 MiB) there and leaves it."""
    from driftwarden.jobs.flink_env import EMBEDDED_GC, EMBEDDED_HEAP

    with tempfile.TemporaryDirectory(prefix="fused-ceiling-") as scratch:
        command = [jdk_tool("java"), EMBEDDED_HEAP, EMBEDDED_GC, f"-Djava.io.tmpdir={scratch}", *(jvm_args or []),
                   "-cp", classpath(classes), MAIN_CLASS, pipeline, str(full), str(empty)] + ([str(dump)] if dump else [])
        done = subprocess.run(command, capture_output=True, text=True)
    marked = [line for line in done.stdout.splitlines() if line.startswith(FIGURES_MARK)]
    if done.returncode != 0 or not marked:
        sys.stderr.write(done.stderr[-4000:] + done.stdout[-2000:])
        raise SystemExit(f"the {pipeline} pipeline failed (exit {done.returncode}): its output is above")
    return json.loads(marked[-1][len(FIGURES_MARK):])


def check_summaries(classes: Path, folder: Path) -> int:
    """Run the job's source task over a small one-partition topic (3.5 windows of bench_job.py's windows) and
    compare each window's summary with Python's for the same records (coordinates: topic, partition 0,
    offset); returns the windows compared. Raises SystemExit naming the first window that differs."""
    topic, empty = (f"fused-check-{kind}-{uuid.uuid4().hex[:6]}" for kind in ("full", "empty"))
    config = bench_job.config_for(topic)
    per_window = config.window.size_ms
    events = 3 * per_window + per_window // 2
    fill_topic(topic, events, 1000, partitions=1)  # one event per millisecond; offset i holds event i
    fill_topic(empty, 1, 1000, partitions=1)
    maps = list(bench_job.bench_features(events))
    dump = folder / "summaries.hex"
    run_pipeline("fused", classes, write_settings(topic, folder), write_settings(empty, folder), dump)
    java = [bytes.fromhex(line) for line in dump.read_text().split()]
    python = python_summaries(topic, maps, config, per_window)
    if len(java) != len(python):
        raise SystemExit(f"the source task summarized {len(java)} windows, Python {len(python)}")
    for window, (ours, theirs) in enumerate(zip(java, python)):
        if ours != theirs:
            raise SystemExit(f"the source task's summary of window {window} differs from Python's "
                             f"({len(ours)} vs {len(theirs)} bytes): the job and replay would not agree")
    return len(java)


def python_summaries(topic: str, maps: list[dict], config, per_window: int) -> list[bytes]:
    """Python's summary bytes of each window of :func:`check_summaries`' one-partition topic (the last one too: the
    bounded job fires it at the end of its input). One event per millisecond: a window of ``per_window`` ms
    holds ``per_window`` events."""
    from driftwarden.pipeline.summary import WindowRows

    model = config.model("bench")
    out = []
    for start in range(0, len(maps), per_window):
        rows = WindowRows(model)
        for offset in range(start, min(start + per_window, len(maps))):
            rows.add(maps[offset], (topic, 0, offset))
        out.append(rows.summarize("bench", bench_job.T0 + start, per_window).serialize())
    return out


def analysis_per_window(folder: Path, events: int, train_windows: int = 12) -> tuple[float, float]:
    """Milliseconds per window of the job's Python work on one bench window, in process: decode and judge
    (bench_job.sink_judging, the fastest of three passes over three windows) and the store's upsert on SQLite
    (pipeline.results.store_window, the same). The reference: ``train_windows`` windows of the same generator."""
    from driftwarden.core.store import make_engine
    from driftwarden.pipeline.judging import analyze_summary, drift_policy
    from driftwarden.pipeline.summary import WindowSummary
    from driftwarden.pipeline.reference_set import ReferenceSet
    from driftwarden.pipeline.results import store_window

    reference = folder / "bench.dwref"
    bench_job.build_segment_reference(reference, 0, train_windows)
    config = bench_job.config_for("analysis")
    summaries = bench_job.bench_summaries(config, reference, events, 0)
    judging, _ = bench_job.sink_judging(config, reference, summaries)
    policy = drift_policy(config.thresholds, config.window.size_ms)
    model_reference = ReferenceSet.load(reference).models["bench"]
    reports = [(summary, analyze_summary(summary, model_reference, policy))
               for summary in map(WindowSummary.deserialize, summaries)]
    engine, fastest = make_engine(f"sqlite:///{folder / 'store.db'}"), float("inf")
    for _ in range(3):
        started = time.perf_counter()
        for summary, report in reports:
            with engine.begin() as conn:
                store_window(conn, report, summary.events, summary.unknown_features, None)
        fastest = min(fastest, time.perf_counter() - started)
    engine.dispose()
    return judging, 1000 * fastest / len(reports)


def print_rounds(events: int, runs: dict[str, list[dict]], per_window_events: int, analysis_ms: float) -> None:
    """Each pipeline's median rate and CPU per event, each pipeline over plain (each round's too), and the
    fused one with the job's Python work per window (``analysis_ms`` for ``per_window_events``
    events) added to its wall and CPU time per event."""
    per_run = {name: [(r["wall"] - r["startup"], r["cpu"] - r["startup_cpu"]) for r in rs] for name, rs in runs.items()}
    for name in PIPELINES:
        rates, cpus, _, _ = round_ratios(events, per_run[name], per_run[name])
        print(f"{name:>11}: {np.median(rates[0]):>10,.0f} events/s, {np.median(cpus[0]):5.1f} us CPU per event "
              f"(median of {len(rates[0])} first runs, start-up subtracted)")
    for name in ("fused", "parse", "driftwarden"):
        _, _, walls, cpu_ratios = round_ratios(events, per_run[name], per_run["plain"])
        print(f"{name} / plain Flink SQL: {np.median(walls):.2f} (wall) / {np.median(cpu_ratios):.2f} (CPU)"
              + each_round(walls, cpu_ratios, "; each round (wall / CPU): "))
    extra = 1000 * analysis_ms / per_window_events  # us per event
    rates, cpus, _, _ = round_ratios(events, per_run["fused"], per_run["plain"])
    fused_us, plain_us = (1e6 / np.median(r) for r in rates)
    print(f"fused + the job's Python work per window ({analysis_ms:.1f} ms a window of {per_window_events:,} events: "
          f"+{extra:.1f} us per event) / plain Flink SQL: {plain_us / (fused_us + extra):.2f} (wall) / "
          f"{np.median(cpus[1]) / (np.median(cpus[0]) + extra):.2f} (CPU)")


def main() -> None:
    """Fill the topics, check the source task's summaries, run the pipelines in rounds, print the ratios."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--events", type=int, default=1_000_000, help="events in the timed topic")
    parser.add_argument("--rounds", type=int, default=3, help="first runs of each pipeline, in turns")
    parser.add_argument("--window-seconds", type=int, default=10, help="window length (1,000 events per second)")
    args = parser.parse_args()
    bench_job.WINDOW_SECONDS = args.window_seconds
    with tempfile.TemporaryDirectory(prefix="fused-ceiling-") as tmp:
        folder = Path(tmp)
        classes = compile_ceiling(folder / "classes")
        windows = check_summaries(classes, folder)
        print(f"the job's source task: {windows} window summaries equal to Python's, byte for byte")
        analysis = analysis_per_window(folder, args.events)
        print(f"the job's Python work per window, in process: decode and judge {analysis[0]:.1f} ms, store "
              f"(SQLite) {analysis[1]:.1f} ms", flush=True)
        run = uuid.uuid4().hex[:6]
        full, empty = f"fused-full-{run}", f"fused-empty-{run}"
        fill_topic(empty, 1, 1000)
        print(f"filling {full} with {args.events:,} events ...", flush=True)
        fill_topic(full, args.events, 1000)
        settings = write_settings(full, folder), write_settings(empty, folder)
        runs: dict[str, list[dict]] = {name: [] for name in PIPELINES}
        for round_ in range(args.rounds):
            for name in PIPELINES:
                print(f"round {round_ + 1}: {name} ...", flush=True)
                if name in bench_job.PIPELINES:  # the drift job and plain Flink SQL: bench_job.py's own first runs
                    runs[name].append(bench_job.first_run_in_own_process(name, full, empty))
                    continue
                figures = run_pipeline(name, classes, *settings)
                if figures["events"] != args.events:
                    raise SystemExit(f"the {name} pipeline counted {figures['events']:,} events of {args.events:,}")
                runs[name].append(figures)
    print(f"{args.events:,} events, {args.window_seconds} s windows, parallelism 1; each pipeline's first run in "
          f"its own JVM ({bench_job.__name__}'s generator and plain Flink SQL)")
    print_rounds(args.events, runs, 1000 * args.window_seconds, sum(analysis))


if __name__ == "__main__":
    main()
