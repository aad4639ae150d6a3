"""Delivery against a real HTTP receiver on 127.0.0.1 (allow-listed route), store on SQLite."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import random
import time
from datetime import datetime, timedelta, timezone

import httpx
import pytest
from prometheus_client import CollectorRegistry
from sqlalchemy import func, select

from driftwarden.alerting.delivery import RetryableDeliveryError, WebhookSink
from driftwarden.alerting.metrics import DeliveryMetrics
from driftwarden.alerting.outbox import enqueue_alerts
from driftwarden.core.records import Delivery, FeatureOutcome, WindowReport
from driftwarden.alerting.rules import AlertRules, Route
from driftwarden.alerting.testing import Reply, WebhookReceiver
from driftwarden.alerting.worker import Dispatcher, build_sinks
from driftwarden.core.store import make_engine
from driftwarden.schemas.alert_tables import alert_deliveries, alert_outbox, alerts

SECRET = "whsec_" + base64.b64encode(b"integration-secret-32-bytes-long").decode()
T0 = datetime.now(timezone.utc).replace(microsecond=0)
FAST_RETRY = {"initial_s": 0.2, "max_backoff_s": 1.0, "jitter_s": 0.1, "max_age_s": 120.0}


@pytest.fixture()
def engine(tmp_path):
    eng = make_engine(f"sqlite:///{tmp_path / 'store.db'}")
    yield eng
    eng.dispose()


@pytest.fixture()
def client():
    with httpx.Client(follow_redirects=False, trust_env=False) as c:
        yield c


def make_rules(*urls: str, fmt: str = "native", timeout_s: float = 5.0, **kw) -> AlertRules:
    routes = [{"name": f"r{i}", "url": u, "allow_private": True, "secret_env": "TEST_HOOK_SECRET", "format": fmt,
               "timeout_s": timeout_s} for i, u in enumerate(urls)]
    return AlertRules(routes=routes, group_wait=kw.pop("group_wait", "0s"), retry=kw.pop("retry", FAST_RETRY), **kw)


def enqueue_drift(engine, rules: AlertRules, models: int = 3, now: datetime = T0) -> int:
    written = 0
    for m in range(models):
        rep = WindowReport(f"model-{m}", now - timedelta(minutes=1), now,
                           [FeatureOutcome("amount", drifted=True, severity="major", gate_psi=0.5)])
        with engine.begin() as conn:
            written += enqueue_alerts(conn, rep, rules, now)
    return written


def drain(dispatcher: Dispatcher, engine, deadline_s: float = 30.0) -> None:
    """Run the dispatcher until nothing is pending (bounded)."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        dispatcher.run_once()
        with engine.connect() as conn:
            if not conn.execute(select(func.count()).where(alert_deliveries.c.status == "pending")).scalar_one():
                with engine.connect() as c2:
                    if not c2.execute(select(func.count()).where(alert_outbox.c.pending.is_(True))).scalar_one():
                        return
        time.sleep(0.05)
    raise AssertionError("deliveries still pending at the deadline")


def statuses(engine) -> list[str]:
    with engine.connect() as conn:
        return conn.execute(select(alert_deliveries.c.status).order_by(alert_deliveries.c.id)).scalars().all()


def independently_verified(received) -> bool:
    """Check the Standard Webhooks signature with hmac, not with the module under test."""
    key = base64.b64decode(SECRET.removeprefix("whsec_"))
    signed = f"{received.headers['webhook-id']}.{received.headers['webhook-timestamp']}.".encode() + received.body
    expected = base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()
    return f"v1,{expected}" in received.headers["webhook-signature"].split(" ")


def test_receiver_failing_for_4_5_s_gets_each_alert_once_per_webhook_id(engine, client, monkeypatch) -> None:
    monkeypatch.setenv("TEST_HOOK_SECRET", SECRET)
    started: list[float] = []

    def flaky(item) -> Reply:
        started.append(started[0] if started else item.at)
        return Reply(500) if item.at - started[0] < 4.5 else Reply(200)

    with WebhookReceiver(flaky) as receiver:
        rules = make_rules(receiver.url + "/hook")
        assert enqueue_drift(engine, rules, models=3) == 3
        registry = CollectorRegistry()
        dispatcher = Dispatcher(engine, rules, build_sinks(rules, client), DeliveryMetrics(registry),
                                lease=timedelta(seconds=30))
        drain(dispatcher, engine)
    assert statuses(engine) == ["sent"] * 3
    accepted = [r for r in receiver.received if r.at - started[0] >= 4.5]
    by_id = {}
    for r in accepted:
        by_id.setdefault(r.headers["webhook-id"], []).append(r)
    assert len(by_id) == 3 and all(len(v) == 1 for v in by_id.values())
    assert len(receiver.received) > 3  # there were failed attempts before
    assert all(independently_verified(r) for r in receiver.received)
    bodies = {}
    for r in receiver.received:  # every retry of one webhook-id carried the same body
        bodies.setdefault(r.headers["webhook-id"], set()).add(r.body)
    assert all(len(b) == 1 for b in bodies.values())
    assert registry.get_sample_value("driftwarden_alert_deliveries_total", {"route": "r0", "outcome": "sent"}) == 3
    assert registry.get_sample_value("driftwarden_alert_delivery_attempts_total", {"route": "r0", "result": "5xx"}) >= 3


