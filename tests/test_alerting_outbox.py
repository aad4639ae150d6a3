"""Alert lifecycle and grouped notifications through the outbox (SQLite here; PostgreSQL in test_alerting_postgres).

One alert per (model, feature[, segment]) with hysteresis, severity upgrades, no data, silences and acks by
identity; Alertmanager's group_wait / group_interval / repeat_interval; truncation; supersede instead of overtaking.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import pytest
from sqlalchemy import func, select, update

from driftwarden.alerting.fingerprint import fingerprint
from driftwarden.alerting.outbox import enqueue_alerts, mark_no_data, seal_due_groups
from driftwarden.core.records import FeatureOutcome, WindowReport
from driftwarden.alerting.rules import AlertRules
from driftwarden.core.store import make_engine, upsert
from driftwarden.schemas.alert_tables import alert_deliveries, alert_events, alert_outbox, alert_silences, alerts
from driftwarden.schemas.tables import window_results

T0 = datetime(2026, 3, 1, tzinfo=timezone.utc)
MINUTE = timedelta(minutes=1)


@pytest.fixture()
def engine(tmp_path):
    eng = make_engine(f"sqlite:///{tmp_path / 'store.db'}")
    yield eng
    eng.dispose()


def rules(**kw) -> AlertRules:
    routes = kw.pop("routes", [{"name": "oncall", "url": "http://127.0.0.1:1/hook", "allow_private": True}])
    kw.setdefault("group_wait", "0s")
    kw.setdefault("group_interval", "0s")
    return AlertRules(routes=routes, **kw)


def feature(name: str, severity: str = "none", count: int = 1000, **kw) -> FeatureOutcome:
    return FeatureOutcome(name=name, count=count, drifted=severity != "none", severity=severity,
                          alarm=severity != "none", gate_psi=0.3 if severity != "none" else 0.01, **kw)


def report(i: int, *features: FeatureOutcome, model: str = "fraud") -> WindowReport:
    return WindowReport(model, T0 + i * MINUTE, T0 + (i + 1) * MINUTE, list(features))


def enqueue(engine, rep: WindowReport, r: AlertRules, now: datetime | None = None) -> int:
    with engine.begin() as conn:
        return enqueue_alerts(conn, rep, r, now or rep.window_end)


def seal(engine, r: AlertRules, now: datetime, sent: bool = True) -> list[dict]:
    """Seal what is due at ``now``; return the bodies (marked sent unless ``sent`` is False)."""
    with engine.begin() as conn:
        ids = seal_due_groups(conn, r, now)
        bodies = [json.loads(b) for b in conn.execute(select(alert_deliveries.c.body).where(
            alert_deliveries.c.id.in_(ids)).order_by(alert_deliveries.c.id)).scalars()]
        if sent:
            conn.execute(update(alert_deliveries).where(alert_deliveries.c.id.in_(ids)).values(status="sent"))
    return bodies


def told(bodies: list[dict]) -> list[list[tuple[str, str]]]:
    return [[(a["feature"], a["status"]) for a in b["alerts"]] for b in bodies]


def run(engine, r: AlertRules, windows: list[dict[str, str]], features=("x", "y", "z")) -> list[list]:
    """Feed one window per entry ({feature: severity}); seal after each; return what each window's seal told."""
    out = []
    for i, drift in enumerate(windows):
        rep = report(i, *(feature(n, drift.get(n, "none")) for n in features))
        enqueue(engine, rep, r)
        out.append(told(seal(engine, r, rep.window_end)))
    return out


def alert_rows(engine) -> dict[str, tuple[str, str]]:
    with engine.connect() as conn:
        return {r.feature: (r.status, r.severity) for r in conn.execute(select(alerts))}


def test_a_second_feature_joining_never_resolves_the_first(engine) -> None:
    told_per_window = run(engine, rules(), [{"x": "major"}, {"x": "major", "y": "major"}, {"x": "major", "y": "major"},
                                            {"y": "major"}, {"y": "major"}, {"y": "major"}])
    assert told_per_window[0] == [[("x", "firing")]]
    assert told_per_window[1] == [[("y", "firing"), ("x", "firing")]]  # the change first, then what still fires
    before = [(f, s) for window in told_per_window[:5] for body in window for f, s in body]
    assert ("x", "resolved") not in before  # x drifted in windows 0-2, then 3 clean windows are needed: 3, 4, 5
    assert told_per_window[5] == [[("x", "resolved"), ("y", "firing")]]
    with engine.connect() as conn:
        assert conn.execute(select(func.count()).select_from(alerts)).scalar_one() == 2


