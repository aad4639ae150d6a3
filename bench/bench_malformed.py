"""Malformed records through the streaming drift job: their own rate, and what 1% of them costs good events.

    .venv/bin/python bench/bench_malformed.py [--events 200000] [--malformed 5000]

Fills three real Kafka topics (one partition each): ``--events`` good events (bench_job's 20 numeric
+ 5 categorical features); the same good events with 1% malformed records interleaved (the seeded
hostile corpus of tests/hostile_corpus.py: NUL bytes, bad UTF-8, deep nesting, huge numbers, long
names, ...); and ``--malformed`` corpus records alone. Runs the job (bounded, embedded MiniCluster,
SQLite store as bench_job) on each, in one process. Rates are timed by the store, between the
first and the last row each run wrote (:func:`steady_rate`): subtracting a start-up measured on an
empty topic gave negative rates here, the start-up alone varying 20-55 s with the machine's load.
Prints malformed records/s, and good events/s with 0% and 1% malformed and their ratio (the
issue's bar: the 1% run keeps at least 0.90 of the 0% rate).
"""

from __future__ import annotations

import argparse
import sys
import time
import uuid
from pathlib import Path

import numpy as np
import orjson

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from bench.bench_job import BOOTSTRAP, CATEGORICAL, NUMERIC, T0, run_driftwarden  # noqa: E402
from tests.hostile_corpus import interleave, malformed  # noqa: E402

PER_SECOND = 1000  # good events per second of event time


def good_events(n: int) -> tuple[list[bytes], list[int]]:
    """``n`` good bench events as JSON, and their event times."""
    rng = np.random.default_rng(0)
    values = rng.normal(size=(n, len(NUMERIC))).round(5)
    cats = rng.integers(0, 8, size=(n, len(CATEGORICAL)))
    times = [int(T0 + i * 1000 / PER_SECOND) for i in range(n)]
    out = []
    for i in range(n):
        features = dict(zip(NUMERIC, values[i].tolist())) | {c: f"v{k}" for c, k in zip(CATEGORICAL, cats[i])}
        out.append(orjson.dumps({"event_time": times[i], "model": "bench", "features": features}))
    return out, times


def fill(topic: str, records: list[bytes]) -> None:
    """Create a one-partition topic holding ``records``."""
    admin = AdminClient({"bootstrap.servers": BOOTSTRAP})
    for future in admin.create_topics([NewTopic(topic, 1, 1)]).values():
        future.result(30)
    producer = Producer({"bootstrap.servers": BOOTSTRAP, "linger.ms": 50, "batch.size": 1_000_000,
                         "compression.type": "lz4", "queue.buffering.max.messages": 1_000_000})
    for i, record in enumerate(records):
        producer.produce(topic, record)
        if i % 20_000 == 0:
            producer.poll(0)
    producer.flush(60)


def steady_rate(store: Path, table: str) -> tuple[float, int]:
    """(rows per second, rows) between the first and the last row the job stored in ``table``.

    Timed by the store itself (``window_counts.computed_at`` weighted by ``events``, or
    ``dead_letters.seen_at``), so the job's start-up, which varied from 20 to 55 s on this shared
    machine, is not in the figure.
    """
    import sqlite3

    with sqlite3.connect(store) as conn:
        if table == "window_counts":
            rows = conn.execute("SELECT computed_at, events FROM window_counts WHERE model = 'bench' "
                                "ORDER BY computed_at").fetchall()
        else:
            rows = conn.execute("SELECT seen_at, 1 FROM dead_letters ORDER BY seen_at").fetchall()
    from datetime import datetime

    first, last = datetime.fromisoformat(rows[0][0]), datetime.fromisoformat(rows[-1][0])
    after_first = sum(n for _, n in rows[1:])  # what the job did between the first and the last write
    return after_first / max((last - first).total_seconds(), 1e-9), sum(n for _, n in rows)


def main() -> None:
    """Fill the topics, run the job on each, print the rates."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=200_000, help="good events (default: 200,000)")
    parser.add_argument("--malformed", type=int, default=5_000, help="records of the corpus-only topic")
    args = parser.parse_args()
    run = uuid.uuid4().hex[:6]
    folder = REPO / ".run" / "bench"
    folder.mkdir(parents=True, exist_ok=True)
    good, times = good_events(args.events)
    topics = {name: f"bench-malformed-{name}-{run}" for name in ("empty", "clean", "one_percent", "corpus")}
    fill(topics["clean"], good)
    fill(topics["one_percent"], interleave(good, malformed(args.events // 100, times, seed=11)))
    fill(topics["corpus"], [record for _, record in malformed(args.malformed, times, seed=12)])
    seconds = {name: run_driftwarden(topics[name], folder / f"{run}-{name}.db")
               for name in ("clean", "one_percent", "corpus")}
    clean, n_clean = steady_rate(folder / f"{run}-clean.db", "window_counts")
    one, n_one = steady_rate(folder / f"{run}-one_percent.db", "window_counts")
    bad, n_bad = steady_rate(folder / f"{run}-corpus.db", "dead_letters")
    print(f"one partition, SQLite store, 10 s windows; wall time per run (start-up included): "
          + ", ".join(f"{k} {v:.1f} s" for k, v in seconds.items()))
    print(f"malformed corpus only : {bad:>9,.0f} records/s ({n_bad:,} dead letters of {args.malformed:,} records)")
    print(f"good events, 0% bad   : {clean:>9,.0f} events/s ({n_clean:,} windowed)")
    print(f"good events, 1% bad   : {one:>9,.0f} events/s ({n_one:,} windowed, + {args.events // 100:,} malformed)")
    print(f"ratio 1% / 0%: {one / clean:.2f}")


if __name__ == "__main__":
    main()
