"""The alert path watching itself: the delivery worker's heartbeat and the age of what waits to be delivered.

Served on the worker's /metrics (``driftwarden alerts deliver --metrics-port``) beside its delivery
counters and the store's metrics, and read by the rules in
deploy/prometheus/driftwarden-alerting.rules.yml (docs/alerting.md, "When the alert path fails"):

* ``driftwarden_alert_worker_heartbeat_timestamp_seconds``: when the worker last went round its
  loop (a stopped or hung worker stops it);
* ``driftwarden_alert_worker_rounds_total{result}``: rounds that could (``ok``) or could not
  (``store_error``) read the store;
* ``driftwarden_alert_outbox_oldest_timestamp_seconds{route}``: how long the oldest thing a route
  has not been told has waited: a change waiting to be sealed (its time), or an undelivered
  delivery (its first attempt, which a notification superseding a failed one inherits, else its
  creation); no series when nothing waits. Read on each scrape with two queries that touch only
  waiting rows (``ix_alert_deliveries_due`` on the deliveries' status).
"""

from __future__ import annotations

import logging
from typing import Iterator

from prometheus_client import CollectorRegistry, Counter, Gauge
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from sqlalchemy import Engine, func, select
from sqlalchemy.exc import SQLAlchemyError

from driftwarden.core.records import utc
from driftwarden.schemas.alert_tables import alert_deliveries, alert_outbox

log = logging.getLogger(__name__)


class WorkerMetrics:
    """The delivery worker's heartbeat and its rounds by result."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        kwargs = {"registry": registry} if registry is not None else {}
        self.heartbeat = Gauge("driftwarden_alert_worker_heartbeat_timestamp_seconds",
                               "When the alert delivery worker last went round its loop (Unix time)", **kwargs)
        self.rounds = Counter("driftwarden_alert_worker_rounds", "Delivery rounds, by result (ok, store_error)",
                              ["result"], **kwargs)
        for result in ("ok", "store_error"):
            self.rounds.labels(result)

    def beat(self, store_ok: bool) -> None:
        """Record one round of the loop, whether it could read the store."""
        self.heartbeat.set_to_current_time()
        self.rounds.labels("ok" if store_ok else "store_error").inc()


class OutboxAgeCollector(Collector):
    """On each scrape: per route, when its oldest undelivered change happened."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def describe(self) -> list[Metric]:
        """No descriptions, so registering does not query the store."""
        return []

    def collect(self) -> Iterator[Metric]:
        """Yield ``driftwarden_alert_outbox_oldest_timestamp_seconds`` (nothing when the store cannot be read)."""
        family = GaugeMetricFamily("driftwarden_alert_outbox_oldest_timestamp_seconds",
                                   "When the oldest change a route has not been told yet happened (Unix time)",
                                   labels=["route"])
        try:
            oldest = self._oldest()
        except SQLAlchemyError as exc:
            log.warning("outbox age: the store could not be read (%s)", type(exc).__name__)
            return
        for route, moment in sorted(oldest.items()):
            family.add_metric([route], utc(moment).timestamp())
        yield family

    def _oldest(self) -> dict[str, object]:
        d, o = alert_deliveries.c, alert_outbox.c
        oldest: dict[str, object] = {}
        with self.engine.connect() as conn:
            first = func.coalesce(d.first_attempt_at, d.created_at)  # inherited through superseded notifications
            rows = list(conn.execute(select(d.route, func.min(first)).where(d.status == "pending").group_by(d.route)))
            rows += list(conn.execute(select(o.route, func.min(o.changed_at)).where(o.pending.is_(True))
                                      .group_by(o.route)))
        for route, moment in rows:
            if moment is not None and (route not in oldest or utc(moment) < utc(oldest[route])):
                oldest[route] = moment
        return oldest
