"""The running totals behind /metrics (``core.totals``) and what a scrape costs.

The writers keep ``store_totals`` in the transaction of the rows they write: after windows written,
rewritten (judged again after a restart, with another outcome), dead letters stored twice, deliveries
sealed, sent, superseded and pruned, the totals equal a full count of the rows (``recount``), on SQLite
and PostgreSQL. Retention deletes rows and leaves the counters. A scrape runs as many statements with
ten times the rows (its time at a million rows: bench/bench_store_metrics.py).
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from prometheus_client import CollectorRegistry
from sqlalchemy import event, select

from driftwarden.alerting.metrics import StoreCollector
from driftwarden.alerting.outbox import enqueue_alerts, prune, seal_due_groups, set_delivery_status
from driftwarden.alerting.rules import AlertRules
from driftwarden.core.records import FeatureOutcome, WindowReport
from driftwarden.core.store import make_engine
from driftwarden.core.totals import read_totals, recount
from driftwarden.pipeline.dead_letters import store_dead_letters
from driftwarden.pipeline.results import store_window
from driftwarden.pipeline.retention import prune_dead_letters, prune_verdicts
from driftwarden.schemas.alert_tables import alert_deliveries

T0 = datetime(2026, 11, 2, 12, tzinfo=timezone.utc)
MINUTE = timedelta(minutes=1)
RULES = AlertRules(group_wait="0s", group_interval="0s", resolve_after_windows=1,
                   routes=[{"name": "oncall", "url": "http://127.0.0.1:1/", "allow_private": True}])


def _report(i: int, drifted_features: set[str], error: str | None = None, model: str = "fraud") -> WindowReport:
    """Window ``i``: two features and two segments of one; the drifted ones alarmed, deep-tested and major."""
    features = []
    for name in ("amount", "country"):
        hit = name in drifted_features
        features.append(FeatureOutcome(name, count=100, gate_psi=0.3 if hit else 0.01, alarm=hit,
                                       psi=0.3 if hit else None, drifted=hit, severity="major" if hit else "none",
                                       error=error if name == "country" else None, invalid=2 if name == "amount" else 0))
    features += [FeatureOutcome("amount", count=50, gate_psi=0.02, segment={"country": c}) for c in ("DE", "FR")]
    return WindowReport(model, T0 + i * MINUTE, T0 + (i + 1) * MINUTE, features)


def _dead_letter(offset: int, reason: str, model: str | None = "fraud") -> dict:
    return {"topic": "features", "partition": 0, "offset": offset, "reason": reason, "detail": None, "model": model,
            "event_time": T0, "payload": "{}", "seen_at": T0 + offset * MINUTE}


def _totals(engine) -> tuple[dict, dict]:
    with engine.connect() as conn:
        return {k: v for k, v in read_totals(conn).items() if v}, dict(recount(conn))


def test_the_writers_keep_the_totals_equal_to_a_count_of_the_rows(store_url: str) -> None:
    engine = make_engine(store_url)
    try:
        with engine.begin() as conn:
            for i in range(4):
                store_window(conn, _report(i, {"amount"} if i == 3 else set()), 100 * (i + 1), 0, RULES, T0 + i * MINUTE)
            store_dead_letters(conn, [_dead_letter(1, "not_json"), _dead_letter(2, "late"), _dead_letter(3, "late", None),
                                      _dead_letter(5, "not_json", None)])
        with engine.begin() as conn:  # after a restart: window 3 judged again, otherwise; a dead letter again
            store_window(conn, _report(3, {"country"}, error="not judged: ValueError"), 400, 0, RULES, T0 + 4 * MINUTE)
            store_dead_letters(conn, [_dead_letter(2, "late"), _dead_letter(4, "bad_model")])
        with engine.begin() as conn:
            ids = seal_due_groups(conn, RULES, T0 + 5 * MINUTE)
            assert ids
            set_delivery_status(conn, alert_deliveries.c.id == ids[0], "pending", "sent", finished_at=T0)
            enqueue_alerts(conn, _report(4, {"amount", "country"}), RULES, T0 + 6 * MINUTE)
            seal_due_groups(conn, RULES, T0 + 6 * MINUTE)
        live, counted = _totals(engine)
        assert live == counted
        assert live["windows_closed", "fraud", "", ""] == 4 and live["window_events", "fraud", "", ""] == 1000
        assert live["gate_alarms", "fraud", "country", ""] == 1 and ("gate_alarms", "fraud", "amount", "") not in live
        assert live["judging_errors", "fraud", "", ""] == 1 and live["late_events", "fraud", "", ""] == 1
        assert live["deliveries", "", "oncall", "sent"] == 1 and live["invalid_values", "fraud", "amount", ""] == 8
        with engine.begin() as conn:
            prune(conn, T0 + MINUTE)  # the sent delivery finished before: deleted, the gauge follows
        live, counted = _totals(engine)
        assert live == counted and ("deliveries", "", "oncall", "sent") not in live
    finally:
        engine.dispose()


def test_retention_deletes_old_rows_and_leaves_the_counters(store_url: str) -> None:
    engine = make_engine(store_url)
    try:
        with engine.begin() as conn:
            for i in range(6):
                store_window(conn, _report(i, {"amount"} if i % 2 else set()), 100, 0, None)
            store_dead_letters(conn, [_dead_letter(n, "not_json") for n in range(6)])
        registry = CollectorRegistry()
        registry.register(StoreCollector(engine))
        before = {name: registry.get_sample_value(name, labels) for name, labels in (
            ("driftwarden_windows_closed_total", {"model": "fraud"}),
            ("driftwarden_gate_alarms_total", {"model": "fraud", "feature": "amount"}),
            ("driftwarden_rejected_events_total", {"reason": "not_json"}))}
        assert prune_verdicts(engine, T0 + 4 * MINUTE, batch_rows=3) == {
            "window_results": 8, "segment_results": 8, "window_counts": 4}
        assert prune_dead_letters(engine, T0 + 2 * MINUTE) == 2
        with engine.connect() as conn:
            _, counted = _totals(engine)
        assert counted["windows_closed", "fraud", "", ""] == 2 and counted["rejected_events", "", "", "not_json"] == 4
        after = {name: registry.get_sample_value(name, labels) for name, labels in (
            ("driftwarden_windows_closed_total", {"model": "fraud"}),
            ("driftwarden_gate_alarms_total", {"model": "fraud", "feature": "amount"}),
            ("driftwarden_rejected_events_total", {"reason": "not_json"}))}
        assert after == before == {"driftwarden_windows_closed_total": 6, "driftwarden_gate_alarms_total": 3,
                                   "driftwarden_rejected_events_total": 6}
        assert registry.get_sample_value("driftwarden_latest_window_events", {"model": "fraud"}) == 100
    finally:
        engine.dispose()


def _statements_per_scrape(engine) -> int:
    statements = []
    listener = lambda *args: statements.append(args[2])  # noqa: E731  (before_cursor_execute's statement)
    event.listen(engine, "before_cursor_execute", listener)
    try:
        registry = CollectorRegistry()
        registry.register(StoreCollector(engine))
        assert registry.get_sample_value("driftwarden_store_up") == 1
    finally:
        event.remove(engine, "before_cursor_execute", listener)
    return len(statements)


def test_a_scrape_runs_as_many_statements_whatever_the_rows(store_url: str) -> None:
    engine = make_engine(store_url)
    try:
        with engine.begin() as conn:
            for i in range(10):
                store_window(conn, _report(i, {"amount"} if i % 3 == 0 else set()), 100, 0, None)
        small = _statements_per_scrape(engine)
        with engine.begin() as conn:
            for i in range(10, 100):
                store_window(conn, _report(i, {"amount"} if i % 3 == 0 else set()), 100, 0, None)
            store_dead_letters(conn, [_dead_letter(n, "not_json") for n in range(200)])
        assert _statements_per_scrape(engine) == small <= 6
        with engine.connect() as conn:  # and the counters read are those of all the rows
            assert conn.execute(select(1)).scalar_one() == 1
        registry = CollectorRegistry()
        registry.register(StoreCollector(engine))
        assert registry.get_sample_value("driftwarden_windows_closed_total", {"model": "fraud"}) == 100
        assert registry.get_sample_value("driftwarden_gate_alarms_total", {"model": "fraud", "feature": "amount"}) == 34
    finally:
        engine.dispose()
