"""A vector feature in the live job: over the real Kafka, the job stores what replay stores, bit for bit.

A model with one numeric feature and one vector feature ``emb: {vector: 48, projections: 8}`` (vectors near a
4-dim subspace; every 50th array of the wrong length, in the training snapshot and the stream alike: invalid
values of ``emb``). From window ``SHIFT_FROM`` on the vectors' mean moves off the subspace. ``reference
build`` builds the reference from a drift-free snapshot; the live job (embedded MiniCluster at parallelism
2: two partial summaries merged per window; Python validates and projects, the Java fast path declines
vector events) reads the stream from a 2-partition topic; replay reads the same events from a file. The
stored results must be equal column for column (decisions, scores, counts), the vector's group must drift
from the first shifted window on and nowhere before, and the alert must name (model, vector, segment).
The same events as Confluent-framed Avro (the vector an Avro array of doubles) through the running schema
registry: the live job stores the same results again.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import orjson
import pytest
import yaml
from sqlalchemy import select
from typer.testing import CliRunner

from driftwarden.cli import app
from tests.job_helpers import WINDOW_MS, assert_same_results, stored_verdicts

pytestmark = [pytest.mark.services, pytest.mark.slow]
DIM, PROJECTIONS, RANK = 48, 8, 4
N_WINDOWS, SHIFT_FROM, PER_WINDOW = 8, 5, 600
BASE_MS = (int(time.time() * 1000) - 2 * 3_600_000) // WINDOW_MS * WINDOW_MS


def vector_events(n_windows: int, start_ms: int, seed: int, shift_from: int | None = None) -> list[dict]:
    """PER_WINDOW events a window: ``f0`` normal, ``emb`` a vector near a rank-4 subspace (fixed by seed 46);
    from window ``shift_from`` on its mean moves 0.5 along a direction orthogonal to the subspace; every
    50th array has DIM - 1 numbers (an invalid value)."""
    basis = np.linalg.qr(np.random.default_rng(46).normal(size=(DIM, RANK)))[0]
    direction = np.random.default_rng(47).normal(size=DIM)
    direction -= basis @ (basis.T @ direction)
    direction /= np.linalg.norm(direction)
    rng = np.random.default_rng(seed)
    events = []
    for w in range(n_windows):
        shift = 0.5 if shift_from is not None and w >= shift_from else 0.0
        vectors = rng.normal(size=(PER_WINDOW, RANK)) @ basis.T + rng.normal(0, 0.1, (PER_WINDOW, DIM))
        vectors = (vectors + shift * direction).round(6)
        for i in range(PER_WINDOW):
            emb = vectors[i].tolist()
            events.append({"event_time": start_ms + w * WINDOW_MS + i * WINDOW_MS // PER_WINDOW, "model": "m",
                           "features": {"f0": float(rng.normal()), "emb": emb[:-1] if i % 50 == 7 else emb}})
    return events


def _write_jsonl(path: Path, events: list[dict]) -> Path:
    path.write_bytes(b"\n".join(orjson.dumps(e) for e in events) + b"\n")
    return path


def _config(path: Path, topic: str, bootstrap: str, source: dict | None = None) -> Path:
    path.write_text(yaml.safe_dump({
        "source": {"topics": [topic], "bootstrap_servers": bootstrap, "group_id": f"g-{topic}", **(source or {})},
        "window": {"size": "10s", "out_of_orderness": "2s"},
        "reference": {"mode": "file", "path": str(path.parent / "reference.dwref")},
        "alerting": {"group_wait": "0s"},
        "models": [{"name": "m", "features": {"f0": "numeric", "emb": {"vector": DIM, "projections": PROJECTIONS}}}],
    }))
    return path


AVRO_SCHEMA = {"type": "record", "name": "Scored", "namespace": "vectors", "fields": [
    {"name": "event_time", "type": "long"},
    {"name": "model", "type": "string"},
    {"name": "features", "type": {"type": "record", "name": "Features", "fields": [
        {"name": "f0", "type": "double"},
        {"name": "emb", "type": {"type": "array", "items": "double"}}]}},
]}


@pytest.fixture(scope="module")
def scenario(tmp_path_factory) -> dict:
    """The reference (``reference build`` from a drift-free snapshot), the shifting stream, and replay's
    store of the stream read from a JSONL file."""
    folder = tmp_path_factory.mktemp("vector-live")
    config_path = _config(folder / "config.yaml", "unused", "127.0.0.1:1")
    snapshot = _write_jsonl(folder / "train.jsonl", vector_events(12, BASE_MS - 3_600_000, seed=99))
    built = CliRunner().invoke(app, ["reference", "build", "-i", str(snapshot), "-o", str(folder / "reference.dwref"),
                                     "-c", str(config_path)])
    assert built.exit_code == 0, built.output
    events = vector_events(N_WINDOWS, BASE_MS, seed=1, shift_from=SHIFT_FROM)
    replayed = f"sqlite:///{folder}/replay.db"
    result = CliRunner().invoke(app, ["replay", "--no-progress", "--input", str(_write_jsonl(folder / "stream.jsonl", events)),
                                      "--config", str(config_path), "--store-url", replayed])
    assert result.exit_code == 0, result.output
    return {"folder": folder, "events": events, "replayed": replayed}


def _live(scenario: dict, topic: str, bootstrap: str, parallelism: int, source: dict | None = None) -> str:
    """Run the live job (embedded, bounded) over ``topic``; its store's URL."""
    from driftwarden.jobs.drift_job import run_drift_job
    from driftwarden.schemas.config import load_config

    config_path = _config(scenario["folder"] / f"{topic}.yaml", topic, bootstrap, source)
    config = load_config(config_path)
    live = f"sqlite:///{scenario['folder']}/live-{topic}.db"
    run_drift_job(config, live, str(scenario["folder"] / "reference.dwref"), bounded=True, checkpoint_interval_ms=0,
                  parallelism=parallelism)
    return live


