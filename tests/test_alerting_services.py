"""Every Grafana panel query runs for real: SQL on PostgreSQL holding results, PromQL on Prometheus.

The store is filled through the streaming job's own write path (``pipeline.results.store_window``:
window_results and window_counts upserted and enqueue_alerts in one transaction; dead letters
inserted as the job's dead-letter sink does), alerts
are delivered by the real dispatcher to a real receiver, and Prometheus scrapes a real
``serve_metrics`` endpoint added to its file_sd targets.
"""

from __future__ import annotations

import json
import random
import re
import socket
import time
import uuid
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from typing import NamedTuple

import httpx
import pytest
from prometheus_client import CollectorRegistry
from sqlalchemy import Engine, func, select, text

from driftwarden.alerting.dashboards.definitions import SEGMENT_VARIABLE, all_dashboards, model_dashboard
from driftwarden.alerting.dashboards.health import UID as HEALTH_UID
from driftwarden.alerting.dashboards.macros import expand_promql, expand_sql, leftover_macros, sql_values, substitute
from driftwarden.alerting.dashboards.model import PromQuery, SqlQuery
from driftwarden.alerting.metrics import DeliveryMetrics, StoreCollector, serve_metrics
from driftwarden.core.records import FeatureOutcome, WindowReport
from driftwarden.alerting.rules import AlertRules
from driftwarden.alerting.testing import Reply, WebhookReceiver
from driftwarden.alerting.worker import Dispatcher, build_sinks, make_client
from driftwarden.pipeline.results import store_window
from driftwarden.pipeline.dead_letters import store_dead_letters
from driftwarden.schemas.alert_tables import alert_deliveries

pytestmark = pytest.mark.services
FEATURES = ["amount", "age", "country", "device", "hour"]
REASONS = ["invalid_json", "missing_model", "bad_event_time", "late"]
SEGMENTS = ["country=(other)", "country=FR", "country=US"]


def severity_of(psi: float) -> str:
    return "major" if psi >= 0.5 else "moderate" if psi >= 0.25 else "minor" if psi >= 0.1 else "none"


def outcome(rng: random.Random, name: str, count: int, drift: float, segment: dict | None = None) -> FeatureOutcome:
    """One feature's (or feature-in-segment's) outcome with a PSI of noise plus ``drift``."""
    psi = abs(rng.gauss(0.03, 0.02)) + drift
    alarm = psi >= 0.1
    sev = severity_of(psi) if alarm else "none"
    deep = (psi / 2, 1e-6, psi * 1.05, psi * 3, 1e-5) if alarm else (None,) * 5
    return FeatureOutcome(name, "numeric", count, rng.randint(0, 20), psi / 2, psi, psi * 3, alarm,
                          *deep, sev != "none", sev, segment=segment)


def write_window(engine: Engine, rules: AlertRules, model: str, start: datetime, rng: random.Random,
                 drift: float, segment_drift: float = 0.0) -> None:
    """Write one (model, window) through the streaming job's own store path (results, counts, alerts).

    amount is also judged per country (SEGMENTS); ``segment_drift`` moves it in country=FR only.
    """
    end = start + timedelta(minutes=1)
    outcomes = [outcome(rng, name, 6000, drift if name == "amount" else 0.0) for name in FEATURES]
    outcomes[1] = replace(outcomes[1], invalid=rng.randint(1, 30),  # age: a few texts among its numbers
                          invalid_examples=({"reason": "wrong_type:string", "value": "n/a", "where": "features:0:1"},))
    weekend = outcome(rng, "is_weekend", 6000, 0.0)
    outcomes.append(replace(weekend, kind="boolean", true_count=rng.randint(1500, 2000)))
    outcomes += [outcome(rng, "amount", 600, segment_drift if key == "country=FR" else 0.0,
                         dict([key.split("=")])) for key in SEGMENTS]
    with engine.begin() as conn:
        store_dead_letters(conn, [{"topic": "features", "partition": 0, "offset": rng.randrange(10**9),
                                   "reason": rng.choice(REASONS), "model": model, "event_time": start,
                                   "payload": '{"broken": ', "seen_at": end} for _ in range(3)])
        store_window(conn, WindowReport(model, start, end, outcomes), 6000 + rng.randint(-500, 500), 0, rules)


class FilledStore(NamedTuple):
    """What ``filled_store`` wrote: the store, the model, the metrics registry and its first window's start."""

    engine: Engine
    model: str
    registry: CollectorRegistry
    start: datetime


