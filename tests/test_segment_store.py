"""segment_results: the store keeps segment outcomes beside the global ones, on SQLite and PostgreSQL,
and a version-4 store is upgraded in place."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from sqlalchemy import func, inspect, select, text, update

from driftwarden.alerting.rules import AlertRules
from driftwarden.core.records import FeatureOutcome, WindowReport
from driftwarden.core.store import make_engine
from driftwarden.pipeline.results import store_window
from driftwarden.schemas.alert_tables import alerts
from driftwarden.schemas.tables import SCHEMA_VERSION, schema_info, segment_results, window_results

T0 = datetime(2026, 3, 1, 12, tzinfo=timezone.utc)
MINUTE = timedelta(minutes=1)
RULES = AlertRules(group_wait="0s", group_interval="0s", resolve_after_windows=1,
                   routes=[{"name": "oncall", "url": "http://127.0.0.1:1/", "allow_private": True}])


def report(start: datetime = T0) -> WindowReport:
    return WindowReport("fraud", start, start + MINUTE, [
        FeatureOutcome("amount", count=3000, missing=2),
        FeatureOutcome("amount", count=300, alarm=True, ks_stat=0.2, ks_pvalue=1e-9, p_adjusted=3e-8, drifted=True,
                       severity="moderate", segment={"country": "FR"}),
        FeatureOutcome("amount", count=1800, segment={"country": "US"}),
        FeatureOutcome("amount", count=150, segment={"country": "(other)"}),
    ])


def test_result_tables_share_their_columns() -> None:
    def shape(table):
        return [(c.name, repr(c.type), c.nullable, c.primary_key) for c in table.columns]

    assert shape(segment_results) == shape(window_results) + [("segment", "String(length=500)", False, False)]


def test_segment_outcomes_go_to_segment_results_and_alert(store_url: str) -> None:
    engine = make_engine(store_url)
    try:
        with engine.begin() as conn:
            written = store_window(conn, report(), 5000, 0, RULES, T0 + 2 * MINUTE)
            store_window(conn, report(), 5000, 0, None, T0 + 2 * MINUTE)  # again: idempotent
        with engine.connect() as conn:
            glob = conn.execute(select(window_results.c.feature, window_results.c.count)).all()
            segs = conn.execute(select(segment_results.c.feature, segment_results.c.segment, segment_results.c.count,
                                       segment_results.c.p_adjusted, segment_results.c.drifted,
                                       segment_results.c.severity).order_by(segment_results.c.segment)).all()
            fired = conn.execute(select(alerts.c.feature, alerts.c.segment, alerts.c.status)).all()
        assert glob == [("amount", 3000)]
        assert [tuple(r) for r in segs] == [("amount", "country=(other)", 150, None, False, "none"),
                                            ("amount", "country=FR", 300, 3e-8, True, "moderate"),
                                            ("amount", "country=US", 1800, None, False, "none")]
        assert written == 1 and [tuple(r) for r in fired] == [("amount", "country=FR", "firing")]
    finally:
        engine.dispose()


def test_a_version_4_store_is_upgraded_in_place(store_url: str) -> None:
    engine = make_engine(store_url)
    with engine.begin() as conn:  # a store as version 4 left it: no segment_results, one stored window
        store_window(conn, WindowReport("fraud", T0 - MINUTE, T0, [FeatureOutcome("amount", count=10)]), 10, 0, None)
        conn.execute(text("DROP TABLE segment_results"))
        conn.execute(update(schema_info).values(version=4))
        conn.execute(text("DROP TABLE alembic_version"))  # made before migrations
    engine.dispose()
    engine = make_engine(store_url)
    make_engine(store_url).dispose()  # a second start changes nothing
    try:
        assert "segment_results" in inspect(engine).get_table_names()
        with engine.begin() as conn:
            assert conn.execute(select(schema_info.c.version)).scalar_one() == SCHEMA_VERSION == 8
            store_window(conn, report(), 5000, 0, None)
            assert conn.execute(select(func.count()).select_from(window_results)).scalar_one() == 2
            assert conn.execute(select(func.count()).select_from(segment_results)).scalar_one() == 3
    finally:
        engine.dispose()


def test_a_segment_key_the_column_cannot_hold_is_stored_marked(store_url: str) -> None:
    engine = make_engine(store_url)
    try:
        long = WindowReport("fraud", T0, T0 + MINUTE,
                            [FeatureOutcome("amount", count=1, segment={"c": "x" * 600 + "\x00"})])
        with engine.begin() as conn:
            store_window(conn, long, 1, 0, None)
            stored = conn.execute(select(segment_results.c.segment)).scalar_one()
        assert len(stored) == 500 and stored.startswith("c=xxx")
    finally:
        engine.dispose()


def test_segments_whose_values_hold_commas_and_equals_signs_keep_their_own_rows(store_url: str) -> None:
    """Names are data: two segments by (a, b) whose plain texts would read alike are two rows and two alerts."""
    crafted = [{"a": "x,b=y", "b": "z"}, {"a": "x", "b": "y,b=z"}]
    outcomes = [FeatureOutcome("amount", count=300 + i, alarm=True, ks_stat=0.2, ks_pvalue=1e-9, p_adjusted=3e-8,
                               drifted=True, severity="moderate", segment=segment) for i, segment in enumerate(crafted)]
    engine = make_engine(store_url)
    try:
        with engine.begin() as conn:
            written = store_window(conn, WindowReport("fraud", T0, T0 + MINUTE, outcomes), 5000, 0, RULES, T0 + 2 * MINUTE)
        with engine.connect() as conn:
            rows = conn.execute(select(segment_results.c.segment, segment_results.c.count)
                                .order_by(segment_results.c.count)).all()
            fired = conn.execute(select(alerts.c.segment).order_by(alerts.c.segment)).scalars().all()
        assert [tuple(r) for r in rows] == [("a=x\\,b\\=y,b=z", 300), ("a=x,b=y\\,b\\=z", 301)]
        assert written == 2 and sorted(fired) == sorted(r[0] for r in rows)
    finally:
        engine.dispose()
