"""Webhook bodies: the native versioned JSON, an Alertmanager-v4-compatible body, a Slack body.

The outbox stores each alert's newest state in its native form (:func:`alert_document`); a
delivery renders one notification of a (route, group) - every alert of the group with its own
status - into the route's format with :func:`render`. Bodies are rendered once, when a group is
sealed, so that every retry sends the same bytes. Native version 4: one alert per (model,
feature, segment); a feature's global alert lists, in ``segments``, the segment alerts of the
same feature folded under it while it fires (version 3 without that key); for a high-cardinality
categorical feature its unseen-value share against the reference's baseline and the head values
that moved (version 2 without those; version 1 had one alert per drifted feature set). The
on-call tools' formats (Alertmanager's API, PagerDuty, Teams) live in :mod:`alerting.forward`,
:mod:`alerting.pagerduty` and :mod:`alerting.teams`. Value names are data: JSON strings in the
native body, quoted in the text of the other formats, and Slack-escaped in Slack's.
"""

from __future__ import annotations

import json
import math
from datetime import datetime, timedelta
from typing import Any, Callable, Sequence
from urllib.parse import quote

from driftwarden.core.records import ALERT_STATUSES, Alert, FeatureOutcome, utc
from driftwarden.alerting.fingerprint import segment_key
from driftwarden.alerting.rules import AlertRules

NATIVE_VERSION = "4"
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


def alert_document(alert: Alert, rules: AlertRules, segments: Sequence[Alert] = ()) -> dict[str, Any]:
    """Return the native JSON object of one alert (one model, feature and segment), links included;
    ``segments``: the segment alerts folded under this (global) alert."""
    document = {
        "fingerprint": alert.fingerprint,
        "status": alert.status,
        "model": alert.model,
        "feature": alert.feature,
        "segment": dict(alert.segment) if alert.segment else None,
        "severity": alert.severity,
        "window": {"start": rfc3339(alert.window_start), "end": rfc3339(alert.window_end)},
        "starts_at": rfc3339(alert.starts_at),
        "ends_at": rfc3339(alert.ends_at),
        "latest": feature_document(alert.outcome),
        "links": {
            "replay": replay_command(rules.replay_topic, alert.window_start, alert.window_end),
            "dashboard": dashboard_link(rules, alert.model, alert.window_start, alert.window_end),
        },
    }
    if segments:
        document["segments"] = [segment_entry(s) for s in segments]
    return document


def segment_entry(alert: Alert) -> dict[str, Any]:
    """One folded segment alert inside its feature's global alert: identity, state and its latest PSI."""
    return {"fingerprint": alert.fingerprint, "segment": dict(alert.segment or {}), "status": alert.status,
            "severity": alert.severity, "starts_at": rfc3339(alert.starts_at),
            "window": {"start": rfc3339(alert.window_start), "end": rfc3339(alert.window_end)},
            "psi": _num(alert.outcome.psi if alert.outcome.psi is not None else alert.outcome.gate_psi)}


def feature_document(feature: FeatureOutcome) -> dict[str, Any]:
    """Return the native JSON object of one feature's verdict and scores."""
    deep = {"ks_stat": feature.ks_stat, "ks_pvalue": feature.ks_pvalue, "psi": feature.psi,
            "emd": feature.emd, "p_adjusted": feature.p_adjusted}
    document = {
        "name": feature.name, "kind": feature.kind, "count": feature.count, "missing": feature.missing,
        "severity": feature.severity, "drifted": feature.drifted,
        "gate": {"ks": _num(feature.gate_ks), "psi": _num(feature.gate_psi), "emd": _num(feature.gate_emd),
                 "alarm": feature.alarm},
        "deep": {k: _num(v) for k, v in deep.items()} if any(v is not None for v in deep.values()) else None,
    }
    if feature.evidence is not None:  # optional, additive: which test decided and what moved
        document["evidence"] = dict(feature.evidence)
    if feature.unseen_baseline is not None:  # a high-cardinality categorical feature
        document["unseen_share"] = {"window": _num(feature.gate_new_share), "baseline": _num(feature.unseen_baseline)}
        document["moved_values"] = [{"value": v, "reference": _num(r), "window": _num(w)}
                                    for v, r, w in feature.moved_values]
    return document


def group_status(alerts: Sequence[dict[str, Any]]) -> str:
    """A notification's status: ``resolved`` when every alert in it has resolved, else ``firing``."""
    return "resolved" if all(a["status"] == "resolved" for a in alerts) else "firing"


