"""A store of the current release (schema version 5) with data in it is upgraded by the Alembic migrations,
on SQLite and PostgreSQL: every row kept, the new columns and tables there, the /metrics totals counted
from the rows, and the job's writes go on. The release's tables come from ``tests/data/store_v5_*.sql``,
the DDL that release's ``create_all`` ran (made from its own table definitions, commit 9b4970c)."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry
from sqlalchemy import create_engine, func, inspect, select, text

from driftwarden.alerting.metrics import StoreCollector
from driftwarden.core.errors import ConfigError
from driftwarden.core.migrate import head_revision, store_revision
from driftwarden.core.records import FeatureOutcome, WindowReport
from driftwarden.core.store import create_schema, make_engine
from driftwarden.core.totals import read_totals, recount
from driftwarden.pipeline.results import store_window
from driftwarden.schemas.tables import SCHEMA_VERSION, segment_results, window_counts, window_results

DATA = Path(__file__).resolve().parent / "data"
T0 = datetime(2026, 11, 2, 12, tzinfo=timezone.utc)
MINUTE = timedelta(minutes=1)


def release_v5_store(url: str) -> None:
    """The release's tables, created by its DDL, with three windows of results, segments, dead letters,
    a firing alert and its deliveries in them, as that release stored them."""
    dialect = "postgresql" if url.startswith("postgresql") else "sqlite"
    engine = create_engine(url.replace("postgresql://", "postgresql+psycopg://"))
    with engine.begin() as conn:
        for statement in (DATA / f"store_v5_{dialect}.sql").read_text().split("\n;"):
            sql = "\n".join(line for line in statement.splitlines() if not line.startswith("--")).strip()
            if sql:
                conn.execute(text(sql))
        conn.execute(text("INSERT INTO schema_info (id, version) VALUES (1, 5)"))
        conn.execute(text("INSERT INTO alert_schema (id, version) VALUES (1, 2)"))
        for i in range(3):
            ws = T0 + i * MINUTE
            row = {"ws": ws, "we": ws + MINUTE, "at": ws + MINUTE}
            conn.execute(text("INSERT INTO window_counts (model, window_start, window_end, events, late,"
                              " unknown_features, deep_checked, computed_at) VALUES ('fraud', :ws, :we, :n, 0, 0,"
                              " :deep, :at)"), {**row, "n": 100 * (i + 1), "deep": i == 2})
            for feature in ("amount", "country"):
                alarm = i == 2 and feature == "amount"
                conn.execute(text(
                    "INSERT INTO window_results (model, feature, window_start, window_end, kind, count, missing,"
                    " gate_psi, gate_alarm, deep_psi, drifted, severity, computed_at, evidence, cusum_up, cusum_down)"
                    " VALUES ('fraud', :f, :ws, :we, 'numeric', 100, 0, :psi, :alarm, :deep, :alarm, :sev, :at,"
                    " NULL, 0.5, 0.0)"), {**row, "f": feature, "psi": 0.05 + i, "alarm": alarm,
                                          "deep": 0.4 if alarm else None, "sev": "major" if alarm else "none"})
            conn.execute(text(
                "INSERT INTO segment_results (model, feature, segment, window_start, window_end, kind, count,"
                " missing, gate_psi, gate_alarm, drifted, severity, computed_at) VALUES ('fraud', 'amount',"
                " 'country=DE', :ws, :we, 'numeric', 50, 0, 0.2, false, false, 'minor', :at)"), row)
        conn.execute(text("INSERT INTO dead_letters (topic, partition, \"offset\", reason, model, payload, seen_at)"
                          " VALUES ('features', 0, 1, 'not_json', NULL, '{', :t), ('features', 0, 2, 'late', 'fraud',"
                          " '{}', :t)"), {"t": T0})
        conn.execute(text(
            "INSERT INTO alert_deliveries (webhook_id, route, model, group_key, format, body, alert_count, status,"
            " attempts, failures, created_at, next_attempt_at) VALUES ('msg_1', 'oncall', 'fraud', 'g', 'native',"
            " '{}', 1, 'sent', 1, 0, :t, :t), ('msg_2', 'oncall', 'fraud', 'g', 'native', '{}', 1, 'pending', 0, 0,"
            " :t, :t)"), {"t": T0})
    engine.dispose()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.services)])
def empty_store_url(request, tmp_path) -> str:
    """URL of a store with no table at all: a new SQLite file, or a new schema of the real PostgreSQL."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'store.db'}"
        return
    pg_url = request.getfixturevalue("pg_url")
    schema = f"t_{uuid.uuid4().hex[:10]}"
    admin = create_engine(pg_url.replace("postgresql://", "postgresql+psycopg://"))
    with admin.begin() as conn:
        conn.execute(text(f"CREATE SCHEMA {schema}"))
    yield f"{pg_url}?options=-csearch_path%3D{schema}"
    with admin.begin() as conn:
        conn.execute(text(f"DROP SCHEMA {schema} CASCADE"))
    admin.dispose()


