"""Webhook bodies: native validates against its JSON schema; Alertmanager v4 and Slack shapes; Slack escaping."""

from __future__ import annotations

import json
import re
from datetime import datetime, timedelta, timezone
from pathlib import Path

import jsonschema
import pytest

from driftwarden.alerting.fingerprint import fingerprint, segment_key
from driftwarden.alerting.payloads import alert_document, render, slack_escape
from driftwarden.core.records import Alert, FeatureOutcome
from driftwarden.alerting.rules import AlertRules

SCHEMA = json.loads((Path(__file__).resolve().parent.parent / "schemas" / "webhook_payload.schema.json").read_text())
T0 = datetime(2026, 3, 1, 12, tzinfo=timezone.utc)
RULES = AlertRules(replay_topic="features-prod",
                   dashboard_url="https://grafana.example.com/d/driftwarden-model?var-model={model}&from={from_ms}&to={to_ms}")
GROUP = {"model": "fraud v2"}


def alert(status: str, outcome: FeatureOutcome, model: str = "fraud v2", severity: str = "major") -> dict:
    ends = T0 if status == "resolved" else None
    record = Alert(fingerprint(model, outcome.name, outcome.segment), status, model, outcome.name, outcome.segment,
                   severity, outcome, T0, T0 + timedelta(minutes=5), T0 - timedelta(hours=1), ends)
    return alert_document(record, RULES)


def sample_alerts() -> list[dict]:
    deep = FeatureOutcome("amount", "numeric", 5000, 3, 0.21, 0.4, 1.5, True, 0.2, 1e-12, 0.41, 1.4, 1e-10, True, "major")
    gate_only = FeatureOutcome("country", "categorical", 5000, 0, None, float("nan"), float("inf"), True,
                               drifted=True, severity="moderate", segment={"region": "eu"})
    return [alert("firing", deep), alert("resolved", gate_only, severity="moderate")]


def test_native_body_matches_the_schema_and_links_the_evidence() -> None:
    body = json.loads(render("native", "oncall", GROUP, sample_alerts()))
    jsonschema.validate(body, SCHEMA, format_checker=jsonschema.FormatChecker())
    first, second = body["alerts"]
    assert body["counts"] == {"firing": 1, "resolved": 1, "nodata": 0} and body["status"] == "firing"
    assert body["group_key"] == '{}:{model="fraud v2"}' and body["truncated_alerts"] == 0
    assert first["links"]["replay"] == ("driftwarden replay --topic features-prod "
                                        "--from 2026-03-01T12:00:00Z --to 2026-03-01T12:05:00Z")
    assert "var-model=fraud%20v2" in first["links"]["dashboard"]
    assert (first["feature"], first["segment"]) == ("amount", None) and second["segment"] == {"region": "eu"}
    assert first["latest"]["deep"]["p_adjusted"] == 1e-10
    assert second["latest"]["deep"] is None
    assert second["latest"]["gate"]["psi"] is None  # NaN is not valid JSON


def test_schema_rejects_a_body_missing_its_version() -> None:
    body = json.loads(render("native", "oncall", GROUP, sample_alerts()))
    del body["version"]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(body, SCHEMA)


@pytest.mark.parametrize("fmt", ["native", "alertmanager"])
def test_top_level_status_is_resolved_only_when_every_alert_resolved(fmt: str) -> None:
    firing, resolved = sample_alerts()
    nodata = {**firing, "status": "nodata"}
    assert json.loads(render(fmt, "r", GROUP, [resolved, {**resolved, "fingerprint": "0" * 16}]))["status"] == "resolved"
    assert json.loads(render(fmt, "r", GROUP, [resolved, firing]))["status"] == "firing"
    assert json.loads(render(fmt, "r", GROUP, [resolved, nodata]))["status"] == "firing"


