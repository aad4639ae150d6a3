"""Microsoft Teams: one Adaptive Card (version 1.4) per notification, to an incoming-webhook or workflow URL.

The message is ``{"type": "message", "attachments": [{"contentType":
"application/vnd.microsoft.card.adaptive", "content": <card>}]}``, which both Teams' incoming webhooks
and the "post to a channel when a webhook request is received" workflows take. TextBlocks render a
subset of Markdown, so every piece of data (model, feature, segment and category names) is escaped
(:func:`teams_escape`): a name cannot make a link, a heading or bold text. The URL is the route's
credential: give it with ``url_env`` or ``url_file``.
"""

from __future__ import annotations

import re
from typing import Any

from driftwarden.alerting.payloads import (alert_description, alert_summary, evidence_text, group_status,
                                           segments_text)
from driftwarden.alerting.rules import AlertRules

CARD_VERSION = "1.4"
CONTENT_TYPE = "application/vnd.microsoft.card.adaptive"
MAX_ALERTS = 20  # Teams refuses messages over about 28 KB
_MARKDOWN = re.compile(r"([\\`*_{}\[\]()#+\-.!<>|~])")
_COLORS = {"firing": "Attention", "nodata": "Warning", "resolved": "Good"}


def teams_escape(text: str) -> str:
    """Backslash-escape Markdown's special characters so that data renders as itself.

    >>> teams_escape("[click](http://x) *now*")
    '\\\\[click\\\\]\\\\(http://x\\\\) \\\\*now\\\\*'
    """
    return _MARKDOWN.sub(r"\\\1", text)


def card_message(route: str, group: dict[str, str], alerts: list[dict[str, Any]], truncated: int,
                 rules: AlertRules) -> dict[str, Any]:
    """The Teams message of one notification: a header, one container per alert, a dashboard button."""
    where = ", ".join(f"{k} {v}" for k, v in sorted(group.items())) or "all models"
    counts = {s: sum(a["status"] == s for a in alerts) for s in ("firing", "nodata", "resolved")}
    title = f"Drift on {where}: " + ", ".join(f"{n} {s}" for s, n in counts.items() if n)
    body: list[dict[str, Any]] = [{"type": "TextBlock", "text": teams_escape(title), "weight": "Bolder",
                                   "size": "Medium", "wrap": True,
                                   "color": "Good" if group_status(alerts) == "resolved" else "Attention"}]
    body += [_alert_container(a) for a in alerts[:MAX_ALERTS]]
    more = len(alerts) - MAX_ALERTS + truncated
    if more > 0:
        body.append({"type": "TextBlock", "text": f"and {more} more alerts", "isSubtle": True, "wrap": True})
    card: dict[str, Any] = {"$schema": "http://adaptivecards.io/schemas/adaptive-card.json", "type": "AdaptiveCard",
                            "version": CARD_VERSION, "body": body, "fallbackText": teams_escape(title)}
    links = list(dict.fromkeys(a["links"]["dashboard"] for a in alerts if a["links"]["dashboard"]))
    if links:
        card["actions"] = [{"type": "Action.OpenUrl", "title": "Dashboard", "url": links[0]}]
    return {"type": "message", "attachments": [{"contentType": CONTENT_TYPE, "contentUrl": None, "content": card}]}


def _alert_container(alert: dict[str, Any]) -> dict[str, Any]:
    """One alert: its summary line and its facts (severity, window, scores, evidence, segments, replay)."""
    facts = [("State", alert["status"]), ("Severity", alert["severity"]),
             ("Window", f"{alert['window']['start']} to {alert['window']['end']}"),
             ("Scores", alert_description(alert).split("\n")[0]), ("Evidence", evidence_text(alert)),
             ("Segments", segments_text(alert, limit=10).replace("\n", "; ")),
             ("Replay", alert["links"]["replay"])]
    return {"type": "Container", "items": [
        {"type": "TextBlock", "text": teams_escape(alert_summary(alert)), "wrap": True, "weight": "Bolder",
         "color": _COLORS[alert["status"]]},
        {"type": "FactSet", "facts": [{"title": t, "value": teams_escape(v)} for t, v in facts if v]},
    ]}
