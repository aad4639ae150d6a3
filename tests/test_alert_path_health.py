"""The alert path watches itself: the worker's heartbeat and outbox age, the rules on them, their runbooks.

promtool's rule tests cover each rule quiet and firing; the end-to-end test runs the real
``driftwarden alerts deliver`` with /metrics, scraped by a private Prometheus that loads the
production rules (only ``for`` shortened), stops the worker and sees DriftwardenAlertWorkerDown
fire (and the scrape target rule with it).
"""

from __future__ import annotations

import re
import shutil
import signal
import subprocess
from datetime import datetime, timedelta, timezone
from pathlib import Path

import httpx
import pytest
import yaml
from prometheus_client import CollectorRegistry
from sqlalchemy import update

from driftwarden.alerting.outbox import enqueue_alerts, seal_due_groups
from driftwarden.alerting.rules import AlertRules
from driftwarden.alerting.worker_metrics import OutboxAgeCollector, WorkerMetrics
from driftwarden.core.records import FeatureOutcome, WindowReport
from driftwarden.core.store import make_engine
from driftwarden.jobs.flink_metrics import free_port
from driftwarden.schemas.alert_tables import alert_deliveries
from tests.health_helpers import promtool_problems
from tests.oncall_helpers import PrivatePrometheus, rules_without_waiting, wait_until, worker_process

REPO = Path(__file__).resolve().parent.parent
RULES = REPO / "deploy" / "prometheus" / "driftwarden-alerting.rules.yml"
DOCS = REPO / "docs" / "alerting.md"


