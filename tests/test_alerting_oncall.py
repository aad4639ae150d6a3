"""PagerDuty and Teams routes, and every route's secrets by reference.

Each payload is delivered by the real worker (Dispatcher, WebhookSink) to a real local HTTP receiver and
checked against the vendor's documented schema (tests/data/vendor, written from PagerDuty's Events API v2
reference and Microsoft's Teams / Adaptive Card documentation: the vendors' services cannot be reached
from here). Secrets come from the environment or files; a literal one is accepted with a warning that never
holds it; none reaches a log line, a delivery row or any other row of the store.
"""

from __future__ import annotations

import json
import logging
from datetime import datetime, timedelta, timezone
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import jsonschema
import pytest
from sqlalchemy import MetaData, select

from driftwarden.alerting.outbox import enqueue_alerts
from driftwarden.alerting.route_secrets import resolve
from driftwarden.alerting.rules import REDACTED_ENV, AlertRules, load_rules
from driftwarden.alerting.teams import teams_escape
from driftwarden.alerting.testing import Reply, WebhookReceiver
from driftwarden.alerting.worker import Dispatcher, build_sinks, make_client
from driftwarden.core.errors import ConfigError
from driftwarden.core.records import FeatureOutcome, WindowReport
from driftwarden.core.store import make_engine
from driftwarden.schemas.alert_tables import alert_deliveries

VENDOR = Path(__file__).resolve().parent / "data" / "vendor"
T0 = datetime(2026, 3, 1, tzinfo=timezone.utc)
MINUTE = timedelta(minutes=1)
ROUTING_KEY = "R0ut1ngKey-" + "k" * 21
TEAMS_SIG = "sig=Zm9vYmFyLXRlYW1zLXNlY3JldA"
FORMATS = jsonschema.FormatChecker()


@FORMATS.checks("date-time", raises=ValueError)
def _date_time(value: object) -> bool:
    return not isinstance(value, str) or datetime.fromisoformat(value.replace("Z", "+00:00")).tzinfo is not None


@FORMATS.checks("uri", raises=ValueError)
def _uri(value: object) -> bool:
    return not isinstance(value, str) or bool(urlsplit(value).scheme and urlsplit(value).netloc)


def validate(instance: object, schema_file: str) -> None:
    """Validate against a vendor schema, formats included."""
    schema = json.loads((VENDOR / schema_file).read_text())
    jsonschema.Draft202012Validator(schema, format_checker=FORMATS).validate(instance)


def outcome(name: str, severity: str, segment: dict | None = None, count: int = 1000) -> FeatureOutcome:
    return FeatureOutcome(name=name, count=count, drifted=severity != "none", severity=severity,
                          alarm=severity != "none", gate_psi=0.3 if severity != "none" else 0.01, segment=segment,
                          evidence={"test": "ks", "statistic": 0.4, "p_value": 1e-9, "p_adjusted": 1e-8,
                                    "family": ["ks"], "effect": "ks", "effect_size": 0.4,
                                    "moved": [{"from": 1.0, "to": 2.0}]} if severity != "none" else None)


def windows(engine, rules: AlertRules, severities: list[str], model: str = "fraud-v3", feature: str = "amount") -> None:
    """Store one window per entry (the alert's lifecycle: fires, then resolves after 3 clean windows)."""
    for i, severity in enumerate(severities):
        report = WindowReport(model, T0 + i * MINUTE, T0 + (i + 1) * MINUTE, [outcome(feature, severity)])
        with engine.begin() as conn:
            enqueue_alerts(conn, report, rules, report.window_end)


def deliver(engine, rules: AlertRules, at: datetime) -> None:
    with make_client() as client:
        Dispatcher(engine, rules, build_sinks(rules, client), clock=lambda: at).run_once()


