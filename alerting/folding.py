"""One change, one page: a feature's segment alerts fold under its global alert while that fires.

A drift the global view sees usually shows in every segment too (a global change fired an alert
for ``(all)`` and one for each of five segments). Like an Alertmanager inhibition (source: the
global alert, target: the segment alerts of the same model and feature), a segment alert's
change is not told on its own on a route that hears the global alert while that alert is
active (firing or no data); the global alert lists its folded segments instead (native
``segments``, the other formats' text). What a route was already told keeps being told (a
segment that fired on its own and is then folded still resolves where it fired), a segment-only
drift pages on its own, and when the global alert resolves, the segment alerts still firing are
told on their own, as an inhibition that ends. These are the reads; :mod:`alerting.lifecycle`
applies them.
"""

from __future__ import annotations

from sqlalchemy import Connection, and_, select
from sqlalchemy.engine import Row

from driftwarden.schemas.alert_tables import alerts

ACTIVE = ("firing", "nodata")


def global_alert(conn: Connection, row: Row) -> Row | None:
    """The global alert (no segment) of a segment alert's model and feature, when it is active; else None."""
    if not row.segment:
        return None
    a = alerts.c
    return conn.execute(select(alerts).where(and_(a.model == row.model, a.feature == row.feature, a.segment == "",
                                                  a.status.in_(ACTIVE)))).first()


def active_segments(conn: Connection, row: Row) -> list[Row]:
    """The active segment alerts of a global alert's model and feature, by segment (none for a segment alert)."""
    if row.segment:
        return []
    a = alerts.c
    return list(conn.execute(select(alerts).where(and_(a.model == row.model, a.feature == row.feature,
                                                       a.segment != "", a.status.in_(ACTIVE))).order_by(a.segment)))


def global_fingerprints(conn: Connection, model: str, features: set[str]) -> list[Row]:
    """The active global alerts of ``model`` among ``features`` (whose segments changed)."""
    if not features:
        return []
    a = alerts.c
    return list(conn.execute(select(alerts).where(and_(a.model == model, a.feature.in_(sorted(features)),
                                                       a.segment == "", a.status.in_(ACTIVE)))))
