"""The alert outbox and its notifications: Alertmanager's grouping and timers over durable rows.

:func:`enqueue_alerts` (from :mod:`alerting.lifecycle`, re-exported here for the job) writes, per
(route, alert), the newest state to tell. The delivery worker calls :func:`seal_due_groups`: for
each (route, group) - the group's labels are ``group_by`` of the rules, default the model - one
notification lists every alert of the group with its own status (firing and no-data alerts, and
the changes not told yet), at most ``max_alerts`` of them (the rest counted in
``truncated_alerts`` and told next time). A new group waits ``group_wait`` after its first
change, a group with something new waits ``group_interval`` after its last notification, and a
group with nothing new is told again after ``repeat_interval`` while an unacknowledged alert
fires. Silenced alerts are left out (and told once the silence ends).

Order per (route, alert) holds because a group has at most one undelivered notification: while
one is leased to a worker or not tried yet, nothing new is sealed for the group; one that failed
and waits for a retry is superseded by the new one, which holds its alerts too (their newest
states) and inherits its retry schedule and failure count, so a stale state is never sent after
a newer one and the backoff goes on growing.
"""

from __future__ import annotations

import json
import logging
import uuid
from datetime import datetime
from types import SimpleNamespace
from typing import Any, Sequence

from sqlalchemy import Connection, and_, delete, insert, or_, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Row

from driftwarden.alerting.lifecycle import enqueue_alerts, labels_of, mark_no_data
from driftwarden.alerting.payloads import render
from driftwarden.core.records import utc
from driftwarden.core.totals import add_totals, delivery_totals
from driftwarden.alerting.forward import add_replaced
from driftwarden.alerting.rules import AlertRules, Matcher, Route, matches_all
from driftwarden.schemas.alert_tables import alert_deliveries, alert_events, alert_groups, alert_outbox, alert_silences, alerts

__all__ = ["enqueue_alerts", "mark_no_data", "seal_due_groups", "active_silences", "is_silenced", "prune",
           "set_delivery_status"]
log = logging.getLogger(__name__)
_WARNED_ROUTES: set[str] = set()  # routes already warned about in this process
_ACTIVE = ("firing", "nodata")


def seal_due_groups(conn: Connection, rules: AlertRules, now: datetime) -> list[int]:
    """Seal one notification for each (route, group) whose timer is due; return the new delivery ids."""
    now = utc(now)
    o, g = alert_outbox.c, alert_groups.c
    changed = select(o.route, o.group_key).where(o.pending.is_(True))
    shortest = min([rules.timers_for(r).repeat_interval for r in rules.routes] or [rules.repeat_interval])
    repeat = select(o.route, o.group_key).join(alert_groups, and_(g.route == o.route, g.group_key == o.group_key)).where(
        and_(o.told_firing.is_(True), o.status.in_(_ACTIVE), g.last_sealed_at <= now - shortest))
    candidates = sorted(set(conn.execute(changed.union(repeat)).all()))
    known = {r.name for r in rules.routes}
    unknown = sorted({route for route, _ in candidates if route not in known} - _WARNED_ROUTES)
    if unknown:  # left pending: a worker started with the wrong config must not throw the queue away
        _WARNED_ROUTES.update(unknown)
        log.warning("outbox rows wait for routes this worker has no config for: %s", ", ".join(unknown))
    sealed = [_seal_group(conn, rules, route, key, now) for route, key in candidates if route in known]
    return [d for d in sealed if d is not None]


def active_silences(conn: Connection, now: datetime) -> list[list[Matcher]]:
    """Return the matcher lists of silences in force at ``now``."""
    now = utc(now)
    rows = conn.execute(select(alert_silences.c.matchers).where(
        and_(alert_silences.c.starts_at <= now, alert_silences.c.ends_at > now))).scalars()
    return [[Matcher.model_validate(m) for m in json.loads(text)] for text in rows]


def is_silenced(silences: Sequence[Sequence[Matcher]], labels: dict[str, str]) -> bool:
    """Return True when a silence in force matches an alert with these labels."""
    return any(matches_all(matchers, labels) for matchers in silences)


