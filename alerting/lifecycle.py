"""The alert lifecycle: one alert per (model, feature[, segment]), advanced window by window.

The streaming job calls :func:`enqueue_alerts` inside the transaction where it upserts a window's
results, so an alert state exists if and only if its results were committed. Each alert moves on
its own, never because another feature started or stopped::

    (none|resolved) --drift >= min_severity--> firing --N clean windows with enough data--> resolved
    firing --severity upgrade--> firing (notified again)      firing --model silent--> nodata
    nodata --a window arrives--> firing (then resolves by the same N-clean-windows rule)

"Clean" means not drifted at all with at least ``resolve_min_count`` values; a drifted window
below ``min_severity`` or a window with too little data neither resolves nor counts towards it.
Re-running a window that an alert has already seen (or an older one) changes nothing. Every
notified change bumps the alert's ``version``, is recorded in ``alert_events`` and replaces the
state waiting in the outbox of each route whose matchers accept the alert.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, and_, insert, select, update
from sqlalchemy.engine import Row

from driftwarden.alerting import folding
from driftwarden.alerting.fingerprint import fingerprint, segment_key
from driftwarden.alerting.payloads import alert_document, group_key
from driftwarden.core.records import Alert, FeatureOutcome, WindowReport, severity_rank, utc
from driftwarden.alerting.rules import AlertRules, matches_all
from driftwarden.core.store import upsert
from driftwarden.schemas.alert_tables import alert_events, alert_models, alert_outbox, alerts


def enqueue_alerts(conn: Connection, report: WindowReport, rules: AlertRules, now: datetime) -> int:
    """Advance every alert of one (model, window) and queue what routes must be told; return outbox rows written.

    Every alert's state is saved first, then the changes are told, so that a global alert is told
    with the segment alerts of this very window folded under it (:mod:`alerting.folding`).
    """
    now = utc(now)
    keys = {fingerprint(report.model, f.name, f.segment): f for f in report.features}
    known = {r.fingerprint: r for r in conn.execute(select(alerts).where(and_(
        alerts.c.model == report.model, alerts.c.fingerprint.in_(list(keys)))))}
    saved, notify = [], []
    for fp, outcome in keys.items():
        row = known.get(fp)
        if row is not None and utc(row.last_window_start) >= report.window_start:
            continue  # this window (or a later one) was already seen by this alert
        values, tell = next_state(row, outcome, report, rules)
        if values is None:
            continue
        values["updated_at"] = now
        saved.append(fp)
        if tell:
            values["version"] = (row.version if row is not None else 0) + 1
            notify.append(fp)
        _save(conn, fp, row, values)
    written = _tell(conn, [_alert_row(conn, fp) for fp in notify], rules, now)
    quietly = {keys[fp].name for fp in saved if keys[fp].segment and fp not in notify}
    _refresh_globals(conn, report.model, quietly, rules, set(notify))
    if saved or any(r.status != "resolved" for r in known.values()):  # only alerts that may fire need "no data"
        upsert(conn, alert_models, [{"model": report.model, "last_window_start": report.window_start,
                                     "last_seen_at": now}], keys=("model",))
    return written


def next_state(row: Row | None, outcome: FeatureOutcome, report: WindowReport,
               rules: AlertRules) -> tuple[dict[str, Any] | None, bool]:
    """Return the alert's new column values after one window (None: nothing to store) and whether to notify."""
    drifting = outcome.drifted and severity_rank(outcome.severity) >= severity_rank(rules.min_severity)
    if (row is None or row.status == "resolved") and not drifting:
        return None, False  # the common case: nothing fires, nothing to store
    seen = {"last_window_start": report.window_start, "last_window_end": report.window_end,
            "details": json.dumps(asdict(outcome))}
    if row is None or row.status == "resolved":
        identity = {} if row is not None else {
            "model": report.model, "feature": outcome.name, "segment": segment_key(outcome.segment)}
        return {**seen, **identity, "severity": outcome.severity, "status": "firing", "starts_at": report.window_start,
                "ends_at": None, "clean_windows": 0, "acked_at": None, "acked_by": None}, True
    back = row.status == "nodata"  # data is back: told as firing again, then resolves by the usual rule
    if drifting:
        upgrade = severity_rank(outcome.severity) > severity_rank(row.severity)
        severity = outcome.severity if upgrade else row.severity
        return {**seen, "status": "firing", "severity": severity, "clean_windows": 0}, upgrade or back
    if outcome.drifted:  # drift below min_severity: not clean, the streak restarts
        return {**seen, "status": "firing", "clean_windows": 0}, back
    if outcome.count < rules.resolve_min_count:  # too little data to call it clean
        return {**seen, "status": "firing"}, back
    clean = row.clean_windows + 1
    if clean >= rules.resolve_after_windows:
        return {**seen, "status": "resolved", "clean_windows": clean, "ends_at": report.window_end}, True
    return {**seen, "status": "firing", "clean_windows": clean}, back


def mark_no_data(conn: Connection, rules: AlertRules, now: datetime) -> int:
    """Put the firing alerts of models silent for ``no_data_after`` into ``nodata``; return outbox rows written."""
    now = utc(now)
    silent = select(alert_models.c.model).where(alert_models.c.last_seen_at < now - rules.no_data_after)
    stale = conn.execute(select(alerts).where(and_(alerts.c.status == "firing", alerts.c.model.in_(silent)))).all()
    moved = [row.fingerprint for row in stale if conn.execute(
        update(alerts).where(and_(alerts.c.id == row.id, alerts.c.version == row.version))
        .values(status="nodata", version=row.version + 1, updated_at=now)).rowcount]
    return _tell(conn, [_alert_row(conn, fp) for fp in moved], rules, now)


