"""`driftwarden reference build` at training-set scale: peak RSS and events/s against the input's size.

Writes a snapshot once (JSONL, 10 numeric + 3 categorical features, 6,000 events per 60 s window;
cached under .run/bench/) and runs the command on it as a user would, in a child process, measuring
its wall time, CPU time and peak RSS (``ru_maxrss`` of that child, from ``wait4``). ``--baseline PYTHON`` runs the
same command with another checkout's interpreter in the same run (e.g. main's, to compare with the
whole-window build) and prints the ratios. Target: peak RSS <= 1 GiB whatever the input size.

    .venv/bin/python bench/bench_reference_build.py [--events 2000000] [--baseline /work/main/.venv/bin/python]
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


def snapshot(events: int) -> Path:
    """The cached snapshot of ``events`` events (written once)."""
    from driftwarden.replay.synthetic import incident_events

    path = CACHE / f"reference_{events}.jsonl"
    if not path.exists():
        CACHE.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(".partial")
        with open(partial, "wb") as out:
            for event in incident_events(events, START_MS, STEP_MS, numeric=10, categorical=3, model="m"):
                out.write(orjson.dumps(event) + b"\n")
        partial.rename(path)
    return path


def run(python: str, path: Path, out: Path) -> dict:
    """One `reference build` in a child process: wall s, CPU s and peak RSS (MiB) of that child alone (wait4)."""
    log = out.with_suffix(".log")
    started = time.perf_counter()
    with open(log, "wb") as sink:
        child = subprocess.Popen([python, "-m", "driftwarden.cli", "reference", "build", "-i", str(path),
                                  "-o", str(out)], stdout=sink, stderr=subprocess.STDOUT,
                                 env={**os.environ, "COLUMNS": "120"})
        _pid, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - started
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode:
        sys.exit(f"{python}: reference build failed (exit {child.returncode}); see {log}")
    return {"wall": wall, "cpu": usage.ru_utime + usage.ru_stime, "rss_mib": usage.ru_maxrss / 1024}


def main() -> None:
    """Build the reference of a snapshot of --events events; print wall, CPU, events/s and peak RSS."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=2_000_000, help="events in the snapshot (default 2,000,000)")
    parser.add_argument("--baseline", help="another checkout's Python to run first in the same run (e.g. main's)")
    args = parser.parse_args()
    path = snapshot(args.events)
    print(f"snapshot {path} ({path.stat().st_size / 2**20:.0f} MiB, {args.events:,} events); load {os.getloadavg()}")
    rows = []
    if args.baseline:
        rows.append(("baseline", run(args.baseline, path, CACHE / "reference_baseline.dwref")))
    rows.append(("this checkout", run(str(REPO / ".venv" / "bin" / "python"), path, CACHE / "reference.dwref")))
    for name, r in rows:
        print(f"{name:14s} wall {r['wall']:7.1f} s  cpu {r['cpu']:7.1f} s  {args.events / r['wall']:9,.0f} events/s  "
              f"peak RSS {r['rss_mib']:7.0f} MiB")
    if args.baseline:
        same = (CACHE / "reference_baseline.dwref").read_bytes() == (CACHE / "reference.dwref").read_bytes()
        print(f"ratios this/baseline: wall {rows[1][1]['wall'] / rows[0][1]['wall']:.2f}  "
              f"cpu {rows[1][1]['cpu'] / rows[0][1]['cpu']:.2f}; same reference bytes: {same}")


if __name__ == "__main__":
    main()
