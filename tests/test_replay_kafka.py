"""driftwarden replay against the real Kafka broker and the real Flink job (MiniCluster).

The central test: the streaming job (Java window aggregate, at parallelism 1 and 2) and a topic
replay of the same range (Python summaries), with the same config and reference, store the same
results, every column bit for bit: window summaries depend only on the set of their records
(sketches/FORMAT.md), so nothing is left to a sketch's coin flips.
"""

from __future__ import annotations

import time
import uuid

import orjson
import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient
from typer.testing import CliRunner

from driftwarden.cli import app
from driftwarden.replay.synthetic import incident_events
from driftwarden.schemas.config import DEFAULT_GROUP, SourceConfig
from tests.job_helpers import assert_same_results, stored_counts, stored_verdicts
from driftwarden.schemas.events import rfc3339
from tests.kafka_helpers import create_topic

pytestmark = [pytest.mark.services]

WINDOW = 60_000
NOW_MIN = int(time.time() * 1000) // WINDOW * WINDOW
T0 = NOW_MIN - 2 * 3_600_000
N, STEP = 4800, 150  # 12 windows of 400 events
DRIFT = T0 + 6 * WINDOW
END = T0 + N * STEP
MALFORMED = b'{"event_time": "2026-13-45", "model": "fraud-v3", "features": {}}'


