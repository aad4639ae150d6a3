"""``driftwarden demo``: the generator and schedule, the receiver, the Kafka error, and the short demo end to end.

The end-to-end test runs the real demo (Kafka, the embedded Flink job, the delivery worker, the
receiver) in its short ``--check`` mode as a subprocess, then judges it from the demo's store and
summary.json, not only from the demo's own verdict.
"""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections import Counter
from pathlib import Path

import orjson
import pytest
from sqlalchemy import select

from driftwarden.alerting.signing import signature_headers
from driftwarden.demo.receiver import DemoReceiver
from driftwarden.demo.scenario import (CATEGORICAL, FEATURE_KINDS, NEW_CATEGORY_VALUE, NUMERIC, StreamGenerator,
                                       make_schedule)
from driftwarden.demo.stack import RUN_MARKER_ENV, JobProcess, marked_processes
from driftwarden.schemas.events import parse_event, parse_event_time

REPO = Path(__file__).resolve().parent.parent
T0 = 1_767_225_600_000
SECRET = "whsec_" + base64.b64encode(b"demo-test-secret-0123456789abcdef").decode()


def test_generator_makes_contract_events_in_aligned_windows_with_the_scheduled_changes():
    """>= 20 numeric + 5 categorical features; window w holds exactly per_window events; changes start on time."""
    assert len(NUMERIC) >= 20 and len(CATEGORICAL) >= 5
    schedule = make_schedule(10)
    gen = StreamGenerator("m", T0, 10_000, 400, schedule)
    events = gen.events(0, 10 * 400)
    assert all(parse_event(orjson.dumps(e), FEATURE_KINDS).model == "m" for e in events[::97])
    per_window = Counter(gen.window_of(e) for e in events)
    assert per_window == {w: 400 for w in range(10)}
    assert all(parse_event_time(events[w * 400]["event_time"]) == T0 + w * 10_000 for w in range(10))
    by_change = {c.kind: c for c in schedule.changes}
    assert schedule.clean_windows >= 2 and min(c.start_window for c in schedule.changes) == schedule.clean_windows
    assert max(c.start_window for c in schedule.changes) + 2 <= schedule.windows

    def share(window: int, test) -> float:
        rows = [e["features"] for e in events if gen.window_of(e) == window]
        return sum(map(test, rows)) / len(rows)

    cat = by_change["new category"].start_window
    assert share(cat - 1, lambda f: f["device_type"] == NEW_CATEGORY_VALUE) == 0
    assert share(cat, lambda f: f["device_type"] == NEW_CATEGORY_VALUE) > 0.15
    miss = by_change["missing values"].start_window
    assert share(miss - 1, lambda f: f["bureau_score"] is None) < 0.08
    assert share(miss, lambda f: f["bureau_score"] is None) > 0.25
    shift = by_change["mean shift"].start_window
    mean = lambda w: sum(e["features"]["credit_score"] for e in events if gen.window_of(e) == w) / 400  # noqa: E731
    assert mean(shift - 1) - mean(shift) > 30


