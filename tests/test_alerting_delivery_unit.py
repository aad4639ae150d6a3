"""Delivery logic against httpx.MockTransport: classification, backoff across claims, Retry-After, 4xx, 410,
pinning, bookkeeping, per-route isolation and a prompt stop."""

from __future__ import annotations

import threading
import time
from datetime import datetime, timedelta, timezone

import httpx
import pytest
from sqlalchemy import select

from driftwarden.alerting.delivery import (
    EndpointGoneError,
    RejectedDeliveryError,
    RetryableDeliveryError,
    WebhookSink,
    classify,
    parse_retry_after,
)
from driftwarden.alerting.outbox import enqueue_alerts
from driftwarden.core.records import Delivery, FeatureOutcome, WindowReport
from driftwarden.alerting.rules import AlertRules, Route
from driftwarden.alerting.signing import verify_webhook
from driftwarden.alerting.worker import Dispatcher
from driftwarden.core.store import make_engine
from driftwarden.schemas.alert_tables import alert_deliveries, alert_endpoints

PUBLIC = "93.184.216.34"
KEY = b"unit-test-secret-unit-test-secret"
T0 = datetime(2026, 3, 1, tzinfo=timezone.utc)


def resolver(host: str, _port: int) -> list[str]:
    return [PUBLIC] if host == "hooks.example.com" else [host]


def sink(handler, **route_kw) -> WebhookSink:
    route = Route(name="r", url="https://hooks.example.com/hook", **route_kw)
    return WebhookSink(route, httpx.Client(transport=httpx.MockTransport(handler)), [KEY], resolver)


def delivery(i: int = 1) -> Delivery:
    return Delivery(i, f"msg_{i}", "r", "fraud", b'{"version":"1"}', 0, T0)


def test_request_is_pinned_signed_and_not_redirected() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(204)

    assert sink(handler).send(delivery()) == 204
    request = seen[0]
    assert request.url.host == PUBLIC and request.url.port in (None, 443)
    assert request.headers["host"] == "hooks.example.com"
    assert request.extensions["sni_hostname"] == "hooks.example.com"
    assert verify_webhook(request.headers, request.content, [KEY]) == "msg_1"


@pytest.mark.parametrize("status,error", [
    (200, None), (202, None), (301, RejectedDeliveryError), (302, RejectedDeliveryError), (400, RejectedDeliveryError),
    (401, RejectedDeliveryError), (404, RejectedDeliveryError), (410, EndpointGoneError),
    (429, RetryableDeliveryError), (500, RetryableDeliveryError), (503, RetryableDeliveryError),
])
def test_status_classification(status: int, error) -> None:
    if error is None:
        assert classify(status) == status
    else:
        with pytest.raises(error):
            classify(status)


def test_retry_after_forms() -> None:
    assert parse_retry_after("7") == 7.0
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:10 GMT", now=1445412480.0) == 10.0
    assert parse_retry_after("soon") is None and parse_retry_after(None) is None


@pytest.mark.parametrize("exc", [httpx.ReadTimeout("slow"), httpx.ConnectError("refused")])
def test_transport_errors_are_retryable(exc: Exception) -> None:
    def handler(_request: httpx.Request) -> httpx.Response:
        raise exc

    with pytest.raises(RetryableDeliveryError):
        sink(handler).send(delivery())


