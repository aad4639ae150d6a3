"""Replay throughput: 1,000,000 archived events (20 numeric + 5 categorical features).

Measures, in the same run, the time to merely read and parse the input (the floor: records read
and ``orjson.loads``-ed, nothing else, in one process) and the time of a full replay (validation,
windows, sketches, samples, gate, deep tests, report) in one process and with validating worker
processes (replay/workers.py), from a JSONL file and from a Kafka topic; prints events/s (wall),
the CPU seconds of all processes, and the ratio replay / floor, and checks that both replays gave
the same verdicts. Target: >= 100,000 events/s from a file and within 3x of the floor. The input
is generated once and cached under .run/bench/ (the topic is reused when it already holds the events).

    .venv/bin/python bench/bench_replay.py [--events 1000000] [--workers N] [--no-topic] [--stages] [--profile]
"""

from __future__ import annotations

import argparse
import os
import resource
import time
from pathlib import Path

import orjson
import pyarrow as pa

REPO = Path(__file__).resolve().parent.parent
CACHE = REPO / ".run" / "bench"
BOOTSTRAP = "127.0.0.1:59092"
WINDOW_MS = 60_000
STEP_MS = 1.0  # 1000 events/s of event time: 60,000 events per window
START_MS = 1_767_225_600_000 + 24 * 3_600_000 * 300  # 2026-10-28, in the past


