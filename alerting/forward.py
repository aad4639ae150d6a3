"""Forwarding to an Alertmanager: its API v2 (``POST /api/v2/alerts``) and its client contract.

A route of kind ``alertmanager`` hands every alert state to the Alertmanager the team already runs
(silences, inhibitions, routing and on-call schedules live there). Per Alertmanager's contract a
client sends each firing alert again before its ``endsAt`` lapses (the route's ``resend_interval``;
``endsAt`` = send time + 4 x resend_interval, as Prometheus sets it) and resolves an alert by
sending it with ``endsAt`` = now. The stored delivery is a forwarding document, ``{"firing":
[...], "resolved": [...]}``; :func:`postable_body` stamps ``endsAt`` when it is sent, so a retry
after an outage never carries a lapsed ``endsAt`` (which Alertmanager would read as resolved).

Labels (an Alertmanager alert's identity): ``alertname`` (DriftwardenFeatureDrift), ``monitor``,
``model``, ``feature``, ``segment`` (absent for the global view) and ``severity``. A severity
upgrade is a new label set, so it is forwarded as the old severity's alert resolved and the new
one firing, in one POST (:func:`add_replaced`).
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from typing import Any, Iterable

from driftwarden.alerting.payloads import (alert_description, alert_labels, alert_summary, evidence_text, rfc3339,
                                           segments_text)
from driftwarden.alerting.rules import ENDS_AT_RESENDS, AlertRules, Route

API_PATH = "/api/v2/alerts"


def alerts_url(base: str) -> str:
    """The API v2 alerts endpoint of an Alertmanager at ``base`` (its external URL, path prefix kept)."""
    return base.rstrip("/") + API_PATH


def forward_document(route: str, group: dict[str, str], alerts: list[dict[str, Any]], truncated: int,
                     rules: AlertRules) -> dict[str, Any]:
    """The forwarding document of one notification: its alerts as Alertmanager alerts, firing and resolved."""
    entries = [(a["status"], postable_alert(a, rules.monitor)) for a in alerts]
    return {"firing": [e for status, e in entries if status != "resolved"],
            "resolved": [e for status, e in entries if status == "resolved"]}


def postable_alert(alert: dict[str, Any], monitor: str) -> dict[str, Any]:
    """One native alert as an Alertmanager postable alert, without ``endsAt`` (stamped when sent)."""
    annotations = {"summary": alert_summary(alert), "description": alert_description(alert),
                   "state": alert["status"], "replay_command": alert["links"]["replay"]}
    optional = {"evidence": evidence_text(alert), "segments": segments_text(alert),
                "dashboard": alert["links"]["dashboard"] or ""}
    annotations.update({k: v for k, v in optional.items() if v})
    entry = {"fingerprint": alert["fingerprint"], "labels": {**alert_labels(alert), "monitor": monitor},
             "annotations": annotations, "startsAt": alert["starts_at"]}
    if alert["links"]["dashboard"]:
        entry["generatorURL"] = alert["links"]["dashboard"]
    return entry


def add_replaced(body: bytes, previous: Iterable[str]) -> bytes:
    """Add to a forwarding document, as resolved, the alerts ``previous`` deliveries told firing under labels
    its alerts no longer carry (a severity upgrade): Alertmanager then resolves them instead of letting them
    fire on until their endsAt lapses."""
    document = json.loads(body)
    current = {e["fingerprint"]: e["labels"] for e in document["firing"] + document["resolved"]}
    told: dict[tuple[str, str], dict[str, Any]] = {}
    for text in previous:
        try:
            old = json.loads(text)
        except ValueError:
            continue
        for entry in old.get("firing", []) if isinstance(old, dict) else []:
            labels = entry.get("labels")
            if entry.get("fingerprint") in current and labels != current[entry["fingerprint"]]:
                told[entry["fingerprint"], json.dumps(labels, sort_keys=True)] = entry
    if not told:
        return body
    document["resolved"] += list(told.values())
    return json.dumps(document, separators=(",", ":"), allow_nan=False).encode()


def postable_body(document: bytes, now_s: float, route: Route) -> bytes:
    """The JSON array POSTed to Alertmanager: firing alerts with ``endsAt`` = now + 4 resend intervals,
    resolved ones with ``endsAt`` = now (never before their ``startsAt``)."""
    doc = json.loads(document)
    now = datetime.fromtimestamp(now_s, timezone.utc)
    lapse = now + ENDS_AT_RESENDS * route.resend_interval
    alerts = [_stamped(e, lapse) for e in doc["firing"]] + [_stamped(e, now) for e in doc["resolved"]]
    return json.dumps(alerts, separators=(",", ":"), allow_nan=False).encode()


def _stamped(entry: dict[str, Any], ends: datetime) -> dict[str, Any]:
    """An entry as a postable alert (no fingerprint: Alertmanager computes its own) ending at ``ends``."""
    alert = {k: v for k, v in entry.items() if k != "fingerprint"}
    starts = datetime.fromisoformat(alert["startsAt"].replace("Z", "+00:00"))
    alert["endsAt"] = rfc3339(max(ends, starts + timedelta(milliseconds=1)))
    return alert


def preparer(route: Route):
    """The sink's ``prepare`` for an Alertmanager route: the document stamped at send time."""
    return lambda body, now_s: postable_body(body, now_s, route)