class Harness:
    """A dispatcher on SQLite whose sink is a MockTransport handler, on a clock the test moves."""

    def __init__(self, tmp_path, handler, **retry) -> None:
        policy = {"initial_s": 1.0, "jitter_s": 0.0, "max_backoff_s": 8.0, "max_age_s": 3600.0, **retry}
        self.rules = AlertRules(routes=[{"name": "r", "url": "https://hooks.example.com/hook"}],
                                group_wait="0s", group_interval="0s", retry=policy)
        self.engine = make_engine(f"sqlite:///{tmp_path / 's.db'}")
        self.now = T0
        self.dispatcher = Dispatcher(self.engine, self.rules, {"r": sink(handler)}, lease=timedelta(seconds=30),
                                     clock=lambda: self.now)

    def enqueue(self, i: int) -> None:
        rep = WindowReport("fraud", T0 + timedelta(minutes=i), T0 + timedelta(minutes=i + 1),
                           [FeatureOutcome(f"f{i}", count=100, drifted=True, severity="major")])
        with self.engine.begin() as conn:
            enqueue_alerts(conn, rep, self.rules, self.now)

    def rows(self) -> list:
        with self.engine.connect() as conn:
            return conn.execute(select(alert_deliveries).order_by(alert_deliveries.c.id)).all()

    def waits(self, rounds: int) -> list[float]:
        """Run ``rounds`` rounds, each at the delivery's next attempt time; return the waits between them."""
        waits = []
        for _ in range(rounds):
            self.dispatcher.run_once()
            row = self.rows()[0]
            if row.status != "pending":
                break
            due = row.next_attempt_at.replace(tzinfo=timezone.utc)
            waits.append((due - self.now).total_seconds())
            self.now = due
        return waits

    def close(self) -> None:
        self.engine.dispose()


@pytest.fixture()
def harness_factory(tmp_path):
    made: list[Harness] = []

    def make(handler, **retry) -> Harness:
        made.append(Harness(tmp_path, handler, **retry))
        return made[-1]

    yield make
    for h in made:
        h.close()


def test_one_post_per_claim_and_the_backoff_grows_across_claims(harness_factory) -> None:
    answers = iter([500, 502, 503, 500, 500, 500, 200])
    h = harness_factory(lambda _r: httpx.Response(next(answers)))
    h.enqueue(0)
    assert h.waits(10) == [1.0, 2.0, 4.0, 8.0, 8.0, 8.0]  # exponential up to max_backoff_s, never back to 1 s
    row = h.rows()[0]
    assert (row.status, row.attempts, row.failures, row.last_status_code) == ("sent", 7, 6, 200)
    assert row.first_attempt_at.replace(tzinfo=timezone.utc) == T0  # the first attempt, not the finish
    assert row.last_attempt_at.replace(tzinfo=timezone.utc) == T0 + timedelta(seconds=31)


def test_retry_after_on_429_is_honoured(harness_factory) -> None:
    answers = iter([httpx.Response(429, headers={"retry-after": "3"}), httpx.Response(200)])
    h = harness_factory(lambda _r: next(answers))
    h.enqueue(0)
    assert h.waits(3) == [3.0] and h.rows()[0].status == "sent"


def test_long_retry_after_reschedules_the_row_instead_of_holding_the_lease(harness_factory) -> None:
    h = harness_factory(lambda _r: httpx.Response(429, headers={"retry-after": "600"}))
    h.enqueue(0)
    h.dispatcher.run_once()
    row = h.rows()[0]
    assert (row.status, row.attempts, row.claimed_until) == ("pending", 1, None)
    assert row.next_attempt_at.replace(tzinfo=timezone.utc) == T0 + timedelta(seconds=600)
    assert h.dispatcher.run_once() == 0  # not due yet


def test_client_error_is_tried_once(harness_factory) -> None:
    calls: list[int] = []
    h = harness_factory(lambda _r: calls.append(1) or httpx.Response(400))
    h.enqueue(0)
    h.dispatcher.run_once()
    h.now += timedelta(minutes=10)
    h.dispatcher.run_once()
    assert len(calls) == 1 and h.rows()[0].status == "failed" and h.rows()[0].attempts == 1


def test_gone_disables_the_endpoint_and_later_deliveries_are_not_sent(harness_factory) -> None:
    calls: list[int] = []
    h = harness_factory(lambda _r: calls.append(1) or httpx.Response(410))
    h.enqueue(0)
    h.dispatcher.run_once()
    h.enqueue(1)
    h.dispatcher.run_once()
    assert len(calls) == 1
    assert [r.status for r in h.rows()] == ["disabled", "disabled"]
    with h.engine.connect() as conn:
        assert conn.execute(select(alert_endpoints.c.route)).scalars().all() == ["r"]


