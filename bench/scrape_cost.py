"""CPU cost of one scrape of the embedded job's Flink Prometheus reporter, and what it costs at an interval.

    .venv/bin/python bench/scrape_cost.py [--scrapes 100] [--interval 15]

Starts the drift job (unbounded) on an idle topic of the bench's 25 features with Flink's Prometheus
reporter on, waits until every operator reports, then measures the CPU seconds of the process tree
(client, JVM) over an idle stretch and over ``--scrapes`` back-to-back scrapes of the same length
or longer: the difference per scrape, divided by the scrape interval, is the share of one core the
reporter costs. A steadier figure than throughput with the reporter on and off (bench_job.py
--compare-reporter) on a shared machine: the per-event path does not touch the reporter at all
(Flink keeps its metrics whether or not a reporter exports them; a scrape reads them).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

import httpx  # noqa: E402

import bench_job  # noqa: E402


def main() -> None:
    """Measure and print the CPU per scrape and the share of a core at the interval."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--scrapes", type=int, default=100, help="back-to-back scrapes measured")
    parser.add_argument("--interval", type=float, default=15.0, help="scrape interval to price (deploy/prometheus: 15 s)")
    args = parser.parse_args()
    from driftwarden.jobs.drift_job import run_drift_job
    from driftwarden.jobs.flink_metrics import free_port

    topic = f"bench-scrape-{uuid.uuid4().hex[:6]}"
    bench_job.fill_topic(topic, 1, 1000)
    port = free_port()
    bench_job.reporter(port)
    url = f"http://127.0.0.1:{port}/metrics"
    folder = REPO / ".run" / "bench"
    folder.mkdir(parents=True, exist_ok=True)
    job = run_drift_job(bench_job.config_for(topic), f"sqlite:///{folder / (topic + '.db')}", wait=False)
    try:
        series = _wait_for_operators(url)
        idle = _cpu_over(lambda: time.sleep(5.0))
        scraped = _cpu_over(lambda: [httpx.get(url, timeout=10).raise_for_status() for _ in range(args.scrapes)])
        per_scrape = (scraped[1] - idle[1] / idle[0] * scraped[0]) / args.scrapes
        print(f"{series} series per scrape; idle job {idle[1] / idle[0] * 100:.1f}% of a core; "
              f"{args.scrapes} scrapes took {scraped[0]:.1f} s: {per_scrape * 1000:.1f} ms CPU per scrape "
              f"(client + JVM, idle rate subtracted)")
        print(f"scraped every {args.interval:g} s: {100 * per_scrape / args.interval:.2f}% of one core "
              f"(every 1 s, the local test Prometheus: {100 * per_scrape:.1f}%)")
    finally:
        job.get_job_client().cancel().result()


def _wait_for_operators(url: str, timeout_s: float = 120.0) -> int:
    """Series in a scrape once the job's operators have registered (the count stops growing)."""
    deadline, last = time.monotonic() + timeout_s, -1
    while time.monotonic() < deadline:
        try:
            count = sum(1 for line in httpx.get(url, timeout=10).text.splitlines() if line and line[0] != "#")
        except httpx.HTTPError:
            count = -1
        if count > 0 and count == last:
            return count
        last = count
        time.sleep(3.0)
    raise SystemExit(f"the reporter at {url} did not settle within {timeout_s:.0f} s")


def _cpu_over(work) -> tuple[float, float]:
    """Wall seconds and process-tree CPU seconds of ``work()``."""
    return bench_job.timed(work)


if __name__ == "__main__":
    main()
