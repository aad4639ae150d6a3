"""Events as teams publish them, through the live job (real Kafka, Flink MiniCluster) and replay.

The same events in four forms, each on a topic of its own: the contract's JSON envelope (the
baseline); Confluent-framed Avro produced through the running schema registry with Confluent's own
serializer, in two schema versions (the second adds a field); flat JSON under a mapped envelope
(epoch seconds, the model in ``model_id``, features at the top level); and the contract's JSON with
wrong-typed monitored values mixed in. Every form stores the baseline's verdicts (the Avro and flat
forms exactly, bit for bit); replay of a topic stores what the live job stored; the wrong-typed
values are counted per feature exactly, in the live job, in replay and in the report.
"""

from __future__ import annotations

import time
import uuid
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import orjson
import pytest
import yaml
from sqlalchemy import select
from typer.testing import CliRunner

from driftwarden.cli import app
from driftwarden.core.store import make_engine
from driftwarden.jobs.drift_job import run_drift_job
from driftwarden.schemas.config import load_config
from driftwarden.schemas.events import rfc3339
from driftwarden.schemas.tables import dead_letters, window_counts, window_results
from tests.avro_helpers import confluent_values, require_registry
from tests.job_helpers import T0, WINDOW_MS, assert_same_results, stored_counts, stored_verdicts
from tests.kafka_helpers import create_topic, produce

pytestmark = [pytest.mark.services, pytest.mark.slow]

N_WINDOWS, PER_WINDOW, SHIFT_FROM = 6, 300, 3
NOW = int(time.time() * 1000)  # replay picks a topic's records by their Kafka timestamps: produced now
FEATURES = {"x": "numeric", "c": "categorical", "flag": "boolean"}
#: The second schema version adds ``region`` (an unmonitored field, with a default) from this event on.
V2_FROM = N_WINDOWS * PER_WINDOW // 2
SCHEMA_V1 = {"type": "record", "name": "Scored", "namespace": "shop", "fields": [
    {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "model_id", "type": "string"},
    {"name": "request_id", "type": "string"},
    {"name": "x", "type": ["null", "double"]},
    {"name": "c", "type": {"type": "enum", "name": "Channel", "symbols": ["web", "app", "store"]}},
    {"name": "flag", "type": ["null", "boolean"]},
    {"name": "score", "type": "float"},
]}
SCHEMA_V2 = {**SCHEMA_V1, "fields": [*SCHEMA_V1["fields"], {"name": "region", "type": "string", "default": "eu"}]}
MAPPED = {"features": {"root": True, "exclude": ["ts", "model_id", "request_id", "score"]},
          "model": {"field": "model_id"}, "prediction": {"field": "score"}}


