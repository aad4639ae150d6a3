"""End to end on real parts: features drift one by one, then stop one by one; every alert's lifecycle arrives in order.

Verdicts come from ``driftwarden replay`` (the job's own decisions) over a generated stream and are
written window by window, paced, through the job's store writer (``pipeline.results.store_window``: results
and alert outbox in one transaction) on PostgreSQL. A real ``driftwarden alerts deliver`` process
delivers to a real ``driftwarden demo receiver`` process that answers 503 for its first 5 s and is
killed (``kill -9``) and restarted once mid-run. Then, per alert identity: the notifications arrived in
lifecycle order, each webhook id was accepted exactly once, and no ``resolved`` was sent for a feature
that was still drifting.
"""

from __future__ import annotations

import base64
import json
import os
import random
import signal
import socket
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import pytest
import yaml
from sqlalchemy import select
from sqlalchemy.engine import Engine

from driftwarden.core.records import report_from_dict
from driftwarden.alerting.rules import load_rules
from driftwarden.pipeline.results import store_window
from driftwarden.schemas.alert_tables import alert_deliveries, alert_outbox
from driftwarden.schemas.tables import window_results

pytestmark = [pytest.mark.services, pytest.mark.slow]
REPO = Path(__file__).resolve().parent.parent
MODEL, WINDOW_S, PER_WINDOW, WINDOWS = "e2e-credit", 10, 400, 20
FEATURES = ("f0", "f1", "f2", "f3")
DRIFT = {"f0": range(2, 11), "f1": range(4, 12), "f2": range(6, 13)}  # joins at 2, 4, 6; leaves at 11, 12, 13
RESOLVE_AFTER = 3
SECRET = "whsec_" + base64.b64encode(b"e2e-secret-e2e-secret-e2e-secret").decode()


def cli(*args: str) -> list[str]:
    return [sys.executable, "-c", "from driftwarden.cli import main; main()", *args]


