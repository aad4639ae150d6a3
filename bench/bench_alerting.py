"""Benchmark alerting's cost on the job's results transaction, delivery throughput and scrape latency.

    .venv/bin/python bench/bench_alerting.py [--store-url URL] [--windows 2000] [--scrape-rows 100000]

Baselines are measured in the same run: the results upsert alone (what the job pays without
alerting), and the scrape of an empty store.
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from datetime import datetime, timedelta, timezone

from prometheus_client import CollectorRegistry, generate_latest

from driftwarden.alerting.metrics import StoreCollector
from driftwarden.alerting.outbox import enqueue_alerts
from driftwarden.core.records import FeatureOutcome, WindowReport
from driftwarden.alerting.rules import AlertRules
from driftwarden.alerting.testing import WebhookReceiver
from driftwarden.alerting.worker import Dispatcher, build_sinks, make_client
from driftwarden.core.store import make_engine, upsert
from driftwarden.schemas.tables import window_results

FEATURES = [f"f{i}" for i in range(10)]
T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


def window_rows(model: str, start: datetime, rng: random.Random) -> tuple[list[dict], WindowReport]:
    """Ten features of one window: results rows and the matching report (drift in ~20% of windows)."""
    end, rows, feats = start + timedelta(minutes=1), [], []
    drifting = rng.random() < 0.2
    for name in FEATURES:
        sev = rng.choice(["minor", "major"]) if drifting and name in ("f0", "f1") else "none"
        rows.append({"model": model, "feature": name, "window_start": start, "window_end": end, "kind": "numeric",
                     "count": 1000, "missing": 0, "gate_psi": rng.random() / 10, "gate_alarm": sev != "none",
                     "drifted": sev != "none", "severity": sev, "computed_at": end})
        feats.append(FeatureOutcome(name, count=1000, drifted=sev != "none", severity=sev))
    return rows, WindowReport(model, start, end, feats)


def time_windows(engine, rules: AlertRules | None, windows: int, models: int) -> float:
    """Seconds to write ``windows`` results transactions, with or without enqueue_alerts."""
    rng = random.Random(3)
    t = time.perf_counter()
    for i in range(windows):
        model = f"m{i % models}-{'a' if rules else 'b'}"
        rows, report = window_rows(model, T0 + timedelta(minutes=i // models), rng)
        with engine.begin() as conn:
            upsert(conn, window_results, rows, keys=("model", "feature", "window_start"))
            if rules is not None:
                enqueue_alerts(conn, report, rules, report.window_end)
    return time.perf_counter() - t


def bench_enqueue(url: str, windows: int) -> None:
    """Print windows/s of the results transaction without and with enqueue_alerts (2 routes)."""
    engine = make_engine(url)
    rules = AlertRules(routes=[{"name": "a", "url": "http://127.0.0.1:9/", "allow_private": True},
                               {"name": "b", "url": "http://127.0.0.1:9/", "allow_private": True}])
    base = time_windows(engine, None, windows, 20)
    with_alerts = time_windows(engine, rules, windows, 20)
    print(f"results tx ({engine.dialect.name}): {windows / base:,.0f} windows/s without alerting, "
          f"{windows / with_alerts:,.0f} with enqueue_alerts; ratio {with_alerts / base:.2f}x time")
    engine.dispose()


def bench_delivery(url: str, groups: int) -> None:
    """Print signed POSTs/s of one worker to a local receiver, seal to mark-sent."""
    engine = make_engine(url)
    with WebhookReceiver() as receiver:
        rules = AlertRules(group_wait="0s", routes=[{"name": "bench", "url": receiver.url, "allow_private": True}])
        now = datetime.now(timezone.utc) - timedelta(seconds=1)
        for g in range(groups):
            report = WindowReport(f"deliver-{g}", now - timedelta(minutes=1), now,
                                  [FeatureOutcome("f0", drifted=True, severity="major")])
            with engine.begin() as conn:
                enqueue_alerts(conn, report, rules, now)
        with make_client() as client:
            dispatcher = Dispatcher(engine, rules, build_sinks(rules, client), per_route=4)
            t = time.perf_counter()
            while dispatcher.run_once():
                pass
            elapsed = time.perf_counter() - t
        assert len(receiver.received) == groups, len(receiver.received)
    print(f"delivery ({engine.dialect.name}): {groups} signed POSTs in {elapsed:.2f} s = {groups / elapsed:,.0f}/s "
          "(seal + claim + POST + mark sent, one worker)")
    engine.dispose()


def bench_scrape(url: str, rows: int) -> None:
    """Print the /metrics scrape time on an empty store and with ``rows`` window_results rows."""
    engine = make_engine(url)
    registry = CollectorRegistry()
    registry.register(StoreCollector(engine))
    empty = _best_of(3, lambda: generate_latest(registry))
    rng = random.Random(5)
    per_window = len(FEATURES)
    for chunk in range(0, rows, 5000):
        batch = []
        for i in range(chunk, min(chunk + 5000, rows), per_window):
            batch += window_rows(f"s{i % 7}", T0 + timedelta(minutes=i // per_window), rng)[0]
        with engine.begin() as conn:
            upsert(conn, window_results, batch, keys=("model", "feature", "window_start"))
    full = _best_of(3, lambda: generate_latest(registry))
    print(f"scrape ({engine.dialect.name}): {empty * 1000:.1f} ms on an empty store, {full * 1000:.1f} ms with "
          f"{rows:,} window_results rows ({full / empty:.1f}x)")
    engine.dispose()


def _best_of(n: int, fn) -> float:
    best = float("inf")
    for _ in range(n):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def main() -> None:
    """Run the three benchmarks on fresh SQLite stores, or on --store-url."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store-url", default=None, help="store URL, e.g. a fresh PostgreSQL schema "
                        "(default: a fresh SQLite file per benchmark)")
    parser.add_argument("--windows", type=int, default=1000)
    parser.add_argument("--groups", type=int, default=300)
    parser.add_argument("--scrape-rows", type=int, default=100_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        def url(name: str) -> str:
            return args.store_url or f"sqlite:///{tmp}/{name}.db"

        bench_enqueue(url("enqueue"), args.windows)
        bench_delivery(url("delivery"), args.groups)
        bench_scrape(url("scrape"), args.scrape_rows)


if __name__ == "__main__":
    main()