@pytest.fixture()
def filled_store(pg_engine) -> FilledStore:
    """PostgreSQL holding 40 minutes of results for one model, with alerts delivered (and one route failing)."""
    model = f"fraud-{uuid.uuid4().hex[:6]}"
    rng = random.Random(11)
    registry = CollectorRegistry()
    metrics = DeliveryMetrics(registry)
    with WebhookReceiver() as good, WebhookReceiver(lambda _r: Reply(400)) as bad:
        rules = AlertRules(group_wait="0s", group_interval="0s", routes=[
            {"name": "oncall", "url": good.url, "allow_private": True},
            {"name": "broken", "url": bad.url, "allow_private": True, "format": "slack"}])
        now = datetime.now(timezone.utc).replace(second=0, microsecond=0)
        start = now - timedelta(minutes=40)
        with make_client() as client:
            dispatcher = Dispatcher(pg_engine, rules, build_sinks(rules, client), metrics)
            for i in range(40):
                drift = 0.6 if 10 <= i < 20 else 0.15 if 25 <= i < 30 else 0.0
                segment_drift = 0.15 if 30 <= i < 35 else 0.0  # minor in country=FR: stored, not alerted
                write_window(pg_engine, rules, model, start + timedelta(minutes=i), rng, drift, segment_drift)
                while dispatcher.run_once():
                    pass
            deliver_the_rest(dispatcher, pg_engine)
        # amount fires, then resolves (minor: no alert). Delivery is at least once: a POST the receiver got but
        # whose answer came too late is sent again under the same webhook-id, so notifications are counted by id.
        told = notifications(good, model)
        assert [status for _, status in told] == ["firing", "resolved"], told
        assert len(bad.received) == 2, [r.headers.get("webhook-id") for r in bad.received]  # a 400 is not retried
    return FilledStore(pg_engine, model, registry, start)


def deliver_the_rest(dispatcher: Dispatcher, engine: Engine, within_s: float = 60.0) -> None:
    """Run delivery rounds until no delivery is pending (a retry waits out its backoff), for at most ``within_s``."""
    deadline = time.monotonic() + within_s
    while True:
        while dispatcher.run_once():
            pass
        with engine.connect() as conn:
            pending = conn.execute(select(func.count()).select_from(alert_deliveries)
                                   .where(alert_deliveries.c.status == "pending")).scalar_one()
        if not pending or time.monotonic() > deadline:
            return
        time.sleep(0.2)


def notifications(receiver: WebhookReceiver, model: str) -> list[tuple[str, str]]:
    """(webhook-id, status) of each distinct notification about ``model`` the receiver got, in order of arrival.

    Retries of one notification carry its webhook-id and body: a second copy must be the same bytes.
    """
    first: dict[str, bytes] = {}
    for item in receiver.received:
        webhook_id = item.headers["webhook-id"]
        assert first.setdefault(webhook_id, item.body) == item.body, f"{webhook_id} sent with two bodies"
    told = []
    for webhook_id, body in first.items():
        alerts = json.loads(body)["alerts"]
        assert {a["model"] for a in alerts} == {model}, (webhook_id, body[:300])
        told += [(webhook_id, a["status"]) for a in alerts]
    return told


@pytest.mark.parametrize("chosen", ["all", "some"])
def test_every_sql_panel_returns_rows_on_postgres(filled_store, chosen) -> None:
    engine, model, *_ = filled_store
    now = datetime.now(timezone.utc)
    segment = SEGMENT_VARIABLE.all_value if chosen == "all" else sql_values(["country=FR", "country=US"])
    ran = 0
    with engine.connect() as conn:
        for dashboard in all_dashboards():
            for var in dashboard.to_json()["templating"]["list"]:
                values = conn.execute(text(substitute(var["query"], {"model": model}))).scalars().all()
                if var["name"] == "segment":  # the model's segments only
                    assert sorted(values) == SEGMENTS, values
                else:
                    assert model in values, f"variable {var['name']} does not offer {model}"
            for title, query in dashboard.queries():
                if not isinstance(query, SqlQuery):
                    continue
                sql = expand_sql(query.sql, {"model": model, "segment": segment},
                                 now - timedelta(hours=6), now + timedelta(minutes=5))
                assert not leftover_macros(sql), (title, sql)
                rows = conn.execute(text(sql)).all()
                assert rows, f"panel {title!r} returned no rows:\n{sql}"
                ran += 1
    assert ran == sum(isinstance(q, SqlQuery) for d in all_dashboards() for _, q in d.queries()) >= 11