def generate(n: int) -> tuple[Path, Path]:
    """The cached stream and reference files (JSONL), written on first use."""
    from driftwarden.replay.synthetic import incident_events

    CACHE.mkdir(parents=True, exist_ok=True)
    stream, reference = CACHE / f"replay-{n}.jsonl", CACHE / "replay-reference.jsonl"
    jobs = ((stream, n, START_MS, START_MS + int(n * STEP_MS) // 2, 11),
            (reference, 60_000, START_MS - 3_600_000, None, 12))
    for path, count, start, drift, seed in jobs:
        if not path.is_file():
            tmp = path.with_suffix(".tmp")
            with open(tmp, "wb") as handle:
                for event in incident_events(count, start, STEP_MS if path == stream else 60.0, drift,
                                             numeric=20, categorical=5, seed=seed):
                    handle.write(orjson.dumps(event) + b"\n")
            tmp.rename(path)
    return stream, reference


class Clock:
    """Wall seconds of a block, and CPU seconds of this process and of its finished children."""

    def __enter__(self) -> "Clock":
        self.wall, self.cpu = time.perf_counter(), _cpu_seconds()
        return self

    def __exit__(self, *exc) -> None:
        self.wall, self.cpu = time.perf_counter() - self.wall, _cpu_seconds() - self.cpu


def _cpu_seconds() -> float:
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


def floor_file(path: Path, validate: bool = False) -> tuple[int, Clock]:
    """Read and parse every record of the file (orjson.loads, or parse_event when ``validate``),
    with the replay's own bulk reader."""
    from driftwarden.core.event_files import iter_raw_batches
    from driftwarden.schemas.events import parse_event

    parse = parse_event if validate else orjson.loads
    count = 0
    with Clock() as clock:
        for batch in iter_raw_batches(path):
            for _, raw in batch:
                parse(raw)
            count += len(batch)
    return count, clock


def replay_file_timed(path: Path, reference: Path, workers: int) -> tuple[int, Clock, dict]:
    """Full replay of the file with ``workers`` validating processes; (records, seconds, report)."""
    from driftwarden.replay.progress import ReplayProgress
    from driftwarden.replay.report import build_report
    from driftwarden.replay.run import replay_file
    from driftwarden.replay.setup import load_setup

    setup = load_setup(None, reference, None, None)  # reference built outside the timed part
    with Clock() as clock:
        outcome, source = replay_file(path, setup, ReplayProgress(enabled=False), workers=workers)
        doc = build_report(outcome, setup, source)
    return outcome.counts["read"], clock, doc


def ensure_topic(path: Path, n: int) -> str:
    """A 2-partition topic holding the file's events (record timestamps = event times)."""
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    topic = f"bench-replay-{n}"
    admin = AdminClient({"bootstrap.servers": BOOTSTRAP})
    if topic in admin.list_topics(timeout=10).topics:
        probe = Consumer({"bootstrap.servers": BOOTSTRAP, "group.id": "bench-probe"})
        marks = [probe.get_watermark_offsets(TopicPartition(topic, p), timeout=10) for p in (0, 1)]
        held = sum(high - low for low, high in marks)
        probe.close()
        if held == n:
            return topic
        admin.delete_topics([topic])[topic].result(30)
        time.sleep(2)
    # the events are weeks old: keep them whatever their timestamps (the default 7-day retention would not)
    admin.create_topics([NewTopic(topic, 2, 1, config={"retention.ms": "-1"})])[topic].result(30)
    producer = Producer({"bootstrap.servers": BOOTSTRAP, "linger.ms": 50, "batch.size": 1_000_000,
                         "compression.type": "lz4"})
    with open(path, "rb") as handle:
        for i, line in enumerate(handle):
            value = line.rstrip(b"\n")
            while True:
                try:
                    producer.produce(topic, value, partition=i % 2, timestamp=orjson.loads(value)["event_time"])
                    break
                except BufferError:
                    producer.poll(0.5)
            if i % 10_000 == 0:
                producer.poll(0)
    assert producer.flush(120) == 0
    return topic


def floor_topic(topic: str, n: int) -> tuple[int, Clock]:
    """Read the topic's range and parse every record (orjson.loads)."""
    from driftwarden.replay.kafka_range import read_topic
    from driftwarden.schemas.config import SourceConfig

    count, source = 0, SourceConfig(bootstrap_servers=BOOTSTRAP)
    with Clock() as clock:
        for batch in read_topic(source, topic, START_MS - 1, START_MS + int(n * STEP_MS) + 1):
            for record in batch:
                orjson.loads(record.value)
            count += len(batch)
    return count, clock


def replay_topic_timed(topic: str, n: int, reference: Path, workers: int) -> tuple[int, Clock]:
    """Full replay of the topic's range; (records, seconds)."""
    from driftwarden.replay.progress import ReplayProgress
    from driftwarden.replay.report import build_report
    from driftwarden.replay.run import replay_topic
    from driftwarden.replay.setup import load_setup
    from driftwarden.schemas.config import SourceConfig

    setup, kafka = load_setup(None, reference, None, None), SourceConfig(bootstrap_servers=BOOTSTRAP)
    with Clock() as clock:
        outcome, source = replay_topic(kafka, topic, START_MS - 1, START_MS + int(n * STEP_MS) + 1, setup,
                                       ReplayProgress(enabled=False), workers=workers)
        build_report(outcome, setup, source)
    return outcome.counts["read"], clock


def stages(path: Path, reference: Path) -> None:
    """Where an in-process file replay's time goes: validate_batch alone, then the windows'
    summaries alone (both the replay's own code)."""
    from driftwarden.pipeline.event_time import window_start
    from driftwarden.pipeline.summary import WindowRows
    from driftwarden.replay.file_input import read_file
    from driftwarden.core.gc_pause import gc_paused
    from driftwarden.replay.setup import load_setup
    from driftwarden.replay.validate import validate_batch

    setup = load_setup(None, reference, None, None)
    model = setup.config.models[0]
    values = [record.value for record in read_file(path)]
    with gc_paused(), Clock() as clock:  # as in the replay (1M records held here would trigger full GCs)
        batches = [validate_batch(values[i:i + 5000], setup.config) for i in range(0, len(values), 5000)]
    line("  stage: validate_batch", len(values), clock)
    windows: dict[int, WindowRows] = {}
    for number, batch in enumerate(batches):
        starts = [window_start(ms, WINDOW_MS) for ms in batch.event_ms]
        for start in sorted(set(starts)):
            rows = [batch.rows[i] for i, s in enumerate(starts) if s == start]
            taken = pa.array(rows, type=pa.int32())
            windows.setdefault(start, WindowRows(model)).add_columns(
                {name: column.take(taken) for name, column in batch.columns[model.name].items()},
                [(number, row) for row in rows])
    with gc_paused(), Clock() as clock:
        for start, rows in windows.items():
            rows.summarize(model.name, start, WINDOW_MS)
    line("  stage: summarize", len(values), clock)


def line(label: str, count: int, clock: Clock) -> float:
    """Print one measurement; return events per wall second."""
    print(f"{label:<30} {count:>9,} events: wall {clock.wall:7.2f} s ({count / clock.wall:>9,.0f}/s), "
          f"CPU {clock.cpu:7.2f} s ({count / clock.cpu:>9,.0f}/s)", flush=True)
    return count / clock.wall


def verdicts(doc: dict) -> list:
    """What must not depend on how a replay ran: per window and feature, counts, alarm, deep
    results and verdict (gate scores come from randomised KLL sketches: equal within rank error)."""
    keys = ("name", "count", "missing", "deep", "drifted", "severity")
    return [(w["model"], w["window_start"], w["events"],
             [[f[k] for k in keys] + [f["gate"]["alarm"]] for f in w["features"]]) for w in doc["windows"]]


def main() -> None:
    """Run the benchmark and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--workers", type=int, default=os.cpu_count(), help="validating processes (default: cores)")
    parser.add_argument("--no-topic", action="store_true", help="skip the Kafka part")
    parser.add_argument("--profile", action="store_true", help="cProfile the in-process file replay (top 25)")
    parser.add_argument("--stages", action="store_true", help="also time validation and summaries alone")
    args = parser.parse_args()
    t = time.perf_counter()
    stream, reference = generate(args.events)
    print(f"input: {stream} ({stream.stat().st_size / 1e6:.0f} MB; ready in {time.perf_counter() - t:.1f} s)")
    floor_count, floor_clock = floor_file(stream)
    floor = line("file read+orjson (floor)", floor_count, floor_clock)
    line("file read+parse_event", *floor_file(stream, validate=True))
    if args.profile:
        _profile(stream, reference)
        return
    count, clock, single = replay_file_timed(stream, reference, workers=0)
    line("file replay, in process", count, clock)
    count, clock, doc = replay_file_timed(stream, reference, workers=args.workers)
    rate = line(f"file replay, {args.workers} workers", count, clock)
    drifted = sorted({(e["feature"], e["window_start"]) for e in doc["first_drift"]})
    print(f"  windows {len(doc['windows'])}, first drift {drifted}; "
          f"same verdicts and deep results as in process: {verdicts(doc) == verdicts(single)}")
    print(f"  file (wall time): replay / floor = {floor / rate:.2f}x (CPU time of all processes: "
          f"{clock.cpu / floor_clock.cpu:.2f}x); target >= 100,000 events/s and <= 3x: "
          f"{'MET' if rate >= 100_000 and floor / rate <= 3 else 'NOT MET'}")
    if args.stages:
        stages(stream, reference)
    if not args.no_topic:
        topic = ensure_topic(stream, args.events)
        tfloor = line("topic read+parse (floor)", *floor_topic(topic, args.events))
        trate = line(f"topic replay, {args.workers} workers",
                     *replay_topic_timed(topic, args.events, reference, args.workers))
        print(f"  topic (wall time): replay / floor = {tfloor / trate:.2f}x")


def _profile(stream: Path, reference: Path) -> None:
    import cProfile
    import pstats

    profiler = cProfile.Profile()
    profiler.enable()
    replay_file_timed(stream, reference, workers=0)
    profiler.disable()
    pstats.Stats(profiler).sort_stats("cumulative").print_stats(25)


if __name__ == "__main__":
    import sys

    sys.path.insert(0, str(REPO))
    main()
