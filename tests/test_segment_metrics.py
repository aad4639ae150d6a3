"""Segment metrics on /metrics: the latest score and severity per (model, feature, segment), labels capped per model.

The store is filled through the job's write path (``pipeline.results.store_window``), on SQLite and the real PostgreSQL.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from prometheus_client import CollectorRegistry

from driftwarden.alerting.metrics import OTHER_SEGMENT, SEGMENT_CAP, StoreCollector, segment_caps
from driftwarden.core.records import FeatureOutcome, WindowReport
from driftwarden.core.store import make_engine
from driftwarden.pipeline.results import store_window
from driftwarden.schemas.config import MonitorConfig

T0 = datetime(2026, 3, 1, 12, tzinfo=timezone.utc)
MINUTE = timedelta(minutes=1)
SCORED = "driftwarden_segment_drift_score"


@pytest.fixture()
def engine(store_url):
    """An empty store (SQLite, and PostgreSQL: ``store_url`` of tests/conftest.py)."""
    eng = make_engine(store_url)
    yield eng
    eng.dispose()


def seg(country: str, psi: float | None = None, severity: str = "none", count: int = 300) -> FeatureOutcome:
    """One segment outcome of feature amount (judged when it has a PSI)."""
    return FeatureOutcome("amount", count=count, gate_psi=psi, drifted=severity != "none", severity=severity,
                          segment={"country": country})


def fill(engine) -> None:
    """fraud: an old window with DE (a segment of an older reference), then FR (drifted), US, (other), ES below
    min_count (unjudged); spam: 150 segments in one window, more than the hard cap."""
    with engine.begin() as conn:
        store_window(conn, WindowReport("fraud", T0, T0 + MINUTE, [
            FeatureOutcome("amount", count=3000), seg("DE", 0.9, "major"), seg("FR", 0.7, "major")]), 3000, 0, None, T0)
        store_window(conn, WindowReport("fraud", T0 + MINUTE, T0 + 2 * MINUTE, [
            FeatureOutcome("amount", count=3000), seg("FR", 0.4, "moderate"), seg("US", 0.02, count=1800),
            seg("(other)", 0.03, count=700), seg("ES", count=50)]), 3000, 0, None, T0)
        store_window(conn, WindowReport("spam", T0, T0 + MINUTE, [seg(f"c{i:03d}", 0.001 * i, count=1000 - i)
                                                                   for i in range(150)]), 150_000, 0, None, T0)


def scrape(engine, caps=None) -> CollectorRegistry:
    registry = CollectorRegistry()
    registry.register(StoreCollector(engine, segment_caps=caps))
    return registry


def series(registry: CollectorRegistry, name: str, model: str) -> dict[str, float]:
    """{segment label: value} of one family for one model."""
    return {s.labels["segment"]: s.value for m in registry.collect() for s in m.samples
            if s.name == name and s.labels["model"] == model}


def test_latest_segment_scores_carry_model_feature_and_segment(engine) -> None:
    fill(engine)
    value = scrape(engine).get_sample_value
    fr = {"model": "fraud", "feature": "amount", "segment": "country=FR"}
    assert value(SCORED, fr) == pytest.approx(0.4)  # the latest window's, not the first
    assert value("driftwarden_segment_severity", fr) == 2
    assert value("driftwarden_segment_severity", {**fr, "segment": "country=(other)"}) == 0
    es = {**fr, "segment": "country=ES"}
    assert value(SCORED, es) is None and value("driftwarden_segment_severity", es) == 0  # below min_count: no score
    assert value("driftwarden_segments_folded", {"model": "fraud"}) == 0  # 5 segments: under the hard cap


def test_the_config_caps_segment_labels_at_top_plus_other(engine) -> None:
    fill(engine)
    config = MonitorConfig.model_validate({"models": [
        {"name": "fraud", "features": {"amount": "numeric", "country": "categorical"},
         "segments": {"by": ["country"], "top": 3}}]})
    caps = segment_caps(config)
    assert caps == {"fraud": 4}
    registry = scrape(engine, caps)
    scores = series(registry, SCORED, "fraud")
    # the newest window's four segments (top 3 + other) keep their names; DE (only in an older window) is folded
    assert set(scores) == {"country=FR", "country=US", "country=(other)", OTHER_SEGMENT}
    assert scores[OTHER_SEGMENT] == pytest.approx(0.9)
    assert series(registry, "driftwarden_segment_severity", "fraud")[OTHER_SEGMENT] == 3  # the worst folded
    assert registry.get_sample_value("driftwarden_segments_folded", {"model": "fraud"}) == 1
    assert set(series(registry, "driftwarden_segment_severity", "fraud")) == set(scores) | {"country=ES"}  # unscored


def test_a_model_outside_the_config_is_held_to_the_hard_cap(engine) -> None:
    fill(engine)
    registry = scrape(engine, {"fraud": 4})
    severities = series(registry, "driftwarden_segment_severity", "spam")
    assert len(severities) == SEGMENT_CAP + 1  # 101 named + _other
    assert {f"country=c{i:03d}" for i in range(SEGMENT_CAP)} | {OTHER_SEGMENT} == set(severities)  # largest first
    assert registry.get_sample_value("driftwarden_segments_folded", {"model": "spam"}) == 150 - SEGMENT_CAP
    assert series(registry, SCORED, "spam")[OTHER_SEGMENT] == pytest.approx(0.149)  # worst of c101..c149