def test_alertmanager_body_has_the_v4_fields() -> None:
    body = json.loads(render("alertmanager", "am", GROUP, sample_alerts(), truncated=7))
    assert body["version"] == "4" and body["receiver"] == "am" and body["status"] == "firing"
    assert set(body) == {"version", "groupKey", "truncatedAlerts", "status", "receiver", "groupLabels", "commonLabels",
                         "commonAnnotations", "externalURL", "alerts"}
    assert body["truncatedAlerts"] == 7 and body["groupLabels"] == GROUP
    assert body["groupKey"] == '{}:{model="fraud v2"}'
    firing, resolved = body["alerts"]
    for a in body["alerts"]:
        assert set(a) == {"status", "labels", "annotations", "startsAt", "endsAt", "generatorURL", "fingerprint"}
    assert firing["labels"] == {"alertname": "DriftwardenFeatureDrift", "model": "fraud v2", "feature": "amount",
                                "severity": "major"}
    assert resolved["labels"]["segment"] == "region=eu"
    assert firing["endsAt"] == "0001-01-01T00:00:00Z" and resolved["endsAt"] == "2026-03-01T12:00:00Z"
    assert firing["fingerprint"] == fingerprint("fraud v2", "amount")
    assert body["commonLabels"] == {"alertname": "DriftwardenFeatureDrift", "model": "fraud v2"}
    assert firing["annotations"]["replay_command"].startswith("driftwarden replay --topic features-prod")


def test_alertmanager_nodata_is_firing_with_its_state_annotated() -> None:
    firing, _ = sample_alerts()
    body = json.loads(render("alertmanager", "am", GROUP, [{**firing, "status": "nodata"}]))
    assert body["alerts"][0]["status"] == "firing" and body["alerts"][0]["annotations"]["state"] == "nodata"


def test_slack_body_has_text_and_bounded_blocks() -> None:
    many = sample_alerts() * 15
    body = json.loads(render("slack", "chat", GROUP, many, truncated=5))
    assert body["text"].startswith("Drift on model fraud v2: 15 firing, 15 resolved")
    assert len(body["blocks"]) <= 50
    assert body["blocks"][-1] == {"type": "context", "elements": [{"type": "mrkdwn", "text": "and 15 more alerts"}]}
    assert "psi=0.4" in body["blocks"][1]["text"]["text"]


def test_slack_escapes_names_so_they_cannot_mention_or_link() -> None:
    evil_model = "<!channel> & <https://evil.example|click>"
    outcome = FeatureOutcome("<@U123>", "numeric", 100, 0, drifted=True, severity="major", segment={"k": "<!here>"})
    body = json.loads(render("slack", "chat", {"model": evil_model}, [alert("firing", outcome, model=evil_model)]))
    texts = [body["text"]] + [b["text"]["text"] for b in body["blocks"] if "text" in b]
    for text in texts:
        data = re.sub(r"<https://grafana\.example\.com/[^<>|]*\|dashboard>", "", text)  # our own link stays a link
        assert "<" not in data and ">" not in data, text
        assert re.search(r"&(?!amp;|lt;|gt;)", data) is None, text
    assert "&lt;!channel&gt; &amp; &lt;https://evil.example|click&gt;" in body["text"]
    assert "&lt;@U123&gt;" in body["blocks"][1]["text"]["text"] and "&lt;!here&gt;" in body["blocks"][1]["text"]["text"]
    assert slack_escape("a<b>&c") == "a&lt;b&gt;&amp;c"


def test_unknown_format_names_the_valid_ones() -> None:
    with pytest.raises(ValueError, match="native, alertmanager, slack"):
        render("carrier-pigeon", "r", GROUP, sample_alerts())


def test_a_segment_label_is_the_stored_segment_text() -> None:
    """The Alertmanager ``segment`` label is the store's text of the segment, escaped alike (one rule)."""
    firing, _ = sample_alerts()
    crafted = {**firing, "segment": {"a": "x,b=y", "b": "z"}}
    body = json.loads(render("alertmanager", "am", GROUP, [crafted]))
    assert body["alerts"][0]["labels"]["segment"] == segment_key(crafted["segment"]) == "a=x\\,b\\=y,b=z"