def test_pagerduty_trigger_and_resolve_follow_the_events_api_and_keep_one_dedup_key(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("PD_ROUTING_KEY", ROUTING_KEY)
    with WebhookReceiver(lambda _r: Reply(202, body=b'{"status":"success"}')) as receiver:
        rules = AlertRules(monitor="prod-eu", dashboard_url="https://grafana.example/d/x?var-model={model}",
                           routes=[{"name": "pd", "kind": "pagerduty", "url": f"{receiver.url}/v2/enqueue",
                                    "token_env": "PD_ROUTING_KEY", "allow_private": True}])
        engine = make_engine(f"sqlite:///{tmp_path / 'store.db'}")
        windows(engine, rules, ["major"])
        deliver(engine, rules, T0 + 2 * MINUTE)
        windows(engine, rules, ["major", "none", "none", "none"])
        deliver(engine, rules, T0 + 10 * MINUTE)
        events = [json.loads(r.body) for r in receiver.received]
    assert [e["event_action"] for e in events] == ["trigger", "resolve"]
    for event in events:
        validate(event, "pagerduty-events-v2.schema.json")
        assert event["routing_key"] == ROUTING_KEY
    trigger = events[0]
    assert trigger["dedup_key"] == events[1]["dedup_key"] and trigger["dedup_key"].startswith("driftwarden/prod-eu/")
    assert trigger["payload"]["severity"] == "critical" and trigger["payload"]["source"] == "prod-eu"
    assert trigger["payload"]["summary"] == "fraud-v3: amount drifts (major)"
    assert trigger["links"] == [{"href": "https://grafana.example/d/x?var-model=fraud-v3", "text": "dashboard"}]
    assert "ks: statistic=0.4" in trigger["payload"]["custom_details"]["evidence"]
    with engine.connect() as conn:  # the integration key is added when sent, never stored
        assert all(ROUTING_KEY not in body for body in conn.execute(select(alert_deliveries.c.body)).scalars())
    engine.dispose()


def test_the_pagerduty_schema_refuses_what_pagerduty_refuses() -> None:
    """The vendor schema is strict enough to catch our own mistakes (a summary over 1024, a made-up severity)."""
    good = {"routing_key": "k", "event_action": "trigger", "dedup_key": "d",
            "payload": {"summary": "s", "source": "x", "severity": "critical"}}
    validate(good, "pagerduty-events-v2.schema.json")
    for broken in ({**good, "payload": {**good["payload"], "severity": "major"}},
                   {**good, "payload": {**good["payload"], "summary": "s" * 1025}},
                   {"routing_key": "k", "event_action": "resolve"},
                   {k: v for k, v in good.items() if k != "payload"}):
        with pytest.raises(jsonschema.ValidationError):
            validate(broken, "pagerduty-events-v2.schema.json")


def test_teams_adaptive_card_follows_the_documented_schema_and_escapes_names(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("TEAMS_URL", "placeholder")
    with WebhookReceiver() as receiver:
        url = f"{receiver.url}/workflows/abc/triggers/manual/paths/invoke?api-version=2016-06-01&{TEAMS_SIG}"
        url_file = tmp_path / "teams-url"
        url_file.write_text(url + "\n")
        rules = AlertRules(group_wait="0s", dashboard_url="https://grafana.example/d/x?var-model={model}",
                           routes=[{"name": "teams", "kind": "teams", "url_file": str(url_file),
                                    "allow_private": True}])
        engine = make_engine(f"sqlite:///{tmp_path / 'store.db'}")
        windows(engine, rules, ["major"], model="[evil](https://x.example) **now**", feature="amount_#1")
        deliver(engine, rules, T0 + 2 * MINUTE)
        assert len(receiver.received) == 1
        posted = receiver.received[0]
    message = json.loads(posted.body)
    validate(message, "teams-adaptive-card-message.schema.json")
    assert posted.path.endswith(TEAMS_SIG) and "webhook-signature" not in posted.headers
    card = message["attachments"][0]["content"]
    texts = json.dumps(card)
    assert "[evil](https" not in texts and "**now**" not in texts  # names are data: no link, no bold
    assert teams_escape("[evil](https://x.example) **now**") in card["body"][1]["items"][0]["text"]
    assert card["actions"][0]["url"].startswith("https://grafana.example/")
    engine.dispose()


def test_the_teams_schema_refuses_an_undocumented_element() -> None:
    card = {"type": "message", "attachments": [{"contentType": "application/vnd.microsoft.card.adaptive",
                                                "content": {"type": "AdaptiveCard", "version": "1.4",
                                                            "body": [{"type": "TextBlock", "text": "x"}]}}]}
    validate(card, "teams-adaptive-card-message.schema.json")
    card["attachments"][0]["content"]["body"][0]["color"] = "Red"
    with pytest.raises(jsonschema.ValidationError):
        validate(card, "teams-adaptive-card-message.schema.json")


def test_secrets_by_reference_for_every_route_kind(tmp_path) -> None:
    (tmp_path / "token").write_text("bearer-from-file\n")
    (tmp_path / "secrets").write_text("whsec_" + "QUJD" * 8 + "\n")
    env = {"HOOK_URL": "https://hooks.example.com/x?token=t", "PD_KEY": "pd-key"}
    rules = AlertRules(routes=[
        {"name": "hook", "url_env": "HOOK_URL", "secret_file": str(tmp_path / "secrets")},
        {"name": "am", "kind": "alertmanager", "url": "http://am:9093", "token_file": str(tmp_path / "token")},
        {"name": "pd", "kind": "pagerduty", "token_env": "PD_KEY"}])
    hook, am, pd = (resolve(r, env) for r in rules.routes)
    assert hook.url == env["HOOK_URL"] and hook.keys == [b"ABC" * 8] and hook.token is None
    assert am.token == "bearer-from-file" and am.url == "http://am:9093"
    assert pd.url == "https://events.pagerduty.com/v2/enqueue" and pd.token == "pd-key"
    assert "pd-key" not in repr(pd) and "bearer-from-file" not in repr(am)


@pytest.mark.parametrize("route, message", [
    ({"name": "r", "url_env": "NOT_SET_ANYWHERE"}, "route r: url_env: environment variable NOT_SET_ANYWHERE is not set"),
    ({"name": "r", "url_file": "/nonexistent/url"}, "route r: url_file: cannot read /nonexistent/url"),
    ({"name": "r", "kind": "pagerduty", "token_env": "EMPTY_ONE"}, "route r: token_env: environment variable EMPTY_ONE is empty"),
])
def test_a_missing_secret_names_the_route_and_the_reference(route, message) -> None:
    with pytest.raises(ConfigError, match=message):
        resolve(AlertRules(routes=[route]).routes[0], {"EMPTY_ONE": " "})


@pytest.mark.parametrize("route, field", [
    ({"name": "r", "url": "https://hooks.slack.com/services/T0/B0/SECRETPATH", "format": "slack"}, "url"),
    ({"name": "r", "kind": "teams", "url": "https://x.example/invoke?sig=SECRETPATH"}, "url"),
    ({"name": "r", "url": "https://x.example/hook?api_key=SECRETPATH"}, "url"),
    ({"name": "r", "url": "https://x.example/hook", "secret": "whsec_SECRETPATH"}, "secret"),
    ({"name": "r", "kind": "pagerduty", "token": "SECRETPATH"}, "token"),
])
def test_a_literal_secret_loads_with_a_warning_that_does_not_hold_it(route, field, caplog) -> None:
    with caplog.at_level(logging.WARNING, logger="driftwarden.alerting.rules"):
        rules = AlertRules(routes=[route])
    warned = [r.getMessage() for r in caplog.records]
    assert any(f"route r:" in m and f"{field}_env or {field}_file" in m for m in warned), warned
    assert not any("SECRETPATH" in m for m in warned)
    job_copy = json.dumps(rules.for_job())  # what the job is given: no literal secret
    assert "SECRETPATH" not in job_copy and REDACTED_ENV in job_copy
    assert AlertRules.model_validate(rules.for_job()).routes[0].name == "r"


def test_a_referenced_secret_loads_without_a_warning(caplog) -> None:
    with caplog.at_level(logging.WARNING, logger="driftwarden.alerting.rules"):
        AlertRules(routes=[{"name": "r", "url": "https://hooks.example.com/plain", "secret_env": "A B"},
                           {"name": "s", "url_env": "SLACK_URL", "format": "slack"}])
    assert not caplog.records


@pytest.mark.parametrize("route, message", [
    ({"name": "r", "url": "https://x.example", "url_env": "X"}, "give one of url, url_env"),
    ({"name": "r", "kind": "teams", "url_env": "X", "secret_env": "S"}, "is not signed"),
    ({"name": "r", "kind": "pagerduty"}, "needs its integration key"),
    ({"name": "r", "kind": "alertmanager", "url": "http://am", "format": "slack"}, "format is for webhook routes"),
    ({"name": "r", "url_env": "not a name"}, "the name of an environment variable"),
    ({"name": "r"}, "give url, url_env or url_file"),
])
def test_route_kinds_refuse_what_does_not_apply(route, message) -> None:
    with pytest.raises(ValueError, match=message):
        AlertRules(routes=[route])


def test_relative_secret_files_are_read_beside_the_config(tmp_path) -> None:
    (tmp_path / "secrets").mkdir()
    (tmp_path / "secrets" / "am-token").write_text("t0k3n")
    config = tmp_path / "monitor.yaml"
    config.write_text("alerting:\n  routes:\n    - {name: am, kind: alertmanager, url: 'http://am:9093', "
                      "token_file: secrets/am-token}\n")
    assert resolve(load_rules(config).routes[0]).token == "t0k3n"


def test_no_secret_reaches_a_log_line_or_the_store(tmp_path, monkeypatch, caplog) -> None:
    """Every kind of route, referenced and literal, through deliveries that fail (500, refused) and succeed:
    the URL's secret path, the signing secret, the token and the routing key appear in no log record and in
    no column of any table of the store."""
    signing = "whsec_" + "U0VDUkVULVNJR05JTkctS0VZ"
    monkeypatch.setenv("HOOK_SECRET", signing)
    monkeypatch.setenv("AM_TOKEN", "AMTOKENSECRET")
    answers = iter([500, 200, 200, 200, 503, 200] * 5)
    with WebhookReceiver(lambda _r: Reply(next(answers))) as receiver, caplog.at_level(logging.DEBUG):
        monkeypatch.setenv("SLACK_URL", f"{receiver.url}/services/T0/B0/SLACKPATHSECRET")
        rules = AlertRules(group_wait="0s", group_interval="0s", retry={"initial_s": 0.001, "jitter_s": 0},
                           routes=[
                               {"name": "slack", "url_env": "SLACK_URL", "format": "slack", "allow_private": True},
                               {"name": "hook", "url": f"{receiver.url}/hook", "secret_env": "HOOK_SECRET",
                                "allow_private": True},
                               {"name": "am", "kind": "alertmanager", "url": receiver.url, "token_env": "AM_TOKEN",
                                "allow_private": True},
                               {"name": "pd", "kind": "pagerduty", "url": f"{receiver.url}/v2/enqueue",
                                "token": "PDLITERALSECRET", "allow_private": True},
                               {"name": "down", "url": "http://127.0.0.1:9/DOWNPATHSECRET?sig=x",
                                "allow_private": True}])
        engine = make_engine(f"sqlite:///{tmp_path / 'store.db'}")
        windows(engine, rules, ["major"])
        for minute in range(2, 6):
            deliver(engine, rules, T0 + minute * MINUTE)
    assert len(receiver.received) >= 4
    assert any(r.headers.get("authorization") == "Bearer AMTOKENSECRET" for r in receiver.received)
    secrets = ("SLACKPATHSECRET", "U0VDUkVULVNJR05JTkctS0VZ", "AMTOKENSECRET", "PDLITERALSECRET", "DOWNPATHSECRET")
    logged = "\n".join(f"{r.getMessage()} {r.exc_text or ''}" for r in caplog.records)
    stored = _every_value(engine)
    for secret in secrets:
        assert secret not in logged, secret
        assert secret not in stored, secret
    engine.dispose()


def _every_value(engine) -> str:
    """Every value of every table of the store, as text."""
    metadata = MetaData()
    metadata.reflect(engine)
    with engine.connect() as conn:
        return "\n".join(str(row) for table in metadata.sorted_tables for row in conn.execute(select(table)))
