"""PagerDuty Events API v2: one event per alert, ``trigger`` while it fires, ``resolve`` when it resolves.

Every event of one alert identity (model, feature, segment) carries the same ``dedup_key``
(``driftwarden/<monitor>/<fingerprint>``), so PagerDuty keeps one alert per drifting feature: a
repeat or a severity upgrade is a new ``trigger`` on the open alert (added to its log), a
``resolve`` closes it. The stored delivery holds the event without its ``routing_key`` (the
integration key is a secret): :func:`preparer` adds it when the event is sent. Documented limits
are kept: summary at most 1024 characters, dedup_key at most 255.
"""

from __future__ import annotations

import json
from typing import Any

from driftwarden.alerting.payloads import (alert_description, alert_summary, evidence_text, segments_text)
from driftwarden.alerting.rules import AlertRules

#: driftwarden's severities as PagerDuty's (critical, error, warning, info).
SEVERITIES = {"major": "critical", "moderate": "error", "minor": "warning", "none": "info"}
SUMMARY_MAX = 1024
DEDUP_KEY_MAX = 255


def dedup_key(monitor: str, fingerprint: str) -> str:
    """The stable PagerDuty dedup_key of one alert identity."""
    return f"driftwarden/{monitor}/{fingerprint}"[:DEDUP_KEY_MAX]


def event_document(route: str, group: dict[str, str], alerts: list[dict[str, Any]], truncated: int,
                   rules: AlertRules) -> dict[str, Any]:
    """The Events API v2 event of one alert (a PagerDuty route groups by alert identity), without routing_key."""
    if len(alerts) != 1:
        raise ValueError(f"a PagerDuty event holds one alert, got {len(alerts)}")
    alert = alerts[0]
    key = dedup_key(rules.monitor, alert["fingerprint"])
    if alert["status"] == "resolved":
        return {"event_action": "resolve", "dedup_key": key}
    event: dict[str, Any] = {
        "event_action": "trigger", "dedup_key": key, "client": "driftwarden",
        "payload": {
            "summary": alert_summary(alert)[:SUMMARY_MAX], "source": rules.monitor,
            "severity": SEVERITIES[alert["severity"]], "timestamp": alert["window"]["end"],
            "component": alert["model"], "group": alert["model"], "class": "feature drift",
            "custom_details": _details(alert),
        },
    }
    if alert["links"]["dashboard"]:
        event["client_url"] = alert["links"]["dashboard"]
        event["links"] = [{"href": alert["links"]["dashboard"], "text": "dashboard"}]
    return event


def _details(alert: dict[str, Any]) -> dict[str, Any]:
    """What the on-call person reads in PagerDuty: identity, state, scores, evidence, segments, how to replay."""
    details = {"model": alert["model"], "feature": alert["feature"], "segment": alert["segment"],
               "severity": alert["severity"], "state": alert["status"], "window": alert["window"],
               "starts_at": alert["starts_at"], "scores": alert_description(alert),
               "replay_command": alert["links"]["replay"]}
    for key, text in (("evidence", evidence_text(alert)), ("segments", segments_text(alert))):
        if text:
            details[key] = text
    return details


def with_routing_key(body: bytes, routing_key: str) -> bytes:
    """The stored event with the integration key added (at send time only)."""
    event = json.loads(body)
    return json.dumps({"routing_key": routing_key, **event}, separators=(",", ":"), allow_nan=False).encode()


def preparer(routing_key: str):
    """The sink's ``prepare`` for a PagerDuty route."""
    return lambda body, _now_s: with_routing_key(body, routing_key)
