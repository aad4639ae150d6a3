"""`driftwarden reference build` at training-set scale: peak RSS and events/s against the input's size, beside replay.

Writes a snapshot once (JSONL, 10 numeric + 3 categorical features, 6,000 events per 60 s window;
cached under .run/bench/) and runs each command on it as a user would, in a child process, measuring
its wall time, CPU time and peak RSS (``ru_maxrss`` of that child, from ``wait4``):

- ``inferred``: ``reference build`` without a config (kinds inferred: the file is parsed twice);
- ``config``: ``reference build -c`` with the config those kinds make (the file is parsed once);
- ``replay``: ``replay --input`` of the same file against that reference, in one process (``--workers 0``):
  the speed the build is held to, measured in the same run.

``--baseline PYTHON`` also runs ``config`` first with another checkout's interpreter (e.g. main's: its code) and
checks the reference bytes are the same; ``--baseline-run inferred`` runs ``inferred`` with it instead. Events/s
are per CPU second (the machine is shared: wall time is printed, not compared). Targets: peak RSS <= 1 GiB
whatever the input size; a build at least replay's events/s.

    .venv/bin/python bench/bench_reference_build.py [--events 2000000] [--runs inferred,config,replay]
        [--baseline /work/main/.venv/bin/python] [--snapshot-dir /tmp] [--delete]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

import orjson

REPO = Path(__file__).resolve().parent.parent
CACHE = REPO / ".run" / "bench"
START_MS = 1_767_225_600_000
STEP_MS = 10.0  # 6,000 events per 60 s window
FEATURES = {**{f"x{i}": "numeric" for i in range(10)}, **{f"c{i}": "categorical" for i in range(3)}}
CONFIG = "window:\n  size: 60s\nmodels:\n  - name: m\n    features:\n" + "".join(
    f"      {name}: {kind}\n" for name, kind in FEATURES.items())
RUNS = ("inferred", "config", "replay")


def snapshot(events: int, folder: Path = CACHE, step_ms: float = STEP_MS) -> Path:
    """The cached snapshot of ``events`` events ``step_ms`` apart in ``folder`` (written once)."""
    from driftwarden.replay.synthetic import incident_events

    path = folder / (f"reference_{events}.jsonl" if step_ms == STEP_MS else f"reference_{events}_{step_ms:g}ms.jsonl")
    if not path.exists():
        folder.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(".partial")
        with open(partial, "wb") as out:
            for event in incident_events(events, START_MS, step_ms, numeric=10, categorical=3, model="m"):
                out.write(orjson.dumps(event) + b"\n")
        partial.rename(path)
    return path


def run(name: str, argv: list[str], log: Path) -> dict:
    """One command in a child process: wall s, CPU s and peak RSS (MiB) of that child alone (wait4)."""
    started = time.perf_counter()
    with open(log, "wb") as sink:
        child = subprocess.Popen(argv, stdout=sink, stderr=subprocess.STDOUT, env={**os.environ, "COLUMNS": "120"})
        _pid, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - started
    if os.waitstatus_to_exitcode(status):
        sys.exit(f"{name}: {argv[0]} failed (exit {os.waitstatus_to_exitcode(status)}); see {log}")
    return {"wall": wall, "cpu": usage.ru_utime + usage.ru_stime, "rss_mib": usage.ru_maxrss / 1024}


def commands(python: str, path: Path, events: int, baseline: str | None, runs: list[str],
             baseline_run: str = "config") -> list[tuple[str, list[str], Path]]:
    """(name, argv, output) of each run, in order (outputs and logs under .run/bench, named for the size)."""
    config = CACHE / "reference_bench.yaml"
    CACHE.mkdir(parents=True, exist_ok=True)
    config.write_text(CONFIG)
    cli = ["-m", "driftwarden.cli"]
    build = ["reference", "build", "-i", str(path), "-o"]
    out = {name: CACHE / f"{path.stem}_{name}.dwref" for name in ("baseline", *RUNS)}
    every = {"inferred": [python, *cli, *build, str(out["inferred"])],
             "config": [python, *cli, *build, str(out["config"]), "-c", str(config)],
             "replay": [python, *cli, "replay", "--input", str(path), "--reference", str(out["config"]),
                        "--config", str(config), "--workers", "0", "--no-progress",
                        "--report-json", str(out["replay"].with_suffix(".json"))]}
    chosen = []
    if baseline:
        argv = [baseline, *every[baseline_run][1:-1], str(out["baseline"])] if baseline_run == "inferred" else \
            [baseline, *every["config"][1:-3], str(out["baseline"]), "-c", str(config)]
        chosen = [("baseline", argv, out["baseline"])]
    return chosen + [(name, every[name], out[name]) for name in runs]


def main() -> None:
    """Build the reference of a snapshot of --events events; print wall, CPU, events/s and peak RSS of each run."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=2_000_000, help="events in the snapshot (default 2,000,000)")
    parser.add_argument("--runs", default=",".join(RUNS),
                        help=f"comma-separated runs among {', '.join(RUNS)} (default: all; replay needs config's)")
    parser.add_argument("--baseline", help="another checkout's Python (e.g. main's) to run --baseline-run first")
    parser.add_argument("--baseline-run", choices=("config", "inferred"), default="config",
                        help="the build the baseline runs (default: config)")
    parser.add_argument("--step-ms", type=float, default=STEP_MS,
                        help=f"event time between events (default {STEP_MS:g}: 6,000 events a 60 s window; 100: 600 "
                             "events, so 2 M events span as many windows as 20 M at the default)")
    parser.add_argument("--snapshot-dir", type=Path, default=CACHE,
                        help="where the snapshot is written and kept (default: .run/bench; 20 M events take 3.9 GB)")
    parser.add_argument("--delete", action="store_true", help="delete the snapshot afterwards (default: keep it)")
    args = parser.parse_args()
    runs = [r for r in args.runs.split(",") if r]
    if unknown := set(runs) - set(RUNS):
        parser.error(f"--runs: unknown {sorted(unknown)}; choose among {', '.join(RUNS)}")
    path = snapshot(args.events, args.snapshot_dir, args.step_ms)
    print(f"snapshot {path} ({path.stat().st_size / 2**20:,.0f} MiB, {args.events:,} events, "
          f"{args.events * args.step_ms / 60_000:,.0f} windows of 60 s); "
          f"load {os.getloadavg()[0]:.1f}")
    results = {}
    for name, argv, out in commands(str(REPO / ".venv" / "bin" / "python"), path, args.events, args.baseline, runs,
                                       args.baseline_run):
        results[name] = r = run(name, argv, out.with_suffix(".log"))
        print(f"{name:9s} wall {r['wall']:7.1f} s  cpu {r['cpu']:7.1f} s  {args.events / r['cpu']:9,.0f} events/cpu-s  "
              f"{r['cpu'] / args.events * 1e6:5.1f} us/event  peak RSS {r['rss_mib']:6,.0f} MiB", flush=True)
    if "replay" in results:
        for name in ("inferred", "config", "baseline"):
            if name in results:
                print(f"{name} / replay events per CPU second: {results['replay']['cpu'] / results[name]['cpu']:.2f}")
    outputs = [out for name, _argv, out in commands("", path, args.events, args.baseline, runs, args.baseline_run)
               if name != "replay"]
    if len(outputs) > 1:
        same = len({out.read_bytes() for out in outputs}) == 1
        print(f"same reference bytes ({', '.join(o.stem.split('_')[-1] for o in outputs)}): {same}")
    if "baseline" in results and args.baseline_run in results:
        print(f"{args.baseline_run} / baseline CPU: "
              f"{results[args.baseline_run]['cpu'] / results['baseline']['cpu']:.2f}")
    if args.delete:
        path.unlink()


if __name__ == "__main__":
    main()
