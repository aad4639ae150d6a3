"""``driftwarden alerts`` and ``driftwarden dashboards`` through the real CLI app."""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone

import pytest
import yaml
from typer.testing import CliRunner

from driftwarden.alerting.outbox import enqueue_alerts
from driftwarden.core.records import FeatureOutcome, WindowReport
from driftwarden.alerting.rules import AlertRules
from driftwarden.alerting.testing import WebhookReceiver
from driftwarden.cli import app
from driftwarden.core.store import make_engine

runner = CliRunner()
COMMANDS = [["alerts", "list"], ["alerts", "ack"], ["alerts", "silence"], ["alerts", "deliver"], ["alerts", "enable"], ["alerts", "prune"],
            ["dashboards", "build"], ["dashboards", "push"]]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c))
def test_every_option_shows_its_default(command: list[str]) -> None:
    result = runner.invoke(app, [*command, "--help"], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    # click's plain help: an option's entry starts at two spaces and a dash, its wrapped lines are indented further
    entries = re.findall(r"^  -.*(?:\n {3,}\S.*)*", result.output.split("Options:\n", 1)[1], flags=re.M)
    options = [" ".join(entry.split()) for entry in entries if not re.match(r"\s*(-h, )?--help\b", entry)]
    assert options
    for entry in options:
        assert re.search(r"\[([^\]]*; )?default: [^\]]+\]", entry) or "[required]" in entry, entry  # [env var: X; default: Y]


def store_with_alert(tmp_path, url: str = "http://127.0.0.1:9/hook", model: str = "fraud", feature: str = "amount",
                     segment: dict[str, str] | None = None, store: str | None = None) -> tuple[str, AlertRules]:
    """A store (``store``, else SQLite in ``tmp_path``) holding one firing major alert of (model, feature[, segment]),
    and its routing rules."""
    store = store or f"sqlite:///{tmp_path / 'cli.db'}"
    rules = AlertRules(group_wait="0s", routes=[{"name": "oncall", "url": url, "allow_private": True}])
    now = datetime.now(timezone.utc) - timedelta(seconds=1)
    engine = make_engine(store)
    with engine.begin() as conn:
        enqueue_alerts(conn, WindowReport(model, now - timedelta(minutes=1), now, [
            FeatureOutcome(feature, drifted=True, severity="major", segment=segment)]), rules, now)
    engine.dispose()
    return store, rules


def test_list_ack_and_silence(tmp_path) -> None:
    store, _ = store_with_alert(tmp_path)
    listed = runner.invoke(app, ["alerts", "list", "--store-url", store], env={"COLUMNS": "80"})
    assert listed.exit_code == 0 and "fraud" in listed.output and "major" in listed.output
    fingerprint = re.search(r"\b[0-9a-f]{16}\b", listed.output).group(0)
    acked = runner.invoke(app, ["alerts", "ack", fingerprint, "--by", "alice", "--store-url", store])
    assert acked.exit_code == 0, acked.output
    assert "alice" in runner.invoke(app, ["alerts", "list", "--store-url", store], env={"COLUMNS": "80"}).output
    silenced = runner.invoke(app, ["alerts", "silence", "--match", "model=~fr.*", "--match", "severity>=moderate",
                                   "--for", "30m", "--store-url", store])
    assert silenced.exit_code == 0 and "silence 1 until" in silenced.output


def test_bad_input_gives_a_clear_error_and_nonzero_exit(tmp_path) -> None:
    store, _ = store_with_alert(tmp_path)
    bad_matcher = runner.invoke(app, ["alerts", "silence", "--match", "colour=red", "--store-url", store])
    assert bad_matcher.exit_code == 2 and "LABEL OP VALUE" in bad_matcher.output
    bad_duration = runner.invoke(app, ["alerts", "silence", "--match", "model=a", "--for", "soon", "--store-url", store])
    assert bad_duration.exit_code == 2
    unknown = runner.invoke(app, ["alerts", "ack", "0000000000000000", "--store-url", store])
    assert unknown.exit_code != 0


def test_deliver_once_sends_and_list_shows_the_delivery(tmp_path) -> None:
    with WebhookReceiver() as receiver:
        store, rules = store_with_alert(tmp_path, receiver.url + "/hook")
        config = tmp_path / "monitor.yaml"
        config.write_text(yaml.safe_dump({"alerting": rules.model_dump(mode="json")}))
        result = runner.invoke(app, ["alerts", "deliver", "--once", "--store-url", store, "--config", str(config)])
        assert result.exit_code == 0, result.output
    assert len(receiver.received) == 1
    listed = runner.invoke(app, ["alerts", "list", "--deliveries", "--status", "sent", "--store-url", store],
                           env={"COLUMNS": "80"})
    assert receiver.received[0].headers["webhook-id"] in listed.output


def test_dashboards_build_writes_files(tmp_path) -> None:
    result = runner.invoke(app, ["dashboards", "build", "--out", str(tmp_path)])
    assert result.exit_code == 0
    assert (tmp_path / "dashboards" / "json" / "driftwarden-model.json").exists()


def test_dashboards_push_without_env_is_a_config_error(monkeypatch) -> None:
    monkeypatch.delenv("GRAFANA_URL", raising=False)
    monkeypatch.delenv("GRAFANA_TOKEN", raising=False)
    result = runner.invoke(app, ["dashboards", "push"])
    assert result.exit_code != 0 and "GRAFANA_URL" in str(result.exception or result.output)


def test_enable_requeues_what_a_410_disabled(tmp_path) -> None:
    from driftwarden.alerting.testing import Reply

    answers = iter([410, 200])
    with WebhookReceiver(lambda _r: Reply(next(answers))) as receiver:
        store, rules = store_with_alert(tmp_path, receiver.url + "/hook")
        config = tmp_path / "monitor.yaml"
        config.write_text(yaml.safe_dump({"alerting": rules.model_dump(mode="json")}))
        deliver = ["alerts", "deliver", "--once", "--store-url", store, "--config", str(config)]
        assert runner.invoke(app, deliver).exit_code == 0
        assert runner.invoke(app, ["alerts", "enable", "nope", "--store-url", store]).exit_code != 0
        enabled = runner.invoke(app, ["alerts", "enable", "oncall", "--store-url", store])
        assert enabled.exit_code == 0 and "1 deliveries queued again" in enabled.output
        assert runner.invoke(app, deliver).exit_code == 0
    ids = [r.headers["webhook-id"] for r in receiver.received]
    assert len(ids) == 2 and ids[0] == ids[1]


def test_deliver_serves_metrics_from_the_store(tmp_path) -> None:
    import socket
    import subprocess
    import sys
    import time
    from pathlib import Path

    import httpx

    store, _ = store_with_alert(tmp_path)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    repo = Path(__file__).resolve().parent.parent
    worker = subprocess.Popen([sys.executable, "-c", "from driftwarden.cli import main; main()", "alerts", "deliver",
                               "--store-url", store, "--metrics-port", str(port), "--poll", "0.2"], cwd=repo,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        text, deadline = "", time.monotonic() + 30
        while "driftwarden_store_up" not in text and time.monotonic() < deadline:
            try:
                text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=2).text
            except httpx.HTTPError:
                time.sleep(0.2)
    finally:
        worker.terminate()
        worker.wait(10)
    assert "driftwarden_store_up 1.0" in text
    assert 'driftwarden_alerts_firing{model="fraud"} 1.0' in text


def test_prune_keeps_pending_work_and_recent_history(tmp_path) -> None:
    with WebhookReceiver() as receiver:
        store, rules = store_with_alert(tmp_path, receiver.url + "/hook")
        config = tmp_path / "monitor.yaml"
        config.write_text(yaml.safe_dump({"alerting": rules.model_dump(mode="json")}))
        assert runner.invoke(app, ["alerts", "deliver", "--once", "--store-url", store, "--config", str(config)]).exit_code == 0
    kept = runner.invoke(app, ["alerts", "prune", "--keep", "1d", "--store-url", store])
    assert kept.exit_code == 0 and "0 deliveries" in kept.output
    pruned = runner.invoke(app, ["alerts", "prune", "--keep", "0s", "--store-url", store])
    assert pruned.exit_code == 0 and "1 deliveries, 0 outbox, 0 alerts" in pruned.output  # the alert still fires


def test_enable_keeps_each_groups_order_when_a_requeued_notification_fails_again(tmp_path) -> None:
    """A 410 disabled 'x firing', then 'x resolved' was sealed and disabled too; `alerts enable` requeues both.
    The first fails again: the second must wait behind it, or the receiver would end up believing x still fires."""
    import json

    from sqlalchemy import select

    from driftwarden.alerting.delivery import EndpointGoneError, RetryableDeliveryError
    from driftwarden.alerting.worker import Dispatcher
    from driftwarden.schemas.alert_tables import alert_deliveries

    store = f"sqlite:///{tmp_path / 'order.db'}"
    rules = AlertRules(group_wait="0s", group_interval="0s", resolve_after_windows=1,
                       retry={"initial_s": 1, "jitter_s": 0},
                       routes=[{"name": "oncall", "url": "https://hooks.example.com/hook"}])
    answers, accepted = iter(["gone", "fail", "ok", "ok", "ok", "ok"]), []

    class Sink:
        name = "oncall"

        def send(self, delivery) -> int:
            answer = next(answers)
            if answer == "gone":
                raise EndpointGoneError("receiver answered 410 Gone", 410)
            if answer == "fail":
                raise RetryableDeliveryError("receiver answered 503", 503)
            accepted.append([(a["feature"], a["status"]) for a in json.loads(delivery.body)["alerts"]])
            return 200

    clock = [datetime.now(timezone.utc)]
    engine = make_engine(store)
    dispatcher = Dispatcher(engine, rules, {"oncall": Sink()}, clock=lambda: clock[0])
    start = clock[0] - timedelta(minutes=5)
    for i, severity in enumerate(["major", "none"]):  # x fires (410: the route is disabled), then resolves
        rep = WindowReport("fraud", start + timedelta(minutes=i), start + timedelta(minutes=i + 1),
                           [FeatureOutcome("x", count=100, drifted=severity != "none", severity=severity)])
        with engine.begin() as conn:
            enqueue_alerts(conn, rep, rules, clock[0])
        dispatcher.run_once()
    with engine.connect() as conn:
        assert conn.execute(select(alert_deliveries.c.status)).scalars().all() == ["disabled", "disabled"]
    enabled = runner.invoke(app, ["alerts", "enable", "oncall", "--store-url", store])
    assert enabled.exit_code == 0 and "2 deliveries queued again" in enabled.output
    clock[0] = datetime.now(timezone.utc)
    for _ in range(6):
        dispatcher.run_once()
        clock[0] += timedelta(seconds=2)
    engine.dispose()
    assert accepted == [[("x", "firing")], [("x", "resolved")]]
