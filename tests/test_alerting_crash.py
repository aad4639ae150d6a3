"""Kill -9 the delivery worker (a real subprocess) at the two dangerous points; every alert still arrives."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
import yaml
from sqlalchemy import select

from driftwarden.alerting.outbox import enqueue_alerts
from driftwarden.core.records import FeatureOutcome, WindowReport
from driftwarden.alerting.rules import load_rules
from driftwarden.alerting.testing import Reply, WebhookReceiver
from driftwarden.core.store import make_engine
from driftwarden.schemas.alert_tables import alert_deliveries

REPO = Path(__file__).resolve().parent.parent
MODELS = 3


def start_worker(store: str, config: Path, env_extra: dict[str, str], lease: str = "2") -> subprocess.Popen:
    env = {**os.environ, **env_extra}
    cmd = [sys.executable, "-c", "from driftwarden.cli import main; main()", "alerts", "deliver",
           "--store-url", store, "--config", str(config), "--lease", lease, "--poll", "0.1", "--forever"]
    return subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def wait_for(predicate, timeout_s: float, what: str) -> None:
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def delivery_rows(engine) -> list:
    with engine.connect() as conn:
        return conn.execute(select(alert_deliveries).order_by(alert_deliveries.c.id)).all()


@pytest.mark.slow
@pytest.mark.parametrize("point", ["before_send", "after_response"])
def test_killed_worker_loses_nothing_and_duplicates_keep_their_webhook_id(tmp_path, point: str) -> None:
    store = f"sqlite:///{tmp_path / 'store.db'}"
    engine = make_engine(store)
    with WebhookReceiver() as receiver:
        config = tmp_path / "monitor.yaml"
        config.write_text(yaml.safe_dump({"alerting": {
            "group_wait": "0s",
            "retry": {"initial_s": 0.1, "max_backoff_s": 0.5, "jitter_s": 0.05},
            "routes": [{"name": "oncall", "url": receiver.url + "/hook", "allow_private": True, "timeout_s": 0.5}]}}))
        rules = load_rules(config)
        now = datetime.now(timezone.utc) - timedelta(seconds=1)
        for m in range(MODELS):
            rep = WindowReport(f"model-{m}", now - timedelta(minutes=1), now,
                               [FeatureOutcome("amount", drifted=True, severity="major")])
            with engine.begin() as conn:
                assert enqueue_alerts(conn, rep, rules, now) == 1

        marker = tmp_path / "failpoint"
        doomed = start_worker(store, config, {"DRIFTWARDEN_ALERTING_FAILPOINT": point,
                                              "DRIFTWARDEN_ALERTING_FAILPOINT_FILE": str(marker)})
        try:
            wait_for(marker.exists, 60, f"the worker to reach {point}")
        finally:
            os.kill(doomed.pid, signal.SIGKILL)
            doomed.wait(10)
        assert doomed.returncode == -signal.SIGKILL
        sent_before_kill = len(receiver.received)
        # before_send: nothing left the worker; after_response: the receiver answered 200 to at least one
        # (up to the worker's concurrency) that was never marked sent
        assert (sent_before_kill >= 1) if point == "after_response" else (sent_before_kill == 0)
        assert all(r.status == "pending" for r in delivery_rows(engine))  # nothing was marked sent

        survivor = start_worker(store, config, {})
        try:
            wait_for(lambda: all(r.status == "sent" for r in delivery_rows(engine)), 60, "every delivery sent")
        finally:
            survivor.terminate()
            survivor.wait(10)

    rows = delivery_rows(engine)
    by_id = receiver.by_webhook_id()
    assert sorted(by_id) == sorted(r.webhook_id for r in rows) and len(rows) == MODELS
    models = sorted(json.loads(items[0].body)["model"] for items in by_id.values())
    assert models == [f"model-{m}" for m in range(MODELS)]
    duplicates = {wid: items for wid, items in by_id.items() if len(items) > 1}
    assert len(duplicates) == sent_before_kill  # each one answered before the kill came again, same id
    for items in duplicates.values():
        assert len(items) == 2 and len({i.body for i in items}) == 1
    assert len(receiver.received) == MODELS + sent_before_kill
    for row in rows:  # bookkeeping is true: every POST counted, the killed worker's too; the first attempt kept
        assert row.attempts == len(by_id[row.webhook_id])
        assert row.first_attempt_at <= row.last_attempt_at <= row.finished_at
    engine.dispose()


@pytest.mark.slow
def test_sigterm_stops_the_worker_within_seconds_even_with_a_post_hanging(tmp_path) -> None:
    store = f"sqlite:///{tmp_path / 'store.db'}"
    engine = make_engine(store)
    with WebhookReceiver(lambda _r: Reply(200, delay_s=30)) as receiver:  # a receiver that hangs
        config = tmp_path / "monitor.yaml"
        config.write_text(yaml.safe_dump({"alerting": {"group_wait": "0s", "routes": [
            {"name": "oncall", "url": receiver.url + "/hook", "allow_private": True, "timeout_s": 25}]}}))
        now = datetime.now(timezone.utc)
        rep = WindowReport("m", now - timedelta(minutes=1), now, [FeatureOutcome("amount", drifted=True, severity="major")])
        with engine.begin() as conn:
            enqueue_alerts(conn, rep, load_rules(config), now)
        worker = start_worker(store, config, {}, lease="30")
        try:
            wait_for(lambda: len(receiver.received) == 1, 60, "the POST to start")
            t0 = time.monotonic()
            worker.send_signal(signal.SIGTERM)
            worker.wait(20)
            took = time.monotonic() - t0
        finally:
            if worker.poll() is None:
                worker.kill()
    assert worker.returncode == 0 and took < 5.0, (worker.returncode, took)
    row, = delivery_rows(engine)
    assert (row.status, row.attempts, row.claimed_until) == ("pending", 1, None)  # another worker may take it now
    engine.dispose()
