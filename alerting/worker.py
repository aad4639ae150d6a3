"""The delivery worker: seal due groups, claim deliveries under a lease, send, record the outcome.

One claim is one POST. Before it, the attempt is counted in its own committed transaction
(``attempts``, ``first_attempt_at``), so a worker killed mid-POST still leaves true bookkeeping;
after it, the outcome is recorded and a failed delivery waits its backoff (growing with every
failure, across claims) unclaimed. A worker killed after the claim, or after the receiver
answered but before the outcome was recorded, leaves the row ``pending``; once the lease runs
out another worker sends the same body with the same ``webhook-id``, which receivers use as
their idempotency key: delivery is at-least-once, with duplicates identifiable.

Isolation: each route has its own slots (``per_route`` POSTs in flight at once); a claim never
waits for another route's POSTs, so one slow or failing receiver cannot hold up the others.
:meth:`Dispatcher.run_forever` returns within ``stop_grace_s`` of its stop event (SIGTERM in
``driftwarden alerts deliver``): POSTs still in flight then have their leases released, so
another worker may send them at once instead of waiting for the lease to run out.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Callable, Mapping

import httpx
from sqlalchemy import Engine, and_, exists, func, insert, or_, select, update
from sqlalchemy.exc import SQLAlchemyError

from driftwarden.alerting.delivery import AlertSink, EndpointGoneError, RetryableDeliveryError, WebhookSink, backoff_s, utcnow
from driftwarden.alerting.metrics import DeliveryMetrics
from driftwarden.alerting.worker_metrics import WorkerMetrics
from driftwarden.alerting.outbox import mark_no_data, seal_due_groups, set_delivery_status
from driftwarden.core.records import Delivery, utc
from driftwarden.alerting import forward, pagerduty
from driftwarden.alerting.forward import alerts_url
from driftwarden.alerting.route_secrets import resolve
from driftwarden.alerting.rules import AlertRules, Route
from driftwarden.alerting.ssrf import UnsafeURLError
from driftwarden.core.errors import ConfigError, DeliveryError
from driftwarden.schemas.alert_tables import alert_deliveries, alert_endpoints

log = logging.getLogger(__name__)
FAILPOINT_ENV = "DRIFTWARDEN_ALERTING_FAILPOINT"
FAILPOINT_FILE_ENV = "DRIFTWARDEN_ALERTING_FAILPOINT_FILE"
_LEASE_MARGIN_S = 1.0


def build_sinks(rules: AlertRules, client: httpx.Client) -> dict[str, AlertSink]:
    """Return one sink per route, its URL, signing secrets and token read where the config references them."""
    return {r.name: route_sink(r, client) for r in rules.routes}


def route_sink(route: Route, client: httpx.Client) -> WebhookSink:
    """The sink of one route: a signed webhook, an Alertmanager's API, PagerDuty's Events API or Teams."""
    secrets = resolve(route)
    if route.kind == "alertmanager":
        headers = {"authorization": f"Bearer {secrets.token}"} if secrets.token else {}
        return WebhookSink(route, client, [], url=alerts_url(secrets.url), headers=headers,
                           prepare=forward.preparer(route))
    if route.kind == "pagerduty":
        return WebhookSink(route, client, [], url=secrets.url, prepare=pagerduty.preparer(secrets.token or ""))
    return WebhookSink(route, client, secrets.keys, url=secrets.url)


def make_client() -> httpx.Client:
    """Return the HTTP client deliveries use: no redirects, no proxies from the environment.

    httpx logs every request's whole URL at INFO, and a route's URL may be its credential (Slack,
    Teams, a token in the query): its request log is kept to warnings.
    """
    logging.getLogger("httpx").setLevel(max(logging.getLogger("httpx").level, logging.WARNING))
    return httpx.Client(follow_redirects=False, trust_env=False)


@dataclass
class Dispatcher:
    """Moves alerts from the outbox to their sinks; handed its store, rules and sinks."""

    engine: Engine
    rules: AlertRules
    sinks: Mapping[str, AlertSink]
    metrics: DeliveryMetrics | None = None
    health: WorkerMetrics | None = None
    lease: timedelta = timedelta(seconds=30)
    per_route: int = 1
    stop_grace_s: float = 2.0
    clock: Callable[[], datetime] = utcnow
    worker_id: str = field(default_factory=lambda: f"{socket.gethostname()}:{os.getpid()}")
    _inflight: dict[int, tuple[str, threading.Thread]] = field(default_factory=dict, init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)
    _done: threading.Event = field(default_factory=threading.Event, init=False, repr=False)

    def __post_init__(self) -> None:
        if self.metrics is not None:
            self.metrics.preset(list(self.sinks))
        for name, sink in self.sinks.items():
            timeout = getattr(getattr(sink, "route", None), "timeout_s", 0.0)
            if self.lease.total_seconds() < timeout + _LEASE_MARGIN_S:
                raise ConfigError(f"lease {self.lease.total_seconds():g} s is too short for route {name!r}: it must "
                                  f"exceed the route's timeout ({timeout:g} s) by at least {_LEASE_MARGIN_S:g} s")

    def run_once(self) -> int:
        """Seal what is due, then claim, send and record every due delivery; return how many were handled."""
        claimed = self.start_round()
        for thread in [t for _, t in list(self._inflight.values())]:
            thread.join()
        return len(claimed)

    def start_round(self) -> list[Delivery]:
        """Mark silent models, seal due groups and start a POST for each delivery claimed (not waiting for them)."""
        with self.engine.begin() as conn:
            mark_no_data(conn, self.rules, self.clock())
            seal_due_groups(conn, self.rules, self.clock())
        claimed = self.claim()
        for delivery in claimed:
            thread = threading.Thread(target=self._deliver_logged, args=(delivery,), daemon=True,
                                      name=f"deliver-{delivery.route}")
            with self._lock:
                self._inflight[delivery.id] = (delivery.route, thread)
            thread.start()
        return claimed

    def run_forever(self, stop: threading.Event, poll_s: float = 1.0) -> None:
        """Run rounds until ``stop`` is set; then give in-flight POSTs ``stop_grace_s`` and release the rest."""
        while not stop.is_set():
            try:
                handled, store_ok = len(self.start_round()), True
            except SQLAlchemyError as exc:  # store down, deadlock victim...: leases make a retry safe
                log.warning("delivery round failed (%s); retrying in %g s", type(exc).__name__, poll_s)
                handled, store_ok = 0, False
            if self.health is not None:
                self.health.beat(store_ok)
            if handled == 0:
                self._wait_any(stop, poll_s)
        self._shutdown()

    def _wait_any(self, stop: threading.Event, poll_s: float) -> None:
        """Sleep until a POST finishes, the stop event is set, or ``poll_s`` passes."""
        if not self._inflight:
            stop.wait(poll_s)
            return
        self._done.clear()
        deadline = time.monotonic() + poll_s
        while not stop.is_set() and not self._done.is_set() and time.monotonic() < deadline:
            stop.wait(min(0.05, poll_s))

    def _shutdown(self) -> None:
        """Wait up to ``stop_grace_s`` for POSTs in flight; release the leases of those still running."""
        deadline = time.monotonic() + self.stop_grace_s
        for _, thread in list(self._inflight.values()):
            thread.join(max(deadline - time.monotonic(), 0.0))
        with self._lock:
            left = list(self._inflight)
        if left:
            d = alert_deliveries.c
            with self.engine.begin() as conn:
                conn.execute(update(alert_deliveries).where(and_(d.id.in_(left), d.status == "pending"))
                             .values(claimed_until=None))
            log.info("stopped with %d POST(s) in flight; their leases are released", len(left))

    def claim(self) -> list[Delivery]:
        """Lease the due deliveries of each route that has a free slot (committed before any send)."""
        now = self.clock()
        with self._lock:
            busy = [route for route, _ in self._inflight.values()]
        claimed: list[Delivery] = []
        for route in self.sinks:
            free = self.per_route - busy.count(route)
            if free > 0:
                claimed += self._claim_route(route, free, now)
        return claimed

    def _claim_route(self, route: str, limit: int, now: datetime) -> list[Delivery]:
        token = f"{self.worker_id}:{uuid.uuid4().hex[:8]}"
        d, older = alert_deliveries.c, alert_deliveries.alias("older").c
        # a group's notifications go one at a time, oldest first: one waiting for its retry holds back the
        # newer ones (only `alerts enable` requeues several of a group; sealing keeps one undelivered)
        first_of_group = ~exists().where(and_(older.route == d.route, older.group_key == d.group_key,
                                              older.status == "pending", older.id < d.id))
        claimable = and_(d.status == "pending", d.route == route, d.next_attempt_at <= now,
                         or_(d.claimed_until.is_(None), d.claimed_until < now), first_of_group)
        due_ids = select(d.id).where(claimable).order_by(d.next_attempt_at, d.id).limit(limit)
        with self.engine.begin() as conn:
            conn.execute(update(alert_deliveries).where(and_(d.id.in_(due_ids.scalar_subquery()), claimable))
                         .values(claimed_until=now + self.lease, claimed_by=token))
            rows = conn.execute(select(alert_deliveries).where(d.claimed_by == token).order_by(d.id)).all()
        return [Delivery(r.id, r.webhook_id, r.route, r.model, r.body.encode(), r.attempts, utc(r.created_at),
                         now + self.lease, r.failures) for r in rows]

    def _deliver_logged(self, delivery: Delivery) -> None:
        """Deliver; a crash in one sink is logged and the lease left to expire, the others go on."""
        try:
            self.deliver(delivery)
        except Exception:  # noqa: BLE001 - a bug in one sink must not stop the others
            log.exception("delivery %s to route %s crashed; it will be retried", delivery.webhook_id, delivery.route)
        finally:
            with self._lock:
                self._inflight.pop(delivery.id, None)
            self._done.set()

    def deliver(self, delivery: Delivery) -> str:
        """Send one claimed delivery once and record its outcome; return the outcome."""
        sink = self.sinks.get(delivery.route)
        if sink is not None and self._disabled(delivery.route):
            return self._finish(delivery, "disabled", "endpoint disabled")
        if sink is None:  # another worker's config: leave it
            self._write(delivery, claimed_until=None)
            return "deferred"
        failpoint("before_send")
        self._count_start(delivery)
        t0 = time.perf_counter()
        try:
            code, error = sink.send(delivery), None
        except DeliveryError as exc:
            code, error = getattr(exc, "status_code", None), exc
        self._count_attempt(delivery.route, "2xx" if error is None else _result_label(code, error), t0)
        failpoint("after_response")
        return self._record(delivery, code, error)

    def _count_start(self, delivery: Delivery) -> None:
        """Count the attempt before the POST, in its own transaction: a killed worker's POSTs are counted too."""
        now, d = self.clock(), alert_deliveries.c
        self._write(delivery, attempts=d.attempts + 1, first_attempt_at=func.coalesce(d.first_attempt_at, now),
                    last_attempt_at=now)

    def _record(self, delivery: Delivery, code: int | None, error: DeliveryError | None) -> str:
        """Turn one attempt's result into the delivery's next state."""
        if error is None:
            return self._finish(delivery, "sent", None, code)
        if isinstance(error, EndpointGoneError):
            self._disable(delivery.route, str(error))
            return self._finish(delivery, "disabled", str(error), code)
        if not isinstance(error, RetryableDeliveryError):
            return self._finish(delivery, "failed", str(error), code)
        failures = delivery.failures + 1
        next_at = self.clock() + timedelta(seconds=backoff_s(self.rules.retry, failures, error.retry_after))
        if next_at - delivery.created_at > timedelta(seconds=self.rules.retry.max_age_s):
            return self._finish(delivery, "dead", f"gave up after max age: {error}", code, failures)
        self._write(delivery, claimed_until=None, next_attempt_at=next_at, failures=failures,
                    last_status_code=code, last_error=str(error)[:500])
        self._count(delivery.route, "rescheduled")
        log.info("delivery %s to route %s: rescheduled (attempt %d: %s)", delivery.webhook_id, delivery.route,
                 failures, error)
        return "rescheduled"

    def _finish(self, delivery: Delivery, status: str, error: str | None, code: int | None = None,
                failures: int | None = None) -> str:
        """Record a final state (sent, failed, dead, disabled)."""
        values: dict[str, object] = {"status": status, "finished_at": self.clock(), "claimed_until": None,
                                     "last_error": error[:500] if error else None}
        if code is not None:
            values["last_status_code"] = code
        if failures is not None:
            values["failures"] = failures
        self._write(delivery, **values)
        self._count(delivery.route, status)
        log.info("delivery %s to route %s: %s", delivery.webhook_id, delivery.route, status)
        return status

    def _write(self, delivery: Delivery, **values: object) -> None:
        """Update the delivery (only while it is still pending)."""
        status = str(values.pop("status", "pending"))
        with self.engine.begin() as conn:
            set_delivery_status(conn, alert_deliveries.c.id == delivery.id, "pending", status, **values)

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