def _sample(engine, name: str, labels: dict[str, str]) -> float | None:
    registry = CollectorRegistry()
    registry.register(StoreCollector(engine))
    return registry.get_sample_value(name, labels)


def test_the_release_store_with_data_is_upgraded_to_the_newest_schema(empty_store_url: str) -> None:
    release_v5_store(empty_store_url)
    engine = make_engine(empty_store_url, create=False)
    try:
        assert create_schema(engine) == "upgraded from v5"
        assert create_schema(engine) == "up to date"  # a second start changes nothing
        with engine.connect() as conn:
            assert store_revision(conn) == head_revision() == f"v{SCHEMA_VERSION}"
            assert conn.execute(text("SELECT version FROM schema_info")).scalar_one() == SCHEMA_VERSION
            assert [conn.execute(select(func.count()).select_from(t)).scalar_one()
                    for t in (window_counts, window_results, segment_results)] == [3, 6, 3]
            assert conn.execute(select(func.count()).where(window_results.c.error.is_(None))).scalar_one() == 6
            assert conn.execute(select(window_results.c.cusum_up).limit(1)).scalar_one() == 0.5
            assert dict(read_totals(conn)) == dict(recount(conn))  # the totals counted from the rows once
            indexes = {i["name"] for i in inspect(conn).get_indexes("window_results")}
        assert "ix_window_results_start" in indexes
        assert _sample(engine, "driftwarden_windows_closed_total", {"model": "fraud"}) == 3
        assert _sample(engine, "driftwarden_window_events_total", {"model": "fraud"}) == 600
        assert _sample(engine, "driftwarden_latest_window_events", {"model": "fraud"}) == 300
        assert _sample(engine, "driftwarden_gate_alarms_total", {"model": "fraud", "feature": "amount"}) == 1
        assert _sample(engine, "driftwarden_drift_score", {"model": "fraud", "feature": "amount",
                                                           "score": "gate_psi"}) == pytest.approx(2.05)
        assert _sample(engine, "driftwarden_rejected_events_total", {"reason": "not_json"}) == 1
        assert _sample(engine, "driftwarden_late_events_total", {"model": "fraud"}) == 1
        assert _sample(engine, "driftwarden_alert_outbox", {"route": "oncall", "status": "pending"}) == 1
        # the job goes on writing: a window whose judging raised (the column version 6 added)
        report = WindowReport("fraud", T0 + 3 * MINUTE, T0 + 4 * MINUTE, [
            FeatureOutcome("amount", count=80), FeatureOutcome("country", count=80, error="not judged: ValueError")])
        with engine.begin() as conn:
            store_window(conn, report, 80, 0, None)
        assert _sample(engine, "driftwarden_windows_closed_total", {"model": "fraud"}) == 4
        assert _sample(engine, "driftwarden_judging_errors_total", {"model": "fraud"}) == 1
        assert _sample(engine, "driftwarden_latest_window_events", {"model": "fraud"}) == 80
    finally:
        engine.dispose()


def test_a_store_newer_than_this_driftwarden_is_refused(tmp_path) -> None:
    url = f"sqlite:///{tmp_path}/newer.db"
    make_engine(url).dispose()
    engine = create_engine(url)
    with engine.begin() as conn:
        conn.execute(text("UPDATE alembic_version SET version_num = 'v99'"))
    engine.dispose()
    with pytest.raises(ConfigError, match="newer than this driftwarden knows.*upgrade driftwarden"):
        make_engine(url)