def flat_events(seed: int, n_windows: int, start_ms: int, shift_from: int | None) -> list[dict]:
    """Flat records (the Avro schema's fields): ``flag`` true 30% of the time, 60% from window ``shift_from``."""
    rng = np.random.default_rng(seed)
    out = []
    for w in range(n_windows):
        share = 0.6 if shift_from is not None and w >= shift_from else 0.3
        for i in range(PER_WINDOW):
            k = w * PER_WINDOW + i
            out.append({"ts": start_ms + w * WINDOW_MS + i * (WINDOW_MS // PER_WINDOW), "model_id": "m",
                        "request_id": f"r{k}", "x": None if i % 40 == 0 else float(rng.normal(0, 1)),
                        "c": str(rng.choice(["web", "app", "store"])), "flag": None if i % 50 == 7 else bool(rng.random() < share),
                        "score": float(np.float32(rng.uniform())), **({"region": "us"} if k >= V2_FROM else {})})
    return out


def as_contract(event: dict) -> dict:
    """A flat record in the contract's JSON envelope (``region`` an unmonitored feature there too)."""
    features = {k: v for k, v in event.items() if k not in ("ts", "model_id", "request_id", "score")}
    return {"event_time": event["ts"], "model": event["model_id"], "request_id": event["request_id"],
            "features": features, "prediction": event["score"]}


def as_flat_json(event: dict) -> dict:
    """A flat record with its time in epoch seconds, for the mapped envelope."""
    return {**event, "ts": event["ts"] / 1000}


def with_wrong_types(events: list[dict]) -> tuple[list[dict], Counter]:
    """The contract's events with wrong-typed monitored values: x a text in 1 of 20, flag a text in 1 of 30,
    c a number in 1 of 45; the expected invalid count per (window start, feature)."""
    out, expected = [], Counter()
    for k, event in enumerate(events):
        features = dict(event["features"])
        window = event["event_time"] // WINDOW_MS * WINDOW_MS
        for name, every, bad in (("x", 20, "oops"), ("flag", 30, "yes"), ("c", 45, 7)):
            if k % every == 3:
                features[name] = bad
                expected[window, name] += 1
        out.append({**event, "features": features})
    return out, expected


@pytest.fixture(scope="module")
def setup(kafka_bootstrap, tmp_path_factory):
    """The four topics, their configs and one reference built from the contract's JSON."""
    registry = require_registry()
    folder = tmp_path_factory.mktemp("your-events")
    training = [as_contract(e) for e in flat_events(99, 12, T0 - 3_600_000, None)]
    (folder / "train.jsonl").write_bytes(b"\n".join(orjson.dumps(e) for e in training))
    events = flat_events(1, N_WINDOWS, T0, SHIFT_FROM)
    contract = [as_contract(e) for e in events]
    wrong, expected_invalid = with_wrong_types(contract)
    topics, run = {}, uuid.uuid4().hex[:8]
    for form in ("json", "avro", "flat", "wrong"):
        topics[form] = f"your-events-{form}-{run}"
        create_topic(kafka_bootstrap, topics[form], partitions=2)
    produce(kafka_bootstrap, topics["json"], contract)
    produce(kafka_bootstrap, topics["flat"], [as_flat_json(e) for e in events])
    produce(kafka_bootstrap, topics["wrong"], wrong)
    avro = [{k: v for k, v in e.items() if k != "region"} for e in events[:V2_FROM]]
    produce(kafka_bootstrap, topics["avro"], confluent_values(topics["avro"], SCHEMA_V1, avro)
            + confluent_values(topics["avro"], SCHEMA_V2, events[V2_FROM:]))
    sources = {"json": {}, "wrong": {}, "flat": {"envelope": {**MAPPED, "event_time": {"field": "ts", "unit": "s"}}},
               "avro": {"format": "avro", "schema_registry": registry,
                        "envelope": {**MAPPED, "event_time": {"field": "ts"}}}}
    configs = {form: _config(folder / f"{form}.yaml", topics[form], kafka_bootstrap, sources[form]) for form in topics}
    reference = folder / "reference.dwref"
    built = CliRunner().invoke(app, ["reference", "build", "-i", str(folder / "train.jsonl"), "-o", str(reference),
                                     "-c", str(configs["json"])])
    assert built.exit_code == 0, built.output
    return {"folder": folder, "topics": topics, "configs": configs, "reference": reference,
            "expected_invalid": expected_invalid}


def _config(path: Path, topic: str, bootstrap: str, source: dict) -> Path:
    path.write_text(yaml.safe_dump({
        "source": {"topics": [topic], "bootstrap_servers": bootstrap, "group_id": f"g-{topic}", **source},
        "window": {"size": "10s", "out_of_orderness": "2s"},
        "thresholds": {"min_count": 30},
        "models": [{"name": "m", "features": FEATURES}],
    }))
    return path


class LiveRuns(dict):
    """form -> store URL of its topic's run through the live job (embedded, bounded), each run on first use."""

    def __init__(self, setup: dict) -> None:
        super().__init__()
        self.setup = setup

    def __missing__(self, form: str) -> str:
        url = self[form] = f"sqlite:///{self.setup['folder']}/live-{form}.db"
        run_drift_job(load_config(self.setup["configs"][form]), url, str(self.setup["reference"]), bounded=True,
                      checkpoint_interval_ms=0)
        return url


@pytest.fixture(scope="module")
def live(setup) -> LiveRuns:
    """The live job's store of each topic (:class:`LiveRuns`)."""
    return LiveRuns(setup)


def _replay(setup, form: str, store_url: str) -> dict:
    out = setup["folder"] / f"replay-{form}.json"
    result = CliRunner().invoke(app, ["replay", "--no-progress", "--topic", setup["topics"][form],
                                      "--from", rfc3339(NOW - 86_400_000), "--to", rfc3339(int(time.time() * 1000)),
                                      "--config", str(setup["configs"][form]), "--reference", str(setup["reference"]),
                                      "--report-json", str(out), "--store-url", store_url])
    assert result.exit_code == 0, result.output
    return orjson.loads(out.read_bytes())


def _flag_drifted(url: str) -> set[int]:
    return {start for (_, start, feature), row in stored_verdicts(url).items() if feature == "flag" and row["drifted"]}


def test_avro_and_flat_json_store_the_contract_forms_verdicts(live):
    baseline = stored_verdicts(live["json"])
    assert len(baseline) == N_WINDOWS * (len(FEATURES) + 1)  # the prediction too
    assert _flag_drifted(live["json"]) == {T0 + w * WINDOW_MS for w in range(SHIFT_FROM, N_WINDOWS)}
    for form in ("avro", "flat"):
        assert_same_results(stored_verdicts(live[form]), baseline)
        assert stored_counts(live[form]) == Counter({("m", T0 + w * WINDOW_MS): PER_WINDOW for w in range(N_WINDOWS)})
        assert _unknown(live[form]) == _unknown(live["json"]) and sum(_unknown(live[form]).values()) == V2_FROM
        assert _dead_letters(live[form]) == []


def test_replay_of_the_avro_topic_stores_what_the_live_job_stored(setup, live, store_url):
    """Replay into SQLite and into the real PostgreSQL stores what the live job stored (in SQLite), bit for bit."""
    doc = _replay(setup, "avro", store_url)
    assert_same_results(_verdicts(store_url), _verdicts(live["avro"]))
    assert doc["counts"]["read"] == doc["counts"]["valid"] == N_WINDOWS * PER_WINDOW


def test_wrong_typed_values_are_counted_per_feature_exactly(setup, live, store_url):
    expected = setup["expected_invalid"]
    stored = {(start, feature): row["invalid"] for (_, start, feature), row in stored_verdicts(live["wrong"]).items()}
    assert {key: n for key, n in stored.items() if n} == dict(expected)
    assert stored_counts(live["wrong"]) == stored_counts(live["json"])  # every event kept
    url = store_url  # replay into SQLite and into the real PostgreSQL
    doc = _replay(setup, "wrong", url)
    assert_same_results(_verdicts(url), _verdicts(live["wrong"]))
    totals = Counter()
    for (_, feature), n in expected.items():
        totals[feature] += n
    assert doc["counts"]["invalid_values"] == {"m": dict(totals)}
    assert doc["counts"]["rejected"] == 0


def _verdicts(url: str) -> dict:
    """:func:`stored_verdicts` with the window bounds as epoch ms: PostgreSQL's are time-zone aware, SQLite's naive UTC."""
    def ms(moment: datetime) -> int:
        return int(moment.replace(tzinfo=moment.tzinfo or timezone.utc).timestamp() * 1000)

    return {key: {**row, "window_start": ms(row["window_start"]), "window_end": ms(row["window_end"])}
            for key, row in stored_verdicts(url).items()}


def _unknown(url: str) -> dict[int, int]:
    with make_engine(url).connect() as conn:
        rows = conn.execute(select(window_counts.c.window_start, window_counts.c.unknown_features))
        return {int(start.timestamp() * 1000): n for start, n in rows}


def _dead_letters(url: str) -> list:
    with make_engine(url).connect() as conn:
        return conn.execute(select(dead_letters.c.reason)).all()