def test_resolved_needs_n_clean_windows_with_enough_data(engine) -> None:
    r = rules(resolve_after_windows=2, resolve_min_count=100)
    enqueue(engine, report(0, feature("x", "major")), r)
    enqueue(engine, report(1, feature("x")), r)
    enqueue(engine, report(2, feature("x", count=99)), r)  # too little data: neither clean nor drifting
    assert alert_rows(engine)["x"][0] == "firing"
    enqueue(engine, report(3, feature("x", "minor")), r)  # drift below min_severity: the clean streak restarts
    enqueue(engine, report(4, feature("x")), r)
    assert alert_rows(engine)["x"][0] == "firing"
    enqueue(engine, report(5, feature("x")), r)
    assert alert_rows(engine)["x"] == ("resolved", "major")
    with engine.connect() as conn:
        row = conn.execute(select(alerts)).one()
    assert row.ends_at.replace(tzinfo=timezone.utc) == T0 + 6 * MINUTE


def test_severity_upgrade_notifies_without_resolving_and_a_downgrade_is_quiet(engine) -> None:
    r = rules(routes=[{"name": "all", "url": "http://127.0.0.1:1/a", "allow_private": True},
                      {"name": "pager", "url": "http://127.0.0.1:1/b", "allow_private": True,
                       "matchers": [{"label": "severity", "op": ">=", "value": "major"}]}])
    assert enqueue(engine, report(0, feature("x", "moderate")), r) == 1
    assert [b["alerts"][0]["severity"] for b in seal(engine, r, T0 + MINUTE)] == ["moderate"]
    assert enqueue(engine, report(1, feature("x", "major")), r) == 2  # re-told on "all", first told on "pager"
    bodies = seal(engine, r, T0 + 2 * MINUTE)
    assert sorted((b["route"], b["alerts"][0]["status"], b["alerts"][0]["severity"]) for b in bodies) == [
        ("all", "firing", "major"), ("pager", "firing", "major")]
    assert enqueue(engine, report(2, feature("x", "moderate")), r) == 0
    assert alert_rows(engine)["x"] == ("firing", "major")
    with engine.connect() as conn:
        assert [e.status for e in conn.execute(select(alert_events).order_by(alert_events.c.id))] == ["firing"] * 2


def test_minor_drift_is_not_an_alert_by_default(engine) -> None:
    r = AlertRules(routes=[{"name": "oncall", "url": "http://127.0.0.1:1/hook", "allow_private": True}])
    assert enqueue(engine, report(0, feature("x", "minor"), feature("y", "moderate")), r) == 1
    assert set(alert_rows(engine)) == {"y"}


def test_a_silent_model_gets_no_data_not_resolved_and_comes_back_firing(engine) -> None:
    r = rules(no_data_after="10m")
    enqueue(engine, report(0, feature("x", "major"), feature("y")), r)
    seal(engine, r, T0 + MINUTE)
    with engine.begin() as conn:
        assert mark_no_data(conn, r, T0 + 10 * MINUTE) == 0
        assert mark_no_data(conn, r, T0 + 12 * MINUTE) == 1
        assert mark_no_data(conn, r, T0 + 13 * MINUTE) == 0
    assert alert_rows(engine)["x"][0] == "nodata"
    body, = seal(engine, r, T0 + 12 * MINUTE)
    assert told([body]) == [[("x", "nodata")]] and body["status"] == "firing"
    enqueue(engine, report(20, feature("x")), r, T0 + 21 * MINUTE)  # data is back (clean): firing until N clean
    assert alert_rows(engine)["x"][0] == "firing"
    assert told(seal(engine, r, T0 + 21 * MINUTE)) == [[("x", "firing")]]


def test_reruns_of_a_seen_window_or_an_older_one_change_nothing(engine) -> None:
    r = rules(resolve_after_windows=2)
    enqueue(engine, report(0, feature("x", "major")), r)
    enqueue(engine, report(1, feature("x")), r)
    assert enqueue(engine, report(1, feature("x")), r) == 0  # the same clean window twice is not two clean windows
    assert alert_rows(engine)["x"][0] == "firing"
    enqueue(engine, report(2, feature("x")), r)
    assert alert_rows(engine)["x"][0] == "resolved"
    assert enqueue(engine, report(0, feature("x", "major")), r) == 0
    assert alert_rows(engine)["x"][0] == "resolved"


