"""Alert lifecycle through the outbox: dedupe, repeat, resolve, silences, acks, atomicity, grouping."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import pytest
from sqlalchemy import func, select, update

from alerting.fingerprint import fingerprint
from alerting.outbox import enqueue_alerts, seal_due_groups
from alerting.records import FeatureOutcome, WindowReport
from alerting.rules import AlertRules
from driftwarden.store import make_engine, upsert
from schemas.alert_tables import alert_deliveries, alert_outbox, alert_silences, alerts
from schemas.tables import window_results

T0 = datetime(2026, 3, 1, tzinfo=timezone.utc)
MINUTE = timedelta(minutes=1)


@pytest.fixture()
def engine(tmp_path):
    eng = make_engine(f"sqlite:///{tmp_path / 'store.db'}")
    yield eng
    eng.dispose()


def rules(**kw) -> AlertRules:
    routes = kw.pop("routes", [{"name": "oncall", "url": "http://127.0.0.1:1/hook", "allow_private": True}])
    return AlertRules(routes=routes, **kw)


def feature(name: str, severity: str = "none", **kw) -> FeatureOutcome:
    return FeatureOutcome(name=name, count=1000, drifted=severity != "none", severity=severity,
                          alarm=severity != "none", gate_psi=0.3 if severity != "none" else 0.01, **kw)


def report(i: int, *features: FeatureOutcome, model: str = "fraud") -> WindowReport:
    return WindowReport(model, T0 + i * MINUTE, T0 + (i + 1) * MINUTE, list(features))


def enqueue(engine, rep: WindowReport, r: AlertRules, now: datetime | None = None) -> int:
    with engine.begin() as conn:
        return enqueue_alerts(conn, rep, r, now or rep.window_end)


def outbox_rows(engine) -> list:
    with engine.connect() as conn:
        return conn.execute(select(alert_outbox).order_by(alert_outbox.c.id)).all()


def test_drift_fires_once_and_rerun_of_the_window_adds_nothing(engine) -> None:
    r = rules()
    rep = report(0, feature("amount", "major"), feature("age"))
    assert enqueue(engine, rep, r) == 1
    assert enqueue(engine, rep, r) == 0
    assert enqueue(engine, rep, r, now=rep.window_end + timedelta(hours=9)) == 0
    rows = outbox_rows(engine)
    assert [(x.kind, x.fingerprint) for x in rows] == [("firing", fingerprint("fraud", ["amount"], "major"))]


def test_persisting_drift_repeats_only_after_the_repeat_interval(engine) -> None:
    r = rules(repeat_interval="10m")
    counts = [enqueue(engine, report(i, feature("amount", "major")), r) for i in range(25)]
    assert counts == [1 if i in (0, 10, 20) else 0 for i in range(25)]


def test_resolved_after_a_clean_window_and_only_once(engine) -> None:
    r = rules()
    enqueue(engine, report(0, feature("amount", "moderate")), r)
    assert enqueue(engine, report(1, feature("amount")), r) == 1
    assert enqueue(engine, report(1, feature("amount")), r) == 0
    assert enqueue(engine, report(2, feature("amount")), r) == 0
    kinds = [x.kind for x in outbox_rows(engine)]
    assert kinds == ["firing", "resolved"]
    doc = json.loads(outbox_rows(engine)[1].alert)
    assert doc["status"] == "resolved" and doc["ends_at"] == "2026-03-01T00:01:00Z"


def test_older_window_rerun_after_resolution_changes_nothing(engine) -> None:
    r = rules()
    enqueue(engine, report(0, feature("amount", "major")), r)
    enqueue(engine, report(1, feature("amount")), r)
    assert enqueue(engine, report(0, feature("amount", "major")), r) == 0
    with engine.connect() as conn:
        assert conn.execute(select(alerts.c.status)).scalar_one() == "resolved"


def test_changed_feature_set_resolves_the_old_alert_and_fires_the_new(engine) -> None:
    r = rules()
    enqueue(engine, report(0, feature("amount", "major")), r)
    assert enqueue(engine, report(1, feature("amount", "major"), feature("age", "minor")), r) == 2
    rows = outbox_rows(engine)
    assert [x.kind for x in rows] == ["firing", "resolved", "firing"]
    assert rows[2].fingerprint == fingerprint("fraud", ["age", "amount"], "major")


def test_min_severity_and_route_matchers_filter(engine) -> None:
    r = rules(min_severity="moderate", routes=[
        {"name": "all", "url": "http://127.0.0.1:1/a", "allow_private": True},
        {"name": "major-fraud", "url": "http://127.0.0.1:1/b", "allow_private": True,
         "matchers": [{"label": "severity", "op": ">=", "value": "major"}, {"label": "model", "op": "=~", "value": "fr.*"}]},
    ])
    assert enqueue(engine, report(0, feature("amount", "minor")), r) == 0
    assert enqueue(engine, report(1, feature("amount", "moderate")), r) == 1
    assert enqueue(engine, report(2, feature("amount", "major")), r) == 3  # resolve+fire on "all", fire on major-fraud
    assert enqueue(engine, report(3, feature("x", "major"), model="churn"), r) == 1
    assert sorted({x.route for x in outbox_rows(engine)}) == ["all", "major-fraud"]


def test_silence_suppresses_until_it_expires(engine) -> None:
    r = rules()
    with engine.begin() as conn:
        conn.execute(alert_silences.insert().values(
            matchers=json.dumps([{"label": "model", "op": "=", "value": "fraud"}]), starts_at=T0,
            ends_at=T0 + 5 * MINUTE, created_by="test", comment=""))
    counts = [enqueue(engine, report(i, feature("amount", "major")), r) for i in range(8)]
    assert counts == [0, 0, 0, 0, 1, 0, 0, 0]  # window 4 is enqueued at T0+5m, when the silence ends


def test_acknowledged_alert_does_not_repeat_but_resolves(engine) -> None:
    r = rules(repeat_interval="2m")
    enqueue(engine, report(0, feature("amount", "major")), r)
    with engine.begin() as conn:
        conn.execute(update(alerts).values(acked_at=T0, acked_by="me"))
    assert [enqueue(engine, report(i, feature("amount", "major")), r) for i in range(1, 6)] == [0] * 5
    assert enqueue(engine, report(6, feature("amount")), r) == 1


def test_outbox_rows_roll_back_with_the_results(engine) -> None:
    r = rules()
    rep = report(0, feature("amount", "major"))
    with pytest.raises(RuntimeError):
        with engine.begin() as conn:
            upsert(conn, window_results, [{
                "model": "fraud", "feature": "amount", "window_start": rep.window_start, "window_end": rep.window_end,
                "kind": "numeric", "count": 1000, "missing": 0, "gate_alarm": True, "drifted": True,
                "severity": "major", "computed_at": rep.window_end}], keys=("model", "feature", "window_start"))
            assert enqueue_alerts(conn, rep, r, rep.window_end) == 1
            raise RuntimeError("job crashed before commit")
    assert outbox_rows(engine) == []
    with engine.connect() as conn:
        assert conn.execute(select(func.count()).select_from(window_results)).scalar_one() == 0
    assert enqueue(engine, rep, r) == 1  # the re-run after the crash alerts once


def test_groups_seal_only_after_group_wait_and_take_every_pending_row(engine) -> None:
    r = rules(group_wait="30s", routes=[
        {"name": "a", "url": "http://127.0.0.1:1/a", "allow_private": True},
        {"name": "b", "url": "http://127.0.0.1:1/b", "allow_private": True, "format": "alertmanager"}])
    now = T0
    for m in range(3):
        for i in range(4):
            with engine.begin() as conn:
                enqueue_alerts(conn, report(i, feature(f"f{i}", "major"), model=f"m{m}"), r, now + i * timedelta(seconds=5))
    with engine.begin() as conn:
        assert seal_due_groups(conn, r, now + timedelta(seconds=29)) == []
        sealed = seal_due_groups(conn, r, now + timedelta(seconds=30))
    assert len(sealed) == 6  # (3 models) x (2 routes)
    with engine.connect() as conn:
        deliveries = conn.execute(select(alert_deliveries)).all()
        assert conn.execute(select(func.count()).where(alert_outbox.c.delivery_id.is_(None))).scalar_one() == 0
    assert sum(d.alert_count for d in deliveries) == len(outbox_rows(engine))
    assert len({d.webhook_id for d in deliveries}) == 6
    body = json.loads(next(d.body for d in deliveries if d.format == "alertmanager"))
    assert body["version"] == "4" and body["groupLabels"]["model"].startswith("m")


def test_rows_of_routes_missing_from_the_config_wait_instead_of_dying(engine) -> None:
    full = rules()
    enqueue(engine, report(0, feature("amount", "major")), full)
    with engine.begin() as conn:
        assert seal_due_groups(conn, AlertRules(group_wait="0s"), T0 + timedelta(hours=1)) == []
        assert len(seal_due_groups(conn, full, T0 + timedelta(hours=1))) == 1
