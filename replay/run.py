"""Drive one replay: pick the source, feed the engine, report progress; no CLI concerns here."""

from __future__ import annotations

import gc
from contextlib import nullcontext
from pathlib import Path
from typing import Iterable, Iterator

from driftwarden.core.gc_pause import gc_paused
from driftwarden.replay.engine import Replayer, ReplayOutcome, RecordSink
from driftwarden.replay.file_input import check_file, read_batches
from driftwarden.replay.kafka_range import PartitionRange, read_topic
from driftwarden.replay.progress import ReplayProgress
from driftwarden.replay.records import RawRecord
from driftwarden.replay.setup import ReplaySetup
from driftwarden.replay.validate import ValidatedBatch
from driftwarden.replay.workers import ValidationPool, auto_workers
from driftwarden.schemas.config import SourceConfig
from driftwarden.schemas.events import rfc3339

#: A full garbage collection every this many batches (about 1,000,000 records).
GC_EVERY_BATCHES = 200
#: Bytes per record assumed when sizing ``--workers auto`` for a file (25 features of JSON text;
#: a compressed file holds about five times as many records per byte).
TEXT_BYTES_PER_RECORD = 350


def replay_file(path: Path, setup: ReplaySetup, progress: ReplayProgress,
                sink: RecordSink | None = None, workers: int | None = None) -> tuple[ReplayOutcome, dict]:
    """Replay an archived file (one ordered stream); the outcome and the report's source entry.

    ``workers``: processes validating batches (0: in this process; None: :func:`auto_workers`).
    """
    if workers is None:
        workers = auto_workers(estimated_records(check_file(path)))
    replayer = Replayer(setup, [0], sink=sink)
    _drive(replayer, read_batches(path), progress, setup, workers)
    outcome = replayer.finish()
    return outcome, {"input": str(path), "event_time_covered": _covered(outcome)}


def estimated_records(path: Path) -> int:
    """About how many records a file holds, from its size."""
    per_record = TEXT_BYTES_PER_RECORD // (5 if path.suffix.lower() in (".gz", ".parquet") else 1)
    return Path(path).stat().st_size // per_record


def replay_topic(source: SourceConfig, topic: str, start_ms: int, end_ms: int, setup: ReplaySetup,
                 progress: ReplayProgress, sink: RecordSink | None = None,
                 workers: int | None = None) -> tuple[ReplayOutcome, dict]:
    """Replay a topic of ``source``'s brokers between two times; the outcome and the report's source entry
    (``workers`` as for :func:`replay_file`, auto sized by the records in the range)."""
    state: dict = {}

    def on_plan(ranges: list[PartitionRange]) -> None:
        total = sum(r.size for r in ranges)
        progress.set_total(total)
        state["workers"] = auto_workers(total) if workers is None else workers
        state["replayer"] = Replayer(setup, [r.partition for r in ranges if r.size],
                                     {r.partition: r.end - 1 for r in ranges if r.size}, sink)

    batches = read_topic(source, topic, start_ms, end_ms, on_plan)
    first = next(batches, [])  # the plan is made (and checked) before the first batch
    replayer = state["replayer"]
    _drive(replayer, _chain(first, batches), progress, setup, state["workers"])
    outcome = replayer.finish()
    return outcome, {"topic": topic, "from": rfc3339(start_ms), "to": rfc3339(end_ms),
                     "event_time_covered": _covered(outcome)}


def _drive(replayer: Replayer, batches: Iterable[list[RawRecord]], progress: ReplayProgress,
           setup: ReplaySetup, workers: int) -> None:
    with gc_paused(), (ValidationPool(setup.config, workers) if workers else nullcontext()) as pool:
        validated = pool.validated(batches) if pool else _unvalidated(batches)
        for number, (batch, done) in enumerate(validated, start=1):
            replayer.feed(batch, done)
            progress.update(replayer.outcome.counts["read"], replayer.event_time_covered)
            if number % GC_EVERY_BATCHES == 0:
                gc.collect()  # free any cycles now and then: a long replay must not grow without bound


def _unvalidated(batches: Iterable[list[RawRecord]]) -> Iterator[tuple[list[RawRecord], ValidatedBatch | None]]:
    for batch in batches:
        yield batch, None  # Replayer.feed validates it in this process


def _chain(first: list[RawRecord], rest: Iterator[list[RawRecord]]) -> Iterator[list[RawRecord]]:
    if first:
        yield first
    yield from rest


def _covered(outcome: ReplayOutcome) -> list[str] | None:
    return [rfc3339(ms) for ms in outcome.event_ms_range] or None
