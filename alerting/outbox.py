"""The alert outbox: verdicts become alert notifications in the same transaction as the results.

The streaming job calls :func:`enqueue_alerts` inside the transaction where it upserts a window's
results, so an alert exists if and only if its results were committed. Re-running a window is
harmless: a report older than the model's latest seen window changes nothing, the same drift
keeps the same fingerprint, and the outbox is unique per (route, fingerprint, window, kind).
The delivery worker later calls :func:`seal_due_groups` to batch a (model, route)'s pending rows
into one delivery with a fixed ``webhook-id`` and body.
"""

from __future__ import annotations

import json
import logging
import uuid
from dataclasses import asdict
from datetime import datetime
from typing import Any, Sequence

from sqlalchemy import Connection, and_, delete, func, insert, select, update
from sqlalchemy.dialects import postgresql, sqlite

from alerting.fingerprint import fingerprint
from alerting.payloads import alert_document, render
from alerting.records import Alert, FeatureOutcome, WindowReport, severity_rank, utc
from alerting.rules import AlertRules, Matcher, matches_all
from driftwarden.store import upsert
from schemas.alert_tables import alert_deliveries, alert_models, alert_outbox, alert_silences, alerts

log = logging.getLogger(__name__)
_WARNED_ROUTES: set[str] = set()  # routes already warned about in this process


def enqueue_alerts(conn: Connection, report: WindowReport, rules: AlertRules, now: datetime) -> int:
    """Update alert state for one (model, window) and write its notifications; return outbox rows written."""
    now = utc(now)
    state = conn.execute(select(alert_models).where(alert_models.c.model == report.model)).first()
    if state is not None and utc(state.last_window_start) > report.window_start:
        return 0
    previous = state.firing_fingerprint if state is not None else None
    drifted = [f for f in report.features if f.drifted and severity_rank(f.severity) >= severity_rank(rules.min_severity)]
    current = _fingerprint_of(report.model, drifted)
    written = 0
    if previous and previous != current:
        written += _resolve(conn, previous, report, rules, now)
    if current:
        written += _fire(conn, current, drifted, report, rules, now)
    upsert(conn, alert_models, [{"model": report.model, "last_window_start": report.window_start,
                                 "firing_fingerprint": current}], keys=("model",))
    return written


def seal_due_groups(conn: Connection, rules: AlertRules, now: datetime) -> list[int]:
    """Batch each (route, model) whose oldest pending row waited ``group_wait`` into one delivery."""
    now = utc(now)
    pending = alert_outbox.c.delivery_id.is_(None)
    due = conn.execute(
        select(alert_outbox.c.route, alert_outbox.c.model).where(pending)
        .group_by(alert_outbox.c.route, alert_outbox.c.model)
        .having(func.min(alert_outbox.c.created_at) <= now - rules.group_wait)
    ).all()
    known = {r.name for r in rules.routes}
    unknown = sorted({route for route, _ in due if route not in known} - _WARNED_ROUTES)
    if unknown:  # left pending: a worker started with the wrong config must not throw the queue away
        _WARNED_ROUTES.update(unknown)
        log.warning("outbox rows wait for routes this worker has no config for: %s", ", ".join(unknown))
    sealed = [_seal_group(conn, rules, route, model, now) for route, model in due if route in known]
    return [d for d in sealed if d is not None]


def active_silences(conn: Connection, now: datetime) -> list[list[Matcher]]:
    """Return the matcher lists of silences in force at ``now``."""
    now = utc(now)
    rows = conn.execute(select(alert_silences.c.matchers).where(
        and_(alert_silences.c.starts_at <= now, alert_silences.c.ends_at > now))).scalars()
    return [[Matcher.model_validate(m) for m in json.loads(text)] for text in rows]


def is_silenced(conn: Connection, model: str, severity: str, now: datetime) -> bool:
    """Return True when a silence in force matches an alert of ``model`` at ``severity``."""
    labels = {"model": model, "severity": severity}
    return any(matches_all(matchers, labels) for matchers in active_silences(conn, now))


def _fingerprint_of(model: str, drifted: Sequence[FeatureOutcome]) -> str | None:
    """Fingerprint of the drifted set at its highest severity (None when nothing drifted)."""
    if not drifted:
        return None
    return fingerprint(model, [f.name for f in drifted], _max_severity(drifted))


def _max_severity(features: Sequence[FeatureOutcome]) -> str:
    return max((f.severity for f in features), key=severity_rank)