def test_the_live_job_judges_a_vector_feature_as_replay_does(scenario, kafka_bootstrap, topic_name) -> None:
    from driftwarden.core.store import make_engine
    from driftwarden.schemas.alert_tables import alerts
    from tests.kafka_helpers import create_topic, produce

    create_topic(kafka_bootstrap, topic_name, partitions=2)
    produce(kafka_bootstrap, topic_name, scenario["events"])
    live = _live(scenario, topic_name, kafka_bootstrap, parallelism=2)

    verdicts = stored_verdicts(live)
    names = {"f0", "emb", *(f"emb[{i}]" for i in range(PROJECTIONS))}
    assert {feature for _, _, feature in verdicts} == names
    assert len(verdicts) == N_WINDOWS * len(names)
    group_drifted = {start for (_, start, feature), row in verdicts.items() if feature == "emb" and row["drifted"]}
    assert group_drifted == {BASE_MS + w * WINDOW_MS for w in range(SHIFT_FROM, N_WINDOWS)}
    assert not any(row["drifted"] for (_, start, _), row in verdicts.items() if start < BASE_MS + SHIFT_FROM * WINDOW_MS)
    bad = {(w, sum(1 for i in range(PER_WINDOW) if i % 50 == 7)) for w in range(N_WINDOWS)}
    assert {((start - BASE_MS) // WINDOW_MS, row["invalid"]) for (_, start, feature), row in verdicts.items()
            if feature == "emb[0]"} == bad  # wrong-length arrays counted, the events kept
    engine = make_engine(live)
    with engine.connect() as conn:
        fired = {(m, f, s) for m, f, s in conn.execute(select(alerts.c.model, alerts.c.feature, alerts.c.segment))}
    engine.dispose()
    assert ("m", "emb", "") in fired
    assert_same_results(verdicts, stored_verdicts(scenario["replayed"]), where_differs=True)  # topic vs its file


def test_vectors_from_avro_arrays_are_judged_as_from_json(scenario, kafka_bootstrap, topic_name) -> None:
    """The same events as Confluent-framed Avro (``features.emb`` an Avro array of doubles, the wrong-length
    ones included) through the running registry: the live job stores what replay of the JSON stored."""
    from tests.avro_helpers import confluent_values, require_registry
    from tests.kafka_helpers import create_topic, produce

    registry = require_registry()
    create_topic(kafka_bootstrap, topic_name, partitions=2)
    produce(kafka_bootstrap, topic_name, confluent_values(topic_name, AVRO_SCHEMA, scenario["events"]))
    live = _live(scenario, topic_name, kafka_bootstrap, parallelism=1,
                 source={"format": "avro", "schema_registry": registry})
    verdicts = stored_verdicts(live)
    assert any(row["drifted"] for (_, _, feature), row in verdicts.items() if feature == "emb")
    assert_same_results(verdicts, stored_verdicts(scenario["replayed"]), where_differs=True)