def test_receiver_slower_than_the_timeout_is_aborted_at_the_timeout(client) -> None:
    with WebhookReceiver(lambda _r: Reply(200, delay_s=3.0)) as receiver:
        route = Route(name="slow", url=receiver.url + "/hook", allow_private=True, timeout_s=0.5)
        sink = WebhookSink(route, client, [])
        t0 = time.monotonic()
        with pytest.raises(RetryableDeliveryError, match="timed out"):
            sink.send(Delivery(1, "msg_slow", "slow", "m", b"{}", 0, T0))
        elapsed = time.monotonic() - t0
    assert 0.5 <= elapsed < 1.5, elapsed


@pytest.mark.parametrize("status", [400, 401, 403, 404, 422])
def test_client_error_is_tried_once(engine, client, monkeypatch, status: int) -> None:
    monkeypatch.setenv("TEST_HOOK_SECRET", SECRET)
    with WebhookReceiver(lambda _r: Reply(status)) as receiver:
        rules = make_rules(receiver.url + "/hook")
        enqueue_drift(engine, rules, models=1)
        dispatcher = Dispatcher(engine, rules, build_sinks(rules, client))
        for _ in range(3):
            dispatcher.run_once()
    assert len(receiver.received) == 1
    assert statuses(engine) == ["failed"]


def test_gone_disables_the_endpoint(engine, client, monkeypatch) -> None:
    monkeypatch.setenv("TEST_HOOK_SECRET", SECRET)
    with WebhookReceiver(lambda _r: Reply(410)) as receiver:
        rules = make_rules(receiver.url + "/hook")
        enqueue_drift(engine, rules, models=1)
        dispatcher = Dispatcher(engine, rules, build_sinks(rules, client))
        dispatcher.run_once()
        enqueue_drift(engine, rules, models=3)  # model-0 is a re-run (no new row); models 1 and 2 are new
        drain(dispatcher, engine)
    assert len(receiver.received) == 1
    assert statuses(engine) == ["disabled"] * 3


def test_redirects_are_not_followed(engine, client, monkeypatch) -> None:
    monkeypatch.setenv("TEST_HOOK_SECRET", SECRET)
    with WebhookReceiver() as target:
        with WebhookReceiver(lambda _r: Reply(307, {"location": target.url + "/stolen"})) as redirector:
            rules = make_rules(redirector.url + "/hook")
            enqueue_drift(engine, rules, models=2)
            drain(Dispatcher(engine, rules, build_sinks(rules, client)), engine)
    assert len(redirector.received) == 2
    assert target.received == []
    assert statuses(engine) == ["failed", "failed"]


def test_1000_verdicts_inside_one_group_wait_give_one_post_per_group(engine, client, monkeypatch) -> None:
    monkeypatch.setenv("TEST_HOOK_SECRET", SECRET)
    rng = random.Random(7)
    severities = ["none", "minor", "moderate", "major"]
    with WebhookReceiver() as native, WebhookReceiver() as am:
        rules = AlertRules(routes=[
            {"name": "native", "url": native.url, "allow_private": True, "secret_env": "TEST_HOOK_SECRET"},
            {"name": "am", "url": am.url, "allow_private": True, "format": "alertmanager"}],
            group_wait="30s", group_interval="0s", retry=FAST_RETRY)
        clock = [T0]
        dispatcher = Dispatcher(engine, rules, build_sinks(rules, client), clock=lambda: clock[0])
        verdicts = written = 0
        for window in range(10):
            for m in range(10):
                feats = [FeatureOutcome(f"f{k}", count=100, drifted=(s := rng.choice(severities)) != "none",
                                        severity=s) for k in range(10)]
                verdicts += len(feats)
                rep = WindowReport(f"model-{m}", T0 + timedelta(minutes=window), T0 + timedelta(minutes=window + 1), feats)
                with engine.begin() as conn:
                    written += enqueue_alerts(conn, rep, rules, T0 + timedelta(seconds=window))
            clock[0] = T0 + timedelta(seconds=window)
            dispatcher.run_once()  # inside the group wait: nothing may be sent yet
        assert verdicts == 1000 and written > 100
        assert native.received == [] and am.received == []
        clock[0] = T0 + timedelta(seconds=31)
        drain(dispatcher, engine)
    assert len(native.received) == 10 and len(am.received) == 10
    assert sorted(json.loads(r.body)["model"] for r in native.received) == [f"model-{m}" for m in range(10)]
    with engine.connect() as conn:  # each POST lists every alert of its model still firing, each with its status
        firing = conn.execute(select(alerts.c.model, alerts.c.feature).where(alerts.c.status == "firing")).all()
    listed = {(b["model"], a["feature"]) for b in (json.loads(r.body) for r in native.received) for a in b["alerts"]}
    assert listed == {tuple(f) for f in firing}
    assert sum(len(json.loads(r.body)["alerts"]) for r in am.received) == len(firing)