def produce_timed(bootstrap: str, topic: str, values: list[tuple[bytes, int]]) -> None:
    """Produce values with explicit record timestamps (the event time), in order."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 10, "enable.idempotence": True})
    for i, (value, ts) in enumerate(values):
        producer.produce(topic, value, timestamp=ts, partition=i % 2)
        if i % 2000 == 0:
            producer.poll(0)
    assert producer.flush(30) == 0


@pytest.fixture(scope="module")
def incident(kafka_bootstrap, tmp_path_factory):
    """A 2-partition topic: 12 windows in event-time order, drifting after 6, one malformed record."""
    folder = tmp_path_factory.mktemp("replay-kafka")
    topic = f"replay-{uuid.uuid4().hex[:10]}"
    create_topic(kafka_bootstrap, topic, partitions=2)
    events = list(incident_events(N, T0, STEP, DRIFT, seed=3))
    values = [(orjson.dumps(e), e["event_time"]) for e in events]
    values.insert(1000, (MALFORMED, events[1000]["event_time"]))
    produce_timed(kafka_bootstrap, topic, values)
    reference = _reference_file(folder)
    config = folder / "monitor.yaml"
    config.write_text(f"source: {{topics: [{topic}], bootstrap_servers: '{kafka_bootstrap}', "
                      f"group_id: live-{topic}}}\nwindow: {{size: 60s, out_of_orderness: 5s}}\n"
                      f"reference: {{mode: file, path: '{reference}'}}\n"
                      "models:\n  - name: fraud-v3\n    features: {x0: numeric, x1: numeric, c0: categorical}\n"
                      "    sample_size: 100\n")  # < 400 per window: the bottom-k sample is a real subset
    return {"topic": topic, "config": config, "reference": reference, "folder": folder, "events": events}


def _reference_file(folder, config=None):
    from driftwarden.pipeline.judging import drift_policy
    from driftwarden.pipeline.reference_build import build_reference_set
    from driftwarden.schemas.config import MonitorConfig
    from driftwarden.schemas.events import parse_event

    events = [parse_event(orjson.dumps(e)) for e in incident_events(8000, T0 - 4 * 3_600_000, 100, None, seed=4)]
    config = config or MonitorConfig.model_validate(
        {"models": [{"name": "fraud-v3", "features": {"x0": "numeric", "x1": "numeric", "c0": "categorical"}}]})
    path = folder / "ref.dwref"
    build_reference_set(events, config, drift_policy(config.thresholds)).save(path)
    return path


def replay(*args):
    """Run ``driftwarden replay`` in-process."""
    return CliRunner().invoke(app, ["replay", "--no-progress", *map(str, args)])


def replay_report(incident, *extra, start=T0, end=END + 1):
    out = incident["folder"] / f"r-{uuid.uuid4().hex[:6]}.json"
    result = replay("--topic", incident["topic"], "--from", rfc3339(start), "--to", rfc3339(end),
                    "--config", incident["config"], "--report-json", out, *extra)
    assert result.exit_code == 0, result.output
    return orjson.loads(out.read_bytes())


@pytest.mark.slow
@pytest.mark.parametrize("parallelism", [1, 2])
def test_replay_stores_exactly_what_the_live_job_stores(incident, kafka_bootstrap, tmp_path, parallelism):
    from driftwarden.jobs.drift_job import run_drift_job
    from driftwarden.schemas.config import load_config

    live_url, replay_url = f"sqlite:///{tmp_path}/live.db", f"sqlite:///{tmp_path}/replay.db"
    run_drift_job(load_config(incident["config"]), live_url, str(incident["reference"]), bounded=True,
                  parallelism=parallelism)
    doc = replay_report(incident, "--store-url", replay_url)
    assert_same_results(stored_verdicts(replay_url), stored_verdicts(live_url))
    assert stored_counts(replay_url) == stored_counts(live_url)
    live = _live_rows(live_url)
    replayed = {(w["model"], w["window_start"], f["name"]): f for w in doc["windows"] for f in w["features"]}
    assert len(live) == 12 * 4 and set(replayed) == set(live)  # x0, x1, c0 and the default group of x0 and x1
    drifted = {(key[1], key[2]) for key, f in replayed.items() if f["drifted"] and key[2] != "x1"}
    # the default group (x0, x1) is tested on its correlation structure only, which x0's shift leaves alone
    assert drifted == {(rfc3339(T0 + i * WINDOW), f) for i in range(6, 12) for f in ("x0", "c0")}
    assert {key[2] for key in live} == {"x0", "x1", "c0", DEFAULT_GROUP}
    assert doc["counts"]["rejected"] == 1 and doc["rejected"][0]["reason"] == "bad_event_time"
    assert doc["counts"]["read"] == N + 1 and doc["counts"]["late"] == 0
    assert _live_counts(live_url) == {(w["model"], w["window_start"]): w["events"] for w in doc["windows"]}


@pytest.mark.slow
def test_a_seasonal_reference_judges_alike_live_and_in_replay(incident, kafka_bootstrap, tmp_path):
    """``reference: {season: 6m}`` (six 60 s windows, the default tolerance of one each side): the reference
    file keeps its 14 windows (two seasons and more), and each window is judged against those of its phase,
    calibrated season against season (pipeline/seasons.py). The live job and a topic replay choose the same
    phase windows and store the same results, every column bit for bit; the change is still found."""
    from driftwarden.jobs.drift_job import run_drift_job
    from driftwarden.pipeline.reference_set import ReferenceSet
    from driftwarden.schemas.config import load_config

    config = tmp_path / "seasonal.yaml"
    reference = tmp_path / "seasonal.dwref"
    config.write_text(incident["config"].read_text().replace(
        f"reference: {{mode: file, path: '{incident['reference']}'}}",
        f"reference: {{mode: file, path: '{reference}', season: 6m}}"))
    _reference_file(tmp_path, load_config(config)).rename(reference)
    assert len(ReferenceSet.load(reference).windows["fraud-v3"]) == 14
    live_url, replay_url = f"sqlite:///{tmp_path}/live.db", f"sqlite:///{tmp_path}/replay.db"
    run_drift_job(load_config(config), live_url, str(reference), bounded=True, parallelism=1)
    doc = replay_report({**incident, "config": config}, "--store-url", replay_url)
    assert_same_results(stored_verdicts(replay_url), stored_verdicts(live_url))
    assert stored_counts(replay_url) == stored_counts(live_url)
    drifted = {(w["window_start"], f["name"]) for w in doc["windows"] for f in w["features"] if f["drifted"]}
    assert {(rfc3339(T0 + i * WINDOW), "x0") for i in range(6, 12)} <= drifted
    assert not {start for start, _ in drifted} & {rfc3339(T0 + i * WINDOW) for i in range(6)}


def _live_rows(url: str) -> dict:
    from sqlalchemy import select

    from driftwarden.core.store import make_engine
    from driftwarden.schemas.tables import window_results

    engine = make_engine(url)
    with engine.connect() as conn:
        rows = conn.execute(select(window_results)).mappings().all()
    engine.dispose()
    return {(r["model"], _iso(r["window_start"]), r["feature"]): dict(r) for r in rows}


def _live_counts(url: str) -> dict:
    from sqlalchemy import select

    from driftwarden.core.store import make_engine
    from driftwarden.schemas.tables import window_counts

    engine = make_engine(url)
    with engine.connect() as conn:
        rows = conn.execute(select(window_counts.c.model, window_counts.c.window_start, window_counts.c.events)).all()
    engine.dispose()
    return {(m, _iso(ws)): n for m, ws, n in rows}


def _iso(moment) -> str:
    from datetime import timezone

    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return rfc3339(int(round(moment.timestamp() * 1000)))


def test_a_sub_range_reads_only_its_records(incident):
    doc = replay_report(incident, start=T0 + 2 * WINDOW, end=T0 + 5 * WINDOW)
    assert [w["window_start"] for w in doc["windows"]] == [rfc3339(T0 + i * WINDOW) for i in (2, 3, 4)]
    assert doc["counts"]["valid"] == 3 * 400


def test_replay_never_commits_consumer_group_offsets(incident, kafka_bootstrap):
    topic = incident["topic"]
    prod_group = f"prod-{uuid.uuid4().hex[:8]}"
    consumer = Consumer({"bootstrap.servers": kafka_bootstrap, "group.id": prod_group, "enable.auto.commit": False})
    consumer.commit(offsets=[TopicPartition(topic, 0, 7), TopicPartition(topic, 1, 9)], asynchronous=False)
    consumer.close()
    replay_report(incident)
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    committed = _committed(admin, topic)
    assert committed == {prod_group: {0: 7, 1: 9}}, committed


def _committed(admin: AdminClient, topic: str) -> dict:
    from confluent_kafka import ConsumerGroupTopicPartitions

    groups = [g.group_id for g in admin.list_consumer_groups().result(timeout=10).valid]
    found = {}
    for group in groups:
        request = [ConsumerGroupTopicPartitions(group)]
        result = admin.list_consumer_group_offsets(request)[group].result(timeout=10)
        offsets = {tp.partition: tp.offset for tp in result.topic_partitions if tp.topic == topic and tp.offset >= 0}
        if offsets:
            found[group] = offsets
    return {g: o for g, o in found.items() if not g.startswith("live-")}  # the Flink job's own group


def test_to_topic_republishes_every_record_with_its_event_time(incident, kafka_bootstrap):
    target = f"{incident['topic']}-staging"
    create_topic(kafka_bootstrap, target, partitions=2)
    replay_report(incident, "--to-topic", target, "--pace", "max")
    records = _read_all(kafka_bootstrap, target, N + 1)
    assert len(records) == N + 1
    assert sorted(v for v, _, _ in records) == sorted([orjson.dumps(e) for e in incident["events"]] + [MALFORMED])
    for value, timestamp, _ in records:
        if value != MALFORMED:
            assert orjson.loads(value)["event_time"] == timestamp
    source = {(v): p for v, _, p in _read_all(kafka_bootstrap, incident["topic"], N + 1)}
    assert all(source[v] == p for v, _, p in records)  # each record kept its partition


def _read_all(bootstrap: str, topic: str, expected: int) -> list[tuple[bytes, int, int]]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{uuid.uuid4().hex[:6]}",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    out, deadline = [], time.monotonic() + 30
    while len(out) < expected and time.monotonic() < deadline:
        for msg in consumer.consume(1000, timeout=1.0):
            if msg.error() is None:
                out.append((msg.value(), msg.timestamp()[1], msg.partition()))
    consumer.close()
    return out


def test_pace_sleeps_by_event_time_gaps(kafka_bootstrap, topic_name):
    from driftwarden.replay.publish import Republisher, parse_pace
    from driftwarden.replay.records import RawRecord

    create_topic(kafka_bootstrap, topic_name, partitions=1)
    slept = []
    sink = Republisher(SourceConfig(bootstrap_servers=kafka_bootstrap), topic_name, parse_pace("x10"), 1,
                       sleep=slept.append)
    for i, ms in enumerate([T0, T0 + 2000, T0 + 2000, T0 + 7000]):
        sink(RawRecord((topic_name, 0, i), 0, b"{}", ms), ms)
    sink.close()
    assert slept == pytest.approx([0.2, 0.5])
    assert parse_pace("original") == 1.0 and parse_pace("max") == float("inf")


@pytest.mark.parametrize("case, message", [
    ("missing", "does not exist"),
    ("empty", "holds no record between"),
])
def test_bad_topic_ranges_give_a_message_and_exit_1(incident, case, message):
    topic = f"nope-{uuid.uuid4().hex[:8]}" if case == "missing" else incident["topic"]
    start, end = (T0, END) if case == "missing" else (T0 - 7_200_000, T0 - 3_600_000)
    result = replay("--topic", topic, "--from", rfc3339(start), "--to", rfc3339(end), "--config", incident["config"])
    assert result.exit_code == 1, result.output
    assert message in result.output and "Traceback" not in result.output
