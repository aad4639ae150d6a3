"""On real PostgreSQL: alert lifecycles under a concurrent writer and two competing delivery workers."""

from __future__ import annotations

import json
import threading
import time
from datetime import datetime, timedelta, timezone

import pytest
from sqlalchemy import func, select

from driftwarden.alerting.outbox import enqueue_alerts
from driftwarden.core.records import FeatureOutcome, WindowReport
from driftwarden.alerting.rules import AlertRules
from driftwarden.alerting.testing import WebhookReceiver
from driftwarden.alerting.worker import Dispatcher, build_sinks, make_client
from driftwarden.schemas.alert_tables import alert_deliveries, alert_outbox, alerts

pytestmark = pytest.mark.services
MODELS, WINDOWS, FEATURES = 8, 9, 4
ORDER = {"firing": 0, "resolved": 1}


def severities(w: int) -> dict[str, str]:
    """Feature f{k} drifts in windows k..k+1: features join one by one and leave one by one."""
    return {f"f{k}": "major" if k <= w <= k + 1 else "none" for k in range(FEATURES)}


def test_two_workers_and_a_writer_tell_every_lifecycle_in_order_once(pg_engine) -> None:
    with WebhookReceiver() as receiver:
        rules = AlertRules(group_wait="0s", group_interval="0s", resolve_after_windows=2,
                           routes=[{"name": "oncall", "url": receiver.url, "allow_private": True}])
        t0 = datetime.now(timezone.utc) - timedelta(hours=1)
        stop = threading.Event()
        errors: list[BaseException] = []

        def writer() -> None:
            try:
                for w in range(WINDOWS):
                    for m in range(MODELS):
                        start = t0 + timedelta(minutes=w)
                        feats = [FeatureOutcome(n, count=100, drifted=s != "none", severity=s)
                                 for n, s in severities(w).items()]
                        with pg_engine.begin() as conn:
                            enqueue_alerts(conn, WindowReport(f"m{m}", start, start + timedelta(minutes=1), feats),
                                           rules, datetime.now(timezone.utc))
                    time.sleep(0.2)
            except BaseException as exc:  # noqa: BLE001 - surfaced below
                errors.append(exc)

        def worker() -> None:
            try:
                with make_client() as client:
                    dispatcher = Dispatcher(pg_engine, rules, build_sinks(rules, client))
                    while not stop.is_set():
                        if not dispatcher.run_once():
                            stop.wait(0.02)
            except BaseException as exc:  # noqa: BLE001
                errors.append(exc)

        threads = [threading.Thread(target=worker) for _ in range(2)]
        for t in threads:
            t.start()
        writer()
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            with pg_engine.connect() as conn:
                waiting = conn.execute(select(func.count()).where(alert_outbox.c.pending.is_(True))).scalar_one()
                pending = conn.execute(select(func.count()).where(alert_deliveries.c.status == "pending")).scalar_one()
            if not waiting and not pending:
                break
            time.sleep(0.1)
        stop.set()
        for t in threads:
            t.join(30)
    assert not errors, errors
    with pg_engine.connect() as conn:
        statuses = conn.execute(select(alerts.c.status, func.count()).group_by(alerts.c.status)).all()
        sent = conn.execute(select(alert_deliveries.c.webhook_id).where(alert_deliveries.c.status == "sent")).scalars()
        sent = sorted(sent)
    assert dict(statuses) == {"resolved": MODELS * FEATURES}
    by_id = receiver.by_webhook_id()
    assert sorted(by_id) == sent and all(len(v) == 1 for v in by_id.values())  # each webhook id once
    told: dict[tuple[str, str], list[str]] = {}
    for item in sorted(receiver.received, key=lambda r: r.at):
        for a in json.loads(item.body)["alerts"]:
            told.setdefault((a["model"], a["feature"]), []).append(a["status"])
    # an alert that fired and resolved while its group's previous notification was in flight is never told at
    # all (Alertmanager's semantics); every alert told as firing is told resolved, in order
    assert len(told) >= MODELS * FEATURES // 2, told
    for identity, seq in told.items():  # lifecycle order, and what each receiver last heard is the truth
        assert [ORDER[s] for s in seq] == sorted(ORDER[s] for s in seq), (identity, seq)
        assert seq[0] == "firing" and seq[-1] == "resolved", (identity, seq)