def events(base_ms: int, windows: range, drift: bool, seed: int) -> list[dict]:
    """PER_WINDOW events per window; feature f shifted by 1.5 sd in the windows DRIFT lists for it."""
    rng = random.Random(seed)
    out = []
    for w in windows:
        for i in range(PER_WINDOW):
            t = base_ms + w * WINDOW_S * 1000 + i * (WINDOW_S * 1000 // PER_WINDOW)
            feats = {f: rng.gauss(1.5 if drift and w in DRIFT.get(f, ()) else 0.0, 1.0) for f in FEATURES}
            out.append({"event_time": t, "model": MODEL, "features": feats, "request_id": f"r{w}-{i}"})
    return out


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def wait_for_line(log: Path, needle: str, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if log.exists() and needle in log.read_text():
            return
        time.sleep(0.1)
    raise AssertionError(f"{needle!r} not in the log: {log.read_text()[-2000:] if log.exists() else ''}")


def wait_until_delivered(engine: Engine, log: Path, timeout_s: float = 60) -> None:
    """Wait until the outbox holds nothing pending and no delivery is pending; fail with the worker's log."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with engine.connect() as conn:
            waiting = conn.execute(select(alert_outbox.c.id).where(alert_outbox.c.pending.is_(True))).all()
            pending = conn.execute(select(alert_deliveries.c.id).where(alert_deliveries.c.status == "pending")).all()
        if not waiting and not pending:
            return
        time.sleep(0.2)
    raise AssertionError(f"still queued after {timeout_s:.0f} s; log:\n{log.read_text()[-3000:]}")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_receiver(port: int, record: Path, fail_for: float, log: Path) -> subprocess.Popen:
    proc = subprocess.Popen(cli("demo", "receiver", "--port", str(port), "--fail-for", str(fail_for),
                                "--record", str(record)), cwd=REPO, env={**os.environ, "DRIFTWARDEN_WEBHOOK_SECRET": SECRET},
                            stdout=log.open("a"), stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return proc
        except OSError:
            time.sleep(0.1)
    raise AssertionError(f"the receiver did not listen on {port}: {log.read_text()[-2000:]}")


def verdicts_by_window(tmp_path: Path, base_ms: int) -> list[dict]:
    """Replay the generated stream with the job's decisions; return the report's windows in order."""
    config = {"window": {"size": f"{WINDOW_S}s", "out_of_orderness": "1s"},
              "models": [{"name": MODEL, "features": {f: "numeric" for f in FEATURES}}]}
    return reference_then_replay(tmp_path, config, events(base_ms - 10 * WINDOW_S * 1000, range(10), False, 1),
                                 events(base_ms, range(WINDOWS), True, 2))


def reference_then_replay(tmp_path: Path, config: dict, training: list[dict], stream: list[dict]) -> list[dict]:
    """Build a reference file from ``training`` and replay ``stream`` against it, both by the CLI with ``config``
    (its reference set to that file); return the report's windows in order."""
    reference = tmp_path / "ref.dwref"
    cfg_path = tmp_path / "monitor.yaml"
    cfg_path.write_text(yaml.safe_dump({**config, "reference": {"mode": "file", "path": str(reference)}}))
    training_path = write_jsonl(tmp_path / "training.jsonl", training)
    stream_path = write_jsonl(tmp_path / "stream.jsonl", stream)
    for args in (("reference", "build", "--input", str(training_path), "--config", str(cfg_path), "--out",
                  str(reference)),
                 ("replay", "--input", str(stream_path), "--config", str(cfg_path), "--reference", str(reference),
                  "--report-json", str(tmp_path / "report.json"))):
        done = subprocess.run(cli(*args), cwd=REPO, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    windows = json.loads((tmp_path / "report.json").read_text())["windows"]
    return sorted(windows, key=lambda w: w["window_start"])


def test_drift_joining_and_leaving_reaches_a_flaky_receiver_in_lifecycle_order(pg_engine, tmp_path) -> None:
    base_ms = (int(time.time()) // 3600 - 2) * 3600 * 1000
    windows = verdicts_by_window(tmp_path, base_ms)
    assert len(windows) == WINDOWS
    drifted = {(w["window_start"], f["name"]) for w in windows for f in w["features"]
               if f["drifted"] and f["severity"] in ("moderate", "major")}
    for feature, span in DRIFT.items():  # the replay saw what was injected (so the alerts below mean something)
        assert sum((windows[i]["window_start"], feature) in drifted for i in span) >= len(span) - 1, feature

    store_url = pg_engine.url.render_as_string(hide_password=False)
    port, record, log = free_port(), tmp_path / "received.jsonl", tmp_path / "processes.log"
    alerting = {"group_wait": "0s", "group_interval": "1s", "resolve_after_windows": RESOLVE_AFTER,
                "retry": {"initial_s": 0.5, "max_backoff_s": 2, "jitter_s": 0.2},
                "routes": [{"name": "flaky", "url": f"http://127.0.0.1:{port}/", "allow_private": True,
                            "secret_env": "DRIFTWARDEN_WEBHOOK_SECRET", "timeout_s": 2}]}
    (tmp_path / "alerting.yaml").write_text(yaml.safe_dump({"alerting": alerting}))
    rules = load_rules(tmp_path / "alerting.yaml")
    worker = subprocess.Popen(cli("alerts", "deliver", "--config", str(tmp_path / "alerting.yaml"), "--store-url",
                                  store_url, "--poll", "0.2", "--lease", "5", "--forever"), cwd=REPO,
                              env={**os.environ, "DRIFTWARDEN_WEBHOOK_SECRET": SECRET},
                              stdout=log.open("a"), stderr=subprocess.STDOUT)
    receiver = None
    try:
        wait_for_line(log, "delivery worker started", 60)
        receiver = start_receiver(port, record, 5.0, log)  # answers 503 for its first 5 s
        started = time.monotonic()
        for i, entry in enumerate(windows):
            if i == 11:  # while alerts fire and resolve: kill -9 the receiver...
                receiver.send_signal(signal.SIGKILL)
                receiver.wait(10)
            if i == 14:  # ...and start it again three windows later
                receiver = start_receiver(port, record, 0.0, log)
            with pg_engine.begin() as conn:
                store_window(conn, report_from_dict(entry), PER_WINDOW, 0, rules)
            time.sleep(0.6)
        wait_until_delivered(pg_engine, log)
    finally:
        worker.send_signal(signal.SIGTERM)
        worker.wait(20)
        if receiver is not None:
            receiver.send_signal(signal.SIGTERM)
            receiver.wait(10)
    assert worker.returncode == 0, log.read_text()[-3000:]
    assert time.monotonic() - started > 5  # the run outlived the receiver's failing start

    accepted = [json.loads(line) for line in record.read_text().splitlines()]
    ids = [a["webhook_id"] for a in accepted]
    with pg_engine.connect() as conn:
        rows = conn.execute(select(alert_deliveries)).all()
        clean = {(r.window_start, r.feature) for r in conn.execute(select(
            window_results.c.window_start, window_results.c.feature).where(window_results.c.drifted.is_(False)))}
    assert sorted(ids) == sorted(r.webhook_id for r in rows if r.status == "sent")  # each accepted exactly once
    assert len(ids) == len(set(ids))
    assert {r.status for r in rows} <= {"sent", "superseded"}
    print(f"e2e: {len(ids)} notifications accepted, {sum(r.attempts for r in rows)} POSTs, "
          f"{sum(r.status == 'superseded' for r in rows)} superseded, most failures carried {max(r.failures for r in rows)}")
    # the failing start and the kill were really hit: failed POSTs, failures carried into superseding notifications
    assert sum(r.attempts for r in rows) > len(ids) and max(r.failures for r in rows) >= 2
    lifecycle: dict[str, list[tuple[str, str]]] = {}
    for body in (a["body"] for a in sorted(accepted, key=lambda a: a["at"])):
        for alert in body["alerts"]:
            lifecycle.setdefault(alert["feature"], []).append((alert["status"], alert["window"]["start"]))
    assert sorted(lifecycle) == sorted(DRIFT), lifecycle  # f3 never drifted: never alerted
    for feature, told in lifecycle.items():
        statuses = [s for s, _ in told]
        assert statuses[0] == "firing" and statuses[-1] == "resolved", (feature, told)
        assert "firing" not in statuses[statuses.index("resolved"):], (feature, told)  # never a stale firing
        resolved_at = datetime.fromisoformat(next(w for s, w in told if s == "resolved").replace("Z", "+00:00"))
        starts = [w["window_start"] for w in windows]
        k = starts.index(next(s for s in starts if datetime.fromisoformat(s.replace("Z", "+00:00")) == resolved_at))
        for j in range(k - RESOLVE_AFTER + 1, k + 1):  # resolved only after N clean windows of its own
            at = datetime.fromisoformat(starts[j].replace("Z", "+00:00"))
            assert (at, feature) in clean, (feature, starts[j])
        assert k > max(DRIFT[feature]), (feature, told)
