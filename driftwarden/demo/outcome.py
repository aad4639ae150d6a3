"""What the demo proved: which injected change was caught, in which window, and any false alarm.

A verdict is one (feature, segment, window): the global view (segment None, ``window_results``)
or one segment of the model (``segment_results``, segment as ``"country=DE"``). "Caught" means the
store holds a moderate or major drift verdict for the changed feature (in the changed segment, for
a change inside one segment; in the global view otherwise) in a window at or after the change's
start; the demo's check wants it within two windows (the start window or the next). A "false
alarm" is a moderate or major verdict that no change explains: a change for all traffic explains
its feature's verdicts in the global view and in every segment from its start on; a change inside
one segment explains only that (feature, segment), so the global view or another segment of that
feature drifting counts as false, as does any verdict on a feature outside the injected ones (or
on an injected feature before its change starts). A "minor" verdict (significant
but small) is counted, never an alarm: the gate's calibrated false-alarm rate is 1% per feature
and window, and the deep test then runs on that same window, so an occasional minor verdict on an
undrifted feature is expected behaviour; alerts are routed from "moderate" up (the default). A
``resolved`` told for a feature whose verdict in that window is still moderate or major drift is a
problem too: an alert is one (feature, segment), and it resolves only after clean windows of its own.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone

from sqlalchemy import Engine, and_, select

from driftwarden.demo.receiver import Webhook
from driftwarden.demo.scenario import Change, Schedule
from driftwarden.schemas.alert_tables import segment_key
from driftwarden.schemas.tables import segment_results, window_counts, window_results

#: A change must be caught in its start window or the next one.
MAX_CATCH_OFFSET = 1
ALARMING = ("moderate", "major")


@dataclass(frozen=True)
class Verdict:
    """One stored (feature, segment, window) verdict; segment None is the global view."""

    window: int
    feature: str
    drifted: bool
    severity: str
    alarm: bool
    gate_psi: float | None
    gate_ks: float | None
    deep_psi: float | None = None
    segment: str | None = None

    @property
    def label(self) -> str:
        """The feature, with its segment in brackets when it has one: ``age [country=DE]``."""
        return self.feature if self.segment is None else f"{self.feature} [{self.segment}]"


@dataclass(frozen=True)
class Catch:
    """How one injected change fared: the first alarming window after its start, relative to it."""

    kind: str
    feature: str
    start_window: int
    description: str
    offset: int | None
    severity: str
    segment: str | None = None

    @property
    def in_time(self) -> bool:
        """Caught within two windows of its start."""
        return self.offset is not None and self.offset <= MAX_CATCH_OFFSET


@dataclass(frozen=True)
class SegmentDrift:
    """One (feature, segment) with moderate/major verdicts: its first such window and how many windows had one;
    ``alone``: windows in which the global view of that feature had no moderate/major verdict."""

    feature: str
    segment: str
    first_window: int
    windows: int
    alone: int


def segment_drifts(rows: list[Verdict]) -> list[SegmentDrift]:
    """Every (feature, segment) that drifted (moderate/major) in some window, by first window then name."""
    global_alarms = {(v.window, v.feature) for v in rows if v.segment is None and v.severity in ALARMING}
    seen: dict[tuple[str, str], list[int]] = {}
    for v in rows:
        if v.segment is not None and v.severity in ALARMING:
            seen.setdefault((v.feature, v.segment), []).append(v.window)
    found = [SegmentDrift(f, s, min(ws), len(ws), sum((w, f) not in global_alarms for w in ws))
             for (f, s), ws in seen.items()]
    return sorted(found, key=lambda d: (d.first_window, d.feature, d.segment))


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
    segment_drifts: list[SegmentDrift] = field(default_factory=list)

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
    """Every stored verdict of the demo's windows (global view, then segments), oldest first."""
    rows = []
    with engine.connect() as conn:
        for table in (window_results, segment_results):
            r = table.c
            segment = r.segment if table is segment_results else None
            query = (select(r.window_start, r.feature, r.drifted, r.severity, r.gate_alarm, r.gate_psi, r.gate_ks,
                            r.deep_psi, *(() if segment is None else (segment,)))
                     .where(and_(r.model == model, r.window_start >= utc(base_ms),
                                 r.window_start < utc(base_ms + windows * window_ms))))
            rows += [Verdict(_index(ws, base_ms, window_ms), f, bool(d), sev, bool(a), psi, ks, deep, *seg)
                     for ws, f, d, sev, a, psi, ks, deep, *seg in conn.execute(query)]
    return sorted(rows, key=lambda v: (v.window, v.segment is not None, v.segment or "", v.feature))