def test_the_segment_shift_moves_age_in_one_segment_and_the_prediction_shift_moves_the_prediction_alone():
    """age moves by ~0.5 sd inside country=DE only (the global mean by ~0.05 sd); the prediction moves while its
    inputs keep their distributions (it reads no feature another change touches)."""
    import numpy as np

    schedule = make_schedule(10)
    by_change = {c.kind: c for c in schedule.changes}
    seg, pred = by_change["segment shift"], by_change["prediction shift"]
    gen = StreamGenerator("m", T0, 10_000, 20_000, schedule)

    def window(w: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        rows = gen.events(w * 20_000, 20_000)
        return (np.array([e["features"]["age"] for e in rows]), np.array([e["features"]["country"] == "DE"
                                                                          for e in rows]),
                np.array([e["prediction"] for e in rows]))

    age0, de0, p0 = window(seg.start_window - 1)
    age1, de1, p1 = window(seg.start_window)
    assert 0.4 < (age1[de1].mean() - age0[de0].mean()) / age0.std() < 0.6
    assert abs(age1[~de1].mean() - age0[~de0].mean()) < 0.05 * age0.std()
    assert abs(age1.mean() - age0.mean()) < 0.1 * age0.std()
    assert 0.08 < de1.mean() < 0.12
    assert abs(p1.mean() - p0.mean()) < 0.01  # the prediction ignores the segment change (and every other one)
    _, _, p2 = window(pred.start_window)
    assert p2.mean() - p1.mean() > 0.05


def test_generator_is_deterministic_in_batches():
    """The same events whatever the batch sizes the producer happens to use."""
    whole = StreamGenerator("m", T0, 10_000, 100, make_schedule(8), seed=3).events(0, 250)
    gen = StreamGenerator("m", T0, 10_000, 100, make_schedule(8), seed=3)
    batches = gen.events(0, 30) + gen.events(30, 120) + gen.events(150, 1) + gen.events(151, 99)
    assert batches == whole
    assert [e["request_id"] for e in whole] == [f"req-3-{i}" for i in range(250)]


def test_receiver_accepts_signed_webhooks_once_and_rejects_forged_ones():
    """A good signature is counted (a redelivery once); a wrong secret or no signature is refused."""
    import httpx

    receiver = DemoReceiver([SECRET]).start()
    try:
        body = json.dumps({"status": "firing", "alerts": [{"status": "firing", "window": {"start": "x"}}]}).encode()
        good = signature_headers("msg_1", body, [base64.b64decode(SECRET[6:])])
        forged = signature_headers("msg_2", body, [b"not-the-secret"])
        codes = [httpx.post(receiver.url, content=body, headers=h).status_code
                 for h in (good, good, forged, {"webhook-id": "msg_3"})]
    finally:
        receiver.stop()
    assert codes == [200, 200, 401, 401]
    assert (receiver.received, receiver.verified, receiver.rejected, receiver.duplicates) == (4, 2, 2, 1)
    assert [w.webhook_id for w in receiver.webhooks] == ["msg_1"]


def test_demo_without_kafka_says_how_to_start_it(tmp_path):
    """No broker: exit 1 and the command that starts Kafka, before anything is started."""
    done = subprocess.run([sys.executable, "-m", "driftwarden.cli", "demo", "--bootstrap-servers", "127.0.0.1:9",
                           "--no-live", "--run-dir", str(tmp_path)], capture_output=True, text=True, timeout=120,
                          cwd=REPO)
    assert done.returncode == 1
    assert "scripts/services.sh start kafka" in done.stderr + done.stdout
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_demo_receiver_stops_on_ctrl_c_and_sigterm_and_says_what_it_received(stop):
    """`demo receiver` ends on Ctrl-C (SIGINT also when started with it ignored) or SIGTERM with its counts."""
    receiver = subprocess.Popen([sys.executable, "-m", "driftwarden.cli", "demo", "receiver", "--port", "0"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO,
                                env={**os.environ, "PYTHONUNBUFFERED": "1", "DRIFTWARDEN_WEBHOOK_SECRET": SECRET},
                                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    try:
        first = receiver.stdout.readline()
        with pytest.raises(urllib.error.HTTPError):  # serving (a GET is not a webhook): the line is written out
            urllib.request.urlopen(first.split()[-1], timeout=10)
    finally:
        receiver.send_signal(stop)
        out, err = receiver.communicate(timeout=60)
    assert first.startswith("listening on http://127.0.0.1:"), first + err
    assert receiver.returncode == 0 and out == "0 verified (0 redeliveries), 0 rejected\n", (out, err)


@pytest.mark.services
@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_demo_produce_names_its_changes_and_stops_cleanly_with_nothing_lost(kafka_bootstrap, topic_name, stop):
    """`demo produce` names each scheduled change (the segment shift's '[country=DE]' as text, not a
    console style tag, which rich dropped), and Ctrl-C or SIGTERM (``docker stop``) ends it with every
    event it counts in the topic: SIGINT too when started with it ignored, as in a script's background."""
    from confluent_kafka import Consumer, TopicPartition

    producer = subprocess.Popen([sys.executable, "-m", "driftwarden.cli", "demo", "produce", "--bootstrap-servers",
                                 kafka_bootstrap, "--topic", topic_name, "--rate", "200", "--cycle", "8"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO,
                                env={**os.environ, "PYTHONUNBUFFERED": "1", "COLUMNS": "400"},
                                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    try:
        first = producer.stdout.readline()
        time.sleep(3)  # publishing
    finally:
        producer.send_signal(stop)
        out, err = producer.communicate(timeout=60)
    assert first.startswith(f"publishing credit-risk to {topic_name} on {kafka_bootstrap}"), first + err
    assert "segment shift on age [country=DE] from window" in first, first
    assert producer.returncode == 0 and out.startswith("sent "), out + err
    sent = int(out.split()[1].replace(",", ""))
    consumer = Consumer({"bootstrap.servers": kafka_bootstrap, "group.id": topic_name})
    try:
        in_topic = sum(consumer.get_watermark_offsets(TopicPartition(topic_name, p), timeout=10)[1] for p in range(3))
    finally:
        consumer.close()
    assert sent > 0 and in_topic == sent


@pytest.mark.services
@pytest.mark.slow
@pytest.mark.timeout(480)
def test_short_demo_catches_every_change_in_time_without_false_alarm(kafka_bootstrap, tmp_path):
    """Every change caught within two windows, no alert for the drift-free windows, all webhooks verified,
    nothing left running."""
    env = {**os.environ, "DRIFTWARDEN_WEBHOOK_SECRET": SECRET}
    proc = subprocess.Popen([sys.executable, "-m", "driftwarden.cli", "demo", "--duration", "24", "--speed", "5",
                             "--rate", "2000", "--no-live", "--check", "--bootstrap-servers", kafka_bootstrap,
                             "--run-dir", str(tmp_path)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, env=env, cwd=REPO)
    try:
        output, _ = proc.communicate(timeout=420)
    except subprocess.TimeoutExpired:
        proc.terminate()  # the demo shuts its own children down on SIGTERM
        output, _ = proc.communicate(timeout=60)
        pytest.fail(f"the short demo ran past 420 s:\n{output[-3000:]}")
    summaries = list(tmp_path.glob("*/summary.json"))
    assert len(summaries) == 1, output[-3000:]
    s = json.loads(summaries[0].read_text())

    leftovers = marked_processes(s["run_id"])
    assert leftovers == [], f"processes of the demo still running: {leftovers}"
    with pytest.raises(ProcessLookupError):
        os.killpg(s["job_pgid"], 0)

    assert proc.returncode == 0, output[-4000:]
    assert s["windows_closed"] == s["windows"] >= 8
    assert {c["kind"] for c in s["catches"]} == {"mean shift", "variance change", "new category", "missing values",
                                                 "segment shift", "prediction shift"}
    for c in s["catches"]:
        assert c["offset"] is not None and 0 <= c["offset"] <= 1, f"{c['kind']} caught late or never: {c}"
    new = {c["kind"]: c for c in s["catches"] if c["kind"] in ("segment shift", "prediction shift")}
    assert [(c["feature"], c["segment"], c["offset"]) for c in new.values()] == [("age", "country=DE", 0),
                                                                               ("prediction", None, 0)]

    rows = _store_rows(s["store_url"], s["model"])
    index = lambda ms: (ms - s["window0_ms"]) // s["window_ms"]  # noqa: E731
    # a change for all traffic explains its feature everywhere; the segment shift its own segment only
    starts = {(c["feature"], seg): c["start_window"] for c in s["catches"] if c["segment"] is None
              for seg in (None, "country=US", "country=GB", "country=DE", "country=IN", "country=(other)")}
    starts[("age", "country=DE")] = new["segment shift"]["start_window"]
    false_alarms = [(f, seg, index(ms), sev) for f, seg, ms, sev in rows
                    if sev in ("moderate", "major") and index(ms) < starts.get((f, seg), s["windows"])]
    assert false_alarms == []
    assert len({index(ms) for _, seg, ms, _ in rows if seg is None}) == s["windows"]
    segment_windows = {index(ms) for f, seg, ms, _ in rows if (f, seg) == ("age", "country=DE")}
    assert segment_windows == set(range(s["windows"]))  # the segment is judged in every window
    drifted_alone = [d for d in s["segment_drifts"] if d["alone"]]
    assert [(d["feature"], d["segment"]) for d in drifted_alone] == [("age", "country=DE")]

    first_change_ms = s["window0_ms"] + min(starts.values()) * s["window_ms"]
    alerts = s["webhook_alerts"]
    assert alerts, "no alert reached the receiver"
    early = [a for a in alerts if parse_event_time(a["window_start"]) < first_change_ms]
    assert early == [], f"alerts for drift-free windows: {early}"

    deliveries = _deliveries(s["store_url"], s["route"])
    assert deliveries and all(status == "sent" for status in deliveries), deliveries
    assert s["received"] == s["verified"] == len(deliveries) and s["rejected"] == 0


@pytest.mark.services
@pytest.mark.slow
@pytest.mark.timeout(300)
def test_ctrl_c_mid_run_stops_job_worker_receiver_and_producer(kafka_bootstrap, tmp_path):
    """SIGINT once the job judges windows: exit 130, a summary of what was seen, no process of the run left."""
    proc = subprocess.Popen([sys.executable, "-m", "driftwarden.cli", "demo", "--duration", "60", "--no-live",
                             "--bootstrap-servers", kafka_bootstrap, "--run-dir", str(tmp_path)], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env={**os.environ, "COLUMNS": "200"}, cwd=REPO)
    seen = []
    for line in proc.stdout:  # the first judged window: the JVM and its Python workers are all up
        seen.append(line)
        if line.startswith("[") and "window" in line:
            break
    assert proc.poll() is None, "".join(seen[-30:])
    proc.send_signal(signal.SIGINT)
    output, _ = proc.communicate(timeout=200)
    assert proc.returncode == 130, output[-3000:]
    assert "interrupted: shutting everything down" in output
    s = json.loads(next(tmp_path.glob("*/summary.json")).read_text())
    assert "interrupted before the end" in s["problems"] and s["windows_closed"] < s["windows"]
    assert marked_processes(s["run_id"]) == []
    with pytest.raises(ProcessLookupError):
        os.killpg(s["job_pgid"], 0)


def _store_rows(url: str, model: str) -> list[tuple[str, str | None, int, str]]:
    """(feature, segment or None for the global view, window start ms, severity) of every stored verdict."""
    from driftwarden.core.store import make_engine
    from driftwarden.schemas.tables import segment_results, window_results

    engine = make_engine(url, create=False)
    with engine.connect() as conn:
        rows = [(f, None, ws, sev) for f, ws, sev in conn.execute(
            select(window_results.c.feature, window_results.c.window_start, window_results.c.severity)
            .where(window_results.c.model == model))]
        rows += conn.execute(select(segment_results.c.feature, segment_results.c.segment,
                                    segment_results.c.window_start, segment_results.c.severity)
                             .where(segment_results.c.model == model)).all()
    engine.dispose()
    return [(f, seg, _ms(ws), sev) for f, seg, ws, sev in rows]


def _deliveries(url: str, route: str) -> list[str]:
    from driftwarden.core.store import make_engine
    from driftwarden.schemas.alert_tables import alert_deliveries

    engine = make_engine(url, create=False)
    with engine.connect() as conn:
        statuses = list(conn.execute(select(alert_deliveries.c.status).where(alert_deliveries.c.route == route))
                        .scalars())
    engine.dispose()
    return statuses


def _ms(moment) -> int:
    from datetime import timezone

    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return int(moment.timestamp() * 1000)


def test_a_failed_jobs_log_tail_keeps_its_exceptions_and_leaves_out_frames(tmp_path):
    """What the demo shows when its job exits: the exception lines, not the last frames of a Java trace."""
    log = tmp_path / "job.log"
    frames = [f"\tat org.apache.flink.Frame{i}.run(Frame{i}.java:{i})" for i in range(40)]
    log.write_text("\n".join(["metrics on http://127.0.0.1:1/metrics",
                               "pyflink.util.exceptions.TableException: org.apache.flink.table.api.TableException: "
                               "Failed to execute sql", *frames, "Caused by: java.io.IOException: disk gone",
                               *frames[:5], "\t... 35 more", "",
                               "ServiceError: the streaming job failed:", "java.io.IOException: disk gone"]) + "\n")
    job = JobProcess(tmp_path, tmp_path, "sqlite://", tmp_path, log, "run")
    assert job.log_tail(lines=4).splitlines() == [
        "pyflink.util.exceptions.TableException: org.apache.flink.table.api.TableException: Failed to execute sql",
        "Caused by: java.io.IOException: disk gone", "ServiceError: the streaming job failed:",
        "java.io.IOException: disk gone"]


def test_marker_finds_a_marked_child_and_not_after_it_ends():
    """The leftover check sees a running child carrying the run marker, and nothing once it has exited."""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"],
                             env={**os.environ, RUN_MARKER_ENV: "test-marker-run"})
    try:
        deadline = time.monotonic() + 5  # the child's environment shows in /proc once its exec is done
        while marked_processes("test-marker-run") != [child.pid] and time.monotonic() < deadline:
            time.sleep(0.05)
        assert marked_processes("test-marker-run") == [child.pid]
    finally:
        child.kill()
        child.wait()
    assert marked_processes("test-marker-run") == []


def test_compose_monitor_config_matches_the_generator():
    """deploy/demo/monitor.yaml watches exactly what `demo produce` publishes, with a valid alert route."""
    from driftwarden.alerting.rules import parse_rules
    from driftwarden.schemas.config import load_config

    cfg = load_config(REPO / "deploy/demo/monitor.yaml")
    assert dict(cfg.model("credit-risk").features) == FEATURE_KINDS
    assert cfg.model("credit-risk").monitor_prediction  # as the demo's own config (demo/stack.py)
    assert cfg.window.size_ms == 10_000 and cfg.source.topics == ["features"]
    rules = parse_rules(cfg.alerting)
    assert rules.min_severity == "moderate" and rules.routes[0].secret_env == "DRIFTWARDEN_WEBHOOK_SECRET"
    assert cfg.reference.mode == "warmup" and cfg.reference.warmup_windows <= make_schedule(30).clean_windows


def test_scenario_docstring_example_holds():
    """The schedule and window arithmetic shown in driftwarden/demo/scenario.py's docstring (testpaths skip it)."""
    import doctest

    import driftwarden.demo.scenario as scenario

    assert doctest.testmod(scenario).failed == 0


def test_the_demo_check_fails_on_a_late_catch_a_false_alarm_an_early_alert_or_a_forged_webhook():
    """evaluate(): the judge behind --check passes a clean run and names each kind of failure."""
    from driftwarden.demo.outcome import Verdict, evaluate
    from driftwarden.demo.receiver import Webhook

    schedule = make_schedule(10)
    window_ms = 10_000

    def verdict(window: int, feature: str, severity: str, segment: str | None = None) -> Verdict:
        return Verdict(window, feature, severity != "none", severity, severity != "none", 0.0, 0.0, None, segment)

    caught = [verdict(c.start_window, c.feature, "major", c.segment) for c in schedule.changes]
    first = min(c.start_window for c in schedule.changes)
    by_kind = {c.kind: c for c in schedule.changes}
    seg, shift = by_kind["segment shift"], by_kind["mean shift"]
    assert (seg.feature, seg.segment) == ("age", "country=DE")
    # a change for all traffic explains its feature in every segment; the segment change its own segment only
    explained = [verdict(shift.start_window, "credit_score", "major", "country=US"),
                 verdict(seg.start_window + 1, "age", "minor")]
    alert = Webhook("msg_1", "firing", ({"status": "firing", "window": {"start": _rfc(T0 + first * window_ms)}},))
    good = evaluate(schedule, caught + explained + [verdict(1, "age", "minor")], set(range(10)), [alert], T0,
                    window_ms, 1, 1, 0)
    assert good.passed and good.minor_elsewhere == 2 and all(c.offset == 0 for c in good.catches)
    assert [(d.feature, d.segment, d.alone) for d in good.segment_drifts] == [("credit_score", "country=US", 0),
                                                                             ("age", "country=DE", 1)]

    late = [verdict(c.start_window + (2 if c.kind == "mean shift" else 0), c.feature, "major", c.segment)
            for c in schedule.changes]
    early = Webhook("msg_0", "firing", ({"status": "firing", "window": {"start": _rfc(T0)}},))
    unsegmented = [v for v in caught if v.segment is None] + [verdict(seg.start_window, "age", "major")]
    cases = {
        "mean shift on credit_score not caught": (late, [alert], 0),
        "segment shift on age [country=DE] not caught": (unsegmented, [alert], 0),
        f"false alarm: age moderate in window {seg.start_window}": (
            caught + [verdict(seg.start_window, "age", "moderate")], [alert], 0),
        f"false alarm: age [country=US] major in window {seg.start_window}": (
            caught + [verdict(seg.start_window, "age", "major", "country=US")], [alert], 0),
        "false alarm: income_k [country=GB] moderate in window 2": (
            caught + [verdict(2, "income_k", "moderate", "country=GB")], [alert], 0),
        "false alarm: prediction major in window 1": (caught + [verdict(1, "prediction", "major")], [alert], 0),
        "false alarm: age moderate in window 3": (caught + [verdict(3, "age", "moderate")], [alert], 0),
        "alert during the drift-free period": (caught, [alert, early], 0),
        "1 webhook(s) failed signature verification": (caught, [alert], 1),
        "no verified webhook reached the receiver": (caught, [], 0),
        "resolved while drifting: credit_score": (caught, [alert, Webhook("msg_2", "firing", ({
            "status": "resolved", "feature": "credit_score",
            "window": {"start": _rfc(T0 + schedule.changes[0].start_window * window_ms)}},))], 0),
        "resolved while drifting: age [country=DE]": (caught, [alert, Webhook("msg_3", "firing", ({
            "status": "resolved", "feature": "age", "segment": {"country": "DE"},
            "window": {"start": _rfc(T0 + seg.start_window * window_ms)}},))], 0),
    }
    for problem, (rows, hooks, rejected) in cases.items():
        outcome = evaluate(schedule, rows, set(range(10)), hooks, T0, window_ms, len(hooks) + rejected,
                           len(hooks), rejected)
        assert not outcome.passed and any(p.startswith(problem) for p in outcome.problems), (problem, outcome.problems)


def _rfc(ms: int) -> str:
    from driftwarden.schemas.events import rfc3339

    return rfc3339(ms)