def labels_of(row: Row) -> dict[str, str]:
    """The labels routes, silences and groups see: model, feature, segment, severity."""
    return {"model": row.model, "feature": row.feature, "segment": row.segment, "severity": row.severity}


def alert_of(row: Row) -> Alert:
    """The Alert record of a stored alert row."""
    outcome = FeatureOutcome(**json.loads(row.details))
    return Alert(row.fingerprint, row.status, row.model, row.feature, outcome.segment, row.severity, outcome,
                 utc(row.last_window_start), utc(row.last_window_end), utc(row.starts_at),
                 utc(row.ends_at) if row.ends_at is not None else None)


def _save(conn: Connection, fp: str, row: Row | None, values: dict[str, Any]) -> None:
    if row is None:
        conn.execute(insert(alerts).values(fingerprint=fp, migrated=False, **values))
    else:
        conn.execute(update(alerts).where(alerts.c.fingerprint == fp).values(**values))


def _alert_row(conn: Connection, fp: str) -> Row:
    return conn.execute(select(alerts).where(alerts.c.fingerprint == fp)).one()


def _tell(conn: Connection, rows: list[Row], rules: AlertRules, now: datetime) -> int:
    """Tell each changed alert; a global alert that resolved lets its still-active segments page on their own."""
    written = sum(_notify(conn, row, rules, now) for row in rows)
    for row in rows:
        if not row.segment and row.status == "resolved":
            for segment in folding.active_segments(conn, row):
                written += _notify(conn, segment, rules, now, record=False, unfolding=True)
    return written


def _notify(conn: Connection, row: Row, rules: AlertRules, now: datetime, record: bool = True,
            unfolding: bool = False) -> int:
    """Record the change and put the alert's newest state in the outbox of every route that wants it.

    A segment alert folded under its active global alert is left out on the routes that hear the global
    alert (unless they were told it firing before); a global alert's document lists its active segments.
    """
    if record:
        conn.execute(insert(alert_events).values(
            fingerprint=row.fingerprint, model=row.model, feature=row.feature, segment=row.segment,
            status=row.status, severity=row.severity, window_start=row.last_window_start, at=now))
    labels = labels_of(row)
    document = _document(conn, row, rules)
    parent = None if unfolding else folding.global_alert(conn, row)
    written = 0
    for route in rules.routes_for(labels):
        key = group_key({label: labels[label] for label in rules.group_by_for(route)})
        folded = parent is not None and matches_all(route.matchers, labels_of(parent))
        written += _put(conn, route.name, key, row, document, now, folded, only_untold=unfolding)
    if not row.segment and row.status in folding.ACTIVE:
        _drop_untold_segments(conn, row, rules)
    return written


def _document(conn: Connection, row: Row, rules: AlertRules) -> str:
    """The native document of an alert; a global one with its active segment alerts inside."""
    segments = [alert_of(s) for s in folding.active_segments(conn, row)]
    return json.dumps(alert_document(alert_of(row), rules, segments), separators=(",", ":"))


def _refresh_globals(conn: Connection, model: str, features: set[str], rules: AlertRules, told: set[str]) -> None:
    """Segments changed under an active global alert that was not told this window: its outbox documents now
    list them (no new notification: one change, one page)."""
    o = alert_outbox.c
    for row in folding.global_fingerprints(conn, model, features):
        if row.fingerprint not in told:
            conn.execute(update(alert_outbox).where(o.fingerprint == row.fingerprint)
                         .values(alert=_document(conn, row, rules)))
            _drop_untold_segments(conn, row, rules)


def _drop_untold_segments(conn: Connection, parent: Row, rules: AlertRules) -> None:
    """Segment states queued but never told on a route that hears the (now active) global alert: folded, cleared."""
    routes = [r.name for r in rules.routes_for(labels_of(parent))]
    segments = [s.fingerprint for s in folding.active_segments(conn, parent)]
    if routes and segments:
        o = alert_outbox.c
        conn.execute(update(alert_outbox).where(and_(o.route.in_(routes), o.fingerprint.in_(segments),
                                                     o.pending.is_(True), o.told_firing.is_(False)))
                     .values(pending=False))


def _put(conn: Connection, route: str, key: str, row: Row, document: str, now: datetime, folded: bool = False,
         only_untold: bool = False) -> int:
    """Upsert the (route, alert) outbox row with the newest state; a resolve never told as firing is not queued,
    nor a folded state on a route never told the alert firing, nor (``only_untold``) what the route was told."""
    o = alert_outbox.c
    current = conn.execute(select(alert_outbox).where(and_(o.route == route, o.fingerprint == row.fingerprint))).first()
    told = current is not None and current.told_firing
    if (folded or only_untold) and (told if only_untold else not told):
        return 0
    values = {"group_key": key, "model": row.model, "status": row.status, "severity": row.severity,
              "alert": document, "version": row.version, "pending": True, "changed_at": now}
    if current is None:
        if row.status != "firing" and not row.migrated:
            return 0  # this route never heard of the alert firing
        conn.execute(insert(alert_outbox).values(route=route, fingerprint=row.fingerprint,
                                                 told_firing=row.migrated, delivery_id=None, **values))
        return 1
    conn.execute(update(alert_outbox).where(o.id == current.id).values(**values))
    return 1
