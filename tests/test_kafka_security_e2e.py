"""Every client over the broker's secured listeners, end to end, as users run them.

One topic written over SASL_SSL (SCRAM-SHA-512, the services' user and CA): two partitions, f0 shifted from
window 4 on, records Python rejects among them. Over SASL_SSL: the live job on the embedded MiniCluster (its
password in an environment variable, which ``run`` moves into a private file) and on the standalone cluster (its
password in a file the TaskManagers read) store the same verdicts and dead letters, the dead letters also on
the DLQ topic; replay of the time range stores exactly what the live job stored; consumer lag and ``status``
read the group's position. Over mutual TLS: replay of the same range.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from collections import Counter
from pathlib import Path

import orjson
import pytest
import yaml
from typer.testing import CliRunner

from driftwarden.cli import app
from driftwarden.core.errors import EXIT_BEHIND
from driftwarden.schemas.config import SourceConfig
from driftwarden.schemas.events import rfc3339
from tests.conftest import REPO
from tests.job_helpers import (FEATURES, WINDOW_MS, assert_same_results, stored_counts, stored_dead_letters,
                               stored_verdicts, stream)
from tests.kafka_helpers import create_topic, mtls_security, sasl_ssl_security, secure_client_config

pytestmark = [pytest.mark.services, pytest.mark.slow]

T0 = (int(time.time() * 1000) - 2 * 3_600_000) // WINDOW_MS * WINDOW_MS  # recent: inside the topic's retention
N_WINDOWS, PER_WINDOW, SHIFT_FROM = 6, 300, 4
REJECTED = [b"not json", b'{"event_time": "2026-13-45", "model": "m", "features": {}}', b"[1, 2]"]
PASSWORD_ENV = "DW_E2E_KAFKA_PASSWORD"


@pytest.fixture(scope="module")
def secure_topic(secure_kafka, tmp_path_factory) -> dict:
    """The topic (written over SASL_SSL, each record's timestamp its event time), a reference and two configs."""
    folder = tmp_path_factory.mktemp("secure-e2e")
    topic = f"secure-{uuid.uuid4().hex[:10]}"
    client = secure_client_config(secure_kafka.sasl_ssl, sasl_ssl_security(secure_kafka))
    create_topic("", topic, partitions=2, client=client)
    events = stream(N_WINDOWS, PER_WINDOW, shift_from=SHIFT_FROM, start_ms=T0)
    records = [(orjson.dumps(e), T0 + i * WINDOW_MS // PER_WINDOW) for i, e in enumerate(events)]
    for k, value in enumerate(REJECTED):  # on time, mid-stream
        records.insert(500 + k * 300, (value, records[500 + k * 300][1]))
    _produce(client, topic, records)
    snapshot = folder / "train.jsonl"
    snapshot.write_bytes(b"\n".join(orjson.dumps(e) for e in stream(12, PER_WINDOW, seed=99, start_ms=T0 - 3_600_000)))
    configs = {"sasl_env": _config(folder, topic, secure_kafka.sasl_ssl,
                                   sasl_ssl_security(secure_kafka, password_env=PASSWORD_ENV, password_file=None)),
               "sasl_file": _config(folder, topic, secure_kafka.sasl_ssl, sasl_ssl_security(secure_kafka)),
               "mtls": _config(folder, topic, secure_kafka.mtls, mtls_security(secure_kafka))}
    built = CliRunner().invoke(app, ["reference", "build", "-i", str(snapshot), "-o", str(folder / "reference.dwref"),
                                     "-c", str(configs["sasl_file"])])
    assert built.exit_code == 0, built.output
    return {"topic": topic, "folder": folder, "configs": configs, "events": events, "records": len(records)}


def _produce(client: dict, topic: str, records: list[tuple[bytes, int]]) -> None:
    from confluent_kafka import Producer

    producer = Producer({**client, "linger.ms": 10, "enable.idempotence": True})
    for i, (value, ts) in enumerate(records):
        producer.produce(topic, value, timestamp=ts, partition=i % 2)
    assert producer.flush(60) == 0


def _config(folder: Path, topic: str, bootstrap: str, security: dict) -> Path:
    path = folder / f"{security['protocol']}-{'env' if 'password_env' in security else 'file'}.yaml"
    path.write_text(yaml.safe_dump({
        "source": {"topics": [topic], "bootstrap_servers": bootstrap, "group_id": f"g-{topic}", "security": security},
        "window": {"size": "10s", "out_of_orderness": "2s"},
        "reference": {"mode": "file", "path": str(folder / "reference.dwref")},
        "thresholds": {"min_count": 30},
        "models": [{"name": "m", "features": FEATURES}]}))
    return path


def _driftwarden(*args: str, env: dict | None = None, timeout: int = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "driftwarden.cli", *args], cwd=REPO, capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, timeout=timeout)


@pytest.fixture(scope="module")
def embedded_store(secure_topic, secure_kafka) -> str:
    """The store of `driftwarden run` on the embedded MiniCluster, its password in an environment variable."""
    folder = secure_topic["folder"]
    url = f"sqlite:///{folder}/embedded.db"
    run_dir = folder / "run"
    done = _driftwarden("run", "--config", str(secure_topic["configs"]["sasl_env"]), "--bounded", "--store-url", url,
                        "--checkpoint-dir", str(folder / "chk"),
                        env={PASSWORD_ENV: secure_kafka.password, "DRIFTWARDEN_RUN_DIR": str(run_dir)})
    assert done.returncode == 0, done.stdout + done.stderr
    assert not any((run_dir / "secrets").iterdir()), "the run's private secrets folder outlived it"
    return url


def test_the_embedded_job_over_sasl_ssl_stores_verdicts_and_dead_letters(secure_topic, embedded_store,
                                                                          secure_kafka):
    counts = stored_counts(embedded_store)
    assert sum(counts.values()) == len(secure_topic["events"]) and len(counts) == N_WINDOWS
    assert sum(stored_dead_letters(embedded_store).values()) == len(REJECTED)
    shifted = {start for (model, start, feature), row in stored_verdicts(embedded_store).items()
               if feature == "f0" and row["drifted"] and row["severity"] in ("moderate", "major")}
    assert shifted == {T0 + w * WINDOW_MS for w in range(SHIFT_FROM, N_WINDOWS)}
    dlq = _read_topic(secure_client_config(secure_kafka.sasl_ssl, sasl_ssl_security(secure_kafka)),
                      f"{secure_topic['topic']}.dlq", len(REJECTED))
    assert Counter(orjson.loads(r)["reason"] for r in dlq) == stored_dead_letters(embedded_store)


def _read_topic(client: dict, topic: str, expected: int) -> list[bytes]:
    from confluent_kafka import Consumer

    consumer = Consumer({**client, "group.id": f"check-{uuid.uuid4().hex[:6]}", "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    values: list[bytes] = []
    deadline = time.monotonic() + 60
    while len(values) < expected and time.monotonic() < deadline:
        values += [m.value() for m in consumer.consume(100, timeout=0.5) if m.error() is None]
    consumer.close()
    return values


def test_the_job_on_the_standalone_cluster_over_sasl_ssl_stores_what_the_embedded_job_stores(
        secure_topic, embedded_store, flink_rest):
    url = f"sqlite:///{secure_topic['folder']}/cluster.db"
    done = _driftwarden("run", "--config", str(secure_topic["configs"]["sasl_file"]), "--bounded", "--store-url", url,
                        "--jobmanager", flink_rest, "--parallelism", "2",
                        "--checkpoint-dir", str(secure_topic["folder"] / "cluster-chk"))
    assert done.returncode == 0, done.stdout + done.stderr
    assert stored_counts(url) == stored_counts(embedded_store)
    assert_same_results(stored_verdicts(url), stored_verdicts(embedded_store))
    assert stored_dead_letters(url) == stored_dead_letters(embedded_store)


@pytest.mark.parametrize("listener", ["sasl_file", "mtls"])
def test_replay_of_the_time_range_stores_what_the_live_job_stored(listener, secure_topic, embedded_store):
    url = f"sqlite:///{secure_topic['folder']}/replay-{listener}.db"
    report = secure_topic["folder"] / f"replay-{listener}.json"
    done = _driftwarden("replay", "--topic", secure_topic["topic"], "--from", rfc3339(T0),
                        "--to", rfc3339(T0 + N_WINDOWS * WINDOW_MS), "--config", str(secure_topic["configs"][listener]),
                        "--store-url", url, "--report-json", str(report), "--no-progress")
    assert done.returncode == 0, done.stdout + done.stderr
    assert orjson.loads(report.read_bytes())["counts"]["read"] == secure_topic["records"]
    assert stored_counts(url) == stored_counts(embedded_store)
    assert_same_results(stored_verdicts(url), stored_verdicts(embedded_store))


def test_consumer_lag_and_status_read_the_group_over_sasl_ssl(secure_topic, secure_kafka, tmp_path):
    from confluent_kafka import Consumer, TopicPartition

    from driftwarden.jobs.consumer_lag import consumer_lags

    group = f"lag-{uuid.uuid4().hex[:8]}"
    client = secure_client_config(secure_kafka.sasl_ssl, sasl_ssl_security(secure_kafka))
    committer = Consumer({**client, "group.id": group, "enable.auto.commit": False})
    topic = secure_topic["topic"]
    committer.commit(offsets=[TopicPartition(topic, 0, 100), TopicPartition(topic, 1, 0)], asynchronous=False)
    committer.close()
    source = SourceConfig(topics=[secure_topic["topic"]], bootstrap_servers=secure_kafka.sasl_ssl, group_id=group,
                          security=sasl_ssl_security(secure_kafka))
    ends = {0: (secure_topic["records"] + 1) // 2, 1: secure_topic["records"] // 2}
    lags = {lag.partition: lag.records for lag in consumer_lags(source)}
    assert lags == {0: ends[0] - 100, 1: ends[1]}

    config = tmp_path / "status.yaml"
    config.write_text(yaml.safe_dump({"source": source.model_dump(exclude_none=True),
                                      "models": [{"name": "m", "features": FEATURES}]}))
    done = _driftwarden("status", "--config", str(config), "--store-url", f"sqlite:///{tmp_path}/s.db",
                        "--prometheus", "", env={"COLUMNS": "200"})
    assert done.returncode == EXIT_BEHIND, done.stdout + done.stderr  # hours of lag: behind
    for partition, records in lags.items():
        assert f"{secure_topic['topic']}[{partition}]" in done.stdout and f"{records} records" in done.stdout
