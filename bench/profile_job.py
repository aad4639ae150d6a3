"""Where the job's CPU beyond the floor goes: a JFR profile of the driftwarden job and of the floor over one topic.

    .venv/bin/python bench/profile_job.py [--events 300000] [--window-seconds 10] [--top 15] [--warm]
                                          [--segments 20 [--unsegmented]]

Fills a topic with ``--events`` bench events (bench_job.py's generator: 20 numeric and 5 categorical features,
1,000 events a second of event time, 2 partitions), then:

* the driftwarden job, in this process (its JVM is PyFlink's gateway): a run over an empty topic starts the JVM
  and a second one is its start-up; Java Flight Recorder is then started in that JVM (``jcmd JFR.start``, the
  ``profile`` settings: a Java stack sampled every 10 ms per running thread), the full topic run, and the
  recording stopped; the CPU of the run by process and thread (bench_job.py's ``TreeCpu``), start-up subtracted;
* the floor (bench_job.py's ``Floor``: the job's own Kafka source parsing every record, nothing after it), in a
  JVM of its own started with ``-XX:StartFlightRecording`` (its whole life recorded: the empty-topic start and
  the full run; the start is a Kafka client's, small beside the run);
* each recording summarised from ``jfr print --json --events jdk.ExecutionSample``: the share of samples by
  where the stack is (the innermost driftwarden class, else the innermost frame's package) and by top frame.

Prints CPU per event of both, job / floor, the job's CPU by process and thread, and both summaries, the job's also
by operation (:func:`operation`: the per-event path, the per-window path, Kafka). JFR samples only threads running
Java code: the Python workers' CPU (decoding and judging the summaries) is in the process split, not in the JFR
tables.

``--segments N``: the topic's events carry bench_job.py's segment feature (``country``, 2N values, Zipf) and the job
runs with segments by it (top N) against a reference built with them (bench_job.py's ``--segments`` job);
``--unsegmented`` the same topic and reference with the feature but no segments. Run both (each in a process of
its own: one JVM running both jobs would compile each with the other's profile) with ``--topics`` and
``--reference`` of the first run to profile the same events, and compare the two runs' tables.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench import bench_job, fused_ceiling  # noqa: E402

#: JFR's sampling settings: ``profile`` samples each running Java thread every 10 ms (``default``: 20 ms).
JFR_SETTINGS = "profile"


def jvm_pid() -> int:
    """The pid of this process's Flink JVM (PyFlink's gateway)."""
    jvms = [pid for pid in bench_job._process_tree() if bench_job._role(pid) == "JVM"]
    if len(jvms) != 1:
        raise SystemExit(f"expected one JVM under this process, found {jvms}")
    return jvms[0]


def jcmd(pid: int, *command: str) -> None:
    """Run ``jcmd pid command...`` (the JDK's), raising on failure."""
    done = subprocess.run([fused_ceiling.jdk_tool("jcmd"), str(pid), *command], capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"jcmd {' '.join(command)} failed: {done.stdout}{done.stderr}")


def profile_job(full: str, empty: str, folder: Path, recording: Path, warm: bool, configs=(None, None)) -> dict:
    """The job's run over ``full`` recorded by JFR: CPU seconds (start-up subtracted) and CPU by thread; ``warm``:
    after a first run over ``full`` (the JIT compiler's work on the job's paths done: the steady state);
    ``configs``: the job's config for ``empty`` and for ``full`` (bench_job.py's default when None)."""
    empty_config, full_config = configs
    bench_job.run_driftwarden(empty, folder / "warm.db", config=empty_config)  # starts the JVM
    if warm:
        bench_job.run_driftwarden(full, folder / "first.db", config=full_config)
    startup, startup_cpu = bench_job.timed_by_thread(bench_job.run_driftwarden, empty, folder / "empty.db", None,
                                                     empty_config)
    pid = jvm_pid()
    jcmd(pid, "JFR.start", "name=job", f"settings={JFR_SETTINGS}")
    wall, cpu = bench_job.timed_by_thread(bench_job.run_driftwarden, full, folder / "full.db", None, full_config)
    jcmd(pid, "JFR.stop", "name=job", f"filename={recording}")
    started = startup_cpu.by_where()
    where = {k: v - started.get(k, 0.0) for k, v in cpu.by_where().items()}
    return {"cpu": cpu.seconds - startup_cpu.seconds, "wall": wall - startup, "where": where}


def profile_floor(full: str, empty: str, folder: Path, recording: Path) -> dict:
    """The floor's first run over ``full`` in a JVM of its own, its whole life recorded by JFR."""
    classes = fused_ceiling.compile_ceiling(folder / "classes")
    settings = (fused_ceiling.write_settings(full, folder), fused_ceiling.write_settings(empty, folder))
    jfr = f"-XX:StartFlightRecording=settings={JFR_SETTINGS},filename={recording}"
    figures = fused_ceiling.run_pipeline("parse", classes, *settings, jvm_args=[jfr])
    return {"cpu": figures["cpu"] - figures["startup_cpu"], "wall": figures["wall"] - figures["startup"]}


def samples(recording: Path) -> list[list[str]]:
    """Each execution sample's stack, innermost frame first, as "package.Class.method" strings (a lambda's or hidden
    class's generated suffix cut)."""
    done = subprocess.run([fused_ceiling.jdk_tool("jfr"), "print", "--json", "--stack-depth", "64", "--events",
                           "jdk.ExecutionSample", str(recording)], capture_output=True, text=True, check=True)
    events = json.loads(done.stdout)["recording"]["events"]
    return [[frame_name(frame) for frame in (event["values"]["stackTrace"] or {}).get("frames", [])]
            for event in events]


def frame_name(frame: dict) -> str:
    """"package.Class.method" of a JFR JSON frame, ``$$Lambda$...`` and ``/0x...`` suffixes cut.

    >>> frame_name({"method": {"type": {"name": "dev/driftwarden/flink/A$$Lambda$87+0x1/99"}, "name": "run"}})
    'dev.driftwarden.flink.A$$Lambda.run'
    """
    cls = re.sub(r"\$\$Lambda.*", "$$Lambda", frame["method"]["type"]["name"]).replace("/", ".")
    return f"{cls}.{frame['method']['name']}"


#: Components by the top frame's class prefix, the first that matches (else the class's first two packages).
COMPONENTS = (("dev.driftwarden.", None), ("org.apache.flink.shaded.jackson2.", "Jackson (JSON parsing)"),
              ("com.fasterxml.jackson.", "Jackson (JSON parsing)"), ("org.apache.kafka.", "Kafka client"),
              ("org.apache.flink.connector.kafka.", "Flink's Kafka connector"), ("org.apache.flink.", "Flink runtime"))


def component(stack: list[str]) -> str:
    """What the sampled thread was running: the top frame's driftwarden class, else its component
    (:data:`COMPONENTS`), else its first two packages."""
    if not stack:
        return "(no Java frame)"
    top = stack[0]
    for prefix, name in COMPONENTS:
        if top.startswith(prefix):
            return name or "driftwarden " + top.removeprefix(prefix).rsplit(".", 1)[0]
    return ".".join(top.split(".")[:2])


def caller(stack: list[str]) -> str:
    """The innermost driftwarden class on the stack (whose work the sample is), else the top frame's component."""
    for frame in stack:
        if frame.startswith("dev.driftwarden."):
            return "driftwarden " + frame.removeprefix("dev.driftwarden.").rsplit(".", 1)[0]
    return component(stack)


#: The job's operations by a frame anywhere on the stack, the first that matches (:func:`operation`).
OPERATIONS = (("SourceSummaries.processWatermark", "per window: the source's partials written"),
              ("MergeSegments.", "per window: partials merged (and segments' frames written)"),
              ("MergeSummaries.", "per window: partials merged (and segments' frames written)"),
              ("SourceSummaries.summarize", "per event: the summaries updated"),
              ("SourceSummaries.processElement", "per event: event time and columns"),
              ("KafkaRecord$Deserializer.", "per event: record parsed (envelope, features)"),
              ("SummarySource.", "per event: record parsed (envelope, features)"),
              ("org.apache.kafka.", "Kafka client"), ("PlannerThread.", "the job's submission (planner)"),
              ("org.codehaus.janino.", "the job's submission (planner)"),
              ("org.apache.calcite.", "the job's submission (planner)"))


def operation(stack: list[str]) -> str:
    """The job's operation a sample is part of (:data:`OPERATIONS`), else "other".

    >>> operation(["dev.driftwarden.flink.LogLinearHistogram.toBytes", "dev.driftwarden.flink.SourceSummaries.processWatermark"])
    "per window: the source's partials written"
    >>> operation(["java.util.HashMap.get"])
    'other'
    """
    for marker, name in OPERATIONS:
        if any(marker in frame for frame in stack):
            return name
    return "other"


def print_summary(label: str, stacks: list[list[str]], top: int) -> None:
    """The shares of ``stacks`` by :func:`component`, by :func:`caller` and by top frame, the ``top`` largest."""
    total = max(len(stacks), 1)
    print(f"\n{label}: {len(stacks):,} samples")
    for title, counts in (("by what runs (the top frame's driftwarden class or component)",
                           Counter(component(s) for s in stacks)),
                          ("by whose work (the innermost driftwarden class on the stack)", Counter(caller(s) for s in stacks)),
                          ("by operation", Counter(operation(s) for s in stacks)),
                          ("by top frame", Counter(s[0] if s else "(none)" for s in stacks))):
        print(f"  {title}:")
        for name, count in counts.most_common(top):
            print(f"    {100 * count / total:5.1f}%  {name}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=300_000, help="events in the topic (default 300000)")
    parser.add_argument("--window-seconds", type=int, default=10, help="window length (default 10)")
    parser.add_argument("--top", type=int, default=15, help="rows of each summary (default 15)")
    parser.add_argument("--warm", action="store_true",
                        help="record the job's second run over the topic (its JIT compilation done), not its first")
    parser.add_argument("--topics", nargs=2, metavar=("FULL", "EMPTY"),
                        help="reuse the topics of an earlier run (its --events) instead of filling new ones")
    parser.add_argument("--segments", type=int, default=0, metavar="N",
                        help="events carry the segment feature; the job runs with segments by it, top N (default 0: none)")
    parser.add_argument("--unsegmented", action="store_true",
                        help="with --segments: the same topic and reference, the segment feature but no segments")
    parser.add_argument("--reference", type=Path, metavar="FILE",
                        help="with --segments: the segment reference of an earlier run (printed by it) instead of a new one")
    parser.add_argument("--summarise", type=Path, metavar="FOLDER",
                        help="only summarise the recordings (job.jfr, floor.jfr) of an earlier run's folder")
    args = parser.parse_args()
    if args.summarise:
        summarise(args.summarise, args.top)
        return
    bench_job.WINDOW_SECONDS = args.window_seconds
    run = uuid.uuid4().hex[:6]
    full, empty = args.topics or (f"bench-profile-full-{run}", f"bench-profile-empty-{run}")
    if not args.topics:
        bench_job.fill_topic(empty, 1, 1000, segments=args.segments)
        print(f"filling {full} with {args.events:,} events ...", flush=True)
        bench_job.fill_topic(full, args.events, 1000, segments=args.segments)
        print(f"topics: --topics {full} {empty}", flush=True)
    folder = REPO / ".run" / "bench" / f"profile-{run}"
    folder.mkdir(parents=True, exist_ok=True)
    os.environ["_python_worker_execution_mode"] = "process"  # as bench_job's comparisons
    job = profile_job(full, empty, folder, folder / "job.jfr", args.warm, segment_configs(args, full, empty, folder))
    with tempfile.TemporaryDirectory(prefix="bench-profile-") as tmp:
        floor = profile_floor(full, empty, Path(tmp), folder / "floor.jfr")
    per_event = {name: 1e6 * figures["cpu"] / args.events for name, figures in (("job", job), ("floor", floor))}
    shape = ("" if not args.segments else f", segment feature of {2 * args.segments} values, "
             + ("no segments" if args.unsegmented else f"segments by it (top {args.segments})"))
    print(f"{args.events:,} events{shape}, {args.window_seconds} s windows, parallelism 1, start-up subtracted, the job's "
          f"{'second (warm)' if args.warm else 'first'} run: job {per_event['job']:.1f} us CPU per event, floor "
          f"{per_event['floor']:.1f} us; job / floor {per_event['job'] / per_event['floor']:.2f} (target <= 1.5)")
    print("the job's CPU per event by process and thread (us):")
    for name, seconds in sorted(job["where"].items(), key=lambda item: -item[1]):
        if 1e6 * seconds / args.events >= 0.3:
            print(f"  {1e6 * seconds / args.events:6.1f}  {name}")
    summarise(folder, args.top)


def segment_configs(args: argparse.Namespace, full: str, empty: str, folder: Path) -> tuple:
    """The job's configs for ``empty`` and ``full`` with ``--segments`` (a reference built unless ``--reference``),
    else bench_job.py's defaults (None, None)."""
    if not args.segments:
        return None, None
    reference = args.reference
    if reference is None:
        reference = folder / "segments.dwref"
        bench_job.build_segment_reference(reference, args.segments, 3)
        print(f"reference: --reference {reference}", flush=True)
    segmented = not args.unsegmented
    return tuple(bench_job.config_for(topic, args.segments, segmented, str(reference)) for topic in (empty, full))


def summarise(folder: Path, top: int) -> None:
    """Print the summaries of the job's and the floor's recordings in ``folder``."""
    started = time.perf_counter()
    print_summary("job (JFR, the full run only)", samples(folder / "job.jfr"), top)
    print_summary("floor (JFR, its whole JVM)", samples(folder / "floor.jfr"), top)
    print(f"\nrecordings: {folder} (summarised in {time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