def _fire(conn: Connection, fp: str, drifted: list[FeatureOutcome], report: WindowReport,
          rules: AlertRules, now: datetime) -> int:
    """Open or refresh the alert ``fp``; notify when it is new or the repeat interval has passed."""
    row = conn.execute(select(alerts).where(alerts.c.fingerprint == fp)).first()
    severity = _max_severity(drifted)
    values: dict[str, Any] = {
        "model": report.model, "severity": severity, "status": "firing",
        "features": json.dumps(sorted({f.name for f in drifted})), "last_window_start": report.window_start,
        "last_window_end": report.window_end, "details": json.dumps([asdict(f) for f in drifted]), "updated_at": now,
    }
    if row is None or row.status == "resolved":
        values.update(starts_at=report.window_start, ends_at=None, last_notified_at=None, acked_at=None, acked_by=None)
        last_notified, acked = None, False
    else:
        last_notified, acked = row.last_notified_at, row.acked_at is not None
    due = last_notified is None or report.window_end >= utc(last_notified) + rules.repeat_interval
    written = 0
    if due and not acked and not is_silenced(conn, report.model, severity, now):
        alert = Alert(fp, "firing", report.model, severity, tuple(drifted), report.window_start, report.window_end,
                      utc(values.get("starts_at") or row.starts_at))
        written = _write_outbox(conn, alert, rules, now)
        values["last_notified_at"] = report.window_end
    _save_alert(conn, fp, row is None, values)
    return written


def _resolve(conn: Connection, fp: str, report: WindowReport, rules: AlertRules, now: datetime) -> int:
    """Close the alert ``fp`` and send a resolved notice to the routes that were told it fired."""
    row = conn.execute(select(alerts).where(alerts.c.fingerprint == fp)).first()
    if row is None or row.status == "resolved":
        return 0
    conn.execute(update(alerts).where(alerts.c.fingerprint == fp).values(
        status="resolved", ends_at=report.window_start, updated_at=now))
    if row.last_notified_at is None:
        return 0
    features = tuple(FeatureOutcome(**d) for d in json.loads(row.details))
    alert = Alert(fp, "resolved", row.model, row.severity, features, report.window_start, report.window_end,
                  utc(row.starts_at), report.window_start)
    return _write_outbox(conn, alert, rules, now)


def _save_alert(conn: Connection, fp: str, new: bool, values: dict[str, Any]) -> None:
    if new:
        conn.execute(insert(alerts).values(fingerprint=fp, **values))
    else:
        conn.execute(update(alerts).where(alerts.c.fingerprint == fp).values(**values))


def _write_outbox(conn: Connection, alert: Alert, rules: AlertRules, now: datetime) -> int:
    """Insert one outbox row per matching route, skipping rows that already exist."""
    document = json.dumps(alert_document(alert, rules), separators=(",", ":"))
    written = 0
    for route in rules.routes_for(alert.model, alert.severity):
        row = {"route": route.name, "model": alert.model, "fingerprint": alert.fingerprint, "kind": alert.status,
               "window_start": alert.window_start, "window_end": alert.window_end, "alert": document,
               "created_at": now, "delivery_id": None}
        dialect = postgresql if conn.dialect.name == "postgresql" else sqlite
        stmt = dialect.insert(alert_outbox).values(row).on_conflict_do_nothing(
            index_elements=["route", "fingerprint", "window_start", "kind"])
        written += max(conn.execute(stmt).rowcount, 0)
    return written


def _seal_group(conn: Connection, rules: AlertRules, route_name: str, model: str, now: datetime) -> int | None:
    """Create one delivery holding every pending row of (route, model); None if another worker took them."""
    fmt = rules.route(route_name).format
    delivery_id = conn.execute(insert(alert_deliveries).values(
        webhook_id=f"msg_{uuid.uuid4().hex}", route=route_name, model=model, format=fmt, body="", alert_count=0,
        status="pending", attempts=0, created_at=now, next_attempt_at=now)).inserted_primary_key[0]
    taken = conn.execute(update(alert_outbox).where(and_(
        alert_outbox.c.route == route_name, alert_outbox.c.model == model, alert_outbox.c.delivery_id.is_(None),
    )).values(delivery_id=delivery_id)).rowcount
    if not taken:
        conn.execute(delete(alert_deliveries).where(alert_deliveries.c.id == delivery_id))
        return None
    docs = [json.loads(t) for t in conn.execute(select(alert_outbox.c.alert).where(
        alert_outbox.c.delivery_id == delivery_id).order_by(alert_outbox.c.id)).scalars()]
    conn.execute(update(alert_deliveries).where(alert_deliveries.c.id == delivery_id).values(
        body=render(fmt, route_name, model, docs).decode(), alert_count=taken))
    return int(delivery_id)


def prune(conn: Connection, before: datetime) -> dict[str, int]:
    """Delete finished deliveries (and their outbox rows), resolved alerts and expired silences older than ``before``."""
    before = utc(before)
    d = alert_deliveries.c
    done = select(d.id).where(and_(d.status != "pending", d.finished_at < before))
    counts = {"outbox": conn.execute(delete(alert_outbox).where(alert_outbox.c.delivery_id.in_(done))).rowcount}
    counts["deliveries"] = conn.execute(delete(alert_deliveries).where(
        and_(d.status != "pending", d.finished_at < before))).rowcount
    counts["alerts"] = conn.execute(delete(alerts).where(
        and_(alerts.c.status == "resolved", alerts.c.updated_at < before))).rowcount
    counts["silences"] = conn.execute(delete(alert_silences).where(alert_silences.c.ends_at < before)).rowcount
    return counts
