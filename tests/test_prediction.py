"""Prediction drift: a model whose outputs shift while its inputs keep their distribution.

The event's top-level ``prediction`` is monitored like a numeric feature named ``prediction``
(``monitor_prediction``, on by default). The same stream goes through ``reference build``,
replay (report and store) and the live job on the real Kafka; each must attribute the change to
``prediction`` in the first window after it, and to nothing else. The live job and replay must
store the same results, bit for bit; the dashboards' per-feature panels show ``prediction``.
"""

from __future__ import annotations

import math
import time
from pathlib import Path

import numpy as np
import orjson
import pytest
import yaml
from sqlalchemy import select
from typer.testing import CliRunner

from driftwarden.core.errors import ConfigError
from driftwarden.cli import app
from driftwarden.jobs.feature_spec import FeatureColumnSpec
from driftwarden.pipeline.summary import WindowRows
from driftwarden.replay.validate import validate_batch
from driftwarden.schemas.config import ModelConfig, MonitorConfig, load_config
from driftwarden.schemas.tables import window_results
from tests.job_helpers import FEATURES, WINDOW_MS, assert_same_results, stored_verdicts, stream, write_config

SHIFT_FROM = 5
N_WINDOWS = 8
PER_WINDOW = 600
#: windows start on a whole window, two hours ago: inside the dashboards' time range
BASE_MS = (int(time.time() * 1000) - 2 * 3_600_000) // WINDOW_MS * WINDOW_MS


def with_predictions(events: list[dict], shift_from: int | None = None, seed: int = 5) -> list[dict]:
    """The events with a model score in (0, 1): from window ``shift_from`` on the score's logit moves
    by 0.6 sd (the outputs shift; the features, from ``stream``, keep their distribution). Every 40th
    event carries no prediction and every 97th a null one: missing values. Only the configured
    features are kept (``stream`` adds one more), so that the live job's Java reads most events
    (DW_FEATURES vouches for them) and Python validates the rest (each 7th keeps the extra feature)."""
    rng = np.random.default_rng(seed)
    start = _event_ms(events[0]) // WINDOW_MS * WINDOW_MS
    out = []
    for i, event in enumerate(events):
        event = dict(event)
        if i % 7:
            event["features"] = {k: v for k, v in event["features"].items() if k in FEATURES}
        window = (_event_ms(event) - start) // WINDOW_MS
        logit = rng.normal(-1.0 + (0.6 if shift_from is not None and window >= shift_from else 0.0), 1.0)
        if i % 97 == 0:
            event["prediction"] = None
        elif i % 40:
            event["prediction"] = round(1.0 / (1.0 + math.exp(-logit)), 6)
        out.append(event)
    return out


def _event_ms(event: dict) -> int:
    from driftwarden.schemas.events import parse_event_time

    return parse_event_time(event["event_time"])


def _write_jsonl(path: Path, events: list[dict]) -> Path:
    path.write_bytes(b"\n".join(orjson.dumps(e) for e in events) + b"\n")
    return path


@pytest.fixture(scope="module")
def scenario(tmp_path_factory) -> dict:
    """A monitor config (prediction monitored by default), its reference built by `driftwarden
    reference build` from a drift-free snapshot with predictions, and the shifting stream."""
    folder = tmp_path_factory.mktemp("prediction")
    config = write_config(folder / "config.yaml", "unused", "127.0.0.1:1")
    snapshot = _write_jsonl(folder / "train.jsonl", with_predictions(
        stream(12, PER_WINDOW, seed=99, start_ms=BASE_MS - 3_600_000), seed=99))
    result = CliRunner().invoke(app, ["reference", "build", "-i", str(snapshot), "-o", str(folder / "reference.dwref"),
                                      "-c", str(config)])
    assert result.exit_code == 0, result.output
    assert "m: 5 features" in result.output  # f0 f1 f2 c0 and the prediction
    events = with_predictions(stream(N_WINDOWS, PER_WINDOW, seed=1, start_ms=BASE_MS), shift_from=SHIFT_FROM)
    return {"folder": folder, "config": config, "events": events,
            "stream": _write_jsonl(folder / "stream.jsonl", events)}


def _replay(scenario: dict, *extra: str) -> dict:
    out = scenario["folder"] / f"report-{abs(hash(extra))}.json"
    result = CliRunner().invoke(app, ["replay", "--no-progress", "--input", str(scenario["stream"]), "--report-json",
                                      str(out), *extra])
    assert result.exit_code == 0, result.output
    return orjson.loads(out.read_bytes())


