"""The cells of the HTML report's heat map: one per (model, segment, feature), its verdicts over every window.

A cell's state is what the page leads with: ``drifted`` (in at least one window; its colour is the worst
severity), ``alarm`` (the gate fired in some window, the deep tests never confirmed it: the gate's
false-alarm budget at work), ``quiet`` (judged, no gate alarm in any window) or ``not judged`` (no window had
enough values, a reference, or judging raised). The global view of a feature is the cell whose segment is
None. Built from the JSON report alone (version 5: segment verdicts are feature entries with a ``segment``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from driftwarden.core.records import severity_rank
from driftwarden.pipeline.segments import OTHER
from driftwarden.schemas.alert_tables import segment_key

DRIFTED, ALARM, QUIET, NOT_JUDGED = "drifted", "alarm", "quiet", "not judged"
#: A gate score present in an entry means the window was judged for that feature.
_GATE_SCORES = ("ks", "psi", "emd", "new_share")


def entry_state(entry: dict) -> str:
    """What one window's verdict of one (feature, segment) says: drifted, alarm, quiet or not judged."""
    if entry.get("error"):
        return NOT_JUDGED
    if entry["drifted"]:
        return DRIFTED
    if entry["gate"]["alarm"]:
        return ALARM
    return QUIET if any(entry["gate"].get(k) is not None for k in _GATE_SCORES) else NOT_JUDGED


@dataclass
class Cell:
    """One (model, segment, feature) over the report's windows."""

    model: str
    segment: dict | None
    feature: str
    kind: str = ""
    windows: int = 0
    judged: int = 0
    alarms: int = 0
    drifted: int = 0
    errors: int = 0
    severity: str = "none"  # the worst severity of a drifted window
    first_drifted: str | None = None
    max_psi: float | None = None
    max_ks: float | None = None
    min_p_adjusted: float | None = None
    notable: list[tuple[str, dict]] = field(default_factory=list)  # (window start, entry) of windows not quiet

    @property
    def state(self) -> str:
        """drifted, alarm, quiet or not judged (see the module docstring)."""
        if self.drifted:
            return DRIFTED
        if self.alarms:
            return ALARM
        return QUIET if self.judged else NOT_JUDGED

    @property
    def key(self) -> tuple[str, str, str]:
        """(model, segment text, feature): what tells two cells apart."""
        return self.model, self.segment_text, self.feature

    @property
    def segment_text(self) -> str:
        """The segment as ``key=value`` pairs, or "all traffic" for the global view."""
        return segment_key(self.segment) if self.segment else "all traffic"

    def add(self, window_start: str, entry: dict) -> None:
        """Fold one window's entry into the cell."""
        state = entry_state(entry)
        self.kind = self.kind or entry.get("kind", "")
        self.windows += 1
        self.errors += bool(entry.get("error"))
        self.judged += state != NOT_JUDGED
        self.alarms += bool(entry["gate"]["alarm"])
        if state != QUIET:
            self.notable.append((window_start, entry))
        if entry["drifted"]:
            self.drifted += 1
            self.first_drifted = self.first_drifted or window_start
            if severity_rank(entry["severity"]) > severity_rank(self.severity):
                self.severity = entry["severity"]
        self._fold_scores(entry)

    def _fold_scores(self, entry: dict) -> None:
        deep = entry["deep"] or {}
        psi = deep.get("psi") if deep.get("psi") is not None else entry["gate"]["psi"]
        ks = deep.get("ks_stat") if deep.get("ks_stat") is not None else entry["gate"]["ks"]
        p = entry.get("p_adjusted", deep.get("p_adjusted"))
        self.max_psi = _larger(self.max_psi, psi)
        self.max_ks = _larger(self.max_ks, ks)
        if p is not None and (self.min_p_adjusted is None or p < self.min_p_adjusted):
            self.min_p_adjusted = p


def _larger(current: float | None, value: float | None) -> float | None:
    if value is None:
        return current
    return value if current is None or value > current else current


def report_cells(doc: dict) -> list[Cell]:
    """Every (model, segment, feature) of the report, by model, the global view first, then segments by name
    (the other segment last); features in the order the windows list them."""
    cells: dict[tuple[str, str, str], Cell] = {}
    features: dict[str, list[str]] = {}
    for window in sorted(doc["windows"], key=lambda w: (w["model"], w["window_start"])):
        for entry in window["features"]:
            segment = entry.get("segment")
            key = (window["model"], segment_key(segment) if segment else "", entry["name"])
            if key not in cells:
                cells[key] = Cell(window["model"], dict(segment) if segment else None, entry["name"])
                order = features.setdefault(window["model"], [])
                if entry["name"] not in order:
                    order.append(entry["name"])
            cells[key].add(window["window_start"], entry)
    return sorted(cells.values(), key=lambda c: (c.model, c.segment is not None, OTHER in (c.segment or {}).values(),
                                                 segment_key(c.segment), features[c.model].index(c.feature)))


def heat_map(cells: list[Cell], model: str) -> tuple[list[str], list[str], dict[tuple[str, str], Cell]]:
    """One model's grid: its segment rows (all traffic first), its feature columns, and the cell of each pair."""
    mine = [c for c in cells if c.model == model]
    rows = list(dict.fromkeys(c.segment_text for c in mine))
    columns = list(dict.fromkeys(c.feature for c in mine))
    return rows, columns, {(c.segment_text, c.feature): c for c in mine}


def drifted_runs(starts: list[str], window_ms: int) -> list[tuple[str, str, int]]:
    """Consecutive windows (RFC 3339 starts, ``window_ms`` apart) as (first start, last start, windows).

    >>> runs = drifted_runs(["2026-01-01T00:00:10Z", "2026-01-01T00:00:00Z", "2026-01-01T00:00:30Z"], 10_000)
    >>> runs
    [('2026-01-01T00:00:00Z', '2026-01-01T00:00:10Z', 2), ('2026-01-01T00:00:30Z', '2026-01-01T00:00:30Z', 1)]
    """
    runs: list[list] = []
    previous = None
    for start in sorted(starts):
        ms = datetime.fromisoformat(start.replace("Z", "+00:00")).timestamp() * 1000
        if previous is not None and abs(ms - previous - window_ms) < 1:
            runs[-1][1:] = [start, runs[-1][2] + 1]
        else:
            runs.append([start, start, 1])
        previous = ms
    return [tuple(run) for run in runs]
