"""On real PostgreSQL: the outbox under concurrent writers and two competing delivery workers."""

from __future__ import annotations

import threading
import time
from datetime import datetime, timedelta, timezone

import pytest
from sqlalchemy import func, select

from alerting.outbox import enqueue_alerts
from alerting.records import FeatureOutcome, WindowReport
from alerting.rules import AlertRules
from alerting.testing import WebhookReceiver
from alerting.worker import Dispatcher, build_sinks, make_client
from schemas.alert_tables import alert_deliveries, alert_outbox

pytestmark = pytest.mark.services
MODELS, WINDOWS = 12, 6


def test_two_workers_and_a_writer_deliver_every_row_exactly_once(pg_engine) -> None:
    with WebhookReceiver() as receiver:
        rules = AlertRules(group_wait="0s", routes=[{"name": "oncall", "url": receiver.url, "allow_private": True}])
        t0 = datetime.now(timezone.utc) - timedelta(hours=1)
        stop = threading.Event()
        errors: list[BaseException] = []

        def writer() -> None:
            try:
                for w in range(WINDOWS):
                    for m in range(MODELS):
                        start = t0 + timedelta(minutes=w)
                        feats = [FeatureOutcome(f"f{w}", drifted=True, severity="major")]
                        with pg_engine.begin() as conn:
                            enqueue_alerts(conn, WindowReport(f"m{m}", start, start + timedelta(minutes=1), feats),
                                           rules, datetime.now(timezone.utc) - timedelta(seconds=1))
            except BaseException as exc:  # noqa: BLE001 - surfaced below
                errors.append(exc)

        def worker() -> None:
            try:
                with make_client() as client:
                    dispatcher = Dispatcher(pg_engine, rules, build_sinks(rules, client), batch=3)
                    while not stop.is_set():
                        if not dispatcher.run_once():
                            stop.wait(0.02)
            except BaseException as exc:  # noqa: BLE001
                errors.append(exc)

        threads = [threading.Thread(target=worker) for _ in range(2)]
        for t in threads:
            t.start()
        writer()
        deadline = datetime.now() + timedelta(seconds=60)
        while datetime.now() < deadline:
            with pg_engine.connect() as conn:
                unsent = conn.execute(select(func.count()).where(alert_outbox.c.delivery_id.is_(None))).scalar_one()
                pending = conn.execute(select(func.count()).where(alert_deliveries.c.status != "sent")).scalar_one()
            if not unsent and not pending:
                break
            time.sleep(0.05)
        stop.set()
        for t in threads:
            t.join(30)
    assert not errors, errors
    with pg_engine.connect() as conn:
        rows = conn.execute(select(alert_outbox.c.id)).all()
        deliveries = conn.execute(select(alert_deliveries.c.webhook_id, alert_deliveries.c.alert_count)).all()
    assert len(rows) == MODELS * (2 * WINDOWS - 1)  # each new feature set: resolve the old, fire the new
    assert sum(d.alert_count for d in deliveries) == len(rows)
    by_id = receiver.by_webhook_id()
    assert sorted(by_id) == sorted(d.webhook_id for d in deliveries)
    assert all(len(v) == 1 for v in by_id.values())