def render(fmt: str, route: str, group: dict[str, str], alerts: Sequence[dict[str, Any]], truncated: int = 0,
           rules: AlertRules | None = None) -> bytes:
    """Render one notification of a (route, group) in format ``fmt``; ``truncated`` alerts were left out."""
    if fmt in _RENDERERS:
        document = _RENDERERS[fmt](route, group, list(alerts), truncated)
    else:
        renderers = _oncall_renderers()
        if fmt not in renderers:
            raise ValueError(f"unknown payload format {fmt!r}; valid: {', '.join([*_RENDERERS, *renderers])}")
        document = renderers[fmt](route, group, list(alerts), truncated, rules or AlertRules())
    return json.dumps(document, separators=(",", ":"), allow_nan=False).encode()


def _oncall_renderers() -> dict[str, Callable[..., Any]]:
    """The on-call tools' formats (their modules import this one's helpers, hence imported here)."""
    from driftwarden.alerting import forward, pagerduty, teams

    return {"alertmanager_v2": forward.forward_document, "pagerduty": pagerduty.event_document,
            "teams": teams.card_message}


def group_key(group: dict[str, str]) -> str:
    """Alertmanager-style group key: ``{}:{label="value",...}`` with values JSON-quoted."""
    return "{}:{" + ",".join(f"{k}={json.dumps(v)}" for k, v in sorted(group.items())) + "}"


def native_body(route: str, group: dict[str, str], alerts: list[dict[str, Any]], truncated: int) -> dict[str, Any]:
    """Return the native versioned body (schemas/webhook_payload.schema.json): the group's alerts, each with its status."""
    counts = {status: sum(a["status"] == status for a in alerts) for status in ALERT_STATUSES}
    return {
        "version": NATIVE_VERSION, "type": NATIVE_TYPE, "route": route, "group_key": group_key(group),
        "group_labels": group, "model": group.get("model"), "status": group_status(alerts), "counts": counts,
        "truncated_alerts": truncated, "alerts": alerts,
    }


def alertmanager_body(route: str, group: dict[str, str], alerts: list[dict[str, Any]],
                      truncated: int) -> dict[str, Any]:
    """Return a body compatible with Alertmanager's webhook_config (version 4)."""
    am_alerts = [_am_alert(a) for a in alerts]
    common = dict(set.intersection(*(set(a["labels"].items()) for a in am_alerts))) if am_alerts else {}
    annotations = dict(set.intersection(*(set(a["annotations"].items()) for a in am_alerts))) if am_alerts else {}
    dashboard = next((a["links"]["dashboard"] for a in alerts if a["links"]["dashboard"]), "")
    return {
        "version": "4", "groupKey": group_key(group), "truncatedAlerts": truncated,
        "status": group_status(alerts), "receiver": route, "groupLabels": group, "commonLabels": common,
        "commonAnnotations": annotations, "externalURL": dashboard, "alerts": am_alerts,
    }


def slack_body(route: str, group: dict[str, str], alerts: list[dict[str, Any]], truncated: int) -> dict[str, Any]:
    """Return a Slack incoming-webhook body (``text`` fallback plus Block Kit sections), data escaped."""
    counts = {status: sum(a["status"] == status for a in alerts) for status in ALERT_STATUSES}
    where = ", ".join(f"{k} {v}" for k, v in sorted(group.items())) or "all models"
    title = slack_escape(f"Drift on {where}: " + ", ".join(f"{n} {s}" for s, n in counts.items() if n))
    blocks: list[dict[str, Any]] = [{"type": "header", "text": {"type": "plain_text", "text": title[:150]}}]
    for alert in alerts[:_SLACK_MAX_ALERTS]:
        blocks.append({"type": "section", "text": {"type": "mrkdwn", "text": _slack_text(alert)}})
    more = len(alerts) - _SLACK_MAX_ALERTS + truncated
    if more > 0:
        blocks.append({"type": "context", "elements": [{"type": "mrkdwn", "text": f"and {more} more alerts"}]})
    return {"text": title, "blocks": blocks}