def _index(window_start: datetime, base_ms: int, window_ms: int) -> int:
    if window_start.tzinfo is None:  # SQLite hands naive datetimes back
        window_start = window_start.replace(tzinfo=timezone.utc)
    return (int(window_start.timestamp() * 1000) - base_ms) // window_ms


def catch_of(change: Change, rows: list[Verdict]) -> Catch:
    """The first alarming verdict of the changed (feature, segment) at or after the change's start."""
    hit = next((v for v in rows if v.feature == change.feature and v.segment == change.segment
                and v.window >= change.start_window and v.severity in ALARMING), None)
    return Catch(change.kind, change.feature, change.start_window, change.description,
                 hit.window - change.start_window if hit else None, hit.severity if hit else "not caught",
                 change.segment)


def explained_from(schedule: Schedule, verdict: Verdict) -> int:
    """The first window from which a drift of this (feature, segment) is expected (past the end: never)."""
    starts = [c.start_window for c in schedule.changes if c.feature == verdict.feature
              and (c.segment is None or c.segment == verdict.segment)]
    return min(starts, default=schedule.windows)


def evaluate(schedule: Schedule, rows: list[Verdict], closed: set[int], webhooks: list[Webhook],
             base_ms: int, window_ms: int, received: int, verified: int, rejected: int) -> DemoOutcome:
    """Judge the run: catches, false alarms, alerts in the drift-free period, signatures."""
    unexplained = [v for v in rows if v.window < explained_from(schedule, v)]
    false_alarms = [v for v in unexplained if v.severity in ALARMING]
    minor = sum(1 for v in unexplained if v.severity == "minor")
    first_change_ms = base_ms + min(c.start_window for c in schedule.changes) * window_ms
    early = [f"{a.get('status')} alert for window {a.get('window', {}).get('start')}"
             for w in webhooks for a in w.alerts if _alert_start_ms(a) < first_change_ms]
    outcome = DemoOutcome(schedule.windows, len(closed), [catch_of(c, rows) for c in schedule.changes],
                          false_alarms, minor, early, len(webhooks), received, verified, rejected)
    outcome.segment_drifts = segment_drifts(rows)
    outcome.problems = _problems(outcome) + resolved_while_drifting(webhooks, rows, base_ms, window_ms)
    return outcome


def resolved_while_drifting(webhooks: list[Webhook], rows: list[Verdict], base_ms: int, window_ms: int) -> list[str]:
    """A ``resolved`` told for a (feature, segment) whose verdict in that window is still moderate or major drift."""
    alarming = {(v.window, v.feature, v.segment or "") for v in rows if v.severity in ALARMING}
    found = []
    for w in webhooks:
        for a in w.alerts:
            window = (_alert_start_ms(a) - base_ms) // window_ms
            segment = segment_key(a.get("segment"))
            if a.get("status") == "resolved" and (window, a.get("feature"), segment) in alarming:
                found.append(f"resolved while drifting: {a.get('feature')}{f' [{segment}]' if segment else ''} "
                             f"in window {window}")
    return found


def _alert_start_ms(alert: dict) -> int:
    from driftwarden.schemas.events import parse_event_time

    try:
        return parse_event_time(alert.get("window", {}).get("start"))
    except Exception:  # noqa: BLE001 - an alert without a readable window counts as early: it must be looked at
        return 0


def _problems(o: DemoOutcome) -> list[str]:
    problems = [f"{c.kind} on {c.feature}{f' [{c.segment}]' if c.segment else ''} not caught within "
                f"{MAX_CATCH_OFFSET + 1} windows of its start" for c in o.catches if not c.in_time]
    problems += [f"false alarm: {v.label} {v.severity} in window {v.window}" for v in o.false_alarms]
    problems += [f"alert during the drift-free period: {e}" for e in o.early_alerts]
    if o.rejected:
        problems.append(f"{o.rejected} webhook(s) failed signature verification")
    if o.webhooks == 0:
        problems.append("no verified webhook reached the receiver")
    if o.windows_closed < o.windows_expected:
        problems.append(f"only {o.windows_closed} of {o.windows_expected} windows were judged")
    return problems