def test_delivery_past_max_age_is_dead(harness_factory) -> None:
    h = harness_factory(lambda _r: httpx.Response(500), max_age_s=60.0)
    h.enqueue(0)
    h.waits(20)
    row = h.rows()[0]
    assert row.status == "dead" and "max age" in row.last_error and row.attempts == row.failures > 1


def test_lease_shorter_than_a_timeout_is_refused(tmp_path) -> None:
    from driftwarden.core.errors import ConfigError

    engine = make_engine(f"sqlite:///{tmp_path / 'l.db'}")
    rules = AlertRules(routes=[{"name": "r", "url": "https://hooks.example.com/hook", "timeout_s": 10}])
    with pytest.raises(ConfigError, match="lease 5 s is too short"):
        Dispatcher(engine, rules, {"r": sink(lambda _r: httpx.Response(200), timeout_s=10)},
                   lease=timedelta(seconds=5))


def test_the_attempt_is_counted_before_the_post(harness_factory) -> None:
    seen: list[tuple] = []
    holder: list[Harness] = []

    def handler(_request: httpx.Request) -> httpx.Response:
        row = holder[0].rows()[0]  # what a worker killed right now would leave behind
        seen.append((row.attempts, row.first_attempt_at is not None, row.claimed_until is not None))
        return httpx.Response(503)

    h = harness_factory(handler)
    holder.append(h)
    h.enqueue(0)
    h.waits(2)
    assert seen == [(1, True, True), (2, True, True)]


def test_signing_keys_never_appear_in_a_repr() -> None:
    s = sink(lambda _r: httpx.Response(200))
    assert KEY.decode() not in repr(s) and KEY.decode() not in repr(s.route)


def test_any_alert_sink_plugs_into_the_dispatcher(tmp_path) -> None:
    class MemorySink:
        """A non-HTTP sink: the AlertSink protocol is all the dispatcher needs."""

        name = "r"

        def __init__(self) -> None:
            self.got: list[Delivery] = []

        def send(self, delivery: Delivery) -> int:
            self.got.append(delivery)
            return 200

    engine = make_engine(f"sqlite:///{tmp_path / 'p.db'}")
    rules = AlertRules(group_wait="0s", routes=[{"name": "r", "url": "https://hooks.example.com/"}])
    memory = MemorySink()
    rep = WindowReport("fraud", T0, T0 + timedelta(minutes=1), [FeatureOutcome("f", drifted=True, severity="major")])
    with engine.begin() as conn:
        enqueue_alerts(conn, rep, rules, T0)
    assert Dispatcher(engine, rules, {"r": memory}, clock=lambda: T0).run_once() == 1
    assert len(memory.got) == 1 and memory.got[0].webhook_id.startswith("msg_")


class BlockingSink:
    """A sink whose receiver hangs until released (a dead endpoint that only times out)."""

    def __init__(self, name: str, release: threading.Event | None = None) -> None:
        self.name, self.release, self.got = name, release, []

    def send(self, delivery: Delivery) -> int:
        self.got.append((delivery.webhook_id, time.monotonic()))
        if self.release is not None:
            self.release.wait(30)
            raise RetryableDeliveryError("timed out after 30 s")
        return 200


def two_route_store(tmp_path):
    engine = make_engine(f"sqlite:///{tmp_path / 'iso.db'}")
    rules = AlertRules(group_wait="0s", group_interval="0s", routes=[{"name": "slow", "url": "https://hooks.example.com/a"},
                                                {"name": "ok", "url": "https://hooks.example.com/b"}])
    return engine, rules


