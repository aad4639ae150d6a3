"""Where the job's CPU beyond the floor goes: a JFR profile of the driftwarden job and of the floor over one topic.

    .venv/bin/python bench/profile_job.py [--events 300000] [--window-seconds 10] [--top 15] [--warm]

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

Prints CPU per event of both, job / floor, the job's CPU by process and thread, and both summaries. JFR samples
only threads running Java code: the Python workers' CPU (decoding and judging the summaries) is in the
process split, not in the JFR tables.
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


def profile_job(full: str, empty: str, folder: Path, recording: Path, warm: bool) -> dict:
    """The job's run over ``full`` recorded by JFR: CPU seconds (start-up subtracted) and CPU by thread; ``warm``:
    after a first run over ``full`` (the JIT compiler's work on the job's paths done: the steady state)."""
    bench_job.run_driftwarden(empty, folder / "warm.db")  # starts the JVM
    if warm:
        bench_job.run_driftwarden(full, folder / "first.db")
    startup, startup_cpu = bench_job.timed_by_thread(bench_job.run_driftwarden, empty, folder / "empty.db")
    pid = jvm_pid()
    jcmd(pid, "JFR.start", "name=job", f"settings={JFR_SETTINGS}")
    wall, cpu = bench_job.timed_by_thread(bench_job.run_driftwarden, full, folder / "full.db")
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


def print_summary(label: str, stacks: list[list[str]], top: int) -> None:
    """The shares of ``stacks`` by :func:`component`, by :func:`caller` and by top frame, the ``top`` largest."""
    total = max(len(stacks), 1)
    print(f"\n{label}: {len(stacks):,} samples")
    for title, counts in (("by what runs (the top frame's driftwarden class or component)",
                           Counter(component(s) for s in stacks)),
                          ("by whose work (the innermost driftwarden class on the stack)", Counter(caller(s) for s in stacks)),
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
        bench_job.fill_topic(empty, 1, 1000)
        print(f"filling {full} with {args.events:,} events ...", flush=True)
        bench_job.fill_topic(full, args.events, 1000)
    folder = REPO / ".run" / "bench" / f"profile-{run}"
    folder.mkdir(parents=True, exist_ok=True)
    os.environ["_python_worker_execution_mode"] = "process"  # as bench_job's comparisons
    job = profile_job(full, empty, folder, folder / "job.jfr", args.warm)
    with tempfile.TemporaryDirectory(prefix="bench-profile-") as tmp:
        floor = profile_floor(full, empty, Path(tmp), folder / "floor.jfr")
    per_event = {name: 1e6 * figures["cpu"] / args.events for name, figures in (("job", job), ("floor", floor))}
    print(f"{args.events:,} events, {args.window_seconds} s windows, parallelism 1, start-up subtracted, the job's "
          f"{'second (warm)' if args.warm else 'first'} run: job {per_event['job']:.1f} us CPU per event, floor "
          f"{per_event['floor']:.1f} us; job / floor {per_event['job'] / per_event['floor']:.2f} (target <= 1.5)")
    print("the job's CPU per event by process and thread (us):")
    for name, seconds in sorted(job["where"].items(), key=lambda item: -item[1]):
        if 1e6 * seconds / args.events >= 0.3:
            print(f"  {1e6 * seconds / args.events:6.1f}  {name}")
    summarise(folder, args.top)


def summarise(folder: Path, top: int) -> None:
    """Print the summaries of the job's and the floor's recordings in ``folder``."""
    started = time.perf_counter()
    print_summary("job (JFR, the full run only)", samples(folder / "job.jfr"), top)
    print_summary("floor (JFR, its whole JVM)", samples(folder / "floor.jfr"), top)
    print(f"\nrecordings: {folder} (summarised in {time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