def test_group_wait_then_group_interval_then_repeat_interval(engine) -> None:
    r = rules(group_wait="30s", group_interval="5m", repeat_interval="1h")
    s = timedelta(seconds=1)
    enqueue(engine, report(0, feature("x", "major")), r, T0)
    assert seal(engine, r, T0 + 29 * s) == []
    enqueue(engine, report(1, feature("x", "major"), feature("y", "major")), r, T0 + 10 * s)
    assert told(seal(engine, r, T0 + 30 * s)) == [[("x", "firing"), ("y", "firing")]]  # one POST for both
    enqueue(engine, report(2, feature("x", "major"), feature("y", "major"), feature("z", "major")), r, T0 + 60 * s)
    assert seal(engine, r, T0 + 30 * s + 299 * s) == []
    assert told(seal(engine, r, T0 + 330 * s)) == [[("z", "firing"), ("x", "firing"), ("y", "firing")]]
    assert seal(engine, r, T0 + 330 * s + 3599 * s) == []
    assert told(seal(engine, r, T0 + 330 * s + 3600 * s)) == [[("x", "firing"), ("y", "firing"), ("z", "firing")]]


def test_acknowledged_alerts_do_not_repeat_but_their_changes_are_told(engine) -> None:
    r = rules(repeat_interval="2m", resolve_after_windows=1)
    enqueue(engine, report(0, feature("x", "major")), r)
    seal(engine, r, T0 + MINUTE)
    with engine.begin() as conn:
        conn.execute(update(alerts).where(alerts.c.fingerprint == fingerprint("fraud", "x")).values(
            acked_at=T0, acked_by="me"))
    assert seal(engine, r, T0 + 10 * MINUTE) == []
    enqueue(engine, report(1, feature("x"), feature("y", "major")), r, T0 + 11 * MINUTE)  # y joins, x resolves
    assert told(seal(engine, r, T0 + 11 * MINUTE)) == [[("x", "resolved"), ("y", "firing")]]
    with engine.connect() as conn:  # the ack belongs to x alone, whatever else joined the group
        assert conn.execute(select(alerts.c.acked_by).where(alerts.c.feature == "x")).scalar_one() == "me"


def test_a_silence_by_feature_holds_back_only_that_alert_until_it_ends(engine) -> None:
    r = rules()
    with engine.begin() as conn:
        conn.execute(alert_silences.insert().values(
            matchers=json.dumps([{"label": "feature", "op": "=", "value": "x"}]), starts_at=T0,
            ends_at=T0 + 5 * MINUTE, created_by="test", comment=""))
    enqueue(engine, report(0, feature("x", "major"), feature("y", "major")), r)
    assert told(seal(engine, r, T0 + MINUTE)) == [[("y", "firing")]]
    assert seal(engine, r, T0 + 4 * MINUTE) == []
    assert told(seal(engine, r, T0 + 5 * MINUTE)) == [[("x", "firing"), ("y", "firing")]]


def test_a_flap_inside_group_wait_sends_nothing(engine) -> None:
    r = rules(group_wait="5m", resolve_after_windows=1)
    enqueue(engine, report(0, feature("x", "major")), r, T0)
    enqueue(engine, report(1, feature("x")), r, T0 + MINUTE)
    assert seal(engine, r, T0 + 10 * MINUTE) == []


def test_a_large_group_is_truncated_and_the_rest_told_next_time(engine) -> None:
    r = rules(max_alerts=3)
    names = [f"f{i}" for i in range(5)]
    enqueue(engine, report(0, *(feature(n, "major") for n in names)), r)
    first, = seal(engine, r, T0 + MINUTE)
    assert len(first["alerts"]) == 3 and first["truncated_alerts"] == 2
    second, = seal(engine, r, T0 + MINUTE)
    assert {a["feature"] for a in second["alerts"][:2]} == set(names) - {a["feature"] for a in first["alerts"]}


def test_group_by_feature_makes_one_notification_per_feature(engine) -> None:
    r = rules(group_by=["model", "feature"])
    enqueue(engine, report(0, feature("x", "major"), feature("y", "major")), r)
    bodies = seal(engine, r, T0 + MINUTE)
    assert sorted(b["group_labels"]["feature"] for b in bodies) == ["x", "y"]