def slack_escape(text: str) -> str:
    """Escape ``&``, ``<`` and ``>`` as Slack requires, so data cannot form a mention, link or command."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def alert_labels(alert: dict[str, Any]) -> dict[str, str]:
    """Alertmanager labels of one alert (identity plus severity)."""
    labels = {"alertname": ALERTNAME, "model": alert["model"], "feature": alert["feature"],
              "severity": alert["severity"]}
    if alert.get("segment"):
        labels["segment"] = segment_key(alert["segment"])
    return labels


def _am_alert(alert: dict[str, Any]) -> dict[str, Any]:
    """Translate one native alert into an Alertmanager alert object (``nodata`` is firing, state in annotations)."""
    return {
        "status": "resolved" if alert["status"] == "resolved" else "firing",
        "labels": alert_labels(alert),
        "annotations": {"summary": alert_summary(alert), "description": alert_description(alert),
                        "state": alert["status"], "replay_command": alert["links"]["replay"],
                        **_cardinality_annotations(alert)},
        "startsAt": alert["starts_at"], "endsAt": alert["ends_at"] or _ZERO_TIME,
        "generatorURL": alert["links"]["dashboard"] or "", "fingerprint": alert["fingerprint"],
    }


def alert_summary(alert: dict[str, Any]) -> str:
    """One line: model, feature (and segment), what it does, its severity and the segments folded under it."""
    segment = f" [{alert_labels(alert)['segment']}]" if alert.get("segment") else ""
    what = {"firing": "drifts", "resolved": "no longer drifts", "nodata": "has no data"}[alert["status"]]
    active = sum(s["status"] != "resolved" for s in alert.get("segments") or ())
    inside = f", in {active} of its segments too" if active else ""
    return f"{alert['model']}: {alert['feature']}{segment} {what} ({alert['severity']}){inside}"


def segments_text(alert: dict[str, Any], limit: int = 20) -> str:
    """The segment alerts folded under a global alert, one per line (empty when none)."""
    folded = alert.get("segments") or []
    lines = [f"{segment_key(s['segment'])}: {s['status']} {s['severity']} psi={_fmt(s['psi'])}" for s in folded[:limit]]
    if len(folded) > limit:
        lines.append(f"and {len(folded) - limit} more segments")
    return "\n".join(lines)


def _slack_text(alert: dict[str, Any]) -> str:
    """One Slack mrkdwn paragraph for an alert; every piece of data escaped."""
    icon = {"firing": ":red_circle:", "resolved": ":large_green_circle:", "nodata": ":white_circle:"}[alert["status"]]
    dashboard = alert["links"]["dashboard"]
    link = f" · <{slack_escape(dashboard)}|dashboard>" if dashboard else ""
    text = (f"{icon} *{alert['status']}* `{slack_escape(alert['severity'])}` {slack_escape(alert_summary(alert))}"
            f"\n{alert['window']['start']} → {alert['window']['end']}{link}\n{slack_escape(alert_description(alert))}"
            f"\n`{slack_escape(alert['links']['replay'])}`")
    return text[:3000]


def alert_description(alert: dict[str, Any]) -> str:
    """The latest window's scores of the alert's feature (and, for a high-cardinality one, its evidence)."""
    f = alert["latest"]
    text = (f"{f['name']}: {f['severity']} psi={_fmt(f['gate']['psi'])} ks={_fmt(f['gate']['ks'])}"
            f" emd={_fmt(f['gate']['emd'])} n={f['count']}")
    notes = _cardinality_annotations(alert)
    folded = segments_text(alert)
    return "\n".join([text, *(f"{key.replace('_', ' ')}: {note}" for key, note in notes.items()),
                      *([f"segments:\n{folded}"] if folded else [])])


def evidence_text(alert: dict[str, Any]) -> str:
    """The deep test that decided the latest verdict, its p-values and effect, and what moved (empty without one)."""
    evidence = alert["latest"].get("evidence")
    if not evidence:
        return ""
    moved = "; ".join(json.dumps(m, separators=(",", ":"), ensure_ascii=False)[:120] for m in evidence["moved"][:3])
    return (f"{evidence['test']}: statistic={_fmt(evidence['statistic'])} p={_fmt(evidence['p_value'])} "
            f"p_adjusted={_fmt(evidence['p_adjusted'])} {evidence['effect']}={_fmt(evidence['effect_size'])}"
            + (f"; moved most: {moved}" if moved else ""))


def format_score(value: float | None) -> str:
    """A score as text: four significant digits, ``n/a`` when unknown."""
    return _fmt(value)


def _cardinality_annotations(alert: dict[str, Any]) -> dict[str, str]:
    """``unseen_share`` and ``moved_values`` as text, for a high-cardinality categorical feature (else none)."""
    f = alert["latest"]
    if not f.get("unseen_share"):
        return {}
    unseen = f["unseen_share"]
    moved = "; ".join(f"{_value_name(m['value'])} {_pct(m['reference'])} → {_pct(m['window'])}"
                      for m in f.get("moved_values", []))
    return {"unseen_share": f"{_pct(unseen['window'])} of the window's values were never seen in the reference "
                            f"(reference baseline {_pct(unseen['baseline'])})",
            "moved_values": moved or "n/a"}


def _value_name(value: str | None) -> str:
    """A category value as text: JSON-quoted (control characters escaped), cut at 60 characters."""
    if value is None:
        return "(all other values)"
    return json.dumps(value if len(value) <= 60 else value[:59] + "…", ensure_ascii=False)


def _pct(share: float | None) -> str:
    return "n/a" if share is None else f"{share * 100:.2f}%"


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