def _seal_group(conn: Connection, rules: AlertRules, route: str, key: str, now: datetime) -> int | None:
    """Seal the group's notification when its timer is due; None when not due or busy."""
    group = _lock_group(conn, route, key)
    d = alert_deliveries.c
    waiting = conn.execute(select(alert_deliveries).where(and_(
        d.route == route, d.group_key == key, d.status == "pending"))).all()
    if any(w.claimed_until is not None and utc(w.claimed_until) >= now for w in waiting):
        return None  # a worker holds the group's last notification: a newer one must not overtake it
    rows = _group_rows(conn, route, key)
    order = [r.notify.id for r in rows]  # by model, feature, segment
    config = rules.route(route)
    silences = [] if config.forwards else active_silences(conn, now)  # an Alertmanager has its own silences
    visible = [r for r in rows if not is_silenced(silences, labels_of(r.alert))]
    stale = {w.id for w in waiting}
    pending = [r.notify for r in visible if r.notify.pending]
    _drop_untold_resolves(conn, pending)
    pending = [r for r in pending if r.status in _ACTIVE or r.told_firing]
    resend = [r.notify for r in visible if not r.notify.pending and r.notify.delivery_id in stale]
    active = [r for r in visible if r.notify.status in _ACTIVE]
    if any(w.attempts == 0 and w.failures == 0 for w in waiting):
        return None  # sealed a moment ago and not tried yet: a worker is about to claim it, wait for it
    if (waiting and not pending) or not _due(rules, config, group, pending, active, now):
        return None
    if not _supersede(conn, waiting, now):
        return None
    changed = sorted(pending + resend, key=lambda r: order.index(r.id))
    limit = len(rows) if config.forwards else rules.max_alerts  # each POST to an Alertmanager holds every alert
    still = [r.notify for r in active if r.notify.told_firing]  # never told (folded): not "still firing" either
    chosen, truncated = _choose(changed, still, limit)
    labels = labels_of(rows[0].alert)
    delivery_id = _insert_delivery(conn, rules, route, key, {k: labels[k] for k in rules.group_by_for(config)},
                                   chosen, truncated, waiting, now)
    for r in chosen:
        conn.execute(update(alert_outbox).where(and_(alert_outbox.c.id == r.id, alert_outbox.c.version == r.version))
                     .values(pending=False, told_firing=r.status in _ACTIVE, delivery_id=delivery_id))
    conn.execute(update(alert_groups).where(and_(alert_groups.c.route == route, alert_groups.c.group_key == key))
                 .values(last_sealed_at=now))
    return delivery_id


class _GroupRow:
    """An outbox row with its alert row (for labels, acks)."""

    def __init__(self, notify: Row, alert: Row) -> None:
        self.notify, self.alert = notify, alert


def _group_rows(conn: Connection, route: str, key: str) -> list[_GroupRow]:
    o = alert_outbox.c
    query = (select(alert_outbox, alerts).join(alerts, alerts.c.fingerprint == o.fingerprint)
             .where(and_(o.route == route, o.group_key == key))
             .order_by(alerts.c.model, alerts.c.feature, alerts.c.segment))
    n = len(alert_outbox.columns)
    result = []
    for row in conn.execute(query):
        values = tuple(row)
        result.append(_GroupRow(_row(alert_outbox, values[:n]), _row(alerts, values[n:])))
    return result


def _row(table, values: tuple) -> Any:
    """A lightweight row object with the table's column names as attributes."""
    return SimpleNamespace(**dict(zip(table.columns.keys(), values)))


def _lock_group(conn: Connection, route: str, key: str) -> Any:
    """Create the (route, group) row if missing and lock it for this transaction (PostgreSQL row lock)."""
    dialect = postgresql if conn.dialect.name == "postgresql" else sqlite
    conn.execute(dialect.insert(alert_groups).values(route=route, group_key=key, last_sealed_at=None)
                 .on_conflict_do_nothing())
    g = alert_groups.c
    return conn.execute(select(alert_groups).where(and_(g.route == route, g.group_key == key))
                        .with_for_update()).one()


def _drop_untold_resolves(conn: Connection, fresh: list[Any]) -> None:
    """A resolve (or no-data) of an alert this route never heard firing is not sent: clear it."""
    for r in fresh:
        if r.status not in _ACTIVE and not r.told_firing:
            conn.execute(update(alert_outbox).where(and_(alert_outbox.c.id == r.id, alert_outbox.c.version == r.version))
                         .values(pending=False))


def _due(rules: AlertRules, route: Route, group: Any, pending: list[Any], active: list[_GroupRow],
         now: datetime) -> bool:
    """Alertmanager's timers: group_wait for a new group, group_interval after that, repeat_interval if unchanged
    (a forwarding route sends again every resend_interval, acknowledged or not: Alertmanager expects it)."""
    timers = rules.timers_for(route)
    last = utc(group.last_sealed_at) if group.last_sealed_at is not None else None
    told_active = [r for r in active if r.notify.told_firing]
    if pending:
        if last is None or not told_active:
            return min(utc(r.changed_at) for r in pending) <= now - timers.group_wait
        return now >= last + timers.group_interval
    unacked = [r for r in told_active if r.alert.acked_at is None or route.forwards]
    return bool(unacked) and last is not None and now >= last + timers.repeat_interval


