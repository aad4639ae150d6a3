"""No record and no clock stops the live job or costs a good window: real Kafka, Flink and PostgreSQL.

Production defaults throughout (periodic watermarks, bundles of 5,000). The same topic replayed
with ``driftwarden replay --store-url`` stores what the live job stores.
"""

from __future__ import annotations

import time
import uuid
from collections import Counter
from pathlib import Path

import orjson
import pytest
from sqlalchemy import create_engine, select, text
from typer.testing import CliRunner

from driftwarden.cli import app
from driftwarden.core.store import store_text
from driftwarden.jobs.drift_job import run_drift_job
from driftwarden.schemas.config import load_config
from driftwarden.schemas.events import parse_event_time, rfc3339
from driftwarden.schemas.tables import dead_letters
from bench.hostile_corpus import bad_values, hostile_valid, interleave, malformed
from tests.job_helpers import (T0, WINDOW_MS, late_partitions, stored_counts, stored_dead_letters, stored_late,
                               stream, write_warmup_config)
from tests.kafka_helpers import create_topic, produce, produce_to_partitions

pytestmark = [pytest.mark.services, pytest.mark.slow]

N_MALFORMED = 1_200
N_BAD_VALUES = 100  # events kept with a bad value or a hostile unmonitored field


@pytest.fixture()
def pg_schema_url(pg_url):
    """Make fresh PostgreSQL schemas (URLs on them); all are dropped afterwards."""
    admin = create_engine(pg_url.replace("postgresql://", "postgresql+psycopg://"))
    made = []

    def make() -> str:
        schema = f"t_{uuid.uuid4().hex[:10]}"
        with admin.begin() as conn:
            conn.execute(text(f"CREATE SCHEMA {schema}"))
        made.append(schema)
        return f"{pg_url}?options=-csearch_path%3D{schema}"

    yield make
    with admin.begin() as conn:
        for schema in made:
            conn.execute(text(f"DROP SCHEMA {schema} CASCADE"))
    admin.dispose()


def _event_ms(event: dict) -> int:
    return parse_event_time(event["event_time"])


def _replay_to_store(topic: str, config: Path, url: str, started_ms: int) -> None:
    result = CliRunner().invoke(app, ["replay", "--no-progress", "--topic", topic, "--from", str(started_ms - 60_000),
                                      "--to", str(int(time.time() * 1000)), "--config", str(config),
                                      "--store-url", url, "--workers", "0"])
    assert result.exit_code == 0, result.output


def _dead_letter_reasons(url: str) -> dict[tuple, str]:
    """(topic, partition, offset) -> reason code of every dead letter."""
    with create_engine(url.replace("postgresql://", "postgresql+psycopg://")).connect() as conn:
        return {(t, p, o): r for t, p, o, r in conn.execute(select(
            dead_letters.c.topic, dead_letters.c.partition, dead_letters.c.offset, dead_letters.c.reason))}


