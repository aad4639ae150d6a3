"""A version-1 alerting store (one alert per drifted feature set) is upgraded in place, on SQLite and PostgreSQL."""

from __future__ import annotations

import json
import uuid
from datetime import datetime, timedelta, timezone

import pytest
from sqlalchemy import (BigInteger, Column, DateTime, Index, Integer, MetaData, String, Table, Text, UniqueConstraint,
                        create_engine, insert, inspect, select, text)

from driftwarden.alerting.fingerprint import fingerprint
from driftwarden.alerting.outbox import enqueue_alerts, seal_due_groups
from driftwarden.core.records import FeatureOutcome, WindowReport
from driftwarden.alerting.rules import AlertRules
from driftwarden.core.store import make_engine
from driftwarden.schemas.alert_tables import alert_deliveries, alert_outbox, alert_schema, alerts

T0 = datetime(2026, 3, 1, tzinfo=timezone.utc)
MINUTE = timedelta(minutes=1)


def v1_tables() -> MetaData:
    """The alerting tables as driftwarden wrote them before alert identity became (model, feature, segment)."""
    meta, ts = MetaData(), DateTime(timezone=True)
    Table("alert_models", meta, Column("model", String(200), primary_key=True),
          Column("last_window_start", ts, nullable=False), Column("firing_fingerprint", String(32)))
    Table("alerts", meta, Column("id", Integer, primary_key=True), Column("fingerprint", String(32), unique=True),
          Column("model", String(200)), Column("severity", String(16)), Column("features", Text),
          Column("status", String(16)), Column("starts_at", ts), Column("ends_at", ts),
          Column("last_window_start", ts), Column("last_window_end", ts), Column("last_notified_at", ts),
          Column("acked_at", ts), Column("acked_by", String(200)), Column("details", Text), Column("updated_at", ts))
    Table("alert_outbox", meta, Column("id", Integer, primary_key=True), Column("route", String(100)),
          Column("model", String(200)), Column("fingerprint", String(32)), Column("kind", String(16)),
          Column("window_start", ts), Column("window_end", ts), Column("alert", Text), Column("created_at", ts),
          Column("delivery_id", BigInteger),
          UniqueConstraint("route", "fingerprint", "window_start", "kind", name="uq_alert_outbox"),
          Index("ix_alert_outbox_pending", "route", "model", "delivery_id"))
    Table("alert_deliveries", meta, Column("id", Integer, primary_key=True), Column("webhook_id", String(64), unique=True),
          Column("route", String(100)), Column("model", String(200)), Column("format", String(16)), Column("body", Text),
          Column("alert_count", Integer), Column("status", String(16)), Column("attempts", Integer),
          Column("created_at", ts), Column("next_attempt_at", ts), Column("claimed_until", ts),
          Column("claimed_by", String(100)), Column("first_attempt_at", ts), Column("last_attempt_at", ts),
          Column("last_status_code", Integer), Column("last_error", String(500)), Column("finished_at", ts),
          Index("ix_alert_deliveries_due", "status", "next_attempt_at"))
    return meta


def fill_v1(url: str) -> None:
    engine = create_engine(url)
    meta = v1_tables()
    meta.create_all(engine)
    details = [{"name": "amount", "severity": "major", "drifted": True, "count": 500},
               {"name": "age", "severity": "moderate", "drifted": True, "count": 500}]
    with engine.begin() as conn:
        conn.execute(insert(meta.tables["alerts"]).values(
            fingerprint="0123456789abcdef", model="fraud", severity="major", features='["age","amount"]',
            status="firing", starts_at=T0, last_window_start=T0, last_window_end=T0 + MINUTE, last_notified_at=T0,
            acked_by=None, details=json.dumps(details), updated_at=T0))
        conn.execute(insert(meta.tables["alert_deliveries"]).values(
            webhook_id="msg_v1", route="oncall", model="fraud", format="native", body="{}", alert_count=1,
            status="pending", attempts=2, created_at=T0, next_attempt_at=T0))
        conn.execute(insert(meta.tables["alert_outbox"]).values(
            route="oncall", model="fraud", fingerprint="0123456789abcdef", kind="firing", window_start=T0,
            window_end=T0 + MINUTE, alert="{}", created_at=T0, delivery_id=1))
    engine.dispose()


def check_upgrade(url: str) -> None:
    fill_v1(url)
    engine = make_engine(url)
    make_engine(url).dispose()  # a second start changes nothing
    rules = AlertRules(group_wait="0s", group_interval="0s", resolve_after_windows=1,
                       routes=[{"name": "oncall", "url": "http://127.0.0.1:1/", "allow_private": True}])
    try:
        with engine.connect() as conn:
            rows = conn.execute(select(alerts).order_by(alerts.c.feature)).all()
            old = conn.execute(select(alert_deliveries)).one()
            assert conn.execute(select(alert_schema.c.version)).scalar_one() == 2
        assert [(r.feature, r.status, r.severity, r.migrated) for r in rows] == [
            ("age", "firing", "moderate", True), ("amount", "firing", "major", True)]
        assert rows[1].fingerprint == fingerprint("fraud", "amount")
        assert (old.webhook_id, old.status, old.attempts, old.failures, old.group_key) == ("msg_v1", "pending", 2, 0, "")
        assert "alert_outbox" not in inspect(engine).get_table_names()
        # the receiver was told (by version 1) that both fire: amount's resolve is told, age keeps firing quietly
        rep = WindowReport("fraud", T0 + MINUTE, T0 + 2 * MINUTE,
                           [FeatureOutcome("amount", count=500), FeatureOutcome("age", count=500, drifted=True,
                                                                                 severity="moderate")])
        with engine.begin() as conn:
            assert enqueue_alerts(conn, rep, rules, T0 + 2 * MINUTE) == 1
            ids = seal_due_groups(conn, rules, T0 + 2 * MINUTE)
            body = json.loads(conn.execute(select(alert_deliveries.c.body).where(
                alert_deliveries.c.id == ids[0])).scalar_one())
            assert conn.execute(select(alert_outbox.c.pending)).scalars().all() == [False]
        assert [(a["feature"], a["status"]) for a in body["alerts"]] == [("amount", "resolved")]
    finally:
        engine.dispose()


def test_v1_sqlite_store_is_upgraded_in_place(tmp_path) -> None:
    check_upgrade(f"sqlite:///{tmp_path / 'v1.db'}")


@pytest.mark.services
def test_v1_postgres_store_is_upgraded_in_place(pg_url: str) -> None:
    schema = f"t_{uuid.uuid4().hex[:10]}"
    admin = create_engine(pg_url.replace("postgresql://", "postgresql+psycopg://"))
    with admin.begin() as conn:
        conn.execute(text(f"CREATE SCHEMA {schema}"))
    try:
        check_upgrade(f"{pg_url.replace('postgresql://', 'postgresql+psycopg://')}?options=-csearch_path%3D{schema}")
    finally:
        with admin.begin() as conn:
            conn.execute(text(f"DROP SCHEMA {schema} CASCADE"))
        admin.dispose()
