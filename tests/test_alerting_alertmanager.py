"""Forwarding to a real Alertmanager (Debian's prometheus-alertmanager) with a real receiver behind it.

Each test runs a private Alertmanager (it is restarted and stopped here) with the project's config
(deploy/alertmanager/alertmanager.yml: group_wait 1s, group_interval 5s, the segment inhibit rule) and the
project's recording receiver behind it; the real delivery worker posts to its API v2 on the real clock.
"""

from __future__ import annotations

import json
import time
from datetime import datetime, timedelta, timezone

import jsonschema
import pytest
from sqlalchemy import select

from driftwarden.alerting.outbox import enqueue_alerts
from driftwarden.alerting.rules import AlertRules
from driftwarden.alerting.testing import WebhookReceiver
from driftwarden.alerting.worker import Dispatcher, build_sinks, make_client
from driftwarden.core.records import FeatureOutcome, WindowReport
from driftwarden.core.store import make_engine
from driftwarden.schemas.alert_tables import alert_deliveries
from tests.oncall_helpers import PrivateAlertmanager, wait_until
from tests.test_alerting_oncall import validate

pytestmark = pytest.mark.services
MODEL = "fraud-v3"
SEGMENTS = [{"country": c} for c in ("DE", "FR", "US", "IT", "(other)")]


def rules_for(am_url: str) -> AlertRules:
    return AlertRules(monitor="oncall-test", dashboard_url="https://grafana.example/d/m?var-model={model}",
                      retry={"initial_s": 0.2, "jitter_s": 0, "max_backoff_s": 1},
                      routes=[{"name": "am", "kind": "alertmanager", "url": am_url, "allow_private": True,
                               "resend_interval": "2s"}])


def outcome(severity: str, segment: dict | None = None) -> FeatureOutcome:
    return FeatureOutcome(name="amount", count=800, drifted=severity != "none", severity=severity,
                          alarm=severity != "none", gate_psi=0.5 if severity != "none" else 0.01, segment=segment)


class Feed:
    """Windows of one model stored one after the other, ending a little before now (event time)."""

    def __init__(self, engine, rules: AlertRules) -> None:
        self.engine, self.rules, self.i = engine, rules, 0
        self.start = datetime.now(timezone.utc).replace(microsecond=0) - timedelta(minutes=30)

    def window(self, *outcomes: FeatureOutcome) -> None:
        report = WindowReport(MODEL, self.start + self.i * timedelta(minutes=1),
                              self.start + (self.i + 1) * timedelta(minutes=1), list(outcomes))
        self.i += 1
        with self.engine.begin() as conn:
            enqueue_alerts(conn, report, self.rules, datetime.now(timezone.utc))

    def deliver(self) -> None:
        with make_client() as client:
            Dispatcher(self.engine, self.rules, build_sinks(self.rules, client)).run_once()


def notifications(receiver: WebhookReceiver) -> list[dict]:
    return [json.loads(r.body) for r in receiver.received]


def test_one_drift_is_one_notification_resolved_after_the_hysteresis_and_a_restart_loses_nothing(
        store_url, tmp_path) -> None:
    with WebhookReceiver() as receiver, PrivateAlertmanager(tmp_path / "am", f"{receiver.url}/hook") as am:
        feed = Feed(make_engine(store_url), rules_for(am.url))
        feed.window(outcome("major"))
        feed.deliver()
        assert wait_until(lambda: notifications(receiver), 30), "no notification through Alertmanager"
        first = notifications(receiver)[0]
        assert first["status"] == "firing" and len(first["alerts"]) == 1
        alert = first["alerts"][0]
        assert alert["labels"] == {"alertname": "DriftwardenFeatureDrift", "monitor": "oncall-test", "model": MODEL,
                                   "feature": "amount", "severity": "major"}
        assert alert["annotations"]["summary"] == "fraud-v3: amount drifts (major)"
        assert alert["annotations"]["replay_command"].startswith("driftwarden replay --topic features")
        assert alert["generatorURL"] == alert["annotations"]["dashboard"] == \
            "https://grafana.example/d/m?var-model=fraud-v3"
        held = am.alerts(model=MODEL)
        assert len(held) == 1 and held[0]["status"]["state"] == "active"
        ends = datetime.fromisoformat(held[0]["endsAt"].replace("Z", "+00:00"))
        assert timedelta(seconds=4) < ends - datetime.now(timezone.utc) <= timedelta(seconds=9)  # 4 resends ahead

        am.restart()  # alerts live in Alertmanager's memory: gone until their client sends them again
        assert am.alerts(model=MODEL) == []
        time.sleep(2.1)
        feed.deliver()  # the resend_interval passed: re-sent
        assert len(am.alerts(model=MODEL)) == 1
        time.sleep(7)  # past group_wait and group_interval: its notification log kept the page, no second one
        assert len(notifications(receiver)) == 1

        am.stop()  # down while the alert resolves: the resolve waits and is delivered once it is back
        for _ in range(3):
            feed.window(outcome("none"))
        feed.deliver()
        with feed.engine.connect() as conn:
            waiting = conn.execute(select(alert_deliveries).where(alert_deliveries.c.status == "pending")).all()
        assert len(waiting) == 1 and waiting[0].failures == 1
        am.start()
        assert wait_until(lambda: feed.deliver() or len(notifications(receiver)) == 2, 30), notifications(receiver)
        resolved = notifications(receiver)[1]
        assert resolved["status"] == "resolved" and resolved["alerts"][0]["labels"]["severity"] == "major"
        assert am.alerts(model=MODEL) == []  # resolved: no longer active
        feed.engine.dispose()


