"""StoreCollector derives metrics from durable rows; DeliveryMetrics take an injected registry."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from sqlalchemy import create_engine

from driftwarden.alerting.metrics import DeliveryMetrics, StoreCollector
from driftwarden.core.store import make_engine, upsert
from driftwarden.core.totals import add_totals, recount
from driftwarden.pipeline.results import store_counts
from driftwarden.schemas.tables import dead_letters, window_counts, window_results

T0 = datetime(2026, 3, 1, tzinfo=timezone.utc)


@pytest.fixture()
def engine(tmp_path):
    eng = make_engine(f"sqlite:///{tmp_path / 'm.db'}")
    with eng.begin() as conn:
        for i in range(3):
            start = T0 + timedelta(minutes=i)
            upsert(conn, window_counts, [{"model": "fraud", "window_start": start, "window_end": start + timedelta(minutes=1),
                                          "events": 100 * (i + 1), "late": i, "unknown_features": 0,
                                          "deep_checked": i == 2, "computed_at": start}], keys=("model", "window_start"))
            upsert(conn, window_results, [{
                "model": "fraud", "feature": "amount", "window_start": start, "window_end": start + timedelta(minutes=1),
                "kind": "numeric", "count": 100, "missing": 0, "gate_ks": 0.01 * i, "gate_psi": 0.1 * i,
                "gate_emd": 0.2, "gate_alarm": i >= 1, "deep_ks_stat": 0.3 if i >= 1 else None,
                "deep_psi": 0.25 if i >= 1 else None, "drifted": i == 2, "severity": "major" if i == 2 else "none",
                "computed_at": start}], keys=("model", "feature", "window_start"))
        conn.execute(dead_letters.insert(), [
            {"topic": "features", "partition": 0, "offset": n, "model": "fraud", "seen_at": T0, "payload": "{",
             "reason": "invalid_json" if n < 4 else "missing_model" if n < 5 else "late"} for n in range(7)])
        add_totals(conn, recount(conn))  # rows written directly: their totals as the writers keep them
    yield eng
    eng.dispose()


def test_store_collector_reads_counts_scores_and_rejections(engine) -> None:
    registry = CollectorRegistry()
    registry.register(StoreCollector(engine))
    value = registry.get_sample_value
    assert value("driftwarden_store_up") == 1
    assert value("driftwarden_windows_closed_total", {"model": "fraud"}) == 3
    assert value("driftwarden_window_events_total", {"model": "fraud"}) == 600
    assert value("driftwarden_windows_deep_checked_total", {"model": "fraud"}) == 1  # fraction: 1 of 3 windows
    assert value("driftwarden_late_events_total", {"model": "fraud"}) == 2  # from dead_letters, the durable record
    assert value("driftwarden_latest_window_events", {"model": "fraud"}) == 300
    assert value("driftwarden_gate_alarms_total", {"model": "fraud", "feature": "amount"}) == 2
    assert value("driftwarden_deep_checks_total", {"model": "fraud", "feature": "amount", "verdict": "drifted"}) == 1
    assert value("driftwarden_deep_checks_total", {"model": "fraud", "feature": "amount", "verdict": "not_drifted"}) == 1
    assert value("driftwarden_drift_score", {"model": "fraud", "feature": "amount", "score": "gate_psi"}) == pytest.approx(0.2)
    assert value("driftwarden_feature_severity", {"model": "fraud", "feature": "amount"}) == 3
    assert value("driftwarden_rejected_events_total", {"reason": "invalid_json"}) == 4
    assert value("driftwarden_rejected_events_total", {"reason": "missing_model"}) == 1
    assert value("driftwarden_rejected_events_total", {"reason": "late"}) is None  # late is not a rejection


def test_metrics_survive_a_restart_because_they_come_from_rows(engine) -> None:
    first, second = CollectorRegistry(), CollectorRegistry()
    first.register(StoreCollector(engine))
    second.register(StoreCollector(engine))  # a new process would build exactly this
    assert generate_latest(first) == generate_latest(second)


def test_unreachable_store_reports_store_up_zero(tmp_path) -> None:
    broken = create_engine(f"sqlite:///{tmp_path / 'missing' / 'nope.db'}")
    registry = CollectorRegistry()
    registry.register(StoreCollector(broken))
    assert registry.get_sample_value("driftwarden_store_up") == 0
    assert registry.get_sample_value("driftwarden_windows_closed_total", {"model": "fraud"}) is None


def test_delivery_metrics_use_the_injected_registry() -> None:
    a, b = CollectorRegistry(), CollectorRegistry()
    DeliveryMetrics(a).outcome("oncall", "sent")
    DeliveryMetrics(b).attempt("oncall", "5xx", 0.2)
    assert a.get_sample_value("driftwarden_alert_deliveries_total", {"route": "oncall", "outcome": "sent"}) == 1
    assert b.get_sample_value("driftwarden_alert_deliveries_total", {"route": "oncall", "outcome": "sent"}) is None
    assert b.get_sample_value("driftwarden_alert_delivery_seconds_count", {"route": "oncall"}) == 1


def test_min_interval_reuses_the_last_read(engine) -> None:
    collector = StoreCollector(engine, min_interval_s=60)
    registry = CollectorRegistry()
    registry.register(collector)
    before = registry.get_sample_value("driftwarden_windows_closed_total", {"model": "fraud"})
    start = T0 + timedelta(minutes=9)
    with engine.begin() as conn:  # one more window, through the writer (which keeps the totals)
        store_counts(conn, {"model": "fraud", "window_start": start, "window_end": start + timedelta(minutes=1),
                            "events": 5, "late": 0, "unknown_features": 0, "deep_checked": False, "computed_at": start})
    assert registry.get_sample_value("driftwarden_windows_closed_total", {"model": "fraud"}) == before == 3
    collector.min_interval_s = 0
    assert registry.get_sample_value("driftwarden_windows_closed_total", {"model": "fraud"}) == 4
