"""The delivery worker: seal due groups, claim deliveries under a lease, send, record the outcome.

Crash safety: a delivery is claimed by setting ``claimed_until`` (a lease) in its own committed
transaction before any POST. A worker killed after the claim, or after the receiver answered but
before the outcome was recorded, leaves the row ``pending``; once the lease runs out another
worker claims it again and sends the same body with the same ``webhook-id``, which receivers
use as their idempotency key. Delivery is therefore at-least-once, with duplicates identifiable.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Callable, Mapping

import httpx
from sqlalchemy import Engine, and_, func, insert, or_, select, update
from sqlalchemy.exc import SQLAlchemyError

from alerting.delivery import AlertSink, AttemptResult, EndpointGoneError, RetryableDeliveryError, WebhookSink
from alerting.delivery import attempt_with_retries, utcnow
from alerting.metrics import DeliveryMetrics
from alerting.outbox import seal_due_groups
from alerting.records import Delivery, utc
from alerting.rules import AlertRules
from alerting.signing import secrets_from_env
from alerting.ssrf import UnsafeURLError
from driftwarden.errors import ConfigError
from schemas.alert_tables import alert_deliveries, alert_endpoints

log = logging.getLogger(__name__)
FAILPOINT_ENV = "DRIFTWARDEN_ALERTING_FAILPOINT"
FAILPOINT_FILE_ENV = "DRIFTWARDEN_ALERTING_FAILPOINT_FILE"
_LEASE_MARGIN_S = 1.0


def build_sinks(rules: AlertRules, client: httpx.Client) -> dict[str, AlertSink]:
    """Return one WebhookSink per route, its signing secrets read from the environment."""
    return {r.name: WebhookSink(r, client, secrets_from_env(r.secret_env)) for r in rules.routes}


def make_client() -> httpx.Client:
    """Return the HTTP client deliveries use: no redirects, no proxies from the environment."""
    return httpx.Client(follow_redirects=False, trust_env=False)


@dataclass
class Dispatcher:
    """Moves alerts from the outbox to their sinks; handed its store, rules and sinks."""

    engine: Engine
    rules: AlertRules
    sinks: Mapping[str, AlertSink]
    metrics: DeliveryMetrics | None = None
    lease: timedelta = timedelta(seconds=120)
    batch: int = 20
    concurrency: int = 4
    clock: Callable[[], datetime] = utcnow
    sleep: Callable[[float], None] = time.sleep
    worker_id: str = field(default_factory=lambda: f"{socket.gethostname()}:{os.getpid()}")

    def __post_init__(self) -> None:
        for name, sink in self.sinks.items():
            timeout = getattr(getattr(sink, "route", None), "timeout_s", 0.0)
            if self.lease.total_seconds() < timeout + _LEASE_MARGIN_S:
                raise ConfigError(f"lease {self.lease.total_seconds():g} s is too short for route {name!r}: it must "
                                  f"exceed the route's timeout ({timeout:g} s) by at least {_LEASE_MARGIN_S:g} s")

    def run_once(self) -> int:
        """Seal due groups, then claim and deliver what is due; return how many deliveries were handled."""
        with self.engine.begin() as conn:
            seal_due_groups(conn, self.rules, self.clock())
        claimed = self.claim()
        if len(claimed) <= 1 or self.concurrency <= 1:
            for delivery in claimed:
                self._deliver_logged(delivery)
        else:
            with ThreadPoolExecutor(min(self.concurrency, len(claimed)), thread_name_prefix="deliver") as pool:
                list(pool.map(self._deliver_logged, claimed))
        return len(claimed)

    def _deliver_logged(self, delivery: Delivery) -> None:
        """Deliver; a crash in one sink is logged and the lease left to expire, the others go on."""
        try:
            self.deliver(delivery)
        except Exception:  # noqa: BLE001 - a bug in one sink must not stop the others
            log.exception("delivery %s to route %s crashed; it will be retried", delivery.webhook_id, delivery.route)

    def run_forever(self, stop: threading.Event, poll_s: float = 1.0) -> None:
        """Call :meth:`run_once` until ``stop`` is set, pausing ``poll_s`` when idle or the store fails."""
        while not stop.is_set():
            try:
                handled = self.run_once()
            except SQLAlchemyError as exc:  # store down, deadlock victim...: leases make a retry safe
                log.warning("delivery round failed (%s); retrying in %g s", type(exc).__name__, poll_s)
                handled = 0
            if handled == 0:
                stop.wait(poll_s)

    def claim(self) -> list[Delivery]:
        """Lease up to ``batch`` due deliveries of this worker's routes (committed before any send)."""
        now, token = self.clock(), f"{self.worker_id}:{uuid.uuid4().hex[:8]}"
        d = alert_deliveries.c
        claimable = and_(d.status == "pending", d.next_attempt_at <= now, d.route.in_(list(self.sinks)),
                         or_(d.claimed_until.is_(None), d.claimed_until < now))
        due_ids = select(d.id).where(claimable).order_by(d.next_attempt_at, d.id).limit(self.batch)
        with self.engine.begin() as conn:
            conn.execute(update(alert_deliveries).where(and_(d.id.in_(due_ids.scalar_subquery()), claimable))
                         .values(claimed_until=now + self.lease, claimed_by=token))
            rows = conn.execute(select(alert_deliveries).where(d.claimed_by == token).order_by(d.id)).all()
        return [Delivery(r.id, r.webhook_id, r.route, r.model, r.body.encode(), r.attempts, utc(r.created_at),
                         now + self.lease) for r in rows]

    def deliver(self, delivery: Delivery) -> str:
        """Send one claimed delivery (with in-lease retries) and record its outcome; return the outcome."""
        sink = self.sinks.get(delivery.route)
        if sink is not None and self._disabled(delivery.route):
            return self._finish(delivery, "disabled", AttemptResult(0, None, None, None), "endpoint disabled")
        budget = self._budget(sink, delivery) if sink is not None else None
        if sink is None or budget is None:  # no sink here (another worker's config) or no time left: leave it
            self._update(delivery, AttemptResult(0, None, None, None), self.clock(), status="pending")
            return "deferred"
        failpoint("before_send")
        started = self.clock()
        result = attempt_with_retries(lambda: self._attempt(sink, delivery), self.rules.retry, budget, self.sleep)
        failpoint("after_response")
        return self._record(delivery, result, started)

    def _attempt(self, sink: AlertSink, delivery: Delivery) -> int:
        """One POST, measured and counted."""
        t0 = time.perf_counter()
        try:
            code = sink.send(delivery)
        except Exception as exc:
            self._count_attempt(delivery.route, _result_label(getattr(exc, "status_code", None), exc), t0)
            raise
        self._count_attempt(delivery.route, "2xx", t0)
        return code

    def _budget(self, sink: AlertSink, delivery: Delivery) -> float | None:
        """Seconds of retrying left in the lease after one attempt's timeout; None if not even one fits."""
        timeout = getattr(getattr(sink, "route", None), "timeout_s", 10.0)
        lease_end = delivery.claimed_until or self.clock() + self.lease
        left = (lease_end - self.clock()).total_seconds() - timeout - _LEASE_MARGIN_S
        return None if left < 0 else left

    def _record(self, delivery: Delivery, result: AttemptResult, started: datetime) -> str:
        """Turn an attempt result into the delivery's next state."""
        if result.error is None:
            return self._finish(delivery, "sent", result, None)
        if isinstance(result.error, EndpointGoneError):
            self._disable(delivery.route, str(result.error))
            return self._finish(delivery, "disabled", result, str(result.error))
        if not isinstance(result.error, RetryableDeliveryError):
            return self._finish(delivery, "failed", result, str(result.error))
        next_at = self.clock() + timedelta(seconds=result.next_delay_s or 0.0)
        if next_at - delivery.created_at > timedelta(seconds=self.rules.retry.max_age_s):
            return self._finish(delivery, "dead", result, f"gave up after max age: {result.error}")
        self._update(delivery, result, started, status="pending", next_attempt_at=next_at,
                     last_error=str(result.error)[:500])
        self._count(delivery.route, "rescheduled")
        return "rescheduled"

    def _finish(self, delivery: Delivery, status: str, result: AttemptResult, error: str | None) -> str:
        """Record a final state (sent, failed, dead, disabled)."""
        self._update(delivery, result, self.clock(), status=status, finished_at=self.clock(),
                     last_error=error[:500] if error else None)
        self._count(delivery.route, status)
        log.info("delivery %s to route %s: %s", delivery.webhook_id, delivery.route, status)
        return status

    def _update(self, delivery: Delivery, result: AttemptResult, started: datetime, **values: object) -> None:
        """Write the delivery's new state and release its lease (only while it is still pending)."""
        d = alert_deliveries.c
        if result.attempts:
            values.update(attempts=d.attempts + result.attempts, last_status_code=result.status_code,
                          first_attempt_at=func.coalesce(d.first_attempt_at, started), last_attempt_at=self.clock())
        with self.engine.begin() as conn:
            conn.execute(update(alert_deliveries).where(and_(d.id == delivery.id, d.status == "pending"))
                         .values(claimed_until=None, **values))

    def _disabled(self, route: str) -> bool:
        with self.engine.connect() as conn:
            return conn.execute(select(alert_endpoints.c.route).where(alert_endpoints.c.route == route)).first() is not None

    def _disable(self, route: str, reason: str) -> None:
        with self.engine.begin() as conn:
            if conn.execute(select(alert_endpoints.c.route).where(alert_endpoints.c.route == route)).first() is None:
                conn.execute(insert(alert_endpoints).values(route=route, disabled_at=self.clock(), reason=reason[:500]))

    def _count(self, route: str, outcome: str) -> None:
        if self.metrics is not None:
            self.metrics.outcome(route, outcome)

    def _count_attempt(self, route: str, label: str, t0: float) -> None:
        if self.metrics is not None:
            self.metrics.attempt(route, label, time.perf_counter() - t0)


def _result_label(status: int | None, exc: BaseException) -> str:
    """Metric label of a failed attempt."""
    if status == 429:
        return "429"
    if status is not None:
        return f"{status // 100}xx"
    if isinstance(exc, UnsafeURLError):
        return "refused"
    return "timeout" if "timed out" in str(exc) else "error"


def failpoint(name: str) -> None:
    """Test hook: when $DRIFTWARDEN_ALERTING_FAILPOINT names this point, write the marker file and hang.

    Lets a test kill -9 the worker at an exact point (after the claim is committed and before the
    POST; after the receiver answered and before the outcome is recorded). Inert otherwise.
    """
    if os.environ.get(FAILPOINT_ENV) != name:
        return
    marker = os.environ.get(FAILPOINT_FILE_ENV)
    if marker:
        Path(marker).write_text(f"{name} {os.getpid()}\n")
    while True:
        time.sleep(3600)
