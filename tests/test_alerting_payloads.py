"""Webhook bodies: native validates against its JSON schema; Alertmanager v4 and Slack shapes."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import jsonschema
import pytest

from alerting.payloads import alert_document, render
from alerting.records import Alert, FeatureOutcome
from alerting.rules import AlertRules

SCHEMA = json.loads((Path(__file__).resolve().parent.parent / "schemas" / "webhook_payload.schema.json").read_text())
T0 = datetime(2026, 3, 1, 12, tzinfo=timezone.utc)
RULES = AlertRules(replay_topic="features-prod",
                   dashboard_url="https://grafana.example.com/d/driftwarden-model?var-model={model}&from={from_ms}&to={to_ms}")


def sample_alerts() -> list[dict]:
    deep = FeatureOutcome("amount", "numeric", 5000, 3, 0.21, 0.4, 1.5, True, 0.2, 1e-12, 0.41, 1.4, 1e-10, True, "major")
    gate_only = FeatureOutcome("country", "categorical", 5000, 0, None, float("nan"), float("inf"), True,
                               drifted=True, severity="minor")
    firing = Alert("0123456789abcdef", "firing", "fraud v2", "major", (deep, gate_only), T0, T0 + timedelta(minutes=5), T0)
    resolved = Alert("fedcba9876543210", "resolved", "fraud v2", "minor", (gate_only,), T0, T0 + timedelta(minutes=5),
                     T0 - timedelta(hours=1), T0)
    return [alert_document(firing, RULES), alert_document(resolved, RULES)]


def test_native_body_matches_the_schema_and_links_the_evidence() -> None:
    body = json.loads(render("native", "oncall", "fraud v2", sample_alerts()))
    jsonschema.validate(body, SCHEMA, format_checker=jsonschema.FormatChecker())
    first = body["alerts"][0]
    assert body["counts"] == {"firing": 1, "resolved": 1} and body["status"] == "firing"
    assert first["links"]["replay"] == ("driftwarden replay --topic features-prod "
                                        "--from 2026-03-01T12:00:00Z --to 2026-03-01T12:05:00Z")
    assert "var-model=fraud%20v2" in first["links"]["dashboard"]
    assert first["features"][0]["deep"]["p_adjusted"] == 1e-10
    assert first["features"][1]["deep"] is None
    assert first["features"][1]["gate"]["psi"] is None  # NaN is not valid JSON


def test_schema_rejects_a_body_missing_its_version() -> None:
    body = json.loads(render("native", "oncall", "fraud v2", sample_alerts()))
    del body["version"]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(body, SCHEMA)


def test_alertmanager_body_has_the_v4_fields() -> None:
    body = json.loads(render("alertmanager", "am", "fraud v2", sample_alerts()))
    assert body["version"] == "4" and body["receiver"] == "am" and body["status"] == "firing"
    assert set(body) >= {"groupKey", "truncatedAlerts", "groupLabels", "commonLabels", "commonAnnotations",
                         "externalURL", "alerts"}
    firing, resolved = body["alerts"]
    assert firing["labels"] == {"alertname": "DriftwardenFeatureDrift", "model": "fraud v2", "severity": "major",
                                "features": "amount,country"}
    assert firing["endsAt"] == "0001-01-01T00:00:00Z" and resolved["endsAt"] == "2026-03-01T12:00:00Z"
    assert body["commonLabels"] == {"alertname": "DriftwardenFeatureDrift", "model": "fraud v2"}
    assert firing["annotations"]["replay_command"].startswith("driftwarden replay --topic features-prod")


def test_slack_body_has_text_and_bounded_blocks() -> None:
    many = sample_alerts() * 15
    body = json.loads(render("slack", "chat", "fraud v2", many))
    assert body["text"].startswith("Drift on fraud v2: 15 firing, 15 resolved")
    assert len(body["blocks"]) <= 50
    assert body["blocks"][-1]["type"] == "context"
    assert "psi=0.4" in body["blocks"][1]["text"]["text"]


def test_unknown_format_names_the_valid_ones() -> None:
    with pytest.raises(ValueError, match="native, alertmanager, slack"):
        render("teams", "r", "m", sample_alerts())