def test_segments_are_separate_alerts(engine) -> None:
    r = rules()
    enqueue(engine, report(0, feature("x", "major", segment={"region": "eu"}), feature("x", segment={"region": "us"}),
                       feature("x", "major", segment={"region": "us", "app": "ios"})), r)
    body, = seal(engine, r, T0 + MINUTE)
    assert sorted((a["feature"], json.dumps(a["segment"], sort_keys=True)) for a in body["alerts"]) == [
        ("x", '{"app": "ios", "region": "us"}'), ("x", '{"region": "eu"}')]


def test_a_newer_state_supersedes_a_waiting_notification_and_never_overtakes_a_leased_one(engine) -> None:
    r = rules(resolve_after_windows=1)
    enqueue(engine, report(0, feature("x", "major"), feature("y", "major")), r)
    seal(engine, r, T0 + MINUTE, sent=False)
    with engine.begin() as conn:  # a worker holds it (lease until T0 + 10 min)
        conn.execute(update(alert_deliveries).values(claimed_until=T0 + 10 * MINUTE, failures=3,
                                                     next_attempt_at=T0 + 4 * MINUTE))
    enqueue(engine, report(1, feature("x"), feature("y", "major")), r, T0 + 2 * MINUTE)
    assert seal(engine, r, T0 + 2 * MINUTE, sent=False) == []  # leased: the resolve waits behind it
    with engine.begin() as conn:  # the worker failed and released it: it waits for its backoff
        conn.execute(update(alert_deliveries).values(claimed_until=None))
    body, = seal(engine, r, T0 + 3 * MINUTE, sent=False)
    assert told([body]) == [[("x", "resolved"), ("y", "firing")]]
    with engine.connect() as conn:
        old, new = conn.execute(select(alert_deliveries).order_by(alert_deliveries.c.id)).all()
    assert (old.status, new.status) == ("superseded", "pending")
    assert new.failures == 3 and new.next_attempt_at.replace(tzinfo=timezone.utc) == T0 + 4 * MINUTE


def test_a_superseded_resolve_is_told_again(engine) -> None:
    r = rules(resolve_after_windows=1)
    enqueue(engine, report(0, feature("x", "major"), feature("y", "major")), r)
    seal(engine, r, T0 + MINUTE)
    enqueue(engine, report(1, feature("x"), feature("y", "major")), r, T0 + 2 * MINUTE)
    seal(engine, r, T0 + 2 * MINUTE, sent=False)  # "x resolved" failed once and waits for a retry...
    with engine.begin() as conn:
        conn.execute(update(alert_deliveries).where(alert_deliveries.c.status == "pending").values(
            attempts=1, failures=1))
    enqueue(engine, report(2, feature("y", "major"), feature("z", "major")), r, T0 + 3 * MINUTE)
    assert told(seal(engine, r, T0 + 3 * MINUTE)) == [[("x", "resolved"), ("y", "firing"), ("z", "firing")]]


def test_outbox_rows_roll_back_with_the_results(engine) -> None:
    r = rules()
    rep = report(0, feature("amount", "major"))
    with pytest.raises(RuntimeError):
        with engine.begin() as conn:
            upsert(conn, window_results, [{
                "model": "fraud", "feature": "amount", "window_start": rep.window_start, "window_end": rep.window_end,
                "kind": "numeric", "count": 1000, "missing": 0, "gate_alarm": True, "drifted": True,
                "severity": "major", "computed_at": rep.window_end}], keys=("model", "feature", "window_start"))
            assert enqueue_alerts(conn, rep, r, rep.window_end) == 1
            raise RuntimeError("job crashed before commit")
    with engine.connect() as conn:
        assert conn.execute(select(func.count()).select_from(alert_outbox)).scalar_one() == 0
        assert conn.execute(select(func.count()).select_from(window_results)).scalar_one() == 0
    assert enqueue(engine, rep, r) == 1  # the re-run after the crash alerts once


def test_rows_of_routes_missing_from_the_config_wait_instead_of_dying(engine) -> None:
    full = rules()
    enqueue(engine, report(0, feature("amount", "major")), full)
    with engine.begin() as conn:
        assert seal_due_groups(conn, AlertRules(group_wait="0s"), T0 + timedelta(hours=1)) == []
        assert len(seal_due_groups(conn, full, T0 + timedelta(hours=1))) == 1
