"""What the demo proved: which injected change was caught, in which window, and any false alarm.

"Caught" means the store holds a moderate or major drift verdict for the changed feature in a
window at or after the change's start; the demo's check wants it within two windows (the start
window or the next). A "false alarm" is a moderate or major verdict on a feature outside the
injected ones (or on an injected feature before its change starts). A "minor" verdict (significant
but small) is counted, never an alarm: the gate's calibrated false-alarm rate is 1% per feature
and window, and the deep test then runs on that same window, so an occasional minor verdict on an
undrifted feature is expected behaviour; alerts are routed from "moderate" up (the default). A
``resolved`` told for a feature whose verdict in that window is still moderate or major drift is a
problem too: an alert is one feature, and it resolves only after clean windows of its own.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone

from sqlalchemy import Engine, and_, select

from driftwarden.demo.receiver import Webhook
from driftwarden.demo.scenario import Change, Schedule
from schemas.tables import window_counts, window_results

#: A change must be caught in its start window or the next one.
MAX_CATCH_OFFSET = 1
ALARMING = ("moderate", "major")


@dataclass(frozen=True)
class Verdict:
    """One stored (feature, window) verdict."""

    window: int
    feature: str
    drifted: bool
    severity: str
    alarm: bool
    gate_psi: float | None
    gate_ks: float | None
    deep_psi: float | None = None


@dataclass(frozen=True)
class Catch:
    """How one injected change fared: the first alarming window after its start, relative to it."""

    kind: str
    feature: str
    start_window: int
    description: str
    offset: int | None
    severity: str

    @property
    def in_time(self) -> bool:
        """Caught within two windows of its start."""
        return self.offset is not None and self.offset <= MAX_CATCH_OFFSET


@dataclass
class DemoOutcome:
    """Everything the summary shows and ``--check`` judges."""

    windows_expected: int
    windows_closed: int
    catches: list[Catch]
    false_alarms: list[Verdict]
    minor_elsewhere: int
    early_alerts: list[str]
    webhooks: int
    received: int
    verified: int
    rejected: int
    problems: list[str] = field(default_factory=list)
    interrupted: bool = False

    @property
    def passed(self) -> bool:
        """True when the demo's own check holds."""
        return not self.problems

    def to_dict(self) -> dict:
        """A JSON-ready form (written to summary.json)."""
        doc = asdict(self)
        doc["catches"] = [{**asdict(c), "in_time": c.in_time} for c in self.catches]
        doc["passed"] = self.passed
        return doc


def utc(epoch_ms: int) -> datetime:
    """Epoch milliseconds as an aware UTC datetime."""
    return datetime.fromtimestamp(epoch_ms / 1000, tz=timezone.utc)


def closed_windows(engine: Engine, model: str, base_ms: int, window_ms: int, windows: int) -> set[int]:
    """0-based indices of the demo's windows the job has already judged."""
    c = window_counts.c
    query = select(c.window_start).where(and_(c.model == model, c.window_start >= utc(base_ms),
                                              c.window_start < utc(base_ms + windows * window_ms)))
    with engine.connect() as conn:
        return {_index(ws, base_ms, window_ms) for (ws,) in conn.execute(query)}


def verdicts(engine: Engine, model: str, base_ms: int, window_ms: int, windows: int) -> list[Verdict]:
    """Every stored verdict of the demo's windows, oldest first."""
    r = window_results.c
    query = (select(r.window_start, r.feature, r.drifted, r.severity, r.gate_alarm, r.gate_psi, r.gate_ks, r.deep_psi)
             .where(and_(r.model == model, r.window_start >= utc(base_ms),
                         r.window_start < utc(base_ms + windows * window_ms)))
             .order_by(r.window_start, r.feature))
    with engine.connect() as conn:
        return [Verdict(_index(ws, base_ms, window_ms), f, bool(d), s, bool(a), psi, ks, deep)
                for ws, f, d, s, a, psi, ks, deep in conn.execute(query)]


def _index(window_start: datetime, base_ms: int, window_ms: int) -> int:
    if window_start.tzinfo is None:  # SQLite hands naive datetimes back
        window_start = window_start.replace(tzinfo=timezone.utc)
    return (int(window_start.timestamp() * 1000) - base_ms) // window_ms


def catch_of(change: Change, rows: list[Verdict]) -> Catch:
    """The first alarming verdict of the changed feature at or after the change's start."""
    hit = next((v for v in rows if v.feature == change.feature and v.window >= change.start_window
                and v.severity in ALARMING), None)
    return Catch(change.kind, change.feature, change.start_window, change.description,
                 hit.window - change.start_window if hit else None, hit.severity if hit else "not caught")


def evaluate(schedule: Schedule, rows: list[Verdict], closed: set[int], webhooks: list[Webhook],
             base_ms: int, window_ms: int, received: int, verified: int, rejected: int) -> DemoOutcome:
    """Judge the run: catches, false alarms, alerts in the drift-free period, signatures."""
    starts = {c.feature: c.start_window for c in schedule.changes}
    false_alarms = [v for v in rows if v.severity in ALARMING and v.window < starts.get(v.feature, schedule.windows)]
    minor = sum(1 for v in rows if v.severity == "minor" and v.window < starts.get(v.feature, schedule.windows))
    first_change_ms = base_ms + min(starts.values()) * window_ms
    early = [f"{a.get('status')} alert for window {a.get('window', {}).get('start')}"
             for w in webhooks for a in w.alerts if _alert_start_ms(a) < first_change_ms]
    outcome = DemoOutcome(schedule.windows, len(closed), [catch_of(c, rows) for c in schedule.changes],
                          false_alarms, minor, early, len(webhooks), received, verified, rejected)
    outcome.problems = _problems(outcome) + resolved_while_drifting(webhooks, rows, base_ms, window_ms)
    return outcome


def resolved_while_drifting(webhooks: list[Webhook], rows: list[Verdict], base_ms: int, window_ms: int) -> list[str]:
    """A ``resolved`` told for a feature whose verdict in that window is still moderate or major drift."""
    alarming = {(v.window, v.feature) for v in rows if v.severity in ALARMING}
    return [f"resolved while drifting: {a.get('feature')} in window {(_alert_start_ms(a) - base_ms) // window_ms}"
            for w in webhooks for a in w.alerts if a.get("status") == "resolved"
            and ((_alert_start_ms(a) - base_ms) // window_ms, a.get("feature")) in alarming]


def _alert_start_ms(alert: dict) -> int:
    from schemas.events import parse_event_time

    try:
        return parse_event_time(alert.get("window", {}).get("start"))
    except Exception:  # noqa: BLE001 - an alert without a readable window counts as early: it must be looked at
        return 0


def _problems(o: DemoOutcome) -> list[str]:
    problems = [f"{c.kind} on {c.feature} not caught within {MAX_CATCH_OFFSET + 1} windows of its start"
                for c in o.catches if not c.in_time]
    problems += [f"false alarm: {v.feature} {v.severity} in window {v.window}" for v in o.false_alarms]
    problems += [f"alert during the drift-free period: {e}" for e in o.early_alerts]
    if o.rejected:
        problems.append(f"{o.rejected} webhook(s) failed signature verification")
    if o.webhooks == 0:
        problems.append("no verified webhook reached the receiver")
    if o.windows_closed < o.windows_expected:
        problems.append(f"only {o.windows_closed} of {o.windows_expected} windows were judged")
    return problems