def test_a_global_change_is_one_page_with_its_segments_inside(tmp_path) -> None:
    with WebhookReceiver() as receiver, PrivateAlertmanager(tmp_path / "am", f"{receiver.url}/hook") as am:
        feed = Feed(make_engine(f"sqlite:///{tmp_path / 'store.db'}"), rules_for(am.url))
        feed.window(outcome("major"), *(outcome("major", s) for s in SEGMENTS))
        feed.deliver()
        assert wait_until(lambda: notifications(receiver), 30)
        time.sleep(6)  # a second notification would come within group_interval
        pages = notifications(receiver)
        assert len(pages) == 1 and len(pages[0]["alerts"]) == 1, pages
        annotations = pages[0]["alerts"][0]["annotations"]
        assert "segment" not in pages[0]["alerts"][0]["labels"]
        assert annotations["summary"] == "fraud-v3: amount drifts (major), in 5 of its segments too"
        assert [line.split(":")[0] for line in annotations["segments"].splitlines()] == \
            ["country=(other)", "country=DE", "country=FR", "country=IT", "country=US"]
        assert len(am.alerts(model=MODEL)) == 1  # the folded segments were never forwarded
        feed.engine.dispose()


def test_a_severity_upgrade_resolves_the_old_severity_in_alertmanager(tmp_path) -> None:
    with WebhookReceiver() as receiver, PrivateAlertmanager(tmp_path / "am", f"{receiver.url}/hook") as am:
        feed = Feed(make_engine(f"sqlite:///{tmp_path / 'store.db'}"), rules_for(am.url))
        feed.window(outcome("moderate"))
        feed.deliver()
        assert wait_until(lambda: notifications(receiver), 30)
        feed.window(outcome("major"))
        feed.deliver()
        held = am.alerts(model=MODEL)
        assert [a["labels"]["severity"] for a in held] == ["major"], held  # moderate resolved, not left to lapse
        with feed.engine.connect() as conn:
            body = json.loads(conn.execute(select(alert_deliveries.c.body).order_by(alert_deliveries.c.id.desc())
                                           .limit(1)).scalar_one())
        assert [e["labels"]["severity"] for e in body["firing"]] == ["major"]
        assert [e["labels"]["severity"] for e in body["resolved"]] == ["moderate"]
        assert wait_until(lambda: len(notifications(receiver)) == 2, 30)
        statuses = {a["labels"]["severity"]: a["status"] for a in notifications(receiver)[1]["alerts"]}
        assert statuses == {"major": "firing", "moderate": "resolved"}  # one notification tells both
        feed.engine.dispose()


def test_what_is_posted_matches_alertmanagers_postable_alerts(tmp_path) -> None:
    """The bytes the sink sends (endsAt stamped then) against the API's postableAlerts, firing and resolved."""
    from driftwarden.alerting.forward import postable_body

    with WebhookReceiver() as receiver:
        rules = rules_for(receiver.url)
        feed = Feed(make_engine(f"sqlite:///{tmp_path / 'store.db'}"), rules)
        feed.window(outcome("major"), outcome("major", SEGMENTS[0]))
        feed.deliver()
        for _ in range(3):
            feed.window(outcome("none"), outcome("major", SEGMENTS[0]))
        feed.deliver()
        posted = [json.loads(r.body) for r in receiver.received]
    assert [r.path for r in receiver.received] == ["/api/v2/alerts"] * 2
    for body in posted:
        validate(body, "alertmanager-postable-alerts.schema.json")
    # the global alert resolved; its segment, still firing, now pages on its own (the inhibition ended)
    assert [a["labels"].get("segment") for a in posted[0]] == [None]  # the segment was folded
    now = datetime.now(timezone.utc)
    ends = {a["labels"].get("segment"): datetime.fromisoformat(a["endsAt"].replace("Z", "+00:00")) for a in posted[1]}
    assert set(ends) == {None, "country=DE"}
    assert ends[None] <= now < ends["country=DE"]  # resolved at send time; the segment fires for 4 resends
    with pytest.raises(jsonschema.ValidationError):
        validate(json.loads(postable_body(b'{"firing":[{"fingerprint":"f","labels":{"bad-name":"x"},'
                                          b'"startsAt":"2026-01-01T00:00:00Z"}],"resolved":[]}', 0, rules.routes[0])),
                 "alertmanager-postable-alerts.schema.json")
    feed.engine.dispose()