def _supersede(conn: Connection, waiting: list[Row], now: datetime) -> bool:
    """Mark the group's undelivered notifications superseded; False if a worker claimed one meanwhile."""
    d = alert_deliveries.c
    for w in waiting:
        done = set_delivery_status(conn, and_(d.id == w.id, or_(d.claimed_until.is_(None), d.claimed_until < now)),
                                   "pending", "superseded", finished_at=now,
                                   last_error="superseded by a newer notification")
        if not done:
            return False
    return True


def _choose(fresh: list[Any], active: list[Any], limit: int) -> tuple[list[Any], int]:
    """The alerts of one notification: what changed first, then what still fires; at most ``limit``."""
    ids = {r.id for r in fresh}
    everything = fresh + [r for r in active if r.id not in ids]
    return everything[:limit], max(len(everything) - limit, 0)


def _insert_delivery(conn: Connection, rules: AlertRules, route: str, key: str, labels: dict[str, str],
                     chosen: list[Any], truncated: int, superseded: list[Row], now: datetime) -> int:
    """Insert the sealed delivery; it inherits the retry schedule (and first attempt) of those it supersedes."""
    models = {r.model for r in chosen}
    failures = max((w.failures for w in superseded), default=0)
    next_at = max([now] + [utc(w.next_attempt_at) for w in superseded])
    config = rules.route(route)
    fmt = config.body_format
    body = render(fmt, route, labels, [json.loads(r.alert) for r in chosen], truncated, rules)
    if config.forwards:  # a severity upgrade: the labels told before are resolved in Alertmanager
        body = add_replaced(body, _previous_bodies(conn, chosen))
    tried = [utc(w.first_attempt_at) for w in superseded if w.first_attempt_at is not None]
    new_id = int(conn.execute(insert(alert_deliveries).values(
        webhook_id=f"msg_{uuid.uuid4().hex}", route=route, model=models.pop() if len(models) == 1 else "",
        group_key=key, format=fmt, body=body.decode(), alert_count=len(chosen), status="pending", attempts=0,
        failures=failures, created_at=now, next_attempt_at=next_at,
        first_attempt_at=min(tried, default=None))).inserted_primary_key[0])
    add_totals(conn, delivery_totals([{"route": route, "status": "pending"}]))
    return new_id


def _previous_bodies(conn: Connection, chosen: list[Any]) -> list[str]:
    """The bodies of the deliveries that last held these alerts on this route."""
    ids = sorted({r.delivery_id for r in chosen if r.delivery_id is not None})
    if not ids:
        return []
    return list(conn.execute(select(alert_deliveries.c.body).where(alert_deliveries.c.id.in_(ids))).scalars())


def set_delivery_status(conn: Connection, where: Any, old: str, new: str, **values: Any) -> int:
    """Update the deliveries matching ``where`` that are in status ``old`` to status ``new`` (with ``values``),
    keeping the deliveries' totals by status (``core.totals``); return how many changed."""
    d = alert_deliveries.c
    routes = conn.execute(update(alert_deliveries).where(and_(where, d.status == old))
                          .values(status=new, **values).returning(d.route)).scalars().all()
    if new != old:
        moved = delivery_totals([{"route": r, "status": new} for r in routes])
        moved.update(delivery_totals([{"route": r, "status": old} for r in routes], sign=-1))
        add_totals(conn, moved)
    return len(routes)


def prune(conn: Connection, before: datetime) -> dict[str, int]:
    """Delete finished deliveries, told resolved states, resolved alerts, old history and expired silences."""
    before = utc(before)
    d, o = alert_deliveries.c, alert_outbox.c
    deleted = conn.execute(delete(alert_deliveries).where(and_(d.status != "pending", d.finished_at < before))
                           .returning(d.route, d.status)).mappings().all()
    add_totals(conn, delivery_totals(deleted, sign=-1))  # a gauge of the deliveries in the store
    counts = {"deliveries": len(deleted)}
    resolved = select(alerts.c.fingerprint).where(and_(alerts.c.status == "resolved", alerts.c.updated_at < before))
    counts["outbox"] = conn.execute(delete(alert_outbox).where(and_(
        o.pending.is_(False), o.fingerprint.in_(resolved)))).rowcount
    counts["alerts"] = conn.execute(delete(alerts).where(and_(
        alerts.c.status == "resolved", alerts.c.updated_at < before,
        alerts.c.fingerprint.not_in(select(o.fingerprint))))).rowcount
    counts["history"] = conn.execute(delete(alert_events).where(alert_events.c.at < before)).rowcount
    counts["silences"] = conn.execute(delete(alert_silences).where(alert_silences.c.ends_at < before)).rowcount
    return counts