def test_promtool_rule_tests_pass() -> None:
    assert shutil.which("promtool"), "promtool not found: Debian's prometheus package ships it"
    done = subprocess.run(["promtool", "test", "rules", "driftwarden-alerting.test.yml"],
                          cwd=REPO / "tests" / "promtool", capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr


def test_every_rule_links_a_runbook_section_of_the_docs_and_is_tested() -> None:
    """Each rule's runbook_url is an anchor of docs/alerting.md (GitHub's heading slugs) and promtool tests it."""
    anchors = {re.sub(r"[^a-z0-9 -]", "", h.strip().lower()).replace(" ", "-")
               for h in re.findall(r"^#+ (.+)$", DOCS.read_text(), re.M)}
    tested = (REPO / "tests" / "promtool" / "driftwarden-alerting.test.yml").read_text()
    rules = yaml.safe_load(RULES.read_text())["groups"][0]["rules"]
    assert {r["alert"] for r in rules} >= {"DriftwardenAlertWorkerDown", "DriftwardenAlertOutboxBacklog",
                                           "DriftwardenAlertDeliveriesDead", "DriftwardenStoreUnreachable",
                                           "DriftwardenScrapeTargetDown"}
    for rule in rules:
        url = rule["annotations"]["runbook_url"]
        assert url.split("#")[0].endswith("docs/alerting.md") and url.split("#")[1] in anchors, url
        assert f"alertname: {rule['alert']}" in tested, f"no promtool test for {rule['alert']}"


def outcome(name: str, severity: str) -> FeatureOutcome:
    return FeatureOutcome(name=name, count=500, drifted=severity != "none", severity=severity,
                          alarm=severity != "none", gate_psi=0.4)


def test_outbox_age_is_the_oldest_undelivered_change_per_route(store_url) -> None:
    """A change waiting in the outbox, then its sealed delivery, set the route's age; once sent, no series."""
    engine = make_engine(store_url)
    rules = AlertRules(routes=[{"name": "oncall", "url": "http://127.0.0.1:9/x", "allow_private": True}],
                       group_wait="10m")
    t0 = datetime(2026, 3, 1, tzinfo=timezone.utc)
    report = WindowReport("m", t0, t0 + timedelta(minutes=1), [outcome("x", "major")])
    with engine.begin() as conn:
        enqueue_alerts(conn, report, rules, t0 + timedelta(minutes=2))
    registry = CollectorRegistry()
    registry.register(OutboxAgeCollector(engine))
    name, route = "driftwarden_alert_outbox_oldest_timestamp_seconds", {"route": "oncall"}
    assert registry.get_sample_value(name, route) == (t0 + timedelta(minutes=2)).timestamp()
    with engine.begin() as conn:  # sealed at +20 m: the delivery waits, created then; the change is no longer pending
        ids = seal_due_groups(conn, rules, t0 + timedelta(minutes=20))
    assert ids
    assert registry.get_sample_value(name, route) == (t0 + timedelta(minutes=20)).timestamp()
    with engine.begin() as conn:  # tried at +21 m and failed; a newer state supersedes it: the wait goes on
        conn.execute(update(alert_deliveries).values(first_attempt_at=t0 + timedelta(minutes=21), failures=1,
                                                     attempts=1, next_attempt_at=t0 + timedelta(minutes=22)))
        enqueue_alerts(conn, WindowReport("m", t0 + timedelta(minutes=1), t0 + timedelta(minutes=2),
                                          [outcome("y", "major")]), rules, t0 + timedelta(minutes=30))
        assert seal_due_groups(conn, rules, t0 + timedelta(minutes=45))
    assert registry.get_sample_value(name, route) == (t0 + timedelta(minutes=21)).timestamp()
    with engine.begin() as conn:
        conn.execute(update(alert_deliveries).where(alert_deliveries.c.status == "pending").values(status="sent"))
    assert registry.get_sample_value(name, route) is None
    engine.dispose()


def test_heartbeat_and_rounds() -> None:
    registry = CollectorRegistry()
    health = WorkerMetrics(registry)
    assert registry.get_sample_value("driftwarden_alert_worker_rounds_total", {"result": "store_error"}) == 0
    health.beat(True)
    health.beat(False)
    assert registry.get_sample_value("driftwarden_alert_worker_heartbeat_timestamp_seconds") > 1.7e9
    assert registry.get_sample_value("driftwarden_alert_worker_rounds_total", {"result": "ok"}) == 1
    assert registry.get_sample_value("driftwarden_alert_worker_rounds_total", {"result": "store_error"}) == 1


@pytest.mark.services
def test_worker_down_fires_on_the_real_prometheus_when_the_worker_stops(tmp_path) -> None:
    """The real worker scraped by a private Prometheus with the production rules (for: 2s): its /metrics
    passes promtool check metrics; quiet while it runs; killed, DriftwardenAlertWorkerDown fires once its
    last heartbeat is a minute old."""
    config = tmp_path / "monitor.yaml"
    config.write_text(yaml.safe_dump({"alerting": {"routes": [
        {"name": "oncall", "url": "http://127.0.0.1:9/hook", "allow_private": True}]}}))
    port = free_port()
    target = f"127.0.0.1:{port}"
    rules = rules_without_waiting(RULES, tmp_path / "rules.yml")
    with worker_process(config, f"sqlite:///{tmp_path / 'store.db'}", port, tmp_path / "worker.log") as worker, \
            PrivatePrometheus(tmp_path / "prometheus", [target], rules) as prometheus:
        assert wait_until(lambda: prometheus.query("driftwarden_alert_worker_heartbeat_timestamp_seconds"), 60), \
            (tmp_path / "worker.log").read_text()[-2000:]
        text = httpx.get(f"http://{target}/metrics", timeout=10).text
        assert 'driftwarden_alert_deliveries_total{outcome="dead",route="oncall"} 0.0' in text
        assert promtool_problems(text) == []  # the worker's names by the conventions, on its real scrape
        wait_until(lambda: False, 5)  # a few evaluations with the worker alive
        assert not prometheus.alerts("DriftwardenAlertWorkerDown", "pending")
        assert not prometheus.alerts("DriftwardenAlertWorkerDown")
        worker.send_signal(signal.SIGKILL)
        worker.wait(30)
        fired = wait_until(lambda: prometheus.alerts("DriftwardenAlertWorkerDown"), 120)
        assert fired, "DriftwardenAlertWorkerDown did not fire within 120 s of the worker's death"
        assert fired[0]["labels"]["instance"] == target and fired[0]["labels"]["severity"] == "page"
        assert fired[0]["annotations"]["runbook_url"].endswith("#driftwardenalertworkerdown")
        assert prometheus.alerts("DriftwardenScrapeTargetDown")  # the same death, seen by the scrape
