"""A drifted verdict says why: the analysis result, the store, the replay report and the alert body carry it."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import jsonschema
import numpy as np
import pytest
from sqlalchemy import inspect, select, text, update

from driftwarden.alerting.fingerprint import fingerprint
from driftwarden.alerting.payloads import alert_document, render
from driftwarden.alerting.rules import AlertRules
from driftwarden.core.records import Alert
from driftwarden.core.store import make_engine
from driftwarden.pipeline.judging import analyze_summary
from driftwarden.pipeline.summary import summarize_window
from driftwarden.pipeline.references import reference_from_summaries
from driftwarden.pipeline.results import store_window
from driftwarden.replay.report import SCHEMA_VERSION as REPORT_VERSION, feature_entry, validate_report
from driftwarden.schemas.config import ModelConfig
from driftwarden.schemas.tables import SCHEMA_VERSION, schema_info, window_results
from driftwarden.sketches import DriftPolicy

CONFIG = ModelConfig(name="m", features={"x": "numeric", "c": "categorical"})
CATS = np.array(list("abcde"))


def _events(rng: np.random.Generator, size: int, drift: bool) -> list[dict]:
    x, c = rng.normal(size=size), rng.choice(CATS, size, p=[0.4, 0.3, 0.15, 0.1, 0.05]).astype(object)
    if drift:
        x[:40] = 8.0 + rng.random(40)  # 4% of the window far above the reference's range
        c[:60] = "new-partner"
    return [{"x": float(a), "c": b} for a, b in zip(x, c)]


@pytest.fixture(scope="module")
def report():
    rng = np.random.default_rng(0)
    ref = reference_from_summaries([summarize_window("m", i * 1000, 1000, _events(rng, 1000, False), CONFIG)
                                    for i in range(20)], dict(CONFIG.features), DriftPolicy())
    return analyze_summary(summarize_window("m", 30_000, 1000, _events(rng, 1000, True), CONFIG), ref, DriftPolicy())


def test_each_drifted_feature_says_which_test_decided_and_what_moved(report) -> None:
    x, c = report.features
    assert x.drifted and c.drifted
    assert x.evidence["test"] == "beyond" and x.evidence["p_adjusted"] == x.p_adjusted <= DriftPolicy().alpha
    assert x.evidence["effect"] == "beyond_share" and x.evidence["effect_size"] == pytest.approx(0.04)
    top = x.evidence["moved"][0]
    assert top["q_high"] == 1.0 and top["high"] >= 8.0 and top["win_share"] > top["ref_share"]
    assert c.evidence["test"] == "new" and c.evidence["moved"][0] == {"category": "new-partner", "ref_share": 0.0,
                                                                      "win_share": 0.06}


def test_the_store_keeps_the_evidence_and_upgrades_a_version_2_store(report, tmp_path) -> None:
    url = f"sqlite:///{tmp_path}/s.db"
    engine = make_engine(url)
    with engine.begin() as conn:
        conn.execute(text("ALTER TABLE window_results DROP COLUMN evidence"))
        conn.execute(update(schema_info).values(version=2))
        conn.execute(text("DROP TABLE alembic_version"))  # made before migrations
    engine = make_engine(url)  # upgraded in place: the column is added, the version recorded
    assert "evidence" in {c["name"] for c in inspect(engine).get_columns("window_results")}
    with engine.begin() as conn:
        store_window(conn, report, 1000, 0, None)
        rows = dict(conn.execute(select(window_results.c.feature, window_results.c.evidence)).all())
        assert conn.execute(select(schema_info.c.version)).scalar_one() == SCHEMA_VERSION
    assert json.loads(rows["x"]) == report.features[0].evidence


def test_the_replay_report_entry_carries_it_and_meets_its_schema(report) -> None:
    entry = feature_entry(report.features[0])
    assert entry["evidence"]["test"] == "beyond"
    window = {"model": "m", "window_start": "2026-01-01T00:00:00Z", "window_end": "2026-01-01T00:01:00Z",
              "features": [entry, feature_entry(report.features[1])]}
    counts = {"read": 1, "valid": 1, "rejected": 0, "late": 0}
    doc = {"schema_version": REPORT_VERSION, "windows": [window], "alerts": [], "counts": counts, "rejected": []}
    validate_report(doc)


def test_the_alert_body_carries_it(report) -> None:
    schema = json.loads((Path(__file__).resolve().parent.parent / "schemas" / "webhook_payload.schema.json").read_text())
    t0 = datetime(2026, 3, 1, 12, tzinfo=timezone.utc)
    outcome = report.features[0]
    record = Alert(fingerprint("m", "x", None), "firing", "m", "x", None, "major", outcome, t0,
                   t0 + timedelta(minutes=1), t0, None)
    body = json.loads(render("native", "oncall", {"model": "m"}, [alert_document(record, AlertRules())]))
    jsonschema.validate(body, schema)
    assert body["alerts"][0]["latest"]["evidence"]["test"] == "beyond"
