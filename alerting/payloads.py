"""Webhook bodies: the native versioned JSON, an Alertmanager-v4-compatible body, a Slack body.

The outbox stores each alert in its native form (:func:`alert_document`); a delivery renders the
group of alerts of one (model, route) into the route's format with :func:`render`. Bodies are
rendered once, when a group is sealed, so that every retry sends the same bytes.
"""

from __future__ import annotations

import json
import math
from datetime import datetime, timedelta
from typing import Any, Callable, Sequence
from urllib.parse import quote

from alerting.records import Alert, FeatureOutcome, utc
from alerting.rules import AlertRules

NATIVE_VERSION = "1"
NATIVE_TYPE = "driftwarden.alerts"
ALERTNAME = "DriftwardenFeatureDrift"
_ZERO_TIME = "0001-01-01T00:00:00Z"
_SLACK_MAX_ALERTS = 20


def rfc3339(moment: datetime | None) -> str | None:
    """Format a datetime as RFC 3339 UTC with a ``Z`` suffix (None stays None)."""
    if moment is None:
        return None
    return utc(moment).isoformat().replace("+00:00", "Z")


def replay_command(topic: str, start: datetime, end: datetime) -> str:
    """Return the CLI command that replays the evidence of one window."""
    return f"driftwarden replay --topic {topic} --from {rfc3339(start)} --to {rfc3339(end)}"


def dashboard_link(rules: AlertRules, model: str, start: datetime, end: datetime) -> str | None:
    """Return the dashboard URL for a model around one window (None when not configured)."""
    if not rules.dashboard_url:
        return None
    width = end - start
    return rules.dashboard_url.format(
        model=quote(model, safe=""), from_ms=_ms(start - 10 * width), to_ms=_ms(end + max(width, timedelta(0))))


def alert_document(alert: Alert, rules: AlertRules) -> dict[str, Any]:
    """Return the native JSON object of one alert, links included."""
    return {
        "fingerprint": alert.fingerprint,
        "status": alert.status,
        "model": alert.model,
        "severity": alert.severity,
        "window": {"start": rfc3339(alert.window_start), "end": rfc3339(alert.window_end)},
        "starts_at": rfc3339(alert.starts_at),
        "ends_at": rfc3339(alert.ends_at),
        "features": [feature_document(f) for f in alert.features],
        "links": {
            "replay": replay_command(rules.replay_topic, alert.window_start, alert.window_end),
            "dashboard": dashboard_link(rules, alert.model, alert.window_start, alert.window_end),
        },
    }


def feature_document(feature: FeatureOutcome) -> dict[str, Any]:
    """Return the native JSON object of one feature's verdict and scores."""
    deep = {"ks_stat": feature.ks_stat, "ks_pvalue": feature.ks_pvalue, "psi": feature.psi,
            "emd": feature.emd, "p_adjusted": feature.p_adjusted}
    return {
        "name": feature.name, "kind": feature.kind, "count": feature.count, "missing": feature.missing,
        "severity": feature.severity, "drifted": feature.drifted,
        "gate": {"ks": _num(feature.gate_ks), "psi": _num(feature.gate_psi), "emd": _num(feature.gate_emd),
                 "alarm": feature.alarm},
        "deep": {k: _num(v) for k, v in deep.items()} if any(v is not None for v in deep.values()) else None,
    }


def render(fmt: str, route: str, model: str, alerts: Sequence[dict[str, Any]]) -> bytes:
    """Render the alerts of one (model, route) group as the body of one POST in format ``fmt``."""
    try:
        renderer = _RENDERERS[fmt]
    except KeyError:
        raise ValueError(f"unknown payload format {fmt!r}; valid: {', '.join(_RENDERERS)}") from None
    return json.dumps(renderer(route, model, list(alerts)), separators=(",", ":"), allow_nan=False).encode()


def native_body(route: str, model: str, alerts: list[dict[str, Any]]) -> dict[str, Any]:
    """Return the native versioned body (see schemas/webhook_payload.schema.json)."""
    firing = sum(a["status"] == "firing" for a in alerts)
    return {
        "version": NATIVE_VERSION, "type": NATIVE_TYPE, "route": route, "model": model,
        "group_key": f"{route}/{model}", "status": "firing" if firing else "resolved",
        "counts": {"firing": firing, "resolved": len(alerts) - firing}, "alerts": alerts,
    }