def segment_panel_rows(engine: Engine, model: str, title: str, segments: list[str] | None) -> list:
    """The rows of one segment panel of the model dashboard for the chosen segments (None: All)."""
    panel = next(p for p in model_dashboard().panels if p.title == title)
    segment = SEGMENT_VARIABLE.all_value if segments is None else sql_values(segments)
    now = datetime.now(timezone.utc)
    sql = expand_sql(panel.targets[0].sql, {"model": model, "segment": segment}, now - timedelta(hours=6), now)
    with engine.connect() as conn:
        return conn.execute(text(sql)).all()


def test_the_segment_filter_picks_the_segments_shown(filled_store) -> None:
    engine, model, *_ = filled_store
    scores = "Segment drift score (PSI; deep where run)"
    assert {r.metric for r in segment_panel_rows(engine, model, scores, None)} == {f"amount [{s}]" for s in SEGMENTS}
    assert {r.metric for r in segment_panel_rows(engine, model, scores, ["country=US"])} == {"amount [country=US]"}
    assert len(segment_panel_rows(engine, model, scores, ["country=US", "country=FR"])) == 80  # 40 windows each
    drifted = "Drifted segments (feature x segment)"
    [cell] = segment_panel_rows(engine, model, drifted, None)
    assert (cell.feature, cell.segment, cell[2], cell[4]) == ("amount", "country=FR", 5, "minor")
    assert segment_panel_rows(engine, model, drifted, ["country=US", "country=(other)"]) == []


def test_alert_state_panel_shows_each_alert_over_time(filled_store) -> None:
    engine, model, _, start = filled_store
    panel = next(p for p in model_dashboard().panels if p.type == "state-timeline")
    now = datetime.now(timezone.utc)
    with engine.connect() as conn:
        wide = expand_sql(panel.targets[0].sql, {"model": model}, now - timedelta(hours=6), now + timedelta(minutes=5))
        rows = conn.execute(text(wide)).all()
        # a range that starts while the alert fires still shows it firing from the range's start
        late = expand_sql(panel.targets[0].sql, {"model": model}, now - timedelta(minutes=25), now)
        late_rows = conn.execute(text(late)).all()
    assert [(r.metric, r.value) for r in rows] == [("amount", 3), ("amount", 0)]  # firing (major), then resolved
    assert rows[0].time == start + timedelta(minutes=10) and rows[1].time == start + timedelta(minutes=22)
    assert [(r.metric, r.value) for r in late_rows] == [("amount", 3), ("amount", 0)]
    labels = {m["options"][k]["text"] for m in panel.mappings for k in m["options"]}
    assert labels == {"resolved", "no data", "firing (minor)", "firing (moderate)", "firing (major)"}


def scoped(expr: str, instance: str) -> str:
    """Restrict every driftwarden_* selector in ``expr`` to one scrape target."""
    def add(match: re.Match) -> str:
        name, labels = match.group(1), match.group(2)
        inner = f'instance="{instance}"' + (f", {labels[1:-1]}" if labels and labels != "{}" else "")
        return f"{name}{{{inner}}}"
    return re.sub(r"(driftwarden_\w+)(\{[^}]*\})?", add, expr)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_every_promql_panel_returns_series_from_a_real_scrape(filled_store, prometheus_url, prometheus_targets_dir) -> None:
    engine, model, registry, _ = filled_store
    registry.register(StoreCollector(engine))
    port = free_port()
    server, _thread = serve_metrics(port, registry)
    instance = f"127.0.0.1:{port}"
    target_file = prometheus_targets_dir / f"alerting-{uuid.uuid4().hex[:8]}.json"
    target_file.write_text(json.dumps([{"targets": [instance], "labels": {"suite": "alerting"}}]))
    # the monitor-health dashboard reads a running Flink job's metrics: tests/test_monitor_health.py
    pending = {f"{title} :: {q.expr}": scoped(expand_promql(q.expr, {"model": model}), instance)
               for d in all_dashboards() if d.uid != HEALTH_UID
               for title, q in d.queries() if isinstance(q, PromQuery)}
    assert len(pending) >= 8
    try:
        deadline = time.monotonic() + 90
        while pending and time.monotonic() < deadline:
            for key, expr in list(pending.items()):
                answer = httpx.get(f"{prometheus_url}/api/v1/query", params={"query": expr}, timeout=5).json()
                assert answer["status"] == "success", (key, answer)
                if answer["data"]["result"]:
                    del pending[key]
            time.sleep(1)
    finally:
        target_file.unlink()
        server.shutdown()
    assert not pending, f"no series within 90 s for: {sorted(pending)}"
