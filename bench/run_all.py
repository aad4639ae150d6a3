"""Run every benchmark of bench/ once, with short defaults, and print what each took (``make bench``).

    .venv/bin/python bench/run_all.py [--only sketches,replay] [--full]

Each benchmark runs in its own process and prints its figures beside the baseline it measures
in the same run. The short defaults are the smallest sizes that still give each benchmark's
figures (measured 2026-12-01 on the 2-core machine while four other people ran tests: sketches,
alerting, replay and job together about 25 minutes, most of it the job's start-ups; latency about
4 minutes). ``--full`` runs each with its own defaults (the sizes quoted in the README). The job and replay benchmarks read a real Kafka topic (``make bench`` starts the services).
Exit code: 0 when every benchmark ran, 1 when one failed (its name and exit code are printed).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent

#: name -> (script and arguments, the short arguments added unless --full)
BENCHES: dict[str, tuple[list[str], list[str]]] = {
    "sketches": (["bench_sketches.py"], []),
    "detection": (["bench_detection.py"], []),
    "alerting": (["bench_alerting.py"], ["--windows", "200", "--groups", "50", "--scrape-rows", "10000"]),
    "replay": (["bench_replay.py"], ["--events", "100000"]),
    "job": (["bench_job.py"], ["--events", "100000"]),
    "ceiling": (["fused_ceiling.py"], ["--events", "100000", "--rounds", "1"]),
    "reference": (["bench_reference_build.py"], ["--events", "200000"]),
    "scrape": (["scrape_cost.py"], ["--scrapes", "30"]),
    "latency": (["bench_latency.py", "cpu"], ["--min-duration", "0.2"]),
}


def command(name: str, full: bool) -> list[str]:
    """The command line that runs benchmark ``name``.

    >>> command("replay", full=False)[-2:], command("replay", full=True)[-1].endswith("bench_replay.py")
    (['--events', '100000'], True)
    """
    script, short = BENCHES[name]
    return [sys.executable, str(BENCH / script[0]), *script[1:], *([] if full else short)]


def main(argv: list[str] | None = None) -> int:
    """Run the chosen benchmarks one after the other; 1 if any failed."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default=",".join(BENCHES), help="comma-separated subset of: %(default)s")
    parser.add_argument("--full", action="store_true", help="each benchmark's own (long) defaults")
    args = parser.parse_args(argv)
    names = [n.strip() for n in args.only.split(",") if n.strip()]
    unknown = [n for n in names if n not in BENCHES]
    if unknown:
        parser.error(f"unknown benchmark(s) {', '.join(unknown)}; choose from {', '.join(BENCHES)}")
    results = [(name, *_run(name, args.full)) for name in names]
    print("\nbenchmark  exit  seconds")
    for name, code, seconds in results:
        print(f"{name:<10} {code:>4}  {seconds:7.1f}")
    failed = [name for name, code, _ in results if code != 0]
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


def _run(name: str, full: bool) -> tuple[int, float]:
    cmd = command(name, full)
    print(f"\n== {name}: {' '.join(cmd[1:])}", flush=True)
    started = time.monotonic()
    code = subprocess.run(cmd, cwd=BENCH.parent).returncode
    return code, time.monotonic() - started


if __name__ == "__main__":
    sys.exit(main())