def _missing_per_window(events: list[dict]) -> list[int]:
    missing = [0] * N_WINDOWS
    for e in events:
        missing[(_event_ms(e) - BASE_MS) // WINDOW_MS] += e.get("prediction") is None
    return missing


def test_replay_attributes_an_output_shift_to_prediction_in_its_first_window(scenario):
    page = scenario["folder"] / "report.html"
    doc = _replay(scenario, "--config", str(scenario["config"]), "--report-html", str(page))
    text = page.read_text()
    assert ">prediction<" in text and text.count("data:image/png;base64,") == 3  # the one drifted feature's plots
    windows = sorted(doc["windows"], key=lambda w: w["window_start"])
    assert len(windows) == N_WINDOWS
    missing = _missing_per_window(scenario["events"])
    for i, window in enumerate(windows):
        entries = {f["name"]: f for f in window["features"]}
        assert set(entries) == {*FEATURES, "prediction", "(numeric)"}  # the default multivariate group too
        prediction = entries["prediction"]
        assert (prediction["kind"], prediction["count"], prediction["missing"]) == ("numeric", PER_WINDOW, missing[i])
        assert prediction["drifted"] == (i >= SHIFT_FROM), (i, prediction)
        assert not any(f["drifted"] for name, f in entries.items() if name != "prediction"), (i, window)
    alerted = {a["window_start"]: a["features"] for a in doc["alerts"]}
    assert alerted == {w["window_start"]: ["prediction"] for w in windows[SHIFT_FROM:]}


def test_replay_can_keep_only_the_prediction(scenario):
    doc = _replay(scenario, "--config", str(scenario["config"]), "--features", "prediction")
    assert [[f["name"] for f in w["features"]] for w in doc["windows"]] == [["prediction"]] * N_WINDOWS
    assert [f["drifted"] for w in sorted(doc["windows"], key=lambda w: w["window_start"]) for f in w["features"]] == [
        i >= SHIFT_FROM for i in range(N_WINDOWS)]


def test_opting_out_leaves_the_prediction_unmonitored(scenario, tmp_path):
    data = yaml.safe_load(scenario["config"].read_text())
    data["models"][0]["monitor_prediction"] = False
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(data))
    doc = _replay(scenario, "--config", str(tmp_path / "config.yaml"))
    assert doc["windows"] and all(f["name"] != "prediction" for w in doc["windows"] for f in w["features"])
    assert not any(f["drifted"] for w in doc["windows"] for f in w["features"])
    config = load_config(tmp_path / "config.yaml")
    assert "prediction" not in FeatureColumnSpec.from_config(config).columns_of["m"]
    batch = validate_batch([orjson.dumps(e) for e in scenario["events"][:50]], config)
    assert set(batch.columns["m"]) == set(FEATURES)


def test_a_feature_named_prediction_is_a_config_error_naming_the_model(tmp_path):
    path = tmp_path / "monitor.yaml"
    path.write_text("models:\n  - name: fraud-v3\n    features: {amount: numeric, prediction: numeric}\n")
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    message = str(caught.value)
    assert f"{path}:2: models.0: model 'fraud-v3': a feature named 'prediction' clashes" in message
    assert "monitor_prediction: false" in message
    path.write_text("models:\n  - name: fraud-v3\n    features: {amount: numeric, prediction: numeric}\n"
                    "    monitor_prediction: false\n")
    assert load_config(path).model("fraud-v3").monitored == {"amount": "numeric", "prediction": "numeric"}


def test_with_monitoring_off_a_feature_named_prediction_is_read_from_the_features():
    rows = WindowRows(ModelConfig(name="m", features={"prediction": "numeric"}, monitor_prediction=False))
    rows.add({"prediction": 2.0}, ("t", 0, 0), prediction=9.0)
    summary = rows.summarize("m", 0, WINDOW_MS)
    sketch = summary.sketches["prediction"]
    assert list(summary.sketches) == ["prediction"] and (sketch.n, sketch.min, sketch.max) == (1, 2.0, 2.0)


def test_a_stream_without_predictions_reports_none():
    """A reference and a window whose events carry no prediction: nothing to judge, nothing reported."""
    from driftwarden.pipeline.judging import analyze_summary, drift_policy
    from driftwarden.pipeline.summary import summarize_window
    from driftwarden.pipeline.references import reference_from_summaries

    config = ModelConfig(name="m", features={"x": "numeric"})
    rng = np.random.default_rng(0)
    windows = [summarize_window("m", i * WINDOW_MS, WINDOW_MS, [{"x": v} for v in rng.normal(size=200)], config)
               for i in range(12)]
    reference = reference_from_summaries(windows[:11], config.monitored, drift_policy(MonitorConfig(
        models=[config]).thresholds), prediction=True)
    assert list(reference.features) == ["x"]
    report = analyze_summary(windows[11], reference, drift_policy(MonitorConfig(models=[config]).thresholds))
    assert [f.name for f in report.features] == ["x"]