def enqueue_window(engine, rules, i: int) -> None:
    rep = WindowReport("fraud", T0 + timedelta(minutes=i), T0 + timedelta(minutes=i + 1),
                       [FeatureOutcome(f"f{i}", count=100, drifted=True, severity="major")])
    with engine.begin() as conn:
        enqueue_alerts(conn, rep, rules, datetime.now(timezone.utc))


def test_a_hanging_route_does_not_hold_up_a_healthy_one(tmp_path) -> None:
    engine, rules = two_route_store(tmp_path)
    release = threading.Event()
    slow, ok = BlockingSink("slow", release), BlockingSink("ok")
    dispatcher = Dispatcher(engine, rules, {"slow": slow, "ok": ok}, stop_grace_s=0.5)
    stop = threading.Event()
    worker = threading.Thread(target=dispatcher.run_forever, args=(stop, 0.05))
    worker.start()
    try:
        enqueue_window(engine, rules, 0)
        deadline = time.monotonic() + 10
        while not slow.got and time.monotonic() < deadline:
            time.sleep(0.02)
        enqueue_window(engine, rules, 1)  # while "slow" hangs, new alerts for both routes
        t0 = time.monotonic()
        while len(ok.got) < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert len(ok.got) == 2 and time.monotonic() - t0 < 3.0
        assert len(slow.got) == 1  # one POST in flight per route: the second waits behind the first
    finally:
        stop.set()
        release.set()
        worker.join(10)
        engine.dispose()


def test_stop_returns_within_the_grace_and_releases_the_lease_of_a_hanging_post(tmp_path) -> None:
    engine, rules = two_route_store(tmp_path)
    release = threading.Event()
    slow = BlockingSink("slow", release)
    dispatcher = Dispatcher(engine, rules, {"slow": slow}, stop_grace_s=0.5)
    stop = threading.Event()
    worker = threading.Thread(target=dispatcher.run_forever, args=(stop, 0.05))
    worker.start()
    enqueue_window(engine, rules, 0)
    deadline = time.monotonic() + 10
    while not slow.got and time.monotonic() < deadline:
        time.sleep(0.02)
    t0 = time.monotonic()
    stop.set()
    worker.join(10)
    took = time.monotonic() - t0
    try:
        assert not worker.is_alive() and took < 2.0
        with engine.connect() as conn:
            row = conn.execute(select(alert_deliveries).where(alert_deliveries.c.route == "slow")).one()
        assert (row.status, row.attempts, row.claimed_until) == ("pending", 1, None)
    finally:
        release.set()
        engine.dispose()
def test_worker_loop_survives_a_store_outage(tmp_path) -> None:
    import threading

    from sqlalchemy.exc import OperationalError

    engine = make_engine(f"sqlite:///{tmp_path / 'o.db'}")
    rules = AlertRules(group_wait="0s", routes=[{"name": "r", "url": "https://hooks.example.com/"}])
    sent: list[str] = []

    class Sink:
        name = "r"

        def send(self, delivery: Delivery) -> int:
            sent.append(delivery.webhook_id)
            return 200

    dispatcher = Dispatcher(engine, rules, {"r": Sink()}, clock=lambda: T0)
    stop, failures = threading.Event(), [2]
    real_claim = dispatcher.claim

    def flaky_claim():
        if failures[0]:
            failures[0] -= 1
            raise OperationalError("SELECT 1", {}, Exception("database is locked"))
        return real_claim()

    dispatcher.claim = flaky_claim
    rep = WindowReport("fraud", T0, T0 + timedelta(minutes=1), [FeatureOutcome("f", drifted=True, severity="major")])
    with engine.begin() as conn:
        enqueue_alerts(conn, rep, rules, T0)
    worker = threading.Thread(target=dispatcher.run_forever, args=(stop, 0.01))
    worker.start()
    for _ in range(200):
        if sent:
            break
        threading.Event().wait(0.01)
    stop.set()
    worker.join(5)
    assert failures == [0] and len(sent) == 1
