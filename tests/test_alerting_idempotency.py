"""Property: re-running windows (after a restart) never changes what is sent."""

from __future__ import annotations

import tempfile
from datetime import datetime, timedelta, timezone

from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy import select

from driftwarden.alerting.outbox import enqueue_alerts
from driftwarden.core.records import FeatureOutcome, WindowReport
from driftwarden.alerting.rules import AlertRules
from driftwarden.core.store import make_engine
from driftwarden.schemas.alert_tables import alert_events, alert_outbox

T0 = datetime(2026, 3, 1, tzinfo=timezone.utc)
RULES = AlertRules(resolve_after_windows=2, min_severity="minor", routes=[{"name": "r", "url": "http://127.0.0.1:9/", "allow_private": True}])
SEVERITY = st.sampled_from(["none", "none", "minor", "major"])
WINDOW = st.fixed_dictionaries({f"f{i}": SEVERITY for i in range(3)})


def report(i: int, severities: dict[str, str]) -> WindowReport:
    feats = [FeatureOutcome(n, count=100, drifted=s != "none", severity=s) for n, s in severities.items()]
    return WindowReport("m", T0 + timedelta(minutes=i), T0 + timedelta(minutes=i + 1), feats)


def outbox_after(steps: list[int], windows: list[dict[str, str]]) -> tuple[list, set[tuple]]:
    """Enqueue window indices in the order of ``steps`` on a fresh store; return the alert history and outbox."""
    with tempfile.TemporaryDirectory() as tmp:
        engine = make_engine(f"sqlite:///{tmp}/s.db")
        for i in steps:
            with engine.begin() as conn:
                enqueue_alerts(conn, report(i, windows[i]), RULES, T0 + timedelta(minutes=i + 1, seconds=len(steps)))
        with engine.connect() as conn:
            e, o = alert_events.c, alert_outbox.c
            history = conn.execute(select(e.fingerprint, e.status, e.severity, e.window_start).order_by(e.id)).all()
            rows = conn.execute(select(o.route, o.fingerprint, o.status, o.severity, o.version, o.pending)).all()
        engine.dispose()
    return [tuple(h) for h in history], {tuple(r) for r in rows}


@settings(max_examples=25, deadline=None)
@given(windows=st.lists(WINDOW, min_size=1, max_size=8), data=st.data())
def test_reruns_of_latest_or_older_windows_change_nothing(windows, data) -> None:
    in_order = list(range(len(windows)))
    with_reruns: list[int] = []
    for i in in_order:
        with_reruns.append(i)
        # a restart replays the latest window and possibly some older ones
        with_reruns += data.draw(st.lists(st.integers(0, i), max_size=3), label=f"reruns after {i}")
    assert outbox_after(with_reruns, windows) == outbox_after(in_order, windows)