def test_malformed_corpus_never_stops_the_job_on_postgresql(kafka_bootstrap, topic_name, tmp_path, pg_schema_url):
    """1,200 hostile records and 100 events with bad values among 4,000 good events: every window stored with
    its exact count (the bad-valued events in it),
    read = valid + rejected + late exactly, and replay stores the same windows and dead letters."""
    started_ms = int(time.time() * 1000)
    create_topic(kafka_bootstrap, topic_name, partitions=1)
    good = stream(8, 500)
    times = [_event_ms(e) for e in good]
    bad = malformed(N_MALFORMED, times)
    odd = hostile_valid(times, per_kind=10) + bad_values(N_BAD_VALUES, times)
    records = interleave([orjson.dumps(e) for e in good], bad + odd)
    produce(kafka_bootstrap, topic_name, records)
    config = write_warmup_config(tmp_path / "config.yaml", topic_name, kafka_bootstrap)
    live = pg_schema_url()
    run_drift_job(load_config(config), live, bounded=True)

    expected = Counter(("m", t // WINDOW_MS * WINDOW_MS) for t in times)
    for pos, _record, model in odd:
        expected[(store_text(model, 200), times[pos - 1] // WINDOW_MS * WINDOW_MS)] += 1
    assert stored_counts(live) == expected
    dead = stored_dead_letters(live)
    rejected = sum(n for reason, n in dead.items() if reason != "late")
    assert rejected == N_MALFORMED and dead["late"] == 0
    assert len(records) == sum(expected.values()) + rejected + dead["late"]  # read = valid + rejected + late

    replayed = pg_schema_url()
    _replay_to_store(topic_name, config, replayed, started_ms)
    assert stored_counts(replayed) == stored_counts(live)
    assert _dead_letter_reasons(replayed) == _dead_letter_reasons(live)


def test_an_event_from_a_bad_clock_does_not_make_good_events_late(kafka_bootstrap, topic_name, tmp_path,
                                                                   pg_schema_url):
    """One event stamped 2099 in the middle of a partition: dead-lettered as 'future', and every
    event after it is windowed normally, live and in replay."""
    started_ms = int(time.time() * 1000)
    create_topic(kafka_bootstrap, topic_name, partitions=1)
    good = stream(10, 500)
    bad_clock = {"event_time": "2099-12-31T23:00:00Z", "model": "m", "features": {"f0": 1.0}}
    produce(kafka_bootstrap, topic_name, good[:1000] + [bad_clock] + good[1000:])
    config = write_warmup_config(tmp_path / "config.yaml", topic_name, kafka_bootstrap)
    expected = Counter(("m", _event_ms(e) // WINDOW_MS * WINDOW_MS) for e in good)
    for url, run in ((pg_schema_url(), "live"), (pg_schema_url(), "replay")):
        if run == "live":
            run_drift_job(load_config(config), url, bounded=True)
        else:
            _replay_to_store(topic_name, config, url, started_ms)
        assert stored_counts(url) == expected, run
        assert stored_dead_letters(url) == Counter({"future": 1}), run
    assert rfc3339(T0)  # the stream starts 2026-01-01: the 2099 event is 73 years ahead of its record


def _wait_until(condition, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.5)


def test_late_counts_per_window_are_the_same_live_and_in_replay(kafka_bootstrap, topic_name, tmp_path, pg_schema_url):
    """Two partitions, out of order, a late event in each partition for each window but the last, and
    more late events sent once the live job (production defaults, running) has stored their windows:
    the live job and replay store the same late count per window, exactly the late events, and the
    same dead letters, on PostgreSQL."""
    started_ms = int(time.time() * 1000)
    create_topic(kafka_bootstrap, topic_name, partitions=2)
    partitions, n_late = late_partitions(stream(8, 500), 8)
    produce_to_partitions(kafka_bootstrap, topic_name, partitions)
    config = write_warmup_config(tmp_path / "config.yaml", topic_name, kafka_bootstrap)
    live, replayed = pg_schema_url(), pg_schema_url()
    job = run_drift_job(load_config(config), live, wait=False)
    try:
        _wait_until(lambda: len(stored_counts(live)) >= 7, 240, "7 windows stored")
        after = [{"event_time": T0 + w * WINDOW_MS + 5_000, "model": "m", "features": {"f0": 0.0}} for w in range(7)]
        closing = {"event_time": T0 + 20 * WINDOW_MS, "model": "sentinel", "features": {}}  # fires window 7
        produce_to_partitions(kafka_bootstrap, topic_name, [after + [closing], after + [closing]])
        _wait_until(lambda: stored_dead_letters(live)["late"] == n_late + 14 and len(stored_counts(live)) >= 8,
                    120, "the late events kept and the last window stored")
    finally:
        job.get_job_client().cancel().result()
    _replay_to_store(topic_name, config, replayed, started_ms)
    expected = Counter({("m", T0 + w * WINDOW_MS): 4 if w < 7 else 0 for w in range(8)})
    assert n_late == 14 and stored_late(live) == expected
    assert stored_late(replayed) == stored_late(live)
    monitored = lambda counts: {k: n for k, n in counts.items() if k[0] == "m"}  # noqa: E731
    assert monitored(stored_counts(replayed)) == monitored(stored_counts(live))
    assert _dead_letter_reasons(replayed) == _dead_letter_reasons(live)
