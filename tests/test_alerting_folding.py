"""One change, one page: segment alerts fold under their feature's global alert while it fires.

Through the outbox on the store (SQLite and PostgreSQL), with the native body: the demo's case (a global
change seen in every segment) is one alert with its segments inside; a segment-only drift still pages on
its own; what a route was told keeps being told; when the global alert resolves, the segments still
firing page on their own (an inhibition that ends); a route that does not hear the global alert is not
folded.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import jsonschema
from sqlalchemy import select, update

from driftwarden.alerting.outbox import enqueue_alerts, seal_due_groups
from driftwarden.alerting.rules import AlertRules
from driftwarden.core.records import FeatureOutcome, WindowReport
from driftwarden.core.store import make_engine
from driftwarden.schemas.alert_tables import alert_deliveries
from tests.test_alerting_payloads import SCHEMA  # the native schema, version 4

T0 = datetime(2026, 3, 1, tzinfo=timezone.utc)
MINUTE = timedelta(minutes=1)
COUNTRIES = ("DE", "FR", "US", "IT", "(other)")


def rules(**kw) -> AlertRules:
    routes = kw.pop("routes", [{"name": "oncall", "url": "http://127.0.0.1:1/hook", "allow_private": True}])
    kw.setdefault("group_wait", "0s")
    return AlertRules(routes=routes, group_interval="0s", **kw)


def cell(severity: str, country: str | None = None) -> FeatureOutcome:
    return FeatureOutcome(name="age", count=1000, drifted=severity != "none", severity=severity,
                          alarm=severity != "none", gate_psi=0.3 if severity != "none" else 0.01,
                          segment={"country": country} if country else None)


class Run:
    """Windows of model ``demo`` stored one by one; ``seal`` returns what each route is told."""

    def __init__(self, store_url: str, r: AlertRules) -> None:
        self.engine, self.rules, self.i = make_engine(store_url), r, 0

    def window(self, global_severity: str, **segments: str) -> None:
        cells = [cell(global_severity)] + [cell(s, c) for c, s in segments.items()]
        report = WindowReport("demo", T0 + self.i * MINUTE, T0 + (self.i + 1) * MINUTE, cells)
        self.i += 1
        with self.engine.begin() as conn:
            enqueue_alerts(conn, report, self.rules, report.window_end)

    def seal(self) -> list[dict]:
        with self.engine.begin() as conn:
            ids = seal_due_groups(conn, self.rules, T0 + self.i * MINUTE)
            bodies = [json.loads(b) for b in conn.execute(select(alert_deliveries.c.body).where(
                alert_deliveries.c.id.in_(ids)).order_by(alert_deliveries.c.id)).scalars()]
            conn.execute(update(alert_deliveries).where(alert_deliveries.c.id.in_(ids)).values(status="sent"))
        return bodies


def told(bodies: list[dict]) -> list[tuple[str, str]]:
    return [(a["segment"]["country"] if a["segment"] else "(all)", a["status"]) for b in bodies for a in b["alerts"]]


def test_a_global_change_seen_in_every_segment_is_one_alert_with_its_segments_inside(store_url) -> None:
    run = Run(store_url, rules())
    run.window("major", **{c: "major" for c in COUNTRIES})
    bodies = run.seal()
    assert told(bodies) == [("(all)", "firing")]
    alert = bodies[0]["alerts"][0]
    assert [s["segment"]["country"] for s in alert["segments"]] == sorted(COUNTRIES)
    assert {s["status"] for s in alert["segments"]} == {"firing"}
    jsonschema.validate(bodies[0], SCHEMA)
    run.window("major", **{c: "major" for c in COUNTRIES})  # nothing changed: nothing told
    assert run.seal() == []


def test_a_segment_only_drift_still_pages_on_its_own(store_url) -> None:
    run = Run(store_url, rules())
    run.window("none", DE="major", FR="none")
    assert told(run.seal()) == [("DE", "firing")]


def test_segments_that_start_under_a_firing_global_alert_do_not_page_but_are_listed(store_url) -> None:
    run = Run(store_url, rules(repeat_interval="2m"))
    run.window("major")
    assert told(run.seal()) == [("(all)", "firing")]
    run.window("major", DE="major", FR="moderate")
    assert run.seal() == []  # folded: no page for the segments
    run.window("major", DE="major", FR="moderate")
    repeat = run.seal()  # the repeat of the global alert lists them
    assert told(repeat) == [("(all)", "firing")]
    assert [(s["segment"]["country"], s["severity"]) for s in repeat[0]["alerts"][0]["segments"]] == \
        [("DE", "major"), ("FR", "moderate")]


def test_a_pending_segment_is_folded_when_its_global_alert_starts_firing(store_url) -> None:
    run = Run(store_url, rules(group_wait="5m"))
    run.window("none", DE="major")  # queued, not told yet (group_wait)
    run.window("major", DE="major")
    run.i += 5
    assert told(run.seal()) == [("(all)", "firing")]


def test_when_the_global_alert_resolves_its_still_firing_segments_page_on_their_own(store_url) -> None:
    run = Run(store_url, rules())
    run.window("major", DE="major", FR="major")
    assert told(run.seal()) == [("(all)", "firing")]
    for _ in range(2):
        run.window("none", DE="major", FR="none")
        run.seal()
    run.window("none", DE="major", FR="none")  # third clean window of the global view: resolved
    assert sorted(told(run.seal())) == [("(all)", "resolved"), ("DE", "firing")]  # FR resolves, folded and untold


def test_a_segment_told_on_its_own_is_told_its_resolve_even_while_folded(store_url) -> None:
    run = Run(store_url, rules())
    run.window("none", DE="major")
    assert told(run.seal()) == [("DE", "firing")]
    run.window("major", DE="none")  # the global alert fires (DE, told before, is listed as still firing)
    assert told(run.seal()) == [("(all)", "firing"), ("DE", "firing")]
    for _ in range(3):
        run.window("major", DE="none")
    assert told(run.seal()) == [("DE", "resolved"), ("(all)", "firing")]  # where it paged, it resolves


def test_a_route_that_does_not_hear_the_global_alert_gets_the_segment(store_url) -> None:
    r = rules(routes=[{"name": "all", "url": "http://127.0.0.1:1/a", "allow_private": True},
                      {"name": "major-only", "url": "http://127.0.0.1:1/b", "allow_private": True,
                       "matchers": [{"label": "severity", "op": ">=", "value": "major"}]}])
    run = Run(store_url, r)
    run.window("moderate", DE="major")
    bodies = run.seal()
    by_route = {b["route"]: told([b]) for b in bodies}
    assert by_route == {"all": [("(all)", "firing")], "major-only": [("DE", "firing")]}