@pytest.mark.services
@pytest.mark.slow
@pytest.mark.parametrize("parallelism", [1, 2])
def test_the_live_job_attributes_the_shift_to_prediction_as_replay_does(scenario, kafka_bootstrap, topic_name,
                                                                        tmp_path, parallelism):
    """The live job on the real Kafka (2 partitions; embedded, at parallelism 1 and 2: partial
    summaries merged): the stored results attribute the drift to ``prediction`` from the first
    shifted window on, raise an alert on feature ``prediction``, and equal replay's stored results
    column for column."""
    from driftwarden.jobs.drift_job import run_drift_job
    from driftwarden.schemas.alert_tables import alerts
    from driftwarden.core.store import make_engine
    from tests.kafka_helpers import create_topic, produce

    create_topic(kafka_bootstrap, topic_name, partitions=2)
    produce(kafka_bootstrap, topic_name, scenario["events"])
    data = yaml.safe_load(scenario["config"].read_text())
    data["source"].update({"topics": [topic_name], "bootstrap_servers": kafka_bootstrap, "group_id": f"g-{topic_name}"})
    data["alerting"] = {"group_wait": "0s"}
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(data))
    config = load_config(tmp_path / "config.yaml")
    live = f"sqlite:///{tmp_path}/live.db"
    run_drift_job(config, live, config.reference.path, bounded=True, checkpoint_interval_ms=0, parallelism=parallelism)

    verdicts = stored_verdicts(live)
    shifted = BASE_MS + SHIFT_FROM * WINDOW_MS
    drifted = {(start, feature) for (_, start, feature), row in verdicts.items() if row["drifted"]}
    assert drifted == {(BASE_MS + w * WINDOW_MS, "prediction") for w in range(SHIFT_FROM, N_WINDOWS)}
    assert len(verdicts) == N_WINDOWS * (len(FEATURES) + 2)  # the features, prediction, the default group
    engine = make_engine(live)
    with engine.connect() as conn:
        fired = conn.execute(select(alerts.c.model, alerts.c.feature, alerts.c.segment, alerts.c.starts_at)).all()
    engine.dispose()
    assert [(m, f, s) for m, f, s, _ in fired] == [("m", "prediction", "")]
    assert int(fired[0].starts_at.timestamp() * 1000) // WINDOW_MS * WINDOW_MS in (shifted, shifted + WINDOW_MS)

    replayed = f"sqlite:///{tmp_path}/replay.db"
    _replay(scenario, "--config", str(scenario["config"]), "--store-url", replayed)
    assert_same_results(stored_verdicts(live), stored_verdicts(replayed), where_differs=True)  # topic vs its file


@pytest.mark.services
def test_the_dashboards_per_feature_panels_show_prediction(scenario, pg_engine):
    """Replay stores the scenario on PostgreSQL; the model dashboard's per-feature SQL panels list
    ``prediction`` (drifted in the latest window) beside the features."""
    from datetime import datetime, timedelta, timezone

    from sqlalchemy import text

    from driftwarden.alerting.dashboards.definitions import model_dashboard
    from driftwarden.alerting.dashboards.macros import expand_sql
    from driftwarden.alerting.dashboards.model import SqlQuery

    _replay(scenario, "--config", str(scenario["config"]), "--store-url", pg_engine.url.render_as_string(hide_password=False))
    now = datetime.now(timezone.utc)
    panels = {title: query for title, query in model_dashboard().queries() if isinstance(query, SqlQuery)}
    with pg_engine.connect() as conn:
        assert conn.execute(select(window_results.c.feature).where(window_results.c.drifted)).scalars().all() == [
            "prediction"] * (N_WINDOWS - SHIFT_FROM)
        heatmap = conn.execute(text(expand_sql(panels["Drift score per feature (PSI; deep where run)"].sql,
                                               {"model": "m"}, now - timedelta(hours=6), now))).all()
        latest = conn.execute(text(expand_sql(panels["Latest window per feature"].sql, {"model": "m"},
                                              now - timedelta(hours=6), now))).mappings().all()
    assert {row.metric for row in heatmap} == {*FEATURES, "prediction", "(numeric)"}
    assert {row["feature"]: row["drifted"] for row in latest} == {**dict.fromkeys(FEATURES, False), "prediction": True,
                                                                  "(numeric)": False}
