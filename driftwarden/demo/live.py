"""The demo's terminal view: a rich live panel while it runs, or one line per window with ``--no-live``."""

from __future__ import annotations

from dataclasses import dataclass, field

from rich.console import Console, Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from driftwarden.demo.outcome import ALARMING, Verdict
from driftwarden.demo.scenario import FEATURE_KINDS, Schedule

_STYLE = {"none": "dim", "minor": "yellow", "moderate": "bold dark_orange", "major": "bold red"}


@dataclass
class Snapshot:
    """What the view shows at one moment."""

    phase: str
    elapsed_s: float
    events_sent: int
    events_per_s: float
    windows_closed: int
    verdicts: list[Verdict]
    webhooks_verified: int
    webhooks_rejected: int
    recent_alerts: list[str] = field(default_factory=list)


def _latest(verdicts: list[Verdict]) -> tuple[int | None, dict[tuple[str, str | None], Verdict]]:
    if not verdicts:
        return None, {}
    window = max(v.window for v in verdicts)
    return window, {(v.feature, v.segment): v for v in verdicts if v.window == window}


def segment_only(rows: list[Verdict]) -> list[Verdict]:
    """The drifted segment verdicts of one window whose feature the global view does not call drifted."""
    global_drift = {v.feature for v in rows if v.segment is None and v.drifted}
    return [v for v in rows if v.segment is not None and v.drifted and v.feature not in global_drift]


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def render(snap: Snapshot, schedule: Schedule) -> Group:
    """The live panel: counters, the schedule, the latest window's per-feature scores, recent alerts."""
    window, latest = _latest(snap.verdicts)
    alarms = sum(v.alarm for v in snap.verdicts)
    drifted = sum(v.severity in ALARMING for v in snap.verdicts)
    head = Text.assemble(
        (f"{snap.phase}", "bold cyan"), f"  {snap.elapsed_s:5.0f}s   events sent {snap.events_sent:,} ",
        f"({snap.events_per_s:,.0f}/s)   windows closed {snap.windows_closed}/{schedule.windows}   ",
        f"gate alarms {alarms}   deep checks -> moderate/major {drifted}   ",
        (f"alerts delivered {snap.webhooks_verified}", "bold green"),
        (f"  rejected {snap.webhooks_rejected}" if snap.webhooks_rejected else "", "bold red"))
    changes = {(c.feature, c.segment): c for c in schedule.changes}
    table = Table(title=f"latest closed window: {'-' if window is None else window}", expand=False, box=None,
                  caption=Text("psi, ks: gate scores (* categorical: its chi2/JS gate scores are not stored); "
                               "feature [segment]: that segment's own verdict"))
    for col in ("feature", "psi", "ks", "gate", "deep psi", "verdict", "injected"):
        table.add_column(col, no_wrap=True)
    rows = [(name, None, kind) for name, kind in {**FEATURE_KINDS, "prediction": "numeric"}.items()]
    rows += [(c.feature, c.segment, FEATURE_KINDS.get(c.feature, "numeric")) for c in schedule.changes if c.segment]
    for name, segment, kind in rows:
        v = latest.get((name, segment))
        change = changes.get((name, segment))
        injected = f"{change.kind} @w{change.start_window}" if change else ""
        sev = v.severity if v else "-"
        label = (name if kind == "numeric" else f"{name}*") + (f" [{segment}]" if segment else "")
        table.add_row(Text(label), _num(v.gate_psi if v else None), _num(v.gate_ks if v else None),
                      "ALARM" if v and v.alarm else "", _num(v.deep_psi if v else None),
                      Text(sev, style=_STYLE.get(sev, "")), Text(injected))
    local = segment_only(list(latest.values()))
    segments = Text.assemble("drifted only in a segment: ", *(
        Text.assemble((v.label, "bold"), (f" {v.severity}", _STYLE.get(v.severity, "")), "  ") for v in local)
        if local else ("none", "dim"))
    alerts = Text("\n".join(snap.recent_alerts[-4:]) or "no alert yet", style="green")
    return Group(head, table, segments, Panel(alerts, title="webhooks received (verified)", expand=False))


def schedule_table(schedule: Schedule, base_label: str, window_s: float, speed: float) -> Table:
    """The announced drift schedule, in windows, event time and wall time."""
    table = Table(title=f"drift schedule ({schedule.windows} windows of {window_s:g} s event time, "
                        f"event clock x{speed:g}; window 0 starts {base_label})")
    for col in ("from window", "wall time", "change", "feature", "segment"):
        table.add_column(col)
    table.add_row("0", "0 s", f"no drift ({schedule.clean_windows} windows)", "-", "-")
    for c in schedule.changes:
        table.add_row(str(c.start_window), f"{c.start_window * window_s / speed:.0f} s", Text(c.description),
                      Text(c.feature), Text(c.segment or "all traffic"))
    return table


def window_line(window: int, verdicts: list[Verdict], schedule: Schedule) -> str:
    """One line for a newly closed window (the ``--no-live`` output)."""
    rows = [v for v in verdicts if v.window == window]
    hot = [f"{v.feature} ({v.severity})" for v in rows if v.drifted and v.segment is None]
    local = [f"{v.label} ({v.severity})" for v in segment_only(rows)]
    active = ", ".join(c.kind for c in schedule.active(window)) or "no drift"
    alarms = sum(v.alarm for v in rows if v.segment is None)
    return (f"window {window:3d} [{active}]: {alarms} gate alarm(s); drifted: {', '.join(hot) or '-'}; "
            f"only in a segment: {', '.join(local) or '-'}")


def print_line(console: Console, text: str) -> None:
    """Print one plain progress line."""
    console.print(text, highlight=False, markup=False, soft_wrap=True)
