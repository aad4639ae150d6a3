"""A drifted multivariate group raises an alert on the real delivery path, and no single feature does.

Two of four features whose correlation flips (0.8 to -0.8) while every marginal stays put: ``driftwarden
replay`` (the job's decisions) judges the windows, each is written through the job's store writer
(``pipeline.results.store_window``: results and alert outbox in one transaction) on PostgreSQL, a real
``driftwarden alerts deliver`` process delivers to a real ``driftwarden demo receiver`` process (as
``test_alerting_e2e.py``). The alert's identity is (model, group, segment): here the default group
``(numeric)`` in the global view (groups are judged on the global view only, ``docs/multivariate.md``).
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from driftwarden.alerting.rules import load_rules
from driftwarden.core.records import report_from_dict
from driftwarden.pipeline.results import store_window
from driftwarden.schemas.config import DEFAULT_GROUP
from tests.test_alerting_e2e import (SECRET, cli, free_port, reference_then_replay, start_receiver, wait_for_line,
                                     wait_until_delivered)

pytestmark = [pytest.mark.services, pytest.mark.slow]
REPO = Path(__file__).resolve().parent.parent
MODEL, WINDOW_S, PER_WINDOW, WINDOWS = "mv-alert <b>", 10, 600, 10
FEATURES = ("x0", "x1", "x2", "x3")
FLIPPED = range(4, 8)  # windows whose x0-x1 correlation is -0.8 instead of 0.8


def events(base_ms: int, windows: range, flip: bool, seed: int) -> list[dict]:
    """PER_WINDOW events per window: x0, x1 standard normal with correlation 0.8 (-0.8 in FLIPPED windows
    when ``flip``), x2, x3 independent standard normal; every marginal the same in every window."""
    rng = random.Random(seed)
    out = []
    for w in windows:
        rho = -0.8 if flip and w in FLIPPED else 0.8
        for i in range(PER_WINDOW):
            t = base_ms + w * WINDOW_S * 1000 + i * (WINDOW_S * 1000 // PER_WINDOW)
            x0, e = rng.gauss(0, 1), rng.gauss(0, 1)
            feats = {"x0": x0, "x1": rho * x0 + 0.6 * e, "x2": rng.gauss(0, 1), "x3": rng.gauss(0, 1)}
            out.append({"event_time": t, "model": MODEL, "features": feats})
    return out


def replayed_windows(tmp_path: Path, base_ms: int) -> list[dict]:
    """Build the reference from 12 drift-free windows, replay the stream; the report's windows in order."""
    config = {"window": {"size": f"{WINDOW_S}s", "out_of_orderness": "1s"},
              "models": [{"name": MODEL, "features": {f: "numeric" for f in FEATURES}}]}
    return reference_then_replay(tmp_path, config, events(base_ms - 12 * WINDOW_S * 1000, range(12), False, 1),
                                 events(base_ms, range(WINDOWS), True, 2))


def deliver(pg_engine, tmp_path: Path, windows: list[dict]) -> list[dict]:
    """Store each window (outbox included) while a delivery worker posts to a receiver; the accepted bodies."""
    store_url = pg_engine.url.render_as_string(hide_password=False)
    port, record, log = free_port(), tmp_path / "received.jsonl", tmp_path / "processes.log"
    alerting = {"group_wait": "0s", "group_interval": "1s", "resolve_after_windows": 2,
                "retry": {"initial_s": 0.5, "max_backoff_s": 2, "jitter_s": 0.2},
                "routes": [{"name": "receiver", "url": f"http://127.0.0.1:{port}/", "allow_private": True,
                            "secret_env": "DRIFTWARDEN_WEBHOOK_SECRET", "timeout_s": 2}]}
    (tmp_path / "alerting.yaml").write_text(yaml.safe_dump({"alerting": alerting}))
    rules = load_rules(tmp_path / "alerting.yaml")
    receiver = start_receiver(port, record, 0.0, log)
    worker = subprocess.Popen(cli("alerts", "deliver", "--config", str(tmp_path / "alerting.yaml"), "--store-url",
                                  store_url, "--poll", "0.2", "--lease", "5", "--forever"), cwd=REPO,
                              env={**os.environ, "DRIFTWARDEN_WEBHOOK_SECRET": SECRET},
                              stdout=log.open("a"), stderr=subprocess.STDOUT)
    try:
        wait_for_line(log, "delivery worker started", 60)
        for entry in windows:
            with pg_engine.begin() as conn:
                store_window(conn, report_from_dict(entry), PER_WINDOW, 0, rules)
            time.sleep(0.3)
        wait_until_delivered(pg_engine, log)
    finally:
        worker.send_signal(signal.SIGTERM)
        worker.wait(20)
        receiver.send_signal(signal.SIGTERM)
        receiver.wait(10)
    return [json.loads(line)["body"] for line in (record.read_text().splitlines() if record.exists() else [])]


def test_a_drifted_group_reaches_the_receiver_as_its_own_alert(pg_engine, tmp_path) -> None:
    base_ms = (int(time.time()) // 3600 - 2) * 3600 * 1000
    windows = replayed_windows(tmp_path, base_ms)
    assert len(windows) == WINDOWS
    drifted = {(i, f["name"]) for i, w in enumerate(windows) for f in w["features"] if f["drifted"]}
    assert {i for i, name in drifted if name == DEFAULT_GROUP} == set(FLIPPED)  # replay saw the flip, only it
    assert {name for _, name in drifted} == {DEFAULT_GROUP}  # the marginals did not move

    bodies = deliver(pg_engine, tmp_path, windows)
    alerts = [alert for body in bodies for alert in body["alerts"]]
    assert {(a["model"], a["feature"], a["segment"]) for a in alerts} == {(MODEL, DEFAULT_GROUP, None)}
    statuses = [a["status"] for a in alerts]
    assert statuses[0] == "firing" and statuses[-1] == "resolved", statuses
    firing = next(a for a in alerts if a["status"] == "firing")
    assert firing["severity"] == "major"  # a correlation move of 1.6
    assert firing["window"]["start"].startswith(windows[FLIPPED[0]]["window_start"][:19])
    assert any(a["status"] == "firing" and a["feature"] == DEFAULT_GROUP for a in alerts)