def alertmanager_body(route: str, model: str, alerts: list[dict[str, Any]]) -> dict[str, Any]:
    """Return a body compatible with Alertmanager's webhook_config (version 4)."""
    am_alerts = [_am_alert(a) for a in alerts]
    common = dict(set.intersection(*(set(a["labels"].items()) for a in am_alerts))) if am_alerts else {}
    dashboard = next((a["links"]["dashboard"] for a in alerts if a["links"]["dashboard"]), "")
    return {
        "version": "4", "groupKey": f'{{}}:{{model="{model}"}}', "truncatedAlerts": 0,
        "status": "firing" if any(a["status"] == "firing" for a in alerts) else "resolved",
        "receiver": route, "groupLabels": {"model": model}, "commonLabels": common,
        "commonAnnotations": {}, "externalURL": dashboard, "alerts": am_alerts,
    }


def slack_body(route: str, model: str, alerts: list[dict[str, Any]]) -> dict[str, Any]:
    """Return a Slack incoming-webhook body (``text`` fallback plus Block Kit sections)."""
    firing = [a for a in alerts if a["status"] == "firing"]
    title = f"Drift on {model}: {len(firing)} firing, {len(alerts) - len(firing)} resolved"
    blocks: list[dict[str, Any]] = [{"type": "header", "text": {"type": "plain_text", "text": title[:150]}}]
    for alert in alerts[:_SLACK_MAX_ALERTS]:
        blocks.append({"type": "section", "text": {"type": "mrkdwn", "text": _slack_text(alert)}})
    if len(alerts) > _SLACK_MAX_ALERTS:
        blocks.append({"type": "context", "elements": [
            {"type": "mrkdwn", "text": f"and {len(alerts) - _SLACK_MAX_ALERTS} more alerts"}]})
    return {"text": title, "blocks": blocks}


def _am_alert(alert: dict[str, Any]) -> dict[str, Any]:
    """Translate one native alert into an Alertmanager alert object."""
    names = ",".join(f["name"] for f in alert["features"])
    return {
        "status": alert["status"],
        "labels": {"alertname": ALERTNAME, "model": alert["model"], "severity": alert["severity"], "features": names},
        "annotations": {"summary": f"{alert['model']}: {names} drifted ({alert['severity']})",
                        "description": _describe(alert), "replay_command": alert["links"]["replay"]},
        "startsAt": alert["starts_at"], "endsAt": alert["ends_at"] or _ZERO_TIME,
        "generatorURL": alert["links"]["dashboard"] or "", "fingerprint": alert["fingerprint"],
    }


def _slack_text(alert: dict[str, Any]) -> str:
    """One Slack mrkdwn paragraph for an alert."""
    icon = ":red_circle:" if alert["status"] == "firing" else ":large_green_circle:"
    link = f" · <{alert['links']['dashboard']}|dashboard>" if alert["links"]["dashboard"] else ""
    return (f"{icon} *{alert['status']}* `{alert['severity']}` {alert['window']['start']} → {alert['window']['end']}"
            f"{link}\n{_describe(alert)}\n`{alert['links']['replay']}`")[:3000]


def _describe(alert: dict[str, Any]) -> str:
    """A one-line-per-feature summary of scores."""
    return "\n".join(f"{f['name']}: {f['severity']} psi={_fmt(f['gate']['psi'])} ks={_fmt(f['gate']['ks'])}"
                     f" emd={_fmt(f['gate']['emd'])}" for f in alert["features"])


def _fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.4g}"


def _num(value: float | None) -> float | None:
    """JSON-safe number: NaN and infinities become None."""
    return None if value is None or not math.isfinite(value) else float(value)


def _ms(moment: datetime) -> int:
    return int(utc(moment).timestamp() * 1000)


_RENDERERS: dict[str, Callable[[str, str, list[dict[str, Any]]], dict[str, Any]]] = {
    "native": native_body, "alertmanager": alertmanager_body, "slack": slack_body,
}
